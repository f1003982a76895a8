"""Information loss on categorical columns: the share of values masking changed, and the
distance between the original and masked contingency tables of the categorical keys.

- ``changed``: mean over the categorical columns of the share of records whose value
  changed (a suppressed value counts as changed);
- ``hellinger``, ``tvd``: the Hellinger and total variation distances between the tables
  of key combinations (a missing value is a cell of its own), a globally recoded key
  compared at the recoded level (:func:`~sdcdist.metrics.categorical_keys.recodings`).

Record-chunk reductions: the chunk tables of :mod:`sdcdist.keytables`, merged exactly.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np

from ...errors import SdcInputError, column_positions
from ...keytables import key_table_chunk, merge_tables, unique_rows
from ...parallel import add_dicts, map_reduce
from .._registry import MeasureContext, MetricResult, register
from ..categorical_keys import frequency_keys, recodings


def _chunk_changed(start: int, stop: int, A: Any, B: Any, ja: Sequence[int], jb: Sequence[int]
                   ) -> dict[str, Any]:
    a = np.asarray(A[start:stop], dtype=np.float64)[:, list(ja)]
    b = np.asarray(B[start:stop], dtype=np.float64)[:, list(jb)]
    same = (a == b) | (np.isnan(a) & np.isnan(b))
    return {"changed": (~same).sum(axis=0).astype(np.int64), "n": np.int64(a.shape[0])}


@register("changed", kind="loss", categorical=True, options=("chunk_rows",),
          unit="fraction of values (0 to 1)",
          reference="share of perturbed values (e.g. Templ 2017, ch. 7)",
          description="categorical columns: share of values changed by masking (a "
                      "suppressed value counts as changed), mean over the columns")
def changed(ctx: MeasureContext) -> MetricResult:
    """Mean over the categorical columns of the share of records whose value changed."""
    cols = [c for c in ctx.categorical if c in ctx.columns and c in ctx.masked_columns]
    if not cols:
        raise SdcInputError("changed compares categorical columns, and the files have none; "
                            "declare integer-coded ones categorical (ingest --categorical, or "
                            "'categorical:' in the spec's dataset)")
    ja = column_positions(cols, ctx.columns)
    jb = column_positions(cols, ctx.masked_columns)
    t = map_reduce(ctx.runner, _chunk_changed, add_dicts, [ctx.original, ctx.masked],
                   ctx.shape_original[0], chunk_rows=int(ctx.options["chunk_rows"]),
                   args=(tuple(ja), tuple(jb)))
    share = t["changed"] / max(int(t["n"]), 1)
    return MetricResult(float(share.mean()),
                        info={"per_column": {c: float(s) for c, s in zip(cols, share)}})


def _contingency(ctx: MeasureContext, name: str) -> tuple[np.ndarray, np.ndarray, tuple]:
    """Proportions of the key combinations in the original and the masked file, aligned."""
    keys = frequency_keys(ctx, name)

    def compute() -> tuple[np.ndarray, np.ndarray]:
        lookups = recodings(ctx, keys)
        ta = map_reduce(ctx.runner, key_table_chunk, merge_tables, [ctx.original],
                        ctx.shape_original[0], chunk_rows=int(ctx.options["chunk_rows"]),
                        args=(tuple(column_positions(keys, ctx.columns)), None,
                              lookups if any(lk is not None for lk in lookups) else None))
        tb = map_reduce(ctx.runner, key_table_chunk, merge_tables, [ctx.masked],
                        ctx.shape_masked[0], chunk_rows=int(ctx.options["chunk_rows"]),
                        args=(tuple(column_positions(keys, ctx.masked_columns)), None))
        rows = np.concatenate([ta["rows"], tb["rows"]])
        _, inv = unique_rows(rows)
        m = int(inv.max()) + 1
        ia, ib = inv[:ta["rows"].shape[0]], inv[ta["rows"].shape[0]:]
        p = np.bincount(ia, weights=ta["count"].astype(np.float64), minlength=m)
        q = np.bincount(ib, weights=tb["count"].astype(np.float64), minlength=m)
        return p / p.sum(), q / q.sum()
    p, q = ctx.cached(("contingency", keys), compute)
    return p, q, keys


@register("hellinger", kind="loss", categorical=True, same_shape=False, options=("chunk_rows",),
          unit="distance (0 to 1)",
          reference="Hellinger distance between contingency tables",
          description="Hellinger distance between the original and masked contingency tables "
                      "of the categorical keys, sqrt(1/2 sum (sqrt p - sqrt q)^2), in [0, 1] "
                      "(a globally recoded key compared at the recoded level)")
def hellinger(ctx: MeasureContext) -> MetricResult:
    """Hellinger distance of the key tables (a missing value is a cell of its own)."""
    p, q, keys = _contingency(ctx, "hellinger")
    h = float(np.sqrt(0.5 * np.sum((np.sqrt(p) - np.sqrt(q)) ** 2)))
    return MetricResult(min(h, 1.0), info={"keys": list(keys)})


@register("tvd", kind="loss", categorical=True, same_shape=False, options=("chunk_rows",),
          unit="distance (0 to 1)",
          reference="total variation distance between contingency tables",
          description="total variation distance between the original and masked contingency "
                      "tables of the categorical keys, 1/2 sum |p - q|, in [0, 1]")
def tvd(ctx: MeasureContext) -> MetricResult:
    """Total variation distance of the key tables (a missing value is a cell of its own)."""
    p, q, keys = _contingency(ctx, "tvd")
    return MetricResult(float(0.5 * np.abs(p - q).sum()), info={"keys": list(keys)})
