"""Dask drivers of the PRL passes: which kernel runs on which block.

Pattern counts (all pairs, or the pairs of a blocking rule): each block of A
rows x B rows returns its sparse pattern counts; a fixed tree reduction adds
them (integers, so the total never depends on the tiling). The counting path
(:mod:`.counting`): one task builds the index of B, every block of A rows
counts against all of B with it. Candidates: each block returns, for its B rows,
their top-c A rows by weight; partials merge over A blocks exactly (ties broken
by A row); the finish step adds the weight of each B record's true record; or,
on the counting path, a best-first search of a KD-tree of A gives the same
candidates.

Choice of path (option ``prl_counting``): ``pairs`` enumerates all pairs (the
reference); ``count`` takes the counting path, or refuses when it would be slower (more
than :data:`MAX_SHARE` of the pairs enumerated on a sample of A,
:data:`MAX_SHARE_LEVELS` with multi-level comparisons) or its index would not fit
:data:`MAX_INDEX_BYTES`; ``auto`` counts when there are at least :data:`AUTO_MIN_PAIRS`
pairs and neither limit is hit, and enumerates all pairs otherwise; its candidates come
from the branch-and-bound search from :data:`AUTO_TOPC_MIN_PAIRS` pairs on (a decision of
its own: the search is faster than weighing all pairs long before counting is). All pairs are
counted by the dense histogram kernel when the pattern space has at most
:data:`~sdcdist.linkage.prl.patterns.DENSE_PATTERN_SPACE` patterns (the default
comparison on up to 10 key columns), by the sparse (sorted-codes) kernel above; the info's
``counting`` says which path and kernel ran and why, ``pattern_kernel`` the kernel.
"""

from __future__ import annotations

import logging
import os
import time
from typing import Any

import numpy as np

from ...errors import SdcInputError
from ...options import PRL_BLOCK_ROWS
from ...parallel import (Runner, add_dicts, chunk_bounds, pairwise_reduce, thread_map,
                         thread_pool, tree_reduce)
from ..assignment import assign_by_content, content_order, identical_classes
from ..assignment.ties import GRID_BITS, grid_bits
from .comparison import Comparison, prepare_side, same_tolerances, transposed
from . import kept
from .counting import (build_index, count_block, enumerated_share, index_bytes, sample_rows,
                       sorted_columns)
from .patterns import RANK_ROWS, merge_counts, pattern_counts, pattern_kernel
from .pld import on_grid
from .kdtree import build_tree, split_scale
from .topc import merge_topc, topc_block, topc_search
from .weights import WeightParams, dense_weights, grid_rows, pair_weights

log = logging.getLogger(__name__)

__all__ = ["blocked_pattern_counts", "count_tasks", "choose_counting", "counted_pattern_counts",
           "counted_topc", "blocked_topc", "dense_grid", "dense_assign", "best_ties", "AUTO_MIN_PAIRS", "AUTO_TOPC_MIN_PAIRS",
           "topc_path", "MAX_SHARE", "MAX_SHARE_LEVELS",
           "MAX_INDEX_BYTES", "MAX_DENSE_PATTERNS", "SAMPLE_ROWS", "DENSE_TASK_PAIRS"]

AUTO_MIN_PAIRS = 2**32

#: ``prl_counting=auto`` finds the top-c candidates by the branch-and-bound search of a
#: KD-tree of A from this many pairs on (all pairs below), whichever path counted: the same
#: candidates, weights and tie order. Its own threshold, apart from the counting path's
#: :data:`AUTO_MIN_PAIRS`: the search is never slower than weighing all pairs (measured with
#: the default comparison on 8 synthetic numeric keys, CPU time: equal up to 2,000 x 2,000
#: records, 1.4x faster at 5,000 x 5,000, 1.9x at 10,000, 2.2x at 20,000, 3.4x at 59,315);
#: below 2^24 pairs the KD-tree saves nothing (and the files are usually assigned densely).
AUTO_TOPC_MIN_PAIRS = 2**24

