"""Sparse pattern counts from the counting kernels' tables: the non-zero counters of the
dense histograms read in increasing code order (:func:`sparse_of_hist`, and
:func:`sparse_of_hists` for the rank kernel's uint16 counters read four at a time). Every
reader gives the codes that occur, increasing, with their exact
pair counts (:func:`~.sparse.sparse_counts`).
"""

from __future__ import annotations

import numba
import numpy as np

from ...parallel import chunk_bounds
from . import kept
from .sparse import sparse_counts

__all__ = ["sparse_of_hist", "sparse_of_hists", "nonzero_u16", "take_hists", "read_hists",
           "release_hists", "HIST_KEEP_MIN"]

_FAST = dict(cache=True, nogil=True, boundscheck=False, error_model="numpy")


@numba.njit(**_FAST)
def _nonzero_words(w64, h16, i0, out, cnt, k):
    # the non-zero counters of h16 (uint16) from word i0 on, read four at a time (w64: the
    # same memory as uint64 words, the last len(h16) % 4 counters apart): positions into
    # out, counters into cnt, from k on, until out is full. Returns (k, the word to go on
    # from; w64.size + 1 once the tail is read too)
    cap = out.size
    i = i0
    while i < w64.size:
        # eight words (32 counters) at once: skipped when all are empty (most are), else
        # each counter written at k without a branch, k moved on past the non-zero ones
        e = min(i + 8, w64.size)
        x = np.uint64(0)
        for q in range(i, e):
            x |= w64[q]
        if x != 0:
            if k + 32 > cap:
                return k, i
            for q in range(4 * i, 4 * e):
                v = h16[q]
                out[k] = q
                cnt[k] = v
                k += np.int64(v != 0)
        i = e
    if k + (h16.size - 4 * w64.size) > cap:
        return k, w64.size
    for q in range(4 * w64.size, h16.size):
        if h16[q] != 0:
            out[k] = q
            cnt[k] = h16[q]
            k += 1
    return k, w64.size + 1


#: Fewest counters from which :func:`nonzero_u16` with a ``pmap`` reads its
#: :data:`NONZERO_PARTS` parts side by side (a large pattern space is read at memory speed).
NONZERO_PMAP_MIN = 1 << 22

#: Parts of the counters :func:`nonzero_u16` reads apart with a ``pmap`` (whole words each;
#: the positions found are the same in any number of parts, read in part order).
NONZERO_PARTS = 4


