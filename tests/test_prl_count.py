"""PRL counting path: exact pattern counts without all pairs, bit for bit against all pairs."""

import numpy as np
import pytest

from sdcdist.data import synth
from sdcdist.errors import SdcInputError
from sdcdist.linkage import prl
from sdcdist.linkage.prl import blocks, counting, kdtree, topc
from sdcdist.linkage.prl.comparison import transposed
from sdcdist.linkage.prl import PRLSettings, blocked_pattern_counts, probabilistic_linkage
from sdcdist.masking import REGISTRY as MASKING
from sdcdist.options import validate
from sdcdist.parallel import chunk_bounds
from sdcdist.parallel import Runner


def _settings(**options):
    """PRL settings from registry options named without ``prl_`` (``em`` is ``prl_em``)."""
    return PRLSettings.from_options({"prl_" + k: v for k, v in options.items()})


def _tie_heavy(n, K, seed, *, nan=True):
    """Skewed synthetic keys with many zeros, microaggregated A (repeated values),
    noise-masked B with some values copied from A, rounded values and NaN."""
    rng = np.random.default_rng(seed)
    X = synth.generate(n, columns=K, seed=seed).values
    A = MASKING["micmul"](X, 3, rng=rng)
    B = MASKING["noise"](X, 0.1, rng=rng)
    B[::4] = A[::4]                                   # exact agreement, zero differences
    B[1::9, 0] = np.round(B[1::9, 0], -2)
    A[::13, K - 1] = 0.0
    B[::17, 0] = 0.0
    if nan:
        A[::29, 0] = np.nan
        B[::31, K - 1] = np.nan
    return A, B


def _sides(A, B, cmp):
    cols = tuple(range(A.shape[1]))
    return (prl.prepare_side(A, cols, cmp, side="a"), prl.prepare_side(B, cols, cmp, side="b"))


def _counted(a, b, cmp, rows):
    ix = counting.build_index(b, cmp)
    n = a["v"].shape[0]
    total = np.zeros(cmp.n_patterns, dtype=np.int64)
    enum = 0
    for s in range(0, n, rows):
        c, e = counting.count_block({k: v[s:s + rows] for k, v in a.items()}, ix, cmp)
        total += c
        enum += e
    return total, enum


@pytest.mark.parametrize("K,method,t,cat", [
    (8, "l", 0.05, None),
    (5, "d", 0.1, None),
    (4, "l", (0.02, 0.05, 0.2), None),
    (3, "l", [(0.05, 0.06), (0.01, 0.1), (0.03, 0.2)], None),
    (3, "l", (0.02, 0.1), [False, True, False]),
    (4, "l", 0.05, [False, True, False, False]),
    (2, "d", (0.05, 0.3), None),
    (1, "l", (0.05, 0.1), None),
])
def test_counts_equal_all_pairs_bit_for_bit(K, method, t, cat):
    A, B = _tie_heavy(2000, K, seed=K)
    if cat is not None:
        A[:, 1] = np.floor(np.abs(A[:, 1])) % 5
        B[:, 1] = np.floor(np.abs(B[:, 1])) % 5
    cmp = prl.comparison(K, method=method, t=t, categorical=cat)
    a, b = _sides(A, B[:1500], cmp)
    ref = _dense(prl.pattern_counts(a, b, cmp), cmp)
    for rows in (2000, 333, 1):
        got, enum = _counted(a, b, cmp, rows) if rows > 1 else \
            _counted({k: v[:40] for k, v in a.items()}, b, cmp, 1)
        if rows == 1:
            ref1 = _dense(prl.pattern_counts({k: v[:40] for k, v in a.items()}, b, cmp), cmp)
            np.testing.assert_array_equal(got, ref1)
        else:
            np.testing.assert_array_equal(got, ref)
            assert got.sum() == 2000 * 1500
            assert enum < 2000 * 1500


def test_intervals_follow_the_kernel_comparison():
    """Rank intervals hold exactly the B values the kernel calls agreeing, NaN never."""
    rng = np.random.default_rng(5)
    A = np.r_[rng.normal(size=300), 0.0, -0.0, 1e-300, np.nan, 5.0, 5.0]
    B = np.r_[A[:200] + 1e-17, np.nextafter(5.0, 6.0), 5.0, np.nan, 0.0, -0.0,
              rng.normal(size=100)]
    cmp = prl.comparison(1, method="d", t=(1e-16, 0.05, 0.5))
    a, b = _sides(A[:, None], B[:, None], cmp)
    ix = counting.build_index(b, cmp)
    lo, hi = counting.rank_ranges(a, ix, cmp)
    srt = ix["sorted"][0]
    for i in range(A.size):
        for l in range(3):
            inside = np.zeros(B.size, dtype=bool)
            inside[lo[i, 0, l]:hi[i, 0, l]] = True
            expect = np.abs(a["v"][i, 0] - srt) <= a["tol"][i, 0, l]
            np.testing.assert_array_equal(inside, expect)