#: Largest share of the pairs the counting path may enumerate one by one (binary
#: comparisons: an enumerated pair costs ~2 pairs of the dense all-pairs kernel,
#: measured on 59,315 x 8 synthetic records; a margin for the sampling).
MAX_SHARE = 0.4

#: The same with several levels per column (an enumerated pair costs ~7 pairs of the
#: dense all-pairs kernel there, ~30 with the default ``s`` levels: break-even below 0.15).
MAX_SHARE_LEVELS = 0.1

#: ``prl_counting=count`` insists on the counting path: it is refused only beyond these
#: shares (binary, several levels), where it would enumerate most pairs anyway.
FORCED_MAX_SHARE = 0.75
FORCED_MAX_SHARE_LEVELS = 0.4

#: Largest index of B (bytes) the counting path builds (it is held by every worker).
MAX_INDEX_BYTES = 3 * 2**30
#: largest pattern space the counting path counts in (a dense int64 vector per block)
MAX_DENSE_PATTERNS = 2**22

#: A rows sampled to estimate the enumerated share.
SAMPLE_ROWS = 2000


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

def _prepare(X: Any, cols: tuple[int, ...], cmp: Comparison, side: str) -> dict:
    return prepare_side(X, cols, cmp, side=side)


def _count_block(a0: int, a1: int, b0: int, b1: int, A: dict, B: dict,
                 cmp: Comparison, threads: int = 1) -> dict:
    # threads > 1 (the task is the only one): codes and counting side by side
    with thread_pool(threads, name="sdcdist-prl-count") as pmap:
        codes, counts = pattern_counts(_slice(A, a0, a1), _slice(B, b0, b1), cmp,
                                       pmap=pmap if threads > 1 else None)
    return {"codes": codes, "counts": counts, "pairs": np.int64((a1 - a0) * (b1 - b0))}


def _count_window(b0: int, b1: int, A: dict, B: dict, cmp: Comparison,
                  blocking: tuple[int, int]) -> dict:
    b = _slice(B, b0, b1)
    lo, hi, order = _window(A, b, *blocking)
    codes, counts = pattern_counts(A, b, cmp, lo=lo, hi=hi, aidx=order)
    return {"codes": codes, "counts": counts, "pairs": np.int64((hi - lo).sum())}


def _merge_counts(*parts: dict) -> dict:
    codes, counts = merge_counts(*[(p["codes"], p["counts"]) for p in parts])
    return {"codes": codes, "counts": counts, "pairs": sum(p["pairs"] for p in parts)}


def _topc_block(b0: int, b1: int, a0: int, a1: int, B: dict, A: dict, cmp: Comparison,
                wp: WeightParams, c: int, truth: np.ndarray) -> dict:
    return topc_block(_slice(A, a0, a1), _slice(B, b0, b1), cmp, wp, c, a0=a0)


def _topc_window(b0: int, b1: int, B: dict, A: dict, cmp: Comparison,
                 wp: WeightParams, c: int, blocking: tuple[int, int]) -> dict:
    b = _slice(B, b0, b1)
    lo, hi, order = _window(A, b, *blocking)
    return topc_block(A, b, cmp, wp, c, lo=lo, hi=hi, aidx=order,
                          aglob=np.arange(A["v"].shape[0], dtype=np.int64))


def _topc_finish(b0: int, b1: int, top: dict, B: dict, A: dict, cmp: Comparison,
                 wp: WeightParams, c: int, truth: np.ndarray) -> dict:
    t = np.asarray(truth[b0:b1], dtype=np.int64)
    known = np.flatnonzero(t >= 0)
    wtrue = np.full(b1 - b0, np.nan)
    wtrue[known] = pair_weights(A, _slice(B, b0, b1), t[known], known, cmp, wp)
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


