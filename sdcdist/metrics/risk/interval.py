"""Interval disclosure: how often an original value lies in an interval around its masked
value (ID1, ID2 of [DMT], and sdcMicro's SDID).

The three metrics share one pass per column (:func:`interval_counts`, all percentages p
at once, cached through :meth:`MeasureContext.cached`); each original column is compared
with the masked column of the same name.

Options (``ctx.options``; declared and checked in :mod:`sdcdist.options`)
-------------------------------------------------------------------------
``id_p``
    The percentages of ID1/ID2 (1..10).
``sdid_k``
    The k of SDID (0.05).
"""

from __future__ import annotations

from typing import Any

import numpy as np

from ...errors import count_error
from ...moments import column_moments
from ...parallel import add_dicts, map_reduce, tree_reduce
from .._registry import MeasureContext, register
from ..content import row_hashes

__all__ = ["interval_counts"]

def interval_counts(ja: int, jb: int, X: Any, Y: Any, ps: tuple[float, ...]
                    ) -> dict[str, np.ndarray]:
    """Task for one column: original values inside the ID1 and ID2 intervals, all p at once.

    ID1: the masked column is sorted once (ties in content order: by a hash of the
    record's original and masked values); for each p the interval of
    record i is ``[s[r_i - h], s[r_i + h]]`` (clamped), ``r_i`` the rank of its
    masked value and ``h = floor(p n / 100)``. ID2: ``x' ± p s' / 100``.
    Also returns the masked column's sd (ddof 1, summed in sorted order:
    :func:`sdcdist.moments.column_moments`) for SDID.
    """
    x = np.asarray(X[:, ja], dtype=np.float64)
    y = np.asarray(Y[:, jb], dtype=np.float64)
    n = y.shape[0]
    # tied masked values in content order (by a hash of the record's original and masked
    # value): the same ranks and counts in every row order, and as random as the row order
    # (ordering ties by the original value would put it inside its interval more often);
    # records equal in both values are interchangeable
    order = np.lexsort((row_hashes(np.column_stack([x, y])), y))
    s = y[order]                  # masked values by rank
    xs = x[order]                 # each record's original value, at its masked rank
    # summed over the sorted values: the same float in every row order, so which values
    # fall on an interval's bound does not depend on the order of the records
    sd = float(column_moments(y[:, None])[1][0]) if n > 1 else 0.0
    id1 = np.zeros(len(ps), dtype=np.int64)
    id2 = np.zeros(len(ps), dtype=np.int64)
    for i, p in enumerate(ps):
        h = min(int(np.floor(p * n / 100.0)), n - 1)
        # rank r's interval is [s[max(r - h, 0)], s[min(r + h, n - 1)]]: shifted views of s
        lo_ok = np.concatenate([xs[:h] >= s[0], xs[h:] >= s[:n - h]])
        hi_ok = np.concatenate([xs[:n - h] <= s[h:], xs[n - h:] <= s[-1]])
        id1[i] = int(np.count_nonzero(lo_ok & hi_ok))
        w = p * sd / 100.0
        id2[i] = int(np.count_nonzero((y - w <= x) & (x <= y + w)))
    return {"id1": id1, "id2": id2, "n": np.array(n), "sd": np.array([sd])}


def _concat_sd(*parts: dict) -> dict:
    out = add_dicts(*[{k: p[k] for k in ("id1", "id2", "n")} for p in parts])  # integers
    out["sd"] = np.concatenate([p["sd"] for p in parts])
    return out


def _shared_columns(ctx: MeasureContext) -> list[tuple[int, int]]:
    pos = {c: i for i, c in enumerate(ctx.masked_columns)}
    pairs = [(i, pos[c]) for i, c in enumerate(ctx.columns) if c in pos]
    if not pairs:
        raise count_error("The original and masked files", "at least 1", "column name in "
                          "common", 0, "interval disclosure compares each original column with "
                          "the masked column of the same name")
    return pairs


def _intervals(ctx: MeasureContext) -> dict[str, Any]:
    def run() -> dict[str, Any]:
        ps = tuple(float(p) for p in ctx.options["id_p"])
        parts = [ctx.runner.task(interval_counts, a, b, ctx.original, ctx.masked, ps)
                 for a, b in _shared_columns(ctx)]
        return ctx.runner.result(tree_reduce(ctx.runner, _concat_sd, parts))
    return ctx.cached("intervals", run)


@register("ID1", kind="risk", reference="[DMT §4.3]", options=("id_p",),
          unit="% of values",
          description="rank interval disclosure: % of original values inside the interval of "
                      "masked values within p% of ranks, mean over p = 1..10")
def id1(ctx: MeasureContext) -> float:
    tot = _intervals(ctx)
    return float(np.mean(100.0 * tot["id1"] / tot["n"]))


@register("ID2", kind="risk", reference="[DMT §6]", options=("id_p",),
          unit="% of values",
          description="sd interval disclosure: % of original values within x' ± p s'/100, "
                      "mean over p = 1..10")
def id2(ctx: MeasureContext) -> float:
    tot = _intervals(ctx)
    return float(np.mean(100.0 * tot["id2"] / tot["n"]))


def _sdid_chunk(start: int, stop: int, X: Any, Y: Any, ja: tuple[int, ...],
                jb: tuple[int, ...], half: np.ndarray) -> dict[str, int]:
    x = np.asarray(X[start:stop][:, list(ja)], dtype=np.float64)
    y = np.asarray(Y[start:stop][:, list(jb)], dtype=np.float64)
    inside = ((y - half) <= x) & (x <= (y + half))
    return {"hits": int(np.count_nonzero(inside.all(axis=1))), "n": stop - start}


@register("SDID", kind="risk", reference="sdcMicro dRisk",
          unit="fraction of records (0 to 1)",
          options=("chunk_rows", "id_p", "sdid_k"),
          description="share of records whose every original value lies within "
                      "x' ± k s'_j (k = 0.05)")
def sdid(ctx: MeasureContext) -> float:
    k = float(ctx.options["sdid_k"])
    sd = _intervals(ctx)["sd"]
    pairs = _shared_columns(ctx)
    ja, jb = tuple(a for a, _ in pairs), tuple(b for _, b in pairs)
    tot = map_reduce(ctx.runner, _sdid_chunk, add_dicts, [ctx.original, ctx.masked],
                     ctx.shape_original[0], chunk_rows=int(ctx.options["chunk_rows"]),
                     args=(ja, jb, k * sd))
    return tot["hits"] / tot["n"]
