"""One-to-one assignment: dense exact vs sparse on candidate graphs."""

import itertools

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from sdcdist.errors import SdcInputError
from sdcdist.linkage.assignment import Candidates, assign, top_candidates


def _planted(rng, n_r, n_c, strength=3.0):
    """Random weights with a planted partner per row: noise plus a strong diagonal-ish match."""
    W = rng.normal(size=(n_r, n_c))
    partner = rng.permutation(n_c)[:n_r] if n_r <= n_c else None
    if partner is not None:
        W[np.arange(n_r), partner] += strength + rng.random(n_r)
    return W


def _total(W, r, c):
    return float(W[r, c].sum())


def test_hand_computed_3x3():
    W = np.array([[4.0, 1.0, 3.0],
                  [2.0, 0.0, 5.0],
                  [3.0, 2.0, 2.0]])
    # permutations: best is (0->0, 1->2, 2->1) = 4 + 5 + 2 = 11
    r, c, info = assign(W)
    assert list(c) == [0, 2, 1] and info["method"] == "dense" and info["flag"] == 0
    r, c, info = assign(Candidates.from_topc(np.array([[0, 2], [2, 0], [0, 1]]),
                                             np.array([[4.0, 3.0], [5.0, 2.0], [3.0, 2.0]]), 3))
    assert list(r) == [0, 1, 2] and list(c) == [0, 2, 1] and info["method"] == "sparse"
    assert info["flag"] == 1


@pytest.mark.parametrize("shape", [(30, 30), (25, 40), (40, 40)])
@pytest.mark.parametrize("seed", range(4))
def test_sparse_equals_dense_when_partners_are_candidates(shape, seed):
    rng = np.random.default_rng(seed)
    W = _planted(rng, *shape)
    rd, cd, _ = assign(W)
    top = top_candidates(W, 4)
    # every row's partner in the dense optimum is made a candidate (with the
    # planted structure it almost always is one already)
    cand = Candidates(np.concatenate([top.rows, rd]), np.concatenate([top.cols, cd]),
                      np.concatenate([top.weights, W[rd, cd]]), W.shape)
    rs, cs, info = assign(cand)
    assert info["method"] == "sparse"
    np.testing.assert_array_equal(rd, rs)
    np.testing.assert_array_equal(cd, cs)


def test_dense_above_limit_goes_sparse():
    rng = np.random.default_rng(5)
    W = _planted(rng, 60, 60)
    rd, cd, _ = assign(W)
    rs, cs, info = assign(W, dense_limit=50, top_c=6)
    assert info["method"] == "sparse" and info["n_candidates"] == 360
    np.testing.assert_array_equal(cd, cs)


def test_minimize_distances():
    rng = np.random.default_rng(1)
    D = rng.random((20, 20))
    D[np.arange(20), rng.permutation(20)] -= 2.0
    r1, c1, _ = assign(D, maximize=False)
    r2, c2, _ = assign(top_candidates(D, 4, maximize=False), maximize=False)
    np.testing.assert_array_equal(c1, c2)
    assert _total(D, r1, c1) == pytest.approx(min(
        _total(D, r1, c1), _total(D, *assign(-D)[:2])))


@settings(max_examples=40, deadline=None)
@given(st.integers(2, 5), st.integers(2, 5), st.integers(0, 10**6),
       st.sampled_from([None, 0.0, "row_floor"]))
def test_matches_brute_force(n_r, n_c, seed, unmatched):
    """Exhaustive check over all partial matchings on tiny matrices.

    "row_floor" on a complete graph with n_r <= n_c is the full assignment.
    """
    if unmatched == "row_floor":
        if n_r > n_c:
            return
        r, c, _ = assign(Candidates.from_topc(np.tile(np.arange(n_c), (n_r, 1)),
                                              np.zeros((n_r, n_c)), n_c), unmatched=unmatched)
        assert r.size == n_r
        unmatched_ref = None
    else:
        unmatched_ref = unmatched
    rng = np.random.default_rng(seed)
    W = np.round(rng.normal(size=(n_r, n_c)), 3)

    def best():
        out = (-1, -np.inf)
        cols = list(range(n_c)) + [None] * n_r
        for perm in set(itertools.permutations(cols, n_r)):
            pairs = [(i, j) for i, j in enumerate(perm) if j is not None]
            k = len(pairs)
            val = sum(W[i, j] for i, j in pairs) + (n_r - k) * (unmatched_ref or 0.0)
            score = (k, val) if unmatched_ref is None else (0, val)
            if score[0] > out[0] or (score[0] == out[0] and val > out[1] + 1e-12):
                out = (score[0], val)
        return out[1]

    target = best()
    for how in (W, Candidates.from_topc(np.argsort(-W, axis=1), -np.sort(-W, axis=1), n_c)):
        r, c, info = assign(how, unmatched=unmatched)
        assert len(set(c.tolist())) == c.size and len(set(r.tolist())) == r.size
        val = _total(W, r, c) + (n_r - r.size) * (unmatched_ref or 0.0)
        assert val == pytest.approx(target, abs=1e-9)
        if unmatched_ref is None:
            assert r.size == min(n_r, n_c)


