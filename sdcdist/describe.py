"""The data before masking (``sdcdist describe``): per-variable summaries, category
frequencies, k-anonymity violations on the key columns and the records of highest
individual risk.

Plain numpy on a file in memory (:class:`~sdcdist.data.Microdata`). The key tables are
those of the frequency risk metrics (:func:`sdcdist.keytables.combo_table`,
:func:`~sdcdist.keytables.combo_frequencies`,
:func:`sdcdist.metrics.frequency.individual_risk`): a missing key value matches every
category of its key, and the individual risk is sdcMicro's (1 / f_k without a weight).
A numeric key column is tabulated by its distinct values.

The riskiest records (record numbers, 1 = the first record of the file, and their key
combinations) are the principal's own data: they are returned to the caller (stdout, the
internal release report) and never logged.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any

import numpy as np

from .errors import SdcInputError, column_positions, magnitude_error, weight_error
from .moments import overflowing_columns

__all__ = ["QUANTILES", "variable_summaries", "key_risk", "describe", "describe_lines"]

#: the quantiles of a numeric variable's summary (no minimum or maximum: those are one
#: record's value)
QUANTILES = (0.05, 0.25, 0.5, 0.75, 0.95)


def _numeric_summary(name: str, col: np.ndarray) -> dict[str, Any]:
    ok = np.isfinite(col)
    v = np.sort(col[ok])
    n = int(v.size)
    mean = math.fsum(v.tolist()) / n if n else math.nan
    sd = math.sqrt(math.fsum(((v - mean) ** 2).tolist()) / (n - 1)) if n > 1 else math.nan
    q = {f"{100 * p:g}%": (float(np.quantile(v, p)) if n else math.nan) for p in QUANTILES}
    return {"name": name, "type": "numeric", "n": n, "missing": int(col.size - n),
            "mean": mean, "sd": sd, "quantiles": q}


def _categorical_summary(name: str, col: np.ndarray, labels: Sequence[str]
                         ) -> dict[str, Any]:
    ok = np.isfinite(col) & (col >= 0)
    codes = col[ok].astype(np.int64)
    counts = np.bincount(codes, minlength=len(labels))
    n = int(ok.sum())
    cats = [{"label": str(labels[i]) if i < len(labels) else str(i), "count": int(c),
             "percent": 100.0 * int(c) / n if n else math.nan}
            for i, c in enumerate(counts)]
    return {"name": name, "type": "categorical", "n": n, "missing": int(col.size - n),
            "categories": cats}


def variable_summaries(md: Any) -> list[dict[str, Any]]:
    """One summary per column: numeric (n, missing, mean, sd, :data:`QUANTILES`) or
    categorical (n, missing, each category's count and percentage of the non-missing)."""
    cats = set(md.categorical)
    out = []
    for j, name in enumerate(md.columns):
        col = np.asarray(md.values[:, j], dtype=np.float64)
        out.append(_categorical_summary(name, col, md.categories.get(name, []))
                   if name in cats else _numeric_summary(name, col))
    return out


def _key_codes(md: Any, keys: Sequence[str]) -> tuple[np.ndarray, list[list[str]]]:
    """Key codes (NaN missing) and the label of each code, per key column."""
    idx = column_positions(list(keys), md.columns, what="key column", where="the data")
    cats = set(md.categorical)
    cols, labels = [], []
    for name, j in zip(keys, idx):
        col = np.asarray(md.values[:, j], dtype=np.float64)
        if name in cats:
            cols.append(np.where(col >= 0, col, np.nan))
            labels.append([str(x) for x in md.categories.get(name, [])])
        else:
            ok = np.isfinite(col)
            u, inv = np.unique(col[ok], return_inverse=True)
            c = np.full(col.shape, np.nan)
            c[ok] = inv
            cols.append(c)
            labels.append([f"{x:g}" for x in u])
    return np.column_stack(cols) if cols else np.empty((md.shape[0], 0)), labels


def key_risk(md: Any, keys: Sequence[str], *, weight: str | None = None,
             top: int = 10) -> dict[str, Any]:
    """k-anonymity violations and individual risk on ``keys``.

    Returns
    -------
    dict
        ``keys``, ``combinations`` (distinct key combinations), ``unique_records``
        (records alone in their combination), ``kviol`` (for k = 2, 3, 5: ``records``
        with f_k < k, their ``percent``, and the ``combinations`` with f_k < k),
        ``expected_reidentifications`` and ``risk_mean`` (sum and mean of the individual
        risks, as the metrics ER and IR_mean), ``risk_max``, and ``riskiest``: the ``top``
        records of highest individual risk (ties: the earlier record first), each with
        its ``record`` number (1 = the first record), ``risk``, ``frequency`` (f_k) and
        ``keys`` (its key combination, labels; ``None`` for a missing value).
    """
    from .data.types import check_weights
    from .keytables import combo_frequencies, combo_table
    from .metrics.risk.frequency import K_VIOLATIONS, individual_risk
    codes, labels = _key_codes(md, keys)
    n = int(md.shape[0])
    w = None
    if weight is not None:
        j = column_positions([weight], md.columns, what="weight column", where="the data")[0]
        if weight in md.categorical:
            raise weight_error(weight)
        w = np.asarray(md.values[:, j], dtype=np.float64)
        check_weights(w, weight)
    table = combo_table(codes, w)
    fk, Fk = combo_frequencies(table)
    inv = table["inverse"]
    per = fk[inv]
    risk = individual_risk(fk, Fk if w is not None else None)[inv]
    kviol = {}
    for k in K_VIOLATIONS:
        rec = int((per < k).sum())
        kviol[str(k)] = {"records": rec, "percent": 100.0 * rec / n if n else math.nan,
                         "combinations": int((fk < k).sum())}
    order = np.lexsort((np.arange(n), -risk))[:max(0, int(top))]
    rows = table["rows"]
    riskiest = []
    for i in order:
        combo = rows[inv[i]]
        riskiest.append({"record": int(i) + 1, "risk": float(risk[i]),
                         "frequency": int(per[i]),
                         "keys": {str(k): (None if c < 0 else labels[q][int(c)])
                                  for q, (k, c) in enumerate(zip(keys, combo))}})
    er = math.fsum(risk.tolist())
    return {"keys": list(keys), "weight": weight, "records": n,
            "combinations": int(rows.shape[0]), "unique_records": int((per == 1).sum()),
            "kviol": kviol, "expected_reidentifications": er, "risk_mean": er / n if n else math.nan,
            "risk_max": float(risk.max()) if n else math.nan, "riskiest": riskiest}


def default_keys(md: Any) -> list[str]:
    """The store's key role, else every categorical column but the weight."""
    keys = [k for k in (md.roles.get("key") or []) if k in md.columns]
    return keys or [c for c in md.categorical if c != md.weight]


def describe(md: Any, *, keys: Sequence[str] | None = None, weight: str | None = None,
             top: int = 10) -> dict[str, Any]:
    """The whole description of a file: ``records``, ``variables``, ``summaries``
    (:func:`variable_summaries`) and ``risk`` (:func:`key_risk` on ``keys``, default
    :func:`default_keys`; None without key columns).

    Raises
    ------
    SdcInputError
        A weight column that is not numeric, or is also a given key column; numeric
        columns whose values are so large that their variance is not a finite float64
        (:func:`sdcdist.moments.overflowing_columns`, the rule ``measure`` applies).
    """
    given = bool(keys)
    keys = list(keys) if keys else default_keys(md)
    weight = weight if weight is not None else md.weight
    if weight is not None:
        column_positions([weight], md.columns, what="weight column", where="the data")
        if weight in md.categorical:        # not numeric: say so before any role clash
            raise weight_error(weight)
        if weight in keys and given:
            raise SdcInputError(f"the weight column {weight!r} is also a key column; leave "
                                "it out of --keys")
        keys = [k for k in keys if k != weight]
    cats = set(md.categorical)
    num = [j for j, c in enumerate(md.columns) if c not in cats]
    big = np.flatnonzero(overflowing_columns(np.asarray(md.values[:, num], dtype=np.float64)))
    if big.size:
        raise magnitude_error([md.columns[num[i]] for i in big], "the data", "describing them")
    return {"records": int(md.shape[0]), "variables": int(md.shape[1]),
            "summaries": variable_summaries(md),
            "risk": key_risk(md, keys, weight=weight, top=top) if keys else None}


def _g(v: float) -> str:
    return "NaN" if v is None or (isinstance(v, float) and math.isnan(v)) else f"{v:.4g}"


def describe_lines(d: dict[str, Any], *, records: bool = True) -> list[str]:
    """:func:`describe`'s result as text lines; ``records=False`` leaves out the riskiest
    records (record-level content)."""
    out = [f"{d['records']} records x {d['variables']} variables", ""]
    for s in d["summaries"]:
        head = f"{s['name']} ({s['type']}): n {s['n']}, missing {s['missing']}"
        if s["type"] == "numeric":
            q = ", ".join(f"{k} {_g(v)}" for k, v in s["quantiles"].items())
            out.append(f"{head}; mean {_g(s['mean'])}, sd {_g(s['sd'])}; quantiles {q}")
        else:
            out.append(head)
            for c in s["categories"]:
                out.append(f"    {c['label']}: {c['count']} ({_g(c['percent'])} %)")
    r = d["risk"]
    out.append("")
    if r is None:
        out.append("no key columns (give --keys, or categorical columns): no k-anonymity "
                   "or individual risk")
        return out
    w = f", weight {r['weight']}" if r["weight"] else ""
    out.append(f"keys {', '.join(r['keys'])}{w}: {r['combinations']} combinations, "
               f"{r['unique_records']} unique records")
    for k, v in r["kviol"].items():
        out.append(f"  k = {k}: {v['records']} records ({_g(v['percent'])} %) in "
                   f"{v['combinations']} combinations violate {k}-anonymity")
    out.append(f"  individual risk: mean {_g(r['risk_mean'])}, max {_g(r['risk_max'])}; expected "
               f"re-identifications {_g(r['expected_reidentifications'])}")
    if records and r["riskiest"]:
        out.append("records of highest individual risk (record 1 = the first):")
        for x in r["riskiest"]:
            combo = ", ".join(f"{k}={'(missing)' if v is None else v}"
                              for k, v in x["keys"].items())
            out.append(f"  record {x['record']}: risk {_g(x['risk'])}, f_k "
                       f"{x['frequency']}; {combo}")
    return out
