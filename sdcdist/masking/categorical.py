"""Masking of categorical columns: PRAM, invariant PRAM, global recoding, local suppression.

These methods receive the whole file ``X`` (n, m) with the categorical columns
as codes 0..L-1 (NaN: missing) and the positions of those columns
(``categorical``); they mask the columns named by the ``variables`` option (default:
the categorical key columns, else every categorical column) and return every
other column bit-identical.

- ``pram`` (parameter pd, option alpha): sdcMicro's invariant PRAM. P has diagonal
  d_i ~ U(pd, 1) and (1 - d_i) / (L - 1) elsewhere in row i; the transition matrix is
  ``Rs = alpha P Q + (1 - alpha) I`` with ``Q[k, j] = P[j, k] pi_j / sum_l pi_l P[l, k]``
  (pi = f / n), so ``pi Rs = pi``: expected category counts are kept.
- ``pram_freq`` (parameter p): each value is kept with probability p, otherwise moved
  to another category j with probability proportional to its frequency,
  ``P[i, j] = (1 - p) f_j / (n - f_i)`` for j != i. Not invariant.
- ``pram_freq_inv`` (parameter p): ``R = P Q`` on pram_freq's P (Gouweleeuw et al. 1998).
- All three sample each record's new category without building an L x L or n x L
  matrix (memory O(n + L) per column; see ``_Invariant``).
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
  matches all n >= k records). Then a give-back pass restores, one by one (keys
  of most importance first), every suppressed value k-anonymity does not need,
  through hash indexes on the key combinations (see ``_give_back``): no size limit.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from decimal import Decimal, InvalidOperation, localcontext
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
#
# Both transition matrices have the form P = diag(D) + c g^T (a diagonal plus a rank-one
# part), and so has every row of the invariant matrix R = P Q built on them (a diagonal
# term plus a mixture of two fixed vectors).  Rows are therefore sampled without ever
# materialising an L x L (or n x L) array: memory O(n + L) per column.

#: Largest number of categories of a column whose invariant PRAM needs its rows one by
#: one (pd below 1/L, or a category holding most of pram_freq_inv's column): O(L^2) time.
ROW_BY_ROW_LIMIT = 20_000


def _structure_sdcmicro(L: int, diag: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """sdcMicro's P: diagonal d_i, every other entry of row i (1 - d_i) / (L - 1)."""
    d = np.asarray(diag, dtype=np.float64)
    t = (1.0 - d) / (L - 1) if L > 1 else np.zeros(L)
    return d - t, t, np.ones(L)


def _structure_freq(freq: np.ndarray, p: float) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """pram_freq's P: keep with p, else move in proportion to the other counts."""
    f = np.asarray(freq, dtype=np.float64)
    n = f.sum()
    rest = n - f
    c = np.where(rest > 0, (1.0 - p) / np.where(rest > 0, rest, 1.0), 0.0)
    D = np.where(rest > 0, p - c * f, 1.0)
    return D, c, f


def _dense(D: np.ndarray, c: np.ndarray, g: np.ndarray) -> np.ndarray:
    return np.diag(D) + np.outer(c, g)


