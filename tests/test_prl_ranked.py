"""The candidate search's leaves bounded by ranks (:mod:`sdcdist.linkage.prl.ranked`): a bound
that never drops a pair the all-pairs candidates need, and the same candidates bit for bit."""

import numpy as np
import pytest

from sdcdist.linkage import prl
from sdcdist.linkage.prl import kdtree, ranked, topc
from sdcdist.linkage.prl.comparison import transposed


def _sides(A, B, cmp):
    cols = tuple(range(A.shape[1]))
    return (prl.prepare_side(A, cols, cmp, side="a"), prl.prepare_side(B, cols, cmp, side="b"))


def _rounded(n, K, seed, *, cat=None):
    """Tie-heavy keys on a coarse grid (differences land on the tolerances), NaN in every
    column, exact copies; a categorical column of 3 codes where asked."""
    rng = np.random.default_rng(seed)
    A = np.round(rng.normal(size=(n, K)) * 4) / 4
    B = A[rng.permutation(n)] + np.round(rng.normal(size=(n, K)) * 2) / 8
    B[::5] = A[::5]
    A[rng.random((n, K)) < 0.05] = np.nan
    B[rng.random((n, K)) < 0.05] = np.nan
    if cat is not None:
        A[:, cat] = np.floor(np.abs(np.nan_to_num(A[:, cat]))) % 3
        B[:, cat] = np.floor(np.abs(np.nan_to_num(B[:, cat]))) % 3
    return A, B


def _fit(a, b, cmp):
    counts = prl.pattern_counts(a, b, cmp)
    N = a["v"].shape[0] * b["v"].shape[0]
    n = min(a["v"].shape[0], b["v"].shape[0])
    return prl.weight_params(prl.em(counts, cmp, p_start=n / N, p_max=n / N), cmp)


@pytest.mark.parametrize("K,cat,weights", [(4, None, "linear"), (5, 2, "linear"),
                                           (3, 1, "step"), (8, None, "linear")])
def test_ranked_search_equals_all_pairs(K, cat, weights):
    """Default ``s`` levels, NaN, ties, copies, a categorical key: the ranked search's
    candidates, weights and tie order are the all-pairs ones, with several blocks of ranks
    (small ones too) and leaves of any size, and it weighs fewer pairs than the plain
    search on the same leaves."""
    A, B = _rounded(1500, K, seed=K, cat=cat)
    cmp = prl.comparison(K, categorical=None if cat is None else [k == cat for k in range(K)],
                         weights=weights)
    a, b = _sides(A, B[:500], cmp)
    wp = _fit(a, b, cmp)
    ref = prl.topc_block(a, b, cmp, wp, 20)
    scale = kdtree.split_scale(wp, cmp)
    plain = topc.topc_search(kdtree.build_tree(a, leaf_size=64, scale=scale, ranks=False), b, cmp,
                             wp, 20)
    assert not plain["ranked"]
    for leaf, rows in ((None, ranked.BLOCK_ROWS), (64, 200), (7, 100), (1024, 700)):
        tree = kdtree.build_tree(a, leaf_size=leaf, scale=scale, ranks=False)
        tc = ranked.constant_tolerances(tree["tolT"], cmp.n_levels)
        tree["ranks"] = ranked.rank_blocks(tree, tc, rows=rows)
        got = topc.topc_search(tree, b, cmp, wp, 20)
        assert got["ranked"]
        np.testing.assert_array_equal(got["idx"], ref["idx"])
        np.testing.assert_array_equal(got["w"], ref["w"])
        if leaf == 64:
            assert got["visited"] < plain["visited"]


def test_infinite_values_take_the_plain_search():
    """An infinite value (refused as input, but the kernels may meet one) is left to the
    plain search: ranks are not used, the candidates are the plain search's."""
    A, B = _rounded(600, 3, seed=9)
    cmp = prl.comparison(3)
    a, b = _sides(A, B[:200], cmp)
    wp = _fit(a, b, cmp)
    b["v"][::37, 1] = np.inf
    b["v"][5::41, 0] = -np.inf
    tree = kdtree.build_tree(a, scale=kdtree.split_scale(wp, cmp))
    assert "ranks" in tree
    got = topc.topc_search(tree, b, cmp, wp, 20)
    assert not got["ranked"]
    ref = topc.topc_search({k: v for k, v in tree.items() if k != "ranks"}, b, cmp, wp, 20)
    np.testing.assert_array_equal(got["idx"], ref["idx"])
    np.testing.assert_array_equal(got["w"], ref["w"])


def test_per_row_tolerances_build_no_ranks():
    A, B = _rounded(300, 3, seed=2)
    cmp = prl.comparison(3, method="l", t=0.05)
    a, _ = _sides(A, B, cmp)
    tree = kdtree.build_tree(a)
    assert "ranks" not in tree and tree["left"].size > 1


def _exact_interval(x, tb):
    """The bound's interval of a difference: the bound tolerances it misses (NaN all)."""
    return int(sum(not (x <= v) for v in tb))


