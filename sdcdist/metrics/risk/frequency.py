"""Frequency risk of the categorical key columns of a released file.

The statistical offices' first look at a release: how many records are alone
in their key combination, how many break k-anonymity, and the individual risk
of re-identification (the Benedetti-Franconi estimate that sdcMicro's
``measure_risk`` reports). All are computed on the masked (released) file.

Map / combine / aggregate over record chunks (:func:`sdcdist.parallel.map_reduce`):
each chunk returns the table of its distinct key combinations with their record
counts and exact weight sums (:func:`sdcdist.keytables.combo_table`); tables are merged by
key (:func:`~sdcdist.keytables.merge_tables`), adding the weights exactly, so the merged
table and every metric have the same bits whatever the chunking and the worker count; the
client turns the merged table into
the per-combination frequencies ``f_k`` (records) and ``F_k`` (weights) and the
metrics. Memory is one chunk plus the table of distinct combinations, so 10
million records work. Computed in this process on records held in memory, the tables
are built on pieces of :data:`LOCAL_ROWS` records (a million-record file in one table):
the same merged table, without merging many small ones.

A missing key value (local suppression) matches every category of its key, as
in sdcMicro's ``freqCalc``: the frequency of a combination with missing values
counts every record that agrees with it on the keys both have.

Metrics (percentages of the n records, or probabilities):

- ``uniques``: % of records with f_k = 1;
- ``kviol2``, ``kviol3``, ``kviol5``: % of records with f_k < k;
- ``IR_mean`` (sdcMicro's global risk), ``IR_max``: mean and largest individual risk;
- ``ER``: expected re-identifications, the sum of the individual risks.

Individual risk of a record in a combination with sample frequency f = f_k and
weighted frequency F = F_k (sdcMicro ``indivRisk``, ``method = "approx"``),
with p = f / F:

- no weight column: r = 1 / f;
- F <= f (the sample is the population there): r = 1 / f;
- f = 1: r = p / (1 - p) log(1 / p);
- f = 2: r = p / (1 - p) - (p / (1 - p))^2 log(1 / p);
- f > 2: r = p / (f - (1 - p)).

``uniques`` and ``kviol*`` count records of the file (sample frequencies); the
weight enters through F in the individual risk.
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np

from ...errors import column_positions, weight_error
from ...keytables import combo_frequencies, key_table_chunk, merge_tables, with_weight
from ...parallel import map_reduce
from .._registry import MeasureContext, MetricResult, register
from ..categorical_keys import frequency_keys

__all__ = ["individual_risk", "frequency_summary", "K_VIOLATIONS"]

#: the k of the kviol metrics
K_VIOLATIONS = (2, 3, 5)

#: records per key table when the table is built in this process on records in memory: a
#: million-record file in one table (merging many small tables costs more than building
#: them), the temporary arrays of a larger one bounded (a few hundred MB)
LOCAL_ROWS = 1 << 22


def individual_risk(fk: np.ndarray, Fk: np.ndarray | None) -> np.ndarray:
    """Benedetti-Franconi individual risk (sdcMicro ``indivRisk``, approx); see the module.

    Parameters
    ----------
    fk : ndarray
        Sample frequencies (>= 1).
    Fk : ndarray or None
        Weighted frequencies; None: unweighted (r = 1 / f).
    """
    fk = np.asarray(fk, dtype=np.float64)
    if Fk is None:
        return 1.0 / fk
    Fk = np.asarray(Fk, dtype=np.float64)
    r = 1.0 / fk
    use = Fk > fk
    f, p = fk[use], fk[use] / Fk[use]
    q = p / (1.0 - p)
    ri = np.where(f == 1, q * np.log(1.0 / p),
                  np.where(f == 2, q - q * q * np.log(1.0 / p), p / (f - (1.0 - p))))
    r[use] = ri
    return r


def frequency_summary(table: dict[str, Any], weighted: bool) -> dict[str, float]:
    """Every frequency metric from a merged combination table."""
    fk, Fk = combo_frequencies(table)
    count = table["count"].astype(np.float64)
    n = float(count.sum())
    r = individual_risk(fk, Fk if weighted else None)
    out = {"uniques": 100.0 * float(count[fk == 1].sum()) / n}
    for k in K_VIOLATIONS:
        out[f"kviol{k}"] = 100.0 * float(count[fk < k].sum()) / n
    er = math.fsum((count * r).tolist())     # exact sum: no BLAS split, no order
    out.update(ER=er, IR_mean=er / n, IR_max=float(r.max()) if r.size else 0.0)
    return out


def _table(ctx: MeasureContext, name: str) -> tuple[dict[str, Any], bool, tuple[str, ...]]:
    keys = frequency_keys(ctx, name)
    pos = column_positions(keys, ctx.masked_columns, what="key column", where="the masked file")
    w = None
    if ctx.weight is not None and ctx.weight in ctx.masked_columns:
        w = ctx.masked_columns.index(ctx.weight)

    def compute() -> dict[str, Any]:
        t = map_reduce(ctx.runner, key_table_chunk, merge_tables, [ctx.masked],
                       ctx.shape_masked[0], chunk_rows=int(ctx.options["chunk_rows"]),
                       args=(tuple(pos), w), local_rows=LOCAL_ROWS)
        if t["bad_weights"]:
            raise weight_error(ctx.weight, bad=int(t["bad_weights"]))
        return frequency_summary(with_weight(t), w is not None)
    return ctx.cached(("frequency", keys, w), compute), w is not None, keys


def _metric(name: str, description: str, unit: str = "% of records") -> None:
    def func(ctx: MeasureContext) -> MetricResult:
        summary, weighted, keys = _table(ctx, name)
        return MetricResult(summary[name], info={"keys": list(keys), "weighted": weighted})
    register(name, kind="risk", same_shape=False, categorical=True, options=("chunk_rows",),
             description=description, unit=unit, keys_only=True,
             reference="Benedetti and Franconi (1998); sdcMicro measure_risk")(func)


_metric("uniques", "% of records whose categorical key combination is unique in the "
        "released file")
for _k in K_VIOLATIONS:
    _metric(f"kviol{_k}", f"% of records in categorical key classes smaller than {_k} "
            f"(violating {_k}-anonymity)")
_metric("IR_mean", "mean individual re-identification risk (Benedetti-Franconi, weighted "
        "where a weight column exists): sdcMicro's global risk", "probability (0 to 1)")
_metric("IR_max", "largest individual re-identification risk (Benedetti-Franconi)",
        "probability (0 to 1)")
_metric("ER", "expected number of re-identifications: the sum of the individual risks",
        "records")
