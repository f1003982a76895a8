"""The PRL pattern codes of one B row pair by pair (:func:`codes_row`, read by the
blocking windows' dense kernel) and the hash kernel of the pattern counts
(:func:`~.patterns.pattern_counts` with ``kernel="hash"``): an open-addressing table of the
codes that occur, for pattern spaces of any size (the dense kernels count into histograms of
the whole space)."""

from __future__ import annotations

import numba
import numpy as np

__all__ = ["codes_row", "hash_counts"]


@numba.njit(cache=True, nogil=True)
def codes_row(avT, tolT, bj, lo, hi, aidx, identity, nlev, radix, code):
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
def hash_counts(avT, tolT, bv, lo, hi, aidx, identity, nlev, radix):
    # open addressing with linear probing; grows at load 1/2. A B row's codes
    # are first run-length merged (neighbouring A rows often share a pattern).
    size = 1 << 12
    keys = np.full(size, -1, dtype=np.int64)
    vals = np.zeros(size, dtype=np.int64)
    used = 0
    code = np.empty(avT.shape[1] if identity else max(1, aidx.size), dtype=np.int64)
    for j in range(bv.shape[0]):
        n = codes_row(avT, tolT, bv[j], lo[j], hi[j], aidx, identity, nlev, radix, code)
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
