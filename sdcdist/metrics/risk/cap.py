"""CategoricalCAP (SDMetrics 0.32.0): what a released file's key combinations tell about a
training record's confidential values.

``cap``: 1 - the mean, over training records whose key combination occurs in the
release, of the share of the released records with that key combination whose
confidential values equal the training record's. Keys are the categorical key columns
(as the frequency metrics), the confidential columns those of the attribute-disclosure
metrics; values compare exactly, a missing value is a value of its own.

Record-chunk reductions of each file to its distinct (keys + confidential) rows with
their counts (:func:`cap_table`, :func:`merge_cap_tables`; exact and sorted, so any
chunking agrees), then :func:`cap_score` on the two tables.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np

from ...errors import column_error, column_positions
from ...keytables import distinct_float_rows, unique_rows
from ...parallel import map_reduce
from .._registry import MeasureContext, MetricResult, register
from ..categorical_keys import frequency_keys
from .attribute import confidential_columns

__all__ = ["cap_table", "merge_cap_tables", "cap_score"]


def cap_table(start: int, stop: int, X: Any, keys: Sequence[int],
              conf: Sequence[int]) -> dict[str, np.ndarray]:
    """Task: the distinct (key combination, confidential combination) rows of records
    ``start:stop`` and their counts (missing: a value of its own)."""
    B = np.asarray(X[start:stop], dtype=np.float64)[:, list(keys) + list(conf)]
    if B.shape[0] == 0:
        return {"rows": np.zeros((0, B.shape[1])), "count": np.zeros(0, np.int64)}
    rows, count = distinct_float_rows(B)
    return {"rows": rows, "count": count.astype(np.int64)}


def merge_cap_tables(*parts: dict[str, np.ndarray]) -> dict[str, np.ndarray]:
    """``combine``: add the counts of equal rows (exact; sorted, so any chunking agrees)."""
    rows = np.concatenate([p["rows"] for p in parts])
    count = np.concatenate([p["count"] for p in parts])
    if rows.shape[0] == 0:
        return {"rows": rows, "count": count}
    R = np.where(np.isnan(rows), np.nan, rows) + 0.0
    u, inv = unique_rows(np.ascontiguousarray(R).view(np.int64))
    return {"rows": np.ascontiguousarray(u).view(np.float64),
            "count": np.bincount(inv, weights=count, minlength=u.shape[0]).astype(np.int64)}


def cap_score(real: dict[str, np.ndarray], released: dict[str, np.ndarray], q: int
              ) -> tuple[float, int]:
    """CategoricalCAP from the (keys + confidential) tables of the training and released
    files (the first ``q`` columns are the keys).

    Returns
    -------
    (float, int)
        1 - the mean over training records whose key combination is released of the
        share of released records with it whose confidential values equal theirs
        (NaN when none); the number of training records left out (key not released).
    """
    rr, rc = real["rows"], real["count"]
    sr, sc = released["rows"], released["count"]
    both = np.concatenate([rr, sr])
    bits = np.ascontiguousarray(np.where(np.isnan(both), np.nan, both) + 0.0).view(np.int64)
    _, kid = unique_rows(bits[:, :q])
    _, fid = unique_rows(bits)
    n_r = rr.shape[0]
    nk = int(kid.max()) + 1 if kid.size else 0
    nf = int(fid.max()) + 1 if fid.size else 0
    key_count = np.bincount(kid[n_r:], weights=sc, minlength=nk)
    full_count = np.bincount(fid[n_r:], weights=sc, minlength=nf)
    kr, fr = kid[:n_r], fid[:n_r]
    found = key_count[kr] > 0
    left_out = int(rc[~found].sum())
    count = int(rc[found].sum())
    if count == 0:
        return float("nan"), left_out
    share = full_count[fr[found]] / key_count[kr[found]]
    return 1.0 - float(np.sum(rc[found] * share)) / count, left_out


@register("cap", kind="risk", same_shape=False, categorical=True, ascending=False,
          needs=("confidential",),
          options=("chunk_rows",), unit="1 - probability (1 safest)",
          reference="SDMetrics 0.32.0 CategoricalCAP",
          description="CategoricalCAP: 1 - mean share of released records with a training "
                      "record's key values whose confidential values equal its own")
def _cap(ctx: MeasureContext) -> MetricResult:
    keys = frequency_keys(ctx, "cap")
    conf = confidential_columns(ctx, "cap", keys)
    missing = [c for c in keys + conf if c not in ctx.columns]
    if missing:
        raise column_error(missing, ctx.columns, what="key or confidential column of cap",
                           where="the original file")
    kq = column_positions(keys, ctx.masked_columns, what="key column", where="the masked file")
    cq = column_positions(conf, ctx.masked_columns, what="confidential column",
                          where="the masked file")
    kr = column_positions(keys, ctx.columns, what="key column", where="the original file")
    cr = column_positions(conf, ctx.columns, what="confidential column",
                          where="the original file")
    chunk = int(ctx.options["chunk_rows"])
    syn = map_reduce(ctx.runner, cap_table, merge_cap_tables, [ctx.masked],
                     ctx.shape_masked[0], chunk_rows=chunk, args=(tuple(kq), tuple(cq)))
    real = map_reduce(ctx.runner, cap_table, merge_cap_tables, [ctx.original],
                      ctx.shape_original[0], chunk_rows=chunk, args=(tuple(kr), tuple(cr)))
    score, left = cap_score(real, syn, len(keys))
    return MetricResult(score, excluded=left,
                        info={"keys": list(keys), "confidential": list(conf),
                              "training_records_without_released_key": left})
