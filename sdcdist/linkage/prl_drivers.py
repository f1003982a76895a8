"""Dask drivers for probabilistic record linkage: which kernel runs on which block.

Pass 1 (all pairs, or the pairs of a blocking rule): each block of A rows x B
rows returns the ``bincount`` of its comparison patterns; a fixed tree
reduction adds them (integers, so the total never depends on the tiling).
EM runs on the client on that small table. Pass 2: each block returns, for
its B rows, their top-c A rows by weight; partials merge over A blocks
exactly (ties broken by A row); the finish step adds the weight of each B
record's true record. Then a 1-1 assignment maximises the total weight:
dense and exact up to ``dense_limit`` records, sparse on the candidate graph
above (:mod:`sdcdist.linkage.assignment`).
"""

from __future__ import annotations

import logging
import time
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from ..errors import SdcInputError, param_error
from ..parallel import Runner, chunk_bounds, pairwise_reduce, tree_reduce
from . import prl
from .assignment import (DEFAULT_DENSE_LIMIT, Candidates, assign_by_content, content_order,
                         identical_classes)
from .prl_count_drivers import choose_counting, counted_pattern_counts, counted_topc
from .truth import row_truth

__all__ = ["PRLResult", "probabilistic_linkage", "blocked_pattern_counts", "DEFAULT_PRL_ROWS"]

log = logging.getLogger(__name__)

#: Rows of A and of B per block (the kernels hold no pair matrix, so blocks
#: are sized for scheduling, not memory).
DEFAULT_PRL_ROWS = 8192


@dataclass
class PRLResult:
    """Outcome of a probabilistic linkage of B (masked) to A (original).

    ``rows_b``, ``cols_a``, ``weights``, ``prob``: the assigned pairs (sorted by
    B row) with their weights and match probabilities; ``counts``: pattern
    counts; ``fit``: the EM result; ``correct`` / ``correct20`` / ``n_b``:
    PLD counts (when the truth is known; expected counts over the permutations of
    records identical on the keys, CATALOG PRL item 5); ``info``: assignment method, flag,
    pairs compared, timings, EM iterations and log-likelihood; ``true_weight``
    (n_b,): weight of each B record's true pair (NaN when absent).
    """

    rows_b: np.ndarray
    cols_a: np.ndarray
    weights: np.ndarray
    prob: np.ndarray
    counts: np.ndarray
    fit: prl.EMResult
    correct: float
    correct20: float
    n_b: int
    flag: int
    info: dict[str, Any] = field(default_factory=dict)
    true_weight: np.ndarray | None = None


def _slice(side: dict, s: int, e: int) -> dict:
    return {k: v[s:e] for k, v in side.items()}


def _window(a: dict, b: dict, key: int, width: int) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """The A rows each B row meets, as a range ``order[lo:hi]`` of A sorted on the key.

    ``width >= 1``: sorted neighbourhood, the ``2 width`` A rows nearest in sort
    order. ``width == 0``: exact blocks, the A rows whose key equals the B row's
    (a categorical key's code); a B row whose key is missing (NaN, e.g. suppressed)
    meets none.
    """
    order = np.argsort(a["v"][:, key], kind="stable").astype(np.int64)
    sorted_a, bk = a["v"][order, key], b["v"][:, key]
    if width == 0:
        lo = np.searchsorted(sorted_a, bk, side="left").astype(np.int64)
        hi = np.searchsorted(sorted_a, bk, side="right").astype(np.int64)
        hi[np.isnan(bk)] = lo[np.isnan(bk)]
        return lo, hi, order
    pos = np.searchsorted(sorted_a, bk)
    lo = np.clip(pos - width, 0, order.size).astype(np.int64)
    hi = np.clip(pos + width, 0, order.size).astype(np.int64)
    return lo, hi, order


# ---- tasks ------------------------------------------------------------------

def _prepare(X: Any, cols: tuple[int, ...], cmp: prl.Comparison, side: str) -> dict:
    return prl.prepare_side(X, cols, cmp, side=side)


