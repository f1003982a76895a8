"""The rank kernel's pattern space without the exact levels no pair meets (compact.py): the
same counts as the all-pairs sparse kernel and the CATALOG formula, and a code map that keeps
the codes' order."""

import numpy as np
import pytest

from sdcdist.linkage import prl
from sdcdist.linkage.prl import compact, patterns
from sdcdist.linkage.prl.comparison import transposed
from test_prl_kernel import _brute_s, _same, _sides


def _masked(n_a, n_b, K, seed):
    # continuous A, B = A's rows plus noise (no value shared), NaN in both
    rng = np.random.default_rng(seed)
    A = rng.normal(size=(n_a, K))
    B = A[rng.permutation(n_a)[:n_b]] + rng.normal(scale=0.2, size=(n_b, K))
    A[rng.random((n_a, K)) < 0.04] = np.nan
    B[rng.random((n_b, K)) < 0.04] = np.nan
    return A, B


def test_compact_levels_drop_only_exact_levels_no_pair_meets():
    """A column loses its exact level only when its first tolerance is 0, it has at least
    three levels and no finite value is on both sides (0.0 and -0.0 are one value; a shared
    infinity or NaN meets no exact level)."""
    A, B = _masked(300, 200, 6, seed=1)
    A[:, 4] = 2 * np.arange(300) % 10              # a categorical column: codes, none
    B[:, 4] = 2 * np.arange(200) % 10 + 1          # shared, but only two levels
    cmp = prl.comparison(6, t=[[0, 0.1, 0.5, 1.0], [0, 0.1, 0.5], [0, 0.1, 0.5],
                               [0, 0.2, 0.4], [0, 0.5], [0.1, 0.2, 0.5]],
                         categorical=[False] * 4 + [True, False])
    a, b = _sides(A, B, cmp)
    a["v"][5, 1] = b["v"][7, 1]            # column 1 shares a value
    a["v"][::17, 2] = -0.0
    b["v"][3, 2] = 0.0                     # column 2 shares zero (signed)
    a["v"][::13, 3] = np.inf
    b["v"][::11, 3] = np.inf               # column 3 shares only an infinity
    avT, tolT = transposed(a)
    tc, const = patterns._const_tolerances(tolT, cmp.n_levels)
    cl = compact.compact_levels(avT, np.ascontiguousarray(b["v"]), tc, cmp.n_levels)
    # 0: dropped; 1, 2: a shared value; 3: only an infinity shared: dropped; 4: two
    # levels;
    # 5: first tolerance not 0
    np.testing.assert_array_equal(cl.drop, [1, 0, 0, 1, 0, 0])
    np.testing.assert_array_equal(cl.nlev, cmp.n_levels - cl.drop)
    assert cl.n_patterns == int(np.prod(cl.nlev))
    np.testing.assert_array_equal(cl.tc[0, :4], tc[0, 1:5])
    assert cl.tc[0, 4] == -1.0
    np.testing.assert_array_equal(cl.tc[1], tc[1])
    # nothing to drop
    A2 = np.round(A * 2) / 2
    B2 = np.round(B * 2) / 2
    B2[:, 4] = A2[:200, 4]
    a2, b2 = _sides(A2, B2, prl.comparison(6))
    avT2, tolT2 = transposed(a2)
    tc2, _ = patterns._const_tolerances(tolT2, prl.comparison(6).n_levels)
    assert compact.compact_levels(avT2, np.ascontiguousarray(b2["v"]), tc2,
                                  prl.comparison(6).n_levels) is None


def test_expand_codes_keeps_order_and_maps_every_digit():
    """Every code of a small compact space maps to the comparison's code of the same
    levels, each dropped column's level one higher; increasing codes stay increasing."""
    nlev = np.array([6, 3, 6, 4], dtype=np.int64)
    drop = np.array([1, 0, 1, 0], dtype=np.int64)
    nl = nlev - drop
    radix = np.concatenate([[1], np.cumprod(nlev)[:-1]])
    cl = compact.CompactLevels(nl, np.concatenate([[1], np.cumprod(nl)[:-1]]),
                               np.zeros((4, 5)), drop, int(np.prod(nl)))
    codes = np.arange(cl.n_patterns)
    full = compact.expand_codes(codes, cl, radix)
    assert np.all(np.diff(full) > 0)
    digits = np.stack(np.unravel_index(codes, tuple(nl[::-1])))[::-1]     # (K, P)
    np.testing.assert_array_equal(full, ((digits + drop[:, None]) * radix[:, None]).sum(0))


@pytest.mark.parametrize("K,seed", [(3, 2), (8, 3)])
def test_rank_kernel_in_the_compact_space_counts_as_the_sparse_kernel(K, seed, monkeypatch):
    """Masked continuous keys (no value shared: every exact level dropped), then some
    columns sharing a value (their exact levels kept, the others still dropped), with NaN,
    infinities and signed zeros: the dense kernel (the rank kernel in the smaller space)
    gives the sparse kernel's counts and the CATALOG formula's, bit for bit, also with its
    codes computed beside their counting and the counters read in parts on two threads."""
    from sdcdist.linkage.prl import hists
    from sdcdist.parallel import thread_pool
    A, B = _masked(500, 300, K, seed)
    cmp = prl.comparison(K)
    a, b = _sides(A, B, cmp)

    def drop() -> np.ndarray:
        avT, tolT = transposed(a)
        tc, _ = patterns._const_tolerances(tolT, cmp.n_levels)
        cl = compact.compact_levels(avT, np.ascontiguousarray(b["v"]), tc, cmp.n_levels)
        return np.zeros(K, dtype=np.int64) if cl is None else cl.drop

    def check(ref) -> None:
        _same(prl.pattern_counts(a, b, cmp, kernel="dense"), ref)
        # the pipelined codes and the counters read in parts (their thresholds lowered so
        # that this block takes them)
        monkeypatch.setattr(patterns, "PIPE_MIN_PAIRS", 0)
        monkeypatch.setattr(patterns, "PIPE_PAIRS", 4096)
        monkeypatch.setattr(hists, "NONZERO_PMAP_MIN", 0)
        with thread_pool(2) as pmap:
            _same(prl.pattern_counts(a, b, cmp, kernel="dense", pmap=pmap), ref)
        monkeypatch.undo()

    np.testing.assert_array_equal(drop(), np.ones(K))
    ref = prl.pattern_counts(a, b, cmp, kernel="sparse")
    _same(ref, _brute_s(A, B, cmp))
    check(ref)
    # one column shares a value, another only infinities, a third signed zeros
    a["v"][4, 0] = b["v"][9, 0]
    a["v"][::31, K - 1] = np.inf
    b["v"][::29, K - 1] = np.inf
    a["v"][::7, 1] = -0.0
    b["v"][::5, 1] = 0.0
    np.testing.assert_array_equal(drop(), [0, 0] + [1] * (K - 2))
    check(prl.pattern_counts(a, b, cmp, kernel="sparse"))