def test_wavelet_box_counts():
    rng = np.random.default_rng(3)
    seq = rng.permutation(1000).astype(np.int32)
    nbits = 10
    nw = (1000 >> 6) + 1
    bits = np.zeros((nbits, nw), np.uint64)
    cum = np.zeros((nbits, nw + 1), np.int64)
    zeros = np.zeros(nbits, np.int64)
    counting._wm_build(seq, nbits, bits, cum, zeros)
    for _ in range(300):
        x0, x1 = np.sort(rng.integers(0, 1001, 2))
        y = int(rng.integers(0, 1001))
        assert counting._wm_less(bits, cum, zeros, nbits, x0, x1, y) == \
            np.count_nonzero(seq[x0:x1] < y)


@pytest.mark.slow
def test_counts_20000_records_tie_heavy():
    A, B = _tie_heavy(20_000, 6, seed=11)
    cmp = prl.comparison(6, method="l", t=0.05)
    a, b = _sides(A, B, cmp)
    np.testing.assert_array_equal(_counted(a, b, cmp, 8192)[0],
                                  _dense(prl.pattern_counts(a, b, cmp), cmp))


@pytest.mark.parametrize("use_client", [False, True])
def test_driver_count_equals_pairs(client, use_client):
    A, B = _tie_heavy(3000, 5, seed=2)
    runner = Runner(client if use_client else None)
    cmp = prl.comparison(5, method="l", t=0.05)
    cols = tuple(range(5))
    Ap = runner.task(prl.prepare_side, A, cols, cmp, side="a")
    Bp = runner.task(prl.prepare_side, B, cols, cmp, side="b")
    ref = _dense(blocked_pattern_counts(runner, Ap, Bp, 3000, 3000, cmp, rows=(8192, 8192))[0],
                 cmp)
    path, ix, info = blocks.choose_counting(runner, Ap, Bp, 3000, 3000, cmp,
                                                       mode="count")
    assert path == "count" and 0 < info["enumerated_share_estimate"] < 1
    for rows in (3000, 700, 128):
        got, n, enum = blocks.counted_pattern_counts(runner, Ap, ix, 3000, 3000,
                                                                cmp, rows=rows)
        np.testing.assert_array_equal(got, ref)
        assert n == 3000 * 3000 and 0 < enum < n


def test_linkage_same_pld_both_paths(client):
    A, B = _tie_heavy(2500, 4, seed=4, nan=False)
    runner = Runner(client)
    Ah, Bh = runner.share(A), runner.share(B)
    res = {c: probabilistic_linkage(runner, Ah, Bh, 2500, 2500, (0, 1, 2, 3),
                                    settings=_settings(counting=c, method="l", t=0.05,
                                                       dense_limit=100))
           for c in ("pairs", "count", "auto")}
    np.testing.assert_array_equal(res["pairs"].counts, res["count"].counts)
    for c in ("count", "auto"):
        assert res[c].correct == res["pairs"].correct
        np.testing.assert_array_equal(res[c].cols_a, res["pairs"].cols_a)
        np.testing.assert_array_equal(res[c].weights, res["pairs"].weights)
    assert res["count"].info["counting"] == "count"
    assert res["auto"].info["counting"] == "pairs, dense histogram kernel (small)"
    assert res["pairs"].info["counting"] == "pairs, dense histogram kernel"
    assert res["pairs"].info["pattern_kernel"] == "dense"


def test_refusals():
    runner = Runner()
    n = 400
    A = np.ones((n, 8))                                # every pair agrees on every column
    cmp = prl.comparison(8, method="l", t=0.05)
    Ap = runner.task(prl.prepare_side, A, tuple(range(8)), cmp, side="a")
    with pytest.raises(SdcInputError, match="slower than all pairs"):
        blocks.choose_counting(runner, Ap, Ap, n, n, cmp, mode="count")
    with pytest.raises(SdcInputError, match="blocking"):
        blocks.choose_counting(runner, Ap, Ap, n, n, cmp, mode="count", blocking=(0, 5))
    with pytest.raises(SdcInputError, match="prl_counting"):
        prl.PRLSettings.from_options({"prl_counting": "fast"})
    old = blocks.AUTO_MIN_PAIRS
    try:
        blocks.AUTO_MIN_PAIRS = 1
        path, _, info = blocks.choose_counting(runner, Ap, Ap, n, n, cmp)
        assert path == "pairs" and info["counting"] == ("pairs, dense histogram kernel "
                                                        "(counting would be slower)")
    finally:
        blocks.AUTO_MIN_PAIRS = old
    with pytest.raises(SdcInputError, match="prl_counting"):
        validate({"prl_counting": "fast"})
    assert validate({"prl_counting": "count"})["prl_counting"] == "count"


