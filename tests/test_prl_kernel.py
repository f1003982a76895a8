"""The dense pattern-count kernel's sorted column and uint16 histogram, and the candidate
search's kernels: the same counts and candidates as the all-pairs sparse kernel / pass."""

import warnings

import numba
import numpy as np
import pytest

from sdcdist.linkage import prl
from sdcdist.linkage.prl import kdtree, kept, topc, weights
from sdcdist.linkage.prl.comparison import MAX_LEVELS, RULE_LINEAR, same_tolerances, transposed
from sdcdist.linkage.prl.weights import column_weight, linear_column


def _same(x, y):
    np.testing.assert_array_equal(x[0], y[0])
    np.testing.assert_array_equal(x[1], y[1])


def _sides(A, B, cmp):
    cols = tuple(range(A.shape[1]))
    return (prl.prepare_side(A, cols, cmp, side="a"), prl.prepare_side(B, cols, cmp, side="b"))


def _rounded(n, K, seed):
    """Tie-heavy numeric keys with NaN everywhere, the last column included (values on a
    coarse grid, so that differences land exactly on the tolerances)."""
    rng = np.random.default_rng(seed)
    A = np.round(rng.normal(size=(n, K)) * 4) / 4
    B = A + np.round(rng.normal(size=(n, K)) * 2) / 8
    A[rng.random((n, K)) < 0.05] = np.nan
    B[rng.random((n, K)) < 0.05] = np.nan
    return A, B


@pytest.mark.parametrize("K", [1, 3, 8])
def test_sorted_last_column_equals_sparse(K):
    """The last column (sorted, levels by binary search) on numeric 's' keys with NaN, ties,
    differences exactly on a tolerance and infinite values: the sparse kernel's counts."""
    A, B = _rounded(700, K, seed=K)
    cmp = prl.comparison(K)
    a, b = _sides(A, B, cmp)
    # infinities after the tolerances are fixed (finite): A and B, both signs
    a["v"][::53, K - 1] = np.inf
    a["v"][7::61, K - 1] = -np.inf
    b["v"][::47, K - 1] = np.inf
    b["v"][5::59, K - 1] = -np.inf
    _same(prl.pattern_counts(a, b, cmp, kernel="dense"),
          prl.pattern_counts(a, b, cmp, kernel="sparse"))
    # -0.0 and 0.0 are equal values
    a["v"][::3, K - 1] = -0.0
    b["v"][::4, K - 1] = 0.0
    _same(prl.pattern_counts(a, b, cmp, kernel="dense"),
          prl.pattern_counts(a, b, cmp, kernel="sparse"))


def test_uint16_histogram_wraps_exactly():
    """More than 2^16 pairs of one pattern (all records equal) and flushes into int64: the
    uint16 histograms' wraps are carried, the counts exact (both dense kernels)."""
    K = 8
    A = np.zeros((400, K))
    B = np.zeros((300, K))
    A[:10] = 1.0                         # a second pattern, and a spread for the sd
    cmp = prl.comparison(K)
    a, b = _sides(A, B, cmp)
    dense = prl.pattern_counts(a, b, cmp, kernel="dense")
    _same(dense, prl.pattern_counts(a, b, cmp, kernel="sparse"))
    assert dense[1].max() == 390 * 300 > 1 << 16
    avT, tolT = transposed(a)
    tc, const = prl.patterns._const_tolerances(tolT, cmp.n_levels)
    flushed = prl.patterns._counts_flat(avT, tolT, tc, const, b["v"], cmp.n_levels, cmp.radix,
                                        cmp.n_patterns, 1, 70_000)
    assert flushed[0].size == cmp.n_patterns
    _same(prl.hists.sparse_of_hist(*flushed), dense)
    # the rank kernel's uint16 histogram the same way (and without a flush)
    for flush in (70_000, prl.patterns._FLUSH_PAIRS):
        _same(prl.hists.sparse_of_hist(*_ranked(a, b, cmp, 400, 300, 4096, flush)), dense)


