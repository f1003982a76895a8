"""Dask drivers for distance linkage: tile the pair space, run kernels, reduce.

The kernels live in :mod:`sdcdist.linkage.kernels`; the generic tiling and
tree reduction in :mod:`sdcdist.parallel`. Here: which kernel runs on which
block, and how partial results combine.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from ..parallel import Runner, pair_block_rows, pairwise_reduce
from . import kernels

__all__ = ["distance_link_counts", "standardized_keys", "row_truth"]


def standardized_keys(X: Any, cols: tuple[int, ...], what: str,
                      names: tuple[str, ...] | None = None) -> np.ndarray:
    """Task: the key columns of a file, z-scored with the file's own moments."""
    return kernels.standardize(X, cols, what=what, names=names)


def row_truth(n_query: int, n_cand: int) -> np.ndarray:
    """Row-order truth: query row i's true record is candidate row i (if it exists)."""
    t = np.arange(n_query)
    t[t >= n_cand] = -1
    return t


def _top2_block(a0: int, a1: int, b0: int, b1: int, Q: np.ndarray, C: np.ndarray,
                truth: np.ndarray) -> dict:
    return kernels.block_top2(kernels.sq_distances(Q[a0:a1], C[b0:b1]))


def _top2_finish(a0: int, a1: int, top: dict, Q: np.ndarray, C: np.ndarray,
                 truth: np.ndarray) -> dict:
    dtrue = kernels.true_sq_distances(Q[a0:a1], C, truth[a0:a1])
    first, second = kernels.top2_link_credit(top, dtrue)
    return {"first": kernels.credit_counts(first), "second": kernels.credit_counts(second),
            "n": a1 - a0}


def _add_credit(*parts: dict) -> dict:
    return {"first": kernels.add_counts(*[p["first"] for p in parts]),
            "second": kernels.add_counts(*[p["second"] for p in parts]),
            "n": sum(p["n"] for p in parts)}


def distance_link_counts(runner: Runner, Q: Any, C: Any, n_q: int, n_c: int, width: int,
                         *, truth: Any = None, block_memory: int = 64 * 2**20,
                         block_rows: tuple[int, int] | None = None) -> dict[str, float]:
    """Nearest-neighbour linkage of query rows (masked) to candidates (original).

    Parameters
    ----------
    Q, C : array handles, shapes (n_q, width), (n_c, width)
        Standardised key columns of the masked and original file.
    truth : array handle of int, shape (n_q,), optional
        Row of each query's true candidate (-1 if absent); row order by default.
    block_rows : (int, int), optional
        Rows of Q and of C per block; sized from ``block_memory`` by default.

    Returns
    -------
    dict
        ``first`` and ``second``: expected number of query rows whose true
        record is their nearest / second-nearest candidate (1/t rule); ``n``.
    """
    if truth is None:
        truth = runner.scatter(row_truth(n_q, n_c))
    rows_q, rows_c = block_rows or pair_block_rows(n_q, n_c, width, memory_bytes=block_memory)
    out = pairwise_reduce(runner, _top2_block, kernels.merge_top2, _top2_finish, _add_credit,
                          Q, C, n_q, n_c, rows_a=rows_q, rows_b=rows_c, args=(truth,))
    return {"first": kernels.credit_total(out["first"]),
            "second": kernels.credit_total(out["second"]), "n": out["n"]}