def _dense(sparse, cmp):
    """The all-pairs path's sparse counts as the counting path's dense vector."""
    out = np.zeros(int(cmp.n_patterns), dtype=np.int64)
    out[np.asarray(sparse[0], dtype=np.int64)] = sparse[1]
    return out


def _weights_for(a, b, cmp, seed=0):
    counts = prl.pattern_counts(a, b, cmp)
    n = min(a["v"].shape[0], b["v"].shape[0])
    N = a["v"].shape[0] * b["v"].shape[0]
    fit = prl.em(counts, cmp, p_start=n / N, p_max=n / N)
    return prl.weight_params(fit, cmp)


@pytest.mark.parametrize("K,method,t,cat,c,weights", [
    (6, "l", 0.05, None, 20, "linear"),
    (4, "d", (0.02, 0.1), None, 5, "linear"),
    (4, "d", (0.02, 0.1), None, 5, "step"),
    (3, "l", (0.05, 0.2), [False, True, False], 20, "linear"),
    (3, "l", (0, 0.05, 0.2), [False, True, False], 20, "step"),
    (2, "l", 0.05, None, 50, "linear"),
    (4, "s", 0.05, None, 20, "linear"),
    (3, "s", (0.05, 0.3), None, 10, "linear"),
    (3, "s", (0.05, 0.3), None, 10, "step"),
    (4, "s", (0, 0.1, 0.25, 0.5, 1), None, 20, "linear"),
])
def test_topc_search_equals_all_pairs(K, method, t, cat, c, weights):
    """Method s (tolerances in sd, not in |a|) included: its bound uses each node's own
    largest tolerance. Multi-level columns with linear weights (the default) and step
    weights: the bound holds for both readings."""
    A, B = _tie_heavy(2000, K, seed=10 + K)
    if cat is not None:
        A[:, 1] = np.floor(np.abs(A[:, 1])) % 4
        B[:, 1] = np.floor(np.abs(B[:, 1])) % 4
    cmp = prl.comparison(K, method=method, t=t, categorical=cat, weights=weights)
    a, b = _sides(A, B[:700], cmp)
    wp = _weights_for(a, b, cmp)
    ref = prl.topc_block(a, b, cmp, wp, c)
    scale = kdtree.split_scale(wp, cmp)
    for leaf, sc, group in ((1, None, 1), (7, scale, 3), (32, None, 1), (128, scale, 16),
                            (4000, None, 1)):
        tree = kdtree.build_tree(a, leaf_size=leaf, scale=sc)
        got = topc.topc_search(tree, b, cmp, wp, c, group=group)
        np.testing.assert_array_equal(got["idx"], ref["idx"])
        np.testing.assert_array_equal(got["w"], ref["w"])
    assert got["visited"] <= 2000 * 700


def test_tree_splits_the_columns_of_largest_scale():
    """With weights, the tree splits only the split_columns columns of largest scale (and
    the others only where none of those varies): 8 keys, 2,000 records in leaves of 8 give
    3 columns; the search still finds the all-pairs candidates, also when the columns of
    largest scale are constant on half of A (split there on the others)."""
    A, B = _tie_heavy(2000, 8, seed=21)
    cmp = prl.comparison(8)
    a, b = _sides(A, B[:300], cmp)
    wp = _weights_for(a, b, cmp)
    ref = prl.topc_block(a, b, cmp, wp, 10)
    sc = np.array([1.0, 9.0, 2.0, 8.0, 3.0, 7.0, 4.0, 5.0])
    assert kdtree.split_columns(2000, 8, 8) == 3
    assert kdtree.split_columns(10**6, 1024, 8) == 4 and kdtree.split_columns(100, 64, 2) == 2
    tree = kdtree.build_tree(a, leaf_size=8, scale=sc)

    def varies(q, k):
        x = tree["vT"][k, tree["start"][q]:tree["stop"][q]]
        x = x[np.isfinite(x)]
        return x.size > 0 and x.max() > x.min()

    inner = np.flatnonzero(tree["left"] >= 0)
    other = [q for q in inner if tree["dim"][q] not in (1, 3, 5)]
    assert len(other) < inner.size / 10
    assert not any(varies(q, k) for q in other for k in (1, 3, 5))
    got = topc.topc_search(tree, b, cmp, wp, 10)
    np.testing.assert_array_equal(got["idx"], ref["idx"])
    np.testing.assert_array_equal(got["w"], ref["w"])
    a["v"][:1000, [1, 3, 5]] = 0.0
    ref = prl.topc_block(a, b, cmp, wp, 10)
    tree = kdtree.build_tree(a, leaf_size=8, scale=sc)
    assert len(set(tree["dim"][tree["left"] >= 0].tolist()) - {1, 3, 5}) > 0
    got = topc.topc_search(tree, b, cmp, wp, 10)
    np.testing.assert_array_equal(got["idx"], ref["idx"])
    np.testing.assert_array_equal(got["w"], ref["w"])


