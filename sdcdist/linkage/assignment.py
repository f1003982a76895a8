"""One-to-one assignment of records: dense exact, or sparse on a candidate graph.

Global linkage (probabilistic record linkage, GDBRL) pairs every record of one
file with at most one record of the other so that the total weight (or the
total distance) is optimal. Two solvers, both exact for the problem they are
given:

* **sparse**: :func:`solve_sparse`, successive shortest augmenting paths
  (Jonker-Volgenant style: an augmenting row reduction, then Dijkstra on reduced
  costs from each free row, dual potentials kept) on a candidate graph, e.g. each
  record's top-c partners. At equal distance a free column ends the search, then
  the lowest column index wins, so ties cost nothing and the result is
  deterministic; every search scans a column at most once, so it terminates on
  any graph (LAPJVsp, used before, did not return on micro-aggregated weights).
  One dummy partner per row makes a full matching always exist, so rows whose
  candidates are all taken stay unassigned (for linkage: not re-identified).
  The result equals the dense optimum whenever the dense optimum uses only
  candidate edges; otherwise it is the optimum over the candidate graph, and
  ``info["flag"]`` says the restriction was used. The solver also returns the
  optimal duals.
* **dense**: the exact optimum of the full ``n_rows x n_cols`` matrix. Memory
  ``O(n_rows * n_cols)``, so only up to a configurable size (``dense_limit``).
  By default (from :data:`EXACT_MIN` on) :func:`exact_dense`: the sparse solver
  on a first graph, then the dual certificate checked on every entry of the
  matrix, violated entries added and the solve warm-started, until no entry
  violates it, which proves the sparse optimum is the dense one. The first graph
  is each row's and column's best entries; from :data:`AUCTION_MIN` rows on, each
  row's best entries at the prices of a dense epsilon-scaling auction, whose
  prices also start the duals, so that the certificate holds after two or three
  rounds instead of a dozen (the optimum of a 5,000-record PRL matrix lies far down
  many rows' lists of raw weights). On PRL weight matrices, full of equal weights,
  it is many times faster than :func:`scipy.optimize.linear_sum_assignment`
  (benchmarks/assignment.py), which remains for small matrices. Tied optima may
  pair records differently from scipy's; the total weight is the same.

Semantics of leaving records unassigned (``unmatched``):

* ``None`` (default): as many rows as possible are assigned (a full
  assignment of the smaller side when the graph allows it), then the total
  weight is optimised — the dense solver's behaviour. On a sparse graph a row
  is left out only when no full assignment exists among the candidates.
* a number ``u`` (or one per row): leaving a row unassigned is worth ``u``
  (a cost ``u`` when minimising); a pair is kept only if it beats that, e.g.
  ``u = 0`` with log-likelihood weights keeps only pairs with positive weight.
* ``"row_floor"`` (sparse): each row's ``u`` is a hair below its worst
  candidate. On a complete graph this is the full assignment; on a contested
  candidate graph it avoids the long augmenting chains that maximising the
  cardinality needs (several times faster), at the price of a few more rows
  left unassigned.

The API is generic: rows and columns are any two record sets; the caller
says which is which.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass
from typing import Any

import numba
import numpy as np
from scipy.optimize import linear_sum_assignment

from ..errors import SdcInputError, param_error

log = logging.getLogger(__name__)

__all__ = ["Candidates", "assign", "assign_by_content", "content_order", "top_candidates",
           "identical_classes", "expected_hits",
           "exact_dense", "solve_sparse", "DEFAULT_DENSE_LIMIT"]

#: Largest ``max(n_rows, n_cols)`` solved densely by default (a 5000 x 5000
#: float64 matrix is 200 MB; the solver is O(n^3) in the worst case).
DEFAULT_DENSE_LIMIT = 5000


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
            raise SdcInputError(f"candidate rows, cols and weights must have the same length; "
                                f"got {r.size}, {c.size} and {w.size}")
        n_r, n_c = (int(s) for s in self.shape)
        if r.size and (r.min() < 0 or r.max() >= n_r or c.min() < 0 or c.max() >= n_c):
            raise SdcInputError(f"candidate indices out of range for shape {(n_r, n_c)}")
        if not np.all(np.isfinite(w)):
            raise SdcInputError("candidate weights must be finite; "
                                f"got {int(np.count_nonzero(~np.isfinite(w)))} non-finite")
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
        return self.weights[_edge_pos(self, np.asarray(r), np.asarray(c))]

    def dedup(self, maximize: bool = True) -> "Candidates":
        """Keep one edge per (row, col): the best weight (they should agree anyway)."""
        key = self.rows * max(self.shape[1], 1) + self.cols
        order = np.lexsort((-self.weights if maximize else self.weights, key))
        first = np.ones(order.size, dtype=bool)
        first[1:] = key[order][1:] != key[order][:-1]
        keep = order[first]
        return Candidates(self.rows[keep], self.cols[keep], self.weights[keep], self.shape)


_M1 = np.uint64(0xBF58476D1CE4E5B9)
_M2 = np.uint64(0x94D049BB133111EB)


def content_order(V: np.ndarray) -> np.ndarray:
    """A permutation of the rows of ``V`` fixed by their values alone, not their positions.

    Rows are sorted by a 64-bit hash (splitmix64 over the bits of each value;
    -0.0 and every NaN count as 0.0 and one NaN); identical rows keep their
    relative order. Shuffling the rows of ``V`` permutes them back into the same
    sequence of values.

    Parameters
    ----------
    V : ndarray (n, k)

    Returns
    -------
    ndarray (n,) of int64
    """
    V = np.array(V, dtype=np.float64, ndmin=2, copy=True)
    V[V == 0] = 0.0
    V[np.isnan(V)] = np.nan
    bits = np.ascontiguousarray(V).view(np.uint64)
    h = np.full(V.shape[0], 0x9E3779B97F4A7C15, dtype=np.uint64)
    with np.errstate(over="ignore"):
        for k in range(bits.shape[1]):
            z = h ^ bits[:, k]
            z = (z ^ (z >> np.uint64(30))) * _M1
            z = (z ^ (z >> np.uint64(27))) * _M2
            h = z ^ (z >> np.uint64(31))
    return np.argsort(h, kind="stable").astype(np.int64)


def identical_classes(V: np.ndarray) -> np.ndarray:
    """Classes of rows with identical values: a label per row.

    Labels are numbered in the order of the rows' values (so they do not depend
    on how the rows are sorted); -0.0 and 0.0 are one value, and so is every NaN.

    Parameters
    ----------
    V : ndarray (n, k)

    Returns
    -------
    ndarray (n,) of int64
        ``labels[i] == labels[j]`` iff rows i and j are identical.
    """
    V = np.array(V, dtype=np.float64, ndmin=2, copy=True)
    if V.shape[0] == 0:
        return np.zeros(0, np.int64)
    V[V == 0] = 0.0
    V[np.isnan(V)] = np.nan
    rows = np.ascontiguousarray(V).view(np.dtype((np.void, 8 * V.shape[1]))).ravel()
    return np.unique(rows, return_inverse=True)[1].astype(np.int64).ravel()


def expected_hits(rows: np.ndarray, cols: np.ndarray, truth: np.ndarray,
                  row_class: np.ndarray, col_class: np.ndarray) -> np.ndarray:
    """Expected correctness of each assigned pair over the permutations of identical records.

    CATALOG (PRL item 5): records identical on the keys have identical weights, so
    permuting them gives other optimal assignments. A row b whose true column is
    a* counts x / (|H| |G|): H the class of rows identical to b, G the class of
    columns identical to a*, x the number of H's rows the assignment pairs with
    members of G. Spread over the pairs: a pair (h, a) is correct with probability
    n(H, G) / (|H| |G|), n(H, G) the rows of h's class whose true column is in a's
    class; summed over the pairs this is the sum of the rows' x / (|H| |G|). With
    nothing duplicated it is 1 for a true pair and 0 otherwise.

    Parameters
    ----------
    rows, cols : int arrays (k,)
        The assigned pairs.
    truth : int array (n_rows,)
        True column of each row (-1: none).
    row_class, col_class : int arrays (n_rows,), (n_cols,)
        :func:`identical_classes` of the rows' and the columns' records.

    Returns
    -------
    ndarray (k,) of float64, in [0, 1]
    """
    rows = np.asarray(rows, dtype=np.int64)
    cols = np.asarray(cols, dtype=np.int64)
    truth = np.asarray(truth, dtype=np.int64)
    rc = np.asarray(row_class, dtype=np.int64)
    cc = np.asarray(col_class, dtype=np.int64)
    if rows.size == 0:
        return np.zeros(0)
    n_rc = np.bincount(rc)
    n_cc = np.bincount(cc)
    span = np.int64(max(n_cc.size, 1))
    known = np.flatnonzero(truth >= 0)
    pairs, n_hg = np.unique(rc[known] * span + cc[truth[known]], return_counts=True)
    key = rc[rows] * span + cc[cols]
    pos = np.minimum(np.searchsorted(pairs, key), max(pairs.size - 1, 0))
    hit = pairs.size > 0
    x = np.where(pairs[pos] == key, n_hg[pos], 0) if hit else np.zeros(rows.size, np.int64)
    return x / (n_rc[rc[rows]].astype(np.float64) * n_cc[cc[cols]])


def assign_by_content(weights: np.ndarray | Candidates, row_order: np.ndarray,
                      col_order: np.ndarray | None, **kw: Any
                      ) -> tuple[np.ndarray, np.ndarray, dict[str, Any]]:
    """:func:`assign` with ties between optimal assignments broken by the records' values.

    The solver breaks ties by position (lowest index first). When rows and
    columns are two versions of the same records in the same order, as an
    original file and its masked release are, that favours the true pairs and
    inflates the share of correct links whenever weights tie. Here both sides
    are solved in :func:`content_order` of their own values, so the optimum
    returned does not depend on how either file is sorted, and the result is
    mapped back (pairs in increasing row order). The total is the same optimum.

    Parameters
    ----------
    weights : ndarray (n_rows, n_cols) or Candidates
    row_order, col_order : ndarray (n_rows,), ndarray (n_cols,)
        :func:`content_order` of the records behind rows and columns (e.g. of
        their key values); ``col_order=None`` when the columns already are in
        content order (their content order is then the identity).
    **kw
        As :func:`assign`; an ``unmatched`` array (one value per row) is permuted along.
    """
    ro = np.asarray(row_order, dtype=np.int64)
    co = None if col_order is None else np.asarray(col_order, dtype=np.int64)
    un = kw.get("unmatched")
    if isinstance(un, np.ndarray) and un.ndim == 1 and un.size == ro.size:
        kw = {**kw, "unmatched": un[ro]}
    if isinstance(weights, Candidates):
        rinv = np.empty_like(ro)
        rinv[ro] = np.arange(ro.size)
        cols = weights.cols
        if co is not None:
            cinv = np.empty_like(co)
            cinv[co] = np.arange(co.size)
            cols = cinv[cols]
        perm = Candidates(rinv[weights.rows], cols, weights.weights, weights.shape)
    else:
        W = np.asarray(weights)
        perm = W[ro] if co is None else W[np.ix_(ro, co)]
    r, c, info = assign(perm, **kw)
    r = ro[r]
    if co is not None:
        c = co[c]
    o = np.argsort(r, kind="stable")
    return r[o], c[o], info


def top_candidates(W: np.ndarray, c: int, *, maximize: bool = True) -> Candidates:
    """The ``c`` best columns of each row of a dense matrix, as a candidate graph.

    Ties at the cut are broken by column index (a stable sort), so the graph
    depends only on ``W``.
    """
    W = np.asarray(W, dtype=np.float64)
    c = int(min(max(c, 1), W.shape[1]))
    order = np.argsort(-W if maximize else W, axis=1, kind="stable")[:, :c]
    return Candidates.from_topc(order, np.take_along_axis(W, order, axis=1), W.shape[1])


#: Smallest ``max(n_rows, n_cols)`` the dense path solves with :func:`exact_dense`
#: (sparse shortest augmenting paths on each row's and column's best entries, proved
#: optimal for the whole matrix by LP duality) instead of
#: :func:`scipy.optimize.linear_sum_assignment`. ``None``: never. Both return the
#: exact optimum; on PRL weight matrices, where most weights are equal, exact_dense
#: is many times faster (benchmarks/assignment.py). Tied optima may pair records
#: differently from scipy's.
EXACT_MIN: int | None = 64

#: Candidates per row (and per column) of the first graph of :func:`exact_dense`.
EXACT_FIRST_C = 8

#: Bids of the augmenting row reduction per free row before the shortest paths (0: none).
ARR_BIDS = 2

#: Violated entries added per row and round of :func:`exact_dense`.
EXACT_ADD = 8

#: Rounds of adding violated entries before :func:`exact_dense` hands the matrix to
#: :func:`scipy.optimize.linear_sum_assignment` (not reached in practice).
EXACT_ROUNDS = 50

#: Smallest ``max(n_rows, n_cols)`` from which :func:`exact_dense` starts from the
#: prices of a dense auction (:func:`_dense_auction`) instead of each row's and
#: column's best raw entries (``None``: never). At Census sizes (about 1,000 records)
#: both starts take 10-30 ms; from 1,500 on the auction start is 1.5-10 times faster
#: on PRL weights (benchmarks/assignment.py).
AUCTION_MIN: int | None = 1500

#: Columns each row keeps between full scans of its row in the auction (its best values
#: at the last scan); they also form the first graph of the exact solve.
AUCTION_LIST = 32

#: epsilon-scaling of the auction: first epsilon ``range / (AUCTION_RATIO *
#: AUCTION_FIRST)``, divided by AUCTION_RATIO per phase down to ``range * AUCTION_EPS``
#: (range: largest minus smallest weight). The auction only finds prices; exactness
#: comes from the shortest augmenting paths and the dual certificate that follow.
AUCTION_RATIO = 16.0
AUCTION_FIRST = 16.0
AUCTION_EPS = 1e-4

#: Full row scans per row (all phases together) after which the auction stops where it
#: is and the exact solve takes over from its prices (a safeguard: PRL weights need 3-7;
#: tie-heavy integer matrices with thousands of equal rows and columns about 120, and
#: cut shorter, their certificate rounds would not converge).
AUCTION_MAX_SCANS = 200


@numba.njit(cache=True, nogil=True, inline="always")
def _offer(best, bcol, got, x, c):
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
def _ssp(indptr, cols, cost, n_c, dummy, u, v, row4col, col4row, rows):
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
def _init_duals(indptr, cols, cost, n_c, dummy, u, v, row4col, col4row):
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
def _arr(indptr, cols, cost, n_c, dummy, u, v, row4col, col4row, rows, max_bids):
    """Augmenting row reduction (Jonker-Volgenant), at most ``max_bids`` bids.

    Each free row of ``rows`` (then each row it displaces, first in first out) takes the
    column of its smallest reduced cost ``cost - v`` and lowers that column's ``v`` by
    the gap to its second smallest, so it stays its best; at a tie a free column is
    preferred. Every assigned row keeps a column of its smallest reduced cost, with
    ``u`` that cost, so the duals stay feasible and tight; ties can make rows displace
    each other forever, hence the cap. Rows left free get ``u`` = their smallest reduced
    cost, ready for :func:`_ssp`.
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
def _reopen_rows(indptr, cols, cost, rows, u, v, row4col, col4row):
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


