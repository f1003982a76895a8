"""Household (hierarchical) risk: the risk that at least one member of a household is
re-identified, as sdcMicro's ``measure_risk(..., hid = ...)`` computes it.

Members of a household share their dwelling and often their key values, so
re-identifying one discloses the others. With the individual risk r_k of each
record k (the Benedetti-Franconi estimate of the frequency metrics, a missing
key value matching every category, weighted where a weight column exists), the
risk of household h, assuming its members are re-identified independently, is

    R_h = 1 - Π_{k in h} (1 - r_k),

and every member of h carries R_h. Metrics (released file):

- ``HR_mean``: the mean over the n records of their household's risk (sdcMicro's
  ``hier_risk``);
- ``HR_ER``: its sum over the records, Σ_h |h| R_h (sdcMicro's ``hier_risk_ER``);
- ``HR_max``: the largest household risk.

The household id column has the ``household`` role (``ingest --household``, the
dataset's roles in a spec, ``measure(household=...)``); it is never a linkage key.
Every record needs a household id; a household may be spread anywhere in the
file (unsorted, over any number of chunks).

Map / combine / aggregate over record chunks: each chunk returns two tables of
distinct pairs with their record counts (:func:`sdcdist.keytables.pair_table`):
(key combination, weight) and (key combination, household id). Tables are merged
by exact integer counts into sorted tables, so the merged tables, and everything
computed from them, are the same whatever the chunking and the number of
workers: a combination's weight sum F_k adds value x count over its distinct
weights in increasing order, and a household's product runs over its distinct
(combination, count) pairs in increasing order of risk. Memory is one chunk plus
the tables (at most one row per record).
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any

import numpy as np

from ...errors import SdcInputError, bad_values_error, column_positions, weight_error
from ...keytables import (combo_frequencies, merge_weighted_tables, pair_table, unique_rows,
                          weighted_chunk)
from ...parallel import map_reduce
from .._registry import MeasureContext, MetricResult, register
from ..categorical_keys import frequency_keys
from ...roles import key_role_error, role_clash_error
from .frequency import individual_risk

__all__ = ["household_summary", "household_risks", "household_column", "METRICS"]

#: the household risk metrics
METRICS = ("HR_mean", "HR_ER", "HR_max")


def _chunk(start: int, stop: int, X: Any, keys: Sequence[int], w: int | None, h: int
           ) -> dict[str, Any]:
    block, k, wv, bad = weighted_chunk(X, start, stop, keys, w)
    return {"tables": {"weights": pair_table(k, wv), "households": pair_table(k, block[:, h])},
            "bad_weights": bad}


def household_risks(tables: dict[str, dict[str, Any]], weighted: bool
                    ) -> tuple[np.ndarray, np.ndarray]:
    """The risk and the size of each household from the merged pair tables.

    Parameters
    ----------
    tables : dict
        ``weights``: (key combination, weight) pairs; ``households``: (key combination,
        household id) pairs, as :func:`~sdcdist.keytables.pair_table` and
        :func:`~sdcdist.keytables.merge_pairs` give them.
    weighted : bool
        Whether the weights are sampling weights (else r_k = 1 / f_k).

    Returns
    -------
    risk, size : ndarray (H,)
        R_h and the number of records of each household, in increasing order of id.
    """
    tw, th = tables["weights"], tables["households"]
    urows, cls = unique_rows(tw["rows"])
    U = urows.shape[0]
    count = np.bincount(cls, weights=tw["count"].astype(np.float64), minlength=U)
    # the table is sorted by combination then weight: each F_k adds its distinct weights
    # in increasing order
    weight = np.bincount(cls, weights=tw["value"] * tw["count"], minlength=U)
    fk, Fk = combo_frequencies({"rows": urows, "count": np.rint(count).astype(np.int64),
                                "weight": weight})
    r = individual_risk(fk, Fk if weighted else None)
    both, inv = unique_rows(np.concatenate([urows, th["rows"]]))
    pos = np.empty(both.shape[0], dtype=np.int64)
    pos[inv[:U]] = np.arange(U)
    rp = r[pos[inv[U:]]]
    hid, c = th["value"], th["count"]
    order = np.lexsort((rp, hid))
    hid, rp, c = hid[order], rp[order], c[order]
    starts = np.flatnonzero(np.r_[True, hid[1:] != hid[:-1]])
    # R_h = 1 - prod(1 - r_k)^c_k, evaluated as -expm1(sum c_k log1p(-r_k)): 1 - (1 - r)
    # keeps only the bits of r above 2^-53, so a risk of 1e-9 would keep only 7 of its 16 digits
    log_keep = c.astype(np.float64) * np.log1p(-rp)
    risk = 0.0 - np.expm1(np.add.reduceat(log_keep, starts))
    size = np.add.reduceat(c, starts)
    return risk, size


def household_summary(tables: dict[str, dict[str, Any]], weighted: bool) -> dict[str, Any]:
    """``HR_mean``, ``HR_ER``, ``HR_max`` and the household count from the merged tables."""
    risk, size = household_risks(tables, weighted)
    n = int(size.sum())
    er = math.fsum((size * risk).tolist())
    return {"HR_ER": er, "HR_mean": er / n, "HR_max": float(risk.max()),
            "households": int(risk.size), "largest_household": int(size.max())}


def household_column(ctx: MeasureContext, name: str, keys: Sequence[str]) -> str:
    """The household id column of the masked file (refused: none, or one that is a key)."""
    h = ctx.household
    if h is None:
        raise SdcInputError(
            f"{name} measures the risk of households, and no household id column is named; "
            "give it (ingest --household, household=..., or the dataset's 'household' role)")
    column_positions([h], ctx.masked_columns, what="household id column",
                     where="the masked file")
    if h in keys:
        raise key_role_error(f"the key columns of {name}", h, "household", "the keys")
    if h == ctx.weight:
        raise role_clash_error(h, "household", "weight")
    return h


def _check_ids(X: Any, j: int, name: str) -> None:
    """Task: refuse household ids that are not whole numbers (of the masked file)."""
    from ...data.types import check_household_ids
    check_household_ids(np.asarray(X[:, j], dtype=np.float64), name, "the masked file")


def _summary(ctx: MeasureContext, name: str) -> tuple[dict[str, Any], tuple[str, ...], bool]:
    keys = frequency_keys(ctx, name)
    h = household_column(ctx, name, keys)
    pos = tuple(column_positions(keys, ctx.masked_columns, what="key column",
                                 where="the masked file"))
    hpos = ctx.masked_columns.index(h)
    w = None
    if ctx.weight is not None and ctx.weight in ctx.masked_columns:
        w = ctx.masked_columns.index(ctx.weight)

    def compute() -> dict[str, Any]:
        ctx.runner.call(_check_ids, ctx.masked, hpos, h)
        t = map_reduce(ctx.runner, _chunk, merge_weighted_tables, [ctx.masked],
                       ctx.shape_masked[0], chunk_rows=int(ctx.options["chunk_rows"]),
                       args=(pos, w, hpos))
        if t["bad_weights"]:
            raise weight_error(ctx.weight, bad=int(t["bad_weights"]))
        miss = int(t["tables"]["households"]["missing"])
        if miss:
            raise bad_values_error(h, miss, "missing", "every record needs a household id "
                                   "(give a person living alone an id of their own)",
                                   where="the masked file (the household id)")
        return household_summary(t["tables"], w is not None)
    return ctx.cached(("household", keys, h, w), compute), keys, w is not None


def _metric(name: str, description: str, unit: str) -> None:
    def func(ctx: MeasureContext) -> MetricResult:
        s, keys, weighted = _summary(ctx, name)
        return MetricResult(s[name], info={"keys": list(keys), "weighted": weighted,
                                           "household": ctx.household,
                                           "households": s["households"],
                                           "largest_household": s["largest_household"]})
    register(name, kind="risk", same_shape=False, categorical=True, options=("chunk_rows",),
             needs=("household",),
             description=description, unit=unit,
             reference="sdcMicro measure_risk (hid); Franconi and Polettini (2004)")(func)


_metric("HR_mean", "mean household (hierarchical) risk over the records: each record carries "
        "1 - prod(1 - r_k) over the members of its household (sdcMicro's hier_risk)",
        "probability (0 to 1)")
_metric("HR_ER", "sum over the records of their household's risk (sdcMicro's hier_risk_ER)",
        "records")
_metric("HR_max", "largest household risk 1 - prod(1 - r_k) over a household's members",
        "probability (0 to 1)")
