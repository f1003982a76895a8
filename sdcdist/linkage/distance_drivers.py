"""Drivers of distance linkage: which kernel runs on which block, and how partials combine.

The kernels live in :mod:`sdcdist.linkage.distance`; the generic tiling and
tree reductions in :mod:`sdcdist.parallel.pairs`.

Two exact paths give bit-identical results:

- ``"brute"``: every block of query rows x candidate rows becomes a distance
  matrix (:func:`sdcdist.parallel.pairwise_reduce`);
- ``"index"`` (default, :func:`sdcdist.parallel.indexed_reduce`): each block of
  candidate rows becomes one :class:`~sdcdist.linkage.distance.CandidateIndex` task
  (duplicates collapsed, a KD-tree), which every block of query rows then
  queries. Memory per task
  is linear in the block sizes, and repeated values (a single integer key)
  cost one point per distinct value. When only the credits are wanted, a
  query row is settled as soon as two candidates are proven nearer than its
  true record (:func:`~sdcdist.linkage.distance.index_credit_top2`).

Either way a query block's partials over candidate blocks merge with an
exact top-2 merge (tree reduction), and the tie credits are integer counts,
so totals never depend on block sizes or worker count.
"""

from __future__ import annotations

import functools
import math
from typing import Any

import numpy as np

from ..errors import option_error
from ..parallel import Runner, indexed_reduce, pair_block_rows, pairwise_reduce
from . import distance
from .gower import Gower, gower_top2
from .truth import row_truth

__all__ = ["link_top2", "nearest_candidates", "standardized_keys", "linkage_block_rows",
           "gower_block_rows", "LINK_METHODS"]

LINK_METHODS = ("index", "brute")

#: Candidate rows per KD-tree block by default.
INDEX_ROWS = 2**20


def standardized_keys(X: Any, cols: tuple[int, ...], what: str,
                      names: tuple[str, ...] | None = None) -> np.ndarray:
    """Task: the key columns of a file, z-scored with the file's own moments."""
    return distance.standardize(X, cols, what=what, names=names)