@pytest.mark.parametrize("method", ["s", "l"])
def test_search_linear_six_levels_equals_all_pairs(method):
    """The candidate search's branch-free linear weight of six-level columns (NaN, exact
    agreement on tolerance 0, ties, per-row tolerances with ``l``): the all-pairs
    candidates and weights, bit for bit."""
    K = 4
    A, B = _rounded(900, K, seed=3)
    cmp = prl.comparison(K, method=method, t=(0, 0.1, 0.25, 0.5, 1.0))
    a, b = _sides(A, B[:400], cmp)
    counts = prl.pattern_counts(a, b, cmp)
    N = 900 * 400
    wp = prl.weight_params(prl.em(counts, cmp, p_start=400 / N, p_max=400 / N), cmp)
    ref = prl.topc_block(a, b, cmp, wp, 20)
    for leaf in (16, 128):
        tree = kdtree.build_tree(a, leaf_size=leaf, scale=kdtree.split_scale(wp, cmp))
        got = topc.topc_search(tree, b, cmp, wp, 20)
        np.testing.assert_array_equal(got["idx"], ref["idx"])
        np.testing.assert_array_equal(got["w"], ref["w"])


@pytest.mark.parametrize("method", ["s", "l"])
def test_dense_weights_branch_free_equal_pair_by_pair(method):
    """The all-pairs weights (dense matrix and the all-pairs candidates' rows, where six-level
    linear columns take the branch-free loop) equal the pair-by-pair formula
    (:func:`~sdcdist.linkage.prl.weights.column_weight`) bit for bit: NaN, ties, differences
    on the tolerances, exact agreement on tolerance 0, a categorical key beside them."""
    K = 5
    A, B = _rounded(300, K, seed=5)
    A[:, 4] = np.round(np.abs(A[:, 4]))
    B[:, 4] = A[:, 4]
    B[::7, 4] = 0.0
    cat = [False, False, False, False, True]
    t = {"s": {}, "l": {"t": (0, 0.1, 0.25, 0.5, 1.0)}}[method]
    cmp = prl.comparison(K, method=method, categorical=cat, **t)
    a, b = _sides(A, B[:200], cmp)
    counts = prl.pattern_counts(a, b, cmp)
    N = 300 * 200
    wp = prl.weight_params(prl.em(counts, cmp, p_start=200 / N, p_max=200 / N), cmp)
    assert np.count_nonzero((cmp.rule == 2) & (cmp.n_levels == 6)) == 4
    W = prl.dense_weights(a, b, cmp, wp)
    jb, ia = np.divmod(np.arange(200 * 300), 300)
    ref = prl.pair_weights(a, b, ia, jb, cmp, wp).reshape(200, 300)
    np.testing.assert_array_equal(W, ref)
    top = prl.topc_block(a, b, cmp, wp, 300)
    np.testing.assert_array_equal(top["w"], np.take_along_axis(ref, top["idx"], axis=1))


def _brute_s(A, B, cmp):
    """The ``s`` comparison's counts straight from the CATALOG: level = number of
    tolerances t sd(A column) that |a - b| exceeds (NaN exceeds all)."""
    sd = np.nanstd(A, axis=0, ddof=1)
    code = np.zeros((B.shape[0], A.shape[0]), dtype=np.int64)
    for k, lev in enumerate(cmp.levels):
        d = np.abs(A[:, k][None, :] - B[:, k][:, None])
        code += sum(~(d <= sd[k] * t) for t in lev).astype(np.int64) * int(cmp.radix[k])
    return prl.sparse_counts(code.ravel())


def _ranked(a, b, cmp, rank_rows, walk_rows, chunk, flush=prl.patterns._FLUSH_PAIRS):
    avT, tolT = transposed(a)
    tc, const = prl.patterns._const_tolerances(tolT, cmp.n_levels)
    assert prl.patterns._rank_eligible(tc, const, cmp.n_levels)
    P = int(cmp.n_patterns)
    nhist = prl.patterns._n_hists(P)
    return prl.patterns._counts_ranked(avT, tc, np.ascontiguousarray(b["v"]), cmp.n_levels,
                                       cmp.radix, P, nhist, flush, rank_rows, walk_rows, chunk)


