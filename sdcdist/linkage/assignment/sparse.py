"""Sparse one-to-one assignment: the candidate graph and successive shortest augmenting
paths on it (:func:`solve_sparse`); the helpers the dense solver reuses."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numba
import numpy as np

from ...errors import value_error
from .ties import lexmin, tight_csr

__all__ = ["Candidates", "solve_sparse", "solve_min", "csr", "offer", "ssp", "arr", "init_duals",
           "reopen_rows", "edge_pos", "ARR_BIDS"]

#: Bids of the augmenting row reduction per free row before the shortest paths (0: none).
ARR_BIDS = 2


@dataclass(frozen=True)
class Candidates:
    """A sparse candidate graph: edge ``k`` joins row ``rows[k]`` to column ``cols[k]``.

    Attributes
    ----------
    rows, cols : int arrays, shape (e,)
        Endpoints of each candidate edge (row and column indices).
    weights : float array, shape (e,)
        Weight (or distance) of each edge; must be finite.
    shape : (int, int)
        ``(n_rows, n_cols)``; rows or columns without edges are allowed.
    """

    rows: np.ndarray
    cols: np.ndarray
    weights: np.ndarray
    shape: tuple[int, int]

    def __post_init__(self) -> None:
        r = np.asarray(self.rows, dtype=np.int64).ravel()
        c = np.asarray(self.cols, dtype=np.int64).ravel()
        w = np.asarray(self.weights, dtype=np.float64).ravel()
        if not (r.shape == c.shape == w.shape):
            raise value_error("Candidate rows, cols and weights", "of the same length",
                              got_text=f"lengths {r.size}, {c.size} and {w.size}")
        n_r, n_c = (int(s) for s in self.shape)
        if r.size and (r.min() < 0 or r.max() >= n_r or c.min() < 0 or c.max() >= n_c):
            raise value_error("Candidate indices", f"within the shape {(n_r, n_c)}",
                              got_text="indices out of range")
        if not np.all(np.isfinite(w)):
            raise value_error("Candidate weights", "finite",
                              got_text=f"{int(np.count_nonzero(~np.isfinite(w)))} non-finite")
        object.__setattr__(self, "rows", r)
        object.__setattr__(self, "cols", c)
        object.__setattr__(self, "weights", w)
        object.__setattr__(self, "shape", (n_r, n_c))

    @classmethod
    def from_topc(cls, index: np.ndarray, weights: np.ndarray, n_cols: int) -> "Candidates":
        """From per-row candidate lists: ``index[i, k]`` (-1 = none) with ``weights[i, k]``."""
        index = np.asarray(index, dtype=np.int64)
        weights = np.asarray(weights, dtype=np.float64)
        ok = index >= 0
        rows = np.broadcast_to(np.arange(index.shape[0])[:, None], index.shape)
        return cls(rows[ok], index[ok], weights[ok], (index.shape[0], int(n_cols)))

    def lookup(self, r: np.ndarray, c: np.ndarray) -> np.ndarray:
        """Weights of the edges ``(r[q], c[q])`` (which must be in the graph)."""
        return self.weights[edge_pos(self, np.asarray(r), np.asarray(c))]

    def dedup(self, maximize: bool = True) -> "Candidates":
        """Keep one edge per (row, col): the best weight (they should agree anyway).

        The edges come sorted by (row, col). Top-c lists never repeat an edge: then the
        sort by that key alone (runs of ascending rows: quick) is the whole work, and a
        graph already in that order is returned as it is."""
        key = self.rows * max(self.shape[1], 1) + self.cols
        order = np.argsort(key, kind="stable")
        ks = key[order]
        if not np.any(ks[1:] == ks[:-1]):
            if np.array_equal(order, np.arange(order.size)):
                return self
            return Candidates(self.rows[order], self.cols[order], self.weights[order],
                              self.shape)
        order = np.lexsort((-self.weights if maximize else self.weights, key))
        first = np.ones(order.size, dtype=bool)
        first[1:] = key[order][1:] != key[order][:-1]
        keep = order[first]
        return Candidates(self.rows[keep], self.cols[keep], self.weights[keep], self.shape)




@numba.njit(cache=True, nogil=True, inline="always")
def offer(best, bcol, got, x, c):
    """Offer column ``c`` of value ``x`` to a row's list of the largest values (``best``,
    ``bcol``: capacity ``best.size``, ``got`` kept, sorted desc, earlier offers first
    among equal values); returns the new count."""
    per_row = best.shape[0]
    if got < per_row:
        p = got
        got += 1
    elif x > best[per_row - 1]:
        p = per_row - 1
    else:
        return got
    while p > 0 and best[p - 1] < x:
        best[p] = best[p - 1]
        bcol[p] = bcol[p - 1]
        p -= 1
    best[p] = x
    bcol[p] = c
    return got


# ---- sparse shortest augmenting paths -------------------------------------------------


@numba.njit(cache=True, nogil=True, inline="always")
def _edge(e, end, cols, cost, n_c, i, dummy):
    # edge e of row i's CSR run, or (past its end) row i's own dummy column
    if e < end:
        return cols[e], cost[e]
    return n_c + i, dummy[i]

@numba.njit(cache=True, nogil=True)
def ssp(indptr, cols, cost, n_c, dummy, u, v, row4col, col4row, rows):
    """Successive shortest augmenting paths (Dijkstra on reduced costs) on a CSR graph.

    Minimises the total cost. Row ``i``'s edges are ``cols[indptr[i]:indptr[i + 1]]``
    with costs ``cost``; when ``dummy.size > 0`` row ``i`` also has a private column
    ``n_c + i`` of cost ``dummy[i]`` (leaving the row unassigned). The duals ``u``
    (rows) and ``v`` (columns, n_c [+ n_r]) must be feasible (``cost - u - v >= 0``
    on every edge), tight on every matched edge, and 0 on free columns; they and the
    matching (``row4col``, ``col4row``, -1 = free) are updated in place and keep these
    properties. Each free row of ``rows`` (in that order) gets a shortest augmenting
    path; at equal distance a free column comes first, then the lowest column index,
    so ties end the search early and the result is deterministic. Every search
    scans each column at most once, so the work is bounded by O(edges log edges) per
    row whatever the ties. A row without an augmenting path stays free; returns the
    number of such rows.
    """
    n_r = indptr.size - 1
    nd = dummy.size > 0
    NC = v.size
    spc = np.full(NC, np.inf)
    scanned = np.zeros(NC, dtype=np.bool_)
    path = np.full(NC, -1, dtype=np.int64)
    touched = np.empty(NC, dtype=np.int64)
    sr = np.empty(n_r, dtype=np.int64)
    cap = cols.size + n_r + 1
    hd = np.empty(cap)                      # binary heap of (distance, key), lazy deletion
    hk = np.empty(cap, dtype=np.int64)      # key: column, + NC when the column is matched
    failed = 0
    for f in rows:
        if col4row[f] >= 0:
            continue
        nt = 0
        nsr = 0
        hn = 0
        min_val = 0.0
        i = f
        sink = -1
        # (lim_d, lim_k): the best free column seen; entries behind it are never popped
        lim_d = np.inf
        lim_k = 2 * NC
        while True:
            sr[nsr] = i
            nsr += 1
            ui = u[i]
            end = indptr[i + 1]
            for e in range(indptr[i], end + (1 if nd else 0)):
                j, c = _edge(e, end, cols, cost, n_c, i, dummy)
                if scanned[j]:
                    continue
                r = min_val + c - ui - v[j]
                if r < spc[j]:
                    key = j if row4col[j] < 0 else NC + j
                    if r > lim_d or (r == lim_d and key > lim_k):
                        continue
                    if key < NC:
                        lim_d = r
                        lim_k = key
                    if spc[j] == np.inf:
                        touched[nt] = j
                        nt += 1
                    spc[j] = r
                    path[j] = i
                    p = hn
                    hn += 1
                    while p > 0:
                        q = (p - 1) >> 1
                        if hd[q] < r or (hd[q] == r and hk[q] < key):
                            break
                        hd[p] = hd[q]
                        hk[p] = hk[q]
                        p = q
                    hd[p] = r
                    hk[p] = key
            j = -1
            while hn > 0:
                d0 = hd[0]
                k0 = hk[0]
                hn -= 1
                ld = hd[hn]
                lk = hk[hn]
                p = 0
                while True:
                    q = 2 * p + 1
                    if q >= hn:
                        break
                    if q + 1 < hn and (hd[q + 1] < hd[q] or
                                       (hd[q + 1] == hd[q] and hk[q + 1] < hk[q])):
                        q += 1
                    if hd[q] < ld or (hd[q] == ld and hk[q] < lk):
                        hd[p] = hd[q]
                        hk[p] = hk[q]
                        p = q
                    else:
                        break
                hd[p] = ld
                hk[p] = lk
                jj = k0 if k0 < NC else k0 - NC
                if scanned[jj] or d0 > spc[jj]:
                    continue                # a stale heap entry
                j = jj
                break
            if j < 0:
                break                       # no free column reachable
            min_val = spc[j]
            scanned[j] = True
            if row4col[j] < 0:
                sink = j
                break
            i = row4col[j]
        if sink >= 0:
            # dual update (tight on the tree's path, feasible elsewhere), then augment
            u[f] += min_val
            for k in range(1, nsr):
                i = sr[k]
                u[i] += min_val - spc[col4row[i]]
            for k in range(nt):
                j = touched[k]
                if scanned[j]:
                    v[j] -= min_val - spc[j]
            j = sink
            while True:
                i = path[j]
                row4col[j] = i
                t = col4row[i]
                col4row[i] = j
                j = t
                if i == f:
                    break
        else:
            failed += 1
        for k in range(nt):
            j = touched[k]
            spc[j] = np.inf
            scanned[j] = False
    return failed


@numba.njit(cache=True, nogil=True)
def init_duals(indptr, cols, cost, n_c, dummy, u, v, row4col, col4row):
    # Cold start: v = 0, u_i = the row's smallest cost (its dummy included), and each row
    # in turn takes its lowest-index free column at that cost.
    n_r = indptr.size - 1
    nd = dummy.size > 0
    for i in range(n_r):
        m = dummy[i] if nd else np.inf
        for e in range(indptr[i], indptr[i + 1]):
            if cost[e] < m:
                m = cost[e]
        if m == np.inf:
            u[i] = 0.0
            continue
        u[i] = m
        for e in range(indptr[i], indptr[i + 1]):
            j = cols[e]
            if cost[e] == m and row4col[j] < 0:
                row4col[j] = i
                col4row[i] = j
                break
        if col4row[i] < 0 and nd and dummy[i] == m:
            row4col[n_c + i] = i
            col4row[i] = n_c + i


@numba.njit(cache=True, nogil=True)
def arr(indptr, cols, cost, n_c, dummy, u, v, row4col, col4row, rows, max_bids):
    """Augmenting row reduction (Jonker-Volgenant), at most ``max_bids`` bids.

    Each free row of ``rows`` (then each row it displaces, first in first out) takes the
    column of its smallest reduced cost ``cost - v`` and lowers that column's ``v`` by
    the gap to its second smallest, so it stays its best; at a tie a free column is
    preferred. Every assigned row keeps a column of its smallest reduced cost, with
    ``u`` that cost, so the duals stay feasible and tight; ties can make rows displace
    each other forever, hence the cap. Rows left free get ``u`` = their smallest reduced
    cost, ready for :func:`ssp`.
    """
    n_r = indptr.size - 1
    nd = dummy.size > 0
    queue = np.empty(n_r + 1, dtype=np.int64)
    head = 0
    size = 0
    for i in rows:
        if col4row[i] < 0:
            queue[(head + size) % (n_r + 1)] = i
            size += 1
    bids = 0
    while size > 0 and bids < max_bids:
        i = queue[head]
        head = (head + 1) % (n_r + 1)
        size -= 1
        u1 = np.inf
        u2 = np.inf
        j1 = -1
        j2 = -1
        c1 = 0.0
        c2 = 0.0
        end = indptr[i + 1]
        for e in range(indptr[i], end + (1 if nd else 0)):
            j, c = _edge(e, end, cols, cost, n_c, i, dummy)
            x = c - v[j]
            if x < u1:
                u2 = u1
                j2 = j1
                c2 = c1
                u1 = x
                j1 = j
                c1 = c
            elif x < u2:
                u2 = x
                j2 = j
                c2 = c
        if j1 < 0:
            u[i] = 0.0
            continue
        bids += 1
        i0 = row4col[j1]
        if u1 < u2 and j2 >= 0:
            v[j1] -= u2 - u1
        elif i0 >= 0 and j2 >= 0 and row4col[j2] < 0:
            j1 = j2                          # a tie: take the free column
            i0 = -1
            c1 = c2
        row4col[j1] = i
        col4row[i] = j1
        u[i] = c1 - v[j1]
        if i0 >= 0:
            col4row[i0] = -1
            queue[(head + size) % (n_r + 1)] = i0
            size += 1
    for k in range(size):
        i = queue[(head + k) % (n_r + 1)]
        m = dummy[i] - v[n_c + i] if nd else np.inf
        for e in range(indptr[i], indptr[i + 1]):
            x = cost[e] - v[cols[e]]
            if x < m:
                m = x
        u[i] = m if m < np.inf else 0.0


@numba.njit(cache=True, nogil=True)
def reopen_rows(indptr, cols, cost, rows, u, v, row4col, col4row):
    # Warm start after edges were added to ``rows``: each becomes free with u_i = its
    # smallest reduced cost, so every edge is feasible again (square problems only: the
    # freed column keeps its price).
    for i in rows:
        j = col4row[i]
        if j >= 0:
            row4col[j] = -1
            col4row[i] = -1
        m = np.inf
        for e in range(indptr[i], indptr[i + 1]):
            x = cost[e] - v[cols[e]]
            if x < m:
                m = x
        u[i] = m


@numba.njit(cache=True, nogil=True, inline="always")
def _stable_by(key, src, nk, out):
    # the indices src stably sorted by key[src[q]] (keys in [0, nk)) into out
    pos = np.zeros(nk + 1, dtype=np.int64)
    for q in range(src.size):
        pos[key[src[q]] + 1] += 1
    for c in range(nk):
        pos[c + 1] += pos[c]
    for q in range(src.size):
        e = src[q]
        out[pos[key[e]]] = e
        pos[key[e]] += 1


@numba.njit(cache=True, nogil=True)
def _csr(er, ec, n_r, n_c):
    # csr's edges by two stable counting sorts (on the column, then on the row: equal
    # edges stay in input order), the first of equal edges kept: the order of
    # np.argsort(row * n_c + col, kind="stable") with repeats left out
    m = er.size
    by_col = np.empty(m, dtype=np.int64)
    _stable_by(ec, np.arange(m), n_c, by_col)
    both = np.empty(m, dtype=np.int64)
    _stable_by(er, by_col, n_r, both)
    indptr = np.zeros(n_r + 1, dtype=np.int64)
    cols = np.empty(m, dtype=np.int64)
    order = np.empty(m, dtype=np.int64)
    k = 0
    for q in range(m):
        e = both[q]
        if q == 0 or er[e] != er[both[q - 1]] or ec[e] != ec[both[q - 1]]:
            cols[k] = ec[e]
            order[k] = e
            k += 1
            indptr[er[e] + 1] = k
    for r in range(n_r):                 # rows without edges: the pointer of the last
        if indptr[r + 1] < indptr[r]:
            indptr[r + 1] = indptr[r]
    return indptr, cols[:k].copy(), order[:k].copy()


def csr(er: np.ndarray, ec: np.ndarray, n_r: int, n_c: int
        ) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Distinct edges sorted by (row, col), their row pointer, and the sort order (the
    first of equal edges kept, as a stable sort of ``row * n_c + col`` keeps it)."""
    return _csr(np.ascontiguousarray(er, dtype=np.int64),
                np.ascontiguousarray(ec, dtype=np.int64), int(n_r), int(max(n_c, 1)))