def linkage_block_rows(n_q: int, n_c: int, width: int, *, method: str,
                       block_memory: int) -> tuple[int, int]:
    """Rows of query and candidate blocks for ``method`` within ``block_memory`` bytes."""
    if method == "brute":
        return pair_block_rows(n_q, n_c, width, memory_bytes=block_memory)
    rows_q = int(min(max(n_q, 1), max(256, block_memory // (8 * 16 * (width + 4)))))
    # at least ~16 query blocks on large files, so the workers stay evenly busy
    rows_q = min(rows_q, max(4096, -(-n_q // 16)))
    return rows_q, int(min(max(n_c, 1), INDEX_ROWS))


# -- tasks ---------------------------------------------------------------------------

def _brute_block(a0: int, a1: int, b0: int, b1: int, Q: np.ndarray, C: np.ndarray,
                 truth: np.ndarray, metric: str, keep: bool) -> dict:
    return distance.block_top2(distance.pair_distances(Q[a0:a1], C[b0:b1], metric))


def _gower_block(a0: int, a1: int, b0: int, b1: int, Q: np.ndarray, C: np.ndarray,
                 truth: np.ndarray, metric: Gower, keep: bool) -> dict:
    return gower_top2(Q[a0:a1], C[b0:b1], metric)


def gower_block_rows(n_q: int, n_c: int, width: int, *, block_memory: int
                     ) -> tuple[int, int]:
    """Rows of query and candidate blocks of Gower linkage: its kernel holds no pair
    matrix, only the two blocks' rows, so a candidate block holds ``block_memory`` bytes
    of rows; at least ~16 query blocks on large files keep the workers evenly busy."""
    per_row = 8 * (max(width, 1) + 4)
    rows_c = int(min(max(n_c, 1), max(16, block_memory // (2 * per_row))))
    rows_q = int(min(max(n_q, 1), max(16, block_memory // (2 * per_row)),
                     max(4096, -(-n_q // 16))))
    return rows_q, rows_c


def _index_task(b0: int, b1: int, C: np.ndarray) -> distance.CandidateIndex:
    return distance.build_index(C[b0:b1], offset=b0)


def _index_block(a0: int, a1: int, Q: np.ndarray, index: distance.CandidateIndex,
                 metric: str) -> dict:
    return distance.index_top2(Q[a0:a1], index, metric)


def _index_credit_block(a0: int, a1: int, Q: np.ndarray, index: distance.CandidateIndex,
                        C: np.ndarray, truth: np.ndarray, metric: str) -> dict:
    dtrue = distance.true_distances(Q[a0:a1], C, truth[a0:a1], metric)
    return distance.index_credit_top2(Q[a0:a1], dtrue, index, metric)


def _finish(a0: int, a1: int, top: dict, Q: np.ndarray, C: np.ndarray, truth: np.ndarray,
            metric: str, keep: bool) -> dict:
    dtrue = distance.true_distances(Q[a0:a1], C, truth[a0:a1], metric)
    first, second = distance.top2_link_credit(top, dtrue)
    out = {"first": distance.credit_counts(first), "second": distance.credit_counts(second),
           "n": a1 - a0}
    if keep:
        out["nearest"] = top["d1"]
    return out


def _combine(*parts: dict) -> dict:
    out = {"first": distance.add_counts(*[p["first"] for p in parts]),
           "second": distance.add_counts(*[p["second"] for p in parts]),
           "n": sum(p["n"] for p in parts)}
    if "nearest" in parts[0]:
        out["nearest"] = np.concatenate([p["nearest"] for p in parts])
    return out


def _check_method(method: str) -> None:
    if method not in LINK_METHODS:
        raise option_error("linkage_method", f"one of {', '.join(LINK_METHODS)}", method)


# -- drivers -------------------------------------------------------------------------

def link_top2(runner: Runner, Q: Any, C: Any, n_q: int, n_c: int, width: int, *,
              metric: str = "sqeuclidean", truth: Any = None,
              block_memory: int = 64 * 2**20, block_rows: tuple[int, int] | None = None,
              method: str = "index", keep_nearest: bool = False,
              counts: bool = False) -> dict[str, Any]:
    """Nearest-neighbour linkage of query rows to candidate rows, exact.

    Parameters
    ----------
    Q, C : array handles, shapes (n_q, width), (n_c, width)
        Transformed key columns of the query file and the candidate file.
    metric : {"sqeuclidean", "cityblock", "chebyshev"} or Gower
        A :class:`~sdcdist.linkage.gower.Gower` links on prepared mixed columns
        (:mod:`sdcdist.linkage.gower`) by all pairs, whatever ``method``.
    truth : array handle of int, shape (n_q,), optional
        Row of each query's true candidate (-1 if absent); row order by default.
    block_rows : (int, int), optional
        Rows of Q and of C per block; sized from ``block_memory`` by default.
    method : {"index", "brute"}
        KD-tree per candidate block or distance matrices; identical results.
    keep_nearest : bool
        Also return each query's nearest distance.
    counts : bool
        Also return the integer tie counts (``first_counts``, ``second_counts``),
        which add up exactly over several calls.

    Returns
    -------
    dict
        ``first`` and ``second``: expected number of query rows whose true
        record is their nearest / second-nearest candidate (1/t rule);
        ``first_hits`` and ``second_hits`` (int): query rows whose true record
        is among the candidates tied at the nearest / second-nearest place (a
        full hit each, the tie-as-hit rule); ``n``;
        ``nearest`` (ndarray (n_q,)) when asked.
    """
    _check_method(method)
    if truth is None:
        truth = runner.share(row_truth(n_q, n_c))
    gower = isinstance(metric, Gower)
    if gower:
        # no KD-tree on a mixed distance: all pairs, by the compiled top-2 kernel
        method = "brute"
        rows_q, rows_c = block_rows or gower_block_rows(n_q, n_c, width,
                                                        block_memory=block_memory)
    else:
        rows_q, rows_c = block_rows or linkage_block_rows(n_q, n_c, width, method=method,
                                                          block_memory=block_memory)
    if method == "brute":
        out = pairwise_reduce(runner, _gower_block if gower else _brute_block,
                              distance.merge_top2, _finish, _combine,
                              Q, C, n_q, n_c, rows_a=rows_q, rows_b=rows_c,
                              args=(truth, metric, keep_nearest))
    else:
        query, query_args = ((_index_block, (metric,)) if keep_nearest
                             else (_index_credit_block, (C, truth, metric)))
        out = indexed_reduce(runner, _index_task, query, distance.merge_top2, _combine,
                             Q, C, n_q, n_c, rows_q=rows_q, rows_c=rows_c, finish=_finish,
                             query_args=query_args, finish_args=(truth, metric, keep_nearest))
    res = {"first": distance.credit_total(out["first"]),
           "second": distance.credit_total(out["second"]),
           "first_hits": distance.hit_total(out["first"]),
           "second_hits": distance.hit_total(out["second"]), "n": out["n"]}
    if keep_nearest:
        res["nearest"] = out["nearest"]
    if counts:
        res["first_counts"], res["second_counts"] = out["first"], out["second"]
    return res


def _knn_block(a0: int, a1: int, Q: np.ndarray, index: distance.CandidateIndex, c: int,
               metric: str) -> tuple[np.ndarray, np.ndarray]:
    return distance.index_knn(Q[a0:a1], index, c, metric)


def _knn_merge(c: int, *parts: tuple[np.ndarray, np.ndarray]) -> tuple[np.ndarray, np.ndarray]:
    d = np.concatenate([p[0] for p in parts], axis=1)
    r = np.concatenate([p[1] for p in parts], axis=1)
    order = np.lexsort((r, d), axis=1)[:, :c]   # by distance, then row number
    return np.take_along_axis(d, order, 1), np.take_along_axis(r, order, 1)


def _stack_rows(*parts: tuple[np.ndarray, np.ndarray]) -> tuple[np.ndarray, np.ndarray]:
    return (np.concatenate([p[0] for p in parts]), np.concatenate([p[1] for p in parts]))


def nearest_candidates(runner: Runner, Q: Any, C: Any, n_q: int, n_c: int, width: int,
                       c: int, *, metric: str = "sqeuclidean",
                       block_memory: int = 64 * 2**20,
                       block_rows: tuple[int, int] | None = None
                       ) -> tuple[np.ndarray, np.ndarray]:
    """The ``c`` nearest candidates of every query row (a sparse assignment graph).

    Returns ``(dist, rows)``, shapes (n_q, min(c, n_c)): exact distances and
    candidate row numbers, nearest first (ties by row number).
    """
    rows_q, rows_c = block_rows or linkage_block_rows(n_q, n_c, width, method="index",
                                                      block_memory=block_memory)
    rows_q = max(1, min(rows_q, math.ceil(block_memory / (16 * max(c, 1) * 4))))
    return indexed_reduce(runner, _index_task, _knn_block, functools.partial(_knn_merge, c),
                          _stack_rows, Q, C, n_q, n_c, rows_q=rows_q, rows_c=rows_c,
                          query_args=(c, metric))