class _Invariant:
    """Rows of ``alpha R + (1 - alpha) I`` with R = P Q, P = diag(D) + c g^T, pi the shares.

    Row i of R is ``pi o (delta_i D_i^2 / s_i + (D_i g_i / s_i) c + c_i (g o D / s) + c_i G c)``
    with s = pi o D + g (pi . c) (the masked shares under P) and G = sum_k g_k^2 / s_k
    (over s_k > 0; the others are never reached).
    """

    def __init__(self, D, c, g, pi, alpha):
        self.D, self.c, self.g, self.pi, self.alpha = D, c, g, pi, float(alpha)
        s = pi * D + g * float(pi @ c)
        ok = s > 0
        self.s = np.where(ok, s, 1.0)
        self.ok = ok
        self.G = float(np.sum(np.where(ok, g * g / self.s, 0.0)))
        self.A = pi * c                                   # weight D_i g_i / s_i + c_i G
        self.B = np.where(ok, pi * g * D / self.s, 0.0)   # weight c_i

    def row(self, i: int) -> np.ndarray:
        r = (self.D[i] * self.g[i] / self.s[i] + self.c[i] * self.G) * self.A + self.c[i] * self.B
        r[i] += self.pi[i] * self.D[i] ** 2 / self.s[i]
        r *= self.alpha
        r[i] += 1.0 - self.alpha
        return r

    def matrix(self) -> np.ndarray:
        P = _dense(self.D, self.c, self.g)
        L = P.shape[0]
        Q = np.zeros((L, L))
        Q[self.ok] = (P.T[self.ok] * self.pi[None, :]) / self.s[self.ok, None]
        return self.alpha * (P @ Q) + (1.0 - self.alpha) * np.eye(L)

    def sample(self, c: np.ndarray, rng: np.random.Generator) -> np.ndarray:
        """New codes for the codes ``c`` (n,), all of categories with pi > 0."""
        present = np.flatnonzero(self.pi > 0)
        if np.all(self.D[present] >= 0) and np.all(self.B >= 0):
            # a mixture: keep, or draw from the fixed vectors A or B
            w_keep = self.alpha * self.pi * np.where(self.ok, self.D ** 2 / self.s, 0.0) \
                + (1.0 - self.alpha)
            w_a = self.alpha * (self.D * self.g / self.s + self.c * self.G) * self.A.sum()
            w_b = self.alpha * self.c * self.B.sum()
            tot = w_keep + w_a + w_b
            u = rng.random(c.size) * tot[c]
            out = c.copy()
            ia = (u >= w_keep[c]) & (u < (w_keep + w_a)[c])
            ib = u >= (w_keep + w_a)[c]
            out[ia] = _draw(self.A, int(ia.sum()), rng)
            out[ib] = _draw(self.B, int(ib.sum()), rng)
            return out
        L = self.D.size
        if present.size > ROW_BY_ROW_LIMIT:
            raise SdcInputError(
                f"this invariant PRAM has a transition matrix that is not a mixture (a "
                f"diagonal entry below 1/L) and must be built row by row, which is refused "
                f"beyond {ROW_BY_ROW_LIMIT} categories (the column has {present.size} of "
                f"{L}); raise pd to at least 1/L, or recode the column into fewer categories")
        return _sample_rows(c, self.row, rng)


def _draw(weights: np.ndarray, size: int, rng: np.random.Generator) -> np.ndarray:
    """``size`` codes drawn with probabilities proportional to ``weights`` (>= 0)."""
    if size == 0:
        return np.empty(0, dtype=np.int64)
    cum = np.cumsum(weights)
    idx = np.searchsorted(cum, rng.random(size) * cum[-1], side="right")
    return np.minimum(idx, weights.size - 1)


def _sample_rows(c: np.ndarray, row, rng: np.random.Generator) -> np.ndarray:
    """New codes, each category's records drawn from its row (computed once, O(L))."""
    u = rng.random(c.size)
    out = c.copy()
    order = np.argsort(c, kind="stable")
    cats, starts = np.unique(c[order], return_index=True)
    ends = np.append(starts[1:], c.size)
    for cat, a, b in zip(cats, starts, ends):
        cum = np.cumsum(row(int(cat)))
        idx = order[a:b]
        out[idx] = np.minimum(np.searchsorted(cum, u[idx] * cum[-1], side="right"), cum.size - 1)
    return out


def pram_diagonal(L: int, pd: float, rng: np.random.Generator) -> np.ndarray:
    """sdcMicro's random diagonal: d_i ~ U(pd, 1), one per category (``runif(L, pd, 1)``)."""
    return pd + (1.0 - pd) * rng.random(L)