def solve_min(indptr: np.ndarray, cols: np.ndarray, cost: np.ndarray, n_c: int,
               dummy: np.ndarray | None
               ) -> tuple[np.ndarray, np.ndarray, np.ndarray, int]:
    """Minimum-cost assignment on a CSR graph, cold start: (col4row, u, v, n_failed)."""
    n_r = indptr.size - 1
    dummy = np.zeros(0) if dummy is None else np.ascontiguousarray(dummy, dtype=np.float64)
    NC = n_c + (n_r if dummy.size else 0)
    u, v = np.zeros(n_r), np.zeros(NC)
    row4col, col4row = np.full(NC, -1, np.int64), np.full(n_r, -1, np.int64)
    cost = np.ascontiguousarray(cost, dtype=np.float64)
    rows = np.arange(n_r, dtype=np.int64)
    if ARR_BIDS:
        arr(indptr, cols, cost, n_c, dummy, u, v, row4col, col4row, rows, ARR_BIDS * n_r)
    else:
        init_duals(indptr, cols, cost, n_c, dummy, u, v, row4col, col4row)
    failed = ssp(indptr, cols, cost, n_c, dummy, u, v, row4col, col4row, rows)
    return col4row, u, v, int(failed)



def solve_sparse(cand: Candidates, *, maximize: bool = True, unmatched: Any = None,
                 integer: bool = False
                 ) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """Optimal assignment on a candidate graph by sparse shortest augmenting paths.

    Dijkstra on reduced costs from each free row in turn (Jonker-Volgenant style
    successive shortest paths, dual potentials kept); at equal distance a free column
    ends the search, then the lowest column index wins. It terminates on any graph,
    ties included: each search scans a column at most once.

    Parameters
    ----------
    cand : Candidates
    maximize : bool
    unmatched : None, float, array (n_rows,) or "row_floor"
        As :func:`assign`: every row has a private dummy partner whose value is a
        penalty exceeding any weight change (``None``: as many rows as possible are
        assigned), ``unmatched`` itself, or a hair beyond the row's worst candidate.
    integer : bool
        The weights (and ``unmatched``) are integers below 2^50 in magnitude (weights on
        a fixed-point grid, :mod:`.ties`): every cost and dual is an exact integer sum
        (the "hair" of ``row_floor`` is half a unit), and the result is the
        lexicographically smallest of all optimal assignments on the graph
        (:func:`~.ties.lexmin`; leaving a row out comes after all its candidates).

    Returns
    -------
    rows, cols : int arrays, shape (k,)
        Assigned pairs sorted by row (pairs no better than the row's ``unmatched``
        value are dropped).
    u, v : float arrays, shapes (n_rows,), (n_cols,)
        Optimal duals: ``w[i, j] <= u[i] + v[j]`` on every edge (``>=`` when
        minimising), with equality on the assigned pairs; ``v[j] = 0`` for free
        columns and ``v >= 0`` (``<= 0`` when minimising). Each row's dummy partner
        has a dual too (not returned): for a row left unassigned, ``u[i]`` plus that
        dual equals the value of leaving it out (``None``: the penalty).
    """
    cand = cand.dedup(maximize)
    n_r, n_c = cand.shape
    w = cand.weights
    if w.size == 0:
        e = np.zeros(0, np.int64)
        return e, e, np.zeros(n_r), np.zeros(n_c)
    # costs to minimise, all >= 1 (so that the dummy penalties below dominate)
    off = (float(w.max()) + 1.0) if maximize else (float(w.min()) - 1.0)
    cost = (off - w) if maximize else (w - off)
    if unmatched is None:
        # Leaving a row out must cost more than any change of real edges:
        # n_r * (range + 1) bounds the cost of all real edges of a matching.
        dummy = np.full(n_r, float(n_r) * (float(cost.max()) + 1.0) + 1.0)
    elif isinstance(unmatched, str):
        # "row_floor": a row left out is worth a hair less than its worst candidate
        worst = np.full(n_r, 1.0)
        np.maximum.at(worst, cand.rows, cost)
        dummy = worst + (0.5 if integer else 1e-9 * (1.0 + float(cost.max())))
    else:
        uu = np.broadcast_to(np.asarray(unmatched, dtype=np.float64), (n_r,))
        dummy = (off - uu) if maximize else (uu - off)
        dummy = np.maximum(dummy, 0.5)  # an unmatched value beyond every weight
    indptr, cols, order = csr(cand.rows, cand.cols, n_r, n_c)
    cost = cost[order]
    col4row, um, vm, _ = solve_min(indptr, cols, cost, n_c, dummy)
    if integer:
        ip, ic = tight_csr(indptr, cols, cost, um, vm, dummy, n_c)
        lexmin(ip, ic, vm, col4row)
    r = np.flatnonzero((col4row >= 0) & (col4row < n_c))
    c = col4row[r]
    if unmatched is not None and not isinstance(unmatched, str):
        keep = cost[edge_pos(Candidates(cand.rows[order], cols, cost, cand.shape), r, c)] \
            < dummy[r]
        r, c = r[keep], c[keep]
    vm = vm[:n_c]
    u, v = ((off - um), -vm) if maximize else ((um + off), vm)
    return r.astype(np.int64), c.astype(np.int64), u, v


def edge_pos(cand: Candidates, r: np.ndarray, c: np.ndarray) -> np.ndarray:
    key = cand.rows * max(cand.shape[1], 1) + cand.cols
    order = np.argsort(key, kind="stable")
    return order[np.searchsorted(key[order], r * max(cand.shape[1], 1) + c)]