@pytest.mark.parametrize("K,options", [
    (8, {}),                                                    # the default, 6^8 patterns
    (3, {}),                                                    # interleaved histograms
    (4, {"t": 0.2}),                                            # binary
    (4, {"t": [[0.1], [0, 0.5, 1.0], [0.2, 0.3], [0, 0.1, 0.25, 0.5, 1.0]]}),
    (6, {"categorical": [False, True, False, False, False, True]}),
])
def test_rank_kernel_equals_sparse_and_brute_force(K, options):
    """The rank kernel (every column's tolerances the same on every row): NaN, infinities,
    -0.0, ties, differences exactly on a tolerance, categorical codes, per-column levels;
    A ranked and B walked in small pieces, codes in small chunks, flushed often: the sparse
    kernel's counts and the brute-force CATALOG formula's, bit for bit."""
    A, B = _rounded(600, K, seed=K + 10)
    cat = options.get("categorical")
    if cat:
        for k, c in enumerate(cat):
            if c:
                A[:, k] = np.round(np.abs(A[:, k]))
                B[:, k] = np.where(np.arange(600) % 3 == 0, A[:, k], np.round(np.abs(B[:, k])))
    cmp = prl.comparison(K, **options)
    a, b = _sides(A, B[:450], cmp)
    ref = prl.pattern_counts(a, b, cmp, kernel="sparse")
    if not options:
        _same(ref, _brute_s(A, B[:450], cmp))
    _same(prl.pattern_counts(a, b, cmp, kernel="dense"), ref)
    # tolerances on the values' grid (multiples of 1/8): many differences exactly on one
    for k, lev in enumerate(cmp.levels):
        for l, t in enumerate(lev):
            a["tol"][:, k, l] = 0.0 if t == 0 else 0.125 * (l + 1)
    ref = prl.pattern_counts(a, b, cmp, kernel="sparse")
    _same(prl.pattern_counts(a, b, cmp, kernel="dense"), ref)
    for rank_rows, walk_rows, chunk in [(97, 31, 16), (600, 450, 2048), (256, 7, 40)]:
        out = _ranked(a, b, cmp, rank_rows, walk_rows, chunk, flush=5000)
        assert out[0].size == cmp.n_patterns                    # it did flush
        _same(prl.hists.sparse_of_hist(*out), ref)
    # infinities (after the tolerances are fixed) and signed zeros in every column
    for k in range(K):
        a["v"][k::53, k] = np.inf
        a["v"][k + 7::61, k] = -np.inf
        b["v"][k::47, k] = np.inf
        b["v"][k + 5::59, k] = -np.inf
        a["v"][k + 1::9, k] = -0.0
        b["v"][k + 2::11, k] = 0.0
    ref = prl.pattern_counts(a, b, cmp, kernel="sparse")
    _same(prl.pattern_counts(a, b, cmp, kernel="dense"), ref)
    _same(prl.hists.sparse_of_hist(*_ranked(a, b, cmp, 97, 31, 16)), ref)


def test_rank_kernel_skips_the_empty_first_tolerance_row_by_row():
    """Continuous values: a B row no A value equals in any column skips the test of the
    first tolerance (0); B rows that equal an A value in one column (each column in turn,
    NaN in some) test it. Both kinds in every walk and chunk: the brute-force CATALOG
    counts, bit for bit."""
    rng = np.random.default_rng(5)
    A = rng.normal(size=(700, 8))
    B = A[rng.permutation(700)[:500]] + rng.normal(scale=0.3, size=(500, 8))
    for j in range(0, 500, 3):                   # every third B row: one exact equality
        k = j % 8
        B[j, k] = A[(7 * j) % 700, k]
    B[::11, 2] = np.nan
    eq = (B[:, None, :] == A[None, :, :]).any(axis=(1, 2))
    assert 0 < eq.sum() < 500
    cmp = prl.comparison(8)
    a, b = _sides(A, B, cmp)
    ref = _brute_s(A, B, cmp)
    _same(prl.pattern_counts(a, b, cmp, kernel="dense"), ref)
    _same(prl.pattern_counts(a, b, cmp, kernel="sparse"), ref)
    for rank_rows, walk_rows, chunk in [(97, 31, 16), (700, 500, 4096)]:
        _same(prl.hists.sparse_of_hist(*_ranked(a, b, cmp, rank_rows, walk_rows, chunk)),
              ref)


def test_rank_kernel_at_its_largest_block():
    """A block of RANK_ROWS A rows, ranked at once (int16 ranks up to 32,767): runs that
    start at rank 0, end at the last rank, or span the whole block (a two-valued column,
    every A value within 1 sd of the B value halfway between), NaN and ties: the sparse
    kernel's counts, bit for bit."""
    m = prl.patterns.RANK_ROWS
    rng = np.random.default_rng(8)
    A = np.round(rng.normal(size=(m, 3)) * 8) / 8
    A[:, 0] = np.arange(m) % 2                       # sd just above 0.5
    A[rng.random(m) < 0.01, 2] = np.nan
    B = np.round(rng.normal(size=(40, 3)) * 8) / 8
    B[:10, 0] = 0.5                                  # meets every A row's 1 sd
    B[10:20, 1] = [A[:, 1].min() - 1, A[:, 1].max() + 1] * 5
    B[::7, 2] = np.nan
    cmp = prl.comparison(3)
    a, b = _sides(A, B, cmp)
    _same(prl.pattern_counts(a, b, cmp, kernel="dense"),
          prl.pattern_counts(a, b, cmp, kernel="sparse"))