def _dense_grid(A: dict, B: dict, cmp: Comparison, wp: WeightParams) -> dict:
    # Every pair's weight straight onto the fixed-point grid (the assignment's and best
    # link's), by blocks of rows on DENSE_THREADS threads; rows are B's records in content
    # order from the start (no permuted copy of the weights later): ``ro`` (that order),
    # ``Q`` (n_b, n_a), each row's ``top`` grid value and ``n_top`` entries at it, ``ok``
    # (every weight finite and the 2**-GRID_BITS grid wide enough for their range; else
    # the assignment takes the float weights) and ``t_weights`` (wall s)
    ro = content_order(B["v"])
    t0 = time.perf_counter()
    Bo = _take(B, ro)
    n_b, n_a = Bo["v"].shape[0], A["v"].shape[0]
    Q = kept.take(("grid", n_b, n_a)) if n_b * n_a >= GRID_KEEP_MIN else None
    Q = np.empty((n_b, n_a)) if Q is None else Q      # every entry is written below
    top = np.empty(n_b)
    n_top = np.empty(n_b, dtype=np.int64)
    at = transposed(A)
    tconst = same_tolerances(at[1], cmp.n_levels)    # found once for all blocks of rows
    parts = _rows_in_threads(lambda j0, j1: grid_rows(at, Bo, cmp, wp, j0, j1, GRID_BITS, Q,
                                                      top, n_top, tconst), n_b)
    lo = min((p[0] for p in parts), default=0.0)
    hi = max((p[1] for p in parts), default=0.0)
    ok = all(p[2] for p in parts) and grid_bits(lo, hi, min(n_b, n_a)) == GRID_BITS
    # the extremes the assignment starts from, without reading Q again: the smallest and
    # largest grid value (rounding is monotone: those of the float extremes) and each
    # column's largest
    scale = 2.0 ** GRID_BITS
    cmax = np.max([p[3] for p in parts], axis=0) if parts else np.full(n_a, -np.inf)
    return {"ro": ro, "Q": Q, "top": top, "n_top": n_top, "ok": ok,
            "extremes": (float(np.rint(lo * scale)), float(np.rint(hi * scale)), cmax),
            "t_weights": time.perf_counter() - t0}


def _dense_assign(A: dict, B: dict, cmp: Comparison, wp: WeightParams,
                  dense_limit: int, truth: np.ndarray, grid: dict | None = None,
                  on_prices: Any = None) -> dict:
    # ties between optimal assignments broken by the records' values, not their order
    # (A is already in content order: probabilistic_linkage put it there); the weights on
    # the grid (_dense_grid, computed here unless given); the float weights of the
    # assigned and the true pairs are computed again (the same floats, pair_weights)
    grid = _dense_grid(A, B, cmp, wp) if grid is None else grid
    t0 = time.perf_counter()
    ro = grid["ro"]
    Q, grid["Q"] = grid["Q"], None          # used here only, then kept for the next call
    if not grid["ok"]:
        # non-finite weights (refused by the assignment) or a range that needs a coarser
        # grid: the float weights, rounded by the assignment
        _keep_grid(Q)
        return _dense_assign_floats(A, B, cmp, wp, dense_limit, truth, ro, grid["t_weights"],
                                    on_prices)
    r, c, info = assign_by_content(Q, ro, None, rows_ordered=True, maximize=True,
                                   dense_limit=dense_limit, on_grid=GRID_BITS,
                                   extremes=grid["extremes"], on_prices=on_prices)
    _keep_grid(Q)
    inv = np.empty_like(ro)                  # row of Q of each B record
    inv[ro] = np.arange(ro.size)
    t = np.asarray(truth, dtype=np.int64)
    known = np.flatnonzero(t >= 0)
    wtrue = np.full(t.size, np.nan)
    wtrue[known] = pair_weights(A, B, t[known], known, cmp, wp)
    return {"rows": r, "cols": c, "w": pair_weights(A, B, c, r, cmp, wp), "info": info,
            "wtrue": wtrue, "t_weights": grid["t_weights"],
            "t_assign": time.perf_counter() - t0, "top": grid["top"][inv],
            "n_top": grid["n_top"][inv]}


#: Threads that compute the dense weights (:func:`_dense_assign`), each on its own blocks
#: of :data:`DENSE_BLOCK_ROWS` rows (rows are independent: the result is the same for any
#: number of threads).
DENSE_THREADS = max(1, min(2, os.cpu_count() or 1))
DENSE_BLOCK_ROWS = 256

