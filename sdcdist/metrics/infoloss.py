"""Information-loss metrics computed as record-chunk reductions.

Each chunk function returns a small dict of sufficient statistics for its
records; ``combine`` merges them (Chan's update for moments, plain sums for
error totals); ``aggregate`` forms the metric. The reduction chunking is the
fixed ``chunk_rows`` option, never the storage chunking, so results do not
depend on how the data were stored or on the number of workers.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from ..errors import SdcInputError
from ..parallel import map_reduce
from ._registry import MeasureContext, register

__all__ = ["moments_chunk", "combine_moments", "il1s_stats"]


def moments_chunk(start: int, stop: int, X: Any, Y: Any) -> dict[str, np.ndarray]:
    """Per-chunk statistics: count, column means and M2 of X, column sums of |X - Y|."""
    x = np.asarray(X[start:stop], dtype=np.float64)
    y = np.asarray(Y[start:stop], dtype=np.float64)
    mean = x.mean(axis=0)
    return {"n": np.array(x.shape[0]), "mean": mean,
            "m2": ((x - mean) ** 2).sum(axis=0), "absdiff": np.abs(x - y).sum(axis=0)}


def combine_moments(*parts: dict[str, np.ndarray]) -> dict[str, np.ndarray]:
    """Merge chunk statistics (Chan et al.'s pairwise update for mean and M2)."""
    out = dict(parts[0])
    for p in parts[1:]:
        na, nb = out["n"], p["n"]
        n = na + nb
        delta = p["mean"] - out["mean"]
        out = {"n": n, "mean": out["mean"] + delta * (nb / n),
               "m2": out["m2"] + p["m2"] + delta * delta * (na * nb / n),
               "absdiff": out["absdiff"] + p["absdiff"]}
    return out


def il1s_stats(ctx: MeasureContext) -> dict[str, np.ndarray]:
    """One pass over both files: moments of X and |X - X'| totals (shared, cached)."""
    return ctx.cached("moments_absdiff", lambda: map_reduce(
        ctx.runner, moments_chunk, combine_moments, [ctx.original, ctx.masked],
        ctx.shape_original[0], chunk_rows=int(ctx.options["chunk_rows"])))


def _sd(stats: dict[str, np.ndarray], columns: tuple[str, ...], metric: str) -> np.ndarray:
    sd = np.sqrt(stats["m2"] / (stats["n"] - 1))
    bad = [columns[j] for j in np.flatnonzero(~(sd > 0))]
    if bad:
        raise SdcInputError(f"{metric} divides by each original column's standard deviation, "
                            f"and column(s) {bad} are constant; drop them first")
    return sd


@register("IL1s", kind="loss", reference="[YWC]",
          description="mean over all values of |x - x'| / (sqrt(2) s_j), s_j the original sd")
def il1s(ctx: MeasureContext) -> float:
    st = il1s_stats(ctx)
    sd = _sd(st, ctx.columns, "IL1s")
    return float(np.mean(st["absdiff"] / (np.sqrt(2.0) * sd)) / st["n"])
