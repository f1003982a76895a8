"""PRL pattern counts over all pairs of a block (or of a blocking window).

The comparison vector of a pair is coded ``sum_k level_k * radix_k``
(mixed radix, ``radix_0 = 1``). Pattern counts are sparse: the codes that
occur, increasing, with their pair counts (:func:`sparse_counts`); blocks merge
exactly (integers, :func:`merge_counts`). The pattern space ``prod(n_levels)``
is never materialised, so 13 columns x several levels work. The counting path
(:mod:`.counting`) gives the same counts without comparing every pair.
"""

from __future__ import annotations

import numba
import numpy as np

from .comparison import Comparison, all_rows, const_tolerances, same_tolerances, transposed
from .compact import compact_levels, expand_codes
from .sortcount import codes_row, sorted_counts
from .hists import read_hists, sparse_of_hist, take_hists
from .sparse import merge_counts, sparse_counts

__all__ = ["pattern_counts", "pattern_kernel", "sparse_counts", "merge_counts",
           "DENSE_PATTERN_SPACE", "KERNELS", "RANK_ROWS"]


#: Largest pattern space counted in a dense histogram (uint32 per pattern: 256 MiB at
#: the limit, held by the task for the length of a block); above it a block's codes are
#: sorted and counted (:func:`~.sortcount.sorted_counts`, of any size).
DENSE_PATTERN_SPACE = 1 << 26

#: Pattern spaces up to this size are counted through several interleaved histograms
#: (a run of equal codes does not serialise the increments); above, one (cache-bound).
_INTERLEAVE_SPACE = 1 << 16


def _n_hists(n_patterns: int) -> int:
    """Histograms of a pattern space: 4 interleaved up to :data:`_INTERLEAVE_SPACE`, else 1."""
    return 4 if n_patterns <= _INTERLEAVE_SPACE else 1


#: A rows per chunk of the dense kernel: the chunk's values stay in cache while every B
#: row of the block is compared with it.
_CHUNK_ROWS = 1024

#: Tolerances per column compared in one unrolled pass (padded with -1, never met).
_UNROLL = 5


