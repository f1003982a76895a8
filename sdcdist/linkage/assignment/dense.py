"""Exact dense assignment: the sparse solver on a first graph, proved optimal for the whole
matrix by a dual certificate (:func:`exact_dense`), scipy for small matrices."""

from __future__ import annotations

import logging
from typing import Any

import numba
import numpy as np

from ...parallel import thread_map
from . import auction as prices
from .ties import lexmin, tight_dense
from .sparse import ARR_BIDS, arr, csr, offer, reopen_rows, solve_min, ssp

log = logging.getLogger(__name__)

__all__ = ["exact_dense", "solve_dense", "nonfinite", "EXACT_MIN", "EXACT_FIRST_C", "EXACT_ADD",
           "EXACT_ROUNDS",
           "VIOLATION_CHUNK"]

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

#: Violated entries added per row and round of :func:`exact_dense`.
EXACT_ADD = 8

#: Rounds of adding violated entries before :func:`exact_dense` hands the matrix to
#: :func:`scipy.optimize.linear_sum_assignment` (not reached in practice).
EXACT_ROUNDS = 50

#: Columns per chunk of the certificate's scan of a row: a chunk with no reduced cost
#: above the tolerance is skipped after one vectorised pass (nearly all are).
VIOLATION_CHUNK = 128


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
            got = offer(best, bcol, got, x, j)
            g = cgot[j]
            if g < cc or x > cbest[j, cc - 1]:
                cgot[j] = offer(cbest[j], crow[j], g, x, i)
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
def _violations(W, s, off, u, v, tol, per_row, check, gptr, gcols, r0, r1):
    # Dual certificate of a minimum-cost assignment of the costs s * (W - off): an entry
    # outside G (CSR gptr, gcols: each row's columns ascending) with u[r] + v[c] -
    # s * (W[r, c] - off) > tol violates it. For the rows r0 .. r1 - 1 with check[r], the
    # per_row most violated entries; and the number of violated entries.
    n_c = W.shape[1]
    out_r = np.empty((r1 - r0) * per_row, dtype=np.int64)
    out_c = np.empty((r1 - r0) * per_row, dtype=np.int64)
    best = np.empty(per_row)
    bcol = np.empty(per_row, dtype=np.int64)
    k = 0
    total = 0
    for r in range(r0, r1):
        if not check[r]:
            continue
        got = 0
        ur = u[r]
        g = gptr[r]                     # G's next column of the row at or after c
        ge = gptr[r + 1]
        for c0 in range(0, n_c, VIOLATION_CHUNK):
            c1 = min(c0 + VIOLATION_CHUNK, n_c)
            # a chunk without a value above tol holds no violation: counted first in a
            # loop that vectorises (the same values as below)
            hit = 0
            for c in range(c0, c1):
                hit += np.int64(ur + v[c] - s * (W[r, c] - off) > tol)
            if hit == 0:
                continue
            for c in range(c0, c1):
                x = ur + v[c] - s * (W[r, c] - off)
                if x > tol:
                    while g < ge and gcols[g] < c:
                        g += 1
                    if not (g < ge and gcols[g] == c):
                        total += 1
                        got = offer(best, bcol, got, x, c)
        for q in range(got):
            out_r[k] = r
            out_c[k] = bcol[q]
            k += 1
    return out_r[:k], out_c[:k], total





@numba.njit(cache=True, nogil=True)
def nonfinite(X):
    # whether X (2-D) holds a NaN or an infinity, in one pass without temporaries
    for i in range(X.shape[0]):
        for j in range(X.shape[1]):
            if not np.isfinite(X[i, j]):
                return True
    return False


@numba.njit(cache=True, nogil=True)
def minmax(X):
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


def linear_sum_assignment(*args: Any, **kwargs: Any) -> tuple[np.ndarray, np.ndarray]:
    """:func:`scipy.optimize.linear_sum_assignment`, imported on first use (scipy.optimize
    takes about a second to import, which every command would pay)."""
    from scipy.optimize import linear_sum_assignment as lsa
    return lsa(*args, **kwargs)