def _count_block(a0: int, a1: int, b0: int, b1: int, A: dict, B: dict,
                 cmp: prl.Comparison) -> dict:
    codes, counts = prl.pattern_counts(_slice(A, a0, a1), _slice(B, b0, b1), cmp)
    return {"codes": codes, "counts": counts, "pairs": np.int64((a1 - a0) * (b1 - b0))}


def _count_window(b0: int, b1: int, A: dict, B: dict, cmp: prl.Comparison,
                  blocking: tuple[int, int]) -> dict:
    b = _slice(B, b0, b1)
    lo, hi, order = _window(A, b, *blocking)
    codes, counts = prl.pattern_counts(A, b, cmp, lo=lo, hi=hi, aidx=order)
    return {"codes": codes, "counts": counts, "pairs": np.int64((hi - lo).sum())}


def _merge_counts(*parts: dict) -> dict:
    codes, counts = prl.merge_counts(*[(p["codes"], p["counts"]) for p in parts])
    return {"codes": codes, "counts": counts, "pairs": sum(p["pairs"] for p in parts)}


def _topc_block(b0: int, b1: int, a0: int, a1: int, B: dict, A: dict, cmp: prl.Comparison,
                wp: prl.WeightParams, c: int, truth: np.ndarray) -> dict:
    return prl.topc_block(_slice(A, a0, a1), _slice(B, b0, b1), cmp, wp, c, a0=a0)


def _topc_window(b0: int, b1: int, B: dict, A: dict, cmp: prl.Comparison,
                 wp: prl.WeightParams, c: int, blocking: tuple[int, int]) -> dict:
    b = _slice(B, b0, b1)
    lo, hi, order = _window(A, b, *blocking)
    return prl.topc_block(A, b, cmp, wp, c, lo=lo, hi=hi, aidx=order,
                          aglob=np.arange(A["v"].shape[0], dtype=np.int64))


def _topc_finish(b0: int, b1: int, top: dict, B: dict, A: dict, cmp: prl.Comparison,
                 wp: prl.WeightParams, c: int, truth: np.ndarray) -> dict:
    t = np.asarray(truth[b0:b1], dtype=np.int64)
    known = np.flatnonzero(t >= 0)
    wtrue = np.full(b1 - b0, np.nan)
    wtrue[known] = prl.pair_weights(A, _slice(B, b0, b1), t[known], known, cmp, wp)
    return {**top, "wtrue": wtrue}


def _concat(*parts: dict) -> dict:
    return {k: np.concatenate([p[k] for p in parts]) for k in parts[0]}


def _content_order(side: dict) -> np.ndarray:
    return content_order(side["v"])


def _classes(side: dict) -> np.ndarray:
    return identical_classes(side["v"])


def _take(side: dict, order: np.ndarray) -> dict:
    return {k: (v[order] if isinstance(v, np.ndarray) and v.ndim >= 1
                and v.shape[0] == order.size else v) for k, v in side.items()}


def _dense_assign(A: dict, B: dict, cmp: prl.Comparison, wp: prl.WeightParams,
                  dense_limit: int, truth: np.ndarray) -> dict:
    W = prl.dense_weights(A, B, cmp, wp)
    # ties between optimal assignments broken by the records' values, not their order
    # (A is already in content order: probabilistic_linkage put it there)
    r, c, info = assign_by_content(W, content_order(B["v"]), None,
                                   maximize=True, dense_limit=dense_limit)
    t = np.asarray(truth, dtype=np.int64)
    wtrue = np.where(t >= 0, W[np.arange(t.size), np.maximum(t, 0)], np.nan)
    return {"rows": r, "cols": c, "w": W[r, c], "info": info, "wtrue": wtrue}


# ---- drivers ------------------------------------------------------------------

