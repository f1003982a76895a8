"""Auction prices for the exact dense assignment (epsilon-scaling on the whole matrix)."""

from __future__ import annotations

import os

import numba
import numpy as np

from ...parallel import chunk_bounds, thread_pool
from .sparse import offer

__all__ = ["auction_start", "epsilons", "few_values", "scan_blocks", "AUCTION_MIN",
           "AUCTION_FEW_MIN", "AUCTION_LIST",
           "AUCTION_RATIO", "AUCTION_FIRST", "AUCTION_EPS", "AUCTION_FEW_VALUES",
           "AUCTION_EPS_FEW", "AUCTION_SAMPLE_ROWS", "AUCTION_MAX_SCANS", "AUCTION_BATCH"]

#: Smallest ``max(n_rows, n_cols)`` from which :func:`exact_dense` starts from the
#: prices of a dense auction (:func:`_auction_run`) instead of each row's and
#: column's best raw entries (``None``: never). At Census sizes (about 1,000 records)
#: both starts take 10-30 ms; from 1,500 on the auction start is 1.5-10 times faster
#: on PRL weights (benchmarks/assignment.py).
AUCTION_MIN: int | None = 1500

#: Smallest ``max(n_rows, n_cols)`` from which a matrix of few distinct values
#: (:func:`few_values`) starts from the auction too: there the first graphs of the
#: sparse start miss most of the optimum's ties (1,400 records of 2 values: 45 rounds
#: of adding entries, 5 s; from the auction's prices 2 rounds, 0.5 s).
AUCTION_FEW_MIN = 200

#: Columns each row keeps between full scans of its row in the auction (its best values
#: at the last scan); they also form the first graph of the exact solve.
AUCTION_LIST = 32

#: epsilon-scaling of the auction: first epsilon ``range / (AUCTION_RATIO *
#: AUCTION_FIRST)``, divided by AUCTION_RATIO per phase down to ``range * AUCTION_EPS``
#: (range: largest minus smallest weight). The auction only finds prices; exactness
#: comes from the shortest augmenting paths and the dual certificate that follow. Two
#: phases (range / 2048, then range * 1e-4): on PRL weights of 2,000-4,092 records the
#: auction scans rows 30-55 % fewer times than with three (benchmarks/assignment.py);
#: the assignment returned is the same (the lexicographically smallest optimum).
AUCTION_RATIO = 32.0
AUCTION_FIRST = 64.0
AUCTION_EPS = 1e-4

#: A matrix with few distinct values (at most AUCTION_FEW_VALUES among
#: AUCTION_SAMPLE_ROWS rows spread over it: e.g. PRL weights on categorical keys, one value
#: per agreement pattern) is auctioned in one phase at epsilon ``range *
#: AUCTION_EPS_FEW``. Its rows and columns come in large groups of equal ones, and a finer
#: epsilon only prolongs the price wars among them (each bid raises a price by epsilon):
#: on the household file's PRL weights (3,658-4,580 records, 8-16 values) the assignment
#: takes 1.2-4.9 times less time than with the two phases above, the same assignment.
AUCTION_FEW_VALUES = 64
AUCTION_EPS_FEW = 1e-2
AUCTION_SAMPLE_ROWS = 16

#: Full row scans per row (all phases together) after which the auction stops where it
#: is and the exact solve takes over from its prices (a safeguard: PRL weights need 3-7;
#: tie-heavy integer matrices with thousands of equal rows and columns about 120, and
#: cut shorter, their certificate rounds would not converge).
AUCTION_MAX_SCANS = 200

#: Threads that share the rows of the dense assignment's scans of the whole matrix (the
#: auction's first scans at the starting prices and its batches of rescans,
#: :func:`_scan_rows`, and the certificate's scans in :func:`~.dense.exact_dense`) from
#: :data:`SCAN_THREADS_MIN` entries on; the auction and the assignment returned are the
#: same for any number.
SCAN_THREADS = max(1, min(2, os.cpu_count() or 1))
SCAN_THREADS_MIN = 1 << 20

#: Fewest rows a thread of a batch of the auction's scans (:data:`AUCTION_BATCH`) for
#: which the batch is shared out to the threads; smaller batches are scanned in the
#: auction's own loop. The auction is the same either way. On the PRL weights of EIA a
#: hand-off to the threads costs about as much as scanning 16 rows.
SCAN_PAIR_MIN = 16


