"""One-to-one assignment of records: dense exact, or sparse on a candidate graph.

Global linkage (probabilistic record linkage, GDBRL) pairs every record of one
file with at most one record of the other so that the total weight (or the
total distance) is optimal. Two solvers, both exact for the problem they are
given:

* **dense**: the exact optimum of the full ``n_rows x n_cols`` matrix. Memory
  ``O(n_rows * n_cols)``, so only up to a configurable size (``dense_limit``).
  :func:`scipy.optimize.linear_sum_assignment`, or (opt-in, :data:`EXACT_MIN`)
  :func:`exact_dense`: auction prices, then an exact sparse solve proved
  optimal for the whole matrix by LP duality.
* **sparse**: :func:`scipy.sparse.csgraph.min_weight_full_bipartite_matching`
  (LAPJVsp) on a candidate graph, e.g. each record's top-c partners. One
  dummy partner per row makes a full matching always exist, so rows whose
  candidates are all taken stay unassigned (for linkage: not re-identified).
  The result equals the dense optimum whenever the dense optimum uses only
  candidate edges; otherwise it is the optimum over the candidate graph, and
  ``info["flag"]`` says the restriction was used.

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
import scipy.sparse as sp
from scipy.optimize import linear_sum_assignment
from scipy.sparse.csgraph import min_weight_full_bipartite_matching

from ..errors import SdcInputError, param_error

log = logging.getLogger(__name__)

__all__ = ["Candidates", "assign", "top_candidates", "exact_dense", "DEFAULT_DENSE_LIMIT"]

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


def top_candidates(W: np.ndarray, c: int, *, maximize: bool = True) -> Candidates:
    """The ``c`` best columns of each row of a dense matrix, as a candidate graph.

    Ties at the cut are broken by column index (a stable sort), so the graph
    depends only on ``W``.
    """
    W = np.asarray(W, dtype=np.float64)
    c = int(min(max(c, 1), W.shape[1]))
    order = np.argsort(-W if maximize else W, axis=1, kind="stable")[:, :c]
    return Candidates.from_topc(order, np.take_along_axis(W, order, axis=1), W.shape[1])


#: Smallest square matrix solved by :func:`exact_dense`; ``None``: never by default.
#: The stall on micro-aggregated weights (Census against micmul k = 3, rows in identical
#: triplets) was LAPJVsp (min_weight_full_bipartite_matching) on the near-tight graph,
#: which did not return; the restricted solve now uses the dense solver with the
#: non-edges infeasible, and returns the proved optimum in 0.1-0.3 s on Census. It stays
#: off because it is not faster than linear_sum_assignment on the benchmark matrices
#: (benchmarks/assignment.py: Census 0.05 s vs 0.2 s; 5,000 tax-like records against
#: noise 7-9 s vs 10-12 s), and tied optima may pair records differently (PLD counts
#: could change while the total weight does not). Profile at 5,000: about 70 % in the
#: restricted solve (the dense solver scans every column per step, graph or not) and
#: 20 % in the auction; a real win needs a sparse shortest-augmenting-path solve (Dijkstra
#: over the graph's edges, warm-started from the auction's prices) that stays bounded on
#: identical rows.
EXACT_MIN: int | None = None

#: Candidates per row of the first sparse try of the exact dense solver.
EXACT_FIRST_C = 8

#: Rounds of adding violated edges before the exact dense solver gives up on the proof.
EXACT_ROUNDS = 12

#: Final epsilon of the auction (times the weight range / n) and its scaling factor.
EXACT_EPS = 1e-4
EXACT_FACTOR = 8.0


@numba.njit(cache=True, nogil=True)
def _column_potentials(indptr, rows, wcol, match, wm, n_c, tol):
    # Column prices v of a square assignment from an optimal perfect matching on a graph:
    # shortest distances (queue-based Bellman-Ford) from a source with a 0-length arc
    # to every column, over arcs c -> match[r] of length wm[r] - X[r, c] for each graph
    # edge (r, c), c != match[r]. Then u_r = wm[r] - v[match[r]] and u_r + v_c >= X[r, c]
    # on the graph, with equality on the matching. The matching is optimal, so there is
    # no negative cycle; a relaxation budget guards against rounding. Returns (v, ok).
    v = np.zeros(n_c)
    queue = np.empty(n_c + 1, dtype=np.int64)
    inq = np.ones(n_c, dtype=np.bool_)
    for c in range(n_c):
        queue[c] = c
    head = 0
    tail = n_c
    size = n_c
    budget = 64 * (rows.size + n_c) + 1000000
    while size > 0:
        c = queue[head]
        head = (head + 1) % (n_c + 1)
        size -= 1
        inq[c] = False
        dc = v[c]
        for e in range(indptr[c], indptr[c + 1]):
            r = rows[e]
            j = match[r]
            if j == c:
                continue
            nd = dc + (wm[r] - wcol[e])
            if nd < v[j] - tol:
                v[j] = nd
                budget -= 1
                if budget < 0:
                    return v, False
                if not inq[j]:
                    inq[j] = True
                    queue[tail] = j
                    tail = (tail + 1) % (n_c + 1)
                    size += 1
    return v, True


@numba.njit(cache=True, nogil=True, inline="always")
def _offer(best, bcol, got, x, c):
    """Offer column ``c`` of value ``x`` to a row's list of the largest values (``best``,
    ``bcol``: capacity ``best.size``, ``got`` kept, sorted desc); returns the new count."""
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


@numba.njit(cache=True, nogil=True)
def _violations(X, u, v, tol, per_row):
    # per row, the (up to) per_row columns with the largest X[r, c] - u[r] - v[c] > tol
    n_r, n_c = X.shape
    out_r = np.empty(n_r * per_row, dtype=np.int64)
    out_c = np.empty(n_r * per_row, dtype=np.int64)
    best = np.empty(per_row)
    bcol = np.empty(per_row, dtype=np.int64)
    k = 0
    total = 0
    for r in range(n_r):
        got = 0
        ur = u[r]
        for c in range(n_c):
            x = X[r, c] - ur - v[c]
            if x > tol:
                total += 1
                got = _offer(best, bcol, got, x, c)
        for q in range(got):
            out_r[k] = r
            out_c[k] = bcol[q]
            k += 1
    return out_r[:k], out_c[:k], total


@numba.njit(cache=True, nogil=True)
def _auction(X, eps0, eps_min, factor):
    # Forward auction with epsilon-scaling (Bertsekas) on a square dense matrix,
    # maximising. Returns column prices (near-optimal duals) and the assignment.
    n = X.shape[0]
    price = np.zeros(n)
    owner = np.full(n, -1, dtype=np.int64)
    match = np.full(n, -1, dtype=np.int64)
    queue = np.empty(n, dtype=np.int64)
    eps = eps0
    while True:
        owner[:] = -1
        match[:] = -1
        for r in range(n):
            queue[r] = r
        head = 0
        size = n
        while size > 0:
            r = queue[head]
            head = (head + 1) % n
            size -= 1
            b1 = -np.inf
            b2 = -np.inf
            j1 = 0
            for c in range(n):
                x = X[r, c] - price[c]
                if x > b1:
                    b2 = b1
                    b1 = x
                    j1 = c
                elif x > b2:
                    b2 = x
            if b2 == -np.inf:
                b2 = b1
            price[j1] += b1 - b2 + eps
            old = owner[j1]
            owner[j1] = r
            match[r] = j1
            if old >= 0:
                match[old] = -1
                queue[(head + size) % n] = old
                size += 1
        if eps <= eps_min:
            break
        eps = max(eps / factor, eps_min)
    return price, match


@numba.njit(cache=True, nogil=True)
def _near_tight(X, price, slack, per_row):
    # per row, the columns whose value X[r, c] - price[c] is within ``slack`` of the row's
    # best (at most per_row of them, the best first)
    n_r, n_c = X.shape
    out_r = np.empty(n_r * per_row, dtype=np.int64)
    out_c = np.empty(n_r * per_row, dtype=np.int64)
    best = np.empty(per_row)
    bcol = np.empty(per_row, dtype=np.int64)
    k = 0
    for r in range(n_r):
        top = -np.inf
        for c in range(n_c):
            x = X[r, c] - price[c]
            if x > top:
                top = x
        got = 0
        for c in range(n_c):
            x = X[r, c] - price[c]
            if x >= top - slack:
                got = _offer(best, bcol, got, x, c)
        for q in range(got):
            out_r[k] = r
            out_c[k] = bcol[q]
            k += 1
    return out_r[:k], out_c[:k]


def exact_dense(X: np.ndarray, *, first_c: int = EXACT_FIRST_C
                ) -> tuple[np.ndarray, np.ndarray, dict[str, Any]]:
    """Maximum-weight perfect assignment of a square matrix ``X``: the dense optimum,
    found on a sparse graph and proved optimal by LP duality.

    1. Near-optimal column prices from an auction with epsilon-scaling
       (Bertsekas; final epsilon :data:`EXACT_EPS` x range / n).
    2. Graph G: each row's ``first_c`` best columns, the entries within a few
       epsilon of tight at those prices, and the auction's assignment (so a
       perfect matching exists on G).
    3. An optimal perfect matching M on G (exact; the dense solver with the
       entries outside G infeasible).
    4. Dual prices from M: ``v_c`` = shortest alternating-path distances (no
       negative cycle, as M is optimal on G), ``u_r = X[r, M(r)] - v[M(r)]``;
       ``u_r + v_c >= X[r, c]`` on G, with equality on M.
    5. If ``u_r + v_c >= X[r, c]`` holds for EVERY entry of ``X`` (up to 1e-9
       relative rounding), (u, v) is a feasible dual of the dense assignment LP
       with the value of M, so M is a dense optimum. Otherwise the most violated
       entries of each row join G and steps 3-5 repeat (column generation);
       after :data:`EXACT_ROUNDS` rounds, or for a non-square matrix, the full
       matrix goes to :func:`scipy.optimize.linear_sum_assignment`.

    On PRL weight matrices, where many weights are equal (a third of the pairs
    of a skewed file disagree on every key: one value), the dense
    shortest-augmenting-path solver spends most of its time on ties; this
    needs a few scans of the matrix and small sparse solves.

    Returns
    -------
    rows, cols : int arrays, the assignment (every row, sorted by row)
    info : dict
        ``exact_rounds`` (0 = the dense solver ran) and ``exact_edges`` of G.
    """
    n_r, n_c = X.shape
    X = np.ascontiguousarray(X, dtype=np.float64)
    if n_r == 0:
        return np.zeros(0, np.int64), np.zeros(0, np.int64), {"exact_rounds": 0,
                                                              "exact_edges": 0}
    c = min(max(1, int(first_c)), n_c)
    top = np.argpartition(-X, c - 1, axis=1)[:, :c] if c < n_c else \
        np.broadcast_to(np.arange(n_c), (n_r, n_c))
    er = np.repeat(np.arange(n_r, dtype=np.int64), c)
    ec = np.asarray(top, dtype=np.int64).ravel()
    lo, hi = float(X.min()), float(X.max())
    tol = 1e-9 * (1.0 + max(abs(lo), abs(hi)))
    if n_r != n_c:
        r, cc = linear_sum_assignment(X, maximize=True)
        return r.astype(np.int64), cc.astype(np.int64), {"exact_rounds": 0,
                                                         "exact_edges": int(X.size)}
    # near-optimal duals from an auction with epsilon-scaling; G = every entry within a
    # few epsilon of tight, plus the auction's assignment (so a perfect matching exists)
    span = hi - lo
    eps_min = max(span, 1e-12) * EXACT_EPS / n_r
    price, amatch = _auction(X, max(span, 1e-12) / 4, eps_min, EXACT_FACTOR)
    gr, gc = _near_tight(X, price, 8 * n_r * eps_min, 64)
    er, ec = _unique_edges(np.concatenate([er, gr, np.arange(n_r, dtype=np.int64)]),
                           np.concatenate([ec, gc, amatch]), n_c)
    for rnd in range(1, EXACT_ROUNDS + 1):
        w = X[er, ec]
        r, m = _restricted_solve(er, ec, w, n_r, n_c)
        match = np.empty(n_r, dtype=np.int64)
        match[r] = m
        wm = X[np.arange(n_r), match]
        order = np.argsort(ec, kind="stable")
        indptr = np.searchsorted(ec[order], np.arange(n_c + 1)).astype(np.int64)
        v, ok = _column_potentials(indptr, er[order], w[order], match, wm, n_c, tol * 1e-3)
        if not ok:
            break
        u = wm - v[match]
        vr, vc, total = _violations(X, u, v, tol, 8)
        log.debug("exact assignment round %d: %d edges, %d violated", rnd, er.size, total)
        if total == 0:
            return np.arange(n_r, dtype=np.int64), match, {"exact_rounds": rnd,
                                                           "exact_edges": int(er.size)}
        er, ec = _unique_edges(np.concatenate([er, vr]), np.concatenate([ec, vc]), n_c)
    r, cc = linear_sum_assignment(X, maximize=True)
    return r.astype(np.int64), cc.astype(np.int64), {"exact_rounds": 0,
                                                     "exact_edges": int(X.size)}


def _restricted_solve(er: np.ndarray, ec: np.ndarray, w: np.ndarray, n_r: int, n_c: int
                      ) -> tuple[np.ndarray, np.ndarray]:
    # Maximum-weight perfect matching on the graph G (edges er, ec with weights w): the
    # dense shortest-augmenting-path solver on a matrix whose non-edges are infeasible.
    # Not LAPJVsp (min_weight_full_bipartite_matching): on micro-aggregated PRL weights
    # (rows in identical triplets, so whole groups of equal alternating paths) it was seen
    # to run for minutes on a 1080 x 1080 graph of 10^4 edges without returning, and it
    # cannot be interrupted. Here the work per augmentation is bounded by O(n_c) per
    # scanned row, and rows reached by ties stay few because the graph holds only the
    # near-tight entries.
    M = np.full((n_r, n_c), np.inf)
    M[er, ec] = -w
    return linear_sum_assignment(M)


def _unique_edges(er: np.ndarray, ec: np.ndarray, n_c: int) -> tuple[np.ndarray, np.ndarray]:
    key = np.unique(er * n_c + ec)
    return key // n_c, key % n_c


def _dense(W: np.ndarray, maximize: bool, unmatched: Any
           ) -> tuple[np.ndarray, np.ndarray]:
    if unmatched is None or isinstance(unmatched, str):
        if EXACT_MIN is not None and W.shape[0] == W.shape[1] and W.shape[0] >= EXACT_MIN:
            r, c, _ = exact_dense(W if maximize else -W)
            return r, c
        return linear_sum_assignment(W, maximize=maximize)
    # Gain of a pair over leaving its row unassigned; pairs with no gain are
    # equivalent to "unassigned", so clip them to 0 and drop them afterwards.
    u = np.asarray(unmatched, dtype=np.float64).reshape(-1, 1) if np.ndim(unmatched) else \
        unmatched
    gain = (W - u) if maximize else (u - W)
    r, c = linear_sum_assignment(np.maximum(gain, 0.0), maximize=True)
    keep = gain[r, c] > 0
    return r[keep], c[keep]


def _sparse(cand: Candidates, maximize: bool, unmatched: Any
            ) -> tuple[np.ndarray, np.ndarray]:
    n_r, n_c = cand.shape
    if cand.rows.size == 0:
        return np.zeros(0, np.int64), np.zeros(0, np.int64)
    w = cand.weights
    # Costs to minimise, all >= 1 (LAPJVsp needs non-zero weights).
    base = (w.max() - w) if maximize else (w - w.min())
    cost = base + 1.0
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
        u = np.broadcast_to(np.asarray(unmatched, dtype=np.float64), (n_r,))
        dummy = ((w.max() - u) if maximize else (u - w.min())) + 1.0
        dummy = np.maximum(dummy, 0.5)  # an unmatched value beyond every weight
    rows = np.concatenate([cand.rows, np.arange(n_r)])
    cols = np.concatenate([cand.cols, n_c + np.arange(n_r)])
    data = np.concatenate([cost, dummy])
    G = sp.csr_array((data, (rows, cols)), shape=(n_r, n_c + n_r))
    r, c = min_weight_full_bipartite_matching(G)
    real = c < n_c
    r, c = r[real], c[real]
    if unmatched is not None and not isinstance(unmatched, str):
        keep = cost[_edge_pos(cand, r, c)] < dummy[r]
        r, c = r[keep], c[keep]
    return r.astype(np.int64), c.astype(np.int64)


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
        if not np.all(np.isfinite(W)):
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
