"""The columns an original file and a release share, and their value counts.

What the measures a synthetic (or any) release is judged by read first
(:mod:`~sdcdist.metrics.loss.quality`, :mod:`~sdcdist.metrics.loss.pmse`,
:mod:`~sdcdist.metrics.loss.regression`): the shared columns (the weight and the household
id left out) and each column's distinct values with their counts, gathered chunk by chunk
as exact integers, so what is computed from them depends only on the records' contents.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np

from ...errors import SdcInputError, column_positions
from ...parallel import map_reduce
from .._registry import MeasureContext

__all__ = ["shared_columns", "profile_chunk", "merge_counts", "merge_profiles",
           "column_profiles", "READS"]

#: the measures leave the household id out when one is named (and the weight: an input
#: of the design, not a column of the release)
READS = ("household",)


# -- which columns -------------------------------------------------------------------

def shared_columns(ctx: MeasureContext, name: str) -> tuple[list[str], list[int], list[int],
                                                            list[bool]]:
    """The columns both files share, in the original's order, the weight and the household
    id left out: names, positions in each file, and whether each is categorical."""
    names = [c for c in ctx.columns if c in set(ctx.masked_columns)
             and c not in (ctx.weight, ctx.household)]
    if not names:
        raise SdcInputError(f"{name} compares the columns both files share, and they share "
                            "none besides the weight; give both files the same column names")
    po = column_positions(names, ctx.columns, what="column", where="the original file")
    pm = column_positions(names, ctx.masked_columns, what="column", where="the masked file")
    return names, po, pm, [c in ctx.categorical for c in names]


# -- pass 1: value counts of every column --------------------------------------------

def profile_chunk(start: int, stop: int, X: Any, pos: Sequence[int]) -> dict[str, Any]:
    """Task: per column of ``pos``, the sorted distinct values of records ``start:stop``
    with their counts (NaN left out and counted apart; -0.0 counted as 0.0)."""
    B = np.asarray(X[start:stop], dtype=np.float64)[:, list(pos)] + 0.0
    vals, cnts, miss = [], [], []
    for j in range(B.shape[1]):
        col = B[:, j]
        m = np.isnan(col)
        v, c = np.unique(col[~m], return_counts=True)
        vals.append(v)
        cnts.append(c.astype(np.int64))
        miss.append(int(m.sum()))
    return {"values": vals, "counts": cnts, "missing": np.array(miss, np.int64),
            "n": int(B.shape[0])}


def merge_counts(values: Sequence[np.ndarray], counts: Sequence[np.ndarray]
                  ) -> tuple[np.ndarray, np.ndarray]:
    v = np.concatenate(values)
    c = np.concatenate(counts)
    u, inv = np.unique(v, return_inverse=True)
    out = np.zeros(u.size, np.int64)
    np.add.at(out, inv.ravel(), c)
    return u, out


def merge_profiles(*parts: dict[str, Any]) -> dict[str, Any]:
    """``combine`` of :func:`profile_chunk` (exact: unions of values, integer sums)."""
    m = len(parts[0]["values"])
    vals, cnts = [], []
    for j in range(m):
        u, c = merge_counts([p["values"][j] for p in parts], [p["counts"][j] for p in parts])
        vals.append(u)
        cnts.append(c)
    return {"values": vals, "counts": cnts,
            "missing": np.sum([p["missing"] for p in parts], axis=0),
            "n": sum(p["n"] for p in parts)}


def column_profiles(ctx: MeasureContext, name: str) -> dict[str, Any]:
    """Both files' value counts (cached), with the column description."""
    names, po, pm, cat = shared_columns(ctx, name)

    def compute() -> dict[str, Any]:
        chunk = int(ctx.options["chunk_rows"])
        a = map_reduce(ctx.runner, profile_chunk, merge_profiles, [ctx.original],
                       ctx.shape_original[0], chunk_rows=chunk, args=(tuple(po),))
        b = map_reduce(ctx.runner, profile_chunk, merge_profiles, [ctx.masked],
                       ctx.shape_masked[0], chunk_rows=chunk, args=(tuple(pm),))
        return {"names": names, "po": po, "pm": pm, "cat": cat, "a": a, "b": b}
    return ctx.cached(("synthutility_profiles", tuple(names)), compute)