#: Fewest entries of the dense path's weight grid that is kept for the next call of the
#: same size once the assignment is done (:mod:`.kept`; ``release_hists()`` drops it): 4,092
#: records a side make 134 MB whose fresh pages cost 10-100 ms a call to map.
GRID_KEEP_MIN = 1 << 22


def _keep_grid(Q: np.ndarray) -> None:
    if Q is not None and Q.size >= GRID_KEEP_MIN:
        kept.keep(("grid", *Q.shape), Q)


def _rows_in_threads(fn: Any, n: int, rows: int = DENSE_BLOCK_ROWS,
                     threads: int | None = None) -> list:
    """``[fn(j0, j1) for each block of rows]`` (blocks of ``rows``), the blocks shared out
    to ``threads`` threads (default :data:`DENSE_THREADS`; ``fn`` releases the GIL);
    results in block order."""
    blocks = chunk_bounds(n, rows) if n else []
    threads = DENSE_THREADS if threads is None else threads
    return thread_map(fn, blocks, threads, name="sdcdist-prl")


def _dense_assign_floats(A: dict, B: dict, cmp: Comparison, wp: WeightParams,
                         dense_limit: int, truth: np.ndarray, ro: np.ndarray,
                         t_before: float, on_prices: Any = None) -> dict:
    # _dense_assign through the float weights (the assignment checks and rounds them);
    # t_before: wall s already spent on weights
    t0 = time.perf_counter()
    W = dense_weights(A, _take(B, ro), cmp, wp)
    t1 = time.perf_counter()
    r, c, info = assign_by_content(W, ro, None, rows_ordered=True,
                                   maximize=True, dense_limit=dense_limit, on_prices=on_prices)
    at = np.empty_like(ro)                  # row of W of each B record
    at[ro] = np.arange(ro.size)
    t = np.asarray(truth, dtype=np.int64)
    wtrue = np.where(t >= 0, W[at, np.maximum(t, 0)], np.nan)
    top, n_top = _grid_top(W)
    return {"rows": r, "cols": c, "w": W[at[r], c], "info": info, "wtrue": wtrue,
            "t_weights": t_before + t1 - t0, "t_assign": time.perf_counter() - t1,
            "top": top[at], "n_top": n_top[at]}


def _grid_top(W: np.ndarray, rows: int = 512) -> tuple[np.ndarray, np.ndarray]:
    """Each row's largest weight on the grid and how many entries of the row have it."""
    top = on_grid(W.max(axis=1)) if W.shape[1] else np.full(W.shape[0], -np.inf)
    n_top = np.zeros(W.shape[0], dtype=np.int64)
    for s in range(0, W.shape[0], rows):
        n_top[s:s + rows] = np.count_nonzero(on_grid(W[s:s + rows]) == top[s:s + rows, None],
                                             axis=1)
    return top, n_top


def _tie_count(rows: np.ndarray, top: np.ndarray, B: dict, A: dict, cmp: Comparison,
               wp: WeightParams, blocking: tuple[int, int] | None) -> np.ndarray:
    # how many A records have the B rows' best weight (on the grid), over every pair
    # compared (all of A, or the blocking rule's pairs)
    nb = B["v"].shape[0]
    b = {k: (v[rows] if isinstance(v, np.ndarray) and v.ndim >= 1 and v.shape[0] == nb
             else v) for k, v in B.items()}
    if blocking is None:
        return _grid_top_count(dense_weights(A, b, cmp, wp), top)
    lo, hi, order = _window(A, b, *blocking)
    out = np.zeros(rows.size, dtype=np.int64)
    for j in range(rows.size):
        ia = order[lo[j]:hi[j]]
        w = pair_weights(A, b, ia, np.full(ia.size, j, dtype=np.int64), cmp, wp)
        out[j] = np.count_nonzero(on_grid(w) == top[j])
    return out


def _grid_top_count(W: np.ndarray, top: np.ndarray) -> np.ndarray:
    return np.count_nonzero(on_grid(W) == top[:, None], axis=1)