def test_topc_with_fewer_records_than_c():
    A, B = _tie_heavy(30, 3, seed=1)
    cmp = prl.comparison(3, method="l", t=0.05)
    a, b = _sides(A, B, cmp)
    wp = _weights_for(a, b, cmp)
    ref = prl.topc_block(a, b, cmp, wp, 40)
    got = topc.topc_search(kdtree.build_tree(a, leaf_size=4), b, cmp, wp, 40)
    np.testing.assert_array_equal(got["idx"], ref["idx"])
    np.testing.assert_array_equal(got["w"], ref["w"])


@pytest.mark.parametrize("use_client,method,t", [(False, "l", 0.05), (True, "l", 0.05),
                                                (False, "s", prl.DEFAULTS.t)])
def test_counted_topc_equals_pairwise(client, use_client, method, t):
    from sdcdist.linkage.prl import blocks as pd
    from sdcdist.parallel import pairwise_reduce
    A, B = _tie_heavy(2500, 5, seed=6)
    runner = Runner(client if use_client else None)
    cmp = prl.comparison(5, method=method, t=t)
    cols = tuple(range(5))
    a, b = _sides(A, B, cmp)
    wp = _weights_for(a, b, cmp)
    Ap = runner.task(prl.prepare_side, A, cols, cmp, side="a")
    Bp = runner.task(prl.prepare_side, B, cols, cmp, side="b")
    truth = runner.share(np.r_[np.arange(2400), np.full(100, -1)].astype(np.int64))
    ref = pairwise_reduce(runner, pd._topc_block, prl.merge_topc, pd._topc_finish, pd._concat,
                          Bp, Ap, 2500, 2500, rows_a=1000, rows_b=1000,
                          args=(cmp, wp, 20, truth))
    for rows in (2500, 600):
        got, visited = blocks.counted_topc(runner, Ap, Bp, 2500, cmp, wp, 20, truth,
                                                      rows=rows)
        for k in ("idx", "w", "wtrue"):
            np.testing.assert_array_equal(got[k], ref[k])
        assert 0 < visited < 2500 * 2500


def test_cli_link_counting(tmp_path, run, client):
    import pandas as pd
    A, B = _tie_heavy(600, 3, seed=8, nan=False)
    cols = ["x", "y", "z"]
    pd.DataFrame(A, columns=cols).assign(id=np.arange(600)).to_csv(tmp_path / "a.csv",
                                                                    index=False)
    pd.DataFrame(B, columns=cols).assign(id=np.arange(600)).to_csv(tmp_path / "b.csv",
                                                                    index=False)
    outs = {}
    for c in ("pairs", "count"):
        r = run("link", str(tmp_path / "a.csv"), str(tmp_path / "b.csv"), "--keys", "x,y,z",
                "--id", "id", "--dense-limit", "50", "--counting", c, "--compare", "l", "--t", "0.05",
                "--out", str(tmp_path / f"{c}.parquet"), "--scheduler", client.scheduler.address)
        assert r.exit_code == 0, r.output
        assert ("counting path:" in r.output) == (c == "count")
        outs[c] = pd.read_parquet(tmp_path / f"{c}.parquet")
    pd.testing.assert_frame_equal(outs["pairs"], outs["count"])


def test_multi_level_refused_where_slower(caplog):
    runner = Runner()
    A, B = _tie_heavy(400, 4, seed=3)
    A[:, :3] = 1.0
    B[:, :2] = 1.0                                   # 2 columns agree on every pair,
    B[:, 2] = np.where(np.arange(400) < 100, 1.0, 1000.0)   # a third on 25% of them
    for t, expect in ((0.05, "count"), ((0.05, 0.1), "pairs")):
        cmp = prl.comparison(4, method="l", t=t)
        Ap = runner.task(prl.prepare_side, A, tuple(range(4)), cmp, side="a")
        Bp = runner.task(prl.prepare_side, B, tuple(range(4)), cmp, side="b")
        old = blocks.AUTO_MIN_PAIRS
        try:
            blocks.AUTO_MIN_PAIRS = 1
            path, _, info = blocks.choose_counting(runner, Ap, Bp, 400, 400, cmp)
        finally:
            blocks.AUTO_MIN_PAIRS = old
        # between the limits: counted with one level, all pairs with several (an
        # enumerated multi-level pair costs several dense all-pairs kernel pairs)
        assert blocks.MAX_SHARE_LEVELS < info["enumerated_share_estimate"] < blocks.MAX_SHARE
        assert path == expect
        # a large file falling back to pairs says so in the log (no record values)
        warned = [r.getMessage() for r in caplog.records if "one by one" in r.getMessage()]
        assert bool(warned) == (expect == "pairs")
        assert all("counting would be slower" in w for w in warned)
        caplog.clear()