def scan_blocks(X: np.ndarray) -> tuple[int, list[tuple[int, int]]]:
    """The threads for the row scans of ``X`` (:data:`SCAN_THREADS`) and its rows in as
    many blocks."""
    n = X.shape[0]
    threads = SCAN_THREADS if X.size >= SCAN_THREADS_MIN else 1
    return threads, (chunk_bounds(n, -(-n // threads)) if n else [])


@numba.njit(cache=True, nogil=True)
def _auction_scan(W, s, mid, i, p, lc, lw, mark):
    # Row i's values -s * (W[i, j] - mid) - p[j]: the lc.shape[1] largest into lc[i] with
    # their weights -s * (W[i, j] - mid) into lw[i]; returns the largest value left out
    # (-inf if none), an upper bound on every column outside the list for as long as
    # prices only rise. The previous list (at current prices) seeds the selection, so
    # that few entries pass the threshold; among equal values the earlier offer stays.
    # mark (n_cols, all False): scratch, the previous list's columns marked while the row
    # is scanned (so that they are not offered twice), False again on return.
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
        got = offer(best, bcol, got, lw[i, q] - p[j], j)
        mark[j] = True
    # the threshold held in a register: best[k] once the list is full (x > thr or a list
    # not yet full is the same test as before, offer for offer)
    thr = best[k] if got > k else -np.inf
    for j in range(n_c):
        x = -s * (W[i, j] - mid) - p[j]
        if x > thr or got <= k:
            if not mark[j]:
                got = offer(best, bcol, got, x, j)
                if got > k:
                    thr = best[k]
    for q in range(n_old):
        mark[lc[i, q]] = False
    for q in range(k):
        if q < got:
            j = bcol[q]
            lc[i, q] = j
            lw[i, q] = -s * (W[i, j] - mid)
        else:
            lc[i, q] = -1
    return best[k] if got > k else -np.inf


#: Rows whose full scans the auction gathers before they run together (in threads,
#: :func:`auction_start`): a row whose list no longer holds its best column waits for
#: its scan while the rows behind it in the queue bid on; the batch is scanned once it
#: is full or no row is left to bid, at the prices of that moment, and its rows bid
#: next. Fixed, so the auction is the same for any number of threads; ``None``: no
#: limit (the batch is scanned when no row is left to bid). Without a limit the rows
#: that wait longer are scanned at later prices, so fewer of them are scanned again: on
#: the PRL weights of EIA (4,092 records) 55 batches of a median 102 rows, 16,132 scans
#: and 133,220 bids instead of 161 batches (128 rows in the first phase, a few later),
#: 17,695 scans and 143,329 bids, and the exact assignment 10-15 % faster (the same
#: assignment: the lexicographically smallest optimum, whatever the prices).
AUCTION_BATCH: int | None = None

# the auction's state between calls of _auction_run: positions in its ``state`` (int64)
_PHASE, _HEAD, _SIZE, _BIDS, _SCANS, _PEND, _STARTED = range(7)


@numba.njit(cache=True, nogil=True)
def _auction_run(W, s, mid, p, eps_list, um, max_scans, lc, lw, bound, state, pd, owner,
                 col, queue, pend, hand_off):
    """Forward auction (Gauss-Seidel, epsilon-scaling) on the values ``-s * (W - mid)``,
    run until ``pend`` holds at least ``hand_off`` rows waiting for their full scans
    (returns True) or the auction has ended (False).

    Each row bids for the column of its largest value ``-s * W[i, j] - p[j]``, raising
    its price by the margin over the second largest plus epsilon; the row it displaces
    bids next (first in, first out). Between full scans a row looks only at its list of
    ``k`` columns (its best at the last scan) and the bound on all others (prices only
    rise, so the bound stays valid; a bid with the bound as second value is a valid,
    smaller bid). A row whose list's best falls below its bound is set aside in
    ``pend`` (the rows behind it bid on); once ``pend`` is full, or no row is left to
    bid, the call returns and the caller scans those rows (:func:`_scan_rows`) and puts
    them back at the head of the queue (:func:`_requeue`). ``um`` (``n_r`` values, or
    empty): a private option per row of value ``um[i]`` minus its own price ``pd[i]``
    (leaving the row unassigned). Prices ``p`` (n_cols,) are updated in place and kept
    across phases.

    ``lc``, ``lw`` (n_rows, k), ``bound`` (n_rows,): the rows' lists, their weights and
    bounds, filled in place: empty (-1, +inf) or from first scans at the prices ``p``.
    ``state`` (int64, 7): phase, queue head and size, bids, scans, rows in ``pend``,
    whether the phase has started; ``owner`` (n_cols,), ``col``, ``queue`` (n_rows,):
    the phase's assignment both ways and its queue of rows without a column.

    After ``max_scans`` full scans it stops where it is (the result only seeds the exact
    solve).
    """
    n_r = W.shape[0]
    nd = um.size > 0
    k = lc.shape[1]
    cap = pend.size
    while state[_PHASE] < eps_list.size:
        eps = eps_list[state[_PHASE]]
        if state[_STARTED] == 0:
            if state[_SCANS] >= max_scans:
                break
            owner[:] = -1
            col[:] = -1
            for i in range(n_r):
                queue[i] = i
            state[_HEAD] = 0
            state[_SIZE] = n_r
            state[_STARTED] = 1
        head = state[_HEAD]
        size = state[_SIZE]
        npend = state[_PEND]
        bids = state[_BIDS]
        while size > 0 and state[_SCANS] + npend < max_scans:
            i = queue[head]
            head = (head + 1) % n_r
            size -= 1
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
            if v1 < bound[i]:
                pend[npend] = i                 # its list is spent: scan it first
                npend += 1
                if npend == cap:
                    break
                continue
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
        state[_HEAD] = head
        state[_SIZE] = size
        state[_PEND] = npend
        state[_BIDS] = bids
        if npend > 0 and state[_SCANS] < max_scans:
            if npend >= hand_off:
                return True
            run = min(npend, max_scans - state[_SCANS])
            _scan_rows(W, s, mid, p, lc, lw, bound, pend, 0, run)   # a few rows: here
            _requeue(state, queue, pend, run)
            continue
        if size > 0 or npend > 0:           # out of scans: stop where it is
            break
        state[_PHASE] += 1
        state[_STARTED] = 0
    state[_PEND] = 0
    return False


@numba.njit(cache=True, nogil=True)
def _requeue(state, queue, pend, scanned):
    # the first ``scanned`` rows of pend (just scanned) back at the head of the queue, in
    # their order; the rest (none unless the scans ran out) stay pending
    n_r = queue.size
    npend = state[_PEND]
    head = (state[_HEAD] - scanned) % n_r
    for t in range(scanned):
        queue[(head + t) % n_r] = pend[t]
    state[_HEAD] = head
    state[_SIZE] += scanned
    state[_SCANS] += scanned
    for t in range(scanned, npend):
        pend[t - scanned] = pend[t]
    state[_PEND] = npend - scanned


@numba.njit(cache=True, nogil=True)
def _scan_rows(W, s, mid, p, lc, lw, bound, rows, r0, r1):
    # the full scans of rows[r0 .. r1 - 1] at the prices p (read only): their lists into
    # lc, lw and their bounds (rows apart: blocks of rows may run in threads)
    mark = np.zeros(W.shape[1], dtype=np.bool_)
    for t in range(r0, r1):
        i = rows[t]
        bound[i] = _auction_scan(W, s, mid, i, p, lc, lw, mark)


def auction_start(X: np.ndarray, s: float, um: np.ndarray, n_lst: int, lo: float,
                   hi: float, colmax: np.ndarray | None = None, few: bool | None = None
                   ) -> tuple[np.ndarray, np.ndarray, np.ndarray, dict[str, int]]:
    """Prices (cost-form column duals ``v = -p``) and a first graph (each row's list and
    its auction partner) from the auction (:func:`_auction_run`), the rows' full scans
    shared out to :data:`SCAN_THREADS` threads in batches; ``lo``, ``hi``: the extremes of X;
    ``colmax`` (with ``s = -1``): each column's maximum of X, when the caller has it;
    ``few``: :func:`few_values` of X, when the caller has it."""
    span = hi - lo
    # start each column's price at its largest value: a column every row ranks high
    # (W[i, j] = a[i] + b[j] in the extreme) then costs no bidding war. With s = -1 the
    # values are X - mid, and rounding is monotone: max(X - mid) = max(X) - mid exactly
    mid = 0.5 * (lo + hi)
    if colmax is not None and s == -1.0:
        p = np.asarray(colmax, dtype=np.float64) - mid
    else:
        p = _colmax(X, s, mid)
    eps = epsilons(X, span, few)
    k = int(min(max(n_lst, 2), X.shape[1]))
    n_r, n_c = X.shape
    lc = np.full((n_r, k), -1, dtype=np.int64)
    lw = np.zeros((n_r, k))                 # the lists' weights, so that bids stay off X
    bound = np.full(n_r, np.inf)
    threads, blocks = scan_blocks(X)
    every = np.arange(n_r, dtype=np.int64)
    state = np.zeros(7, dtype=np.int64)
    pd = np.zeros(n_r)
    owner = np.full(n_c, -1, dtype=np.int64)
    col = np.full(n_r, -1, dtype=np.int64)
    queue = np.empty(n_r, dtype=np.int64)
    batch = n_r if AUCTION_BATCH is None else min(AUCTION_BATCH, n_r)
    pend = np.empty(batch, dtype=np.int64)
    eps_a = np.asarray(eps, dtype=np.float64)
    max_scans = AUCTION_MAX_SCANS * n_r
    with thread_pool(threads, name="sdcdist-auction") as pmap:
        if max_scans > 0:
            # every row's first scan at the starting prices, the rows shared out to threads
            pmap(lambda r0, r1: _scan_rows(X, s, mid, p, lc, lw, bound, every, r0, r1),
                 blocks)
            state[_SCANS] = n_r
        # a batch of threads * SCAN_PAIR_MIN rows or more is shared out to the threads;
        # a smaller one is scanned inside the auction's loop (a hand-off costs more)
        hand_off = threads * SCAN_PAIR_MIN if threads > 1 else pend.size + 1
        while _auction_run(X, s, mid, p, eps_a, um, max_scans, lc, lw, bound, state, pd,
                           owner, col, queue, pend, hand_off):
            run = min(int(state[_PEND]), max_scans - int(state[_SCANS]))
            pmap(lambda r0, r1: _scan_rows(X, s, mid, p, lc, lw, bound, pend, r0, r1),
                 chunk_bounds(run, -(-run // threads)))
            _requeue(state, queue, pend, run)
    bids, scans = int(state[_BIDS]), int(state[_SCANS])
    rows = np.broadcast_to(np.arange(X.shape[0])[:, None], lc.shape)
    ok = lc >= 0
    m = col >= 0
    er = np.concatenate([rows[ok], np.flatnonzero(m)]).astype(np.int64)
    ec = np.concatenate([lc[ok], col[m]]).astype(np.int64)
    return er, ec, -p, {"auction_bids": int(bids), "auction_scans": int(scans),
                        "auction_phases": len(eps)}


def few_values(X: np.ndarray) -> bool:
    """Whether :data:`AUCTION_SAMPLE_ROWS` rows spread over ``X`` hold at most
    :data:`AUCTION_FEW_VALUES` distinct values (only the time depends on the sample)."""
    step = max(1, X.shape[0] // AUCTION_SAMPLE_ROWS)
    return bool(np.unique(X[::step][:AUCTION_SAMPLE_ROWS]).size <= AUCTION_FEW_VALUES)


def epsilons(X: np.ndarray, span: float, few: bool | None = None) -> list[float]:
    """The auction's epsilon per phase for the matrix ``X`` whose values span ``span``:
    from ``span / (AUCTION_RATIO * AUCTION_FIRST)`` down to ``span * AUCTION_EPS``, or one
    phase at ``span * AUCTION_EPS_FEW`` when ``X`` has :func:`few_values` (``few``: their
    answer, when the caller has it)."""
    if not span > 0:
        return [1.0]
    if few_values(X) if few is None else few:
        return [span * AUCTION_EPS_FEW]
    eps, e = [], span / (AUCTION_RATIO * AUCTION_FIRST)
    while e > span * AUCTION_EPS:
        eps.append(e)
        e /= AUCTION_RATIO
    eps.append(span * AUCTION_EPS)
    return eps


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