def pram_matrix(freq: np.ndarray, pd: float, alpha: float = 0.5, *,
                diag: np.ndarray | None = None, rng: np.random.Generator | None = None
                ) -> np.ndarray:
    """sdcMicro's invariant PRAM transition matrix ``Rs``, shape (L, L) (for inspection;
    the masking never builds it).

    ``P`` has diagonal ``diag`` (default drawn as sdcMicro does, U(pd, 1) per category) and
    ``(1 - d_i) / (L - 1)`` elsewhere; ``Q[k, j] = P[j, k] pi_j / sum_l pi_l P[l, k]``;
    ``Rs = alpha P Q + (1 - alpha) I``. Then ``pi Rs = pi``.

    Parameters
    ----------
    freq : ndarray, shape (L,)
        Category counts.
    pd : float in [0, 1]
        Least diagonal entry of P.
    alpha : float in [0, 1]
        Amount of perturbation.
    diag : ndarray, shape (L,), optional
        The diagonal of P (else drawn with ``rng``).

    Returns
    -------
    ndarray, shape (L, L), rows sum to 1.
    """
    f = np.asarray(freq, dtype=np.float64)
    L = f.size
    if diag is None:
        diag = pram_diagonal(L, pd, rng if rng is not None else np.random.default_rng())
    D, c, g = _structure_sdcmicro(L, np.asarray(diag, dtype=np.float64))
    return _Invariant(D, c, g, f / max(f.sum(), 1.0), alpha).matrix()


def pram_freq_matrix(freq: np.ndarray, p: float) -> np.ndarray:
    """``pram_freq``'s transition matrix, shape (L, L): keep with p, else move in proportion
    to the other categories' counts, ``P[i, j] = (1 - p) f_j / (n - f_i)``.

    Parameters
    ----------
    freq : ndarray, shape (L,)
    p : float in [0, 1]

    Returns
    -------
    ndarray, shape (L, L), rows sum to 1.
    """
    return _dense(*_structure_freq(freq, p))


def invariant_matrix(P: np.ndarray, freq: np.ndarray, alpha: float = 1.0) -> np.ndarray:
    """Invariant PRAM ``alpha P Q + (1 - alpha) I`` for any dense P (Gouweleeuw et al. 1998):
    ``pi R = pi`` for pi = freq / n. Shape (L, L)."""
    pi = np.asarray(freq, dtype=np.float64) / max(float(np.sum(freq)), 1.0)
    L = P.shape[0]
    lam = pi @ P
    Q = np.zeros_like(P)
    ok = lam > 0
    Q[ok] = (P.T[ok] * pi[None, :]) / lam[ok, None]
    R = P @ Q
    zero = pi == 0
    R[zero] = 0.0
    R[zero, zero] = 1.0
    return alpha * R + (1.0 - alpha) * np.eye(L)


def pram_column(x: np.ndarray, p: float, *, rng: np.random.Generator,
                construction: str = "sdcmicro", alpha: float = 0.5,
                n_categories: int | None = None) -> np.ndarray:
    """PRAM on one code column (NaN stays NaN). Returns a new float64 array.

    ``construction``: ``sdcmicro`` (``pram``: p is pd, invariant with ``alpha``),
    ``freq`` (``pram_freq``, not invariant) or ``freq_inv`` (``pram_freq_inv``).
    ``n_categories``: the column's declared categories (its labels, used or not; CATALOG:
    an empty category counts wherever its code stands); None for a column without
    labels (then the codes 0..largest are its categories). Memory O(n + L); no L x L
    matrix is built.
    """
    c, ok, L = _codes(x)
    if n_categories is not None:      # codes beyond the labels cannot occur (read data)
        L = max(L, int(n_categories))
    cc = c[ok]
    out = x.copy()
    if cc.size == 0:
        return out
    freq = np.bincount(cc, minlength=L).astype(np.float64)
    if construction == "freq":
        n = freq.sum()
        u = rng.random(cc.size)
        new = cc.copy()
        move = (u >= p) & (freq[cc] < n)
        m = int(move.sum())
        if m:
            src = cc[move]
            cum = np.cumsum(freq)
            before = cum[src] - freq[src]
            v = rng.random(m) * (n - freq[src])           # a point of the other counts
            v = np.where(v >= before, v + freq[src], v)   # skip the own category
            new[move] = np.minimum(np.searchsorted(cum, v, side="right"), L - 1)
        out[ok] = new.astype(np.float64)
        return out
    pi = freq / freq.sum()
    if construction == "sdcmicro":
        D, cv, g = _structure_sdcmicro(L, pram_diagonal(L, p, rng))
        inv = _Invariant(D, cv, g, pi, alpha)
    else:
        D, cv, g = _structure_freq(freq, p)
        inv = _Invariant(D, cv, g, pi, 1.0)
    out[ok] = inv.sample(cc, rng).astype(np.float64)
    return out


