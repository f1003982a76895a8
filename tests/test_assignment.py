"""One-to-one assignment: dense exact vs sparse on candidate graphs."""

import itertools

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from scipy.optimize import linear_sum_assignment

from sdcdist.errors import SdcInputError
from sdcdist.linkage import assignment
from sdcdist.linkage.assignment import (Candidates, assign, assign_by_content, exact_dense,
                                         solve_sparse,
                                         top_candidates)


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


@pytest.mark.parametrize("phases", [(16.0, 16.0, 1e-4), (64.0, 32.0, 1e-4), (4.0, 8.0, 1e-2)])
def test_integer_exact_dense_returns_the_same_assignment_whatever_the_auction(phases,
                                                                              monkeypatch):
    """On integer (fixed-point) weights the assignment is the lexicographically smallest
    optimum, so the auction's epsilon phases (which only seed the exact solve) and the
    sparse start change nothing: the same pairs bit for bit."""
    from sdcdist.linkage.assignment import auction, exact_dense
    rng = np.random.default_rng(4)
    n = 1600                                       # above AUCTION_MIN: the auction runs
    W = rng.integers(-4000, 800, size=(n, n)).astype(float)    # not AUCTION_FEW_VALUES
    W[n // 3: n // 2] = W[0]                       # equal rows: many optima
    ref = exact_dense(W, integer=True, auction=False)
    first, ratio, eps = phases
    monkeypatch.setattr(auction, "AUCTION_FIRST", first)
    monkeypatch.setattr(auction, "AUCTION_RATIO", ratio)
    monkeypatch.setattr(auction, "AUCTION_EPS", eps)
    r, c, info = exact_dense(W, integer=True, auction=True)
    assert info["auction_phases"] >= 1
    assert np.array_equal(r, ref[0]) and np.array_equal(c, ref[1])
    # the caller's extremes (as the PRL weights give them) start the same auction
    r2, c2, info2 = exact_dense(W, integer=True, auction=True,
                                extremes=(W.min(), W.max(), W.max(axis=0)))
    assert np.array_equal(r2, r) and np.array_equal(c2, c)
    assert (info2["auction_bids"], info2["auction_scans"]) == (info["auction_bids"],
                                                               info["auction_scans"])


@pytest.mark.parametrize("values", [2, 8, 64])
def test_few_distinct_values_take_one_coarse_phase_and_the_same_assignment(values,
                                                                            monkeypatch):
    """A matrix of a few distinct values (PRL weights on categorical keys: one a pattern),
    in groups of equal rows and columns, is auctioned in one phase at a coarse epsilon:
    the assignment is the one the two fine phases give (and the one without an auction),
    bit for bit."""
    from sdcdist.linkage.assignment import auction, exact_dense
    rng = np.random.default_rng(values)
    n = 1600
    levels = np.sort(rng.choice(np.arange(-3000, 500), size=values, replace=False))
    rows, cols = rng.integers(0, 60, size=n), rng.integers(0, 40, size=n)
    W = levels[rng.integers(0, values, size=(60, 40))][rows][:, cols].astype(float)
    assert np.unique(W).size <= values
    r, c, info = exact_dense(W, integer=True, auction=True)
    assert info["auction_phases"] == 1
    monkeypatch.setattr(auction, "AUCTION_FEW_VALUES", 0)     # the phases of any matrix
    r2, c2, info2 = exact_dense(W, integer=True, auction=True)
    assert info2["auction_phases"] == 2
    ref = exact_dense(W, integer=True, auction=False)
    for got in ((r, c), (r2, c2)):
        assert np.array_equal(got[0], ref[0]) and np.array_equal(got[1], ref[1])


def test_the_epsilons_follow_the_number_of_distinct_values():
    from sdcdist.linkage.assignment import auction
    few = np.tile(np.arange(64.0), (100, 1))
    assert auction.epsilons(few, 63.0) == [63.0 * auction.AUCTION_EPS_FEW]
    many = np.arange(100 * 65.0).reshape(100, 65)
    eps = auction.epsilons(many, float(many.max()))
    assert len(eps) == 2 and eps[-1] == many.max() * auction.AUCTION_EPS
    assert auction.epsilons(few, 0.0) == [1.0]


@pytest.mark.parametrize("kw", [{}, {"method": "l", "t": 0.05}])
def test_exact_dense_on_microaggregated_census(census, monkeypatch, kw):
    """Regression: PRL weights of Census against micmul k = 3 (identical rows in triplets)
    made the sparse matching of the exact solver run for minutes. It must return the
    dense optimum, proved by duality (not the scipy fallback)."""
    from scipy.optimize import linear_sum_assignment

    from sdcdist.linkage import assignment, prl
    from sdcdist.linkage.assignment import exact_dense
    from sdcdist.masking import REGISTRY
    from sdcdist.parallel import Runner
    X = np.asarray(census.values, dtype=np.float64)
    Y = REGISTRY["micmul"](X, 3, rng=np.random.default_rng(1))
    got = {}

    real = assignment.api.assign

    def grab(W, **kw):
        # the dense PRL path hands over its weights already on the grid (integers of
        # 2^-on_grid): the weights the solver sees, in nats
        got["W"] = np.array(W) * 2.0 ** -kw.get("on_grid", 0)
        return real(W, **kw)

    monkeypatch.setattr(assignment.api, "assign", grab)
    s = prl.PRLSettings.from_options({"prl_" + k: v for k, v in kw.items()})
    prl.probabilistic_linkage(Runner(), X, Y, X.shape[0], Y.shape[0],
                              tuple(range(X.shape[1])), settings=s)
    W = got["W"]
    assert np.unique(W, axis=0).shape[0] < W.shape[0]        # tied rows: the hard case
    r0, c0 = linear_sum_assignment(W, maximize=True)
    r, c, info = exact_dense(W)
    assert info["exact_rounds"] >= 1
    assert sorted(c) == list(range(W.shape[0]))
    np.testing.assert_allclose(W[r, c].sum(), W[r0, c0].sum(), rtol=1e-12)
    # the sparse path on the same weights' top-20 graph (where LAPJVsp did not return):
    # the optimum of the graph, with rows left out only when no full assignment exists
    top = top_candidates(W, 20)
    ok = np.zeros(W.shape, bool)
    ok[top.rows, top.cols] = True
    k, total = _brute_sparse(W, ok, True)
    r, c, info = assign(top)
    assert info["method"] == "sparse" and r.size == k
    np.testing.assert_allclose(W[r, c].sum(), total, rtol=1e-12)
    r, c, _ = assign(top, unmatched="row_floor")
    assert np.unique(c).size == c.size and ok[r, c].all()


def _tie_heavy(rng, n_r, n_c, groups=True):
    """Integer weights from a few values with a majority floor value, and (groups) rows
    repeated in triplets as after micro-aggregation, plus a block of equal columns."""
    W = np.where(rng.random((n_r, n_c)) < 0.6, -5, rng.integers(-5, 4, size=(n_r, n_c)))
    W = W.astype(float)
    if groups:
        W = W[np.repeat(np.arange(n_r), 3)[:n_r]]
        W[:, 3 * n_c // 4:] = W[:, [0]]
    return W


@pytest.mark.parametrize("shape", [(200, 200), (150, 260), (260, 150), (301, 300)])
@pytest.mark.parametrize("maximize", [True, False])
def test_default_dense_path_is_exact_on_tie_heavy_rectangles(shape, maximize, monkeypatch):
    """assign's dense path (exact_dense above EXACT_MIN) gives scipy's optimal total on
    tie-heavy integer weights, square and rectangular, maximising and minimising."""
    from scipy.optimize import linear_sum_assignment
    monkeypatch.setattr(assignment.dense, "EXACT_MIN", 2)
    W = _tie_heavy(np.random.default_rng(sum(shape)), *shape)
    r0, c0 = linear_sum_assignment(W, maximize=maximize)
    r, c, info = assign(W, maximize=maximize)
    assert info["method"] == "dense" and r.size == min(shape) == np.unique(c).size
    assert np.unique(r).size == r.size
    assert W[r, c].sum() == W[r0, c0].sum()


@pytest.mark.parametrize("maximize", [True, False])
@pytest.mark.parametrize("auction", [False, True])
def test_dense_unmatched_value_is_exact(maximize, auction, monkeypatch):
    """A numeric ``unmatched`` on the exact dense path, with or without the auction's start
    (a private option per row there): same total as the clipped-gain formulation solved by
    scipy (EXACT_MIN off)."""
    rng = np.random.default_rng(5 if auction else 3)
    n = 200 if auction else 180
    W = _tie_heavy(rng, n, n - 40)
    u = rng.integers(-3, 3, size=n).astype(float)
    monkeypatch.setattr(assignment.dense, "EXACT_MIN", None)
    r0, c0, _ = assign(W, maximize=maximize, unmatched=u)
    monkeypatch.setattr(assignment.dense, "EXACT_MIN", 2)
    monkeypatch.setattr(assignment.auction, "AUCTION_MIN", 2 if auction else None)
    r, c, _ = assign(W, maximize=maximize, unmatched=u)

    def value(r, c):
        return W[r, c].sum() + u[np.setdiff1d(np.arange(n), r)].sum()
    assert value(r, c) == value(r0, c0)
    assert np.all(W[r, c] > u[r]) if maximize else np.all(W[r, c] < u[r])


def _brute_sparse(W, ok, maximize):
    """(cardinality, total) of the best matching using only entries ``ok``: scipy with a
    penalty per missing entry large enough to maximise the cardinality first."""
    from scipy.optimize import linear_sum_assignment
    s = 1.0 if maximize else -1.0
    big = 1e6
    M = np.where(ok, s * W + big, 0.0)
    r, c = linear_sum_assignment(M, maximize=True)
    keep = ok[r, c]
    return int(keep.sum()), float(W[r[keep], c[keep]].sum())


@settings(max_examples=60, deadline=None)
@given(st.integers(1, 7), st.integers(1, 7), st.integers(0, 10**6),
       st.floats(0.2, 1.0), st.booleans())
def test_sparse_solver_property(n_r, n_c, seed, density, maximize):
    """Small integer matrices: on complete graphs the sparse solver's total equals
    scipy's; on sparse graphs it equals the best matching of maximal cardinality with the
    missing entries infeasible. Its duals certify the result on every edge."""
    rng = np.random.default_rng(seed)
    W = rng.integers(-3, 4, size=(n_r, n_c)).astype(float)
    for ok in (np.ones(W.shape, bool), rng.random(W.shape) < density):
        er, ec = np.nonzero(ok)
        cand = Candidates(er, ec, W[er, ec], W.shape)
        r, c, u, v = solve_sparse(cand, maximize=maximize)
        assert np.unique(r).size == r.size and np.unique(c).size == c.size
        assert ok[r, c].all()
        k, total = _brute_sparse(W, ok, maximize)
        assert r.size == k and W[r, c].sum() == pytest.approx(total, abs=1e-9)
        s = 1.0 if maximize else -1.0
        slack = s * (u[er] + v[ec] - W[er, ec])
        assigned = np.zeros(n_r, bool)
        assigned[r] = True
        # feasible on the edges of assigned rows, tight on the pairs, free columns at 0
        assert np.all(slack[assigned[er]] >= -1e-9)
        np.testing.assert_allclose(u[r] + v[c], W[r, c], atol=1e-9)
        free = np.setdiff1d(np.arange(n_c), c)
        np.testing.assert_allclose(v[free], 0.0, atol=1e-12)
        assert np.all(s * v >= -1e-9)


def test_sparse_tie_heavy_groups_return_and_are_optimal():
    """The case that made LAPJVsp run without returning: identical rows in triplets and
    integer weights, a contested top-c graph. Returns, with the optimum of the graph."""
    rng = np.random.default_rng(11)
    W = _tie_heavy(rng, 900, 900)
    ok = np.zeros(W.shape, bool)
    top = top_candidates(W, 6)
    ok[top.rows, top.cols] = True
    for unmatched in (None, "row_floor"):
        r, c, info = assign(top, unmatched=unmatched)
        assert info["method"] == "sparse" and np.unique(c).size == c.size
        if unmatched is None:
            assert (r.size, W[r, c].sum()) == _brute_sparse(W, ok, True)


@settings(max_examples=80, deadline=None)
@given(st.integers(1, 7), st.integers(1, 7), st.integers(0, 10**6), st.booleans(),
       st.sampled_from([None, 0.0, "rows"]), st.integers(1, 3))
def test_exact_dense_property(n_r, n_c, seed, maximize, unmatched, first_c):
    """exact_dense (through assign, any shape) against scipy: same total value, with a
    graph of 1-3 entries per row and column to start from, so the rounds of adding
    violated entries are exercised."""
    from scipy.optimize import linear_sum_assignment
    rng = np.random.default_rng(seed)
    W = rng.integers(-3, 4, size=(n_r, n_c)).astype(float)
    u = rng.integers(-3, 4, size=n_r).astype(float) if unmatched == "rows" else unmatched
    old = (assignment.dense.EXACT_MIN, assignment.dense.EXACT_FIRST_C)
    try:
        assignment.dense.EXACT_MIN, assignment.dense.EXACT_FIRST_C = 1, first_c
        r, c, _ = assign(W, maximize=maximize, unmatched=u)
    finally:
        assignment.dense.EXACT_MIN, assignment.dense.EXACT_FIRST_C = old
    assert np.unique(r).size == r.size and np.unique(c).size == c.size
    if u is None:
        r0, c0 = linear_sum_assignment(W, maximize=maximize)
        assert r.size == min(n_r, n_c) and W[r, c].sum() == W[r0, c0].sum()
    else:
        uu = np.broadcast_to(np.asarray(u, dtype=float), (n_r,))
        gain = (W - uu[:, None]) if maximize else (uu[:, None] - W)
        r0, c0 = linear_sum_assignment(np.maximum(gain, 0.0), maximize=True)
        left = np.ones(n_r, bool)
        left[r] = False
        s = 1.0 if maximize else -1.0
        assert s * (W[r, c].sum() + uu[left].sum()) == pytest.approx(
            s * uu.sum() + np.maximum(gain, 0.0)[r0, c0].sum(), abs=1e-9)


@pytest.mark.parametrize("unmatched", ["row_floor", "values"])
def test_sparse_dummy_semantics_against_scipy(unmatched):
    """row_floor and per-row values on a contested, tie-heavy candidate graph: the same
    objective as scipy on the dense problem with one private dummy column per row and
    the missing edges infeasible."""
    from scipy.optimize import linear_sum_assignment
    rng = np.random.default_rng(4)
    W = _tie_heavy(rng, 120, 100)
    top = top_candidates(W, 3)
    n_r, n_c = W.shape
    if unmatched == "row_floor":
        worst = np.full(n_r, np.inf)
        np.minimum.at(worst, top.rows, top.weights)
        u = worst - 1e-9 * (1.0 + float(top.weights.max() - top.weights.min() + 1.0))
    else:
        u = rng.integers(-5, 2, size=n_r).astype(float)
    M = np.full((n_r, n_c + n_r), -1e9)
    M[top.rows, top.cols] = top.weights
    M[np.arange(n_r), n_c + np.arange(n_r)] = u
    r0, c0 = linear_sum_assignment(M, maximize=True)
    r, c, _ = assign(top, unmatched="row_floor" if unmatched == "row_floor" else u)
    left = np.ones(n_r, bool)
    left[r] = False
    assert W[r, c].sum() + u[left].sum() == pytest.approx(M[r0, c0].sum(), rel=1e-12)


@pytest.mark.parametrize("shape", [(300, 300), (240, 300), (300, 240)])
@pytest.mark.parametrize("maximize", [True, False])
def test_auction_start_is_exact_on_tie_heavy_weights(shape, maximize, monkeypatch):
    """The auction-priced start of exact_dense (used from AUCTION_MIN on), forced on
    small tie-heavy integer matrices with equal rows and columns, square and rectangular,
    maximising and minimising: scipy's optimal total, proved by the dual certificate."""
    from scipy.optimize import linear_sum_assignment
    monkeypatch.setattr(assignment.auction, "AUCTION_MIN", 2)
    W = _tie_heavy(np.random.default_rng(7 + sum(shape)), *shape)
    r0, c0 = linear_sum_assignment(W, maximize=maximize)
    r, c, info = assign(W, maximize=maximize)
    assert r.size == min(shape) and np.unique(r).size == r.size == np.unique(c).size
    assert W[r, c].sum() == W[r0, c0].sum()
    Wt = W if shape[0] <= shape[1] else W.T
    r, c, info = exact_dense(Wt, maximize=maximize, auction=True)
    assert info["exact_rounds"] >= 1 and info["auction_bids"] >= Wt.shape[0]
    assert Wt[r, c].sum() == W[r0, c0].sum()


def test_auction_start_deterministic_and_content_ties(monkeypatch):
    """Same matrix, same pairs; under assign_by_content, shuffled copies of both files give
    the same pairs of record values (identical records are interchangeable)."""
    monkeypatch.setattr(assignment.auction, "AUCTION_MIN", 2)
    rng = np.random.default_rng(2)
    V = rng.integers(0, 4, size=(250, 3)).astype(float)     # many identical records
    U = np.where(rng.random(V.shape) < 0.7, V, rng.integers(0, 4, size=V.shape))

    def pairs(V, U):
        W = -np.abs(U[:, None, :] - V[None, :, :]).sum(axis=2)  # rows: U, cols: V
        r, c, _ = assign_by_content(W, assignment.content_order(U),
                                    assignment.content_order(V))
        r2, c2, _ = assign_by_content(W, assignment.content_order(U),
                                      assignment.content_order(V))
        np.testing.assert_array_equal(c, c2)
        return sorted(map(tuple, np.hstack([U[r], V[c]]).tolist())), W[r, c].sum()

    p0, t0 = pairs(V, U)
    p1, t1 = pairs(V[rng.permutation(250)], U[rng.permutation(250)])
    assert t0 == t1 and p0 == p1


@settings(max_examples=60, deadline=None)
@given(st.integers(1, 8), st.integers(1, 8), st.integers(0, 10**6), st.booleans(),
       st.sampled_from([None, "rows"]), st.integers(2, 4), st.integers(1, 3))
def test_auction_start_property(n_r, n_c, seed, maximize, unmatched, n_lst, distinct):
    """exact_dense with the auction start against scipy on tiny matrices with few
    distinct values (all equal included), short row lists so that rows rescan, any
    shape: the same total value."""
    from scipy.optimize import linear_sum_assignment
    rng = np.random.default_rng(seed)
    W = rng.integers(0, distinct, size=(n_r, n_c)).astype(float) * 1.5
    if unmatched is None and n_r > n_c:
        W = W.T
        n_r, n_c = n_c, n_r
    old = assignment.auction.AUCTION_LIST
    try:
        assignment.auction.AUCTION_LIST = n_lst
        u = rng.integers(0, 3, size=n_r).astype(float) if unmatched else None
        r, c, info = exact_dense(W, maximize=maximize, unmatched=u, auction=True)
    finally:
        assignment.auction.AUCTION_LIST = old
    assert np.unique(r).size == r.size and np.unique(c).size == c.size
    if u is None:
        r0, c0 = linear_sum_assignment(W, maximize=maximize)
        assert r.size == n_r and W[r, c].sum() == W[r0, c0].sum()
    else:
        gain = (W - u[:, None]) if maximize else (u[:, None] - W)
        r0, c0 = linear_sum_assignment(np.maximum(gain, 0.0), maximize=True)
        s = 1.0 if maximize else -1.0
        left = np.setdiff1d(np.arange(n_r), r)
        assert s * (W[r, c].sum() + u[left].sum()) == pytest.approx(
            s * u.sum() + np.maximum(gain, 0.0)[r0, c0].sum(), abs=1e-9)


def test_auction_start_on_prl_like_level_weights():
    """2,000 x 2,000 sums of per-key level weights (a few distinct values, most pairs at
    the all-disagree floor) with half the records repeated: scipy's total."""
    from scipy.optimize import linear_sum_assignment
    rng = np.random.default_rng(0)
    n, keys = 2000, 6
    A = rng.integers(0, 6, size=(n, keys))
    A[n // 2:] = A[rng.integers(0, n // 2, size=n - n // 2)]   # half the records repeated
    B = np.where(rng.random((n, keys)) < 0.8, A, rng.integers(0, 6, size=(n, keys)))
    lv = np.linspace(0.5, 2.5, keys)
    W = np.zeros((n, n))
    for k in range(keys):
        d = np.abs(B[:, k][:, None] - A[:, k][None, :])
        W += np.where(d == 0, lv[k], np.where(d == 1, 0.2 * lv[k], -lv[k]))
    r0, c0 = linear_sum_assignment(W, maximize=True)
    r, c, info = exact_dense(W, auction=True)
    assert W[r, c].sum() == pytest.approx(W[r0, c0].sum(), rel=1e-12)
    assert "auction_bids" in info


@pytest.mark.parametrize("unmatched", [None, "rows"])
def test_auction_cut_short_still_exact(unmatched, monkeypatch):
    """With the auction stopped before its first bid (no lists, no prices) the exact
    solve still starts from a feasible graph and the certificate rounds reach scipy's
    optimum."""
    from scipy.optimize import linear_sum_assignment
    monkeypatch.setattr(assignment.auction, "AUCTION_MAX_SCANS", 0)
    rng = np.random.default_rng(9)
    W = _tie_heavy(rng, 120, 150)
    u = rng.integers(-4, 2, size=120).astype(float) if unmatched else None
    r, c, info = exact_dense(W, auction=True, unmatched=u)
    assert info["auction_bids"] == 0 and info["exact_rounds"] >= 1
    if u is None:
        r0, c0 = linear_sum_assignment(W, maximize=True)
        assert W[r, c].sum() == W[r0, c0].sum()
    else:
        gain = np.maximum(W - u[:, None], 0.0)
        r0, c0 = linear_sum_assignment(gain, maximize=True)
        left = np.setdiff1d(np.arange(120), r)
        assert W[r, c].sum() + u[left].sum() == pytest.approx(u.sum() + gain[r0, c0].sum())


@pytest.mark.parametrize("shape", [(300, 300), (200, 300)])
def test_auction_start_on_additive_weights(shape):
    """W[i, j] = a[i] + b[j]: every row ranks the columns alike and every full assignment
    is optimal (the auction's hard case, started from column-maximum prices)."""
    from scipy.optimize import linear_sum_assignment
    rng = np.random.default_rng(3)
    W = np.add.outer(rng.integers(0, 50, shape[0]), rng.integers(0, 50, shape[1])) * 1.0
    r0, c0 = linear_sum_assignment(W, maximize=True)
    r, c, info = exact_dense(W, auction=True)
    assert r.size == shape[0] and np.unique(c).size == c.size
    assert W[r, c].sum() == W[r0, c0].sum()


@pytest.mark.parametrize("sparse", [False, True])
def test_assign_by_content_columns_already_in_content_order(sparse):
    """Columns permuted into their content order have the identity as content order, so
    ``col_order=None`` (what PRL passes after ordering A) gives the very same pairs."""
    rng = np.random.default_rng(4)
    V = rng.integers(0, 3, size=(120, 2)).astype(float)     # many identical records
    V = V[assignment.content_order(V)]
    np.testing.assert_array_equal(assignment.content_order(V), np.arange(120))
    U = V + rng.integers(-1, 2, size=V.shape)
    W = -np.abs(U[:, None, :] - V[None, :, :]).sum(axis=2)
    if sparse:
        W = top_candidates(W, 10)
    ro = assignment.content_order(U)
    r0, c0, _ = assign_by_content(W, ro, np.arange(120), maximize=True)
    r1, c1, _ = assign_by_content(W, ro, None, maximize=True)
    np.testing.assert_array_equal(r0, r1)
    np.testing.assert_array_equal(c0, c1)


@pytest.mark.parametrize("col_order", [False, True])
def test_assign_by_content_rows_already_ordered(col_order):
    """A dense matrix computed from the rows' records taken in their content order
    (``rows_ordered=True``, what PRL's dense assignment passes) gives the very same pairs
    as the matrix in the records' own order, permuted by assign_by_content."""
    rng = np.random.default_rng(5)
    V = rng.integers(0, 3, size=(150, 2)).astype(float)     # many identical records
    U = V + rng.integers(-1, 2, size=V.shape)
    W = -np.abs(U[:, None, :] - V[None, :, :]).sum(axis=2)
    ro = assignment.content_order(U)
    co = assignment.content_order(V) if col_order else None
    r0, c0, i0 = assign_by_content(W, ro, co, maximize=True)
    r1, c1, i1 = assign_by_content(W[ro], ro, co, rows_ordered=True, maximize=True)
    np.testing.assert_array_equal(r0, r1)
    np.testing.assert_array_equal(c0, c1)
    assert i0 == i1


@pytest.mark.parametrize("maximize", [True, False])
@pytest.mark.parametrize("auction", [False, True])
def test_exact_dense_optimal_under_a_large_common_offset(maximize, auction):
    # W = 1e6 + 1e-6 z: the spread (8e-6) is below 1e-11 of the offset, so a test
    # relative to max|W| accepted a total 5.7e-7 short of the optimum; the certificate
    # is checked on W - min W (CATALOG PRL item 4)
    rng = np.random.default_rng(7)
    Z = rng.standard_normal((200, 200))
    W = 1e6 + 1e-6 * Z
    r, c, _ = exact_dense(W, maximize=maximize, auction=auction)
    assert np.array_equal(np.sort(c), np.arange(200))
    D = W - W.min()                      # exact: the entries lie within a factor 2
    rr, cc = linear_sum_assignment(D, maximize=maximize)
    best, got = D[rr, cc].sum(), D[r, c].sum()
    assert abs(got - best) <= 1e-12 * 200, (got, best)
    # and the same pairs' total on the standardised scale is the optimum too
    rz, cz = linear_sum_assignment(Z, maximize=maximize)
    assert abs(Z[r, c].sum() - Z[rz, cz].sum()) < 1e-6


def _dedup_by_lexsort(g, maximize):
    # the rule itself: sorted by (row, col), one edge per pair, the best weight
    key = g.rows * max(g.shape[1], 1) + g.cols
    order = np.lexsort((-g.weights if maximize else g.weights, key))
    first = np.ones(order.size, dtype=bool)
    first[1:] = key[order][1:] != key[order][:-1]
    keep = order[first]
    return g.rows[keep], g.cols[keep], g.weights[keep]


@given(st.integers(0, 10_000), st.booleans(), st.booleans())
@settings(max_examples=60, deadline=None)
def test_dedup_is_the_lexsort_rule(seed, repeats, maximize):
    """dedup (quick when no edge repeats) keeps the edges of the rule, in its order."""
    rng = np.random.default_rng(seed)
    n_r, n_c, c = int(rng.integers(1, 30)), int(rng.integers(1, 30)), int(rng.integers(1, 6))
    idx = np.stack([rng.permutation(n_c)[:min(c, n_c)] for _ in range(n_r)])
    idx[rng.random(idx.shape) < 0.2] = -1
    w = rng.integers(-3, 3, size=idx.shape).astype(float)
    g = Candidates.from_topc(idx, w, n_c)
    if repeats and g.rows.size:
        extra = rng.integers(0, g.rows.size, size=int(rng.integers(1, 5)))
        g = Candidates(np.r_[g.rows, g.rows[extra]], np.r_[g.cols, g.cols[extra]],
                       np.r_[g.weights, rng.integers(-3, 3, extra.size).astype(float)], g.shape)
    got = g.dedup(maximize)
    for a, b in zip((got.rows, got.cols, got.weights), _dedup_by_lexsort(g, maximize)):
        np.testing.assert_array_equal(a, b)
    again = got.dedup(maximize)                         # already in order: itself
    assert again is got


# ---- exact ties: fixed-point weights, the lexicographically smallest optimum ------------

def _lexmin_brute(Q, unmatched=None):
    """Among all assignments of every row (a row may take its dummy, worth ``unmatched``,
    when given) with the largest integer total, the lexicographically smallest column
    sequence (the dummy after every column): by enumeration."""
    n_r, n_c = Q.shape
    best, pick = None, None
    opts = list(range(n_c)) + ([n_c] if unmatched is not None else [])
    for seq in itertools.product(opts, repeat=n_r):
        real = [c for c in seq if c < n_c]
        if len(set(real)) != len(real):
            continue
        if unmatched is None and len(real) < min(n_r, n_c):
            continue
        tot = sum(int(Q[i, c]) if c < n_c else int(unmatched) for i, c in enumerate(seq))
        if best is None or tot > best or (tot == best and seq < pick):
            best, pick = tot, seq
    return pick


@pytest.mark.parametrize("how", ["scipy-size", "exact", "auction", "sparse"])
@pytest.mark.parametrize("seed", range(6))
def test_ties_give_the_lexicographically_smallest_optimum(seed, how, monkeypatch):
    """Weights in few values (many optimal assignments): every path returns the
    lexicographically smallest optimal assignment of the rows in their order, equal to
    enumeration on the fixed-point weights; a 1-ulp change of the weights changes
    nothing (before, rounding in the last bit picked among the optima)."""
    rng = np.random.default_rng(seed)
    n_r, n_c = (5, 5) if seed % 2 else (4, 6)
    base = rng.integers(0, 3, size=(n_r, n_c)) * 0.1 + rng.integers(0, 2, size=(n_r, 1)) * 0.3
    if how == "exact":
        monkeypatch.setattr(assignment.dense, "EXACT_MIN", 1)
    if how == "auction":
        monkeypatch.setattr(assignment.dense, "EXACT_MIN", 1)
        monkeypatch.setattr(assignment.auction, "AUCTION_MIN", 1)
    Q = np.rint(base * 2.0**24).astype(np.int64)
    want = _lexmin_brute(Q)
    for W in (base, np.nextafter(base, np.inf), base * (1 + 1e-15), base + 0.7 - 0.7):
        if how == "sparse":
            rr, cc = np.nonzero(np.ones_like(W, dtype=bool))
            r, c, info = assign(Candidates(rr, cc, W[rr, cc], W.shape), unmatched=None)
        else:
            r, c, info = assign(W)
        assert info["grid"] == 2.0**-24
        assert np.array_equal(r, np.arange(n_r)) and tuple(c.tolist()) == want


@pytest.mark.parametrize("seed", range(4))
def test_ties_with_a_value_for_leaving_rows_out(seed):
    """With ``unmatched`` (dense and sparse): the smallest optimum, leaving a row out
    after every column it could take at the same total; then, as documented, a pair no
    better than leaving its row out is dropped."""
    rng = np.random.default_rng(seed + 10)
    W = rng.integers(-1, 2, size=(4, 4)) * 0.25
    Q = np.rint(W * 2.0**24).astype(np.int64)
    want = tuple(c if c < 4 and Q[i, c] > 0 else 4
                 for i, c in enumerate(_lexmin_brute(Q, unmatched=0)))
    got = [4] * 4
    r, c, _ = assign(W, unmatched=0.0)
    for i, j in zip(r, c):
        got[i] = int(j)
    assert tuple(got) == want
    rr, cc = np.nonzero(np.ones_like(W, dtype=bool))
    r, c, _ = assign(Candidates(rr, cc, W[rr, cc], W.shape), unmatched=0.0)
    got = [4] * 4
    for i, j in zip(r, c):
        got[i] = int(j)
    assert tuple(got) == want


def test_certificate_scans_by_row_blocks_give_the_same_entries(monkeypatch):
    """The tight entries and the violations read by blocks of rows (in threads) are those
    of one pass over all rows: the same CSR, also where rows hold more tight entries than
    the one-pass buffer (every entry tight), and the same assignment; so with the
    auction's first scans in threads."""
    from sdcdist.linkage.assignment import dense
    from sdcdist.linkage.assignment.ties import tight_dense
    from sdcdist.parallel import thread_map
    rng = np.random.default_rng(11)
    X = rng.integers(-3, 2, size=(300, 280)).astype(float)
    u = rng.integers(-2, 1, size=300).astype(float)
    v = rng.integers(-2, 1, size=280).astype(float)
    for M, uu, vv in ((X, u, v), (np.zeros((50, 40)), np.zeros(50), np.zeros(40))):
        ref = tight_dense(M, 1.0, 0.0, uu, vv, np.zeros(0))
        for blocks in ([(0, 7), (7, 8), (8, M.shape[0])], [(0, 25), (25, M.shape[0])]):
            got = tight_dense(M, 1.0, 0.0, uu, vv, np.zeros(0), blocks,
                              lambda fn, bl: thread_map(fn, bl, 2))
            assert all(np.array_equal(a, b) for a, b in zip(ref, got))
    W = rng.integers(-40, 8, size=(1100, 1100)).astype(float)      # >= SCAN_THREADS_MIN
    W[300:600] = W[0]
    from sdcdist.linkage.assignment import auction
    monkeypatch.setattr(auction, "SCAN_THREADS", 1)
    one = dense.exact_dense(W, integer=True, auction=True)
    monkeypatch.setattr(auction, "SCAN_THREADS", 3)
    three = dense.exact_dense(W, integer=True, auction=True)
    assert np.array_equal(one[0], three[0]) and np.array_equal(one[1], three[1])
    assert one[2]["exact_rounds"] == three[2]["exact_rounds"]
    # the rows' first auction scans in threads at the starting prices: another auction
    # path, the same (lexicographically smallest) optimum
    monkeypatch.setattr(auction, "SCAN_THREADS", 2)
    two = dense.exact_dense(W, integer=True, auction=True)
    assert np.array_equal(one[0], two[0]) and np.array_equal(one[1], two[1])
    assert two[2]["auction_scans"] >= W.shape[0]


@settings(max_examples=80, deadline=None)
@given(st.integers(1, 40), st.integers(0, 10**6), st.integers(1, 6), st.integers(1, 4),
       st.booleans())
def test_auction_scan_keeps_the_best_values_earlier_offers_first(n_c, seed, k, distinct,
                                                                 seeded):
    """A row's scan: its k + 1 best values (the previous list offered first, in its order,
    then the other columns left to right; among equal values the earlier offer stays),
    the first k as its new list and the (k + 1)-th returned as the bound; the scratch
    marks are all cleared again."""
    from sdcdist.linkage.assignment import auction
    rng = np.random.default_rng(seed)
    W = rng.integers(0, distinct, size=(2, n_c)).astype(float)
    p = rng.integers(0, 2, size=n_c).astype(float)
    lc = np.full((2, k), -1, dtype=np.int64)
    lw = np.zeros((2, k))
    if seeded:
        old = rng.permutation(n_c)[:min(k, n_c)]
        lc[1, :old.size] = old
        lw[1, :old.size] = W[1, old]
    order = [int(j) for j in lc[1] if j >= 0]
    order += [j for j in range(n_c) if j not in order]
    want = sorted(order, key=lambda j: (-(W[1, j] - p[j]), order.index(j)))
    mark = np.zeros(n_c, dtype=np.bool_)
    bound = auction._auction_scan(W, -1.0, 0.0, 1, p, lc, lw, mark)
    got = [int(j) for j in lc[1] if j >= 0]
    assert got == want[:k] and not mark.any()
    assert np.array_equal(lw[1, :len(got)], W[1, got])
    assert bound == (W[1, want[k]] - p[want[k]] if n_c > k else -np.inf)


@pytest.mark.parametrize("unmatched", [False, True])
@pytest.mark.parametrize("batch", [None, 64])
def test_auction_batches_are_the_same_auction_for_any_threads(unmatched, batch, monkeypatch):
    """Rows whose lists are spent wait and are scanned together at that moment's prices,
    in threads (from SCAN_PAIR_MIN rows a thread) or in the auction's own loop: the same
    bids, scans, prices and lists for any number of threads and any hand-off, with the
    batches limited (AUCTION_BATCH rows) or not."""
    from sdcdist.linkage.assignment import auction
    monkeypatch.setattr(auction, "AUCTION_BATCH", batch)
    rng = np.random.default_rng(12)
    W = rng.integers(-40, 8, size=(1100, 1100)).astype(float)       # >= SCAN_THREADS_MIN
    W[300:600] = W[0]
    um = rng.integers(-30, 0, size=1100).astype(float) if unmatched else np.zeros(0)
    calls = []
    scan = auction._scan_rows
    monkeypatch.setattr(auction, "_scan_rows", lambda *a: calls.append(1) or scan(*a))
    out = []
    for threads, pair_min in ((1, 4), (2, 4), (3, 1), (2, 10**6)):
        monkeypatch.setattr(auction, "SCAN_THREADS", threads)
        monkeypatch.setattr(auction, "SCAN_PAIR_MIN", pair_min)
        calls.clear()
        out.append(auction.auction_start(W, -1.0, um, auction.AUCTION_LIST, W.min(), W.max()))
        # one block of first scans a thread; then batches handed to the threads unless
        # one thread or a hand-off above any batch (every scan in the auction's loop)
        assert (len(calls) == threads) == (threads == 1 or pair_min > 1100)
    assert out[0][3]["auction_scans"] > W.shape[0]           # rows rescanned in batches
    for got in out[1:]:
        assert all(np.array_equal(a, b) for a, b in zip(got[:3], out[0][:3]))
        assert got[3] == out[0][3]


@settings(max_examples=200, deadline=None)
@given(st.integers(0, 12), st.integers(1, 12), st.data())
def test_csr_is_the_stable_sort_of_the_edges_without_repeats(n_r, n_c, data):
    """The CSR graph of an edge list (two counting sorts) is its edges sorted by (row, col),
    the first of repeated edges kept (as np.argsort(row * n_c + col, kind="stable") keeps
    it), rows without edges included."""
    from sdcdist.linkage.assignment.sparse import csr
    m = data.draw(st.integers(0, 60)) if n_r else 0
    er = np.array(data.draw(st.lists(st.integers(0, max(n_r - 1, 0)), min_size=m,
                                     max_size=m)), dtype=np.int64)
    ec = np.array(data.draw(st.lists(st.integers(0, n_c - 1), min_size=m, max_size=m)),
                  dtype=np.int64)
    key = er * n_c + ec
    order = np.argsort(key, kind="stable")
    first = np.r_[True, key[order][1:] != key[order][:-1]] if m else np.zeros(0, bool)
    order = order[first]
    indptr, cols, got = csr(er, ec, n_r, n_c)
    np.testing.assert_array_equal(got, order)
    np.testing.assert_array_equal(cols, ec[order])
    np.testing.assert_array_equal(indptr, np.searchsorted(er[order], np.arange(n_r + 1)))