def test_pattern_space_too_large_to_count_densely():
    """13 columns x 6 levels (the default comparison) is 6^13 patterns: the counting path,
    which adds into a dense vector over all of them, is refused (count) or skipped (auto)
    before any index is built."""
    runner = Runner()
    A = np.arange(13 * 50, dtype=float).reshape(50, 13)
    cmp = prl.comparison(13)
    assert cmp.n_patterns > blocks.MAX_DENSE_PATTERNS
    Ap = runner.task(prl.prepare_side, A, tuple(range(13)), cmp, side="a")
    with pytest.raises(SdcInputError, match="comparison patterns"):
        blocks.choose_counting(runner, Ap, Ap, 50, 50, cmp, mode="count")
    old = blocks.AUTO_MIN_PAIRS
    try:
        blocks.AUTO_MIN_PAIRS = 1
        path, ix, info = blocks.choose_counting(runner, Ap, Ap, 50, 50, cmp)
    finally:
        blocks.AUTO_MIN_PAIRS = old
    assert path == "pairs" and ix is None and "too many patterns" in info["counting"]


# ---- the dense histogram kernel of all pairs (the default comparison at scale) -------------

def _tie_heavy_cat(n, K, seed):
    """:func:`_tie_heavy` with NaN, and the last key column a categorical code (NaN too)."""
    A, B = _tie_heavy(n, K, seed)
    rng = np.random.default_rng(seed)
    A[:, K - 1] = rng.integers(0, 4, n)
    B[:, K - 1] = np.where(rng.random(n) < 0.8, A[:, K - 1], rng.integers(0, 4, n))
    A[::37, K - 1] = np.nan
    B[::41, K - 1] = np.nan
    return A, B, [False] * (K - 1) + [True]


def _brute_s(A, B, cmp):
    """Sparse counts of the ``s`` comparison written straight from the CATALOG: level =
    number of tolerances t sd(A column) that |a - b| exceeds (NaN exceeds all)."""
    sd = np.nanstd(A, axis=0, ddof=1)
    code = np.zeros((B.shape[0], A.shape[0]), dtype=np.int64)
    for k, (lev, cat) in enumerate(zip(cmp.levels, cmp.categorical)):
        d = np.abs(A[:, k][None, :] - B[:, k][:, None])
        lv = ~(d <= 0.0) if cat else sum(~(d <= sd[k] * t) for t in lev)
        code += lv.astype(np.int64) * int(cmp.radix[k])
    return prl.sparse_counts(code.ravel())


def _same(x, y):
    np.testing.assert_array_equal(x[0], y[0])
    np.testing.assert_array_equal(x[1], y[1])


@pytest.mark.parametrize("K,options", [
    (8, {}),                                            # the default: 6^8 patterns
    (10, {}),                                           # 6^10, one histogram
    (5, {"method": "l", "t": (0.02, 0.05, 0.2)}),       # per-row tolerances, interleaved
    (4, {"t": (0, 0.05, 0.1, 0.2, 0.3, 0.5, 1.0)}),     # more tolerances than unrolled
])
def test_dense_kernel_equals_sparse_and_brute_force(K, options):
    A, B, cat = _tie_heavy_cat(2000, K, seed=K)
    cmp = prl.comparison(K, categorical=cat, **options)
    assert prl.patterns.pattern_kernel(cmp) == "dense"
    a, b = _sides(A, B, cmp)
    dense = prl.pattern_counts(a, b, cmp)
    _same(dense, prl.pattern_counts(a, b, cmp, kernel="sparse"))
    if not options:
        sub = {"v": b["v"][:300]}
        _same(prl.pattern_counts(a, sub, cmp, kernel="dense"), _brute_s(A, B[:300], cmp))
    # uint32 histograms flushed into int64 every few pairs: the same counts
    avT, tolT = transposed(a)
    tc, const = prl.patterns._const_tolerances(tolT, cmp.n_levels)
    assert bool(const[-1]) and bool(np.all(const)) == (options.get("method", "s") == "s")
    flushed = prl.patterns._counts_flat(avT, tolT, tc, const, b["v"][:50], cmp.n_levels,
                                        cmp.radix, cmp.n_patterns, 1, 3000)
    assert flushed[0].size == cmp.n_patterns                # it did flush
    _same(prl.hists.sparse_of_hist(*flushed),
          prl.pattern_counts(a, {"v": b["v"][:50]}, cmp, kernel="sparse"))


