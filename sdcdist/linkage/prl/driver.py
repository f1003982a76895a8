"""Probabilistic record linkage of two files: count -> fit -> candidates -> assign.

One short function per phase; the passes over blocks of pairs are in
:mod:`.blocks`. Pattern counts of all pairs (or of a blocking rule's pairs, or
by the exact counting path), the EM on those counts on the client, each B
record's top-c candidates by weight (or all weights when the files are small),
then a 1-1 assignment maximising the total weight: dense and exact up to
``dense_limit`` records, sparse on the candidate graph above
(:mod:`sdcdist.linkage.assignment`).
"""

from __future__ import annotations

import logging
import math
import os
import time
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from ...errors import SdcInputError, count_error, param_error, value_error
from ...parallel import Runner, alongside, thread_pool
from ..assignment import Candidates, assign_by_content
from ..truth import row_truth
from . import blocks as _blocks
from .blocks import (best_ties, blocked_pattern_counts, blocked_topc, choose_counting,
                     classes_of, content_order_of, counted_pattern_counts, counted_topc,
                     dense_assign, dense_grid, prepare_sides)
from .comparison import Comparison, comparison
from .em import EMResult, em, limit_advice
from .identification import identification
from .pld import best_link_credit, pld_counts
from .settings import DEFAULTS, PRLSettings
from .weights import WeightParams, match_probability, weight_params

__all__ = ["PRLResult", "probabilistic_linkage"]

log = logging.getLogger(__name__)

#: Threads that run the EM's E-step parts (:data:`~.estep.ESTEP_PARTS`; the fit is the
#: same bits for any number).
EM_THREADS = max(1, min(2, os.cpu_count() or 1))


@dataclass
class PRLResult:
    """Outcome of a probabilistic linkage of B (masked) to A (original).

    ``rows_b``, ``cols_a``, ``weights``, ``prob``: the assigned pairs (sorted by
    B row) with their weights and match probabilities; ``counts``: pattern
    counts; ``fit``: the EM result; ``correct`` / ``correct20`` / ``n_b``:
    PLD counts (when the truth is known; expected counts over the permutations of
    records identical on the keys, CATALOG PRL item 5); ``correct_best``: PLD_best's count
    (each B record linked to its best-weighted A records, weights on the 2**-24 grid, the true
    record among t tied counts 1/t); ``info``: assignment method, flag,
    pairs compared, timings (wall s of ``patterns``, ``em``, ``candidates``: the top-c
    candidates, or with the dense assignment every pair's weight, and ``assignment``), EM
    iterations and log-likelihood; ``true_weight``
    (n_b,): weight of each B record's true pair (NaN when absent).
    """

    rows_b: np.ndarray
    cols_a: np.ndarray
    weights: np.ndarray
    prob: np.ndarray
    counts: np.ndarray
    fit: EMResult
    correct: float
    correct20: float
    n_b: int
    flag: int
    info: dict[str, Any] = field(default_factory=dict)
    true_weight: np.ndarray | None = None
    correct_best: float = 0.0


