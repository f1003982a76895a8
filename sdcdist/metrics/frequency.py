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
million records work.

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
from collections.abc import Sequence
from typing import Any

import numpy as np

from ..errors import SdcInputError, column_positions, weight_error
from ..keytables import (apply_lookup, combo_frequencies, combo_table, merge_tables,
                         unique_rows, with_weight)
from ..parallel import map_reduce
from ._registry import MeasureContext, MetricResult, register

__all__ = ["combo_table", "merge_tables", "combo_frequencies", "individual_risk",
           "frequency_summary", "frequency_keys", "K_VIOLATIONS"]

#: the k of the kviol metrics
K_VIOLATIONS = (2, 3, 5)


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


def _chunk_table(start: int, stop: int, X: Any, keys: Sequence[int], w: int | None,
                 lookups: Sequence[np.ndarray | None] | None = None) -> dict[str, Any]:
    block = np.asarray(X[start:stop], dtype=np.float64)
    if lookups is not None:
        block = block.copy()
        for j, lk in zip(keys, lookups):
            block[:, j] = apply_lookup(block[:, j], lk)
    weights = None
    bad = 0
    if w is not None:
        weights = block[:, w]
        ok = np.isfinite(weights) & (weights > 0)
        bad = int((~ok).sum())
    # the chunk's weight sums stay exact: merge_tables rounds the merged ones
    t = combo_table(block[:, list(keys)], weights, rounded=False)
    t.pop("inverse")
    t["bad_weights"] = bad
    return t


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


def _table(ctx: MeasureContext, name: str) -> tuple[dict[str, Any], bool, tuple[str, ...]]:
    keys = frequency_keys(ctx, name)
    pos = column_positions(keys, ctx.masked_columns, what="key column", where="the masked file")
    w = None
    if ctx.weight is not None and ctx.weight in ctx.masked_columns:
        w = ctx.masked_columns.index(ctx.weight)

    def compute() -> dict[str, Any]:
        t = map_reduce(ctx.runner, _chunk_table, merge_tables, [ctx.masked],
                       ctx.shape_masked[0], chunk_rows=int(ctx.options["chunk_rows"]),
                       args=(tuple(pos), w))
        if t["bad_weights"]:
            raise weight_error(ctx.weight, bad=int(t["bad_weights"]))
        return frequency_summary(with_weight(t), w is not None)
    return ctx.cached(("frequency", keys, w), compute), w is not None, keys


def _metric(name: str, description: str, unit: str = "% of records") -> None:
    def func(ctx: MeasureContext) -> MetricResult:
        summary, weighted, keys = _table(ctx, name)
        return MetricResult(summary[name], info={"keys": list(keys), "weighted": weighted})
    register(name, kind="risk", same_shape=False, categorical=True, options=("chunk_rows",),
             description=description, unit=unit,
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


# -- global recodings: how the masked categories cover the original ones ---------------------

def _chunk_pairs(start: int, stop: int, A: Any, B: Any, ja: Sequence[int], jb: Sequence[int]
                 ) -> dict[str, Any]:
    a = np.asarray(A[start:stop], dtype=np.float64)[:, list(ja)]
    b = np.asarray(B[start:stop], dtype=np.float64)[:, list(jb)]
    pairs = []
    for j in range(a.shape[1]):
        ok = ~np.isnan(a[:, j]) & ~np.isnan(b[:, j])
        pairs.append(np.unique(np.column_stack([a[ok, j], b[ok, j]]).astype(np.int64), axis=0)
                     if ok.any() else np.zeros((0, 2), np.int64))
    return {"pairs": pairs}


def _merge_pairs(*parts: dict[str, Any]) -> dict[str, Any]:
    return {"pairs": [np.unique(np.concatenate(ps), axis=0)
                      for ps in zip(*[p["pairs"] for p in parts])]}


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
        t = map_reduce(ctx.runner, _chunk_pairs, _merge_pairs, [ctx.original, ctx.masked],
                       ctx.shape_original[0], chunk_rows=int(ctx.options["chunk_rows"]),
                       args=(tuple(ja), tuple(jb)))
        out: list[np.ndarray | None] = []
        for pr in t["pairs"]:
            a, b = pr[:, 0], pr[:, 1]
            if a.size == 0 or np.unique(a).size != a.size or np.array_equal(a, b):
                out.append(None)
                continue
            lk = np.full(int(a.max()) + 1, np.nan)
            lk[a] = b
            out.append(lk)
        return out
    return ctx.cached(("recodings", tuple(names)), compute)


# -- loss on categorical columns ----------------------------------------------------------

def _chunk_changed(start: int, stop: int, A: Any, B: Any, ja: Sequence[int], jb: Sequence[int]
                   ) -> dict[str, Any]:
    a = np.asarray(A[start:stop], dtype=np.float64)[:, list(ja)]
    b = np.asarray(B[start:stop], dtype=np.float64)[:, list(jb)]
    same = (a == b) | (np.isnan(a) & np.isnan(b))
    return {"changed": (~same).sum(axis=0).astype(np.int64), "n": np.int64(a.shape[0])}


def _add(*parts: dict[str, Any]) -> dict[str, Any]:
    out = dict(parts[0])
    for p in parts[1:]:
        out = {k: out[k] + p[k] for k in out}
    return out


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
    t = map_reduce(ctx.runner, _chunk_changed, _add, [ctx.original, ctx.masked],
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
        ta = map_reduce(ctx.runner, _chunk_table, merge_tables, [ctx.original],
                        ctx.shape_original[0], chunk_rows=int(ctx.options["chunk_rows"]),
                        args=(tuple(column_positions(keys, ctx.columns)), None,
                              lookups if any(lk is not None for lk in lookups) else None))
        tb = map_reduce(ctx.runner, _chunk_table, merge_tables, [ctx.masked],
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