def test_dense_kernel_blocking_windows_and_20000_records():
    A, B, cat = _tie_heavy_cat(20_000, 6, seed=5)
    cmp = prl.comparison(6, categorical=cat)
    a, b = _sides(A, B, cmp)
    sub = {"v": b["v"][::20]}                               # 20,000 x 1,000 pairs
    _same(prl.pattern_counts(a, sub, cmp), prl.pattern_counts(a, sub, cmp, kernel="sparse"))
    lo, hi, order = blocks._window(a, sub, 0, 300)           # a sorted-neighbourhood window
    _same(prl.pattern_counts(a, sub, cmp, lo=lo, hi=hi, aidx=order),
          prl.pattern_counts(a, sub, cmp, lo=lo, hi=hi, aidx=order, kernel="sparse"))


def test_pattern_space_too_large_for_the_dense_histogram_uses_the_sparse_kernel():
    A, B, cat = _tie_heavy_cat(60, 11, seed=1)              # 6^10 x 2 > 2^26 patterns
    cmp = prl.comparison(11, categorical=cat)
    assert cmp.n_patterns > prl.patterns.DENSE_PATTERN_SPACE
    assert prl.patterns.pattern_kernel(cmp) == "sparse"
    a, b = _sides(A, B, cmp)
    _same(prl.pattern_counts(a, b, cmp), _brute_s(A, B, cmp))
    with pytest.raises(ValueError, match="sparse kernel"):
        prl.pattern_counts(a, b, cmp, kernel="dense")
    runner = Runner()
    path, _, info = blocks.choose_counting(runner, a, b, 60, 60, cmp, mode="pairs")
    assert info == {"pattern_kernel": "sparse", "counting": "pairs, sorted-codes kernel"}


@pytest.mark.parametrize("chunk", [1, 7, 333, 1 << 22])
def test_sparse_kernel_counts_the_same_for_any_chunking_and_map(chunk):
    """The sparse kernel sorts the codes of chunks of B rows (several rows, one row, or a
    row that alone holds more pairs than a chunk) and merges their counts: the same
    counts as brute force, with or without two threads, on all pairs and on windows."""
    from sdcdist.linkage.prl.comparison import all_rows
    from sdcdist.linkage.prl.sortcount import sorted_counts
    from sdcdist.parallel import thread_pool
    A, B, cat = _tie_heavy_cat(90, 11, seed=4)
    cmp = prl.comparison(11, categorical=cat)
    a, b = _sides(A, B, cmp)
    avT, tolT = transposed(a)
    lo, hi, aidx = all_rows(B.shape[0], A.shape[0])
    args = (avT, tolT, b["v"], lo, hi, aidx, True, cmp.n_levels, cmp.radix)
    ref = _brute_s(A, B, cmp)
    _same(sorted_counts(*args, chunk=chunk), ref)
    with thread_pool(2) as pmap:
        _same(sorted_counts(*args, chunk=chunk, pmap=pmap), ref)
        wlo, whi, order = blocks._window(a, b, 0, 5)          # windows: pairs per row vary
        wargs = (avT, tolT, b["v"], wlo, whi, order, False, cmp.n_levels, cmp.radix)
        _same(sorted_counts(*wargs, chunk=chunk, pmap=pmap), sorted_counts(*wargs))
    empty = sorted_counts(avT, tolT, b["v"], lo, lo, aidx, True, cmp.n_levels, cmp.radix)
    assert empty[0].size == 0 and empty[0].dtype == np.int64


def test_auto_takes_the_dense_kernel_for_the_default_at_200000_records(caplog):
    """The decision at 200,000 records, from B's sorted columns and a sample of A (no
    index, no counting): the default's levels make the counting path slower, so all
    pairs through the dense histogram kernel, and the info and the log say so."""
    n, K = 200_000, 8
    rng = np.random.default_rng(3)
    A = np.round(rng.lognormal(3, 1, (n, K)), 1)
    B = A + rng.normal(0, np.sqrt(0.1), (n, K)) * A.std(axis=0)
    cmp = prl.comparison(K)
    runner = Runner()
    Ap = runner.task(prl.prepare_side, A, tuple(range(K)), cmp, side="a")
    Bp = runner.task(prl.prepare_side, B, tuple(range(K)), cmp, side="b")
    path, index, info = blocks.choose_counting(runner, Ap, Bp, n, n, cmp)
    assert path == "pairs" and index is None
    assert info["pattern_kernel"] == "dense"
    assert info["counting"] == "pairs, dense histogram kernel (counting would be slower)"
    assert info["enumerated_share_estimate"] > blocks.MAX_SHARE_LEVELS
    assert any("dense histogram kernel" in r.getMessage() for r in caplog.records)
    with pytest.raises(SdcInputError, match="slower than all pairs"):
        blocks.choose_counting(runner, Ap, Bp, n, n, cmp, mode="count")


