"""Rank metrics of [CN] and the distributed sort behind them."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from hypothesis.extra.numpy import arrays
from scipy.stats import rankdata

from sdcdist.metrics import measure
from sdcdist.metrics.loss.ranks import column_groups, max_abs_rank_distance, max_sq_rank_distance
from sdcdist.parallel import Runner
from sdcdist.parallel.sort import chunk_ranks, distributed_sort, key_values, tie_keys, value_keys

RANK = ["rMAE", "brMAE", "brMSE"]


def test_hand_computed():
    # column 1: ranks 1 2 3 4 vs 2 1 4 3 -> |d| = 1 1 1 1, d^2 = 1 1 1 1
    # column 2: ranks 1 2 3 4 vs 4 3 2 1 -> |d| = 3 1 1 3, d^2 = 9 1 1 9
    X = np.array([[10.0, 1.0], [20.0, 2.0], [30.0, 3.0], [40.0, 4.0]])
    Y = np.array([[20.0, 4.0], [10.0, 3.0], [40.0, 2.0], [30.0, 1.0]])
    r = measure(X, Y, RANK)
    assert r["rMAE"].value == 12 / (4 * 2)
    assert r["brMAE"].value == 12 / (2 * 8)        # max sum |d| for n = 4 is 8
    assert r["brMSE"].value == 24 / (2 * 20)       # max sum d^2 for n = 4 is 20


@pytest.mark.parametrize("n", range(1, 12))
def test_maxima_match_the_paper(n):
    K = n // 2
    assert max_abs_rank_distance(n) == 2 * sum(n - 2 * k + 1 for k in range(1, K + 1))
    assert max_sq_rank_distance(n) == 2 * sum((n - 2 * k + 1) ** 2 for k in range(1, K + 1))
    r = np.arange(1, n + 1)
    assert np.abs(r - r[::-1]).sum() == max_abs_rank_distance(n)
    assert ((r - r[::-1]) ** 2).sum() == max_sq_rank_distance(n)


@settings(max_examples=40, deadline=None)
@given(arrays(np.int8, st.tuples(st.integers(2, 30), st.integers(1, 3))),
       arrays(np.int8, 90), st.integers(1, 9))
def test_bounded_in_unit_interval(x, noise, chunk):
    X = x.astype(np.float64)
    Y = X + noise[:X.size].reshape(X.shape) % 4
    r = measure(X, Y, ["brMAE", "brMSE"], options={"chunk_rows": chunk, "bucket_rows": 5})
    for name in ("brMAE", "brMSE"):
        assert 0.0 <= r[name].value <= 1.0


@settings(max_examples=30, deadline=None)
@given(st.integers(2, 40), st.integers(1, 3), st.integers(0, 2**32 - 1), st.integers(1, 11))
def test_reversed_ranks_give_one(n, p, seed, chunk):
    X = np.random.default_rng(seed).permutation(n * p).reshape(n, p).astype(np.float64)
    r = measure(X, -X, ["brMAE", "brMSE"], options={"chunk_rows": chunk, "bucket_rows": chunk})
    assert r["brMAE"].value == 1.0 and r["brMSE"].value == 1.0


def test_value_keys_keep_order(rng):
    x = np.concatenate([rng.standard_normal(100) * 10.0 ** rng.integers(-300, 300, 100),
                        [0.0, -0.0, np.inf, -np.inf, 5e-324, -5e-324]])
    k = value_keys(x)
    assert np.array_equal(np.argsort(k, kind="stable"), np.argsort(x + 0.0, kind="stable"))
    assert np.array_equal(key_values(k), x + 0.0)


def _reference_ranks(X: np.ndarray, seeds: np.ndarray) -> np.ndarray:
    """In-memory ranks with the same tie keys (lexsort on the whole column)."""
    R = np.empty(X.shape, dtype=np.int64)
    for j in range(X.shape[1]):
        o = np.lexsort((tie_keys(int(seeds[j]), 0, X.shape[0]), X[:, j]))
        R[o, j] = np.arange(1, X.shape[0] + 1)
    return R


@pytest.mark.parametrize("chunk_rows,bucket_rows", [(1, 7), (4, 10), (13, 13), (100, 30),
                                                    (100, None)])
def test_distributed_sort_equals_in_memory(chunk_rows, bucket_rows, rng):
    X = rng.integers(0, 6, (100, 3)).astype(np.float64)      # many ties
    seeds = np.array([11, 22, 33], dtype=np.uint64)
    runner = Runner()
    S = distributed_sort(runner, X, 100, (0, 1, 2), chunk_rows=chunk_rows, seeds=seeds,
                         bucket_rows=bucket_rows)
    assert len(S.buckets) == (-(-100 // bucket_rows) if bucket_rows else 1)
    assert S.counts.max() <= 3 * (bucket_rows or 100)
    assert S.counts.sum(axis=1).tolist() == [100, 100, 100]
    ref = _reference_ranks(X, seeds)
    got = np.vstack([chunk_ranks(runner.result(S.which[c]),
                                 *[runner.result(b)["ranks"][c] for b in S.buckets])
                     for c in range(len(S.bounds))])
    assert np.array_equal(got, ref)
    assert np.array_equal(np.sort(got, axis=0), np.tile(np.arange(1, 101)[:, None], 3))
    # ranks agree with the usual min/max ranks of tied values
    for j in range(3):
        assert np.all(got[:, j] >= rankdata(X[:, j], method="min"))
        assert np.all(got[:, j] <= rankdata(X[:, j], method="max"))


def test_column_groups_bound_memory(rng, small):
    assert column_groups(1000, 5, 64 * 1000 * 2) == [(0, 1), (2, 3), (4,)]
    assert column_groups(10, 3, 1) == [(0,), (1,), (2,)]
    assert column_groups(10, 3, 2**30) == [(0, 1, 2)]
    Y = small + rng.standard_normal(small.shape)
    names = ["rMAE", "brMSE", "EMD1"]
    one = measure(small, Y, names, options={"sort_memory": 1})
    all_ = measure(small, Y, names)
    assert {k: v.value for k, v in one.items()} == {k: v.value for k, v in all_.items()}


def test_tie_breaking_random_but_reproducible(rng):
    X = rng.integers(0, 3, (60, 2)).astype(np.float64)
    Y = rng.integers(0, 3, (60, 2)).astype(np.float64)
    a = measure(X, Y, ["rMAE"], seed=1)["rMAE"].value
    assert measure(X, Y, ["rMAE"], seed=1)["rMAE"].value == a
    others = {measure(X, Y, ["rMAE"], seed=s)["rMAE"].value for s in range(2, 8)}
    assert len(others | {a}) > 1


def test_tie_breaking_is_uniform():
    """Every order of 3 tied records is equally likely over seeds."""
    X = np.array([[5.0], [5.0], [5.0], [1.0]])
    seen = {}
    for s in range(600):
        seeds = np.random.default_rng(s).integers(0, 2**64, 1, dtype=np.uint64)
        r = tuple(_reference_ranks(X, seeds)[:3, 0])
        seen[r] = seen.get(r, 0) + 1
    assert len(seen) == 6 and min(seen.values()) > 60


@pytest.mark.parametrize("chunk_rows,bucket_rows", [(1, 6), (8, 8), (65536, None)])
def test_chunked_equals_in_memory_without_ties(chunk_rows, bucket_rows, small, rng, client):
    X = small[:40]
    Y = X + rng.standard_normal(X.shape) * X.std(0)
    d = np.vstack([rankdata(X[:, j]) - rankdata(Y[:, j]) for j in range(4)]).T
    n, p = X.shape
    ref = {"rMAE": np.abs(d).sum() / (n * p), "brMAE": np.abs(d).sum() / (p * 800),
           "brMSE": (d ** 2).sum() / (p * max_sq_rank_distance(n))}
    got = measure(X, Y, RANK, options={"chunk_rows": chunk_rows, "bucket_rows": bucket_rows},
                  client=client if chunk_rows > 1 else None)
    for name, v in ref.items():
        assert got[name].value == pytest.approx(v, rel=1e-12)
