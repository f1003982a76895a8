"""Dask drivers for distance linkage: tile the pair space, run kernels, reduce.

The kernels live in :mod:`sdcdist.linkage.kernels`; the generic tiling and
tree reduction in :mod:`sdcdist.parallel`. Here: which kernel runs on which
block, and how partial results combine.

Two exact paths give bit-identical results:

- ``"brute"``: every block of query rows x candidate rows becomes a distance
  matrix (:func:`sdcdist.parallel.pairwise_reduce`);
- ``"index"`` (default): each block of candidate rows becomes one
  :class:`~sdcdist.linkage.kernels.CandidateIndex` task (duplicates collapsed,
  a KD-tree), which every block of query rows then queries. Memory per task
  is linear in the block sizes, and repeated values (a single integer key)
  cost one point per distinct value. When only the credits are wanted, a
  query row is settled as soon as two candidates are proven nearer than its
  true record (:func:`~sdcdist.linkage.kernels.index_credit_top2`).

Either way a query block's partials over candidate blocks merge with an
exact top-2 merge (tree reduction), and the tie credits are integer counts,
so totals never depend on block sizes or worker count.
"""

from __future__ import annotations

import functools
import math
from typing import Any

import numpy as np

from ..errors import SdcInputError
from ..parallel import Runner, chunk_bounds, pair_block_rows, pairwise_reduce, tree_reduce
from . import kernels

__all__ = ["distance_link_counts", "link_top2", "nearest_candidates", "standardized_keys",
           "row_truth", "truth_from_ids", "invert_truth", "linkage_block_rows",
           "LINK_METHODS"]

LINK_METHODS = ("index", "brute")

#: Candidate rows per KD-tree block by default.
INDEX_ROWS = 2**20


def standardized_keys(X: Any, cols: tuple[int, ...], what: str,
                      names: tuple[str, ...] | None = None) -> np.ndarray:
    """Task: the key columns of a file, z-scored with the file's own moments."""
    return kernels.standardize(X, cols, what=what, names=names)


def row_truth(n_query: int, n_cand: int) -> np.ndarray:
    """Row-order truth: query row i's true record is candidate row i (if it exists)."""
    t = np.arange(n_query)
    t[t >= n_cand] = -1
    return t


def truth_from_ids(id_original: np.ndarray, id_masked: np.ndarray) -> np.ndarray:
    """Truth from an identifier column present in both files.

    Returns, for each masked record, the row of the original record with the
    same identifier (-1 if none).

    Raises
    ------
    SdcInputError
        If an identifier repeats within a file.
    """
    a = np.asarray(id_original)
    b = np.asarray(id_masked)
    for v, what in ((a, "original"), (b, "masked")):
        uniq = np.unique(v)
        if uniq.size != v.size:
            raise SdcInputError(f"the identifier column repeats {v.size - uniq.size} value(s) "
                                f"in the {what} file; identifiers must be unique per file")
    order = np.argsort(a, kind="stable")
    pos = np.searchsorted(a[order], b)
    pos = np.minimum(pos, max(len(a) - 1, 0))
    hit = (len(a) > 0) & (a[order][pos] == b) if len(a) else np.zeros(len(b), bool)
    return np.where(hit, order[pos], -1).astype(np.int64)


def invert_truth(truth: Any, n_q: int, n_c: int) -> np.ndarray:
    """Task: turn masked->original truth into original->masked (-1 where absent).

    ``truth`` is None for row order.
    """
    t = row_truth(n_q, n_c) if truth is None else np.asarray(truth, dtype=np.int64)
    inv = np.full(n_c, -1, dtype=np.int64)
    ok = np.flatnonzero(t >= 0)
    if np.unique(t[ok]).size != ok.size:
        raise SdcInputError("two masked records claim the same original record in the truth; "
                            "each original record can be the true record of one masked record")
    inv[t[ok]] = ok
    return inv


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
    return kernels.block_top2(kernels.pair_distances(Q[a0:a1], C[b0:b1], metric))


def _index_task(b0: int, b1: int, C: np.ndarray) -> kernels.CandidateIndex:
    return kernels.build_index(C[b0:b1], offset=b0)


def _index_block(a0: int, a1: int, Q: np.ndarray, index: kernels.CandidateIndex,
                 metric: str) -> dict:
    return kernels.index_top2(Q[a0:a1], index, metric)


def _index_credit_block(a0: int, a1: int, Q: np.ndarray, index: kernels.CandidateIndex,
                        C: np.ndarray, truth: np.ndarray, metric: str) -> dict:
    dtrue = kernels.true_distances(Q[a0:a1], C, truth[a0:a1], metric)
    return kernels.index_credit_top2(Q[a0:a1], dtrue, index, metric)


