"""Disclosure-risk metrics: distance-based linkage and rank interval disclosure."""

from __future__ import annotations

from typing import Any

import numpy as np

from ..linkage.drivers import distance_link_counts, standardized_keys
from ..parallel import add_dicts
from ._registry import MeasureContext, register

__all__ = ["distance_linkage", "interval_counts"]


def distance_linkage(ctx: MeasureContext, keys: tuple[int, ...]) -> dict[str, float]:
    """Nearest-neighbour linkage of masked to original records on ``keys`` (cached)."""
    def run() -> dict[str, float]:
        names = tuple(ctx.columns[k] for k in keys)
        Q = ctx.runner.submit(standardized_keys, ctx.masked, keys, "masked file", names)
        C = ctx.runner.submit(standardized_keys, ctx.original, keys, "original file", names)
        br = ctx.options.get("block_rows")
        return distance_link_counts(ctx.runner, Q, C, ctx.shape_masked[0],
                                    ctx.shape_original[0], len(keys), truth=ctx.truth,
                                    block_memory=int(ctx.options["block_memory"]),
                                    block_rows=tuple(br) if br else None)
    return ctx.cached(("distance_linkage", keys), run)


@register("DLD", kind="risk", keysets=True, same_shape=False, reference="[DMT §4.1]",
          description="distance-based linkage: % of masked records whose nearest original "
                      "record (standardised Euclidean, key columns) is their own")
def dld(ctx: MeasureContext, keys: tuple[int, ...]) -> float:
    r = distance_linkage(ctx, keys)
    return 100.0 * r["first"] / r["n"]


def interval_counts(j: int, X: Any, Y: Any, ps: tuple[float, ...]) -> dict[str, np.ndarray]:
    """Task for one column: how many original values fall in the rank intervals of ID1.

    The masked column is sorted once (stable); for each p the interval of record
    i is ``[s[r_i - h], s[r_i + h]]`` (clamped), ``r_i`` the rank of its masked
    value and ``h = floor(p n / 100)``.
    """
    x = np.asarray(X[:, j], dtype=np.float64)
    y = np.asarray(Y[:, j], dtype=np.float64)
    n = y.shape[0]
    order = np.argsort(y, kind="stable")
    s = y[order]
    rank = np.empty(n, dtype=np.int64)
    rank[order] = np.arange(n)
    inside = np.zeros(len(ps), dtype=np.int64)
    for i, p in enumerate(ps):
        h = int(np.floor(p * n / 100.0))
        lo = s[np.maximum(rank - h, 0)]
        hi = s[np.minimum(rank + h, n - 1)]
        inside[i] = int(np.count_nonzero((lo <= x) & (x <= hi)))
    return {"inside": inside, "n": np.array(n)}


@register("ID1", kind="risk", reference="[DMT §4.3]",
          description="rank interval disclosure: % of original values inside the interval of "
                      "masked values within p% of ranks, mean over p = 1..10")
def id1(ctx: MeasureContext) -> float:
    ps = tuple(float(p) for p in ctx.options.get("id_p", range(1, 11)))
    parts = [ctx.runner.submit(interval_counts, j, ctx.original, ctx.masked, ps)
             for j in range(ctx.shape_original[1])]
    from ..parallel import tree_reduce
    tot = ctx.runner.gather(tree_reduce(ctx.runner, add_dicts, parts))
    return float(np.mean(100.0 * tot["inside"] / tot["n"]))
