"""Masking of categorical columns: PRAM, invariant PRAM, global recoding, local suppression.

These methods receive the whole file ``X`` (n, m) with the categorical columns
as codes 0..L-1 (NaN: missing) and the positions of those columns
(``categorical``); they mask the columns named by the ``variables`` option (default:
the categorical key columns, else every categorical column) and return every
other column bit-identical.

- ``pram`` (parameter p): each value is kept with probability p, otherwise
  moved to another category j with probability proportional to its frequency,
  ``P[i, j] = (1 - p) f_j / (n - f_i)`` for j != i (f: the column's category
  counts). A column with one category is kept.
- ``pram_inv`` (parameter p): the invariant PRAM of Gouweleeuw et al. (1998)
  built on that P: ``R = P Q`` with ``Q[j, i] = P[i, j] pi_i / sum_k P[k, j] pi_k``
  (pi = f / n). Then ``pi R = pi``: the expected category frequencies of the
  masked column equal the original ones.
- ``recode`` (parameter w, the band width; 0: the mapping only): global
  recoding. The ``mapping`` option renames categories per column (several
  into one); then, for w > 0, categories whose labels are numbers are grouped
  into bands ``[origin + i w, origin + (i + 1) w)``. New categories get codes
  after the existing ones (labels in ``info["categories"]``).
- ``suppress`` (parameter k): local suppression towards k-anonymity, with a
  missing value matching every category (sdcMicro's convention). Greedy:
  while some record shares its key combination with fewer than k records
  (itself included), each such record gets one more of its key values set to
  missing, the one of the key with the most categories among those it still
  has. Suppressing a value never lowers any record's frequency (a missing
  value matches more records, never fewer), so records that start safe stay
  untouched: at most ``q x U`` values are suppressed, q the number of keys and
  U the number of records in key classes smaller than k before suppression,
  and the loop ends after at most q rounds (a record with every key missing
  matches all n >= k records).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from typing import Any

import numpy as np

from ..errors import SdcInputError, param_error
from ._registry import register

__all__ = ["pram_matrix", "invariant_matrix", "pram_column", "frequencies_wildcard",
           "suppress_greedy", "check_categorical_data", "masked_columns"]


# -- which columns ------------------------------------------------------------------

def masked_columns(method: str, X: np.ndarray, categorical: Sequence[int],
                   variables: Sequence[str] | None, columns: Sequence[str] | None,
                   roles: Mapping[str, Sequence[int]] | None) -> list[int]:
    """Positions of the columns ``method`` masks (checked to be categorical)."""
    cats = list(categorical)
    if variables:
        if not columns:
            raise SdcInputError(f"{method} got 'variables' but not the file's column names")
        from ..errors import column_positions
        pos = column_positions(variables, columns, what="column", where=f"the 'variables' option of {method}")
        numeric = [columns[j] for j in pos if j not in set(cats)]
        if numeric:
            raise SdcInputError(f"{method} masks categorical columns, and {numeric} are "
                                "numeric; declare them categorical (ingest --categorical, "
                                "or 'categorical:' in the spec's dataset) or leave them out "
                                "of 'variables'")
        return pos
    keys = [j for j in (roles or {}).get("key", []) if j in set(cats)]
    out = keys or cats
    if not out:
        raise SdcInputError(f"{method} masks categorical columns, and the file has none: "
                            "declare integer-coded ones categorical (ingest --categorical, "
                            "or 'categorical:' in the spec's dataset)")
    return out


def _codes(x: np.ndarray) -> tuple[np.ndarray, np.ndarray, int]:
    """(integer codes with -1 for missing, the present mask, number of codes)."""
    ok = ~np.isnan(x)
    c = np.where(ok, x, -1).astype(np.int64)
    L = int(c.max()) + 1 if c.size else 0
    return c, ok, max(L, 1)


# -- PRAM ------------------------------------------------------------------------------

def pram_matrix(freq: np.ndarray, p: float) -> np.ndarray:
    """The PRAM transition matrix, shape (L, L): keep with p, else move in proportion to the
    other categories' frequencies.

    Parameters
    ----------
    freq : ndarray, shape (L,)
        Category counts.
    p : float in [0, 1]

    Returns
    -------
    ndarray, shape (L, L), rows sum to 1.
    """
    f = np.asarray(freq, dtype=np.float64)
    n = f.sum()
    L = f.size
    P = np.zeros((L, L))
    for i in range(L):
        rest = n - f[i]
        if rest <= 0:
            P[i, i] = 1.0
            continue
        P[i] = (1.0 - p) * f / rest
        P[i, i] = p
    return P


def invariant_matrix(P: np.ndarray, freq: np.ndarray) -> np.ndarray:
    """Invariant PRAM ``R = P Q`` (Gouweleeuw et al. 1998): ``pi R = pi`` for pi = freq / n.

    Categories with zero frequency keep their rows of P's identity (never used).
    """
    pi = np.asarray(freq, dtype=np.float64) / max(float(np.sum(freq)), 1.0)
    lam = pi @ P                                   # lam[j] = sum_k pi_k P[k, j]
    Q = np.zeros_like(P)
    ok = lam > 0
    Q[np.ix_(ok, np.arange(P.shape[0]))] = (P.T[ok] * pi[None, :]) / lam[ok, None]
    R = P @ Q
    zero = pi == 0
    R[zero] = 0.0
    R[zero, zero] = 1.0
    R /= R.sum(axis=1, keepdims=True)
    return R


def pram_column(x: np.ndarray, p: float, *, rng: np.random.Generator,
                invariant: bool = False) -> np.ndarray:
    """PRAM on one code column (NaN stays NaN). Returns a new float64 array."""
    c, ok, L = _codes(x)
    freq = np.bincount(c[ok], minlength=L).astype(np.float64)
    P = pram_matrix(freq, p)
    if invariant:
        P = invariant_matrix(P, freq)
    cum = np.cumsum(P, axis=1)
    cum[:, -1] = 1.0
    u = rng.random(int(ok.sum()))
    rows = cum[c[ok]]
    new = (u[:, None] >= rows).sum(axis=1)
    out = x.copy()
    out[ok] = np.minimum(new, L - 1).astype(np.float64)
    return out


def _pram(X: np.ndarray, p: float, *, rng: np.random.Generator, categorical: Sequence[int],
          variables: Sequence[str] | None = None, columns: Sequence[str] | None = None,
          roles: Mapping[str, Sequence[int]] | None = None, invariant: bool) -> np.ndarray:
    out = X.copy()
    for j in masked_columns("pram_inv" if invariant else "pram", X, categorical, variables, columns,
                            roles):
        out[:, j] = pram_column(X[:, j], p, rng=rng, invariant=invariant)
    return out


@register("pram", param="p", kind="float", low=0.0, high=1.0, random=True,
          acts_on="categorical", options=("variables", "columns", "roles"),
          description="PRAM on categorical columns: keep a category with probability p, "
                      "else move it in proportion to the category frequencies",
          reference="Gouweleeuw, Kooiman, Willenborg and de Wolf (1998)")
def pram(X: np.ndarray, p: float, *, rng: np.random.Generator, categorical: Sequence[int] = (),
         variables: Sequence[str] | None = None, columns: Sequence[str] | None = None,
         roles: Mapping[str, Sequence[int]] | None = None) -> np.ndarray:
    """PRAM. ``X`` (n, m) with categorical codes; returns (n, m)."""
    return _pram(X, p, rng=rng, categorical=categorical, variables=variables, columns=columns, roles=roles,
                 invariant=False)


@register("pram_inv", param="p", kind="float", low=0.0, high=1.0, random=True,
          acts_on="categorical", options=("variables", "columns", "roles"),
          description="invariant PRAM: the PRAM matrix of pram made invariant (R = PQ), so "
                      "the expected category frequencies are the original ones",
          reference="Gouweleeuw, Kooiman, Willenborg and de Wolf (1998)")
def pram_inv(X: np.ndarray, p: float, *, rng: np.random.Generator,
             categorical: Sequence[int] = (), variables: Sequence[str] | None = None,
             columns: Sequence[str] | None = None,
             roles: Mapping[str, Sequence[int]] | None = None) -> np.ndarray:
    """Invariant PRAM. ``X`` (n, m) with categorical codes; returns (n, m)."""
    return _pram(X, p, rng=rng, categorical=categorical, variables=variables, columns=columns, roles=roles,
                 invariant=True)


# -- global recoding ----------------------------------------------------------------------

def _band_label(v: float, w: float, origin: float) -> str:
    lo = origin + np.floor((v - origin) / w) * w
    return f"[{lo:g},{lo + w:g})"


def recode_labels(labels: Sequence[str], w: float, *, mapping: Mapping[str, str] | None = None,
                  origin: float = 0.0, column: str = "") -> tuple[np.ndarray, list[str]]:
    """Where each code goes, and the labels after recoding.

    Returns
    -------
    target : ndarray of int, shape (L,)
        New code of each old code.
    labels : list of str
        The old labels followed by the new ones (codes of new labels come after).

    Raises
    ------
    SdcInputError
        A mapping naming a category the column does not have, or bands on
        labels that are not numbers.
    """
    labels = [str(x) for x in labels]
    mapping = {str(k): str(v) for k, v in (mapping or {}).items()}
    unknown = [k for k in mapping if k not in set(labels)]
    if unknown:
        raise SdcInputError(f"the recode mapping of column {column!r} names {len(unknown)} "
                            f"categor{'y' if len(unknown) == 1 else 'ies'} the column does not "
                            f"have (it has {len(labels)}); map only existing categories")
    new = [mapping.get(x, x) for x in labels]
    if w > 0:
        try:
            nums = [float(x) for x in new]
        except ValueError:
            raise SdcInputError(f"recode into bands needs numeric categories, and column "
                                f"{column!r} has categories that are not numbers; give a "
                                "'mapping' instead (w = 0)") from None
        new = [_band_label(v, w, origin) for v in nums]
    out = list(labels)
    index = {x: i for i, x in enumerate(out)}
    target = np.empty(len(labels), dtype=np.int64)
    for i, lab in enumerate(new):
        if lab == labels[i]:
            target[i] = i
            continue
        if lab not in index:
            index[lab] = len(out)
            out.append(lab)
        target[i] = index[lab]
    return target, out


@register("recode", param="w", kind="float", low=0.0, high=1e12, random=False,
          acts_on="categorical",
          options=("variables", "columns", "roles", "mapping", "origin", "labels", "info"),
          allowed="a band width >= 0 (0: the mapping only)",
          description="global recoding of categorical columns: a mapping of categories, "
                      "then numeric categories into bands of width w",
          reference="Willenborg and de Waal (2001)")
def recode(X: np.ndarray, w: float, *, rng: np.random.Generator,
           categorical: Sequence[int] = (), variables: Sequence[str] | None = None,
           columns: Sequence[str] | None = None,
           roles: Mapping[str, Sequence[int]] | None = None,
           mapping: Mapping[str, Mapping[str, str]] | None = None, origin: float = 0.0,
           labels: Mapping[str, Sequence[str]] | None = None,
           info: dict | None = None) -> np.ndarray:
    """Global recoding. ``labels``: each categorical column's labels (default: the codes
    as labels). Returns (n, m); new category labels in ``info["categories"]``."""
    out = X.copy()
    cols = list(columns) if columns else [f"V{j + 1}" for j in range(X.shape[1])]
    mapping = dict(mapping or {})
    targets = masked_columns("recode", X, categorical, variables, columns, roles)
    if mapping:
        from ..errors import column_positions
        pos = column_positions(list(mapping), cols, what="column",
                               where="the 'mapping' option of recode")
        bad = [cols[j] for j in pos if j not in set(targets)]
        if bad:
            raise SdcInputError(f"the recode mapping names {bad}, which recode does not mask "
                                "(list them in 'variables', and declare them categorical)")
    if w == 0 and not mapping:
        raise SdcInputError("recode with w = 0 needs a 'mapping' (else nothing changes); "
                            "give a band width w > 0 or a mapping")
    new_labels: dict[str, list[str]] = {}
    for j in targets:
        name = cols[j]
        c, ok, L = _codes(X[:, j])
        labs = list((labels or {}).get(name) or [str(i) for i in range(L)])
        if name not in mapping and w == 0:
            continue
        target, labs2 = recode_labels(labs, w, mapping=mapping.get(name), origin=origin,
                                      column=name)
        out[ok, j] = target[c[ok]].astype(np.float64)
        new_labels[name] = labs2
    if info is not None:
        info["categories"] = new_labels
    return out


# -- local suppression -----------------------------------------------------------------

def frequencies_wildcard(codes: np.ndarray, weights: np.ndarray | None = None
                         ) -> tuple[np.ndarray, np.ndarray]:
    """Sample and weighted frequency of each record's key combination, a missing value
    (NaN) matching every category (sdcMicro's ``freqCalc`` with ``alpha = 1``).

    Parameters
    ----------
    codes : ndarray, shape (n, q)
        Key codes, NaN where missing.
    weights : ndarray, shape (n,), optional

    Returns
    -------
    fk, Fk : ndarray, shape (n,)
    """
    from ..metrics.frequency import combo_table, combo_frequencies
    table = combo_table(codes, weights)
    fk_u, Fk_u = combo_frequencies(table)
    return fk_u[table["inverse"]], Fk_u[table["inverse"]]


def suppress_greedy(codes: np.ndarray, k: int) -> tuple[np.ndarray, int, int]:
    """Greedy local suppression to k-anonymity (NaN matches every category).

    Parameters
    ----------
    codes : ndarray, shape (n, q)
    k : int, 2 <= k <= n

    Returns
    -------
    out : ndarray, shape (n, q)
        With suppressed values set to NaN.
    suppressed : int
        Number of values set to missing.
    unsafe : int
        Records in key classes smaller than k before suppression (the bound is
        ``q * unsafe``).
    """
    out = np.array(codes, dtype=np.float64, copy=True)
    n, q = out.shape
    levels = np.array([np.unique(out[~np.isnan(out[:, j]), j]).size for j in range(q)])
    order = np.argsort(-levels, kind="stable")             # most categories first
    fk, _ = frequencies_wildcard(out)
    unsafe0 = int((fk < k).sum())
    total = 0
    for _ in range(q + 1):
        bad = np.flatnonzero(fk < k)
        if bad.size == 0:
            break
        # choose, per record, the first key in ``order`` it still has
        has = ~np.isnan(out[bad][:, order])
        first = np.argmax(has, axis=1)
        rows = bad[has.any(axis=1)]
        cols = order[first[has.any(axis=1)]]
        out[rows, cols] = np.nan
        total += rows.size
        fk, _ = frequencies_wildcard(out)
    return out, total, unsafe0


def _check_k(k: int, n: int) -> None:
    if k > n:
        raise param_error("k", "suppress", f"an integer in [2, n] with n = {n} records", k)


@register("suppress", param="k", kind="int", low=2, high=1e9, random=False,
          acts_on="categorical", options=("variables", "columns", "roles", "info"),
          allowed="an integer in [2, n]",
          description="local suppression of categorical key values until every key "
                      "combination is shared by >= k records (greedy, missing matches all)",
          reference="Templ, Kowarik and Meindl (2015), sdcMicro's localSuppression")
def suppress(X: np.ndarray, k: int, *, rng: np.random.Generator,
             categorical: Sequence[int] = (), variables: Sequence[str] | None = None,
             columns: Sequence[str] | None = None,
             roles: Mapping[str, Sequence[int]] | None = None,
             info: dict | None = None) -> np.ndarray:
    """Local suppression. ``X`` (n, m); returns (n, m) with suppressed codes NaN."""
    _check_k(int(k), X.shape[0])
    pos = masked_columns("suppress", X, categorical, variables, columns, roles)
    out = X.copy()
    sub, total, unsafe = suppress_greedy(X[:, pos], int(k))
    out[:, pos] = sub
    if info is not None:
        info.update(suppressed=total, unsafe=unsafe, bound=len(pos) * unsafe)
    return out


def check_categorical_data(method: str, X: np.ndarray, params: Iterable[float],
                           categorical: Sequence[int], options: Mapping[str, Any]) -> None:
    """Data-dependent checks of a categorical method (before an audit starts)."""
    masked_columns(method, X, categorical, options.get("variables"), options.get("columns"),
                   options.get("roles"))
    if method == "suppress":
        for p in params:
            _check_k(int(p), X.shape[0])