def _const_tolerances(tolT: np.ndarray, nlev: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """:func:`~.comparison.const_tolerances` padded to the kernels' unrolling
    (:data:`_UNROLL` tolerances at least)."""
    return const_tolerances(tolT, nlev, _UNROLL)


_FAST = dict(cache=True, nogil=True, boundscheck=False, error_model="numpy")


@numba.njit(inline="always", **_FAST)
def _add_column(avT, tolT, tc, const, xk, k, c0, c1, nlev, radix, code, cnt):
    # code[q] += level * radix of column k, A rows c0 + q against the B value xk; the
    # level is the number of tolerances missed, L - #(|a - b| <= t_l) (NaN meets none)
    n = c1 - c0
    r = radix[k]
    L = nlev[k] - 1
    a = avT[k, c0:c1]
    if const[k] and L <= _UNROLL:
        t0 = tc[k, 0]
        t1 = tc[k, 1]
        t2 = tc[k, 2]
        t3 = tc[k, 3]
        t4 = tc[k, 4]
        for q in range(n):
            d = abs(a[q] - xk)
            met = (np.int64(d <= t0) + np.int64(d <= t1) + np.int64(d <= t2)
                   + np.int64(d <= t3) + np.int64(d <= t4))
            code[q] += (L - met) * r
        return
    for q in range(n):
        cnt[q] = L
    for l in range(L):
        if const[k]:
            t = tc[k, l]
            for q in range(n):
                cnt[q] -= np.int64(abs(a[q] - xk) <= t)
        else:
            tl = tolT[k, l, c0:c1]
            for q in range(n):
                cnt[q] -= np.int64(abs(a[q] - xk) <= tl[q])
    for q in range(n):
        code[q] += cnt[q] * r


@numba.njit(inline="always", **_FAST)
def _add_two_columns(avT, tc, x, k, k2, c0, c1, nlev, radix, code):
    # _add_column of two constant-tolerance columns in one pass over the A rows
    n = c1 - c0
    r1 = radix[k]
    r2 = radix[k2]
    L1 = nlev[k] - 1
    L2 = nlev[k2] - 1
    x1 = x[k]
    x2 = x[k2]
    u0, u1, u2, u3, u4 = tc[k, 0], tc[k, 1], tc[k, 2], tc[k, 3], tc[k, 4]
    w0, w1, w2, w3, w4 = tc[k2, 0], tc[k2, 1], tc[k2, 2], tc[k2, 3], tc[k2, 4]
    a1 = avT[k, c0:c1]
    a2 = avT[k2, c0:c1]
    for q in range(n):
        d = abs(a1[q] - x1)
        e = abs(a2[q] - x2)
        m1 = (np.int64(d <= u0) + np.int64(d <= u1) + np.int64(d <= u2)
              + np.int64(d <= u3) + np.int64(d <= u4))
        m2 = (np.int64(e <= w0) + np.int64(e <= w1) + np.int64(e <= w2)
              + np.int64(e <= w3) + np.int64(e <= w4))
        code[q] += (L1 - m1) * r1 + (L2 - m2) * r2


@numba.njit(inline="always", **_FAST)
def _first_in(a, lo, hi, x, t):
    # first p in [lo, hi) with a[p] >= x or |a[p] - x| <= t: false then true on a sorted
    # a, as the computed |a - x| (monotone rounding) falls towards x and rises beyond it
    while lo < hi:
        m = (lo + hi) >> 1
        if a[m] >= x or abs(a[m] - x) <= t:
            hi = m
        else:
            lo = m + 1
    return lo


@numba.njit(inline="always", **_FAST)
def _first_out(a, lo, hi, x, t):
    # first p in [lo, hi) with a[p] > x and not |a[p] - x| <= t (false then true)
    while lo < hi:
        m = (lo + hi) >> 1
        if a[m] > x and not abs(a[m] - x) <= t:
            hi = m
        else:
            lo = m + 1
    return lo


@numba.njit(inline="always", **_FAST)
def _fill_sorted(a, tc, x, ks, c0, c1, nfin, L, r, code, bnd):
    # code[q] = level * r of the sorted column ks (values a, NaN from nfin on) for A rows
    # c0 + q: the rows meeting tolerance l form the interval [lo_l, hi_l) (nested), found
    # by binary search with the very predicate |a - x| <= t; no per-pair work
    e1 = min(c1, nfin)
    for l in range(L):
        bnd[l] = _first_in(a, c0, max(c0, e1), x, tc[ks, L - 1 - l])
    for l in range(L):
        bnd[L + l] = _first_out(a, bnd[L - 1] if L else c0, max(c0, e1), x, tc[ks, l])
    p = c0
    for s in range(2 * L + 1):
        e = bnd[s] if s < 2 * L else c1
        v = (L - s if s <= L else s - L) * r
        for i in range(p, e):
            code[i - c0] = v
        if e > p:
            p = e


@numba.njit(**_FAST)
def _codes_chunk(avT, tolT, tc, const, x, c0, c1, nlev, radix, code, cnt, ks, nfin, bnd):
    # code[q] (int64) of A rows c0 + q, q < c1 - c0, against B values x: column by column
    # over contiguous A values. ks >= 0: A is sorted by column ks (NaN last, nfin finite)
    # and that column's levels come from _fill_sorted (for a finite x); two columns
    # with constant tolerances are added in one pass
    n = c1 - c0
    K = avT.shape[0]
    skip = -1
    if ks >= 0 and np.isfinite(x[ks]):
        _fill_sorted(avT[ks], tc, x[ks], ks, c0, c1, nfin, nlev[ks] - 1, radix[ks], code, bnd)
        skip = ks
    else:
        for q in range(n):
            code[q] = 0
    k = 0
    while k < K:
        if k == skip:
            k += 1
            continue
        k2 = k + 1 if k + 1 != skip else k + 2
        if (k2 < K and const[k] and const[k2] and nlev[k] - 1 <= _UNROLL
                and nlev[k2] - 1 <= _UNROLL):
            _add_two_columns(avT, tc, x, k, k2, c0, c1, nlev, radix, code)
            k = k2 + 1
        else:
            _add_column(avT, tolT, tc, const, x[k], k, c0, c1, nlev, radix, code, cnt)
            k += 1
    return n


#: Most pairs counted into the uint32 histograms before they are added into int64.
_FLUSH_PAIRS = (1 << 32) - 1


@numba.njit(**_FAST)
def _sort_column(avT, tc, const, nlev):
    # the column whose levels _fill_sorted gives (the last: the largest radix, so that a
    # run of one level scatters into one sixth of the histogram), or -1 where it cannot:
    # per-row tolerances, more than _UNROLL, or a tolerance that is not finite and >= 0
    ks = avT.shape[0] - 1
    if ks < 0 or not const[ks] or nlev[ks] - 1 > _UNROLL:
        return -1
    for l in range(nlev[ks] - 1):
        if not (tc[ks, l] >= 0.0 and np.isfinite(tc[ks, l])):
            return -1
    return ks


@numba.njit(**_FAST)
def _flush(total, h, small):
    # the dense kernels' histograms into the int64 total (allocated at the first flush),
    # before any entry could overflow: h (nhist, P) uint32 and the small counters (uint16,
    # whose wraps h holds, or empty); all zeroed. Returns the total
    if total.size == 0:
        total = np.zeros(h.shape[1], dtype=np.int64)
    for g in range(h.shape[0]):
        for p in range(h.shape[1]):
            total[p] += h[g, p]
            h[g, p] = 0
    for p in range(small.size):
        total[p] += small[p]
        small[p] = 0
    return total


@numba.njit(**_FAST)
def _counts_flat(avT, tolT, tc, const, bv, nlev, radix, n_patterns, nhist, flush):
    # all pairs of a block: dense histograms of the whole pattern space, flushed into int64
    # before any entry could overflow; returns (int64 total or empty, uint32 hists). A is
    # first sorted by the last column (counts do not depend on the order of the pairs).
    # One histogram: uint16 counts (half the cache footprint), a wrap adds 2^16 to uint32
    na = avT.shape[1]
    ks = _sort_column(avT, tc, const, nlev)
    nfin = na
    if ks >= 0:
        key = avT[ks]
        fin = np.flatnonzero(key == key)
        perm = np.concatenate((fin[np.argsort(key[fin])], np.flatnonzero(key != key)))
        nfin = fin.size
        avT2 = np.empty_like(avT)
        tolT2 = np.empty_like(tolT)
        for p in range(na):
            i = perm[p]
            for k in range(avT.shape[0]):
                avT2[k, p] = avT[k, i]
                for l in range(tolT.shape[1]):
                    tolT2[k, l, p] = tolT[k, l, i]
        avT = avT2
        tolT = tolT2
    h = np.zeros((nhist, n_patterns), dtype=np.uint32)
    h16 = np.zeros(n_patterns if nhist == 1 else 0, dtype=np.uint16)
    total = np.zeros(0, dtype=np.int64)
    code = np.empty(_CHUNK_ROWS, dtype=np.int64)
    cnt = np.empty(_CHUNK_ROWS, dtype=np.int64)
    bnd = np.empty(2 * _UNROLL + 2, dtype=np.int64)
    since = 0
    for c0 in range(0, na, _CHUNK_ROWS):
        c1 = min(na, c0 + _CHUNK_ROWS)
        for j in range(bv.shape[0]):
            if since + (c1 - c0) > flush:
                total = _flush(total, h, h16)
                since = 0
            n = _codes_chunk(avT, tolT, tc, const, bv[j], c0, c1, nlev, radix, code, cnt, ks,
                             nfin, bnd)
            since += n
            if nhist == 4:
                for q in range(n):
                    h[q & 3, code[q]] += np.uint32(1)
            elif nhist == 2:
                for q in range(n):
                    h[q & 1, code[q]] += np.uint32(1)
            else:
                h0 = h[0]
                for q in range(n):
                    c = code[q]
                    v = np.uint16(h16[c] + 1)
                    h16[c] = v
                    if v == 0:
                        h0[c] += np.uint32(65536)
    for p in range(h16.size):
        h[0, p] += h16[p]
    return total, h


# ---- the rank kernel: all pairs of a block, every column with one tolerance per level ----

#: A rows ranked at a time by :func:`_counts_ranked` (int16 ranks: 2^15 at most, the int16
#: interval test of :func:`_met4` holds up to there). The dense kernel's tasks take this
#: many A rows (:func:`~sdcdist.linkage.prl.blocks.count_tasks`): a B row's runs are then
#: walked once per 32,768 A rows (10% less time a pair than per 8,192).
RANK_ROWS = 32768

#: B rows whose intervals one sorted walk per column and tolerance finds.
_WALK_ROWS = 8192

#: A rows whose pattern codes are computed at a time, per B row (int16 partial codes).
_RANK_CHUNK = 4096


def _rank_eligible(tc: np.ndarray, const: np.ndarray, nlev: np.ndarray) -> bool:
    """Whether :func:`_counts_ranked` counts this comparison: every column's tolerances
    are the same on every A row (``s``, categorical), at most ``_UNROLL`` of them, finite
    and >= 0 (so that the rows meeting one form a run of the sorted values)."""
    for k in range(tc.shape[0]):
        L = int(nlev[k]) - 1
        if not const[k] or L > _UNROLL:
            return False
        t = tc[k, :L]
        if not bool(np.all(np.isfinite(t) & (t >= 0.0))):
            return False
    return True


def _rank_side(av: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Per column of ``av`` (K, m): the rank of each row (int16: its position in the
    column's sorted order, NaN last; equal values in any order, the predicate of a value
    being the same on all of its rows), the sorted values and the number of non-NaN."""
    K, m = av.shape
    rank = np.empty((K, m), dtype=np.int16)
    sv = np.empty((K, m))
    nfin = np.empty(K, dtype=np.int64)
    pos = np.arange(m, dtype=np.int16)
    for k in range(K):
        o = np.argsort(av[k], kind="stable")          # NaN last
        rank[k, o] = pos
        sv[k] = av[k, o]
        nfin[k] = m - int(np.count_nonzero(np.isnan(av[k])))
    return rank, sv, nfin


@numba.njit(**_FAST)
def _walk_bounds(sv, nf, xs, t, lo, hi):
    # for every B value x of xs (finite, increasing): the run [lo, hi) of the sorted A
    # values sv[:nf] with |a - x| <= t, the very predicate of the other kernels: lo is the
    # first a with a >= x or |a - x| <= t, hi the first with a > x and not |a - x| <= t.
    # Both are false then true along sv (the computed |a - x| falls towards x and rises
    # beyond it, rounding being monotone) and their first index never decreases as x
    # grows, so each is one walk over sv
    p = 0
    e = 0
    for i in range(xs.size):
        x = xs[i]
        while p < nf and not (sv[p] >= x or abs(sv[p] - x) <= t):
            p += 1
        lo[i] = p
        if e < p:
            e = p
        while e < nf and not (sv[e] > x and not abs(sv[e] - x) <= t):
            e += 1
        hi[i] = e


@numba.njit(**_FAST)
def _rank_intervals(sv, nfin, tc, nlev, xb, cst):
    # cst[i, k, l] and cst[i, k, _UNROLL + l], int16, for B rows xb[i]: the interval
    # [lo, hi) of ranks meeting tolerance l of column k as two constants, so that a rank r
    # meets it iff int16(r + cst[.., l]) < cst[.., _UNROLL + l] (r - lo < hi - lo unsigned,
    # shifted into signed int16). Empty ([0, 0): never met) for a non-finite B value and
    # for the levels a column does not have. Returns the B rows in the order of the last
    # column (NaN last)
    nb = xb.shape[0]
    K = sv.shape[0]
    U = _UNROLL
    for i in range(nb):
        for k in range(K):
            for l in range(U):
                cst[i, k, l] = np.int16(-32768)
                cst[i, k, U + l] = np.int16(-32768)
    lo = np.empty(nb, dtype=np.int64)
    hi = np.empty(nb, dtype=np.int64)
    xl = xb[:, K - 1]
    fb = np.flatnonzero(xl == xl)
    order = np.concatenate((fb[np.argsort(xl[fb])], np.flatnonzero(xl != xl)))
    for k in range(K):
        x = xb[:, k]
        fin = np.flatnonzero(np.isfinite(x))
        ob = fin[np.argsort(x[fin])]
        xs = x[ob]
        for l in range(nlev[k] - 1):
            _walk_bounds(sv[k], nfin[k], xs, tc[k, l], lo, hi)
            for s in range(ob.size):
                i = ob[s]
                cst[i, k, l] = np.int16(32768 - lo[s])
                cst[i, k, U + l] = np.int16(hi[s] - lo[s] - 32768)
    return order


@numba.njit(inline="always", **_FAST)
def _met4(x, c1, c2, c3, c4, w1, w2, w3, w4):
    # how many of a column's tolerances 1 to 4 the rank x meets, int16: each met iff
    # int16(x + c_l) < w_l (_rank_intervals' encoding); unrolled so that the callers'
    # loops vectorise
    return (np.int16(np.int16(x + c1) < w1) + np.int16(np.int16(x + c2) < w2)
            + np.int16(np.int16(x + c3) < w3) + np.int16(np.int16(x + c4) < w4))


@numba.njit(inline="always", **_FAST)
def _add_ranked(rk, acc, c, r, n, tight, into):
    # acc[q] (into: acc[q] =) += -r * (tolerances met) of one column, for the A rows of
    # ranks rk[:n] (int16 lanes; -r int16 before the loop: nothing to re-broadcast per
    # vector; the caller adds every column's L * r). tight: the first tolerance may be met
    # (else its run is empty for every column, _counts_ranked_rows, and is not tested)
    c0, c1, c2, c3, c4 = c[0], c[1], c[2], c[3], c[4]
    w0, w1, w2, w3, w4 = c[5], c[6], c[7], c[8], c[9]
    nr = np.int16(-r)
    if tight:
        for q in range(n):
            x = rk[q]
            m = np.int16(np.int16(x + c0) < w0) + _met4(x, c1, c2, c3, c4, w1, w2, w3, w4)
            acc[q] = m * nr + (np.int16(0) if into else acc[q])
    else:
        for q in range(n):
            m = _met4(rk[q], c1, c2, c3, c4, w1, w2, w3, w4)
            acc[q] = m * nr + (np.int16(0) if into else acc[q])


@numba.njit(inline="always", **_FAST)
def _set_sorted(c, c0, c1, r, acc, bnd):
    # _add_ranked (into acc) of a column whose ranks are the positions c0..c1-1 (the A rows
    # in its order): the rank p meets tolerance l iff lo <= p < hi, the interval that c encodes
    # ((p - lo) mod 2^16 < hi - lo), so the level is constant between the ends of the
    # intervals: the very predicate at the first rank of each run, filled along it
    U = _UNROLL
    nb = 0
    for l in range(U):
        lo = (32768 - np.int64(c[l])) & 0xFFFF
        hi = lo + ((np.int64(c[U + l]) + 32768) & 0xFFFF)
        if c0 < lo < c1:
            bnd[nb] = lo
            nb += 1
        if c0 < hi < c1:
            bnd[nb] = hi
            nb += 1
    bnd[nb] = c1
    nb += 1
    for s in range(1, nb):
        e = bnd[s]
        t = s
        while t > 0 and bnd[t - 1] > e:
            bnd[t] = bnd[t - 1]
            t -= 1
        bnd[t] = e
    nr = np.int16(-r)
    p = c0
    for s in range(nb):
        e = bnd[s]
        if e > p:
            x = np.int16(p)
            m = 0
            for l in range(U):
                m += np.int16(x + c[l]) < c[U + l]
            v = np.int16(m * nr)
            acc[p - c0:e - c0] = v
            p = e


@numba.njit(inline="always", **_FAST)
def _scatter(code, n, h, h16):
    # code[:n] counted into the histograms: nhist == 4 (or 2) interleaved uint32, or the
    # uint16 counters whose wraps add 65536 to h[0] (unsigned indices: no negative-index
    # wraparound)
    nhist = h.shape[0]
    if nhist == 4:
        for q in range(n):
            h[np.uint32(q & 3), np.uint32(code[q])] += np.uint32(1)
    elif nhist == 2:
        for q in range(n):
            h[np.uint32(q & 1), np.uint32(code[q])] += np.uint32(1)
    else:
        h0 = h[0]
        for q in range(n):
            c = np.uint32(code[q])
            v = np.uint16(h16[c] + 1)
            h16[c] = v
            if v == 0:
                h0[c] += np.uint32(65536)


@numba.njit(**_FAST)
def _counts_ranked_rows(rank, sv, nfin, tc, bv, nlev, radix, h, h16, total, since, flush,
                        walk_rows, chunk, out):
    # all pairs of a block, every column with one tolerance per level (_rank_eligible):
    # each A column is ranked once, each B row's runs of ranks meeting each tolerance come
    # from sorted walks (_rank_intervals), and a pair's level in a column is then a few
    # int16 comparisons of its A row's rank. Partial codes of columns whose levels
    # multiply to at most 2^15 sum in int16 (16 pairs a vector), then into the int32 code.
    # The A rows are taken in the order of the last column (the largest radix: a run of
    # one level scatters into one part of the histogram), whose levels then come by runs
    # (_set_sorted; pair by pair when the rows are in another order). Histograms as
    # _counts_flat: nhist == 4 interleaved uint32; nhist == 1 uint16 (half the uint32
    # footprint; 7% faster a pair than uint8, whose wraps come 256 times as often) whose
    # wraps add 65536 to uint32; flushed into int64
    # before any entry could overflow. Here the A rows of one ranking (_rank_side of rows
    # sorted by the last column), B rows walked walk_rows at a time, codes of chunk A rows
    # at a time; since pairs counted in h and h16 since the last flush. Returns (int64
    # total or empty, since).
    K, m = rank.shape
    U = _UNROLL
    # groups of columns [gs[g], gs[g + 1]) whose partial codes fit in int16
    gs = np.empty(K + 1, dtype=np.int64)
    ng = 0
    k = 0
    while k < K:
        gs[ng] = k
        ng += 1
        prod = nlev[k]
        k += 1
        while k < K and prod * nlev[k] <= 32768:
            prod *= nlev[k]
            k += 1
    gs[ng] = K
    # every tolerance missed: the code of a pair is base minus, per column, the tolerances
    # it meets times the column's radix (partial codes relative to their group's first)
    # (radixes within the group read as int16 from an array: broadcast once per loop)
    base = 0
    rg = np.empty(K, dtype=np.int16)
    for g in range(ng):
        for kk in range(gs[g], gs[g + 1]):
            base += (nlev[kk] - 1) * radix[kk]
            rg[kk] = radix[kk] // radix[gs[g]]
    b32 = np.int32(base)
    # the last column's ranks are the positions when the A rows are in its order
    ordered = True
    for i in range(m):
        if rank[K - 1, i] != i:
            ordered = False
            break
    bnd = np.empty(2 * U + 1, dtype=np.int64)
    cst = np.empty((walk_rows, K, 2 * U), dtype=np.int16)
    acc = np.empty((ng, chunk), dtype=np.int16)
    code = np.empty(chunk, dtype=np.int32)
    for g0 in range(0, bv.shape[0], walk_rows):
        g1 = min(bv.shape[0], g0 + walk_rows)
        # the B rows in the order of the last column too: consecutive B rows then
        # meet a chunk of A rows at the same level of it, and their codes fall into
        # the same part of the histogram (which stays in cache)
        ob = _rank_intervals(sv, nfin, tc, nlev, bv[g0:g1], cst)
        for c0 in range(0, m, chunk):
            c1 = min(m, c0 + chunk)
            n = c1 - c0
            for jj in range(g1 - g0):
                j = ob[jj]
                if since + n > flush:
                    total = _flush(total, h, h16)
                    since = 0
                since += n
                # continuous values: no A value equals the B row's, a run of the first
                # tolerance (0) empty in every column, which then costs no test
                tight = False
                for kk in range(K):
                    tight |= cst[j, kk, U] != np.int16(-32768)
                for g in range(ng):
                    ag = acc[g]
                    k0 = gs[g]
                    k1 = gs[g + 1]
                    if ordered and k1 == K:
                        k1 = K - 1
                        _set_sorted(cst[j, K - 1], c0, c1, rg[K - 1], ag, bnd)
                    else:
                        _add_ranked(rank[k0, c0:c1], ag, cst[j, k0], rg[k0], n, tight, True)
                        k0 += 1
                    for kk in range(k0, k1):
                        _add_ranked(rank[kk, c0:c1], ag, cst[j, kk], rg[kk], n, tight, False)
                # the int32 codes in one pass (group 0's radix is 1)
                a0 = acc[0]
                if ng == 1:
                    for q in range(n):
                        code[q] = np.int32(a0[q]) + b32
                else:
                    a1 = acc[1]
                    r1 = np.int32(radix[gs[1]])
                    for q in range(n):
                        code[q] = np.int32(a0[q]) + np.int32(a1[q]) * r1 + b32
                    for g in range(2, ng):
                        ag = acc[g]
                        gr = np.int32(radix[gs[g]])
                        for q in range(n):
                            code[q] += np.int32(ag[q]) * gr
                if out.size:
                    # the codes kept, out[since - n:since], counted later (_count_codes)
                    for q in range(n):
                        out[since - n + q] = code[q]
                else:
                    _scatter(code, n, h, h16)
    return total, since


@numba.njit(**_FAST)
def _count_codes(code, h, h16, total, since, flush):
    # the codes counted into the histograms as _counts_ranked_rows counts its own (flushed
    # into int64 first when they could overflow); returns (total, since)
    n = code.size
    if since + n > flush:
        total = _flush(total, h, h16)
        since = 0
    since += n
    _scatter(code, n, h, h16)
    return total, since


#: Fewest pairs of a ranking from which :func:`_ranked_hists` with a ``pmap`` computes the
#: codes of one block of B rows while the previous block's are counted (two threads: the
#: codes are arithmetic, the counting waits on memory); :data:`PIPE_PAIRS` pairs a block.
PIPE_MIN_PAIRS = 1 << 22
PIPE_PAIRS = 1 << 21


def _pipelined(rank: np.ndarray, sv: np.ndarray, nfin: np.ndarray, tc: np.ndarray,
               bv: np.ndarray, nlev: np.ndarray, radix: np.ndarray, h: np.ndarray,
               h16: np.ndarray, total: np.ndarray, since: int, flush: int, walk_rows: int,
               chunk: int, pmap) -> tuple[np.ndarray, int]:
    """:func:`_counts_ranked_rows` of all B rows, by blocks: the codes of block r (into
    one of two buffers) beside the counting of block r - 1's, each step one ``pmap`` of
    the two. The same histograms (counts do not depend on the order of the pairs)."""
    m = rank.shape[1]
    rows = max(1, PIPE_PAIRS // max(m, 1))
    blocks = [(j, min(j + rows, bv.shape[0])) for j in range(0, bv.shape[0], rows)]
    bufs = (np.empty(rows * m, dtype=np.int32), np.empty(rows * m, dtype=np.int32))
    none = np.zeros(0, dtype=np.int64)
    state = [total, since]

    def codes(r: int) -> None:
        j0, j1 = blocks[r]
        _counts_ranked_rows(rank, sv, nfin, tc, bv[j0:j1], nlev, radix, h, h16, none, 0,
                            1 << 62, walk_rows, chunk, bufs[r % 2])

    def count(r: int) -> None:
        j0, j1 = blocks[r]
        state[0], state[1] = _count_codes(bufs[r % 2][:(j1 - j0) * m], h, h16, state[0],
                                          state[1], flush)
    for r in range(len(blocks) + 1):
        pmap(lambda f, x: f(x), ([(codes, r)] if r < len(blocks) else [])
             + ([(count, r - 1)] if r else []))
    return state[0], state[1]


def _counts_ranked(avT: np.ndarray, tc: np.ndarray, bv: np.ndarray, nlev: np.ndarray,
                   radix: np.ndarray, n_patterns: int, nhist: int, flush: int, rank_rows: int,
                   walk_rows: int, chunk: int) -> tuple[np.ndarray, np.ndarray]:
    """All pairs of a block with :func:`_counts_ranked_rows`, the A rows ranked
    ``rank_rows`` (at most :data:`RANK_ROWS`) at a time in the order of the last column
    (NaN last). Returns (int64 total or empty, uint32 hists) as :func:`_counts_flat`."""
    total, h, h16 = _ranked_hists(avT, tc, bv, nlev, radix, n_patterns, nhist, flush,
                                  rank_rows, walk_rows, chunk)
    if h16.size:
        h[0] += h16
    return total, h


def _ranked_hists(avT: np.ndarray, tc: np.ndarray, bv: np.ndarray, nlev: np.ndarray,
                  radix: np.ndarray, n_patterns: int, nhist: int, flush: int, rank_rows: int,
                  walk_rows: int, chunk: int, pmap=None
                  ) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """:func:`_counts_ranked` with the uint16 counters apart (empty unless ``nhist`` is 1):
    ``(total, h, h16)``, the counts ``total + h.sum(0) + h16`` (:func:`~.hists.sparse_of_hists`
    reads them without adding two arrays the size of the pattern space). ``pmap``: from
    :data:`PIPE_MIN_PAIRS` pairs of a ranking on, codes and counting side by side
    (:func:`_pipelined`)."""
    K, na = avT.shape
    h, h16 = take_hists(nhist, n_patterns)
    total = np.zeros(0, dtype=np.int64)
    since = 0
    for a0 in range(0, na, min(rank_rows, RANK_ROWS)):
        blk = avT[:, a0:a0 + min(rank_rows, RANK_ROWS)]
        av = np.ascontiguousarray(blk[:, np.argsort(blk[K - 1], kind="stable")])
        rank, sv, nfin = _rank_side(av)
        if pmap is not None and rank.shape[1] * bv.shape[0] >= PIPE_MIN_PAIRS:
            total, since = _pipelined(rank, sv, nfin, tc, bv, nlev, radix, h, h16, total,
                                      since, flush, walk_rows, chunk, pmap)
        else:
            total, since = _counts_ranked_rows(rank, sv, nfin, tc, bv, nlev, radix, h, h16,
                                               total, since, flush, walk_rows, chunk,
                                               np.zeros(0, dtype=np.int32))
    return total, h, h16


@numba.njit(cache=True, nogil=True)
def _counts_dense(avT, tolT, bv, lo, hi, aidx, identity, nlev, radix, n_patterns, nhist,
                  flush):
    # pairs of blocking windows: codes per B row as codes_row, dense uint32 histograms
    total = np.zeros(0, dtype=np.int64)
    h = np.zeros((nhist, n_patterns), dtype=np.uint32)
    code = np.empty(avT.shape[1] if identity else max(1, aidx.size), dtype=np.int64)
    none = np.zeros(0, dtype=np.uint8)
    since = 0
    for j in range(bv.shape[0]):
        if since + (hi[j] - lo[j]) > flush:
            total = _flush(total, h, none)
            since = 0
        n = codes_row(avT, tolT, bv[j], lo[j], hi[j], aidx, identity, nlev, radix, code)
        since += n
        for q in range(n):
            h[q & (nhist - 1), code[q]] += np.uint32(1)
    return total, h


#: Pattern count kernels (:func:`pattern_counts`).
KERNELS = ("auto", "dense", "sparse")


def pattern_kernel(cmp: Comparison) -> str:
    """The kernel :func:`pattern_counts` uses by default: ``dense`` (a histogram of the
    whole pattern space, :data:`DENSE_PATTERN_SPACE` patterns at most) or ``sparse``."""
    return "dense" if cmp.n_patterns <= DENSE_PATTERN_SPACE else "sparse"


def pattern_counts(a: dict, b: dict, cmp: Comparison, *, lo: np.ndarray | None = None,
                   hi: np.ndarray | None = None, aidx: np.ndarray | None = None,
                   kernel: str = "auto", pmap=None) -> tuple[np.ndarray, np.ndarray]:
    """Sparse counts of the comparison patterns over pairs of a block.

    Parameters
    ----------
    a, b : dict
        :func:`prepare_side` output for some A rows and some B rows.
    lo, hi, aidx : int arrays, optional
        Restrict B row ``j`` to the A rows ``aidx[lo[j]:hi[j]]`` (a blocking
        window); default all pairs of the block.
    kernel : {"auto", "dense", "sparse"}
        ``dense``: each pair's pattern code (mixed radix) counted in uint32
        histograms of the whole pattern space, flushed into int64 before they
        could overflow. On all pairs of a block whose every column has the same
        tolerances on every A row (``s``, categorical; at most five a column),
        the rank kernel: each A column is ranked once, each B row's runs of
        ranks meeting each tolerance come from walks over the sorted values
        with the very predicate, and a pair's level is a few int16 comparisons
        of its rank (a uint16 histogram, wraps carried exactly). Otherwise, on
        all pairs of a block the levels are computed column
        by column over chunks of contiguous A values, a column whose tolerance
        is the same on every A row (``s``, categorical) compared with it as a
        scalar (vectorised, two such columns per pass). The block's A rows are
        first sorted by the last column: where its tolerances are the same on
        every row, the rows meeting each tolerance form one run per B row,
        found by binary search with the very predicate, so that column costs
        nothing per pair and a run scatters into one part of the histogram.
        ``sparse``: the pairs' codes, a few million at a time, sorted and counted by
        runs (:func:`~.sortcount.sorted_counts`), for pattern spaces of any size.
        ``auto``:
        :func:`pattern_kernel`. All give the same counts: the same predicate
        ``|a - b| <= tol`` in float64, integer counts.

    pmap : callable, optional
        ``pmap(fn, blocks)`` -> ``[fn(*b) for b in blocks]`` (e.g. on two threads): the
        rank kernel then computes one block's codes beside the counting of the previous
        block's (:func:`_pipelined`), the sparse kernel sorts its chunks side by side; the
        same counts.

    Returns
    -------
    codes, counts : ndarrays of int64, shape (p,)
        The patterns that occur (increasing codes) and their pair counts, as
        :func:`sparse_counts`; :func:`merge_counts` adds blocks up.
    """
    if kernel not in KERNELS:
        raise ValueError(f"kernel must be one of {', '.join(KERNELS)}; got {kernel!r}")
    if kernel == "auto":
        kernel = pattern_kernel(cmp)
    if kernel == "dense" and cmp.n_patterns > DENSE_PATTERN_SPACE:
        raise ValueError(f"{cmp.n_patterns} patterns exceed the dense kernel's "
                         f"{DENSE_PATTERN_SPACE}; use the sparse kernel")
    identity = lo is None
    if identity:
        lo, hi, aidx = all_rows(b["v"].shape[0], a["v"].shape[0])
    avT, tolT = transposed(a)
    if kernel == "dense":
        P = int(cmp.n_patterns)
        nhist = _n_hists(P)
        if identity:
            tc, const = _const_tolerances(tolT, cmp.n_levels)
            if _rank_eligible(tc, const, cmp.n_levels) and P < (1 << 31):
                # without the exact levels no pair meets (:mod:`.compact`): a sixth of
                # the counters a column, the same counts
                bv = np.ascontiguousarray(b["v"])
                cl = compact_levels(avT, bv, tc, cmp.n_levels)
                nl, rad, tck, Pk = (cmp.n_levels, cmp.radix, tc, P) if cl is None else \
                    (cl.nlev, cl.radix, cl.tc, cl.n_patterns)
                codes, counts = read_hists(*_ranked_hists(
                    avT, tck, bv, nl, rad, Pk, _n_hists(Pk),
                    _FLUSH_PAIRS, RANK_ROWS, _WALK_ROWS, _RANK_CHUNK, pmap),
                    pairs=int(avT.shape[1]) * int(b["v"].shape[0]), pmap=pmap)
                return (codes, counts) if cl is None else \
                    (expand_codes(codes, cl, cmp.radix), counts)
            total, h = _counts_flat(avT, tolT, tc, const, np.ascontiguousarray(b["v"]),
                                    cmp.n_levels, cmp.radix, P, nhist, _FLUSH_PAIRS)
        else:
            total, h = _counts_dense(avT, tolT, b["v"], lo, hi, aidx, identity, cmp.n_levels,
                                     cmp.radix, P, nhist, _FLUSH_PAIRS)
        return sparse_of_hist(total, h)
    return sorted_counts(avT, tolT, b["v"], lo, hi, aidx, identity, cmp.n_levels, cmp.radix,
                         pmap=pmap)
