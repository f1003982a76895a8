"""Sparse pattern counts from the counting kernels' tables: the non-zero counters of the
dense histograms read in increasing code order (:func:`sparse_of_hist`, and
:func:`sparse_of_hists` for the rank kernel's uint16 counters read four at a time). Every
reader gives the codes that occur, increasing, with their exact
pair counts (:func:`~.sparse.sparse_counts`).
"""

from __future__ import annotations

import numba
import numpy as np

from .sparse import sparse_counts

__all__ = ["sparse_of_hist", "sparse_of_hists", "nonzero_u16"]

_FAST = dict(cache=True, nogil=True, boundscheck=False, error_model="numpy")


@numba.njit(**_FAST)
def _nonzero_words(w64, h16, out):
    # the positions of the non-zero counters of h16 (uint16), increasing, read four at a
    # time (w64: the same memory as uint64 words, the last len(h16) % 4 counters apart);
    # counted only (returns the count) when out is empty, else written into out
    fill = out.size > 0
    k = 0
    for i in range(w64.size):
        if w64[i] != 0:
            for l in range(4):
                if h16[4 * i + l] != 0:
                    if fill:
                        out[k] = 4 * i + l
                    k += 1
    for q in range(4 * w64.size, h16.size):
        if h16[q] != 0:
            if fill:
                out[k] = q
            k += 1
    return k


def nonzero_u16(h16: np.ndarray) -> np.ndarray:
    """``np.flatnonzero(h16)`` of a uint16 array, read four counters (one uint64) at a
    time: most of a large pattern space is empty."""
    h16 = np.ascontiguousarray(h16)
    w64 = h16[:h16.size // 4 * 4].view(np.uint64)
    k = _nonzero_words(w64, h16, np.zeros(0, dtype=np.int64))
    out = np.empty(k, dtype=np.int64)
    if k:
        _nonzero_words(w64, h16, out)
    return out


def sparse_of_hists(total: np.ndarray, h: np.ndarray, h16: np.ndarray,
                     pairs: int | None = None) -> tuple[np.ndarray, np.ndarray]:
    """:func:`sparse_of_hist` of :func:`_ranked_hists`' output, the same codes and counts.
    With uint16 counters the pattern space can hold tens of millions of patterns (ten
    columns of six levels) of which a few hundred thousand occur: the uint32 array then
    holds only the wraps (its pages were never written elsewhere, so reading them is
    cheap) and is not added to the counters as a whole. ``pairs``: how many pairs were
    counted; when the counts found add up to it, no pattern hides behind a counter that
    wrapped to exactly 0, and the uint32 array is not scanned."""
    if not h16.size:
        return sparse_of_hist(total, h)
    nz = nonzero_u16(h16)
    c = h16[nz].astype(np.int64) + h[0, nz].astype(np.int64)
    if pairs is None or int(c.sum()) + (int(total.sum()) if total.size else 0) != pairs:
        wrapped = np.flatnonzero(h[0])
        # codes whose counters wrapped to 0 since the last flush: add them (sorted)
        pos = np.minimum(np.searchsorted(nz, wrapped), max(nz.size - 1, 0))
        extra = wrapped[~(nz[pos] == wrapped)] if nz.size else wrapped
        if extra.size:
            nz = np.sort(np.concatenate([nz, extra]))
            c = h16[nz].astype(np.int64) + h[0, nz].astype(np.int64)
    if total.size:
        return _with_total(total, nz, c)
    return nz, c


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