@pytest.mark.parametrize("use_client", [False, True])
def test_linkage_dense_kernel_same_as_sparse(client, monkeypatch, use_client):
    """Default comparison, tie-heavy keys with NaN and a categorical key: the dense kernel
    (locally or on the cluster) gives the sparse kernel's counts, EM, candidates and PLD;
    so does auto past AUTO_MIN_PAIRS (all pairs, candidates by branch and bound)."""
    A, B, cat = _tie_heavy_cat(3000, 6, seed=7)
    cols = tuple(range(6))

    def link(runner, **kw):
        return probabilistic_linkage(runner, A, B, 3000, 3000, cols, categorical=cat,
                                     settings=_settings(dense_limit=100, **kw))
    new = link(Runner(client if use_client else None), counting="pairs")
    monkeypatch.setattr(blocks, "AUTO_MIN_PAIRS", 1)
    auto = link(Runner(), counting="auto")
    monkeypatch.setattr(prl.patterns, "DENSE_PATTERN_SPACE", 1)      # the sparse kernel
    old = link(Runner(), counting="pairs")
    assert old.info["pattern_kernel"] == "sparse" and new.info["pattern_kernel"] == "dense"
    assert auto.info["counting"] == "pairs, dense histogram kernel (counting would be slower)"
    assert auto.info["candidates"] == \
        "branch and bound (KD-tree of A, pairs of a leaf bounded by their ranks)"
    assert new.info["candidates"] == "all pairs"
    for r in (new, auto):
        _same(r.counts, old.counts)
        for x, y in zip(r.fit.m + r.fit.u, old.fit.m + old.fit.u):
            np.testing.assert_array_equal(x, y)
        assert r.fit.p == old.fit.p and r.correct == old.correct
        np.testing.assert_array_equal(r.cols_a, old.cols_a)
        np.testing.assert_array_equal(r.weights, old.weights)


def test_count_tasks_cover_every_pair_once():
    for K, kernel in ((8, "dense"), (13, "sparse")):
        cmp = prl.comparison(K)
        seen = np.zeros((1000, 700), dtype=np.int64)
        tasks = blocks.count_tasks(1000, 700, cmp, (128, 64))
        for a0, a1, b0, b1 in tasks:
            seen[a0:a1, b0:b1] += 1
        assert (seen == 1).all()
        # the dense kernel takes RANK_ROWS A rows and 2^31 pairs per task (all of both
        # files here: its histogram is read once per task, a B row's runs walked once);
        # the sparse kernel keeps the blocks of prl_block_rows
        assert len(tasks) == (1 if kernel == "dense" else 8 * 11)
    big = blocks.count_tasks(100_000, 70_000, prl.comparison(8), (128, 64))
    ra, rb = prl.patterns.RANK_ROWS, blocks.DENSE_TASK_PAIRS // prl.patterns.RANK_ROWS
    assert sorted({t[:2] for t in big}) == chunk_bounds(100_000, ra)
    assert sorted({t[2:] for t in big}) == chunk_bounds(70_000, rb)
    assert len(big) == len(chunk_bounds(100_000, ra)) * len(chunk_bounds(70_000, rb))


def test_topc_path_is_decided_apart_from_counting():
    """auto searches the KD-tree for the candidates from AUTO_TOPC_MIN_PAIRS pairs on, far
    below the counting path's AUTO_MIN_PAIRS (59,315 records: all pairs counted, candidates
    searched); a blocking rule or prl_counting=pairs weighs all pairs."""
    assert blocks.AUTO_TOPC_MIN_PAIRS < blocks.AUTO_MIN_PAIRS
    n = 59_315
    assert n * n < blocks.AUTO_MIN_PAIRS
    assert blocks.topc_path(n, n) == "search"
    assert blocks.topc_path(n, n, mode="pairs") == "pairs"
    assert blocks.topc_path(n, n, blocking=(0, 5)) == "pairs"
    assert blocks.topc_path(100, 100, path="count", mode="count") == "search"
    assert blocks.topc_path(2000, 2000) == "pairs"
    lo = blocks.AUTO_TOPC_MIN_PAIRS
    assert blocks.topc_path(lo, 1) == "search" and blocks.topc_path(lo - 1, 1) == "pairs"