def blocked_pattern_counts(runner: Runner, A: Any, B: Any, n_a: int, n_b: int,
                           cmp: prl.Comparison, *, rows: tuple[int, int],
                           blocking: tuple[int, int] | None = None
                           ) -> tuple[tuple[np.ndarray, np.ndarray], int]:
    """Pass 1: pattern counts over all pairs (or a blocking rule's pairs).

    ``A``, ``B`` are handles of :func:`prl.prepare_side` dicts. Returns the
    sparse counts ``(codes, counts)`` (:func:`prl.sparse_counts`: int64, the
    occurring patterns in increasing code order) and the number of pairs compared.
    """
    if blocking is None:
        parts = [runner.task(_count_block, a0, a1, b0, b1, A, B, cmp)
                 for a0, a1 in chunk_bounds(n_a, rows[0])
                 for b0, b1 in chunk_bounds(n_b, rows[1])]
    else:
        parts = [runner.task(_count_window, b0, b1, A, B, cmp, blocking)
                 for b0, b1 in chunk_bounds(n_b, rows[1])]
    out = runner.result(tree_reduce(runner, _merge_counts, parts))
    return (np.asarray(out["codes"], dtype=np.int64),
            np.asarray(out["counts"], dtype=np.int64)), int(out["pairs"])


