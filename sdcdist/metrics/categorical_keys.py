"""The categorical key columns a measure reads, and the global recodings between the files.

What the frequency, attribute, household, model-based, SUDA and CAP risks, the
blocked linkage and the categorical losses share above the plain tables of
:mod:`sdcdist.keytables`:

- :func:`frequency_keys`: the categorical key columns of a measure (the named key sets'
  columns, else the dataset's key columns, keeping the categorical ones);
- :func:`recodings`: for each categorical column, the lookup original code -> masked code
  when the masked column is a global recoding of the original.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from ..errors import SdcInputError, column_positions
from ..keytables import merge_recoding_pairs, recoding_lookups, recoding_pairs
from ..parallel import map_reduce
from ._registry import MeasureContext

__all__ = ["frequency_keys", "recodings"]


def frequency_keys(ctx: MeasureContext, name: str) -> tuple[str, ...]:
    """The categorical key columns of the frequency metrics.

    The named key sets' columns (else the dataset's key columns), keeping the
    categorical ones.
    """
    if ctx.keysets_given:
        cand = list(dict.fromkeys(c for ks in ctx.keysets for c in ks))
    else:
        cand = list(ctx.key_columns)
    keys = tuple(c for c in cand if c in ctx.categorical)
    if not keys:
        if not ctx.categorical:
            raise SdcInputError(
                f"{name} counts key combinations of categorical columns, and the file has "
                "none: declare the integer-coded keys categorical (ingest --categorical, or "
                "'categorical:' in the spec's dataset), or use text columns")
        raise SdcInputError(
            f"{name} counts key combinations of categorical key columns, and none of the "
            f"key columns is categorical; name categorical keys (--keys, or the key role), "
            f"e.g. among: {', '.join(ctx.categorical)}")
    return keys


def recodings(ctx: MeasureContext, names: Sequence[str]) -> list[np.ndarray | None]:
    """For each categorical column, the lookup original code -> masked code when the masked
    column is a global recoding of the original (every original category went to one
    masked category, and some changed), else None.

    A published recoding is known to the intruder and the analyst alike, so the original is
    recoded the same way before linking on it or comparing tables. Only for files whose
    records correspond row by row (same shape, no truth given).
    """
    if ctx.truth is not None or ctx.shape_original[0] != ctx.shape_masked[0]:
        return [None] * len(names)

    def compute() -> list[np.ndarray | None]:
        ja = column_positions(names, ctx.columns)
        jb = column_positions(names, ctx.masked_columns)
        t = map_reduce(ctx.runner, recoding_pairs, merge_recoding_pairs,
                       [ctx.original, ctx.masked], ctx.shape_original[0],
                       chunk_rows=int(ctx.options["chunk_rows"]), args=(tuple(ja), tuple(jb)))
        return recoding_lookups(t["pairs"])
    return ctx.cached(("recodings", tuple(names)), compute)