def exact_dense(X: np.ndarray, *, maximize: bool = True, first_c: int | None = None,
                unmatched: np.ndarray | None = None, auction: bool | None = None,
                integer: bool = False, extremes: tuple[float, float, np.ndarray] | None = None,
                on_prices: Any = None) -> tuple[np.ndarray, np.ndarray, dict[str, Any]]:
    """Optimal assignment of a dense matrix, solved on a sparse graph and proved optimal
    for the whole matrix by LP duality.

    In cost form (``C = -X`` when maximising, else ``X``):

    1. Graph G: each row's and each column's ``first_c`` best entries, and (without
       ``unmatched``) the entries ``(i, i)``, so that a full assignment exists on G.
       With ``auction`` instead: prices ``p`` from a forward auction with
       epsilon-scaling on the whole matrix (:func:`~.auction._auction_run`; a row rescans its
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
       matrix would go to :func:`scipy.optimize.linear_sum_assignment` (with ``integer``
       after a second solve from the auction's prices, if the first did not start there).

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
        columns on, or :data:`AUCTION_FEW_MIN` when ``X`` has
        :func:`~.auction.few_values`). The total is the same optimum either way; which of several tied
        optima is returned may differ.
    integer : bool
        ``X`` (and ``unmatched``) hold integers (below 2^50 in magnitude, e.g. weights
        on a fixed-point grid, :mod:`.ties`): every cost, dual and reduced cost is then
        an exact integer, the certificate tests ``> 0.5`` instead of a relative
        tolerance, and the result is the lexicographically smallest of all optimal
        assignments (:func:`~.ties.lexmin`), whatever start the solve took.
    extremes : (float, float, ndarray (n_cols,)), optional
        ``X.min()``, ``X.max()`` and each column's maximum, as the caller found them (the
        matrix is then not read for them; the column maxima serve the auction when
        maximising). The same result.
    on_prices : callable, optional
        Called (no argument) once the first graph is built (after the auction, which
        uses every core): what follows runs mostly on one thread, so a caller can start
        side work then. The same result.

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
    lo, hi = minmax(X) if extremes is None else (float(extremes[0]), float(extremes[1]))
    # every cost, dual and test is on X - lo (CATALOG PRL item 4): a common offset would
    # otherwise loosen the test (1e-11 of 1e6 is more than the spread of 1e6 + 1e-6 z) and
    # its rounding would swamp the reduced costs
    dummy = None if unmatched is None else s * (np.broadcast_to(
        np.asarray(unmatched, dtype=np.float64), (n_r,)).astype(np.float64) - lo)
    tol = 0.5 if integer else 1e-11 * (1.0 + (hi - lo))
    first_c = EXACT_FIRST_C if first_c is None else first_c
    few = None                              # prices.few_values(X), once asked
    if auction is None:
        n_max = max(n_r, n_c)
        if prices.AUCTION_MIN is not None and prices.AUCTION_FEW_MIN <= n_max < \
                prices.AUCTION_MIN:
            few = prices.few_values(X)
        auction = prices.AUCTION_MIN is not None and (n_max >= prices.AUCTION_MIN or bool(few))
    v0 = None
    info: dict[str, Any] = {}
    if auction:
        # the auction's values are -s * (X - mid), mid = (lo + hi) / 2: the same for
        # leaving a row out
        um = np.zeros(0) if dummy is None else -(dummy + s * (lo - 0.5 * (lo + hi)))
        er, ec, v0, info = prices.auction_start(
            X, s, um, prices.AUCTION_LIST, lo, hi,
            colmax=None if extremes is None or s != -1.0 else extremes[2], few=few)
        if integer:
            v0 = np.rint(v0)                # integer duals: every sum below stays exact
        if unmatched is None:
            # the entries (i, i) too: a full assignment on G even if the auction was cut
            d = np.arange(n_r, dtype=np.int64)
            er, ec = np.concatenate([er, d]), np.concatenate([ec, d])
    else:
        er, ec = _dense_candidates(X, s, max(1, int(first_c)), unmatched is None)
    if on_prices is not None:
        on_prices()
    # the certificate's scans of the whole matrix by blocks of rows, in threads on a
    # large matrix (rows are independent: the same entries, joined in row order)
    threads, blocks = prices.scan_blocks(X)

    def tmap(fn: Any, bl: list) -> list:
        return thread_map(fn, bl, threads, name="sdcdist-assign")
    # Warm start (square, no dummies): only the rows given new entries are re-solved.
    # There v only decreases, so a row verified at u_checked stays verified while
    # u <= u_checked: only rows whose u rose are scanned again.
    warm = unmatched is None and n_r == n_c
    state = None
    u_checked = np.full(n_r, -np.inf)
    dz = np.zeros(0) if dummy is None else dummy
    ecost = s * (X[er, ec] - lo)          # the costs of the edges er, ec (then G's, in order)
    for rnd in range(1, EXACT_ROUNDS + 1):
        indptr, cols, order = csr(er, ec, n_r, n_c)
        er, ec = er[order], cols
        cost = ecost[order]
        if state is None and warm and v0 is not None:
            # the auction's prices as column duals; every row free, its u the smallest
            # reduced cost on G (feasible on G), then row reduction and shortest paths
            u, v = np.zeros(n_r), v0
            row4col, col4row = np.full(n_c, -1, np.int64), np.full(n_r, -1, np.int64)
            every = np.arange(n_r, dtype=np.int64)
            reopen_rows(indptr, cols, cost, every, u, v, row4col, col4row)
            if ARR_BIDS:
                arr(indptr, cols, cost, n_c, dz, u, v, row4col, col4row, every,
                     ARR_BIDS * n_r)
            failed = ssp(indptr, cols, cost, n_c, dz, u, v, row4col, col4row, every)
            check = np.ones(n_r, dtype=np.bool_)
        elif state is None:
            col4row, u, v, failed = solve_min(indptr, cols, cost, n_c, dummy)
            check = np.ones(n_r, dtype=np.bool_)
        else:
            u, v, row4col, col4row, reopen = state
            reopen_rows(indptr, cols, cost, reopen, u, v, row4col, col4row)
            if ARR_BIDS:
                arr(indptr, cols, cost, n_c, dz, u, v, row4col, col4row, reopen,
                     ARR_BIDS * reopen.size)
            # all rows: the row reduction may have displaced rows outside ``reopen``
            failed = ssp(indptr, cols, cost, n_c, dz, u, v, row4col, col4row,
                          np.arange(n_r, dtype=np.int64))
            check = u > u_checked
        if failed:
            break                           # cannot happen: G holds a full assignment
        found = tmap(lambda r0, r1: _violations(X, s, lo, u, v[:n_c], tol, EXACT_ADD, check,
                                                indptr, cols, r0, r1), blocks)
        vr = np.concatenate([f[0] for f in found])
        vc = np.concatenate([f[1] for f in found])
        total = sum(int(f[2]) for f in found)
        log.debug("exact assignment round %d: %d edges, %d rows checked, %d violated",
                  rnd, er.size, int(check.sum()), total)
        if total == 0:
            # (u, v) is feasible for every entry: proved optimal
            if integer:
                # every optimal assignment is a matching on the exactly tight entries:
                # the lexicographically smallest of them
                ip, ic = tight_dense(X, s, lo, u, v, dz, blocks, tmap)
                col4row = col4row.copy()
                info = {**info, "ties_moved": int(lexmin(ip, ic, v, col4row))}
            rows = np.flatnonzero((col4row >= 0) & (col4row < n_c))
            return rows.astype(np.int64), col4row[rows], {"exact_rounds": rnd,
                                                          "exact_edges": int(er.size),
                                                          **info}
        if warm:
            u_checked = np.where(check, u, u_checked)
            reopen = np.unique(vr)
            u_checked[reopen] = -np.inf
            row4col = np.full(n_c, -1, np.int64)
            m = col4row >= 0
            row4col[col4row[m]] = np.flatnonzero(m)
            state = (u, v, row4col, col4row, reopen)
        er, ec = np.concatenate([er, vr]), np.concatenate([ec, vc])
        ecost = np.concatenate([cost, s * (X[vr, vc] - lo)])   # only the new ones read
    if integer and not auction:
        # the lexicographically smallest optimum needs the proof: from the auction's
        # prices it takes a few rounds (equal rows and columns in large groups can keep
        # the sparse start's rounds adding a few entries each)
        log.debug("exact assignment: no proof after %d rounds; again from auction prices",
                  EXACT_ROUNDS)
        return exact_dense(X, maximize=maximize, first_c=first_c, unmatched=unmatched,
                           auction=True, integer=True, extremes=extremes)
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


def solve_dense(W: np.ndarray, maximize: bool, unmatched: Any, integer: bool = False,
                extremes: Any = None, on_prices: Any = None) -> tuple[np.ndarray, np.ndarray]:
    """The dense optimum; with ``integer`` (weights on the fixed-point grid) always by
    :func:`exact_dense`, the lexicographically smallest optimal assignment (of the
    columns, in their order, when there are more rows than columns). ``extremes``,
    ``on_prices``: as :func:`exact_dense`'s (``extremes`` of ``W``)."""
    exact = integer or (EXACT_MIN is not None and max(W.shape) >= EXACT_MIN)
    if unmatched is None or isinstance(unmatched, str):
        if not exact:
            return linear_sum_assignment(W, maximize=maximize)
        if W.shape[0] > W.shape[1]:
            c, r, _ = exact_dense(W.T, maximize=maximize, integer=integer, on_prices=on_prices)
            o = np.argsort(r, kind="stable")
            return r[o], c[o]
        r, c, _ = exact_dense(W, maximize=maximize, integer=integer, extremes=extremes,
                              on_prices=on_prices)
        return r, c
    u = np.broadcast_to(np.asarray(unmatched, dtype=np.float64), (W.shape[0],))
    if exact:
        r, c, _ = exact_dense(W, maximize=maximize, unmatched=u, integer=integer,
                              on_prices=on_prices)
        keep = (W[r, c] > u[r]) if maximize else (W[r, c] < u[r])
        return r[keep], c[keep]
    # Gain of a pair over leaving its row unassigned; pairs with no gain are
    # equivalent to "unassigned", so clip them to 0 and drop them afterwards.
    gain = (W - u[:, None]) if maximize else (u[:, None] - W)
    r, c = linear_sum_assignment(np.maximum(gain, 0.0), maximize=True)
    keep = gain[r, c] > 0
    return r[keep], c[keep]


