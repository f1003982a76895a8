"""Content order: a sequence of a file's records fixed by their values, not their rows.

Whatever draws records at random (the attacks' targets, a baseline's guesses) or breaks
ties between records draws from, or breaks by, this order, so that a figure is a function
of the file's contents: permuting the file's rows permutes them back into the same
sequence of values. Records are sorted by a 64-bit hash of all their values (splitmix64
over the bits of each value; -0.0 and 0.0 are one value, and so is every NaN); identical
records keep their relative row order, which does not matter, since they are
interchangeable.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np

from ..parallel import map_reduce

__all__ = ["row_hashes", "content_hashes", "content_order", "content_ranks"]


def _mix_np(z: np.ndarray) -> np.ndarray:
    z = (z ^ (z >> np.uint64(30))) * np.uint64(0xBF58476D1CE4E5B9)
    z = (z ^ (z >> np.uint64(27))) * np.uint64(0x94D049BB133111EB)
    return z ^ (z >> np.uint64(31))


def row_hashes(X: np.ndarray) -> np.ndarray:
    """A 64-bit hash of each row's values (missing values and -0.0 made canonical)."""
    Y = np.asarray(X, dtype=np.float64) + 0.0
    Y[np.isnan(Y)] = np.nan
    B = np.ascontiguousarray(Y).view(np.uint64)
    h = np.full(B.shape[0], np.uint64(0x9E3779B97F4A7C15) ^ np.uint64(B.shape[1]), np.uint64)
    with np.errstate(over="ignore"):
        for c in range(B.shape[1]):
            h = _mix_np(h ^ B[:, c])
    return h


def _block(X: Any, start: int, stop: int, cols: Sequence[int] | None) -> np.ndarray:
    B = np.asarray(X[start:stop], dtype=np.float64)
    return np.ascontiguousarray(B if cols is None else B[:, list(cols)])


def _chunk_hashes(start: int, stop: int, X: Any, cols: Sequence[int] | None) -> dict[str, Any]:
    return {"h": [row_hashes(_block(X, start, stop, cols))]}


def _cat_lists(*parts: dict[str, Any]) -> dict[str, Any]:
    return {k: [x for p in parts for x in p[k]] for k in parts[0]}


def content_hashes(runner: Any, X: Any, n: int, *, chunk_rows: int,
                   cols: Sequence[int] | None = None) -> np.ndarray:
    """:func:`row_hashes` of the ``n`` records of ``X`` (columns ``cols``, default all),
    read chunk by chunk; (n,) uint64 in row order."""
    parts = map_reduce(runner, _chunk_hashes, _cat_lists, [X], n, chunk_rows=chunk_rows,
                       args=(None if cols is None else list(cols),))
    return np.concatenate(parts["h"]) if parts["h"] else np.zeros(0, np.uint64)


def content_order(h: np.ndarray) -> np.ndarray:
    """The rows in content order (by hash; identical records keep their row order): (n,)
    int64, ``order[k]`` the row of the k-th record."""
    return np.argsort(np.asarray(h, np.uint64), kind="stable").astype(np.int64)


def content_ranks(order: np.ndarray) -> np.ndarray:
    """The inverse of :func:`content_order`: each row's position in content order."""
    r = np.empty(order.size, np.int64)
    r[order] = np.arange(order.size, dtype=np.int64)
    return r