def test_rank_kernel_takes_only_row_independent_tolerances():
    """Per-row tolerances (``l``) and more tolerances than unrolled keep the column-by-column
    kernel; the default comparison takes the rank kernel."""
    def eligible(cmp, A):
        a, _ = _sides(A, A, cmp)
        avT, tolT = transposed(a)
        tc, const = prl.patterns._const_tolerances(tolT, cmp.n_levels)
        return prl.patterns._rank_eligible(tc, const, cmp.n_levels)
    A, _ = _rounded(50, 3, seed=1)
    assert eligible(prl.comparison(3), A)
    assert not eligible(prl.comparison(3, method="l", t=(0.02, 0.05)), A)
    assert not eligible(prl.comparison(3, t=(0, 0.05, 0.1, 0.2, 0.3, 0.5, 1.0)), A)


@pytest.mark.parametrize("K", [1, 8])
def test_rank_rows_in_any_order(K):
    """The rank kernel takes the last column's levels from its runs only when the A rows
    are in its order (ranks = positions); A rows in any other order compute that column
    pair by pair: the same counts as the sparse kernel either way."""
    A, B = _rounded(500, K, seed=K + 30)
    cmp = prl.comparison(K)
    a, b = _sides(A, B[:300], cmp)
    ref = prl.pattern_counts(a, b, cmp, kernel="sparse")
    avT, tolT = transposed(a)
    tc, _ = prl.patterns._const_tolerances(tolT, cmp.n_levels)
    P = int(cmp.n_patterns)
    nhist = prl.patterns._n_hists(P)
    for order in (np.argsort(avT[K - 1], kind="stable"), np.arange(500)[::-1]):
        av = np.ascontiguousarray(avT[:, order])
        rank, sv, nfin = prl.patterns._rank_side(av)
        assert np.array_equal(rank[K - 1], np.arange(500)) == (order[0] != 499)
        h = np.zeros((nhist, P), dtype=np.uint32)
        h16 = np.zeros(P if nhist == 1 else 0, dtype=np.uint16)
        total, _ = prl.patterns._counts_ranked_rows(
            rank, sv, nfin, tc, np.ascontiguousarray(b["v"]), cmp.n_levels, cmp.radix, h, h16,
            np.zeros(0, dtype=np.int64), 0, prl.patterns._FLUSH_PAIRS, 64, 96,
            np.zeros(0, dtype=np.int32))
        if h16.size:
            h[0] += h16
        _same(prl.hists.sparse_of_hist(total, h), ref)


@numba.njit(error_model="numpy")
def _linear_both(avT, tolT, k, x, wl, lin, nlev, const):
    # the kernels' linear columns (vectorised at 6 levels) and column_weight pair by pair
    n = avT.shape[1]
    fast = np.zeros(n)
    linear_column(avT, tolT, k, 0, n, x, wl, lin, nlev, fast, const)
    ref = np.empty(n)
    for i in range(n):
        ref[i] = column_weight(RULE_LINEAR, abs(avT[k, i] - x), tolT, i, k, nlev, 0.0, 0.0, wl,
                               lin)
    return fast, ref


