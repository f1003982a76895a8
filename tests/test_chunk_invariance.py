"""Same data, same values: every metric of the registry gives the same bits whatever the
input format (a CSV read into memory or a Zarr store), the storage chunking, the memory
layout and the number of workers."""

from __future__ import annotations

import numpy as np
import pytest

from sdcdist.data import Microdata, StoredArray, load_microdata, write_microdata
from sdcdist.errors import SdcInputError
from sdcdist.metrics import REGISTRY, measure


def _applicable(a, b, names, **kw):
    """The metrics these files can be measured with (the others refuse them)."""
    out = []
    for n in names:
        try:
            measure(a, b, [n], **kw)
            out.append(n)
        except SdcInputError:
            pass
    return out


def _values(a, b, names, *, client=None, **kw):
    res = measure(a, b, names, client=client, **kw)
    return {n: (r.value, r.per_keyset) for n, r in res.items()}


def _same(a, b):
    return {n for n in a if repr(a[n]) != repr(b[n])}


def _inputs(tmp_path, X, Y, names, cats=None, roles=None):
    """The pair as in-memory arrays read from CSV, and as Zarr stores in several chunkings."""
    cats = cats or {}
    out = {}
    for label, V in (("x", X), ("y", Y)):
        md = Microdata(V, tuple(names), roles or {}, None, cats)
        write_microdata(md, tmp_path / f"{label}.csv")
        out.setdefault("csv", []).append(load_microdata(tmp_path / f"{label}.csv",
                                                        categorical=list(cats) or None))
        out.setdefault("fortran", []).append(np.asfortranarray(V))
        for ch in (7, 1000):
            write_microdata(md, tmp_path / f"{label}{ch}.zarr", chunk_rows=ch)
            out.setdefault(f"zarr{ch}", []).append(StoredArray(str(tmp_path / f"{label}{ch}.zarr")))
    return out


@pytest.mark.slow
def test_numeric_metrics_bit_for_bit(tmp_path, rng, client):
    n, m = 90, 4
    z = rng.standard_normal((n, m)) @ np.array([[1, .5, .2, 0], [0, 1, .3, .1],
                                                [0, 0, 1, .4], [0, 0, 0, 1.]])
    X = np.round(np.exp(z) * np.array([1000, 50, 10, 1]), 3)
    Y = X + rng.standard_normal((n, m)) * X.std(axis=0) * 0.2
    names = ["a", "b", "c", "d"]
    # singling out on 90 records finds few queries that single one out: without a cap on its
    # attempts (anonymeter's 10^7) each of the 8 runs below takes about a minute
    kw = {"columns": names, "keysets": [names[:2], names],
          "options": {"attack_n": 60, "so_max_attempts": 20_000}}
    metrics = _applicable(X, Y, [k for k, v in REGISTRY.items() if not v.categorical], **kw)
    assert len(metrics) >= 50 and "so_multi" in metrics
    inputs = _inputs(tmp_path, X, Y, names)
    base = _values(np.ascontiguousarray(X), np.ascontiguousarray(Y), metrics, **kw)
    for label, (a, b) in inputs.items():
        assert _same(base, _values(a, b, metrics, **kw)) == set(), label
    a, b = inputs["zarr7"]
    assert _same(base, _values(a, b, metrics, client=client, **kw)) == set(), "2 workers"
    a, b = inputs["fortran"]
    assert _same(base, _values(a, b, metrics, client=client, **kw)) == set(), "2 workers"


@pytest.mark.slow
def test_frequency_metrics_bit_for_bit(tmp_path, rng, client):
    n = 400
    X = np.column_stack([rng.integers(0, 6, n), rng.integers(0, 3, n), rng.integers(0, 4, n),
                         rng.uniform(1, 40, n)]).astype(np.float64)
    Y = X.copy()
    Y[rng.random(n) < 0.2, 0] = 0
    names = ["r", "s", "t", "w"]
    cats = {c: [str(i) for i in range(6)] for c in names[:3]}
    kw = {"columns": names, "categorical": names[:3], "weight": "w",
          "keysets": [names[:3]]}
    metrics = _applicable(X, Y, [k for k, v in REGISTRY.items() if v.categorical], **kw)
    assert len(metrics) >= 7
    inputs = _inputs(tmp_path, X, Y, names, cats, {"weight": ["w"]})
    base = _values(np.ascontiguousarray(X), np.ascontiguousarray(Y), metrics, **kw)
    for label, (a, b) in inputs.items():
        if label == "csv":                  # labels re-coded on read: compare the codes
            assert np.array_equal(a.values, X) and np.array_equal(b.values, Y)
        assert _same(base, _values(a, b, metrics, **kw)) == set(), label
    a, b = inputs["zarr7"]
    assert _same(base, _values(a, b, metrics, client=client, **kw)) == set(), "2 workers"


def _propensity_pair(rng, n=1080, m=13):
    """A census-sized pair (n x m) the degree-2 propensity fit cannot separate."""
    X = rng.standard_normal((n, m))
    return X, X + rng.standard_normal((n, m)) * 0.3


def test_propensity_sums_do_not_depend_on_blas_threads(rng):
    """The fit's partial sums (PS2's 105 x 105 Hessian of a census-sized chunk) have the same
    bits with one BLAS thread and with two: a multi-threaded BLAS splits that product's sums
    differently, which made PS2 change in its last bits from run to run on a cluster."""
    from threadpoolctl import threadpool_limits

    from sdcdist.metrics.utility import logistic_chunk, ps_features
    X, Y = _propensity_pair(rng)
    k = ps_features(X[:1], 2).shape[1]
    beta = rng.standard_normal(k) * 0.05
    args = (0, X.shape[0], X, Y, np.zeros(X.shape[1]), np.ones(X.shape[1]), beta, 2)
    got = {}
    for threads in (1, 2):
        with threadpool_limits(threads):
            got[threads] = logistic_chunk(*args)
    for key in ("ll", "u", "wrong", "grad", "hess"):
        assert repr(np.asarray(got[1][key]).tolist()) == repr(np.asarray(got[2][key]).tolist()), key


@pytest.mark.slow
def test_propensity_scores_bit_for_bit(rng, client):
    """PS and PS2 have the same bits whatever the reduction chunking, the worker count and
    the BLAS thread count (they sum over fixed record blocks in record order)."""
    from threadpoolctl import threadpool_limits
    X, Y = _propensity_pair(rng, 400, 6)
    base = _values(X, Y, ["PS", "PS2"])
    assert all(0 < v[0] < 0.25 for v in base.values())
    for chunk in (7, 100, 399):
        assert _same(base, _values(X, Y, ["PS", "PS2"], options={"chunk_rows": chunk})) == set()
    with threadpool_limits(2):
        assert _same(base, _values(X, Y, ["PS", "PS2"], client=client,
                                   options={"chunk_rows": 100})) == set(), "2 workers"
