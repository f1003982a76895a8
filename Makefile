# The two commands of the README. Both create (or reuse) .venv and install sdcdist into it.
PYTHON ?= python3
VENV   ?= .venv
PY     := $(VENV)/bin/python
STAMP  := $(VENV)/.sdcdist-installed
# test processes (pytest-xdist); each file runs whole in one of them, the longest
# first (tests/conftest.py orders them). Three on two cores: many tests wait on
# subprocesses, clusters and the first compile of kernels, and a third process fills
# those waits (a fresh clone's .ci/run: 14.0 min against 16.1-16.9 min with two)
TEST_PROCS ?= 3

.PHONY: demo test install bench clean

# PIP_UPGRADE= skips upgrading the venv's pip (any pip of Python >= 3.11 installs sdcdist;
# .ci/run sets it: a fresh install, once)
PIP_UPGRADE ?= 1
# INSTALLER=uv installs the same packages from the same index with uv (put into the venv by
# pip first), which downloads and unpacks them in parallel: about a third of pip's time on
# a fresh machine (.ci/run uses it)
INSTALLER ?= pip

$(STAMP): pyproject.toml
	@$(PYTHON) -c 'import sys; sys.exit(0 if sys.version_info >= (3, 11) else "sdcdist needs Python >= 3.11")'
	@test -x $(PY) || $(PYTHON) -m venv $(VENV)
	$(if $(PIP_UPGRADE),$(PY) -m pip install --quiet --upgrade pip)
ifeq ($(INSTALLER),uv)
	$(PY) -m pip install --quiet uv
	$(VENV)/bin/uv pip install --quiet --python $(PY) --compile-bytecode -e '.[test]'
else
	$(PY) -m pip install --quiet -e '.[test]'
endif
	@touch $(STAMP)

install: $(STAMP)

demo: $(STAMP)
	$(VENV)/bin/sdcdist audit examples/demo.yaml --out demo-output/demo.zarr --overwrite
	$(VENV)/bin/sdcdist report demo-output/demo.zarr --by Score2 --csv demo-output/ranking.csv --overwrite
	$(VENV)/bin/sdcdist plot demo-output/demo.zarr --risk DLD --loss IL_S2 --out demo-output/tradeoff.png --overwrite
	@echo "cube: demo-output/demo.zarr   table: demo-output/ranking.csv   plot: demo-output/tradeoff.png"

# The tests run numpy's SIMD paths and OpenBLAS's kernels at the AVX2 level on every x86-64
# machine: their AVX-512 paths round a few results differently in the last bit (numpy's
# log and exp, BLAS products), and the example cubes' fingerprints are checked bit for bit.
# `import sdcdist` pins them itself (sdcdist/simd); pytest imports numpy first, so the
# test processes get the same pins, printed by sdcdist.simd, in their environment (zarr's
# pytest plugin loads numpy before any conftest runs)
TEST_ENV ?= $(shell $(PY) -m sdcdist.simd --env)

test: $(STAMP)
	$(TEST_ENV) $(PY) -m pytest -q -n $(TEST_PROCS) --dist loadfile --no-loadscope-reorder

bench: $(STAMP)
	@for b in benchmarks/*.py; do \
	  case $$b in */attribute.py|*/risk_suda2.py|*/risk_household.py|*/risk_anonymeter.py|*/risk_synthetic.py) continue;; esac; \
	  echo "== $$b"; $(PY) $$b || exit 1; done   # risk_models.py runs the risk_* parts

clean:
	rm -rf demo-output .pytest_cache