@pytest.mark.parametrize("exact", [False, True])
def test_linear_kernel_equals_column_weight_on_every_level_count(exact):
    """The kernels' linear columns (linear6_all, branch-free, at the default's 6 levels) give
    column_weight's float bit for bit on every level count a multi-level column can have (2 to MAX_LEVELS tolerances, with and without an
    exact-agreement level), on values that fall on the levels' middles, the tolerances,
    exactly on A's value, beyond the last tolerance and missing."""
    rng = np.random.default_rng(5)
    for n_tol in range(2, MAX_LEVELS + 1):
        t = np.cumsum(rng.uniform(0.05, 0.4, size=n_tol))
        if exact:
            t = np.r_[0.0, t[:-1]]
        cmp = prl.comparison(1, method="d", t=tuple(t))
        assert cmp.rule[0] == RULE_LINEAR and cmp.n_levels[0] == n_tol + 1
        A = np.r_[rng.normal(size=300), [0.0, 0.5, 1.0, np.nan, 1e300, -2.0]][:, None]
        a = prl.prepare_side(A, (0,), cmp, side="a")
        avT, tolT = transposed(a)
        wl = np.sort(rng.normal(size=(1, n_tol + 1)) * 5)[:, ::-1].copy()
        lin = weights.linear_segments(wl, cmp)
        xs = np.r_[A[:6, 0], A[0, 0] + tolT[0, :, 0],
                   A[0, 0] + 0.5 * tolT[0, 0, 0], np.nan, 10.0]
        for x in xs:
            fast, ref = _linear_both(avT, tolT, 0, float(x), wl, lin, n_tol + 1, False)
            np.testing.assert_array_equal(fast.view(np.int64), ref.view(np.int64))
        # tolerances the same on every row (the default s method): read once as scalars,
        # the same bits, also where |a - b| overflows to inf
        tolT = np.ascontiguousarray(np.broadcast_to(tolT[:, :, :1], tolT.shape))
        assert same_tolerances(tolT, cmp.n_levels).all()
        avT = np.ascontiguousarray(np.r_[avT[0], -1.7e308][None, :])
        tolT = np.ascontiguousarray(np.broadcast_to(tolT[:, :, :1], (1, n_tol, avT.shape[1])))
        for x in np.r_[xs, 1.7e308]:
            fast, ref = _linear_both(avT, tolT, 0, float(x), wl, lin, n_tol + 1, True)
            np.testing.assert_array_equal(fast.view(np.int64), ref.view(np.int64))
    varying = np.ones((2, 3, 4))
    varying[1, 2, 3] = 2.0
    assert same_tolerances(varying, np.array([4, 4])).tolist() == [True, False]


def _tree_reference(a, leaf_size, scale):
    """build_tree's documented rule, one node at a time in numpy: split at the median of the
    widest column, ties by row, leaves in row order."""
    v = np.asarray(a["v"])
    n, K = v.shape
    key = np.where(np.isnan(v), np.inf, v)
    chosen = np.ones(K, dtype=bool)
    if scale is not None:
        chosen[np.argsort(-scale, kind="stable")[kdtree.split_columns(n, leaf_size, K):]] = False
    perm = np.arange(n)
    nodes, stack = [], [(0, n, -1, 0)]
    while stack:
        s, e, parent, side = stack.pop()
        node = len(nodes)
        nodes.append([s, e, -1, -1, 0, 0.0])
        if parent >= 0:
            nodes[parent][2 + side] = node
        if e - s <= leaf_size:
            perm[s:e] = np.sort(perm[s:e])
            continue
        seg = key[perm[s:e]]
        fin = np.where(np.isfinite(seg), seg, np.nan)
        with np.errstate(invalid="ignore"):
            spread = (np.nanmax(np.where(np.isnan(fin), -np.inf, fin), axis=0)
                      - np.nanmin(np.where(np.isnan(fin), np.inf, fin), axis=0))
        if scale is not None:
            with np.errstate(invalid="ignore"), warnings.catch_warnings():
                warnings.simplefilter("ignore", RuntimeWarning)
                med = np.nanmedian(np.abs(fin), axis=0) if np.isfinite(fin).any() else 0.0
            spread = spread * scale / np.maximum(np.nan_to_num(med, nan=0.0), 0.1)
        k = int(np.argmax(np.where(chosen, spread, -np.inf)))
        if not spread[k] > 0:
            k = int(np.argmax(spread))
        mid = (e - s) // 2
        perm[s:e] = perm[s:e][np.lexsort((perm[s:e], seg[:, k]))]
        nodes[node][4:] = [k, key[perm[s + mid], k]]
        stack += [(s + mid, e, node, 1), (s, s + mid, node, 0)]
    start, stop, left, right, dim, cut = (np.array(c) for c in zip(*nodes))
    return {"perm": perm, "start": start, "stop": stop, "left": left, "right": right,
            "dim": dim, "cut": cut}


