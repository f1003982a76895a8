#!/usr/bin/env sh
# Peer tools for benchmarks/prl.py (linkage: Splink, recordlinkage), benchmarks/attribute.py
# (pycanon) and benchmarks/risk_models.py (anonymeter, SDMetrics), in their own virtual environment
# (benchmarks/.venv-peers): they are never sdcdist dependencies.
#   sh benchmarks/peers/setup.sh [python]
set -eu
here=$(cd "$(dirname "$0")/.." && pwd)
py=${1:-python3}
"$py" -m venv "$here/.venv-peers"
"$here/.venv-peers/bin/pip" install -q --upgrade pip
"$here/.venv-peers/bin/pip" install -q "splink>=4" duckdb "recordlinkage==0.16" "pycanon==1.3.6" "anonymeter==1.1.0" "sdmetrics==0.32.0" pandas numpy
"$here/.venv-peers/bin/python" -c "import splink, recordlinkage, duckdb; print('splink', splink.__version__, 'recordlinkage', recordlinkage.__version__, 'duckdb', duckdb.__version__)"
"$here/.venv-peers/bin/python" -c "import pycanon; print('pycanon', pycanon.__version__)"
"$here/.venv-peers/bin/python" -c "import anonymeter, sdmetrics; from importlib.metadata import version; print('anonymeter', version('anonymeter'), 'sdmetrics', version('sdmetrics'))"