def best_ties(runner: Runner, A: Any, B: Any, n_a: int, cmp: Comparison, wp: WeightParams,
              cand: dict, c: int, blocking: tuple[int, int] | None = None
              ) -> tuple[np.ndarray, np.ndarray, int]:
    """Each B record's best weight on the grid (:func:`~.pld.on_grid`) and the number of A
    records that have it, from its top-``c`` candidates; where all ``c`` candidates tie at
    the top (more may), the ties are counted over every compared pair of that record
    (tasks of at most 2**23 pairs). Returns ``(top, n_top, recounted rows)``."""
    g = on_grid(cand["w"])
    top = g.max(axis=1) if g.shape[1] else np.full(g.shape[0], -np.inf)
    n_top = np.count_nonzero(g == top[:, None], axis=1).astype(np.int64)
    full = np.flatnonzero(np.isfinite(top) & (n_top >= c) & (n_a > c))
    if full.size:
        step = max(1, 2**23 // max(n_a, 1))
        parts = [runner.task(_tie_count, full[s:s + step], top[full[s:s + step]], B, A, cmp,
                             wp, blocking) for s in range(0, full.size, step)]
        n_top[full] = np.concatenate([np.asarray(x) for x in runner.result(parts)])
    return top, n_top, int(full.size)


#: Pairs per task of the dense histogram kernel at least (B rows per task raised from
#: ``prl_block_rows`` up to this): the histogram of the whole pattern space is zeroed and
#: read once per task, and fewer partial counts are merged.
DENSE_TASK_PAIRS = 2**31


def count_tasks(n_a: int, n_b: int, cmp: Comparison, rows: tuple[int, int]
                ) -> list[tuple[int, int, int, int]]:
    """The blocks ``(a0, a1, b0, b1)`` of all pairs, one task each: ``rows`` rows of A by
    ``rows`` rows of B; with the dense kernel A's rows raised to
    :data:`~sdcdist.linkage.prl.patterns.RANK_ROWS` (the A rows its rank kernel ranks at
    once: each B row's runs are walked once per task) and B's to
    :data:`DENSE_TASK_PAIRS` pairs per task. Depends only on the sizes, so the tiling
    (and, integer counts, the result) never depends on the cluster."""
    ra, rb = int(rows[0]), int(rows[1])
    if pattern_kernel(cmp) == "dense":
        ra = max(ra, RANK_ROWS)
        rb = max(rb, DENSE_TASK_PAIRS // ra)
    return [(a0, a1, b0, b1) for a0, a1 in chunk_bounds(n_a, ra)
            for b0, b1 in chunk_bounds(n_b, rb)]


def blocked_pattern_counts(runner: Runner, A: Any, B: Any, n_a: int, n_b: int,
                           cmp: Comparison, *, rows: tuple[int, int],
                           blocking: tuple[int, int] | None = None
                           ) -> tuple[tuple[np.ndarray, np.ndarray], int]:
    """Pass 1: pattern counts over all pairs (or a blocking rule's pairs).

    ``A``, ``B`` are handles of :func:`prepare_side` dicts. Returns the
    sparse counts ``(codes, counts)`` (:func:`sparse_counts`: int64, the
    occurring patterns in increasing code order) and the number of pairs compared.
    """
    if blocking is None:
        tasks = count_tasks(n_a, n_b, cmp, rows)
        # one task: its two threads compute codes and count them side by side (as the
        # dense weights' task shares its rows)
        threads = DENSE_THREADS if len(tasks) == 1 else 1
        parts = [runner.task(_count_block, a0, a1, b0, b1, A, B, cmp, threads)
                 for a0, a1, b0, b1 in tasks]
    else:
        parts = [runner.task(_count_window, b0, b1, A, B, cmp, blocking)
                 for b0, b1 in chunk_bounds(n_b, rows[1])]
    out = runner.result(tree_reduce(runner, _merge_counts, parts))
    return (np.asarray(out["codes"], dtype=np.int64),
            np.asarray(out["counts"], dtype=np.int64)), int(out["pairs"])


def _index(B: dict, cmp: Comparison) -> dict:
    return build_index(B, cmp)


def _share(A: dict, B: dict, cmp: Comparison, rows: np.ndarray) -> float:
    return enumerated_share({k: v[rows] for k, v in A.items()}, sorted_columns(B, cmp), cmp)


def _kernel_text(cmp: Comparison) -> str:
    return {"dense": "dense histogram kernel",
            "sparse": "sorted-codes kernel"}[pattern_kernel(cmp)]


def _count(a0: int, a1: int, A: dict, index: dict, cmp: Comparison) -> dict:
    counts, enum = count_block(_slice(A, a0, a1), index, cmp)
    return {"counts": counts, "enumerated": np.int64(enum)}


def choose_counting(runner: Runner, A: Any, B: Any, n_a: int, n_b: int,
                    cmp: Comparison, *, mode: str = "auto",
                    blocking: Any = None) -> tuple[str, Any, dict]:
    """Decide between the pairs and the counting path.

    Returns
    -------
    path : {"pairs", "count"}
    index : handle of the index of B (``None`` for pairs)
    info : dict
        ``counting`` (the path, the all-pairs kernel and why), ``pattern_kernel``
        (all pairs: ``dense`` or ``sparse``, :func:`~sdcdist.linkage.prl.patterns.pattern_kernel`),
        ``enumerated_share_estimate`` (when sampled: from B's sorted columns alone, the
        whole index is built only for the counting path).

    Raises
    ------
    SdcInputError
        ``mode="count"`` with a blocking rule, an index too large, or a
        counting path slower than all pairs.
    """
    kernel = {"pattern_kernel": pattern_kernel(cmp)}
    if mode == "pairs":
        return "pairs", None, {**kernel, "counting": f"pairs, {_kernel_text(cmp)}"}
    def pairs(why: str, refusal: str, info: dict | None = None) -> tuple[str, Any, dict]:
        # prl_counting=count insists on the counting path: refuse; auto falls back to pairs
        if mode == "count":
            raise SdcInputError(refusal)
        if blocking is None:
            # a file this large takes long pair by pair: say why, and what would count instead
            log.warning("PRL: all %.3g record pairs are compared one by one (%s), since %s; "
                        "the counting path needs key columns that agree less often (e.g. "
                        "prl_method l with one tolerance)", float(n_a) * float(n_b),
                        _kernel_text(cmp), why)
        return "pairs", None, {**(info or {}), **kernel,
                               "counting": f"pairs, {_kernel_text(cmp)} ({why})"}

    if blocking is not None:
        return pairs("blocking", "prl_counting=count counts all pairs and cannot follow a "
                                 "blocking rule; drop prl_blocking or use prl_counting=pairs")
    K = len(cmp.levels)
    if mode == "auto" and int(n_a) * int(n_b) < AUTO_MIN_PAIRS:
        return "pairs", None, {**kernel, "counting": f"pairs, {_kernel_text(cmp)} (small)"}
    if cmp.n_patterns > MAX_DENSE_PATTERNS:
        # the counting kernel adds into a dense vector over all patterns, per block
        return pairs("too many patterns to count densely",
                     f"the counting path keeps a count for each of the {cmp.n_patterns} "
                     f"comparison patterns (limit {MAX_DENSE_PATTERNS}); use fewer key "
                     "columns or levels, or prl_counting=pairs")
    need = index_bytes(int(n_b), K)
    if need > MAX_INDEX_BYTES:
        return pairs("index too large",
                     f"the counting index of the masked file would take {need / 2**30:.1f} "
                     f"GiB (limit {MAX_INDEX_BYTES / 2**30:.0f} GiB) with {K} key columns; "
                     "use fewer key columns or prl_counting=pairs")
    # the share from B's sorted columns alone: the whole index only when it will be used
    rows = sample_rows(int(n_a), SAMPLE_ROWS)
    share = float(runner.call(_share, A, B, cmp, rows))
    info = {"enumerated_share_estimate": share}
    binary = bool(np.all(cmp.n_levels == 2))
    if mode == "count":
        limit = FORCED_MAX_SHARE if binary else FORCED_MAX_SHARE_LEVELS
    else:
        limit = MAX_SHARE if binary else MAX_SHARE_LEVELS
    if share > limit:
        return pairs("counting would be slower",
                     f"the counting path would compare {100 * share:.0f}% of the record "
                     f"pairs one by one (more than {100 * limit:.0f}%), slower than all "
                     "pairs: the key columns agree too often at these tolerances; use "
                     "prl_counting=pairs or auto", info)
    index = runner.task(_index, B, cmp)
    return "count", index, {**info, "counting": "count"}


def counted_pattern_counts(runner: Runner, A: Any, index: Any, n_a: int, n_b: int,
                           cmp: Comparison, *,
                           rows: int = PRL_BLOCK_ROWS) -> tuple[np.ndarray, int, int]:
    """Pattern counts over all ``n_a n_b`` pairs by the counting path.

    ``A`` is a handle of :func:`prepare_side` of A, ``index`` of
    :func:`build_index` of B. Returns the counts (int64, shape
    (n_patterns,)), the number of pairs and the number of pairs enumerated.
    """
    parts = [runner.task(_count, a0, a1, A, index, cmp)
             for a0, a1 in chunk_bounds(int(n_a), int(rows))]
    out = runner.result(tree_reduce(runner, add_dicts, parts))
    return (np.asarray(out["counts"], dtype=np.int64), int(n_a) * int(n_b),
            int(out["enumerated"]))


# ---- top-c candidates ------------------------------------------------------------

def _tree(A: dict, scale: np.ndarray | None = None) -> dict:
    return build_tree(A, scale=scale)


def _search(b0: int, b1: int, B: dict, tree: dict, A: dict, cmp: Comparison,
            wp: WeightParams, c: int, truth: np.ndarray) -> dict:
    b = _slice(B, b0, b1)
    out = topc_search(tree, b, cmp, wp, c)
    t = np.asarray(truth[b0:b1], dtype=np.int64)
    known = np.flatnonzero(t >= 0)
    wtrue = np.full(b1 - b0, np.nan)
    wtrue[known] = pair_weights(A, b, t[known], known, cmp, wp)
    return {"idx": out["idx"], "w": out["w"], "wtrue": wtrue,
            "visited": np.array([out["visited"]], dtype=np.int64),
            "ranked": np.array([out["ranked"]], dtype=np.bool_)}


def topc_path(n_a: int, n_b: int, *, mode: str = "auto", path: str = "pairs",
              blocking: Any = None) -> str:
    """How the top-c candidates are found: ``"search"`` (branch and bound over a KD-tree
    of A, :func:`counted_topc`) or ``"pairs"`` (every pair weighed, :func:`blocked_topc`).

    The search on the counting path, and with ``mode="auto"`` from
    :data:`AUTO_TOPC_MIN_PAIRS` pairs on (or from :data:`AUTO_MIN_PAIRS`, where ``auto``
    considers counting, if that is lower); all pairs with a blocking rule or
    ``mode="pairs"``. Both give the same candidates, weights and tie order.
    """
    if blocking is not None:
        return "pairs"
    if path == "count":
        return "search"
    pairs = int(n_a) * int(n_b)
    if mode == "auto" and pairs >= min(AUTO_TOPC_MIN_PAIRS, AUTO_MIN_PAIRS):
        return "search"
    return "pairs"


def counted_topc(runner: Runner, A: Any, B: Any, n_b: int, cmp: Comparison,
                 wp: WeightParams, c: int, truth: Any, *,
                 rows: int = PRL_BLOCK_ROWS, info: dict | None = None) -> tuple[dict, int]:
    """Each B record's ``c`` best A records without all pairs (branch and bound).

    The same candidates, weights and tie order as the all-pairs pass 2 of
    :func:`~sdcdist.linkage.prl.probabilistic_linkage`: one task
    builds a KD-tree of A (:func:`build_tree`), every block of B rows
    searches it (:func:`topc_search`) and adds the weight of each
    record's true pair. Returns ``{"idx", "w", "wtrue"}`` (rows of B in order)
    and the number of pairs whose weight was computed; ``info["ranked"]`` says
    whether every block bounded the leaves' pairs by ranks (:mod:`.ranked`).
    """
    tree = runner.task(_tree, A, split_scale(wp, cmp))
    parts = [runner.task(_search, b0, b1, B, tree, A, cmp, wp, int(c), truth)
             for b0, b1 in chunk_bounds(int(n_b), int(rows))]
    out = runner.result(tree_reduce(runner, _concat, parts))
    visited = int(out.pop("visited").sum())
    ranked = bool(out.pop("ranked").all())
    if info is not None:
        info["ranked"] = ranked
    return out, visited


# ---- the passes the driver runs -------------------------------------------------------

def prepare_sides(runner: Runner, A: Any, B: Any, cols_a: tuple[int, ...],
                  cols_b: tuple[int, ...], cmp: Comparison) -> tuple[Any, Any, np.ndarray]:
    """The compared values of both files (:func:`prepare_side`), A in the order of its values.

    Where candidates or assignments tie, the pick then never depends on how the
    files are sorted (files kept in the same order would otherwise pair B row i
    with A row i on every tie). Returns the handles of A (in content order) and
    B and ``order_a`` (A's own row of each row of the reordered A).
    """
    Ap = runner.task(_prepare, A, tuple(cols_a), cmp, "a")
    Bp = runner.task(_prepare, B, tuple(cols_b), cmp, "b")
    order_a = np.asarray(runner.call(_content_order, Ap), dtype=np.int64)
    return runner.task(_take, Ap, order_a), Bp, order_a


def content_order_of(runner: Runner, side: Any) -> np.ndarray:
    """:func:`~sdcdist.linkage.assignment.content_order` of a prepared side."""
    return np.asarray(runner.call(_content_order, side))


def classes_of(runner: Runner, side: Any) -> np.ndarray:
    """:func:`~sdcdist.linkage.assignment.identical_classes` of a prepared side."""
    return np.asarray(runner.call(_classes, side))


def dense_grid(runner: Runner, A: Any, B: Any, cmp: Comparison, wp: WeightParams) -> Any:
    """All pair weights on the fixed-point grid, in one task (its threads share the rows):
    a handle for :func:`dense_assign`."""
    return runner.task(_dense_grid, A, B, cmp, wp)


def dense_assign(runner: Runner, A: Any, B: Any, cmp: Comparison, wp: WeightParams,
                 dense_limit: int, truth: Any, grid: Any = None, on_prices: Any = None) -> dict:
    """The exact 1-1 assignment on all pair weights (``grid``: :func:`dense_grid`'s handle,
    or computed in the same task), ties broken by the records' values: ``rows``, ``cols``,
    ``w``, ``info``, ``wtrue``, ``top``, ``n_top``, ``t_weights`` and ``t_assign`` (wall
    seconds the weights and the assignment took). ``on_prices``: called (no argument)
    once the assignment's start on every core is done (the auction's prices,
    :func:`~sdcdist.linkage.assignment.dense.exact_dense`) when the task runs in this
    process (no client); with a client it runs elsewhere, and ``on_prices`` is called at
    once."""
    if runner.client is not None and on_prices is not None:
        on_prices()
        on_prices = None
    return runner.call(_dense_assign, A, B, cmp, wp, dense_limit, truth, grid, on_prices)


def blocked_topc(runner: Runner, A: Any, B: Any, n_a: int, n_b: int, cmp: Comparison,
                 wp: WeightParams, c: int, truth: Any, *, rows: tuple[int, int],
                 blocking: tuple[int, int] | None = None) -> dict:
    """Each B record's ``c`` best A records over all pairs (or a blocking rule's pairs),
    with the weight of its true pair: ``{"idx", "w", "wtrue"}``, rows of B in order."""
    if blocking is None:
        return pairwise_reduce(runner, _topc_block, merge_topc, _topc_finish, _concat,
                               B, A, n_b, n_a, rows_a=rows[1], rows_b=rows[0],
                               args=(cmp, wp, int(c), truth))
    parts = [runner.task(_topc_finish, b0, b1,
                         runner.task(_topc_window, b0, b1, B, A, cmp, wp, int(c), blocking),
                         B, A, cmp, wp, int(c), truth)
             for b0, b1 in chunk_bounds(n_b, rows[1])]
    return runner.result(tree_reduce(runner, _concat, parts))
