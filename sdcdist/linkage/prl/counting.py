"""Exact PRL pattern counts without comparing every pair (the counting path).

The all-pairs path (:func:`sdcdist.linkage.pattern_counts`) compares each
of the ``n_a n_b`` pairs. This module gives the same integer counts, bit for
bit, while comparing only a fraction of them.

Rank space
----------
For a fixed A value ``a`` with tolerance ``tol``, the set of B values ``b``
with ``fl(|a - b|) <= tol`` (the comparison the kernels evaluate) is a
contiguous run of B's sorted values: on either side of ``a`` the rounded
difference is monotone in ``b``. So each column ``k`` of B is sorted once
(stable, NaN last) and every A record ``i`` gets, per column and tolerance
level ``l``, a half-open interval ``[lo, hi)`` of sorted positions, found by
binary search on the very predicate the kernels use (never on ``a +- tol``,
which rounds differently). A pair agrees on ``(k, l)`` iff the rank of its B
value in column ``k`` lies in that interval; the intervals of one column are
nested over the levels. NaN (A or B) is never inside an interval: the pair
sits at the last level, as in the all-pairs kernels. Categorical columns are
the same with tolerance 0 (equal codes are a run of the sort).

Counting
--------
For each A record ``i`` let ``H`` be its two columns with the widest
loosest-level intervals (``h`` = 1 column when there is one key) and ``L`` the
rest. Pairs split into

- pairs agreeing (at any level) on some column of ``L``: enumerated. Column
  ``k`` of ``L`` contributes the B records of its loosest interval that agree
  on no earlier column of ``L``; their full patterns are computed from the
  ranks (a copy of B's rank table in column ``k``'s sort order makes the walk
  sequential);
- pairs at the last level on every column of ``L``: their levels on ``H``
  follow by inclusion-exclusion (Moebius inversion over the cumulative levels
  ``level <= c``) from box counts ``#{j: rank_h1(j) in I1, rank_h2(j) in I2}``,
  minus the enumerated pairs with the same ``H`` levels. The box counts come
  from a wavelet matrix over the sequence ``rank_l(j)`` in column ``k``'s sort
  order, one per column pair ``k < l``: ``O(log n_b)`` each.

The enumeration runs column by column over a block of A rows taken in the
order of their interval in that column (consecutive intervals overlap, so B's
ranks are read from cache), and with binary comparisons on at most
:data:`HIST_KEYS` columns each interval walk counts into four interleaved
histograms of the ``2^K`` patterns (a run of equal patterns does not serialise
the increments). Integer counts: the result does not depend on the order.

Cost (per A record): ``K L`` binary searches, ``(L_h1) (L_h2)`` box counts
(``L_k`` tolerances of column ``k``), and one pass over the loosest intervals
of the ``K - 2`` narrower columns, each visited B record costing ``sum_k L_k``
comparisons. The enumerated pairs are therefore ``sum_i (sum_k |I_ik| - the
two widest)`` against ``n_a n_b`` for all pairs: the path pays off when the
columns are selective (skewed data, narrow tolerances), not when several
columns agree on a large share of all pairs; :func:`enumerated_share`
estimates the share on a sample before anything runs. Index memory: B's
ranks in every column's order, ``4 K^2 n_b`` bytes, plus ``K (K - 1) / 2``
wavelet matrices of about ``2 n_b log2(n_b) / 8`` bytes each.
"""

from __future__ import annotations


import numba
import numpy as np

from .comparison import Comparison

__all__ = ["build_index", "sorted_columns", "rank_ranges", "count_block", "enumerated_share", "index_bytes",
           "sample_rows"]


# --------------------------------------------------------------------------
# wavelet matrix: count the j in [x0, x1) with y0 <= seq[j] < y1 in O(log n)
# --------------------------------------------------------------------------

@numba.njit(cache=True, nogil=True, inline="always")
def _popcount(x):
    x = x - ((x >> np.uint64(1)) & np.uint64(0x5555555555555555))
    x = (x & np.uint64(0x3333333333333333)) + ((x >> np.uint64(2)) & np.uint64(0x3333333333333333))
    x = (x + (x >> np.uint64(4))) & np.uint64(0x0F0F0F0F0F0F0F0F)
    return np.int64((x * np.uint64(0x0101010101010101)) >> np.uint64(56))