def _nonzero_range(w64: np.ndarray, h16: np.ndarray, cap: int
                   ) -> tuple[np.ndarray, np.ndarray]:
    # the non-zero counters of h16 (w64: its whole words) and their counts, int64, the
    # buffers starting at cap entries and doubled while they fill up
    cap = max(64, cap)
    out, cnt = np.empty(cap, dtype=np.int64), np.empty(cap, dtype=np.int64)
    k, i = _nonzero_words(w64, h16, 0, out, cnt, 0)
    while i <= w64.size:                 # the buffers filled up: twice the size, go on
        out = np.concatenate([out[:k], np.empty(max(out.size, 64), dtype=np.int64)])
        cnt = np.concatenate([cnt[:k], np.empty(max(cnt.size, 64), dtype=np.int64)])
        k, i = _nonzero_words(w64, h16, i, out, cnt, k)
    return (out[:k].copy() if k < out.size // 2 else out[:k],
            cnt[:k].copy() if k < cnt.size // 2 else cnt[:k])


def nonzero_u16(h16: np.ndarray, *, counts: bool = False, expect: int = 0, pmap=None
                ) -> np.ndarray | tuple[np.ndarray, np.ndarray]:
    """``np.flatnonzero(h16)`` of a uint16 array in one pass, read four counters (one
    uint64) at a time: most of a large pattern space is empty. With ``counts`` also the
    counters there (int64). ``expect``: about how many are non-zero (the first buffer's
    size; it grows as needed). ``pmap(fn, blocks)`` (e.g. on two threads): from
    :data:`NONZERO_PMAP_MIN` counters on, :data:`NONZERO_PARTS` parts read side by side;
    the same arrays."""
    h16 = np.ascontiguousarray(h16)
    n = h16.size
    w64 = h16[:n // 4 * 4].view(np.uint64)
    cap = min(n, int(expect) + 64)
    if pmap is None or n < NONZERO_PMAP_MIN:
        nz, cnt = _nonzero_range(w64, h16, cap)
    else:
        cuts = [w64.size * q // NONZERO_PARTS for q in range(NONZERO_PARTS + 1)]

        def part(q: int) -> tuple[np.ndarray, np.ndarray]:
            a, b = cuts[q], cuts[q + 1]
            hh = h16[4 * a:] if q == NONZERO_PARTS - 1 else h16[4 * a:4 * b]
            pz, pc = _nonzero_range(w64[a:b], hh, cap // NONZERO_PARTS)
            return pz + 4 * a, pc

        got = pmap(part, [(q,) for q in range(NONZERO_PARTS)])
        nz = np.concatenate([g[0] for g in got])
        cnt = np.concatenate([g[1] for g in got])
    return (nz, cnt) if counts else nz


@numba.njit(**_FAST)
def _add_wraps(c, h0, nz, a, b):
    # c[a:b] += the wraps h0[nz[a:b]]
    for t in range(a, b):
        c[t] += h0[nz[t]]


@numba.njit(**_FAST)
def _zero_at(h16, h0, nz, a, b):
    # the counters h16[nz[a:b]] back to 0, and the wraps h0 there (h0 empty: none)
    wraps = h0.size > 0
    for t in range(a, b):
        q = nz[t]
        h16[q] = 0
        if wraps and h0[q] != 0:
            h0[q] = 0


def _in_parts(pmap, n: int, fn) -> None:
    # fn(a, b) over [0, n): NONZERO_PARTS parts side by side through pmap, else at once
    if pmap is None:
        fn(0, n)
    else:
        pmap(fn, chunk_bounds(n, max(1, -(-n // NONZERO_PARTS))))


def sparse_of_hists(total: np.ndarray, h: np.ndarray, h16: np.ndarray,
                    pairs: int | None = None) -> tuple[np.ndarray, np.ndarray]:
    """:func:`sparse_of_hist` of :func:`_ranked_hists`' output, the same codes and counts.
    With uint16 counters the pattern space can hold tens of millions of patterns (ten
    columns of six levels) of which a few hundred thousand occur: the uint32 array then
    holds only the wraps (its pages were never written elsewhere, so reading them is
    cheap) and is not added to the counters as a whole. ``pairs``: how many pairs were
    counted; when the uint16 counters add up to it, none wrapped and the uint32 array is
    not read; when the counts found with it add up, no pattern hides behind a counter that
    wrapped to exactly 0, and the uint32 array is not scanned."""
    return _read(total, h, h16, pairs)[:2]


def _read(total: np.ndarray, h: np.ndarray, h16: np.ndarray, pairs: int | None, pmap=None
          ) -> tuple[np.ndarray, np.ndarray, bool]:
    # sparse_of_hists, and whether the uint32 array may hold wraps
    if not h16.size:
        return (*sparse_of_hist(total, h), True)
    # room for a quarter of the counters (or pairs) at first: a space without its empty
    # exact levels (:mod:`.compact`) holds far more patterns a counter than one with them
    nz, c = nonzero_u16(h16, counts=True, expect=h16.size // 16 if pairs is None else
                        min(h16.size, pairs) // 4, pmap=pmap)
    flushed = int(total.sum()) if total.size else 0
    wraps = pairs is None or int(c.sum()) + flushed != pairs
    if wraps:
        # a counter wrapped (the uint32 array holds 2^16 for each wrap): add them
        h0 = h[0]
        _in_parts(pmap if h16.size >= NONZERO_PMAP_MIN else None, nz.size,
                  lambda a, b: _add_wraps(c, h0, nz, a, b))
    if pairs is None or int(c.sum()) + flushed != pairs:
        wrapped = np.flatnonzero(h[0])
        # codes whose counters wrapped to 0 since the last flush: add them (sorted)
        pos = np.minimum(np.searchsorted(nz, wrapped), max(nz.size - 1, 0))
        extra = wrapped[~(nz[pos] == wrapped)] if nz.size else wrapped
        if extra.size:
            nz = np.sort(np.concatenate([nz, extra]))
            c = h16[nz].astype(np.int64) + h[0, nz].astype(np.int64)
    if total.size:
        return (*_with_total(total, nz, c), wraps)
    return nz, c, wraps


#: Smallest pattern space whose uint16 histograms (:func:`take_hists`) are kept for the
#: next count once read (:func:`read_hists`): the pages of a fresh one cost more to map
#: than zeroing the counters that were used (a few percent of them).
HIST_KEEP_MIN = 1 << 20


def take_hists(nhist: int, n_patterns: int) -> tuple[np.ndarray, np.ndarray]:
    """Zeroed histograms for the rank kernel: ``(h, h16)``, uint32 ``(nhist,
    n_patterns)`` and uint16 ``(n_patterns,)`` (empty unless ``nhist`` is 1); a pair kept
    by :func:`read_hists` when there is one of that size (each pair serves one count at a
    time)."""
    if nhist == 1 and n_patterns >= HIST_KEEP_MIN:
        pair = kept.take(("hists", int(n_patterns)))
        if pair is not None:
            return pair
    return (np.zeros((nhist, n_patterns), dtype=np.uint32),
            np.zeros(n_patterns if nhist == 1 else 0, dtype=np.uint16))


def read_hists(total: np.ndarray, h: np.ndarray, h16: np.ndarray, pairs: int, pmap=None
               ) -> tuple[np.ndarray, np.ndarray]:
    """:func:`sparse_of_hists`, then the histograms zeroed where they were used (the
    codes found; the uint32 array only where it holds wraps) and kept for the next
    :func:`take_hists` of their size (one pair; none after a flush into int64, which wrote
    all of them). ``pmap``: the counters read (:func:`nonzero_u16`) and zeroed in parts
    side by side."""
    nz, c, wraps = _read(total, h, h16, pairs, pmap)
    n = h16.size
    if n >= HIST_KEEP_MIN and h.shape[0] == 1 and not total.size:
        h0 = h[0] if wraps else h[0, :0]
        _in_parts(pmap if n >= NONZERO_PMAP_MIN else None, nz.size,
                  lambda a, b: _zero_at(h16, h0, nz, a, b))
        kept.keep(("hists", int(n)), (h, h16))
    return nz, c


def release_hists() -> None:
    """Drop the kept histograms, and every other work array the PRL keeps between calls
    (:func:`.kept.release`: the dense path's weight grid too); their memory goes back at
    once."""
    kept.release()


def _with_total(total: np.ndarray, nz: np.ndarray, c: np.ndarray
                ) -> tuple[np.ndarray, np.ndarray]:
    c = c + total[nz]          # a flushed pattern may be absent since: merge both
    extra = np.setdiff1d(np.flatnonzero(total), nz)
    if extra.size:
        return sparse_counts(np.concatenate([nz, extra]), np.concatenate([c, total[extra]]))
    return nz, c


def sparse_of_hist(total: np.ndarray, h: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """The occurring codes and their counts of the dense kernels' output."""
    if h.shape[0] == 1:
        nz = np.flatnonzero(h[0])
        c = h[0, nz].astype(np.int64)
    else:
        s = h.sum(axis=0, dtype=np.int64)
        nz = np.flatnonzero(s)
        c = s[nz]
    if total.size:
        c = c + total[nz]          # a flushed pattern may be absent since: merge both
        extra = np.setdiff1d(np.flatnonzero(total), nz)
        if extra.size:
            return sparse_counts(np.concatenate([nz, extra]),
                                 np.concatenate([c, total[extra]]))
    return nz.astype(np.int64), c
