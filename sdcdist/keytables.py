"""Key-combination tables: the distinct combinations of categorical key codes and their counts.

Plain numpy, below both :mod:`sdcdist.metrics` (the frequency risk, the blocked
linkage's recoded keys) and :mod:`sdcdist.masking` (local suppression to
k-anonymity), which both read key combinations:

- :func:`combo_table`: the distinct combinations of one block with their record
  counts and weight sums; :func:`merge_tables` merges such tables (the
  ``combine`` of a record-chunk reduction);
- :func:`combo_frequencies`: ``f_k`` and ``F_k`` of each combination, a missing
  value matching every category of its key (sdcMicro's ``freqCalc``);
- :func:`apply_lookup`: codes mapped through a recoding lookup;
- :func:`unique_rows`: distinct rows in sorted order with the inverse index.
"""

from __future__ import annotations

from typing import Any

import numpy as np

__all__ = ["combo_table", "merge_tables", "combo_frequencies", "apply_lookup", "unique_rows"]

_MAX_PACK = 2 ** 62


def _pack(rows: np.ndarray) -> tuple[np.ndarray, np.ndarray] | None:
    """Mixed-radix int64 key of each row of non-negative ints (missing = -1 shifted to 0),
    and the radices; None if the key space exceeds int64."""
    if rows.shape[1] == 0:
        return np.zeros(rows.shape[0], dtype=np.int64), np.zeros(0, dtype=np.int64)
    shifted = rows + 1
    radix = shifted.max(axis=0) + 1 if rows.shape[0] else np.ones(rows.shape[1], np.int64)
    total = 1
    for r in radix:
        total *= int(r)
        if total > _MAX_PACK:
            return None
    key = np.zeros(rows.shape[0], dtype=np.int64)
    for j in range(rows.shape[1]):
        key = key * int(radix[j]) + shifted[:, j]
    return key, radix


def unique_rows(rows: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Distinct rows (sorted) and the inverse index.

    Rows are packed into one int64 key and factorised by hashing (linear time;
    only the distinct keys are sorted), so the order never depends on the input's.
    """
    packed = _pack(rows)
    if packed is None:
        u, inv = np.unique(rows, axis=0, return_inverse=True)
        return u, inv.reshape(-1)
    import pandas as pd
    key, radix = packed
    inv, uk = pd.factorize(key, sort=True)
    uk = np.asarray(uk, dtype=np.int64)
    out = np.empty((uk.size, rows.shape[1]), dtype=np.int64)
    rest = uk.copy()
    for j in range(rows.shape[1] - 1, -1, -1):
        rest, digit = np.divmod(rest, int(radix[j]))
        out[:, j] = digit - 1
    return out, np.asarray(inv, dtype=np.int64)


def combo_table(codes: np.ndarray, weights: np.ndarray | None = None) -> dict[str, Any]:
    """The distinct key combinations of a block and their counts.

    Parameters
    ----------
    codes : ndarray, shape (n, q)
        Key codes (NaN: missing).
    weights : ndarray, shape (n,), optional

    Returns
    -------
    dict
        ``rows`` (U, q) int64 (-1: missing), ``count`` (U,) int64, ``weight`` (U,)
        float64 (the counts when unweighted), ``inverse`` (n,) the row of each record.
    """
    codes = np.asarray(codes, dtype=np.float64)
    rows = np.where(np.isnan(codes), -1, codes).astype(np.int64)
    u, inv = unique_rows(rows)
    count = np.bincount(inv, minlength=u.shape[0]).astype(np.int64)
    w = count.astype(np.float64) if weights is None else \
        np.bincount(inv, weights=np.asarray(weights, dtype=np.float64), minlength=u.shape[0])
    return {"rows": u, "count": count, "weight": w, "inverse": inv}


def merge_tables(*tables: dict[str, Any]) -> dict[str, Any]:
    """``combine``: merge combination tables, adding counts and weights (argument order)."""
    rows = np.concatenate([t["rows"] for t in tables])
    u, inv = unique_rows(rows)
    count = np.bincount(inv, weights=np.concatenate([t["count"] for t in tables]),
                        minlength=u.shape[0]).astype(np.int64)
    weight = np.bincount(inv, weights=np.concatenate([t["weight"] for t in tables]),
                         minlength=u.shape[0])
    out = {"rows": u, "count": count, "weight": weight,
           "bad_weights": sum(int(t.get("bad_weights", 0)) for t in tables)}
    return out


def combo_frequencies(table: dict[str, Any]) -> tuple[np.ndarray, np.ndarray]:
    """``f_k`` and ``F_k`` of each distinct combination, missing values matching all.

    Without missing values these are the table's counts and weights. Otherwise,
    for each pair of missingness patterns (S of u, T of v), the records of
    combinations v that agree with u on the keys outside S and T are added.
    """
    rows, count, weight = table["rows"], table["count"], table["weight"]
    miss = rows < 0
    if not miss.any():
        return count.astype(np.float64), weight.astype(np.float64)
    pats, pat_of = np.unique(miss, axis=0, return_inverse=True)
    pat_of = pat_of.reshape(-1)
    fk = np.zeros(rows.shape[0])
    Fk = np.zeros(rows.shape[0])
    for s in range(pats.shape[0]):
        us = np.flatnonzero(pat_of == s)
        for t in range(pats.shape[0]):
            vs = np.flatnonzero(pat_of == t)
            cols = np.flatnonzero(~pats[s] & ~pats[t])
            both = np.concatenate([rows[np.ix_(vs, cols)], rows[np.ix_(us, cols)]])
            _, inv = unique_rows(both)
            iv, iu = inv[:vs.size], inv[vs.size:]
            m = int(inv.max()) + 1 if inv.size else 0
            c = np.bincount(iv, weights=count[vs].astype(np.float64), minlength=m)
            w = np.bincount(iv, weights=weight[vs], minlength=m)
            fk[us] += c[iu]
            Fk[us] += w[iu]
    return fk, Fk


def apply_lookup(codes: np.ndarray, lookup: np.ndarray | None) -> np.ndarray:
    """Original codes mapped through a recoding lookup (NaN where it has no image)."""
    if lookup is None:
        return codes
    out = np.full(codes.shape, np.nan)
    ok = ~np.isnan(codes) & (codes >= 0) & (codes < lookup.size)
    out[ok] = lookup[codes[ok].astype(np.int64)]
    return out
