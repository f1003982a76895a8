"""Distance-linkage kernels and drivers: blocked results equal the brute-force numpy computation."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from sdcdist.errors import SdcInputError
from sdcdist.linkage import distance
from sdcdist.linkage.distance_drivers import link_top2, nearest_candidates
from sdcdist.linkage.truth import (check_truth, invert_truth, row_truth, truth_counts,
                                   truth_from_ids)
from sdcdist.metrics import measure
from sdcdist.parallel import Runner


def brute_force_credit(Q, C, truth):
    """Expected nearest / second-nearest hits under random tie-breaking, all pairs at once."""
    D = distance.sq_distances(Q, C)
    first = second = 0.0
    for i in range(Q.shape[0]):
        t = truth[i]
        if t < 0:
            continue
        less = np.count_nonzero(D[i] < D[i, t])
        eq = np.count_nonzero(D[i] == D[i, t])
        # the true record's position is uniform in less+1 .. less+eq
        if less == 0:
            first += 1 / eq
        if less <= 1 < less + eq:
            second += 1 / eq
    return first, second


def _data(rng, n_q, n_c, ties):
    if ties:
        C = rng.integers(0, 3, size=(n_c, 2)).astype(float)
        Q = C[np.arange(n_q) % n_c] + rng.integers(-1, 2, size=(n_q, 2))
    else:
        C = rng.standard_normal((n_c, 3))
        Q = C[np.arange(n_q) % n_c] + 0.5 * rng.standard_normal((n_q, 3))
    return Q, C


@pytest.mark.parametrize("ties", [False, True])
@pytest.mark.parametrize("blocks", [(1, 1), (7, 13), (50, 200), (1000, 1000)])
def test_blocked_equals_brute_force(rng, ties, blocks):
    Q, C = _data(rng, 120, 150, ties)
    truth = row_truth(120, 150)
    ref = brute_force_credit(Q, C, truth)
    out = link_top2(Runner(), Q, C, 120, 150, Q.shape[1], block_rows=blocks)
    assert out["first"] == pytest.approx(ref[0], abs=1e-12)
    assert out["second"] == pytest.approx(ref[1], abs=1e-12)


def test_blocked_on_cluster_is_bit_identical(rng, client):
    Q, C = _data(rng, 90, 80, True)
    truth = row_truth(90, 80)              # the last 10 masked records have no true record
    ref = link_top2(Runner(), Q, C, 90, 80, 2, block_rows=(1000, 1000))
    for blocks in [(9, 11), (30, 7), (90, 80)]:
        out = link_top2(Runner(client), Q, C, 90, 80, 2, block_rows=blocks)
        assert out == ref
    assert ref["first"] == pytest.approx(brute_force_credit(Q, C, truth)[0], abs=1e-12)


def test_merge_top2_is_order_free(rng):
    D = rng.integers(0, 4, size=(30, 40)).astype(float)
    whole = distance.block_top2(D)
    parts = [distance.block_top2(D[:, s]) for s in (slice(0, 9), slice(9, 25), slice(25, 40))]
    for merged in (distance.merge_top2(*parts), distance.merge_top2(parts[2], parts[0], parts[1]),
                   distance.merge_top2(distance.merge_top2(parts[0], parts[1]), parts[2])):
        for k in whole:
            assert np.array_equal(whole[k], merged[k]), k


# -- the KD-tree path and the other distances -----------------------------------------

def brute_top2(Q, C, metric):
    """Reference top-2 (distinct distances with counts) from a full matrix, row by row."""
    D = distance.pair_distances(Q, C, metric)
    out = {k: [] for k in ("d1", "c1", "d2", "c2")}
    for row in D:
        vals, counts = np.unique(row, return_counts=True)
        out["d1"].append(vals[0])
        out["c1"].append(counts[0])
        out["d2"].append(vals[1] if len(vals) > 1 else np.inf)
        out["c2"].append(counts[1] if len(vals) > 1 else 0)
    return {k: np.array(v) for k, v in out.items()}


@pytest.mark.parametrize("metric", list(distance.METRICS))
@pytest.mark.parametrize("ties", [False, True])
def test_index_top2_equals_brute_force(rng, metric, ties):
    Q, C = _data(rng, 80, 200, ties)
    ref = brute_top2(Q, C, metric)
    got = distance.index_top2(Q, distance.build_index(C), metric, k=1 if ties else 3)
    for k in ref:
        assert np.array_equal(ref[k], got[k]), k


@pytest.mark.parametrize("metric", list(distance.METRICS))
@pytest.mark.parametrize("ties", [False, True])
def test_index_credit_top2_gives_the_exact_credits(rng, metric, ties):
    Q, C = _data(rng, 150, 150, ties)
    truth = row_truth(150, 150)
    truth[::9] = -1
    dtrue = distance.true_distances(Q, C, truth, metric)
    ref = distance.top2_link_credit(brute_top2(Q, C, metric), dtrue)
    index = distance.build_index(C)
    for eps in (0.0, 2.0):
        got = distance.top2_link_credit(distance.index_credit_top2(Q, dtrue, index, metric,
                                                                 eps=eps), dtrue)
        assert np.array_equal(ref[0], got[0]) and np.array_equal(ref[1], got[1])


def test_pair_distances_hand_computed():
    Q = np.array([[0.0, 0.0], [1.0, 2.0]])
    C = np.array([[3.0, 4.0], [1.0, 0.0]])
    assert distance.pair_distances(Q, C, "sqeuclidean").tolist() == [[25, 1], [8, 4]]
    assert distance.pair_distances(Q, C, "cityblock").tolist() == [[7, 1], [4, 2]]
    assert distance.pair_distances(Q, C, "chebyshev").tolist() == [[4, 1], [2, 2]]


def test_equal_distances_from_the_tree_stay_tied():
    # symmetric configurations whose tie cKDTree may see as a near-tie: the
    # recomputed distances must keep both candidates at exactly the same value
    C = np.array([[0.1, 0.7], [0.3, 0.7], [0.2, 0.8], [0.2, 0.6], [5.0, 5.0]])
    Q = np.array([[0.2, 0.7]])
    got = distance.index_top2(Q, distance.build_index(C))
    ref = brute_top2(Q, C, "sqeuclidean")
    for k in ref:
        assert np.array_equal(ref[k], got[k]), k


@pytest.mark.parametrize("method", ["index", "brute"])
@pytest.mark.parametrize("blocks", [(7, 13), (50, 200), None])
def test_single_integer_key_is_exact(rng, method, blocks):
    # heavy ties: one integer key with 5 values; every query ties with ~1/5 of the file
    C = rng.integers(0, 5, size=(400, 1)).astype(float)
    Q = C + rng.integers(-1, 2, size=C.shape)
    ref = brute_force_credit(Q, C, row_truth(400, 400))
    out = link_top2(Runner(), Q, C, 400, 400, 1, block_rows=blocks, method=method)
    assert out["first"] == pytest.approx(ref[0], abs=1e-12)
    assert out["second"] == pytest.approx(ref[1], abs=1e-12)


def test_heavy_ties_are_not_quadratic():
    # a million-candidate single-key file collapses to its few distinct values
    C = np.repeat(np.arange(10.0), 100_000)[:, None]
    index = distance.build_index(C)
    assert index.rows.shape == (10, 1) and index.weight.sum() == 1_000_000
    top = distance.index_top2(np.array([[3.0], [4.5]]), index)
    assert top["c1"].tolist() == [100_000, 200_000]
    assert top["c2"].tolist() == [200_000, 200_000]


@pytest.mark.parametrize("metric", list(distance.METRICS))
def test_link_top2_methods_blocks_and_cluster_agree(rng, client, metric):
    Q, C = _data(rng, 90, 130, True)
    truth = rng.permutation(130)[:90]
    truth[::7] = -1
    ref = link_top2(Runner(), Q, C, 90, 130, 2, metric=metric, truth=truth, method="brute",
                    block_rows=(1000, 1000), keep_nearest=True)
    D = distance.pair_distances(Q, C, metric)
    assert np.array_equal(ref["nearest"], D.min(axis=1))
    first = sum(1 / np.count_nonzero(D[i] == D[i, t]) for i, t in enumerate(truth)
                if t >= 0 and D[i, t] == D[i].min())
    assert ref["first"] == pytest.approx(first, abs=1e-12)
    for runner in (Runner(), Runner(client)):
        for method in ("index", "brute"):
            for blocks, keep in [((9, 11), True), ((30, 7), False), ((90, 130), False)]:
                out = link_top2(runner, Q, C, 90, 130, 2, metric=metric, truth=truth,
                                method=method, block_rows=blocks, keep_nearest=keep)
                assert out["first"] == ref["first"] and out["second"] == ref["second"]
                if keep:
                    assert np.array_equal(out["nearest"], ref["nearest"])


def test_nearest_candidates_are_the_c_nearest(rng, client):
    Q, C = _data(rng, 40, 60, True)
    D = distance.sq_distances(Q, C)
    for runner, blocks in ((Runner(), (7, 9)), (Runner(client), None)):
        d, rows = nearest_candidates(runner, Q, C, 40, 60, 2, 5, block_rows=blocks)
        assert d.shape == rows.shape == (40, 5)
        assert np.array_equal(np.take_along_axis(D, rows, 1), d)
        assert np.array_equal(d, np.sort(D, axis=1)[:, :5])
        assert all(len(set(r)) == 5 for r in rows.tolist())   # duplicates expand to rows


def test_pair_abs_sd_equals_all_pairs(rng):
    a, b = rng.standard_normal(50) * 3, rng.integers(0, 4, 70).astype(float)
    diff = np.abs(a[:, None] - b[None, :])
    assert distance.pair_abs_sd(a, b) == pytest.approx(diff.std(), rel=1e-12)


def test_truth_from_ids_and_inverse():
    t = truth_from_ids(np.array([10, 30, 20]), np.array([20, 40, 10]))
    assert t.tolist() == [2, -1, 0]
    assert invert_truth(t, 3, 3).tolist() == [2, -1, 0]
    with pytest.raises(SdcInputError, match="has 1 repeated values"):
        truth_from_ids(np.array([1, 1]), np.array([1]))
    with pytest.raises(SdcInputError, match="same original record"):
        invert_truth(np.array([0, 0]), 2, 2)
    assert truth_counts(t) == {"matched": 2, "unmatched": 1}


def test_identifiers_without_overlap_are_refused():
    """No masked identifier in the original file: an error, not a risk of 0 (issue 14)."""
    with pytest.raises(SdcInputError, match="identifier column 'pid' matches no record: none "
                                            "of the masked file's 2 records") as e:
        truth_from_ids(np.array([10, 30, 20]), np.array([40, 50]), column="pid")
    assert "40" not in str(e.value) and "--id" in str(e.value)
    with pytest.raises(SdcInputError, match="matches no record"):
        check_truth(np.array([-1, -1]), 5)
    with pytest.raises(SdcInputError, match="one row of the original file"):
        check_truth(np.array([0, 7]), 5)
    assert check_truth(np.array([-1, 3]), 5) == {"matched": 1, "unmatched": 1}
    assert truth_from_ids(np.array([1.0]), np.array([], dtype=float)).size == 0


@settings(max_examples=40, deadline=None)
@given(st.integers(1, 3), st.integers(1, 40), st.integers(1, 40), st.integers(0, 2**32 - 1))
def test_index_paths_equal_brute_force_property(m, n_q, n_c, seed):
    r = np.random.default_rng(seed)
    C = r.integers(-2, 3, size=(n_c, m)).astype(float)
    Q = r.integers(-2, 3, size=(n_q, m)) + r.choice([0.0, 0.5], size=(n_q, m))
    truth = r.integers(-1, n_c, size=n_q)
    index = distance.build_index(C)
    for metric in distance.METRICS:
        ref = brute_top2(Q, C, metric)
        got = distance.index_top2(Q, index, metric)
        for k in ref:
            assert np.array_equal(ref[k], got[k]), (metric, k)
        dtrue = distance.true_distances(Q, C, truth, metric)
        a = distance.top2_link_credit(ref, dtrue)
        b = distance.top2_link_credit(distance.index_credit_top2(Q, dtrue, index, metric), dtrue)
        assert np.array_equal(a[0], b[0]) and np.array_equal(a[1], b[1]), metric


# -- the row order of either file changes nothing ------------------------------------

def test_standardize_is_the_same_floats_in_every_row_order():
    """The means and sds are summed over each column's sorted values: a plain mean or sd
    over the rows in file order moves in its last bit when the rows are shuffled (this
    file is one where it does), and every z-score and distance moved with it."""
    rng = np.random.default_rng(0)
    X = rng.normal(size=(40, 3)) * 1e3 + 1 / 3
    X[:4, 2] = [-0.0, 0.0, -0.0, 0.0]
    Z = distance.standardize(X)
    plain_moved = 0
    for _ in range(10):
        p = rng.permutation(40)
        plain_moved += (X[p].mean(axis=0).tobytes() != X.mean(axis=0).tobytes()
                        or X[p].std(axis=0, ddof=1).tobytes() != X.std(axis=0, ddof=1).tobytes())
        assert distance.standardize(X[p]).tobytes() == Z[p].tobytes()
        assert distance.standardize(X[p], (2, 0), names=("c", "a")).tobytes() \
            == Z[p][:, [2, 0]].tobytes()
    assert plain_moved > 0
    assert Z == pytest.approx((X - X.mean(axis=0)) / X.std(axis=0, ddof=1), rel=1e-12, abs=1e-12)
    with pytest.raises(SdcInputError, match=r"\['b'\] are constant in the masked file"):
        distance.standardize(np.c_[X[:, 0], np.full(40, 0.5)], what="masked file",
                             names=("a", "b"))
    with pytest.raises(SdcInputError, match="constant"):
        distance.standardize(X[:1])


@pytest.mark.parametrize("value, holes", [(0.1, ()), (1 / 3, ()), (0.1, (2, 57, 199))])
def test_standardize_refuses_a_constant_column_whose_sd_is_not_zero(value, holes):
    """Copies of 0.1 (or 1/3) have a computed sd of about 1e-17: the z-scores were rounding
    noise of size 1 that looked like data. Constant means all non-missing values equal."""
    rng = np.random.default_rng(3)
    c = np.full(1000, value)
    c[list(holes)] = np.nan
    X = np.c_[rng.standard_normal(1000), c]
    assert distance.column_moments(X[:, 1:])[1][0] > 0       # an sd test accepted it
    with pytest.raises(SdcInputError, match=r"Column\(s\) \['b'\] are constant in the "
                       r"original file; distance linkage standardises"):
        distance.standardize(X, what="original file", names=("a", "b"))
    with pytest.raises(SdcInputError, match=r"\[1\] are constant"):
        distance.standardize(X, (0, 1))
    # two values one ulp apart are not constant: the sd is tiny but real
    X[:, 1] = np.where(np.arange(1000) % 2 == 0, 0.1, np.nextafter(0.1, 1.0))
    Z = distance.standardize(X)
    lo, hi = Z[0, 1], Z[1, 1]          # (the values rounded at the ulp scale, but ordered)
    assert np.isfinite(Z).all() and lo < hi and set(Z[:, 1]) == {lo, hi}


def test_pair_abs_sd_does_not_cancel_far_from_zero(rng):
    """Both files moved by 2^52 (every value still an exact integer) give the same float as
    unmoved: the prefix sums are taken relative to a middle value, where at such offsets
    they cancelled (an sd of 0 on keys 9007199254740993 + 0..99, and DRL2 crashed)."""
    a = rng.integers(0, 100, 60).astype(float)
    b = a + rng.integers(-3, 4, 60)
    ref = distance.pair_abs_sd(a, b)
    assert ref == pytest.approx(np.abs(a[:, None] - b[None, :]).std(), rel=1e-12)
    assert distance.pair_abs_sd(a + 2.0 ** 52, b + 2.0 ** 52) == ref
    assert distance.pair_abs_sd(a - 2.0 ** 52, b - 2.0 ** 52) == ref


def test_pair_abs_sd_is_the_same_float_in_every_row_order():
    """DRL2's scale sums over both columns in sorted order (it summed ``a`` in file order)."""
    rng = np.random.default_rng(1)
    a, b = rng.normal(size=60) * 1e3 + 1 / 3, rng.integers(0, 5, 45) * 0.7
    ref = distance.pair_abs_sd(a, b)
    for _ in range(10):
        assert distance.pair_abs_sd(a[rng.permutation(60)], b[rng.permutation(45)]) == ref