def _csr(er: np.ndarray, ec: np.ndarray, n_r: int, n_c: int
         ) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Distinct edges sorted by (row, col), their row pointer, and the sort order."""
    key = er * np.int64(max(n_c, 1)) + ec
    order = np.argsort(key, kind="stable")
    key = key[order]
    first = np.ones(key.size, dtype=bool)
    first[1:] = key[1:] != key[:-1]
    order = order[first]
    r = er[order]
    indptr = np.searchsorted(r, np.arange(n_r + 1)).astype(np.int64)
    return indptr, np.ascontiguousarray(ec[order], dtype=np.int64), order


def _solve_min(indptr: np.ndarray, cols: np.ndarray, cost: np.ndarray, n_c: int,
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
        _arr(indptr, cols, cost, n_c, dummy, u, v, row4col, col4row, rows, ARR_BIDS * n_r)
    else:
        _init_duals(indptr, cols, cost, n_c, dummy, u, v, row4col, col4row)
    failed = _ssp(indptr, cols, cost, n_c, dummy, u, v, row4col, col4row, rows)
    return col4row, u, v, int(failed)


# ---- exact dense via the sparse solver and a dual certificate -------------------------

@numba.njit(cache=True, nogil=True)
def _dense_candidates(W, s, c, diag):
    # Each row's c smallest costs s * W[i, j] and each column's c smallest (ties: lowest
    # index), plus (diag) the entries (i, i) so that a full assignment exists.
    n_r, n_c = W.shape
    cr = min(c, n_c)
    cc = min(c, n_r)
    out_r = np.empty(n_r * cr + n_c * cc + n_r, dtype=np.int64)
    out_c = np.empty(out_r.size, dtype=np.int64)
    best = np.empty(cr)
    bcol = np.empty(cr, dtype=np.int64)
    cbest = np.empty((n_c, cc))
    crow = np.empty((n_c, cc), dtype=np.int64)
    cgot = np.zeros(n_c, dtype=np.int64)
    k = 0
    for i in range(n_r):
        got = 0
        for j in range(n_c):
            x = -s * W[i, j]
            got = _offer(best, bcol, got, x, j)
            g = cgot[j]
            if g < cc or x > cbest[j, cc - 1]:
                cgot[j] = _offer(cbest[j], crow[j], g, x, i)
        for q in range(got):
            out_r[k] = i
            out_c[k] = bcol[q]
            k += 1
        if diag and i < n_c:
            out_r[k] = i
            out_c[k] = i
            k += 1
    for j in range(n_c):
        for q in range(cgot[j]):
            out_r[k] = crow[j, q]
            out_c[k] = j
            k += 1
    return out_r[:k], out_c[:k]


@numba.njit(cache=True, nogil=True)
def _violations(W, s, off, u, v, tol, per_row, check, in_g):
    # Dual certificate of a minimum-cost assignment of the costs s * (W - off): an entry
    # outside G (in_g) with u[r] + v[c] - s * (W[r, c] - off) > tol violates it. For the
    # rows with check[r], the per_row most violated entries; and the number of violated
    # entries.
    n_r, n_c = W.shape
    out_r = np.empty(n_r * per_row, dtype=np.int64)
    out_c = np.empty(n_r * per_row, dtype=np.int64)
    best = np.empty(per_row)
    bcol = np.empty(per_row, dtype=np.int64)
    k = 0
    total = 0
    for r in range(n_r):
        if not check[r]:
            continue
        got = 0
        ur = u[r]
        for c in range(n_c):
            x = ur + v[c] - s * (W[r, c] - off)
            if x > tol and not in_g[r, c]:
                total += 1
                got = _offer(best, bcol, got, x, c)
        for q in range(got):
            out_r[k] = r
            out_c[k] = bcol[q]
            k += 1
    return out_r[:k], out_c[:k], total


# ---- auction prices for the exact dense solve ---------------------------------------

@numba.njit(cache=True, nogil=True)
def _auction_scan(W, s, mid, i, p, lc, lw):
    # Row i's values -s * (W[i, j] - mid) - p[j]: the lc.shape[1] largest into lc[i] with
    # their weights -s * (W[i, j] - mid) into lw[i]; returns the largest value left out
    # (-inf if none), an upper bound on every column outside the list for as long as
    # prices only rise. The previous list (at current prices) seeds the selection, so
    # that few entries pass the threshold; among equal values the earlier offer stays.
    k = lc.shape[1]
    n_c = W.shape[1]
    best = np.empty(k + 1)
    bcol = np.empty(k + 1, dtype=np.int64)
    got = 0
    n_old = 0
    for q in range(k):
        j = lc[i, q]
        if j < 0:
            break
        n_old += 1
        got = _offer(best, bcol, got, lw[i, q] - p[j], j)
    old = lc[i, :n_old].copy()
    for j in range(n_c):
        x = -s * (W[i, j] - mid) - p[j]
        if got <= k or x > best[k]:
            seen = False
            for q in range(n_old):
                if old[q] == j:
                    seen = True
                    break
            if not seen:
                got = _offer(best, bcol, got, x, j)
    for q in range(k):
        if q < got:
            j = bcol[q]
            lc[i, q] = j
            lw[i, q] = -s * (W[i, j] - mid)
        else:
            lc[i, q] = -1
    return best[k] if got > k else -np.inf


@numba.njit(cache=True, nogil=True)
def _dense_auction(W, s, mid, p, eps_list, k, um, max_scans):
    """Forward auction (Gauss-Seidel, epsilon-scaling) on the values ``-s * (W - mid)``.

    Each row bids for the column of its largest value ``-s * W[i, j] - p[j]``, raising
    its price by the margin over the second largest plus epsilon; the row it displaces
    bids next (first in, first out). Between full scans a row looks only at its list of
    ``k`` columns (its best at the last scan) and the bound on all others (prices only
    rise, so the bound stays valid; a bid with the bound as second value is a valid,
    smaller bid). ``um`` (``n_r`` values, or empty): a private option per row of value
    ``um[i]`` minus its own price (leaving the row unassigned). Prices ``p`` (n_cols,)
    are updated in place and kept across phases.

    After ``max_scans`` full scans it stops where it is (the result only seeds the exact
    solve). Returns the final phase's assignment (column per row; -1: none or its
    private option), the lists (n_rows, k), the number of bids and of full row scans.
    """
    n_r, n_c = W.shape
    nd = um.size > 0
    lc = np.full((n_r, k), -1, dtype=np.int64)
    lw = np.zeros((n_r, k))                 # their weights, so that bids stay off W
    bound = np.full(n_r, np.inf)
    pd = np.zeros(n_r)
    owner = np.full(n_c, -1, dtype=np.int64)
    col = np.full(n_r, -1, dtype=np.int64)
    queue = np.empty(n_r, dtype=np.int64)
    bids = 0
    scans = 0
    for eps in eps_list:
        if scans >= max_scans:
            break
        owner[:] = -1
        col[:] = -1
        for i in range(n_r):
            queue[i] = i
        head = 0
        size = n_r
        while size > 0 and scans < max_scans:
            i = queue[head]
            head = (head + 1) % n_r
            size -= 1
            v1 = -np.inf
            v2 = -np.inf
            j1 = -1
            for attempt in range(2):
                v1 = -np.inf
                v2 = -np.inf
                j1 = -1
                for q in range(k):
                    j = lc[i, q]
                    if j < 0:
                        break
                    x = lw[i, q] - p[j]
                    if x > v1:
                        v2 = v1
                        v1 = x
                        j1 = j
                    elif x > v2:
                        v2 = x
                if j1 >= 0 and v1 >= bound[i]:
                    break
                bound[i] = _auction_scan(W, s, mid, i, p, lc, lw)
                scans += 1
            if bound[i] > v2:
                v2 = bound[i]
            if nd:
                x = um[i] - pd[i]
                if x > v1:
                    v2 = max(v1, v2)
                    v1 = x
                    j1 = -1
                elif x > v2:
                    v2 = x
            bids += 1
            inc = (v1 - v2 + eps) if v2 > -np.inf else eps
            if j1 < 0:
                pd[i] += inc
                col[i] = -1
                continue
            p[j1] += inc
            o = owner[j1]
            owner[j1] = i
            col[i] = j1
            if o >= 0:
                col[o] = -1
                queue[(head + size) % n_r] = o
                size += 1
    return col, lc, bids, scans


def _auction_start(X: np.ndarray, s: float, um: np.ndarray, n_lst: int, lo: float,
                   hi: float) -> tuple[np.ndarray, np.ndarray, np.ndarray, dict[str, int]]:
    """Prices (cost-form column duals ``v = -p``) and a first graph (each row's list and
    its auction partner) from :func:`_dense_auction`; ``lo``, ``hi``: the extremes of X."""
    span = hi - lo
    # start each column's price at its largest value: a column every row ranks high
    # (W[i, j] = a[i] + b[j] in the extreme) then costs no bidding war
    p = _colmax(X, s, 0.5 * (lo + hi))
    if span > 0:
        eps, e = [], span / (AUCTION_RATIO * AUCTION_FIRST)
        while e > span * AUCTION_EPS:
            eps.append(e)
            e /= AUCTION_RATIO
        eps.append(span * AUCTION_EPS)
    else:
        eps = [1.0]
    k = int(min(max(n_lst, 2), X.shape[1]))
    col, lc, bids, scans = _dense_auction(X, s, 0.5 * (lo + hi), p,
                                          np.asarray(eps, dtype=np.float64), k, um,
                                          AUCTION_MAX_SCANS * X.shape[0])
    rows = np.broadcast_to(np.arange(X.shape[0])[:, None], lc.shape)
    ok = lc >= 0
    m = col >= 0
    er = np.concatenate([rows[ok], np.flatnonzero(m)]).astype(np.int64)
    ec = np.concatenate([lc[ok], col[m]]).astype(np.int64)
    return er, ec, -p, {"auction_bids": int(bids), "auction_scans": int(scans),
                        "auction_phases": len(eps)}


@numba.njit(cache=True, nogil=True)
def _colmax(X, s, mid):
    # each column's largest value -s * (X[i, j] - mid)
    m = np.full(X.shape[1], -np.inf)
    for i in range(X.shape[0]):
        for j in range(X.shape[1]):
            x = -s * (X[i, j] - mid)
            if x > m[j]:
                m[j] = x
    return m


@numba.njit(cache=True, nogil=True)
def _nonfinite(X):
    # whether X (2-D) holds a NaN or an infinity, in one pass without temporaries
    for i in range(X.shape[0]):
        for j in range(X.shape[1]):
            if not np.isfinite(X[i, j]):
                return True
    return False


@numba.njit(cache=True, nogil=True)
def _minmax(X):
    lo = np.inf
    hi = -np.inf
    for i in range(X.shape[0]):
        for j in range(X.shape[1]):
            x = X[i, j]
            if x < lo:
                lo = x
            if x > hi:
                hi = x
    return lo, hi


def exact_dense(X: np.ndarray, *, maximize: bool = True, first_c: int | None = None,
                unmatched: np.ndarray | None = None, auction: bool | None = None
                ) -> tuple[np.ndarray, np.ndarray, dict[str, Any]]:
    """Optimal assignment of a dense matrix, solved on a sparse graph and proved optimal
    for the whole matrix by LP duality.

    In cost form (``C = -X`` when maximising, else ``X``):

    1. Graph G: each row's and each column's ``first_c`` best entries, and (without
       ``unmatched``) the entries ``(i, i)``, so that a full assignment exists on G.
       With ``auction`` instead: prices ``p`` from a forward auction with
       epsilon-scaling on the whole matrix (:func:`_dense_auction`; a row rescans its
       row only when its :data:`AUCTION_LIST` best columns of the last scan fall below
       the bound on all others), and G = each row's list, its auction partner and
       ``(i, i)``.
    2. An optimal assignment M on G with its duals ``(u, v)`` by sparse shortest
       augmenting paths: ``C[i, j] >= u_i + v_j`` on G, with equality on M and
       ``v_j = 0`` (``v_j <= 0`` generally) for the columns left free. With
       ``auction`` on a square matrix without ``unmatched`` the search starts from
       ``v = -p`` (every column is matched in the end, so free columns need no zero
       duals), which the auction made nearly optimal for the whole matrix.
    3. If ``C[i, j] >= u_i + v_j`` (up to 1e-11 of ``1 + max X - min X``, all on
       ``X - min X``: a common offset neither loosens the test nor adds rounding) holds for EVERY
       entry, (u, v) is a feasible dual of the dense LP with M's value, so M is a dense
       optimum. Otherwise each row's :data:`EXACT_ADD` most violated entries join G and
       steps 2-3 repeat (warm-started on square matrices without ``unmatched``: only the
       rows given new entries are re-solved). After :data:`EXACT_ROUNDS` rounds the
       matrix would go to :func:`scipy.optimize.linear_sum_assignment`.

    PRL weight matrices hold huge numbers of equal weights (sums of a few per-column
    level weights); scipy's dense shortest-augmenting-path solver scans every column at
    every step among those ties, the sparse search stops at the first free column at the
    shortest distance.

    Parameters
    ----------
    X : ndarray (n_rows, n_cols), finite
    maximize : bool
    first_c : int, optional
        Candidates per row and per column of the first graph (default
        :data:`EXACT_FIRST_C`).
    unmatched : ndarray (n_rows,), optional
        Value of leaving each row unassigned (a private dummy column); ``None``: as many
        rows as possible are assigned (requires ``n_rows <= n_cols``).
    auction : bool, optional
        Start from the auction's prices (default: from :data:`AUCTION_MIN` rows or
        columns on). The total is the same optimum either way; which of several tied
        optima is returned may differ.

    Returns
    -------
    rows, cols : int arrays
        The assignment, sorted by row (with ``unmatched``: only the rows assigned to a
        real column).
    info : dict
        ``exact_rounds`` (solves of G; 0 = scipy ran), ``exact_edges`` (edges of the last
        G); with the auction also ``auction_bids``, ``auction_scans`` (full row scans)
        and ``auction_phases``.
    """
    X = np.ascontiguousarray(X, dtype=np.float64)
    n_r, n_c = X.shape
    s = -1.0 if maximize else 1.0
    empty = np.zeros(0, np.int64)
    if n_r == 0 or n_c == 0:
        return empty, empty, {"exact_rounds": 0, "exact_edges": 0}
    if unmatched is None and n_r > n_c:
        raise ValueError("exact_dense without unmatched needs n_rows <= n_cols")
    lo, hi = _minmax(X)
    # every cost, dual and test is on X - lo (CATALOG PRL item 4): a common offset would
    # otherwise loosen the test (1e-11 of 1e6 is more than the spread of 1e6 + 1e-6 z) and
    # its rounding would swamp the reduced costs
    dummy = None if unmatched is None else s * (np.broadcast_to(
        np.asarray(unmatched, dtype=np.float64), (n_r,)).astype(np.float64) - lo)
    tol = 1e-11 * (1.0 + (hi - lo))
    first_c = EXACT_FIRST_C if first_c is None else first_c
    if auction is None:
        auction = AUCTION_MIN is not None and max(n_r, n_c) >= AUCTION_MIN
    v0 = None
    info: dict[str, Any] = {}
    if auction:
        # the auction's values are -s * (X - mid), mid = (lo + hi) / 2: the same for
        # leaving a row out
        um = np.zeros(0) if dummy is None else -(dummy + s * (lo - 0.5 * (lo + hi)))
        er, ec, v0, info = _auction_start(X, s, um, AUCTION_LIST, lo, hi)
        if unmatched is None:
            # the entries (i, i) too: a full assignment on G even if the auction was cut
            d = np.arange(n_r, dtype=np.int64)
            er, ec = np.concatenate([er, d]), np.concatenate([ec, d])
    else:
        er, ec = _dense_candidates(X, s, max(1, int(first_c)), unmatched is None)
    in_g = np.zeros(X.shape, dtype=np.bool_)
    in_g[er, ec] = True
    # Warm start (square, no dummies): only the rows given new entries are re-solved.
    # There v only decreases, so a row verified at u_checked stays verified while
    # u <= u_checked: only rows whose u rose are scanned again.
    warm = unmatched is None and n_r == n_c
    state = None
    u_checked = np.full(n_r, -np.inf)
    dz = np.zeros(0) if dummy is None else dummy
    for rnd in range(1, EXACT_ROUNDS + 1):
        indptr, cols, order = _csr(er, ec, n_r, n_c)
        er, ec = er[order], cols
        cost = s * (X[er, ec] - lo)
        if state is None and warm and v0 is not None:
            # the auction's prices as column duals; every row free, its u the smallest
            # reduced cost on G (feasible on G), then row reduction and shortest paths
            u, v = np.zeros(n_r), v0
            row4col, col4row = np.full(n_c, -1, np.int64), np.full(n_r, -1, np.int64)
            every = np.arange(n_r, dtype=np.int64)
            _reopen_rows(indptr, cols, cost, every, u, v, row4col, col4row)
            if ARR_BIDS:
                _arr(indptr, cols, cost, n_c, dz, u, v, row4col, col4row, every,
                     ARR_BIDS * n_r)
            failed = _ssp(indptr, cols, cost, n_c, dz, u, v, row4col, col4row, every)
            check = np.ones(n_r, dtype=np.bool_)
        elif state is None:
            col4row, u, v, failed = _solve_min(indptr, cols, cost, n_c, dummy)
            check = np.ones(n_r, dtype=np.bool_)
        else:
            u, v, row4col, col4row, reopen = state
            _reopen_rows(indptr, cols, cost, reopen, u, v, row4col, col4row)
            if ARR_BIDS:
                _arr(indptr, cols, cost, n_c, dz, u, v, row4col, col4row, reopen,
                     ARR_BIDS * reopen.size)
            # all rows: the row reduction may have displaced rows outside ``reopen``
            failed = _ssp(indptr, cols, cost, n_c, dz, u, v, row4col, col4row,
                          np.arange(n_r, dtype=np.int64))
            check = u > u_checked
        if failed:
            break                           # cannot happen: G holds a full assignment
        vr, vc, total = _violations(X, s, lo, u, v[:n_c], tol, EXACT_ADD, check, in_g)
        log.debug("exact assignment round %d: %d edges, %d rows checked, %d violated",
                  rnd, er.size, int(check.sum()), total)
        if total == 0:
            # (u, v) is feasible for every entry: proved optimal
            rows = np.flatnonzero((col4row >= 0) & (col4row < n_c))
            return rows.astype(np.int64), col4row[rows], {"exact_rounds": rnd,
                                                          "exact_edges": int(er.size),
                                                          **info}
        in_g[vr, vc] = True
        if warm:
            u_checked = np.where(check, u, u_checked)
            reopen = np.unique(vr)
            u_checked[reopen] = -np.inf
            row4col = np.full(n_c, -1, np.int64)
            m = col4row >= 0
            row4col[col4row[m]] = np.flatnonzero(m)
            state = (u, v, row4col, col4row, reopen)
        er, ec = np.concatenate([er, vr]), np.concatenate([ec, vc])
    log.warning("exact assignment: no proof after %d rounds; dense solver used", EXACT_ROUNDS)
    if unmatched is None:
        r, c = linear_sum_assignment(X, maximize=maximize)
        return r.astype(np.int64), c.astype(np.int64), {"exact_rounds": 0,
                                                        "exact_edges": int(X.size)}
    gain = dummy[:, None] - s * (X - lo)
    r, c = linear_sum_assignment(np.maximum(gain, 0.0), maximize=True)
    keep = gain[r, c] > 0
    return r[keep].astype(np.int64), c[keep].astype(np.int64), {"exact_rounds": 0,
                                                                "exact_edges": int(X.size)}


def _dense(W: np.ndarray, maximize: bool, unmatched: Any
           ) -> tuple[np.ndarray, np.ndarray]:
    exact = EXACT_MIN is not None and max(W.shape) >= EXACT_MIN
    if unmatched is None or isinstance(unmatched, str):
        if not exact:
            return linear_sum_assignment(W, maximize=maximize)
        if W.shape[0] > W.shape[1]:
            c, r, _ = exact_dense(W.T, maximize=maximize)
            return r, c
        r, c, _ = exact_dense(W, maximize=maximize)
        return r, c
    u = np.broadcast_to(np.asarray(unmatched, dtype=np.float64), (W.shape[0],))
    if exact:
        r, c, _ = exact_dense(W, maximize=maximize, unmatched=u)
        keep = (W[r, c] > u[r]) if maximize else (W[r, c] < u[r])
        return r[keep], c[keep]
    # Gain of a pair over leaving its row unassigned; pairs with no gain are
    # equivalent to "unassigned", so clip them to 0 and drop them afterwards.
    gain = (W - u[:, None]) if maximize else (u[:, None] - W)
    r, c = linear_sum_assignment(np.maximum(gain, 0.0), maximize=True)
    keep = gain[r, c] > 0
    return r[keep], c[keep]


def solve_sparse(cand: Candidates, *, maximize: bool = True, unmatched: Any = None
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
        dummy = worst + 1e-9 * (1.0 + float(cost.max()))
    else:
        uu = np.broadcast_to(np.asarray(unmatched, dtype=np.float64), (n_r,))
        dummy = (off - uu) if maximize else (uu - off)
        dummy = np.maximum(dummy, 0.5)  # an unmatched value beyond every weight
    indptr, cols, order = _csr(cand.rows, cand.cols, n_r, n_c)
    cost = cost[order]
    col4row, um, vm, _ = _solve_min(indptr, cols, cost, n_c, dummy)
    r = np.flatnonzero((col4row >= 0) & (col4row < n_c))
    c = col4row[r]
    if unmatched is not None and not isinstance(unmatched, str):
        keep = cost[_edge_pos(Candidates(cand.rows[order], cols, cost, cand.shape), r, c)] \
            < dummy[r]
        r, c = r[keep], c[keep]
    vm = vm[:n_c]
    u, v = ((off - um), -vm) if maximize else ((um + off), vm)
    return r.astype(np.int64), c.astype(np.int64), u, v


def _sparse(cand: Candidates, maximize: bool, unmatched: Any
            ) -> tuple[np.ndarray, np.ndarray]:
    r, c, _, _ = solve_sparse(cand, maximize=maximize, unmatched=unmatched)
    return r, c


def _edge_pos(cand: Candidates, r: np.ndarray, c: np.ndarray) -> np.ndarray:
    key = cand.rows * max(cand.shape[1], 1) + cand.cols
    order = np.argsort(key, kind="stable")
    return order[np.searchsorted(key[order], r * max(cand.shape[1], 1) + c)]


def assign(weights: np.ndarray | Candidates, *, maximize: bool = True,
           dense_limit: int = DEFAULT_DENSE_LIMIT, top_c: int = 20,
           unmatched: Any = None) -> tuple[np.ndarray, np.ndarray, dict[str, Any]]:
    """Optimal one-to-one assignment of rows to columns.

    Parameters
    ----------
    weights : ndarray (n_rows, n_cols) or Candidates
        A dense matrix of pair weights (distances when ``maximize=False``), or
        a sparse candidate graph. A dense matrix with
        ``max(n_rows, n_cols) <= dense_limit`` is solved exactly; a larger one
        is first cut to each row's ``top_c`` best columns. A candidate graph
        is always solved sparsely.
    maximize : bool
        Maximise total weight (True) or minimise total distance (False).
    dense_limit : int
        Largest side solved by the dense solver.
    top_c : int
        Candidates per row when a too-large dense matrix must be cut.
    unmatched : None, float, array (n_rows,) or "row_floor"
        Value of leaving a row unassigned (see the module docstring); ``None``
        assigns as many rows as possible. ``"row_floor"`` (sparse only): a row
        left out is worth a hair less than its worst candidate, so a row stays
        unassigned only when that frees a better use of its candidates; much
        faster than ``None`` on large contested graphs, and the same result
        whenever the graph is complete. Dense matrices treat it as ``None``.

    Returns
    -------
    rows, cols : int arrays, shape (k,)
        Assigned pairs, sorted by row; rows not listed are unassigned.
    info : dict
        ``method`` ("dense" or "sparse"), ``flag`` (1 when the sparse candidate
        restriction was used), ``n_candidates`` (edges in the graph),
        ``n_assigned``, ``n_unassigned_rows``.
    """
    if isinstance(unmatched, str) and unmatched != "row_floor":
        raise param_error("unmatched", "assign", "None, a number, one number per row or "
                          "'row_floor'", unmatched)
    if isinstance(weights, Candidates):
        cand, W = weights.dedup(maximize), None
    else:
        W = np.asarray(weights, dtype=np.float64)
        if W.ndim != 2:
            raise SdcInputError(f"assignment needs a 2-D weight matrix; got shape {W.shape}")
        if W.ndim == 2 and W.size and _nonfinite(W):
            raise SdcInputError("assignment weights must be finite; got "
                                f"{int(np.count_nonzero(~np.isfinite(W)))} non-finite entries")
        cand = None
        if max(W.shape) > dense_limit:
            cand, W = top_candidates(W, top_c, maximize=maximize), None
    if dense_limit < 1:
        raise param_error("dense_limit", "assign", "an integer >= 1", dense_limit)
    if W is not None:
        n_r = W.shape[0]
        if W.size == 0:
            r = c = np.zeros(0, np.int64)
        else:
            r, c = _dense(W, maximize, unmatched)
        info = {"method": "dense", "flag": 0, "n_candidates": int(W.size)}
    else:
        n_r = cand.shape[0]
        r, c = _sparse(cand, maximize, unmatched)
        info = {"method": "sparse", "flag": 1, "n_candidates": int(cand.rows.size)}
    order = np.argsort(r, kind="stable")
    r, c = np.asarray(r, np.int64)[order], np.asarray(c, np.int64)[order]
    info.update(n_assigned=int(r.size), n_unassigned_rows=int(n_r - r.size))
    return r, c, info