def probabilistic_linkage(runner: Runner, A: Any, B: Any, n_a: int, n_b: int,
                          cols_a: tuple[int, ...], cols_b: tuple[int, ...] | None = None, *,
                          settings: PRLSettings | None = None, categorical: Any = None,
                          truth: Any = None, blocking: tuple[int, int] | None = None,
                          key_names: list[str] | None = None) -> PRLResult:
    """Link every B record to at most one A record by Fellegi-Sunter weights.

    Parameters
    ----------
    runner : Runner
    A, B : array handles, shapes (n_a, m_a), (n_b, m_b)
        Original (or external) file and masked file.
    cols_a, cols_b : tuple of int
        Key column positions in A and in B (``cols_b`` defaults to ``cols_a``).
    settings : PRLSettings, optional
        The PRL options (method, tolerances, weight shape, top c, EM, ...), checked once
        by :meth:`PRLSettings.from_options` (e.g.
        ``PRLSettings.from_options({"prl_t": 0.05, "prl_em": {"max_iter": 500}})``, or
        ``DEFAULTS.updated({...})``); default the registry's defaults. The one way to give
        a PRL option: see ``sdcdist metrics`` / docs/catalog.md.
    categorical : sequence of bool, optional
        Key columns compared by equality.
    truth : int array handle (n_b,), optional
        Row in A of each B record's true record (-1 absent); row order by default.
    blocking : (int, int), optional
        (position of the key in ``cols_a``, half window): sorted-neighbourhood
        blocking, or with half window 0 exact blocks (pairs whose key values are
        equal, e.g. the same category; a B record whose key is missing meets no
        A record and stays unlinked). Only those pairs are compared, the EM is
        fitted on their patterns, and the result is flagged. Default: the
        settings' ``blocking`` (a column name) found in ``key_names``.
    key_names : list of str, optional
        Names of the key columns, to place the settings' blocking column.

    Returns
    -------
    PRLResult
    """
    s = DEFAULTS if settings is None else settings
    cols_a, cols_b = _key_columns(cols_a, cols_b, n_a, n_b)
    cmp = comparison(len(cols_a), s, categorical=categorical)
    if blocking is None and s.blocking is not None:
        if key_names is None:
            raise SdcInputError("prl_blocking names a key column; give the key columns' names "
                                "(key_names) or the blocking key's position (blocking)")
        blocking = s.blocking_position(list(key_names))
    blocking = _blocking(blocking, len(cols_a))
    timings: dict[str, float] = {}
    t0 = time.perf_counter()
    Ap, Bp, order_a = prepare_sides(runner, A, B, cols_a, cols_b, cmp)
    truth = _truth(runner, truth, n_a, n_b, order_a)
    counts, n_pairs, path, cinfo = count(runner, Ap, Bp, n_a, n_b, cmp, s, blocking)
    timings["patterns"] = time.perf_counter() - t0
    t0 = time.perf_counter()
    fit, wp = fit_model(counts, cmp, n_a, n_b, n_pairs, s, check=False)
    timings["em"] = time.perf_counter() - t0
    # the identification check (it only flags the fit) runs in a thread of its own beside
    # the candidates and the assignment, which do not depend on it; beside the dense
    # assignment only once every pair's weight is computed and the auction has set its
    # prices (both on all cores): it then takes the core the exact solve leaves idle
    dense = blocking is None and max(n_a, n_b) <= s.dense_limit      # else top-c candidates
    grid = dense_grid(runner, Ap, Bp, cmp, wp) if dense else None
    out, timings["identification"] = alongside(
        lambda: _timed(identify, counts, cmp, fit, n_a, n_b, n_pairs, s),
        lambda start: _link(runner, Ap, Bp, n_a, n_b, cmp, wp, truth, s, blocking, path,
                            cinfo, timings, grid, start),
        name="sdcdist-prl-check", gate=True)
    grid = None                                      # the weights: no longer needed
    r, c, w, ainfo, wtrue, top, n_top, recounted, true_in_cand = out
    tr = np.asarray(runner.result(truth), dtype=np.int64)
    # identical records are interchangeable: each pair counts its expected correctness
    # over their permutations (CATALOG PRL item 5), so PLD does not depend on row order
    pc = pld_counts(r, c, w, tr, class_b=classes_of(runner, Bp), class_a=classes_of(runner, Ap))
    # best link (PLD_best): each B record scored by its best weight, ties 1/t (DLD's rule;
    # identical A records tie, so no class correction is needed)
    correct_best = math.fsum(best_link_credit(top, n_top, wtrue).tolist())
    c = order_a[c]                                   # back to A's own row numbers
    flag = int(ainfo["flag"] or blocking is not None or not fit.converged
               or not fit.identified)
    info = {"assignment": ainfo["method"] + ("" if ainfo["method"] == "dense" else
                                             f" (unmatched={s.unmatched})"),
            "blocking": _blocking_text(blocking),
            "pairs_compared": n_pairs, "em_iterations": fit.iterations,
            "em_loglik": fit.loglik, "em_converged": fit.converged, "em_clipped": fit.clipped,
            "em_identified": fit.identified, "em_info_ratio": fit.info_ratio,
            "assignment_grid": ainfo.get("grid"), "em_accelerate": s.em.accelerate,
            "p_match": fit.p, "em_fit": s.em.fit, "n_candidates": ainfo["n_candidates"],
            "best_ties_recounted": recounted,
            "true_in_candidates": true_in_cand, "unassigned_b": ainfo["n_unassigned_rows"],
            "timings": timings, **cinfo,
            "true_weight_mean": float(np.nanmean(wtrue)) if np.any(~np.isnan(wtrue)) else None}
    return PRLResult(r, c, w, match_probability(w, wp), counts, fit, pc["correct"],
                     pc["correct20"], n_b, flag, info, wtrue, correct_best)