def _tie_heavy(seed, n_a, n_b, levels, keys, step):
    """Few distinct rows (many identical records) on a grid of ``step`` (an inexact float),
    and a masked copy of a sample of them with some values moved one step."""
    rng = np.random.default_rng(seed)
    A = rng.integers(0, levels, size=(n_a, keys)).astype(float)
    A[:, 0] += 10.0 * np.arange(n_a) % 3
    truth = rng.permutation(n_a)[:n_b]
    B = A[truth].copy()
    B[rng.random(B.shape) < 0.15] += 1.0
    return A * step, B * step, truth


def _shuffled(seed, A, B, truth):
    """Both files' rows permuted, the truth (masked row -> original row) permuted along."""
    rng = np.random.default_rng(seed + 1)
    pa, pb = rng.permutation(A.shape[0]), rng.permutation(B.shape[0])
    inv_a = np.empty_like(pa)
    inv_a[pa] = np.arange(pa.size)
    return A[pa], B[pb], inv_a[truth[pb]], pb


def _dld_linkage(A, B, truth):
    """Each masked row's top-2 partial against the original file, its tie credits, the
    integer credit counts of the driver and the metrics."""
    Za, Zb = distance.standardize(A), distance.standardize(B)
    top = distance.index_top2(Zb, distance.build_index(Za))
    credit = distance.top2_link_credit(top, distance.true_distances(Zb, Za, truth))
    out = link_top2(Runner(), Zb, Za, len(B), len(A), A.shape[1], truth=truth, counts=True)
    cols = ["x", "y", "z"][:A.shape[1]]
    r = measure(A, B, ["DLD", "DLD2", "GDBRL"], columns=cols, keysets=[cols], truth=truth)
    return top, credit, out, {k: r[k].value for k in ("DLD", "DLD2", "GDBRL")}


