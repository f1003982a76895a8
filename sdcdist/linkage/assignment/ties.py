"""Exact ties: weights on a fixed-point grid, and the optimal assignment that content order
picks among all optimal ones (CATALOG PRL item 5).

Pair weights are sums of a few column weights, so assignment totals that are equal in
exact arithmetic differ in their last bits, and rounding, not content order, would pick
one of many optimal assignments. The solvers therefore work on weights rounded once to a
multiple of :data:`GRID` (2^-24 nats for PRL weights) and held as integers (in float64,
exact below 2^53: every cost, dual and reduced cost is then an exact integer sum), so
equal totals are equal. Among the optimal assignments, :func:`lexmin` then returns the
lexicographically smallest in the order of the rows and columns given (content order):
the first row takes the first column it can take in some optimal assignment, then the
second row, given the first, and so on; leaving a row unassigned (its private dummy
column) comes after every real column.
"""

from __future__ import annotations

import math

import numba
import numpy as np

from ...parallel import serial_map

__all__ = ["GRID", "GRID_BITS", "grid_bits", "quantize", "lexmin", "tight_dense", "tight_rows",
           "tight_csr"]

#: Bits after the binary point of the fixed-point weights: the grid is 2^-GRID_BITS.
GRID_BITS = 24

#: The grid of the fixed-point weights (2^-24, in the weights' unit: nats for PRL).
GRID = 2.0 ** -GRID_BITS

#: Largest integer magnitude allowed for a total of the solver (float64 holds every
#: integer up to 2^53 exactly; a margin of 2^3 covers the duals' sums and the dummy
#: penalties).
_LIMIT = 2.0 ** 50


def grid_bits(lo: float, hi: float, n: int) -> int:
    """Bits of the grid for weights in [lo, hi] and assignments of up to ``n`` pairs:
    :data:`GRID_BITS`, fewer (a coarser grid, stated in the result) only where totals of
    ``n`` weights on 2^-24 would not be exact in float64 (|weights| beyond 2^26 / n)."""
    span = max(abs(lo), abs(hi), hi - lo, 1e-300)
    need = span * (n + 2) * 2.0 ** GRID_BITS
    if need <= _LIMIT:
        return GRID_BITS
    return GRID_BITS - int(math.ceil(math.log2(need / _LIMIT)))


@numba.njit(cache=True, nogil=True)
def _rint_scaled(X, scale):
    out = np.empty(X.shape)
    for i in range(X.shape[0]):
        for j in range(X.shape[1]):
            out[i, j] = np.rint(X[i, j] * scale)
    return out


def quantize(X: np.ndarray, bits: int) -> np.ndarray:
    """``X`` rounded to multiples of 2^-bits, as the integers ``round(X * 2^bits)`` (held
    in float64, exact below 2^53). Each weight is rounded once, from its own value."""
    X = np.asarray(X, dtype=np.float64)
    scale = 2.0 ** bits
    if X.ndim == 2:
        return _rint_scaled(np.ascontiguousarray(X), scale)
    return np.rint(X * scale)


@numba.njit(cache=True, nogil=True)
def tight_rows(X, s, off, u, v, dummy, r0, r1):
    """The rows ``r0 .. r1 - 1`` of :func:`tight_dense`: how many tight entries each row has
    (r1 - r0,) and their columns, row after row (each row's ascending, its dummy last).
    One pass into a buffer of two entries a row; a block with more is read again, counted
    first."""
    n_c = X.shape[1]
    nd = dummy.size > 0
    cnt = np.zeros(r1 - r0, dtype=np.int64)
    buf = np.empty(2 * (r1 - r0) + 64, dtype=np.int64)
    k = 0
    fits = True
    for i in range(r0, r1):
        ui = u[i]
        c0 = k
        for j in range(n_c):
            if s * (X[i, j] - off) - ui - v[j] == 0.0:
                if k < buf.size:
                    buf[k] = j
                k += 1
        if nd and dummy[i] - ui - v[n_c + i] == 0.0:
            if k < buf.size:
                buf[k] = n_c + i
            k += 1
        cnt[i - r0] = k - c0
        if k > buf.size:
            fits = False
    if fits:
        return cnt, buf[:k].copy()
    cols = np.empty(k, dtype=np.int64)
    k = 0
    for i in range(r0, r1):
        ui = u[i]
        for j in range(n_c):
            if s * (X[i, j] - off) - ui - v[j] == 0.0:
                cols[k] = j
                k += 1
        if nd and dummy[i] - ui - v[n_c + i] == 0.0:
            cols[k] = n_c + i
            k += 1
    return cnt, cols


def tight_dense(X, s, off, u, v, dummy, blocks=None, tmap=None):
    """CSR (indptr, cols) of the entries of the cost matrix ``C = s * (X - off)`` (rows'
    own dummy column ``n_c + i`` of cost ``dummy[i]`` when ``dummy`` is not empty) whose
    reduced cost ``C - u - v`` is exactly 0, each row's columns ascending (its dummy
    last). ``blocks``: ranges of rows read apart (default all at once), by
    ``tmap(fn, blocks)`` (e.g. in threads; default one after the other); the same CSR."""
    n_r = X.shape[0]
    blocks = [(0, n_r)] if blocks is None else blocks
    tmap = tmap or serial_map
    parts = tmap(lambda r0, r1: tight_rows(X, s, off, u, v, dummy, r0, r1), blocks)
    indptr = np.zeros(n_r + 1, dtype=np.int64)
    if parts:
        np.cumsum(np.concatenate([p[0] for p in parts]), out=indptr[1:])
        return indptr, np.concatenate([p[1] for p in parts])
    return indptr, np.zeros(0, dtype=np.int64)