def probabilistic_linkage(runner: Runner, A: Any, B: Any, n_a: int, n_b: int,
                          cols_a: tuple[int, ...], cols_b: tuple[int, ...] | None = None, *,
                          method: str = prl.DEFAULT_METHOD, t: Any = prl.DEFAULT_T,
                          categorical: Any = None, weights: str = prl.DEFAULT_WEIGHTS,
                          truth: Any = None, top_c: int = 20,
                          dense_limit: int = DEFAULT_DENSE_LIMIT,
                          block_rows: tuple[int, int] | None = None,
                          blocking: tuple[int, int] | None = None,
                          em_options: dict | None = None,
                          unmatched: Any = "row_floor",
                          counting: str = "auto") -> PRLResult:
    """Link every B record to at most one A record by Fellegi-Sunter weights.

    Parameters
    ----------
    runner : Runner
    A, B : array handles, shapes (n_a, m_a), (n_b, m_b)
        Original (or external) file and masked file.
    cols_a, cols_b : tuple of int
        Key column positions in A and in B (``cols_b`` defaults to ``cols_a``).
    method, t, categorical, weights
        Comparison (see :func:`prl.comparison`); ``t`` may give several
        increasing tolerances (multi-level comparison), whose weights are read
        linearly within a level or per level (``weights``).
    truth : int array handle (n_b,), optional
        Row in A of each B record's true record (-1 absent); row order by default.
    top_c : int
        Candidates kept per B record for the sparse assignment.
    dense_limit : int
        Largest ``max(n_a, n_b)`` linked with the dense exact assignment.
    block_rows : (int, int), optional
        Rows of A and of B per block (default :data:`DEFAULT_PRL_ROWS`).
    blocking : (int, int), optional
        (position of the key in ``cols_a``, half window): sorted-neighbourhood
        blocking, or with half window 0 exact blocks (pairs whose key values are
        equal, e.g. the same category; a B record whose key is missing meets no
        A record and stays unlinked). Only those pairs are compared, the EM is
        fitted on their patterns, and the result is flagged.
    em_options : dict, optional
        Passed to :func:`prl.em` (``max_iter``, ``tol``, ``eps``, ``m_start``,
        ``p_max``: a value >= 1 turns the P(M) cap off). A fit that reaches
        ``max_iter`` sets the flag (``info["em_converged"]`` False).
    unmatched : "row_floor" or None
        Sparse assignment only (see :func:`~sdcdist.linkage.assignment.assign`):
        "row_floor" lets a B record stay unassigned at a value just below its
        worst candidate (fast); ``None`` assigns as many B records as the
        candidate graph allows first (exact analogue of the dense assignment,
        but much slower on large files).
    counting : {"auto", "pairs", "count"}
        How the pattern counts are obtained: by comparing all pairs, or exactly
        without enumerating them (:mod:`sdcdist.linkage.prl_count_drivers`;
        the counts are identical); ``auto`` counts on large files.

    Returns
    -------
    PRLResult
    """
    cols_b = tuple(cols_a) if cols_b is None else tuple(cols_b)
    if len(cols_a) == 0 or len(cols_b) == 0:
        raise SdcInputError("probabilistic record linkage needs at least one key column; "
                            "got none. Give key columns (e.g. --keys V1,V2)")
    if len(cols_a) != len(cols_b):
        raise SdcInputError(f"{len(cols_a)} key columns in A but {len(cols_b)} in B")
    for n, what in ((n_a, "original (A)"), (n_b, "masked (B)")):
        if n < 2:
            raise SdcInputError(f"the {what} file has {n} record(s); linkage needs at least 2 "
                                "records in each file to estimate the model")
    if int(top_c) < 1:
        raise param_error("top_c", "prl", "an integer >= 1", top_c)
    cmp = prl.comparison(len(cols_a), method=method, t=t, categorical=categorical,
                         weights=weights)
    if blocking is not None:
        key, width = int(blocking[0]), int(blocking[1])
        if not (0 <= key < len(cols_a)) or width < 0:
            raise param_error("blocking", "prl", f"(key position in 0..{len(cols_a) - 1}, "
                              "half window >= 1, or 0 for exact blocks)", blocking)
        blocking = (key, width)
    rows = tuple(block_rows) if block_rows else (DEFAULT_PRL_ROWS, DEFAULT_PRL_ROWS)
    if truth is None:
        truth = runner.share(row_truth(n_b, n_a))
    elif isinstance(truth, np.ndarray):
        if truth.shape != (n_b,):
            raise SdcInputError(f"the truth must give one row per masked record: shape "
                                f"({n_b},); got {truth.shape}")
        truth = runner.share(np.asarray(truth, dtype=np.int64))
    timings: dict[str, float] = {}

    t0 = time.perf_counter()
    Ap = runner.task(_prepare, A, tuple(cols_a), cmp, "a")
    Bp = runner.task(_prepare, B, tuple(cols_b), cmp, "b")
    # A in the order of its values: where candidates or assignments tie, the pick never
    # depends on how the files are sorted (files kept in the same order would otherwise
    # pair B row i with A row i on every tie)
    order_a = np.asarray(runner.call(_content_order, Ap), dtype=np.int64)
    Ap = runner.task(_take, Ap, order_a)
    inv_a = np.empty_like(order_a)
    inv_a[order_a] = np.arange(order_a.size)
    tr0 = np.asarray(runner.result(truth), dtype=np.int64)
    truth = runner.share(np.where(tr0 >= 0, inv_a[np.maximum(tr0, 0)], tr0))
    # -- pattern counts: all pairs, or the counting path (identical counts; prl_count_drivers)
    path, Bix, cinfo = choose_counting(runner, Ap, Bp, n_a, n_b, cmp, mode=counting,
                                       blocking=blocking)
    if path == "count":
        dense, n_pairs, cinfo["pairs_enumerated"] = counted_pattern_counts(
            runner, Ap, Bix, n_a, n_b, cmp, rows=rows[0])
        nz = np.flatnonzero(dense)
        counts = (nz.astype(np.int64), dense[nz])   # the sparse form of prl.sparse_counts
    else:
        counts, n_pairs = blocked_pattern_counts(runner, Ap, Bp, n_a, n_b, cmp, rows=rows,
                                                 blocking=blocking)
    timings["patterns"] = time.perf_counter() - t0
    if n_pairs == 0:
        raise SdcInputError("the blocking leaves no pair of records to compare: no value of "
                            f"the blocking key (key {blocking[0] + 1} of the key set) is "
                            "shared by the two files within the window; block on another "
                            "key, widen the window, or leave blocking out" if blocking else
                            "there is no pair of records to compare")

    t0 = time.perf_counter()
    p_start = min(n_a, n_b) / float(n_pairs)
    fit = prl.em(counts, cmp, p_start=p_start, **{"p_max": p_start, **(em_options or {})})
    if not fit.converged:
        log.warning("PRL: EM did not converge within %d iterations (the result is flagged)",
                    fit.iterations)
    wp = prl.weight_params(fit, cmp)
    timings["em"] = time.perf_counter() - t0

    tr = np.asarray(runner.result(truth), dtype=np.int64)
    t0 = time.perf_counter()
    if blocking is None and max(n_a, n_b) <= dense_limit:
        out = runner.call(_dense_assign, Ap, Bp, cmp, wp, dense_limit, truth)
        r, c, w, ainfo = out["rows"], out["cols"], out["w"], out["info"]
        wtrue = out["wtrue"]
        true_in_cand = int(np.count_nonzero(~np.isnan(wtrue)))
        timings["candidates"] = 0.0
        timings["assignment"] = time.perf_counter() - t0
    else:
        if blocking is None and path == "count":
            # top-c by branch and bound: the same candidates as all pairs (prl_count_drivers)
            cand, cinfo["pairs_weighed"] = counted_topc(runner, Ap, Bp, n_b, cmp, wp,
                                                        int(top_c), truth, rows=rows[1])
        elif blocking is None:
            cand = pairwise_reduce(runner, _topc_block, prl.merge_topc, _topc_finish, _concat,
                                   Bp, Ap, n_b, n_a, rows_a=rows[1], rows_b=rows[0],
                                   args=(cmp, wp, int(top_c), truth))
        else:
            parts = [runner.task(_topc_finish, b0, b1,
                                 runner.task(_topc_window, b0, b1, Bp, Ap, cmp, wp,
                                             int(top_c), blocking),
                                 Bp, Ap, cmp, wp, int(top_c), truth)
                     for b0, b1 in chunk_bounds(n_b, rows[1])]
            cand = runner.result(tree_reduce(runner, _concat, parts))
        timings["candidates"] = time.perf_counter() - t0
        t0 = time.perf_counter()
        graph = Candidates.from_topc(cand["idx"], cand["w"], n_a)
        # ties between optimal assignments broken by the records' values, not their order
        # (A is already in content order)
        order_b = runner.call(_content_order, Bp)
        r, c, ainfo = assign_by_content(graph, order_b, None, maximize=True,
                                        dense_limit=dense_limit, unmatched=unmatched)
        w = graph.lookup(r, c)
        wtrue = cand["wtrue"]
        true_in_cand = int(np.count_nonzero((cand["idx"] == tr[:, None]).any(axis=1)
                                            & (tr >= 0)))
        timings["assignment"] = time.perf_counter() - t0
    # identical records are interchangeable: each pair counts its expected correctness
    # over their permutations (CATALOG PRL item 5), so PLD does not depend on row order
    pc = prl.pld_counts(r, c, w, tr, class_b=np.asarray(runner.call(_classes, Bp)),
                        class_a=np.asarray(runner.call(_classes, Ap)))
    c = order_a[c]                                   # back to A's own row numbers
    flag = int(ainfo["flag"] or blocking is not None or not fit.converged)
    if blocking is None:
        blocking_info = "none"
    elif blocking[1] == 0:
        blocking_info = f"exact blocks on key {blocking[0]}"
    else:
        blocking_info = f"sorted neighbourhood on key {blocking[0]}, half window {blocking[1]}"
    info = {"assignment": ainfo["method"] + ("" if ainfo["method"] == "dense" else
                                             f" (unmatched={unmatched})"),
            "blocking": blocking_info,
            "pairs_compared": n_pairs, "em_iterations": fit.iterations,
            "em_loglik": fit.loglik, "em_converged": fit.converged, "em_clipped": fit.clipped,
            "p_match": fit.p, "n_candidates": ainfo["n_candidates"],
            "true_in_candidates": true_in_cand, "unassigned_b": ainfo["n_unassigned_rows"],
            "timings": timings, **cinfo,
            "true_weight_mean": float(np.nanmean(wtrue)) if np.any(~np.isnan(wtrue)) else None}
    return PRLResult(r, c, w, prl.match_probability(w, wp), counts, fit, pc["correct"],
                     pc["correct20"], n_b, flag, info, wtrue)