#: tie-heavy files (seed, original rows, masked rows, levels, key columns, step) on which a
#: shuffle of the rows changed the figures before the moments were order-free
#: (DLD 37.5 % against 33.3 %, DLD2 20.8 against 16.7; DLD 68.8 against 54.2, DLD2 12.5
#: against 29.2, GDBRL 75 against 62.5; DLD2 27.1 against 37.5)
ORDER_CHANGED = [(1051, 11, 6, 4, 1, 0.7), (1666, 14, 8, 2, 3, 1 / 3), (335, 12, 8, 2, 3, 0.7)]


@pytest.mark.parametrize("seed, n_a, n_b, levels, keys, step", ORDER_CHANGED + [
    (7, 30, 20, 3, 2, 0.1), (8, 25, 25, 2, 2, 1.0), (9, 40, 33, 3, 3, 0.7),
    (10, 9, 5, 2, 1, 1 / 3)])
def test_dld_does_not_depend_on_the_row_order(seed, n_a, n_b, levels, keys, step):
    """DLD, DLD2 (and GDBRL on the same z-scores): each masked record's nearest and
    second-nearest distances with their tie counts, its credits, the integer counts and
    the figures are the same when either file's rows are permuted."""
    A, B, truth = _tie_heavy(seed, n_a, n_b, levels, keys, step)
    assert all(np.ptp(X[:, k]) > 0 for X in (A, B) for k in range(keys))
    top, credit, out, vals = _dld_linkage(A, B, truth)
    Ap, Bp, tp, pb = _shuffled(seed, A, B, truth)
    top_p, credit_p, out_p, vals_p = _dld_linkage(Ap, Bp, tp)
    for k in top:
        assert top_p[k].tobytes() == top[k][pb].tobytes(), k
    for c, c_p in zip(credit, credit_p):
        assert np.array_equal(c_p, c[pb])
    for k in ("first_counts", "second_counts"):
        assert np.array_equal(out_p[k], out[k]), k
    assert {k: out_p[k] for k in ("first", "second", "first_hits", "second_hits")} == \
        {k: out[k] for k in ("first", "second", "first_hits", "second_hits")}
    assert vals_p == vals