@numba.njit(cache=True, nogil=True)
def tight_csr(indptr, cols, cost, u, v, dummy, n_c):
    """The tight edges (reduced cost exactly 0) of a CSR graph whose rows' columns are
    ascending, plus each row's dummy column ``n_c + i`` when it is tight (last)."""
    n_r = indptr.size - 1
    nd = dummy.size > 0
    out_p = np.zeros(n_r + 1, dtype=np.int64)
    out_c = np.empty(cols.size + (n_r if nd else 0), dtype=np.int64)
    k = 0
    for i in range(n_r):
        ui = u[i]
        for e in range(indptr[i], indptr[i + 1]):
            if cost[e] - ui - v[cols[e]] == 0.0:
                out_c[k] = cols[e]
                k += 1
        if nd and dummy[i] - ui - v[n_c + i] == 0.0:
            out_c[k] = n_c + i
            k += 1
        out_p[i + 1] = k
    return out_p, out_c[:k]


@numba.njit(cache=True, nogil=True, inline="always")
def _look(indptr, cols, fixed, row4col, col4row, r, mi, free_ok):
    # the edge of row r to the target: column mi, or (free_ok) a free column; -1 if none
    for e in range(indptr[r], indptr[r + 1]):
        c = cols[e]
        if fixed[c] or c == col4row[r]:
            continue
        if c == mi or (free_ok and row4col[c] < 0):
            return e
    return -1


@numba.njit(cache=True, nogil=True)
def lexmin(indptr, cols, v, col4row):
    """The lexicographically smallest optimal assignment, in place of ``col4row``.

    ``indptr``, ``cols``: the tight graph (reduced cost exactly 0 under optimal duals
    ``v`` of the columns, every row's columns ascending); ``col4row``: an optimal
    assignment on it (-1: row left out). The optimal assignments are exactly the
    matchings on the tight graph that match every row the given one matches and leave
    free only columns with ``v == 0`` (complementary slackness with any optimal dual),
    and they are connected by alternating paths and cycles. Row by row, each row takes
    the smallest column from which the rows not yet fixed can restore such a matching: a
    depth-first search for an alternating path from the column's owner to the row's own
    column (a cycle) or, when that column may be left free, to a free column. A row
    searched in vain for one row's target cannot reach it later in the same row's search,
    so each row's searches scan each edge at most once. Returns the number of rows that
    moved.
    """
    n_r = indptr.size - 1
    NC = v.size
    row4col = np.full(NC, -1, dtype=np.int64)
    for i in range(n_r):
        if col4row[i] >= 0:
            row4col[col4row[i]] = i
    fixed = np.zeros(NC, dtype=np.bool_)
    stamp = np.full(n_r, -1, dtype=np.int64)
    st_row = np.empty(n_r, dtype=np.int64)
    st_edge = np.empty(n_r, dtype=np.int64)
    # rows with a tight edge into each column: a row whose column no other row can take,
    # and that may not leave it free, cannot move
    deg = np.zeros(NC, dtype=np.int64)
    for e in range(cols.size):
        deg[cols[e]] += 1
    moved = 0
    for i in range(n_r):
        mi = col4row[i]
        if mi < 0:
            continue
        free_ok = v[mi] == 0.0
        if deg[mi] <= 1 and not free_ok:
            fixed[mi] = True
            continue
        stamp[i] = i
        for e0 in range(indptr[i], indptr[i + 1]):
            j = cols[e0]
            if j >= mi:
                break
            if fixed[j]:
                continue
            k = row4col[j]
            if k < 0:
                if free_ok:
                    row4col[mi] = -1
                    row4col[j] = i
                    col4row[i] = j
                    moved += 1
                    break
                continue
            if stamp[k] == i:
                continue
            # depth-first search from k for the target; each row entered is first scanned
            # for the target itself (short paths first: its column, or a free one)
            depth = 0
            st_row[0] = k
            stamp[k] = i
            end_col = _look(indptr, cols, fixed, row4col, col4row, k, mi, free_ok)
            st_edge[0] = indptr[k] if end_col < 0 else end_col + 1
            if end_col >= 0:
                end_col = cols[end_col]
            while end_col < 0 and depth >= 0:
                r = st_row[depth]
                e = st_edge[depth]
                if e >= indptr[r + 1]:
                    depth -= 1
                    continue
                st_edge[depth] = e + 1
                c = cols[e]
                if fixed[c] or c == col4row[r]:
                    continue
                o = row4col[c]
                if o < 0 or stamp[o] == i:
                    continue
                stamp[o] = i
                depth += 1
                st_row[depth] = o
                hit = _look(indptr, cols, fixed, row4col, col4row, o, mi, free_ok)
                if hit >= 0:
                    st_edge[depth] = hit + 1
                    end_col = cols[hit]
                    break
                st_edge[depth] = indptr[o]
            if end_col < 0:
                continue
            # rotate: each row on the stack takes the column of its current edge
            for d in range(depth, -1, -1):
                r = st_row[d]
                c = cols[st_edge[d] - 1]
                col4row[r] = c
                row4col[c] = r
            if end_col != mi:
                row4col[mi] = -1
            col4row[i] = j
            row4col[j] = i
            moved += 1
            break
        fixed[col4row[i]] = True
    return moved