def declared_categories(j: int, columns: Sequence[str] | None,
                        labels: Mapping[str, Sequence[str]] | None,
                        info: Mapping[str, Any] | None) -> int | None:
    """How many categories column ``j`` declares: its labels after an earlier step of a
    pipeline recoded them (``info["categories"]``), else its labels (``labels``, filled
    from the data's categories), else None (no labels known)."""
    if columns is None or j >= len(columns):
        return None
    name = columns[j]
    for source in ((info or {}).get("categories") or {}, labels or {}):
        if name in source and source[name] is not None:
            return len(source[name])
    return None


def _pram(name: str, X: np.ndarray, p: float, *, rng: np.random.Generator,
          categorical: Sequence[int], variables: Sequence[str] | None,
          columns: Sequence[str] | None, roles: Mapping[str, Sequence[int]] | None,
          construction: str, alpha: float = 0.5,
          labels: Mapping[str, Sequence[str]] | None = None,
          info: Mapping[str, Any] | None = None) -> np.ndarray:
    if not 0.0 <= float(alpha) <= 1.0:
        raise param_error("alpha", name, "a number in [0, 1]", alpha)
    out = X.copy()
    for j in masked_columns(name, X, categorical, variables, columns, roles):
        out[:, j] = pram_column(X[:, j], p, rng=rng, construction=construction, alpha=alpha,
                                n_categories=declared_categories(j, columns, labels, info))
    return out


@register("pram", param="pd", kind="float", low=0.0, high=1.0, random=True,
          acts_on="categorical",
          options=("variables", "columns", "roles", "alpha", "labels", "info"),
          description="sdcMicro's invariant PRAM: P keeps a category with a probability drawn "
                      "in [pd, 1] and moves it uniformly otherwise; Rs = alpha PQ + (1 - alpha) I "
                      "keeps the expected category counts",
          reference="Gouweleeuw, Kooiman, Willenborg and de Wolf (1998); sdcMicro's pram")
def pram(X: np.ndarray, pd: float, *, rng: np.random.Generator, categorical: Sequence[int] = (),
         variables: Sequence[str] | None = None, columns: Sequence[str] | None = None,
         roles: Mapping[str, Sequence[int]] | None = None, alpha: float = 0.5,
         labels: Mapping[str, Sequence[str]] | None = None,
         info: dict[str, Any] | None = None) -> np.ndarray:
    """sdcMicro's invariant PRAM. ``X`` (n, m) with categorical codes; returns (n, m).
    ``labels``: each categorical column's declared categories (their number is L)."""
    return _pram("pram", X, pd, rng=rng, categorical=categorical, variables=variables,
                 columns=columns, roles=roles, construction="sdcmicro", alpha=alpha,
                 labels=labels, info=info)


@register("pram_freq", param="p", kind="float", low=0.0, high=1.0, random=True,
          acts_on="categorical", options=("variables", "columns", "roles", "labels", "info"),
          description="frequency-proportional PRAM (not invariant): keep a category with "
                      "probability p, else move it in proportion to the other categories' counts",
          reference="Gouweleeuw, Kooiman, Willenborg and de Wolf (1998)")
def pram_freq(X: np.ndarray, p: float, *, rng: np.random.Generator,
              categorical: Sequence[int] = (), variables: Sequence[str] | None = None,
              columns: Sequence[str] | None = None,
              roles: Mapping[str, Sequence[int]] | None = None,
              labels: Mapping[str, Sequence[str]] | None = None,
              info: dict[str, Any] | None = None) -> np.ndarray:
    """Frequency-proportional PRAM. ``X`` (n, m) with categorical codes; returns (n, m)."""
    return _pram("pram_freq", X, p, rng=rng, categorical=categorical, variables=variables,
                 columns=columns, roles=roles, construction="freq", labels=labels, info=info)


@register("pram_freq_inv", param="p", kind="float", low=0.0, high=1.0, random=True,
          acts_on="categorical", options=("variables", "columns", "roles", "labels", "info"),
          description="pram_freq's matrix made invariant (R = PQ): expected category counts "
                      "kept; p is pram_freq's, not the share kept by R",
          reference="Gouweleeuw, Kooiman, Willenborg and de Wolf (1998)")
