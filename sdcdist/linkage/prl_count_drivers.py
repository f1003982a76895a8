"""Dask driver of the PRL counting path: exact pattern counts without all pairs.

:mod:`sdcdist.linkage.prl_count` holds the kernels. Here: one task builds the
index of B (sorted ranks and wavelet matrices), every block of A rows counts
its patterns against all of B with it, and a fixed tree reduction adds the
integer counts, so the result never depends on the tiling and equals the
all-pairs counts of :func:`~sdcdist.linkage.prl_drivers.blocked_pattern_counts`
bit for bit.

The top-c candidates of every B record come from a best-first search of a
KD-tree of A bounded by the weight (:func:`counted_topc`), equal to the
all-pairs candidates.

Choice of path (option ``prl_counting``): ``pairs`` enumerates all pairs (the
reference); ``count`` takes the counting path, or refuses when it would be slower (more
than :data:`MAX_SHARE` of the pairs enumerated on a sample of A,
:data:`MAX_SHARE_LEVELS` with multi-level comparisons) or its index would not fit
:data:`MAX_INDEX_BYTES`; ``auto`` counts when there are at least :data:`AUTO_MIN_PAIRS`
pairs and neither limit is hit, and enumerates all pairs otherwise.
"""

from __future__ import annotations

import logging
from typing import Any

import numpy as np

from ..errors import SdcInputError, one_of, param_error
from ..parallel import Runner, add_dicts, chunk_bounds, tree_reduce
from . import prl, prl_count

__all__ = ["COUNTING_MODES", "AUTO_MIN_PAIRS", "MAX_SHARE", "MAX_SHARE_LEVELS", "MAX_INDEX_BYTES",
           "DEFAULT_COUNT_ROWS", "choose_counting", "counted_pattern_counts", "counted_topc"]

log = logging.getLogger(__name__)

COUNTING_MODES = ("auto", "pairs", "count")

#: Fewest pairs for which ``auto`` takes the counting path (about 65,000 x 65,000).
AUTO_MIN_PAIRS = 2**32

#: Largest share of the pairs the counting path may enumerate one by one (binary
#: comparisons: an enumerated pair costs ~0.7 of an all-pairs comparison, measured at
#: 200,000 records; a margin for the sampling).
MAX_SHARE = 0.75

#: The same with several levels per column (an enumerated pair costs ~1.6 of an
#: all-pairs comparison there: break-even near 0.6).
MAX_SHARE_LEVELS = 0.4

#: Largest index of B (bytes) the counting path builds (it is held by every worker).
MAX_INDEX_BYTES = 3 * 2**30
#: largest pattern space the counting path counts in (a dense int64 vector per block)
MAX_DENSE_PATTERNS = 2**22

#: A rows per counting task.
DEFAULT_COUNT_ROWS = 8192

#: A rows sampled to estimate the enumerated share.
SAMPLE_ROWS = 2000


def _index(B: dict, cmp: prl.Comparison) -> dict:
    return prl_count.build_index(B, cmp)


def _slice(side: dict, s: int, e: int) -> dict:
    return {k: v[s:e] for k, v in side.items()}


def _share(A: dict, index: dict, cmp: prl.Comparison, rows: np.ndarray) -> float:
    return prl_count.enumerated_share({k: v[rows] for k, v in A.items()}, index, cmp)


def _count(a0: int, a1: int, A: dict, index: dict, cmp: prl.Comparison) -> dict:
    counts, enum = prl_count.count_block(_slice(A, a0, a1), index, cmp)
    return {"counts": counts, "enumerated": np.int64(enum)}


