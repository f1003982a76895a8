#!/usr/bin/env sh
# Peer tools for benchmarks/prl.py (linkage) and benchmarks/attribute.py (pycanon), in their
# own virtual environment
# (benchmarks/.venv-peers): they are never sdcdist dependencies.
#   sh benchmarks/peers/setup.sh [python]
set -eu
here=$(cd "$(dirname "$0")/.." && pwd)
py=${1:-python3}
"$py" -m venv "$here/.venv-peers"
"$here/.venv-peers/bin/pip" install -q --upgrade pip
"$here/.venv-peers/bin/pip" install -q "splink>=4" duckdb "recordlinkage==0.16" "pycanon==1.3.6" pandas numpy
"$here/.venv-peers/bin/python" -c "import splink, recordlinkage, duckdb; print('splink', splink.__version__, 'recordlinkage', recordlinkage.__version__, 'duckdb', duckdb.__version__)"
"$here/.venv-peers/bin/python" -c "import pycanon; print('pycanon', pycanon.__version__)"