@pytest.mark.parametrize("use_client", [False, True])
def test_linkage_searched_candidates_below_counting(client, monkeypatch, use_client):
    """Past AUTO_TOPC_MIN_PAIRS but below AUTO_MIN_PAIRS, auto counts all pairs and searches
    the candidates: tie-heavy keys with NaN and a categorical key give prl_counting=pairs'
    counts, EM, candidates, weights and PLD bit for bit, and the info says which ran."""
    A, B, cat = _tie_heavy_cat(1500, 6, seed=11)
    cols = tuple(range(6))
    runner = Runner(client if use_client else None)

    def link(**kw):
        return probabilistic_linkage(runner, A, B, 1500, 1500, cols, categorical=cat,
                                     settings=_settings(dense_limit=100, **kw))
    ref = link(counting="pairs")
    monkeypatch.setattr(blocks, "AUTO_TOPC_MIN_PAIRS", 1500 * 1500)
    auto = link(counting="auto")
    assert auto.info["counting"] == "pairs, dense histogram kernel (small)"
    assert auto.info["candidates"] == \
        "branch and bound (KD-tree of A, pairs of a leaf bounded by their ranks)"
    assert ref.info["candidates"] == "all pairs"
    assert 0 < auto.info["pairs_weighed"] <= 1500 * 1500
    _same(auto.counts, ref.counts)
    for x, y in zip(auto.fit.m + auto.fit.u, ref.fit.m + ref.fit.u):
        np.testing.assert_array_equal(x, y)
    assert auto.fit.p == ref.fit.p
    assert auto.correct == ref.correct and auto.correct20 == ref.correct20
    np.testing.assert_array_equal(auto.rows_b, ref.rows_b)
    np.testing.assert_array_equal(auto.cols_a, ref.cols_a)
    np.testing.assert_array_equal(auto.weights, ref.weights)
    np.testing.assert_array_equal(auto.true_weight, ref.true_weight)


@pytest.mark.parametrize("weights", ["linear", "step"])
def test_topc_search_seeded_threshold_keeps_ties(weights):
    """Each row's search starts from a threshold taken from the candidates of the row
    searched before it. Repeated B rows (the seed then equals the row's own c-th weight)
    and repeated A records (many pairs tied at that weight), NaN and a categorical key:
    the all-pairs candidates, weights and tie order, bit for bit."""
    A, B = _tie_heavy(1500, 4, seed=21)
    A[:, 2] = np.floor(np.abs(A[:, 2])) % 3
    B[:, 2] = np.floor(np.abs(B[:, 2])) % 3
    A[500:1000] = A[:500]                              # every record twice in A
    B = np.repeat(B[:150], 4, axis=0)                  # every B row four times
    cmp = prl.comparison(4, method="s", t=(0, 0.1, 0.25, 0.5, 1),
                         categorical=[False, False, True, False], weights=weights)
    a, b = _sides(A, B, cmp)
    wp = _weights_for(a, b, cmp)
    ref = prl.topc_block(a, b, cmp, wp, 20)
    for leaf in (8, 128):
        tree = kdtree.build_tree(a, leaf_size=leaf, scale=kdtree.split_scale(wp, cmp))
        got = topc.topc_search(tree, b, cmp, wp, 20)
        np.testing.assert_array_equal(got["idx"], ref["idx"])
        np.testing.assert_array_equal(got["w"], ref["w"])


def test_linear_envelope_bounds_the_linear_weight():
    """The bound of a linear column at distance x (its value there or a later point's,
    the exact-agreement weight at 0) is at least the weight at every x' >= x."""
    A, B = _tie_heavy(800, 3, seed=4)
    cmp = prl.comparison(3, method="s", t=(0, 0.1, 0.25, 0.5, 1))
    a, b = _sides(A, B, cmp)
    wp = _weights_for(a, b, cmp)
    env = topc.linear_envelope(wp.lin, wp.w_level)
    xs = np.r_[0.0, np.linspace(0, 1.5, 301)[1:], 1e9]
    for k in range(3):
        last = int(cmp.n_levels[k]) - 1
        f = np.array([prl.weights.linear_at(wp.lin, k, x, last) for x in xs])
        for i, x in enumerate(xs):
            s = int((wp.lin[k, 0, :last + 1] <= x).sum())
            bound = max(f[i], env[k, s]) if x > 0 else env[k, -1]
            assert bound >= f[i:].max()
            if x == 0:
                assert bound >= wp.w_level[k, 0]
