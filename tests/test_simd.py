"""The SIMD code paths are pinned in every process sdcdist starts (sdcdist/simd).

A cube must not depend on the CPU: the pinned processes run numpy's and OpenBLAS's AVX2
paths whatever the environment they were started in. The subprocesses below start from
an environment without the pins, as a user's shell has; on a CPU with AVX-512 (where the
unpinned paths differ) they show that the cube and the workers' paths are the pinned ones.
"""

from __future__ import annotations

import json
import os
import shlex
import subprocess
import sys
from pathlib import Path

import pytest

from sdcdist import simd

ROOT = Path(__file__).resolve().parents[1]
PY = sys.executable

#: a small audit whose PS, PS2 and IL differ in their last bits between numpy's AVX-512
#: and AVX2 paths (logistic fits: log, exp and BLAS products)
SPEC = """\
name: simd
seed: 20261126
dataset:
  name: incomes
  synthetic: {rows: 300, columns: 4, seed: 7}
methods:
  - name: noise
    params: [0.1]
replicates: 1
metrics: [IL, PS, PS2]
"""


def _env(pinned: bool) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if k not in simd.PIN_ENV}
    env["PYTHONPATH"] = os.pathsep.join([str(ROOT), env.get("PYTHONPATH", "")]).rstrip(os.pathsep)
    if pinned:
        env.update(simd.PIN_ENV)
    return env


def _run(code: str, env: dict[str, str], *args: str) -> subprocess.CompletedProcess:
    return subprocess.run([PY, "-c", code, *args], env=env, capture_output=True, text=True,
                          timeout=120, cwd=ROOT)


def test_pin_env_names_the_targets_numpy_knows():
    """The disabled names are dispatch targets of the installed numpy (else it ignores them
    with an ImportWarning), and the pinned process runs none of the AVX-512 ones."""
    if not simd.PIN_ENV:
        pytest.skip("no pins off x86-64 or without AVX2")
    code = ("import warnings; warnings.simplefilter('error', ImportWarning)\n"
            "import numpy\n"
            "try:\n    from numpy._core import _multiarray_umath as mu\n"
            "except ImportError:\n    from numpy.core import _multiarray_umath as mu\n"
            "import json; print(json.dumps(mu.__cpu_dispatch__))")
    r = _run(code, _env(pinned=True))
    assert r.returncode == 0, r.stderr
    dispatch = set(json.loads(r.stdout))
    assert set(simd.PIN_ENV["NPY_DISABLE_CPU_FEATURES"].split()) <= dispatch
    assert simd.PIN_ENV["OPENBLAS_CORETYPE"] == "Haswell"


def test_env_flag_prints_the_pins():
    r = subprocess.run([PY, "-m", "sdcdist.simd", "--env"], env=_env(pinned=False),
                       capture_output=True, text=True, timeout=60, cwd=ROOT)
    assert r.returncode == 0 and r.stderr == "", r.stderr
    words = dict(w.split("=", 1) for w in shlex.split(r.stdout))
    assert words == simd.PIN_ENV


def test_makefile_and_image_use_the_pins():
    assert "TEST_ENV ?= $(shell $(PY) -m sdcdist.simd --env)" in (ROOT / "Makefile").read_text()
    docker = (ROOT / "deploy" / "Dockerfile").read_text().replace("\\\n", " ")
    for k, v in simd.pin_env_for(numpy_version=(2, 4)).items():
        assert f'{k}="{v}"' in docker or f"{k}={v}" in docker, k


def test_import_sdcdist_pins_before_numpy():
    """`import sdcdist` in a fresh interpreter pins the paths numpy then takes."""
    r = _run("import sdcdist, json\nfrom sdcdist.simd import code_paths\n"
             "print(json.dumps(code_paths()))", _env(pinned=False))
    assert r.returncode == 0, r.stderr
    paths = json.loads(r.stdout)
    assert paths["pinned"], paths
    assert not [t for t in paths["numpy_simd"] if "512" in t or t == "X86_V4"]


