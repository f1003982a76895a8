"""PRAM of categorical columns: sdcMicro's invariant PRAM, frequency-proportional PRAM
and its invariant form (column selection in :mod:`.categorical`).

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
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np

from ..errors import SdcInputError, param_error
from ._registry import register
from .categorical import category_codes, masked_columns

__all__ = ["pram_matrix", "pram_freq_matrix", "invariant_matrix", "pram_column", "pram_diagonal",
           "declared_categories", "pram", "pram_freq", "pram_freq_inv"]


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
    c, ok, L = category_codes(x)
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