@numba.njit(cache=True, nogil=True)
def _wm_build(seq, nbits, bits, cum, zeros):
    # bits (nbits, nw) uint64, cum (nbits, nw + 1) int64, zeros (nbits,) int64: filled in place
    n = seq.size
    nw = bits.shape[1]
    cur = seq.astype(np.int64)
    nxt = np.empty_like(cur)
    for lv in range(nbits):
        sh = nbits - 1 - lv
        z = 0
        for i in range(n):
            if (cur[i] >> sh) & 1:
                bits[lv, i >> 6] |= np.uint64(1) << np.uint64(i & 63)
            else:
                z += 1
        zeros[lv] = z
        c = 0
        for w in range(nw):
            cum[lv, w] = c
            c += _popcount(bits[lv, w])
        cum[lv, nw] = c
        p0 = 0
        p1 = z
        for i in range(n):
            if (cur[i] >> sh) & 1:
                nxt[p1] = cur[i]
                p1 += 1
            else:
                nxt[p0] = cur[i]
                p0 += 1
        cur, nxt = nxt, cur


@numba.njit(cache=True, nogil=True, inline="always")
def _rank0(bits, cum, lv, i):
    w = i >> 6
    r = i & 63
    ones = cum[lv, w]
    if r:
        ones += _popcount(bits[lv, w] & ((np.uint64(1) << np.uint64(r)) - np.uint64(1)))
    return i - ones


@numba.njit(cache=True, nogil=True)
def _wm_less(bits, cum, zeros, nbits, x0, x1, y):
    # number of positions p in [x0, x1) with seq[p] < y (0 <= y < 2**nbits)
    res = 0
    for lv in range(nbits):
        if x0 >= x1:
            break
        r0 = _rank0(bits, cum, lv, x0)
        r1 = _rank0(bits, cum, lv, x1)
        if (y >> (nbits - 1 - lv)) & 1:
            res += r1 - r0
            x0 = zeros[lv] + (x0 - r0)
            x1 = zeros[lv] + (x1 - r1)
        else:
            x0 = r0
            x1 = r1
    return res


# --------------------------------------------------------------------------
# index of B and intervals of A
# --------------------------------------------------------------------------