@pytest.mark.parametrize("scaled", [False, True])
def test_compiled_tree_build_equals_the_node_by_node_rule(scaled):
    """The compiled KD-tree build gives the documented tree bit for bit (a numpy build node
    by node): tie-heavy values with NaN, a constant column and a column of large values;
    its boxes are those of its leaves' values, and every row is in one leaf."""
    A, _ = _rounded(3000, 5, seed=2)
    A[:, 3] = 7.0
    A[:, 4] = np.round(A[:, 4]) * 1e6
    cmp = prl.comparison(5)
    a = prl.prepare_side(A, tuple(range(5)), cmp, side="a")
    scale = np.array([1.0, 16.0, 0.5, 3.0, 2.0]) if scaled else None
    for leaf in (7, 64):
        tree = kdtree.build_tree(a, leaf_size=leaf, scale=scale, ranks=False)
        want = _tree_reference(a, leaf, scale)
        for name, arr in want.items():
            np.testing.assert_array_equal(tree[name], arr, err_msg=name)
        assert tree["perm"].dtype == np.int64 and tree["cut"].dtype == np.float64
        np.testing.assert_array_equal(np.sort(tree["perm"]), np.arange(3000))
        np.testing.assert_array_equal(tree["vT"], a["v"][tree["perm"]].T)
        q = int(np.flatnonzero(tree["left"] < 0)[0])
        rows = a["v"][tree["perm"][tree["start"][q]:tree["stop"][q]]]
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", RuntimeWarning)
            np.testing.assert_array_equal(tree["lo"][q], np.nanmin(rows, axis=0))


@pytest.mark.parametrize("method", ["s", "l"])
def test_dense_grid_equals_the_rounded_float_weights(method):
    """The dense path's weights straight on the 2^-24 grid (blocks of rows, on one thread or
    two, any block size) equal the float weights rounded by the assignment (quantize), with
    each row's best grid value and its ties as best link counts them; the assignment, the
    assigned and the true pairs' weights and best link are bit for bit those of the path
    through the float matrix."""
    from sdcdist.linkage.assignment.ties import quantize
    from sdcdist.linkage.prl import blocks
    K = 5
    A, B = _rounded(300, K, seed=7)
    t = {"s": {}, "l": {"t": (0, 0.1, 0.25, 0.5, 1.0)}}[method]
    cmp = prl.comparison(K, method=method, **t)
    a, b = _sides(A, B[:250], cmp)
    N = 300 * 250
    wp = prl.weight_params(prl.em(prl.pattern_counts(a, b, cmp), cmp, p_start=250 / N,
                                  p_max=250 / N), cmp)
    W = prl.dense_weights(a, b, cmp, wp)
    top0, n_top0 = blocks._grid_top(W)
    at = transposed(a)
    for rows, threads in ((256, 1), (7, 2), (64, 2)):
        Q, top, n_top = np.empty(W.shape), np.empty(250), np.empty(250, dtype=np.int64)
        parts = blocks._rows_in_threads(
            lambda j0, j1: weights.grid_rows(at, b, cmp, wp, j0, j1, 24, Q, top, n_top), 250,
            rows=rows, threads=threads)
        assert Q.tobytes() == quantize(W, 24).tobytes()
        assert top.tobytes() == top0.tobytes() and n_top.tobytes() == n_top0.tobytes()
        assert (min(p[0] for p in parts), max(p[1] for p in parts)) == (W.min(), W.max())
        assert all(p[2] for p in parts)
        assert np.max([p[3] for p in parts], axis=0).tobytes() == Q.max(axis=0).tobytes()
    truth = np.r_[np.arange(240), -np.ones(10, dtype=np.int64)]
    new = blocks._dense_assign(a, b, cmp, wp, 5000, truth)
    old = blocks._dense_assign_floats(a, b, cmp, wp, 5000, truth,
                                      prl.blocks.content_order(b["v"]), 0.0)
    for k in ("rows", "cols", "w", "wtrue", "top", "n_top"):
        assert np.asarray(new[k]).tobytes() == np.asarray(old[k]).tobytes(), k
    assert new["info"] == old["info"]