# ---- the phases --------------------------------------------------------------------

def _link(runner: Runner, Ap: Any, Bp: Any, n_a: int, n_b: int, cmp: Comparison,
          wp: WeightParams, truth: Any, s: PRLSettings, blocking: tuple[int, int] | None,
          path: str, cinfo: dict, timings: dict, grid: Any, start: Any) -> tuple:
    """Candidates and the 1-1 assignment (dense and exact on every pair's weight when
    ``grid``, :func:`~.blocks.dense_grid`'s handle, is given; else sparse on the top-c
    candidates),
    with best link's top weights and their ties: ``(rows, cols, w, ainfo, wtrue, top,
    n_top, recounted, true_in_candidates)``; their wall times into ``timings``.
    ``start``: lets side work start (called with no argument): once the dense
    assignment's auction has set its prices (:func:`~.blocks.dense_assign`), else at once."""
    tr = np.asarray(runner.result(truth), dtype=np.int64)
    if grid is not None:
        out = dense_assign(runner, Ap, Bp, cmp, wp, s.dense_limit, truth, grid, start)
        r, c, w, ainfo, wtrue = out["rows"], out["cols"], out["w"], out["info"], out["wtrue"]
        true_in_cand = int(np.count_nonzero(~np.isnan(wtrue)))
        top, n_top, recounted = out["top"], out["n_top"], 0
        # every pair's weight (the dense path's candidates), then the assignment
        timings["candidates"] = float(out["t_weights"])
        timings["assignment"] = float(out["t_assign"])
    else:
        start()
        t0 = time.perf_counter()
        cand = candidates(runner, Ap, Bp, n_a, n_b, cmp, wp, truth, s, blocking, path, cinfo)
        timings["candidates"] = time.perf_counter() - t0
        t0 = time.perf_counter()
        r, c, w, ainfo = assign(runner, cand, Bp, n_a, s)
        wtrue = cand["wtrue"]
        top, n_top, recounted = best_ties(runner, Ap, Bp, n_a, cmp, wp, cand, s.top_c,
                                          blocking)
        true_in_cand = int(np.count_nonzero((cand["idx"] == tr[:, None]).any(axis=1)
                                            & (tr >= 0)))
        timings["assignment"] = time.perf_counter() - t0
    return r, c, w, ainfo, wtrue, top, n_top, recounted, true_in_cand


def count(runner: Runner, A: Any, B: Any, n_a: int, n_b: int, cmp: Comparison,
          s: PRLSettings, blocking: tuple[int, int] | None
          ) -> tuple[tuple[np.ndarray, np.ndarray], int, str, dict]:
    """Pattern counts: all pairs (or a blocking rule's), or the exact counting path.

    Returns the sparse counts ``(codes, counts)``, the pairs compared, the path
    (``"pairs"`` or ``"count"``) and its info.
    """
    path, index, cinfo = choose_counting(runner, A, B, n_a, n_b, cmp, mode=s.counting,
                                         blocking=blocking)
    if path == "count":
        dense, n_pairs, cinfo["pairs_enumerated"] = counted_pattern_counts(
            runner, A, index, n_a, n_b, cmp, rows=s.block_rows[0])
        nz = np.flatnonzero(dense)
        counts = (nz.astype(np.int64), dense[nz])   # the sparse form of sparse_counts
    else:
        counts, n_pairs = blocked_pattern_counts(runner, A, B, n_a, n_b, cmp,
                                                 rows=s.block_rows, blocking=blocking)
    if n_pairs == 0:
        raise SdcInputError("the blocking leaves no pair of records to compare: no value of "
                            f"the blocking key (key {blocking[0] + 1} of the key set) is "
                            "shared by the two files within the window; block on another "
                            "key, widen the window, or leave blocking out" if blocking else
                            "there is no pair of records to compare")
    return counts, n_pairs, path, cinfo


