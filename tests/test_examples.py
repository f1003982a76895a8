"""The example studies give the same cubes, bit for bit, as when they were first published.

``tests/data/example_fingerprints.json`` holds, for each spec of ``examples/``,
the per-metric SHA-256 (:func:`sdcdist.testing.cube_fingerprints`) of the cube
its audit produced before the code was reorganised. ``RR`` and ``PDL`` are left
out: they changed on purpose when they started linking on all key columns
(CATALOG). Every other metric must come out identical.

The specs' workers see one BLAS thread, as the worker processes of a real
cluster do (Dask's nanny sets ``OPENBLAS_NUM_THREADS=1`` and friends): the
propensity-score fit (``PS2``) sums through BLAS, whose results depend on its
thread count, and the published cubes were computed that way.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from sdcdist.audit import load_spec, run_audit
from sdcdist.testing import cube_fingerprints

pytestmark = pytest.mark.slow

ROOT = Path(__file__).resolve().parents[1]
FINGERPRINTS = json.loads((ROOT / "tests" / "data" / "example_fingerprints.json").read_text())
CHANGED_ON_PURPOSE = {"RR", "PDL"}


def test_every_example_has_fingerprints():
    specs = {p.stem for p in (ROOT / "examples").glob("*.yaml")}
    assert specs == set(FINGERPRINTS)
    for name, fps in FINGERPRINTS.items():
        spec = load_spec(ROOT / "examples" / f"{name}.yaml")
        assert set(fps) == set(spec.metrics) - CHANGED_ON_PURPOSE, name


@pytest.mark.parametrize("name", sorted(FINGERPRINTS))
def test_example_cube_is_unchanged(name, client, tmp_path):
    from threadpoolctl import threadpool_limits
    out = tmp_path / f"{name}.zarr"
    with threadpool_limits(1):
        res = run_audit(ROOT / "examples" / f"{name}.yaml", out, client=client)
    assert res.computed == res.total
    got = cube_fingerprints(out)
    differ = [m for m, h in FINGERPRINTS[name].items() if got.get(m) != h]
    assert not differ, f"{name}: the values of {differ} changed"
