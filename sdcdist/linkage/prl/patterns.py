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

from .comparison import Comparison, all_rows, transposed

__all__ = ["pattern_counts", "sparse_counts", "merge_counts", "DENSE_PATTERN_SPACE"]


@numba.njit(cache=True, nogil=True)
def _codes_row(avT, tolT, bj, lo, hi, aidx, identity, nlev, radix, code):
    # pattern code of B row bj against A rows aidx[lo:hi] (or lo:hi when identity),
    # column by column so the inner loop runs over contiguous A values
    n = hi - lo
    code[:n] = 0
    for k in range(avT.shape[0]):
        r = radix[k]
        x = bj[k]
        for l in range(nlev[k] - 1):
            if identity:
                for q in range(n):
                    i = lo + q
                    code[q] += r - r * (abs(avT[k, i] - x) <= tolT[k, l, i])
            else:
                for q in range(n):
                    i = aidx[lo + q]
                    code[q] += r - r * (abs(avT[k, i] - x) <= tolT[k, l, i])
    return n


#: Largest pattern space counted with a dense histogram inside a block (then
#: compressed); above it a block counts into an open-addressing hash table.
DENSE_PATTERN_SPACE = 1 << 16

@numba.njit(cache=True, nogil=True)
def _counts_dense(avT, tolT, bv, lo, hi, aidx, identity, nlev, radix, n_patterns):
    # four interleaved histograms: runs of the same pattern do not serialise the increments
    counts = np.zeros((4, n_patterns), dtype=np.int64)
    code = np.empty(avT.shape[1] if identity else max(1, aidx.size), dtype=np.int64)
    for j in range(bv.shape[0]):
        n = _codes_row(avT, tolT, bv[j], lo[j], hi[j], aidx, identity, nlev, radix, code)
        for q in range(n):
            counts[q & 3, code[q]] += 1
    return counts.sum(axis=0)


@numba.njit(cache=True, nogil=True, inline="always")
def _slot(key, mask):
    # Fibonacci hashing of a non-negative code
    return ((key * np.uint64(0x9E3779B97F4A7C15)) >> np.uint64(20)) & mask


@numba.njit(cache=True, nogil=True)
def _hash_add(keys, vals, key, inc, mask):
    h = _slot(np.uint64(key), mask)
    while True:
        k = keys[h]
        if k == key:
            vals[h] += inc
            return 0
        if k < 0:
            keys[h] = key
            vals[h] = inc
            return 1
        h = (h + np.uint64(1)) & mask


@numba.njit(cache=True, nogil=True)
def _counts_hash(avT, tolT, bv, lo, hi, aidx, identity, nlev, radix):
    # open addressing with linear probing; grows at load 1/2. A B row's codes
    # are first run-length merged (neighbouring A rows often share a pattern).
    size = 1 << 12
    keys = np.full(size, -1, dtype=np.int64)
    vals = np.zeros(size, dtype=np.int64)
    used = 0
    code = np.empty(avT.shape[1] if identity else max(1, aidx.size), dtype=np.int64)
    for j in range(bv.shape[0]):
        n = _codes_row(avT, tolT, bv[j], lo[j], hi[j], aidx, identity, nlev, radix, code)
        q = 0
        while q < n:
            x = code[q]
            r = q + 1
            while r < n and code[r] == x:
                r += 1
            used += _hash_add(keys, vals, x, r - q, np.uint64(size - 1))
            if 2 * used > size:
                size *= 2
                k2 = np.full(size, -1, dtype=np.int64)
                v2 = np.zeros(size, dtype=np.int64)
                for s in range(keys.size):
                    if keys[s] >= 0:
                        _hash_add(k2, v2, keys[s], vals[s], np.uint64(size - 1))
                keys, vals = k2, v2
            q = r
    ok = keys >= 0
    ck, cv = keys[ok], vals[ok]
    o = np.argsort(ck)
    return ck[o], cv[o]


def sparse_counts(codes: np.ndarray, counts: np.ndarray | None = None
                  ) -> tuple[np.ndarray, np.ndarray]:
    """Sparse pattern counts from per-pair pattern codes (or from weighted codes).

    This is the one representation of pattern counts used everywhere: only the
    patterns that occur, as two int64 arrays sorted by code, never a dense
    vector over all ``prod(n_levels)`` patterns (13 columns x 5 levels would be
    1.2e9 entries).

    Parameters
    ----------
    codes : int array, shape (n,)
        Mixed-radix pattern code of each pair (``sum_k level_k * radix_k``,
        :attr:`Comparison.radix`), in any order, repeats allowed.
    counts : int array, shape (n,), optional
        Multiplicity of each entry of ``codes`` (default 1 each), e.g. to merge
        several sparse counts: ``sparse_counts(concat(codes), concat(counts))``.

    Returns
    -------
    codes : ndarray of int64, shape (p,)
        The distinct codes that occur (with a non-zero count), increasing.
    counts : ndarray of int64, shape (p,)
        Number of pairs with each code (> 0). The result depends only on the
        multiset of codes, so counts merge exactly in any order.
    """
    codes = np.asarray(codes, dtype=np.int64).ravel()
    if counts is None:
        u, c = np.unique(codes, return_counts=True)
        return u.astype(np.int64), c.astype(np.int64)
    counts = np.asarray(counts, dtype=np.int64).ravel()
    if counts.shape != codes.shape:
        raise ValueError("codes and counts must have the same length")
    u, inv = np.unique(codes, return_inverse=True)
    c = np.zeros(u.size, dtype=np.int64)
    np.add.at(c, inv.ravel(), counts)
    keep = c != 0
    return u[keep].astype(np.int64), c[keep]


def merge_counts(*parts: tuple[np.ndarray, np.ndarray]) -> tuple[np.ndarray, np.ndarray]:
    """Sum of several sparse pattern counts (:func:`sparse_counts` form); exact, order-free."""
    if len(parts) == 1:
        return parts[0]
    return sparse_counts(np.concatenate([p[0] for p in parts]),
                         np.concatenate([p[1] for p in parts]))



def pattern_counts(a: dict, b: dict, cmp: Comparison, *, lo: np.ndarray | None = None,
                   hi: np.ndarray | None = None, aidx: np.ndarray | None = None
                   ) -> tuple[np.ndarray, np.ndarray]:
    """Sparse counts of the comparison patterns over pairs of a block.

    Parameters
    ----------
    a, b : dict
        :func:`prepare_side` output for some A rows and some B rows.
    lo, hi, aidx : int arrays, optional
        Restrict B row ``j`` to the A rows ``aidx[lo[j]:hi[j]]`` (a blocking
        window); default all pairs of the block.

    Returns
    -------
    codes, counts : ndarrays of int64, shape (p,)
        The patterns that occur (increasing codes) and their pair counts, as
        :func:`sparse_counts`; :func:`merge_counts` adds blocks up.
    """
    identity = lo is None
    if identity:
        lo, hi, aidx = all_rows(b["v"].shape[0], a["v"].shape[0])
    avT, tolT = transposed(a)
    if cmp.n_patterns <= DENSE_PATTERN_SPACE:
        d = _counts_dense(avT, tolT, b["v"], lo, hi, aidx, identity, cmp.n_levels, cmp.radix,
                          cmp.n_patterns)
        nz = np.flatnonzero(d)
        return nz.astype(np.int64), d[nz]
    return _counts_hash(avT, tolT, b["v"], lo, hi, aidx, identity, cmp.n_levels, cmp.radix)