def fit_model(counts: tuple[np.ndarray, np.ndarray], cmp: Comparison, n_a: int, n_b: int,
              n_pairs: int, s: PRLSettings, *, check: bool = True
              ) -> tuple[EMResult, WeightParams]:
    """The EM fit on the pattern counts (P(M) starts at, and by default is capped by,
    ``min(n_a, n_b) / pairs``) and the weights it gives. ``prl_em: {fit: m_only}``: u the
    level frequencies over all pairs (all compared pairs), P(M) = ``min(n_a, n_b) / pairs``,
    both fixed; only m fitted. With ``check`` the fit is checked at once
    (:func:`identify`, which also computes its log-likelihood); without, the caller runs
    that check."""
    p_start = min(n_a, n_b) / float(n_pairs)
    e = s.em
    m_only = e.fit == "m_only"
    with thread_pool(EM_THREADS, name="sdcdist-prl-em") as pmap:
        fit = em(counts, cmp, p_start=p_start,
                 p_max=p_start if (e.p_max is None or m_only) else e.p_max,
                 m_start=e.m_start, max_iter=e.max_iter, tol=e.tol, eps=e.eps,
                 fix_u=m_only, fix_p=m_only, accelerate=e.accelerate, pmap=pmap,
                 defer_loglik=True)
    if not fit.converged:
        log.warning("PRL: EM did not converge within %d iterations (the result is flagged); %s",
                    fit.iterations, limit_advice(e.accelerate))
    if check:
        identify(counts, cmp, fit, n_a, n_b, n_pairs, s)
    return fit, weight_params(fit, cmp)


def identify(counts: tuple[np.ndarray, np.ndarray], cmp: Comparison, fit: EMResult,
             n_a: int, n_b: int, n_pairs: int, s: PRLSettings) -> None:
    """Whether the pattern counts identify the fit (``fit.identified``, ``fit.info_ratio``;
    :func:`~.identification.identification`), with a warning when they do not; and the
    fit's log-likelihood at its end point, which :func:`fit_model` leaves to this check
    (``fit.loglik``, :meth:`~.em.EMResult.settle`: it runs beside the assignment)."""
    # a flat likelihood is said, not hidden: a singular observed information at the end
    # point means other parameters (another P(M)) fit the counts as well
    p_start = min(n_a, n_b) / float(n_pairs)
    e = s.em
    idn = identification(counts, cmp, fit, eps=e.eps,
                         p_max=p_start if e.p_max is None else e.p_max,
                         m_only=e.fit == "m_only")
    fit.identified, fit.info_ratio = idn["identified"], idn["info_ratio"]
    fit.tables = None                  # the E-step's tables: not kept with the result
    fit.settle()                       # the log-likelihood at the end point, here too
    if not fit.identified:
        log.warning("PRL: the pattern counts do not identify the EM fit (observed information "
                    "singular: smallest/largest eigenvalue %.3g); other parameters fit them "
                    "as well (the result is flagged; use more or other key columns)",
                    fit.info_ratio)


def _timed(fn: Any, *args: Any) -> float:
    """``fn(*args)``; returns its wall time (s)."""
    t0 = time.perf_counter()
    fn(*args)
    return time.perf_counter() - t0


