#!/usr/bin/env sh
# Peer tools for the benchmarks, in their own virtual environments: they are never sdcdist
# dependencies.
#   benchmarks/.venv-peers        Splink, recordlinkage (benchmarks/prl.py), pycanon
#                                 (benchmarks/attribute.py)
#   benchmarks/.venv-peers-synth  anonymeter and SDMetrics (benchmarks/risk_models.py); they
#                                 pin numpy and pandas versions that recordlinkage and pycanon
#                                 cannot share
#   sh benchmarks/peers/setup.sh [python]
set -eu
here=$(cd "$(dirname "$0")/.." && pwd)
py=${1:-python3}
"$py" -m venv "$here/.venv-peers"
"$here/.venv-peers/bin/pip" install -q --upgrade pip
"$here/.venv-peers/bin/pip" install -q "splink>=4" duckdb "recordlinkage==0.16" "pycanon==1.3.6" pandas numpy
"$here/.venv-peers/bin/python" -c "import splink, recordlinkage, duckdb; print('splink', splink.__version__, 'recordlinkage', recordlinkage.__version__, 'duckdb', duckdb.__version__)"
"$here/.venv-peers/bin/python" -c "import pycanon; print('pycanon', pycanon.__version__)"
"$py" -m venv "$here/.venv-peers-synth"
"$here/.venv-peers-synth/bin/pip" install -q --upgrade pip
"$here/.venv-peers-synth/bin/pip" install -q "anonymeter==1.1.0" "sdmetrics==0.32.0"
"$here/.venv-peers-synth/bin/python" -c "from importlib.metadata import version as v; print('anonymeter', v('anonymeter'), 'sdmetrics', v('sdmetrics'))"
