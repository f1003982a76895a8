#!/usr/bin/env sh
# Peer tools for the benchmarks, in their own virtual environments: they are never sdcdist
# dependencies.
#   benchmarks/.venv-peers        Splink, recordlinkage (benchmarks/prl.py), pycanon
#                                 (benchmarks/attribute.py)
#   benchmarks/.venv-peers-synth  anonymeter and SDMetrics (benchmarks/risk_models.py); they
#                                 pin numpy and pandas versions that recordlinkage and pycanon
#                                 cannot share
#   benchmarks/.venv-peers-sdv    SDV and DataSynthesizer (benchmarks/synthetic.py: the
#                                 anchors of copula and privbayes); SDV pulls in torch
#   sh benchmarks/peers/setup.sh [python]
#   sh benchmarks/peers/setup.sh synthpop     R's synthpop only (see install_synthpop below)
set -eu
here=$(cd "$(dirname "$0")/.." && pwd)

# synthpop (R; the anchor of sdcdist's `cart`, benchmarks/peers/synthpop_cart.R) into a
# library of its own, never an sdcdist dependency. Its dependencies come from Debian's
# r-cran-* packages; synthpop and the ones Debian lacks (mipfp, which needs cmm; broman)
# are built from their source tarballs in $SYNTHPOP_SRC, each made from the package's
# CRAN source repository (github.com/cran/<name>) with
#   git archive --prefix=<name>/ -o $SYNTHPOP_SRC/<name>.tar.gz HEAD
# (synthpop 1.9-2, mipfp 3.2.1, cmm 1.0, broman 0.96). Idempotent: a package already in
# the library at that version is left alone. Then: R_LIBS=$SYNTHPOP_LIB Rscript ...
install_synthpop() {
    lib=${SYNTHPOP_LIB:-${R_LIBS:-$HOME/Rlib}}
    src=${SYNTHPOP_SRC:-$HOME/synthpop-src}
    if ! command -v Rscript >/dev/null 2>&1 || ! dpkg -s r-cran-rpart >/dev/null 2>&1 \
        || ! dpkg -s r-cran-party >/dev/null 2>&1; then
        apt-get update -q
        DEBIAN_FRONTEND=noninteractive apt-get install -y -q r-base-core r-cran-data.table \
            r-cran-lattice r-cran-mass r-cran-nnet r-cran-ggplot2 r-cran-rpart r-cran-party \
            r-cran-foreign r-cran-plyr r-cran-proto r-cran-polspline r-cran-randomforest \
            r-cran-ranger r-cran-classint r-cran-survival r-cran-stringr r-cran-rmutil \
            r-cran-forcats r-cran-rsolnp r-cran-numderiv
    fi
    mkdir -p "$lib"
    for pkg in cmm:1.0 mipfp:3.2.1 broman:0.96 synthpop:1.9.2; do
        name=${pkg%%:*}; want=${pkg#*:}
        have=$(R_LIBS="$lib" Rscript -e "cat(tryCatch(format(packageVersion('$name', lib.loc = '$lib')), error = function(e) ''))")
        if [ "$have" = "$want" ]; then
            echo "$name $have already in $lib"
            continue
        fi
        [ -f "$src/$name.tar.gz" ] || { echo "missing $src/$name.tar.gz (see above)" >&2; return 1; }
        R_LIBS="$lib" R CMD INSTALL --no-docs --no-multiarch -l "$lib" "$src/$name.tar.gz"
    done
    R_LIBS="$lib" Rscript -e "cat('synthpop', format(packageVersion('synthpop')), 'rpart', format(packageVersion('rpart')), '\\n')"
}

if [ "${1:-}" = synthpop ]; then
    install_synthpop
    exit 0
fi

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
"$py" -m venv "$here/.venv-peers-sdv"
"$here/.venv-peers-sdv/bin/pip" install -q --upgrade pip
"$here/.venv-peers-sdv/bin/pip" install -q "sdv==2.0.0" "DataSynthesizer==0.1.13" "sdmetrics==0.32.0"
"$here/.venv-peers-sdv/bin/python" -c "from importlib.metadata import version as v; print('sdv', v('sdv'), 'DataSynthesizer', v('DataSynthesizer'), 'sdmetrics', v('sdmetrics'))"

# R and sdcMicro (benchmarks/risk_household.py, risk_suda2.py, attribute.py, mixed.py) are
# set up by hand, never by this script, and never as sdcdist dependencies. On Debian 12:
#   apt-get install r-base-core r-cran-data.table r-cran-rcpp r-cran-mass r-cran-robustbase \
#     r-cran-e1071 r-cran-car r-cran-cluster r-cran-ggplot2 r-cran-knitr r-cran-xtable \
#     r-cran-shiny r-cran-dt r-cran-rmarkdown r-cran-haven r-cran-vim r-cran-httr \
#     r-cran-jsonlite r-cran-rhandsontable
# then sdcMicro from its source (github.com/sdcTools/sdcMicro) into a library of its own:
#   R CMD INSTALL --no-docs -l "$HOME/Rlib" sdcMicro      # then export R_LIBS="$HOME/Rlib"
# Debian has no r-cran-prettydoc: its one import (html_pretty, for sdcMicro's report
# templates) can be deleted from sdcMicro's DESCRIPTION and NAMESPACE before installing; the
# benchmarked functions (measure_risk, modRisk, suda2, ldiversity, freqCalc) do not use it.