def candidates(runner: Runner, A: Any, B: Any, n_a: int, n_b: int, cmp: Comparison,
               wp: WeightParams, truth: Any, s: PRLSettings,
               blocking: tuple[int, int] | None, path: str, cinfo: dict) -> dict:
    """Each B record's ``top_c`` best A records and its true pair's weight:
    ``{"idx", "w", "wtrue"}``. On the counting path, and with ``prl_counting=auto``
    from :data:`~sdcdist.linkage.prl.blocks.AUTO_TOPC_MIN_PAIRS` pairs on (whichever
    path counted; :func:`~sdcdist.linkage.prl.blocks.topc_path`), by branch and bound
    (the same candidates as all pairs; ``cinfo["pairs_weighed"]`` set);
    ``cinfo["candidates"]`` says which."""
    if _blocks.topc_path(n_a, n_b, mode=s.counting, path=path, blocking=blocking) == "search":
        how: dict = {}
        cand, cinfo["pairs_weighed"] = counted_topc(runner, A, B, n_b, cmp, wp, s.top_c, truth,
                                                    rows=s.block_rows[1], info=how)
        cinfo["candidates"] = "branch and bound (KD-tree of A" + (
            ", pairs of a leaf bounded by their ranks)" if how["ranked"] else ")")
        return cand
    cinfo["candidates"] = "all pairs"
    return blocked_topc(runner, A, B, n_a, n_b, cmp, wp, s.top_c, truth, rows=s.block_rows,
                        blocking=blocking)


def assign(runner: Runner, cand: dict, B: Any, n_a: int, s: PRLSettings
           ) -> tuple[np.ndarray, np.ndarray, np.ndarray, dict]:
    """The sparse 1-1 assignment on the candidate graph; ties between optimal assignments
    broken by the records' values, not their order (A is already in content order)."""
    graph = Candidates.from_topc(cand["idx"], cand["w"], n_a)
    r, c, ainfo = assign_by_content(graph, content_order_of(runner, B), None, maximize=True,
                                    dense_limit=s.dense_limit, unmatched=s.unmatched)
    return r, c, graph.lookup(r, c), ainfo


# ---- checks and small helpers ---------------------------------------------------------

def _key_columns(cols_a: Any, cols_b: Any, n_a: int, n_b: int
                 ) -> tuple[tuple[int, ...], tuple[int, ...]]:
    cols_b = tuple(cols_a) if cols_b is None else tuple(cols_b)
    if len(cols_a) == 0 or len(cols_b) == 0:
        raise count_error("Probabilistic record linkage", "at least 1", "key column", 0,
                          "give key columns (e.g. --keys V1,V2)")
    if len(cols_a) != len(cols_b):
        raise count_error("The key set of B", f"exactly {len(cols_a)} (as in A)", "columns",
                          len(cols_b))
    for n, what in ((n_a, "original (A)"), (n_b, "masked (B)")):
        if n < 2:
            raise count_error(f"The {what} file", "at least 2", "records", n,
                              "linkage needs two records in each file to estimate the model")
    return tuple(cols_a), cols_b


def _blocking(blocking: Any, n_keys: int) -> tuple[int, int] | None:
    if blocking is None:
        return None
    key, width = int(blocking[0]), int(blocking[1])
    if not (0 <= key < n_keys) or width < 0:
        raise param_error("blocking", "prl", f"(key position in 0..{n_keys - 1}, "
                          "half window >= 1, or 0 for exact blocks)", blocking)
    return key, width


def _blocking_text(blocking: tuple[int, int] | None) -> str:
    if blocking is None:
        return "none"
    if blocking[1] == 0:
        return f"exact blocks on key {blocking[0]}"
    return f"sorted neighbourhood on key {blocking[0]}, half window {blocking[1]}"


def _truth(runner: Runner, truth: Any, n_a: int, n_b: int, order_a: np.ndarray) -> Any:
    """The truth (row order by default) as a handle, in the rows of A's content order."""
    if truth is None:
        truth = runner.share(row_truth(n_b, n_a))
    elif isinstance(truth, np.ndarray):
        if truth.shape != (n_b,):
            raise value_error("The truth", f"one row per masked record: shape ({n_b},)",
                              got_text=f"shape {truth.shape}")
        truth = runner.share(np.asarray(truth, dtype=np.int64))
    inv_a = np.empty_like(order_a)
    inv_a[order_a] = np.arange(order_a.size)
    tr0 = np.asarray(runner.result(truth), dtype=np.int64)
    return runner.share(np.where(tr0 >= 0, inv_a[np.maximum(tr0, 0)], tr0))