@pytest.mark.parametrize("n", [0, 1, 3, 4, 5, 9, 4099])
def test_nonzero_u16_equals_flatnonzero(n):
    """The uint16 histogram's non-zero counters, read a word at a time, are np.flatnonzero's
    (the tail that does not fill a word included)."""
    rng = np.random.default_rng(n)
    h = np.zeros(n, dtype=np.uint16)
    h[rng.integers(0, max(n, 1), n // 3)] = rng.integers(1, 65535, n // 3).astype(np.uint16)
    if n:
        h[-1] = 3
    np.testing.assert_array_equal(prl.hists.nonzero_u16(h), np.flatnonzero(h))
    # in one pass, the buffers grown from any first size; the counters with them
    for expect in (0, 5, n // 3, n):
        nz, c = prl.hists.nonzero_u16(h, counts=True, expect=expect)
        np.testing.assert_array_equal(nz, np.flatnonzero(h))
        np.testing.assert_array_equal(c, h[nz].astype(np.int64))
        assert c.dtype == np.int64


@pytest.mark.parametrize("K, flush", [(10, None), (10, 50_000), (3, None), (3, 50_000)])
def test_rank_kernel_codes_beside_counting_give_the_same_counts(K, flush, monkeypatch):
    """The rank kernel with a map (codes of one block of B rows computed beside the
    counting of the previous block's, on two threads) counts what it counts alone: on ten
    columns (one uint16 histogram whose counters wrap) and on three (interleaved uint32
    histograms), with and without flushes into int64."""
    from sdcdist.linkage.prl import patterns
    from sdcdist.parallel import thread_pool
    monkeypatch.setattr(patterns, "PIPE_MIN_PAIRS", 1 << 12)
    monkeypatch.setattr(patterns, "PIPE_PAIRS", 3 * 1000)
    if flush is not None:
        monkeypatch.setattr(patterns, "_FLUSH_PAIRS", flush)
    A, B = _rounded(600, K, seed=3)
    A[:300] = A[0]                      # one pattern more than 2^16 times: counters wrap
    B[:300] = A[0]
    cmp = prl.comparison(K)
    a, b = _sides(A, B[:500], cmp)
    ref = prl.pattern_counts(a, b, cmp, kernel="sparse")
    assert ref[1].max() > 65536 or K == 3
    _same(prl.pattern_counts(a, b, cmp), ref)
    with thread_pool(2) as pmap:
        _same(prl.pattern_counts(a, b, cmp, pmap=pmap), ref)


@pytest.mark.parametrize("wrap", [False, True])
def test_kept_histograms_are_zero_again_and_count_the_same(wrap, monkeypatch):
    """The rank kernel's histograms are zeroed where they were used and kept for the next
    count (counters that wrapped included): every count after the first gives the same
    codes and counts as the sparse kernel, and the kept arrays hold only zeros."""
    from sdcdist.linkage.prl import hists
    monkeypatch.setattr(hists, "HIST_KEEP_MIN", 1 << 10)
    hists.release_hists()
    A, B = _rounded(500, 10, seed=4)
    if wrap:
        A[:300] = A[0]
        B[:300] = A[0]
    cmp = prl.comparison(10)
    a, b = _sides(A, B, cmp)
    ref = prl.pattern_counts(a, b, cmp, kernel="sparse")
    assert (ref[1].max() > 65536) == wrap
    for _ in range(3):
        _same(prl.pattern_counts(a, b, cmp), ref)
        (h, h16), = [v for k, v in kept._KEPT.items() if k[0] == "hists"]
        assert not h.any() and not h16.any()
    hists.release_hists()
    assert not kept.kept_keys()


def test_kept_weight_grid_gives_the_same_assignment(monkeypatch):
    """The dense path's grid of every pair's weight is kept for the next call of its size
    once the assignment is done: the next call (and one of another size beside it) gives
    the same assignment, weights and best links, and release_hists() drops the grid."""
    from sdcdist.linkage.prl import blocks, hists
    monkeypatch.setattr(blocks, "GRID_KEEP_MIN", 1 << 10)
    hists.release_hists()
    cmp = prl.comparison(4)
    runs = []
    for n in (300, 300, 200, 300):
        A, B = _rounded(n, 4, seed=n)
        a, b = _sides(A, B, cmp)
        fit = prl.em(prl.pattern_counts(a, b, cmp), cmp, p_start=1 / n, p_max=1 / n)
        wp = prl.weights.weight_params(fit, cmp)
        out = blocks._dense_assign(a, b, cmp, wp, 5000, np.arange(n))
        runs.append({k: np.asarray(out[k]).tobytes() for k in ("rows", "cols", "w", "top",
                                                               "n_top")})
        assert ("grid", n, n) in kept.kept_keys()
    assert runs[0] == runs[1] == runs[3]
    assert sorted(kept.kept_keys()) == [("grid", 200, 200), ("grid", 300, 300)]
    hists.release_hists()
    assert not kept.kept_keys()