def choose_counting(runner: Runner, A: Any, B: Any, n_a: int, n_b: int,
                    cmp: prl.Comparison, *, mode: str = "auto",
                    blocking: Any = None) -> tuple[str, Any, dict]:
    """Decide between the pairs and the counting path.

    Returns
    -------
    path : {"pairs", "count"}
    index : handle of the index of B (``None`` for pairs)
    info : dict
        ``counting`` (the path and why), ``enumerated_share_estimate``.

    Raises
    ------
    SdcInputError
        ``mode="count"`` with a blocking rule, an index too large, or a
        counting path slower than all pairs.
    """
    if mode not in COUNTING_MODES:
        raise param_error("prl_counting", "prl", one_of(COUNTING_MODES), mode)
    if mode == "pairs":
        return "pairs", None, {"counting": "pairs"}
    def pairs(why: str, refusal: str, info: dict | None = None) -> tuple[str, Any, dict]:
        # prl_counting=count insists on the counting path: refuse; auto falls back to pairs
        if mode == "count":
            raise SdcInputError(refusal)
        if blocking is None:
            # a file this large takes long pair by pair: say why, and what would count instead
            log.warning("PRL: all %.3g record pairs are compared one by one, since %s; the "
                        "counting path needs key columns that agree less often (e.g. "
                        "prl_method l with one tolerance)", float(n_a) * float(n_b), why)
        return "pairs", None, {**(info or {}), "counting": f"pairs ({why})"}

    if blocking is not None:
        return pairs("blocking", "prl_counting=count counts all pairs and cannot follow a "
                                 "blocking rule; drop prl_blocking or use prl_counting=pairs")
    K = len(cmp.levels)
    if mode == "auto" and int(n_a) * int(n_b) < AUTO_MIN_PAIRS:
        return "pairs", None, {"counting": "pairs (small)"}
    if cmp.n_patterns > MAX_DENSE_PATTERNS:
        # the counting kernel adds into a dense vector over all patterns, per block
        return pairs("too many patterns to count densely",
                     f"the counting path keeps a count for each of the {cmp.n_patterns} "
                     f"comparison patterns (limit {MAX_DENSE_PATTERNS}); use fewer key "
                     "columns or levels, or prl_counting=pairs")
    need = prl_count.index_bytes(int(n_b), K)
    if need > MAX_INDEX_BYTES:
        return pairs("index too large",
                     f"the counting index of the masked file would take {need / 2**30:.1f} "
                     f"GiB (limit {MAX_INDEX_BYTES / 2**30:.0f} GiB) with {K} key columns; "
                     "use fewer key columns or prl_counting=pairs")
    index = runner.task(_index, B, cmp)
    rows = prl_count.sample_rows(int(n_a), SAMPLE_ROWS)
    share = float(runner.call(_share, A, index, cmp, rows))
    info = {"enumerated_share_estimate": share}
    limit = MAX_SHARE if bool(np.all(cmp.n_levels == 2)) else MAX_SHARE_LEVELS
    if share > limit:
        return pairs("counting would be slower",
                     f"the counting path would compare {100 * share:.0f}% of the record "
                     f"pairs one by one (more than {100 * limit:.0f}%), slower than all "
                     "pairs: the key columns agree too often at these tolerances; use "
                     "prl_counting=pairs or auto", info)
    return "count", index, {**info, "counting": "count"}


def counted_pattern_counts(runner: Runner, A: Any, index: Any, n_a: int, n_b: int,
                           cmp: prl.Comparison, *,
                           rows: int = DEFAULT_COUNT_ROWS) -> tuple[np.ndarray, int, int]:
    """Pattern counts over all ``n_a n_b`` pairs by the counting path.

    ``A`` is a handle of :func:`prl.prepare_side` of A, ``index`` of
    :func:`prl_count.build_index` of B. Returns the counts (int64, shape
    (n_patterns,)), the number of pairs and the number of pairs enumerated.
    """
    parts = [runner.task(_count, a0, a1, A, index, cmp)
             for a0, a1 in chunk_bounds(int(n_a), int(rows))]
    out = runner.result(tree_reduce(runner, add_dicts, parts))
    return (np.asarray(out["counts"], dtype=np.int64), int(n_a) * int(n_b),
            int(out["enumerated"]))


# ---- top-c candidates ------------------------------------------------------------

def _tree(A: dict, scale: np.ndarray | None = None) -> dict:
    return prl_count.build_tree(A, scale=scale)


def _search(b0: int, b1: int, B: dict, tree: dict, A: dict, cmp: prl.Comparison,
            wp: prl.WeightParams, c: int, truth: np.ndarray) -> dict:
    b = _slice(B, b0, b1)
    out = prl_count.topc_search(tree, b, cmp, wp, c)
    t = np.asarray(truth[b0:b1], dtype=np.int64)
    known = np.flatnonzero(t >= 0)
    wtrue = np.full(b1 - b0, np.nan)
    wtrue[known] = prl.pair_weights(A, b, t[known], known, cmp, wp)
    return {"idx": out["idx"], "w": out["w"], "wtrue": wtrue,
            "visited": np.array([out["visited"]], dtype=np.int64)}


def _concat(*parts: dict) -> dict:
    return {k: np.concatenate([p[k] for p in parts]) for k in parts[0]}


def counted_topc(runner: Runner, A: Any, B: Any, n_b: int, cmp: prl.Comparison,
                 wp: prl.WeightParams, c: int, truth: Any, *,
                 rows: int = DEFAULT_COUNT_ROWS) -> tuple[dict, int]:
    """Each B record's ``c`` best A records without all pairs (branch and bound).

    The same candidates, weights and tie order as the all-pairs pass 2 of
    :func:`~sdcdist.linkage.prl_drivers.probabilistic_linkage`: one task
    builds a KD-tree of A (:func:`prl_count.build_tree`), every block of B rows
    searches it (:func:`prl_count.topc_search`) and adds the weight of each
    record's true pair. Returns ``{"idx", "w", "wtrue"}`` (rows of B in order)
    and the number of pairs whose weight was computed.
    """
    tree = runner.task(_tree, A, prl_count.split_scale(wp, cmp))
    parts = [runner.task(_search, b0, b1, B, tree, A, cmp, wp, int(c), truth)
             for b0, b1 in chunk_bounds(int(n_b), int(rows))]
    out = runner.result(tree_reduce(runner, _concat, parts))
    visited = int(out.pop("visited").sum())
    return out, visited