def pram_freq_inv(X: np.ndarray, p: float, *, rng: np.random.Generator,
                  categorical: Sequence[int] = (), variables: Sequence[str] | None = None,
                  columns: Sequence[str] | None = None,
                  roles: Mapping[str, Sequence[int]] | None = None,
                  labels: Mapping[str, Sequence[str]] | None = None,
                  info: dict[str, Any] | None = None) -> np.ndarray:
    """Invariant PRAM on pram_freq's matrix. ``X`` (n, m) with categorical codes."""
    return _pram("pram_freq_inv", X, p, rng=rng, categorical=categorical, variables=variables,
                 columns=columns, roles=roles, construction="freq_inv", labels=labels,
                 info=info)


# -- global recoding ----------------------------------------------------------------------

def _decimal(x: Any) -> Decimal:
    """A label or an option as an exact decimal (a float by its shortest repr: 0.1 is 0.1)."""
    return Decimal(repr(float(x))) if isinstance(x, float) else Decimal(str(x).strip())


def _band_label(v: Decimal, w: Decimal, origin: Decimal) -> str:
    """``[lo,hi)`` with lo = origin + floor((v - origin) / w) w, in exact decimal arithmetic,
    written in full (no exponent, no rounding: distinct bands never share a name)."""
    with localcontext() as ctx:
        ctx.prec = 200
        lo = origin + ((v - origin) // w - (1 if (v - origin) % w < 0 else 0)) * w
        hi = lo + w
    return f"[{_plain(lo)},{_plain(hi)})"


def _plain(d: Decimal) -> str:
    s = format(d.normalize(), "f")
    return "0" if s in ("-0", "") else s


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
            nums = [_decimal(x) for x in new]
            if not all(x.is_finite() for x in nums):
                raise InvalidOperation
        except (InvalidOperation, ValueError):
            raise SdcInputError(f"recode into bands needs numeric categories, and column "
                                f"{column!r} has categories that are not numbers; give a "
                                "'mapping' instead (w = 0)") from None
        wd, od = _decimal(float(w)), _decimal(float(origin))
        new = [_band_label(v, wd, od) for v in nums]
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
    from ..keytables import combo_table, combo_frequencies
    table = combo_table(codes, weights)
    fk_u, Fk_u = combo_frequencies(table)
    return fk_u[table["inverse"]], Fk_u[table["inverse"]]


def suppress_greedy(codes: np.ndarray, k: int, *, importance: Sequence[int] | None = None
                    ) -> tuple[np.ndarray, int, int]:
    """Greedy local suppression to k-anonymity (NaN matches every category), then a pass
    giving back every suppressed value that is not needed.

    Parameters
    ----------
    codes : ndarray, shape (n, q)
    k : int, 2 <= k <= n
    importance : sequence of int, length q, optional
        sdcMicro's importance: 1 the most important key (suppressed last), q the least
        (suppressed first). Default: the key with the most categories is suppressed first.

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
    orig = np.array(codes, dtype=np.float64, copy=True)
    order = _suppression_order(orig, importance)
    out, unsafe0 = _greedy(orig, k, order)
    _give_back(orig, out, k, order)
    total = int((np.isnan(out) & ~np.isnan(orig)).sum())
    return out, total, unsafe0


def _suppression_order(codes: np.ndarray, importance: Sequence[int] | None) -> np.ndarray:
    """Key positions, the first to suppress first."""
    q = codes.shape[1]
    if importance is None:
        levels = np.array([np.unique(codes[~np.isnan(codes[:, j]), j]).size
                           for j in range(q)])
        return np.argsort(-levels, kind="stable")             # most categories first
    imp = [int(v) for v in importance]
    if sorted(imp) != list(range(1, q + 1)):
        raise SdcInputError(f"The 'importance' option of suppress must list the integers "
                            f"1..{q} once each, one per masked column. Got {imp} instead.")
    return np.argsort(-np.array(imp), kind="stable")          # least important first


def _greedy(orig: np.ndarray, k: int, order: np.ndarray) -> tuple[np.ndarray, int]:
    """The greedy rounds: (the codes with suppressions, records unsafe at the start)."""
    out = orig.copy()
    q = out.shape[1]
    fk, _ = frequencies_wildcard(out)
    unsafe0 = int((fk < k).sum())
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
        fk, _ = frequencies_wildcard(out)
    return out, unsafe0


def _give_back(orig: np.ndarray, out: np.ndarray, k: int, order: np.ndarray) -> None:
    """Give back suppressed values one by one wherever every record keeps at least k
    matches; ``out`` is updated in place.

    The values are visited once each, keys of most importance first (the reverse of
    ``order``), records in row order within a key. Restoring value v of record r in key
    j: the records that matched r keep matching it iff their key j is missing or v; the
    others lose one match, and r's count becomes the number of records that still match
    it. It is done iff that count is at least k and every record losing a match keeps at
    least k. Counts only fall during the pass, so a value refused once would be refused
    at the end too: no suppressed value left can be given back alone.

    Records are grouped by their combination (missing values included: a "pattern").
    The patterns compatible with a given one are looked up per missingness mask through
    hash indexes on the columns both have (built when first needed, kept up to date), so
    a step costs about the number of patterns it touches, not n. A pattern held by more
    than k records cannot refuse a give-back (its f_k is at least its count), so f_k is
    kept exactly for the patterns held by 1 to k records ("tracked"; computed afresh when
    a pattern enters that range), and the tracked patterns at f_k = k, the only ones that
    can refuse, have indexes of their own.
    """
    from operator import itemgetter
    from ..keytables import combo_frequencies, combo_table
    n, q = out.shape
    sup = np.argwhere(np.isnan(out) & ~np.isnan(orig))
    if sup.shape[0] == 0:
        return
    rank = np.empty(q, dtype=np.int64)
    rank[order] = np.arange(q)
    sup = sup[np.lexsort((sup[:, 0], -rank[sup[:, 1]]))]

    table = combo_table(out)
    fk_u, _ = combo_frequencies(table)
    rows = table["rows"]
    pats: list[tuple[int, ...]] = list(map(tuple, rows.tolist()))
    cnt: list[int] = table["count"].tolist()
    fk: list[int] = fk_u.astype(np.int64).tolist()     # exact where tracked
    pm: list[int] = ((rows >= 0) * (1 << np.arange(q))).sum(axis=1).tolist()  # present bits
    rec: list[int] = table["inverse"].tolist()          # each record's pattern
    pid = {p: i for i, p in enumerate(pats)}
    tracked = [c <= k for c in cnt]                      # invariant: 1 <= cnt <= k
    # families of patterns, listed per mask of present columns: 0 all, 1 the tight ones
    # (tracked with f_k == k; entries go stale and are checked on use), 2 the tracked ones
    family: list[dict[int, list[int]]] = [{}, {}, {}]
    member = [set(), set(), set()]                       # who is listed (no duplicates)
    getters: dict[int, Any] = {}
    index: dict[tuple[int, int, int], tuple[Any, dict[Any, list[int]]]] = {}
    built: dict[tuple[int, int], list[int]] = {}         # (family, m) -> the s indexed
    masks: list[int] = []

    def enter(f: int, i: int) -> None:
        if i in member[f]:
            return
        member[f].add(i)
        m = pm[i]
        if m not in family[f]:
            family[f][m] = []
            if f == 0:
                masks.append(m)
        family[f][m].append(i)
        p = pats[i]
        for s in built.get((f, m), ()):
            g, ix = index[(f, m, s)]
            ix.setdefault(g(p), []).append(i)

    def build(f: int, m: int, s: int) -> tuple[Any, dict[Any, list[int]]]:
        g = getters.get(s)
        if g is None:
            cols = [c for c in range(q) if s >> c & 1]
            g = itemgetter(*cols) if cols else (lambda p: ())
            getters[s] = g
        ix: dict[Any, list[int]] = {}
        for i in family[f].get(m, ()):
            ix.setdefault(g(pats[i]), []).append(i)
        e = index[(f, m, s)] = (g, ix)
        built.setdefault((f, m), []).append(s)
        return e

    empty: list[int] = []

    def count_compatible(p: tuple[int, ...], a: int) -> int:
        total = 0
        for m in masks:
            e = index.get((0, m, a & m)) or build(0, m, a & m)
            for i in e[1].get(e[0](p), empty):
                total += cnt[i]
        return total

    def track(i: int, f_i: int) -> None:
        tracked[i] = True
        fk[i] = f_i
        enter(2, i)
        if f_i == k:
            enter(1, i)

    for i, m in enumerate(pm):
        family[0].setdefault(m, []).append(i)
    masks.extend(family[0])
    member[0].update(range(len(pats)))
    for i in range(len(pats)):
        if tracked[i]:
            track(i, fk[i])

    given: list[int] = []
    values = orig[sup[:, 0], sup[:, 1]].astype(np.int64).tolist()
    for (r, j), v in zip(sup.tolist(), values):
        i0 = rec[r]
        p0 = pats[i0]
        a0 = pm[i0]
        bj = 1 << j
        p1 = p0[:j] + (v,) + p0[j + 1:]
        i1 = pid.get(p1)
        if i1 is not None and cnt[i1] > k:
            nk = -1                                      # at least cnt > k; not needed
        elif i1 is not None and tracked[i1]:
            nk = fk[i1]
        else:
            nk = count_compatible(p1, a0 | bj)
            if nk < k:
                continue
        if 0 <= nk < k:
            continue
        blocked = False
        fam1 = family[1]
        for m in masks:
            if m & bj and m in fam1:
                e = index.get((1, m, a0 & m)) or build(1, m, a0 & m)
                for i in e[1].get(e[0](p0), empty):
                    if tracked[i] and fk[i] == k and pats[i][j] != v:
                        blocked = True
                        break
                if blocked:
                    break
        if blocked:
            continue
        fam2 = family[2]
        for m in masks:
            if m & bj and m in fam2:
                e = index.get((2, m, a0 & m)) or build(2, m, a0 & m)
                for i in e[1].get(e[0](p0), empty):
                    if tracked[i] and pats[i][j] != v:
                        f = fk[i] - 1
                        fk[i] = f
                        if f == k:
                            enter(1, i)
        # move r from p0 to p1
        rec[r] = i1 if i1 is not None else len(pats)
        given.append(r * q + j)
        if i1 is None:
            i1 = len(pats)
            pats.append(p1)
            cnt.append(1)
            fk.append(nk)
            pm.append(a0 | bj)
            tracked.append(False)
            pid[p1] = i1
            enter(0, i1)
            track(i1, nk)
        else:
            cnt[i1] += 1
            if cnt[i1] == 1:
                track(i1, nk)                # its f_k is nk (computed above)
            elif cnt[i1] == k + 1:
                tracked[i1] = False
            # else its f_k is unchanged: it counted r already (through p0)
        cnt[i0] -= 1
        if cnt[i0] == 0:
            tracked[i0] = False
        elif cnt[i0] == k:
            track(i0, count_compatible(p0, a0))
    if given:
        flat = out.reshape(-1)          # out is C-contiguous (a copy made by _greedy)
        flat[given] = orig.reshape(-1)[given]


def _check_k(k: int, n: int) -> None:
    if k > n:
        raise param_error("k", "suppress", f"an integer in [2, n] with n = {n} records", k)


@register("suppress", param="k", kind="int", low=2, high=1e9, random=False,
          acts_on="categorical",
          options=("variables", "columns", "roles", "info", "importance"),
          allowed="an integer in [2, n]",
          description="local suppression of categorical key values until every key "
                      "combination is shared by >= k records (greedy, missing matches all)",
          reference="Templ, Kowarik and Meindl (2015), sdcMicro's localSuppression")
def suppress(X: np.ndarray, k: int, *, rng: np.random.Generator,
             categorical: Sequence[int] = (), variables: Sequence[str] | None = None,
             columns: Sequence[str] | None = None,
             roles: Mapping[str, Sequence[int]] | None = None,
             info: dict | None = None, importance: Sequence[int] | None = None) -> np.ndarray:
    """Local suppression. ``X`` (n, m); returns (n, m) with suppressed codes NaN."""
    _check_k(int(k), X.shape[0])
    pos = masked_columns("suppress", X, categorical, variables, columns, roles)
    out = X.copy()
    sub, total, unsafe = suppress_greedy(X[:, pos], int(k), importance=importance)
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