def test_level_bounds_hold_every_column_weight():
    """Every pair's column weight is at most the bound of its interval (exact agreement,
    NaN, differences on the tolerances), and the bounds never rise with the interval."""
    K = 4
    A, B = _rounded(700, K, seed=5, cat=3)
    cmp = prl.comparison(K, categorical=[False, False, False, True])
    a, b = _sides(A, B[:150], cmp)
    wp = _fit(a, b, cmp)
    avT, tolT = transposed(a)
    tc = ranked.constant_tolerances(tolT, cmp.n_levels)
    tb = ranked.bound_tolerances(wp, cmp, tc)
    bt = ranked.bound_table(wp, cmp, tc)
    ub = ranked.level_bounds(wp, cmp, tb, tc)
    for k in range(K):
        L = int((tb[k] >= 0).sum())
        assert np.all(np.diff(np.maximum.accumulate(ub[k, :L + 1][::-1])[::-1]) <= 0)
        d = np.abs(avT[k][None, :] - b["v"][:, k][:, None]).ravel()
        i = np.array([_exact_interval(x, tb[k, :L]) for x in d])
        w = np.array([prl.weights.column_weight(int(wp.rule[k]), x, tolT, 0, k,
                                                int(cmp.n_levels[k]), wp.w_agr[k],
                                                wp.w_dis[k], wp.w_level, wp.lin) for x in d])
        assert np.all(w <= ub[k, i] + 1e-12)
    assert bt["dq"].dtype == np.int16 and np.all(bt["nint"] >= 2)


def test_block_intervals_hold_every_meeting_rank():
    """The runs of ranks of one block: each holds every rank whose value meets the
    tolerance (the very predicate), is at most _SKIP - 1 wider at each end, and they nest;
    a non-finite B value meets nothing. Blocks of 2^15 rows: the int16 test is exact up
    to there."""
    rng = np.random.default_rng(3)
    K, n = 2, 32768
    v = np.round(rng.normal(size=(K, n)) * 50) / 8
    v[0, ::97] = np.nan
    tree = {"start": np.array([0]), "stop": np.array([n]), "left": np.array([-1]),
            "right": np.array([-1]), "vT": np.ascontiguousarray(v)}
    rk = ranked.rank_blocks(tree, np.zeros((K, 0)))
    tb = np.array([[0.0, 0.125, 0.5, 2.0, 1e9], [0.25, 1.0, -1, -1, -1]])
    nint = np.array([6, 3])
    U = ranked.BOUND_U
    cst = np.empty((K, 2 * U), dtype=np.int16)
    sv = [np.sort(v[k]) for k in range(K)]              # NaN last: the ranks' order
    for x in [np.array([v[0, 5], v[1, 9]]), np.array([0.0, -100.0]), np.array([np.nan, 1e9]),
              np.array([np.inf, 3.0])]:
        ranked.block_intervals(rk["sk"], 0, rk["nfin"][0], x, tb, nint, cst)
        for k in range(K):
            r = np.arange(n, dtype=np.int16)
            prev = None
            for l in range(U):
                met = (r + cst[k, l]).astype(np.int16) < cst[k, U + l]
                if l >= nint[k] - 1 or not np.isfinite(x[k]):
                    assert not met.any()
                    continue
                exact = np.abs(sv[k] - x[k]) <= tb[k, l]
                assert np.all(met[exact])
                idx = np.flatnonzero(met)
                if exact.any():
                    e = np.flatnonzero(exact)
                    assert e[0] - idx[0] < ranked._SKIP and idx[-1] - e[-1] < ranked._SKIP
                if prev is not None:
                    assert np.all(met[prev])
                prev = met
        assert rk["rank"].dtype == np.int16


def test_leaf_keeps_every_pair_reaching_the_threshold():
    """Over one leaf of all A rows, at each row's k-th weight as threshold: every pair at or
    above it is returned, with its weight bit for bit as all pairs weigh it."""
    A, B = _rounded(900, 6, seed=8, cat=4)
    cmp = prl.comparison(6, categorical=[k == 4 for k in range(6)])
    a, b = _sides(A, B[:60], cmp)
    wp = _fit(a, b, cmp)
    tree = kdtree.build_tree(a, leaf_size=900, ranks=True)
    rk = tree["ranks"]
    bt = ranked.bound_table(wp, cmp, rk["tc"])
    W = prl.dense_weights({"v": np.ascontiguousarray(tree["vT"].T), "tol": a["tol"]}, b, cmp, wp)
    mags = np.abs(np.concatenate([wp.w_agr, wp.w_dis, wp.w_level.ravel()]))
    slack = 1e-9 * (1.0 + float(mags.sum()))
    n = 900
    acc, buf, w = np.empty(n, np.int16), np.empty(n, np.int64), np.empty(n)
    cst = np.empty((6, 2 * ranked.BOUND_U), dtype=np.int16)
    for j in range(60):
        bj = b["v"][j]
        ranked.block_intervals(rk["sk"], 0, rk["nfin"][0], bj, bt["tb"], bt["nint"], cst)
        for kth in (1, 20, 200):
            thr = np.sort(W[j])[::-1][kth - 1]
            tau = ranked.fixed_threshold(thr - slack, bt["S"], bt["lift"])
            ranked.leaf_bounds(rk["rank"], 0, n, cst, bt["dq"], acc)
            m = ranked.leaf_weigh(rk["vR"], 0, n, acc, tau, 32768, bj, wp.order, wp.rule,
                                  cmp.n_levels, tree["tolT"], wp.w_agr, wp.w_dis, wp.w_level,
                                  wp.lin, buf, w, np.empty((6, n)))
            assert set(np.flatnonzero(W[j] >= thr)) <= set(buf[:m])
            np.testing.assert_array_equal(w[:m], W[j, buf[:m]])
            if kth == 1:
                assert m < n