def test_numpy_first_is_detected_and_warned():
    """numpy imported before sdcdist keeps its paths: sdcdist says which when unpinned."""
    r = _run("import numpy, warnings, json\nwarnings.simplefilter('always')\n"
             "with warnings.catch_warnings(record=True) as w:\n    import sdcdist\n"
             "from sdcdist.simd import code_paths\n"
             "print(json.dumps([code_paths(), [str(x.category.__name__) for x in w]]))",
             _env(pinned=False))
    assert r.returncode == 0, r.stderr
    paths, warned = json.loads(r.stdout)
    assert paths["pinned"] == ("SimdWarning" not in warned)
    assert paths["pinned"] or ("X86_V4" in paths["numpy_simd"]
                               or "AVX512_SKX" in paths["numpy_simd"]
                               or any(b["architecture"] != "Haswell" for b in paths["blas"]))


_AUDIT = """\
import json, sys
from sdcdist.audit import run_audit
from sdcdist.testing import cube_fingerprints
from sdcdist.cube import open_cube
run_audit(sys.argv[1], sys.argv[2], overwrite=True)
print(json.dumps([cube_fingerprints(sys.argv[2]),
                  json.loads(open_cube(sys.argv[2]).attrs["code_paths"])]))
"""


@pytest.mark.slow
def test_example_fingerprints_equal_with_and_without_pins(tmp_path):
    """The same cube from a shell with the pins and from one without them."""
    spec = tmp_path / "simd.yaml"
    spec.write_text(SPEC)
    got = {}
    for pinned in (True, False):
        r = _run(_AUDIT, _env(pinned), str(spec), str(tmp_path / f"{pinned}.zarr"))
        assert r.returncode == 0, r.stderr
        got[pinned] = json.loads(r.stdout)
    assert got[True][0] == got[False][0]
    assert {"IL", "PS", "PS2"} <= set(got[True][0])
    for fp, paths in got.values():
        assert paths and all(p["pinned"] for p in paths), paths


_CLUSTER = """\
import json
from sdcdist.cli._common import ClusterOptions, cluster
from sdcdist.simd import code_paths, PIN_ENV
import os
def probe():
    return {"env": {k: os.environ.get(k) for k in PIN_ENV}, "paths": code_paths()}
with cluster(ClusterOptions(workers=1), quiet=True) as client:
    print(json.dumps(list(client.run(probe).values())))
"""


@pytest.mark.slow
def test_local_cluster_workers_have_the_pins():
    """A worker of the LocalCluster the CLI starts runs with the pins and on their paths."""
    r = _run(_CLUSTER, _env(pinned=False))
    assert r.returncode == 0, r.stderr
    (worker,) = json.loads(r.stdout)
    assert worker["env"] == simd.PIN_ENV
    assert worker["paths"]["pinned"], worker["paths"]


def test_pin_merges_with_the_users_choice():
    env = {"NPY_DISABLE_CPU_FEATURES": "AVX512_SPR FOO", "OPENBLAS_CORETYPE": "Zen"}
    simd.pin(env)
    if simd.PIN_ENV:
        names = env["NPY_DISABLE_CPU_FEATURES"].split()
        assert names[:2] == ["AVX512_SPR", "FOO"]
        assert set(simd.PIN_ENV["NPY_DISABLE_CPU_FEATURES"].split()) <= set(names)
        assert env["OPENBLAS_CORETYPE"] == "Zen"     # the user's, reported by check()
        haswell = {"library": "openblas", "architecture": "Haswell"}
        zen = {"library": "openblas", "architecture": "Zen"}
        assert not simd.is_pinned({"numpy_simd": ["X86_V3"], "blas": [haswell, zen]})
        assert not simd.is_pinned({"numpy_simd": ["X86_V3", "X86_V4"], "blas": []})
        assert simd.is_pinned({"numpy_simd": ["X86_V3"], "blas": [haswell, haswell]})


def test_python_dash_m_sdcdist_is_the_command():
    r = subprocess.run([PY, "-m", "sdcdist", "--help"], env=_env(pinned=False),
                       capture_output=True, text=True, timeout=60, cwd=ROOT)
    assert r.returncode == 0, r.stderr
    assert "Usage:" in r.stdout and "audit" in r.stdout
