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

    from sdcdist.metrics.loss.propensity import logistic_chunk, ps_features
    X, Y = _propensity_pair(rng)
    k = ps_features(X[:1], 2).shape[1]
    beta = rng.standard_normal(k) * 0.05
    args = (0, X.shape[0], X, Y, np.zeros(X.shape[1]), np.ones(X.shape[1]), beta, 2)
    got = {}
    for threads in (1, 2):
        with threadpool_limits(threads):
            got[threads] = logistic_chunk(*args)
    for key in ("exact", "wrong"):
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


def _naive_class_sums(w, cls, chunk):
    """Weight sums per class as a float fold over record chunks (each chunk summed in record
    order, the chunk sums added in chunk order): how the key tables used to add them."""
    out = {}
    for s in range(0, w.size, chunk):
        part = {}
        for wi, ci in zip(w[s:s + chunk].tolist(), cls[s:s + chunk].tolist()):
            part[ci] = part.get(ci, 0.0) + wi
        for ci, v in part.items():
            out[ci] = out.get(ci, 0.0) + v
    return out


WEIGHTED = ["IR_mean", "IR_max", "ER", "modrisk_tau1", "modrisk_tau2"]


@pytest.mark.slow
def test_weighted_frequency_metrics_bit_for_bit_over_chunk_rows(rng, client):
    """IR_mean, IR_max and ER (and the model-based risks, which sum weights per cell too)
    have the same bits for any chunk_rows and worker count, with and without missing key
    values, although a float sum of these weights changes with the order of its terms."""
    n = 500
    codes = np.column_stack([rng.integers(0, 2, n), rng.integers(0, 2, n),
                             rng.integers(0, 2, n)]).astype(np.float64)
    # survey-like weights, one record in ten of a weight about 10**7 times larger: adding
    # a small weight to a large running sum rounds it, so the order of the terms counts
    w = rng.uniform(1.0, 50.0, n) * np.where(rng.random(n) < 0.1, 1e7, 1.0)
    cls = (codes @ np.array([4.0, 2.0, 1.0])).astype(np.int64)
    sums = {c: [_naive_class_sums(w, cls, c)[k] for k in range(8)] for c in (7, 64, n)}
    assert sums[7] != sums[64] or sums[64] != sums[n]   # the naive sums do depend on it
    names = ["a", "b", "c", "w"]
    kw = {"columns": names, "categorical": names[:3], "weight": "w", "keysets": [names[:3]],
          "options": {"modrisk_formula": "~ a + b + c"}}
    for label, X in (("complete", np.column_stack([codes, w])),
                     ("missing", np.column_stack([np.where(rng.random((n, 3)) < 0.05, np.nan,
                                                           codes), w]))):
        metrics = WEIGHTED if label == "complete" else WEIGHTED[:3]
        base = None
        for chunk in (7, 64, 499, 65536):
            opts = {**kw["options"], "chunk_rows": chunk}
            got = _values(X, X, metrics, **{**kw, "options": opts})
            base = base or got
            assert _same(base, got) == set(), (label, chunk)
        opts = {**kw["options"], "chunk_rows": 7}
        got = _values(X, X, metrics, client=client, **{**kw, "options": opts})
        assert _same(base, got) == set(), (label, "2 workers")