def index_bytes(n_b: int, K: int) -> int:
    """Approximate bytes of :func:`build_index` for ``n_b`` records and ``K`` keys."""
    nbits = max(1, int(n_b).bit_length())
    nw = (n_b >> 6) + 1
    return (4 * K * K * n_b + 12 * K * n_b
            + K * (K - 1) // 2 * nbits * (16 * nw + 8))


def sorted_columns(b: dict, cmp: Comparison) -> dict[str, np.ndarray]:
    """The part of :func:`build_index` that :func:`enumerated_share` needs: each key column
    of B sorted (``sorted`` (K, n_b), NaN last) and its finite values (``nf`` (K,)). A
    few sorts: the share is estimated before the whole index is built."""
    v = np.asarray(b["v"], dtype=np.float64)
    srt = np.sort(v, axis=0).T.copy()                 # NaN sort last, as in build_index
    nf = np.count_nonzero(~np.isnan(v), axis=0).astype(np.int64)
    return {"sorted": np.ascontiguousarray(srt), "nf": nf}


def build_index(b: dict, cmp: Comparison) -> dict[str, np.ndarray]:
    """Sort B's key columns and index the ranks (see the module docstring).

    Parameters
    ----------
    b : dict
        :func:`~sdcdist.linkage.prepare_side` output of B (``v`` (n_b, K)).
    cmp : Comparison

    Returns
    -------
    dict
        ``sorted`` (K, n_b) float64 sorted values (NaN last); ``nf`` (K,) finite
        values per column; ``perm`` (K, n_b, K) int32: row ``x`` of ``perm[k]``
        holds the ranks, in every column, of the B record at position ``x`` of
        column ``k``'s order; ``pair`` (K, K) int64 wavelet number of column pair
        ``k < l`` (-1 otherwise) and the wavelet arrays ``wm_bits``, ``wm_cum``,
        ``wm_zeros``, ``nbits``.
    """
    v = np.asarray(b["v"], dtype=np.float64)
    n_b, K = v.shape
    order = np.empty((K, n_b), dtype=np.int64)
    ranks = np.empty((n_b, K), dtype=np.int32)
    srt = np.empty((K, n_b))
    nf = np.empty(K, dtype=np.int64)
    pos = np.arange(n_b, dtype=np.int32)
    for k in range(K):
        o = np.argsort(v[:, k], kind="stable")
        order[k] = o
        srt[k] = v[o, k]
        ranks[o, k] = pos
        nf[k] = int(np.count_nonzero(~np.isnan(v[:, k])))
    perm = np.empty((K, n_b, K), dtype=np.int32)
    for k in range(K):
        perm[k] = ranks[order[k]]
    nbits = max(1, int(n_b).bit_length())
    nw = (n_b >> 6) + 1
    npairs = K * (K - 1) // 2
    pair = np.full((K, K), -1, dtype=np.int64)
    bits = np.zeros((max(npairs, 1), nbits, nw), dtype=np.uint64)
    cum = np.zeros((max(npairs, 1), nbits, nw + 1), dtype=np.int64)
    zeros = np.zeros((max(npairs, 1), nbits), dtype=np.int64)
    g = 0
    for k in range(K):
        for l in range(k + 1, K):
            pair[k, l] = g
            _wm_build(np.ascontiguousarray(perm[k][:, l]), nbits, bits[g], cum[g], zeros[g])
            g += 1
    return {"sorted": srt, "nf": nf, "perm": perm, "pair": pair, "wm_bits": bits,
            "wm_cum": cum, "wm_zeros": zeros, "nbits": np.int64(nbits)}


@numba.njit(cache=True, nogil=True)
def _ranges_kernel(av, atol, srt, nf, nlev):
    # lo, hi (n, K, Lmax): sorted positions of B values agreeing with A row i on (k, l)
    n, K = av.shape
    L = max(1, atol.shape[2])
    lo = np.zeros((n, K, L), dtype=np.int64)
    hi = np.zeros((n, K, L), dtype=np.int64)
    for i in range(n):
        for k in range(K):
            a = av[i, k]
            m = nf[k]
            for l in range(nlev[k] - 1):
                t = atol[i, k, l]
                # first position with (s >= a or |a - s| <= t): false ... true
                x0, x1 = 0, m
                while x0 < x1:
                    mid = (x0 + x1) >> 1
                    s = srt[k, mid]
                    if s >= a or abs(a - s) <= t:
                        x1 = mid
                    else:
                        x0 = mid + 1
                lo[i, k, l] = x0
                # first position with (s > a and not |a - s| <= t): false ... true
                y0, y1 = x0, m
                while y0 < y1:
                    mid = (y0 + y1) >> 1
                    s = srt[k, mid]
                    if s > a and not (abs(a - s) <= t):
                        y1 = mid
                    else:
                        y0 = mid + 1
                hi[i, k, l] = y0
                if y0 <= x0 or a != a:
                    lo[i, k, l] = m
                    hi[i, k, l] = m
    return lo, hi


def rank_ranges(a: dict, index: dict, cmp: Comparison) -> tuple[np.ndarray, np.ndarray]:
    """Intervals of sorted B positions agreeing with each A record, per column and level.

    Returns
    -------
    lo, hi : int64 arrays, shape (n_a, K, Lmax)
        Level ``l`` of column ``k`` of A row ``i`` agrees with the B records at
        sorted positions ``lo[i, k, l] <= x < hi[i, k, l]`` of column ``k``.
    """
    return _ranges_kernel(np.ascontiguousarray(a["v"]), np.ascontiguousarray(a["tol"]),
                          index["sorted"], index["nf"], cmp.n_levels)


# --------------------------------------------------------------------------
# counts
# --------------------------------------------------------------------------

@numba.njit(cache=True, nogil=True, inline="always")
def _widest(lo, hi, i, k, nlev):
    l = nlev[k] - 2
    return hi[i, k, l] - lo[i, k, l]


@numba.njit(cache=True, nogil=True)
def _walk_binary(pk, xa, xb, off0, wid0, before, h1, h2, counts, sub):
    # binary comparisons: pattern bit m = 1 when B row x of column k's order misses column m;
    # rows agreeing on a column in ``before`` were counted by an earlier column
    K = pk.shape[1]
    sh2 = h2 if h2 >= 0 else h1
    m2 = 1 if h2 >= 0 else 0
    n = 0
    for x in range(xa, xb):
        code = 0
        for m in range(K):
            code |= np.int64(np.uint64(np.int64(pk[x, m]) - off0[m]) >= wid0[m]) << m
        keep = np.int64(((~code) & before) == 0)
        counts[code] += keep
        sub[(code >> h1) & 1, ((code >> sh2) & 1) * m2] += keep
        n += keep
    return n


@numba.njit(cache=True, nogil=True)
def _walk_binary_hist(pk, xa, xb, off0, wid0, before, h1, h2, counts, sub, hist):
    # _walk_binary through four interleaved histograms of the 2^K codes (hist (4, 2^(K+1)),
    # zero on entry and on return; a code agreeing on a column in ``before`` lands in the
    # upper half): runs of the same code do not serialise the increments
    K = pk.shape[1]
    P = np.int64(1) << K
    for x in range(xa, xb):
        code = 0
        for m in range(K):
            code |= np.int64(np.uint64(np.int64(pk[x, m]) - off0[m]) >= wid0[m]) << m
        code |= np.int64(((~code) & before) != 0) << K
        hist[x & 3, code] += 1
    sh2 = h2 if h2 >= 0 else h1
    m2 = 1 if h2 >= 0 else 0
    n = 0
    for code in range(P):
        tot = hist[0, code] + hist[1, code] + hist[2, code] + hist[3, code]
        counts[code] += tot
        sub[(code >> h1) & 1, ((code >> sh2) & 1) * m2] += tot
        n += tot
    hist[:, :] = 0
    return n


@numba.njit(cache=True, nogil=True)
def _walk_levels(pk, xa, xb, off, wid, top, radix, before, h1, h2, counts, sub):
    # any levels: the level of column m is the number of its intervals missed
    K = pk.shape[1]
    n = 0
    for x in range(xa, xb):
        code = 0
        agree = 0
        l1 = 0
        l2 = 0
        for m in range(K):
            rm = np.int64(pk[x, m])
            lev = 0
            for l in range(top[m]):
                lev += np.int64(np.uint64(rm - off[m, l]) >= wid[m, l])
            code += lev * radix[m]
            agree |= np.int64(lev < top[m]) << m
            if m == h1:
                l1 = lev
            elif m == h2:
                l2 = lev
        if agree & before:
            continue
        counts[code] += 1
        n += 1
        sub[l1, l2] += 1
    return n


#: Most key columns of a binary comparison counted through small histograms of the
#: 2^K patterns per interval walk (more: straight into the block's counts).
HIST_KEYS = 10


@numba.njit(cache=True, nogil=True)
def _count_kernel(lo, hi, perm, pair, bits, cum, zeros, nbits, n_b, nlev, radix, n_patterns):
    n, K = lo.shape[0], lo.shape[1]
    counts = np.zeros(n_patterns, dtype=np.int64)
    full_last = 0
    for k in range(K):
        full_last += (nlev[k] - 1) * radix[k]
    Lmax = 1
    for k in range(K):
        Lmax = max(Lmax, nlev[k])
    C = np.zeros((Lmax + 1, Lmax + 1), dtype=np.int64)
    off = np.zeros((K, Lmax), dtype=np.int64)
    wid = np.zeros((K, Lmax), dtype=np.uint64)
    top = np.zeros(K, dtype=np.int64)
    off0 = np.zeros(K, dtype=np.int64)
    wid0 = np.zeros(K, dtype=np.uint64)
    enumerated = 0
    binary = True
    for k in range(K):
        binary = binary and nlev[k] == 2 and radix[k] == (1 << k)
    small = binary and K <= HIST_KEYS
    hist = np.zeros((4, 2 << K if small else 1), dtype=np.int64)
    # H of every row: its two widest loosest intervals (ties: lower column)
    H1 = np.empty(n, dtype=np.int64)
    H2 = np.empty(n, dtype=np.int64)
    for i in range(n):
        h1 = -1
        h2 = -1
        for k in range(K):
            w = _widest(lo, hi, i, k, nlev)
            if h1 < 0 or w > _widest(lo, hi, i, h1, nlev):
                h2 = h1
                h1 = k
            elif h2 < 0 or w > _widest(lo, hi, i, h2, nlev):
                h2 = k
        if h2 >= 0 and h2 < h1:
            h1, h2 = h2, h1
        H1[i] = h1
        H2[i] = h2
    # pairs agreeing on a column of L: enumerated, the first agreeing L column counts them.
    # Column by column, the rows in the order of their interval in that column: the
    # intervals of consecutive rows overlap, so the walk reads B's ranks from cache
    sub = np.zeros((n, Lmax, Lmax), dtype=np.int64)
    for k in range(K):
        lk = nlev[k] - 2
        walk = np.argsort(lo[:, k, lk])
        for t in range(n):
            i = walk[t]
            h1 = H1[i]
            h2 = H2[i]
            if k == h1 or k == h2:
                continue
            # this row's intervals as (offset, width): a rank r is inside iff
            # uint(r - offset) < uint(width)
            lmask = 0
            for m in range(K):
                top[m] = nlev[m] - 1
                for l in range(nlev[m] - 1):
                    off[m, l] = lo[i, m, l]
                    wid[m, l] = np.uint64(hi[i, m, l] - lo[i, m, l])
                if m != h1 and m != h2:
                    lmask |= 1 << m
                off0[m] = off[m, 0]
                wid0[m] = wid[m, 0]
            before = lmask & ((1 << k) - 1)
            if small:
                enumerated += _walk_binary_hist(perm[k], lo[i, k, lk], hi[i, k, lk], off0,
                                                wid0, before, h1, h2, counts, sub[i], hist)
            elif binary:
                enumerated += _walk_binary(perm[k], lo[i, k, lk], hi[i, k, lk], off0, wid0,
                                           before, h1, h2, counts, sub[i])
            else:
                enumerated += _walk_levels(perm[k], lo[i, k, lk], hi[i, k, lk], off, wid,
                                           top, radix, before, h1, h2, counts, sub[i])
    # the rest (last level on every L column): box counts on H, Moebius over levels
    for i in range(n):
        h1 = H1[i]
        h2 = H2[i]
        n1 = nlev[h1]
        n2 = nlev[h2] if h2 >= 0 else 1
        r1 = radix[h1]
        r2 = radix[h2] if h2 >= 0 else 0
        base = full_last - (n1 - 1) * r1 - ((n2 - 1) * r2 if h2 >= 0 else 0)
        for c1 in range(n1):
            for c2 in range(n2):
                if c1 == n1 - 1 and c2 == n2 - 1:
                    C[c1 + 1, c2 + 1] = n_b
                elif c2 == n2 - 1:
                    C[c1 + 1, c2 + 1] = hi[i, h1, c1] - lo[i, h1, c1]
                elif c1 == n1 - 1:
                    C[c1 + 1, c2 + 1] = hi[i, h2, c2] - lo[i, h2, c2]
                else:
                    g = pair[h1, h2]
                    x0 = lo[i, h1, c1]
                    x1 = hi[i, h1, c1]
                    C[c1 + 1, c2 + 1] = (
                        _wm_less(bits[g], cum[g], zeros[g], nbits, x0, x1, hi[i, h2, c2])
                        - _wm_less(bits[g], cum[g], zeros[g], nbits, x0, x1, lo[i, h2, c2]))
        for c1 in range(n1):
            for c2 in range(n2):
                cell = C[c1 + 1, c2 + 1] - C[c1, c2 + 1] - C[c1 + 1, c2] + C[c1, c2]
                counts[base + c1 * r1 + c2 * r2] += cell - sub[i, c1, c2]
    return counts, enumerated


def count_block(a: dict, index: dict, cmp: Comparison) -> tuple[np.ndarray, int]:
    """Pattern counts of some A rows against all of B, equal to the all-pairs counts.

    Parameters
    ----------
    a : dict
        :func:`~sdcdist.linkage.prepare_side` output of some A rows.
    index : dict
        :func:`build_index` of B.
    cmp : Comparison

    Returns
    -------
    counts : ndarray of int64, shape (n_patterns,)
    enumerated : int
        Pairs whose pattern was computed one by one.
    """
    lo, hi = rank_ranges(a, index, cmp)
    n_b = int(index["perm"].shape[1])
    counts, enum = _count_kernel(lo, hi, index["perm"], index["pair"], index["wm_bits"],
                                 index["wm_cum"], index["wm_zeros"], int(index["nbits"]), n_b,
                                 cmp.n_levels, cmp.radix, cmp.n_patterns)
    return counts, int(enum)


@numba.njit(cache=True, nogil=True)
def _enum_share(lo, hi, nlev):
    n, K = lo.shape[0], lo.shape[1]
    tot = 0
    for i in range(n):
        s = 0
        w1 = 0
        w2 = 0
        for k in range(K):
            w = hi[i, k, nlev[k] - 2] - lo[i, k, nlev[k] - 2]
            s += w
            if w > w1:
                w2 = w1
                w1 = w
            elif w > w2:
                w2 = w
        tot += s - w1 - (w2 if K > 1 else 0)
    return tot


def enumerated_share(a: dict, index: dict, cmp: Comparison) -> float:
    """Share of the pairs of ``a`` x B that :func:`count_block` enumerates, bounded from
    above: a pair agreeing on several narrower columns counts once per column, so the
    share exceeds 1 when the columns agree often (the default's levels up to 1 sd).

    ``index``: :func:`build_index` or :func:`sorted_columns` of B."""
    lo, hi = rank_ranges(a, index, cmp)
    n_b = int(index["sorted"].shape[1])
    n = lo.shape[0]
    return float(_enum_share(lo, hi, cmp.n_levels)) / max(1.0, float(n) * n_b)


def sample_rows(n: int, size: int) -> np.ndarray:
    """Evenly spaced rows ``0, s, 2s, ...`` (at most ``size``): a deterministic sample."""
    step = max(1, -(-n // max(1, size)))
    return np.arange(0, n, step, dtype=np.int64)