def _finish(a0: int, a1: int, top: dict, Q: np.ndarray, C: np.ndarray, truth: np.ndarray,
            metric: str, keep: bool) -> dict:
    dtrue = kernels.true_distances(Q[a0:a1], C, truth[a0:a1], metric)
    first, second = kernels.top2_link_credit(top, dtrue)
    out = {"first": kernels.credit_counts(first), "second": kernels.credit_counts(second),
           "n": a1 - a0}
    if keep:
        out["nearest"] = top["d1"]
    return out


def _combine(*parts: dict) -> dict:
    out = {"first": kernels.add_counts(*[p["first"] for p in parts]),
           "second": kernels.add_counts(*[p["second"] for p in parts]),
           "n": sum(p["n"] for p in parts)}
    if "nearest" in parts[0]:
        out["nearest"] = np.concatenate([p["nearest"] for p in parts])
    return out


def _check_method(method: str) -> None:
    if method not in LINK_METHODS:
        raise SdcInputError(f"The 'linkage_method' option must be one of "
                            f"{', '.join(LINK_METHODS)}. Got {method!r} instead.")


# -- drivers -------------------------------------------------------------------------

def link_top2(runner: Runner, Q: Any, C: Any, n_q: int, n_c: int, width: int, *,
              metric: str = "sqeuclidean", truth: Any = None,
              block_memory: int = 64 * 2**20, block_rows: tuple[int, int] | None = None,
              method: str = "index", keep_nearest: bool = False) -> dict[str, Any]:
    """Nearest-neighbour linkage of query rows to candidate rows, exact.

    Parameters
    ----------
    Q, C : array handles, shapes (n_q, width), (n_c, width)
        Transformed key columns of the query file and the candidate file.
    metric : {"sqeuclidean", "cityblock", "chebyshev"}
    truth : array handle of int, shape (n_q,), optional
        Row of each query's true candidate (-1 if absent); row order by default.
    block_rows : (int, int), optional
        Rows of Q and of C per block; sized from ``block_memory`` by default.
    method : {"index", "brute"}
        KD-tree per candidate block or distance matrices; identical results.
    keep_nearest : bool
        Also return each query's nearest distance.

    Returns
    -------
    dict
        ``first`` and ``second``: expected number of query rows whose true
        record is their nearest / second-nearest candidate (1/t rule); ``n``;
        ``nearest`` (ndarray (n_q,)) when asked.
    """
    _check_method(method)
    if truth is None:
        truth = runner.scatter(row_truth(n_q, n_c))
    rows_q, rows_c = block_rows or linkage_block_rows(n_q, n_c, width, method=method,
                                                      block_memory=block_memory)
    if method == "brute":
        out = pairwise_reduce(runner, _brute_block, kernels.merge_top2, _finish, _combine,
                              Q, C, n_q, n_c, rows_a=rows_q, rows_b=rows_c,
                              args=(truth, metric, keep_nearest))
    else:
        indexes = [runner.submit(_index_task, b0, b1, C) for b0, b1 in chunk_bounds(n_c, rows_c)]
        totals = []
        for a0, a1 in chunk_bounds(n_q, rows_q):
            parts = [runner.submit(_index_block, a0, a1, Q, ix, metric) if keep_nearest
                     else runner.submit(_index_credit_block, a0, a1, Q, ix, C, truth, metric)
                     for ix in indexes]
            merged = tree_reduce(runner, kernels.merge_top2, parts)
            totals.append(runner.submit(_finish, a0, a1, merged, Q, C, truth, metric,
                                        keep_nearest))
        out = runner.gather(tree_reduce(runner, _combine, totals))
    res = {"first": kernels.credit_total(out["first"]),
           "second": kernels.credit_total(out["second"]), "n": out["n"]}
    if keep_nearest:
        res["nearest"] = out["nearest"]
    return res


def distance_link_counts(runner: Runner, Q: Any, C: Any, n_q: int, n_c: int, width: int,
                         *, truth: Any = None, block_memory: int = 64 * 2**20,
                         block_rows: tuple[int, int] | None = None,
                         method: str = "index") -> dict[str, float]:
    """Euclidean nearest-neighbour linkage (DLD, DLD2): :func:`link_top2` on squared distances."""
    return link_top2(runner, Q, C, n_q, n_c, width, metric="sqeuclidean", truth=truth,
                     block_memory=block_memory, block_rows=block_rows, method=method)


def _knn_block(a0: int, a1: int, Q: np.ndarray, index: kernels.CandidateIndex, c: int,
               metric: str) -> tuple[np.ndarray, np.ndarray]:
    return kernels.index_knn(Q[a0:a1], index, c, metric)


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
    indexes = [runner.submit(_index_task, b0, b1, C) for b0, b1 in chunk_bounds(n_c, rows_c)]
    merge = functools.partial(_knn_merge, c)
    blocks = []
    for a0, a1 in chunk_bounds(n_q, rows_q):
        parts = [runner.submit(_knn_block, a0, a1, Q, ix, c, metric) for ix in indexes]
        blocks.append(tree_reduce(runner, merge, parts))
    return runner.gather(tree_reduce(runner, _stack_rows, blocks))