def test_unmatched_rows_when_candidates_collide():
    # rows 0 and 1 both have only column 0 as a candidate: one stays unassigned
    cand = Candidates(np.array([0, 1, 2]), np.array([0, 0, 1]), np.array([5.0, 3.0, 1.0]), (3, 3))
    r, c, info = assign(cand)
    assert list(zip(r.tolist(), c.tolist())) == [(0, 0), (2, 1)]
    assert info["n_unassigned_rows"] == 1
    # maximal cardinality first (None) vs a row's floor ("row_floor"):
    # row 0: A 10, B 1; row 1: A 9 only. None: 0-B, 1-A (2 pairs, 10);
    # row_floor: 0-A (10) + row 1 out at ~9 = 19 > 0-B + 1-A = 10
    cand = Candidates(np.array([0, 0, 1]), np.array([0, 1, 0]), np.array([10.0, 1.0, 9.0]), (2, 2))
    r, c, _ = assign(cand)
    assert list(zip(r.tolist(), c.tolist())) == [(0, 1), (1, 0)]
    r, c, _ = assign(cand, unmatched="row_floor")
    assert list(zip(r.tolist(), c.tolist())) == [(0, 0)]


def test_bad_inputs():
    with pytest.raises(SdcInputError, match="2-D"):
        assign(np.zeros(3))
    with pytest.raises(SdcInputError, match="finite"):
        assign(np.array([[np.nan, 1.0]]))
    with pytest.raises(SdcInputError, match="'unmatched' parameter"):
        assign(np.zeros((2, 2)), unmatched="greedy")
    with pytest.raises(SdcInputError, match="out of range"):
        Candidates(np.array([0]), np.array([4]), np.array([1.0]), (2, 2))


@pytest.mark.parametrize("seed", range(3))
@pytest.mark.parametrize("n", [40, 300])
def test_exact_dense_on_tie_heavy_integer_weights(seed, n):
    """Integer weights from a few values, many equal rows and a majority floor value:
    the total equals the dense optimum (scipy), with the optimality proved by duality."""
    from scipy.optimize import linear_sum_assignment

    from sdcdist.linkage.assignment import exact_dense
    rng = np.random.default_rng(seed)
    W = np.where(rng.random((n, n)) < 0.6, -5, rng.integers(-5, 4, size=(n, n))).astype(float)
    W[n // 4: n // 2] = W[0]                    # a quarter of the rows equal
    W[n // 2: n // 2 + n // 8] = W[1]
    W[:, 3 * n // 4:] = W[:, [0]]               # equal columns too
    r0, c0 = linear_sum_assignment(W, maximize=True)
    r, c, info = exact_dense(W, first_c=2)
    assert info["exact_rounds"] >= 1                    # proved, not the fallback
    assert sorted(c) == list(range(n)) and list(r) == list(range(n))
    assert W[r, c].sum() == W[r0, c0].sum()
    r3, c3, _ = exact_dense(-(-W))
    assert W[r3, c3].sum() == W[r0, c0].sum()


@pytest.mark.parametrize("kw", [{}, {"method": "l", "t": 0.05}])
def test_exact_dense_on_microaggregated_census(census, monkeypatch, kw):
    """Regression: PRL weights of Census against micmul k = 3 (identical rows in triplets)
    made the sparse matching of the exact solver run for minutes. It must return the
    dense optimum, proved by duality (not the scipy fallback)."""
    from scipy.optimize import linear_sum_assignment

    from sdcdist.linkage import prl_drivers
    from sdcdist.linkage.assignment import exact_dense
    from sdcdist.masking import REGISTRY
    from sdcdist.parallel import Runner
    X = np.asarray(census.values, dtype=np.float64)
    Y = REGISTRY["micmul"](X, 3, rng=np.random.default_rng(1))
    got = {}

    real = prl_drivers.assign

    def grab(W, **kw):
        got["W"] = np.array(W)
        return real(W, **kw)

    monkeypatch.setattr(prl_drivers, "assign", grab)
    prl_drivers.probabilistic_linkage(Runner(), X, Y, X.shape[0], Y.shape[0],
                                      tuple(range(X.shape[1])), **kw)
    W = got["W"]
    assert np.unique(W, axis=0).shape[0] < W.shape[0]        # tied rows: the hard case
    r0, c0 = linear_sum_assignment(W, maximize=True)
    r, c, info = exact_dense(W)
    assert info["exact_rounds"] >= 1
    assert sorted(c) == list(range(W.shape[0]))
    np.testing.assert_allclose(W[r, c].sum(), W[r0, c0].sum(), rtol=1e-12)
