"""``copula``: Gaussian-copula synthesis of mixed data (the model of SDV's
GaussianCopulaSynthesizer), with correlation shrinkage λ.

Each column becomes one or two dimensions of normal scores:

- numeric: the mid-rank empirical CDF F̂(x) = (#{x_i < x} + #{x_i = x}/2) / n' over the
  n' present values, z = Φ⁻¹(F̂(x)); a column with missing values also gets an
  indicator dimension (present, missing; a categorical dimension), and its missing
  records score 0 on the value dimension;
- categorical (a missing value a category of its own): each category an interval of
  (0, 1) as wide as its relative frequency, categories in order of decreasing
  frequency (ties by label), u uniform inside the record's interval (the cell's rng),
  z = Φ⁻¹(u).

R is the correlation matrix of the scores (from block sums), R_λ = (1 − λ)R + λI.
A fully synthetic release draws z* ~ N(0, R_λ); a partially synthetic one draws the
replaced dimensions from their normal distribution given the kept ones' scores
(the kept columns are predictors). Back-transform: numeric x* = the empirical quantile
of Φ(z*) (linear between the order statistics at (i − ½)/n'), categorical: the
category whose interval holds Φ(z*).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field

import numpy as np

from ._registry import register
from ._synth import (ColumnPlan, Streams, blocks, category_order, content_order, labels_of,
                     open_unit, plan_columns)
from .noise import cov_factor

__all__ = ["copula", "CopulaModel", "copula_fit", "copula_scores_block", "copula_sample_block"]


@dataclass
class _Dim:
    """One dimension of scores: a column's values or categories, or its missing indicator."""

    column: int
    kind: str                        # "num", "cat" or "ind"
    values: np.ndarray | None = None  # num: sorted present values
    low: np.ndarray | None = None     # cat/ind: interval start of each code
    high: np.ndarray | None = None    # cat/ind: interval end of each code
    bounds: np.ndarray | None = None  # cat/ind: interval ends in interval order
    codes: np.ndarray | None = None   # cat/ind: the code of each interval, in order
    missing_code: int = -1            # cat: the code standing for a missing value


@dataclass
class CopulaModel:
    plan: ColumnPlan
    dims: list[_Dim]
    corr: np.ndarray = field(default_factory=lambda: np.zeros((0, 0)))


def _codes(x: np.ndarray, n_labels: int | None) -> tuple[np.ndarray, int, int]:
    """Integer codes with missing as a code of its own: (codes, number of codes, missing code)."""
    nan = np.isnan(x)
    top = int(np.max(x[~nan])) + 1 if (~nan).any() else 0
    L = max(top, n_labels or 0)
    miss = L if nan.any() else -1
    c = np.where(nan, L, x).astype(np.int64)
    return c, L + (1 if nan.any() else 0), miss


def _intervals(freq: np.ndarray) -> tuple[np.ndarray, ...]:
    n = freq.sum()
    order = category_order(freq)
    width = freq[order] / n
    ends = np.cumsum(width)
    ends[-1] = 1.0
    starts = np.concatenate([[0.0], ends[:-1]])
    low = np.empty(freq.size)
    high = np.empty(freq.size)
    low[order] = starts
    high[order] = ends
    return low, high, ends, order


def copula_dims(X: np.ndarray, plan: ColumnPlan, columns: Sequence[str] | None,
                labels: Mapping[str, Sequence[str]] | None) -> list[_Dim]:
    """The marginals of every column (one pass; sorts each numeric column)."""
    dims: list[_Dim] = []
    for j in range(plan.m):
        x = X[:, j]
        if plan.is_cat(j):
            lab = labels_of(j, columns, labels)
            c, L, miss = _codes(x, len(lab) if lab is not None else None)
            freq = np.bincount(c, minlength=L).astype(np.float64)
            low, high, ends, order = _intervals(freq)
            dims.append(_Dim(j, "cat", low=low, high=high, bounds=ends, codes=order,
                             missing_code=miss))
            continue
        nan = np.isnan(x)
        if nan.any():
            freq = np.array([(~nan).sum(), nan.sum()], dtype=np.float64)
            low, high, ends, order = _intervals(freq)
            dims.append(_Dim(j, "ind", low=low, high=high, bounds=ends, codes=order))
        vals = np.sort(x[~nan])
        dims.append(_Dim(j, "num", values=vals))
    return dims


def copula_scores_block(X: np.ndarray, dims: list[_Dim], rng: np.random.Generator
                        ) -> np.ndarray:
    """Normal scores (rows of X, one column per dimension). Categorical dimensions draw
    u inside their intervals with ``rng``, dimension by dimension."""
    from scipy.special import ndtri   # on first use: the registry loads without it
    Z = np.zeros((X.shape[0], len(dims)))
    for k, d in enumerate(dims):
        x = X[:, d.column]
        nan = np.isnan(x)
        if d.kind == "num":
            v = d.values
            xs = x[~nan]
            o = np.argsort(xs, kind="stable")       # sorted queries: a cache-friendly search
            less = np.empty(xs.size, dtype=np.int64)
            more = np.empty(xs.size, dtype=np.int64)
            less[o] = np.searchsorted(v, xs[o], side="left")
            more[o] = np.searchsorted(v, xs[o], side="right")
            Z[~nan, k] = ndtri((less + (more - less) / 2.0) / v.size)
            continue
        if d.kind == "ind":
            c = nan.astype(np.int64)
        else:
            c = np.where(nan, d.missing_code, x).astype(np.int64)
        u = d.low[c] + (d.high[c] - d.low[c]) * open_unit(rng, c.size)
        Z[:, k] = ndtri(np.clip(u, 2.0 ** -60, 1.0 - 2.0 ** -53))
    return Z


def empirical_quantile(v: np.ndarray, u: np.ndarray) -> np.ndarray:
    """The quantile of the sorted values ``v`` at ``u``: linear between v[i] placed at
    (i + 1/2)/n, flat beyond v[0] and v[n-1] (``np.interp`` on that grid, by index)."""
    n = v.size
    t = np.clip(u * n - 0.5, 0.0, n - 1.0)
    i = np.minimum(t.astype(np.int64), n - 1)
    j = np.minimum(i + 1, n - 1)
    f = t - i
    lo, hi = v[i], v[j]
    return np.where(f > 0, lo + f * (hi - lo), lo)


def _correlation(s: np.ndarray, S2: np.ndarray, n: int) -> np.ndarray:
    mean = s / n
    C = S2 / n - np.outer(mean, mean)
    sd = np.sqrt(np.clip(np.diag(C), 0.0, None))
    ok = sd > 1e-12 * max(1.0, float(sd.max(initial=0.0)))
    R = np.zeros_like(C)
    R[np.ix_(ok, ok)] = C[np.ix_(ok, ok)] / np.outer(sd[ok], sd[ok])
    R = np.clip((R + R.T) / 2.0, -1.0, 1.0)
    np.fill_diagonal(R, 1.0)
    return R


def copula_fit(X: np.ndarray, plan: ColumnPlan, streams: Streams, *,
               columns: Sequence[str] | None = None,
               labels: Mapping[str, Sequence[str]] | None = None
               ) -> tuple[CopulaModel, np.ndarray]:
    """The model, and the scores of every record (the kept ones condition the draws).

    X is in content order; the correlation comes from sums over the fixed blocks."""
    dims = copula_dims(X, plan, columns, labels)
    Z = np.empty((X.shape[0], len(dims)))
    s = np.zeros(len(dims))
    S2 = np.zeros((len(dims), len(dims)))
    for b, (a, e) in enumerate(blocks(X.shape[0])):
        Zb = copula_scores_block(X[a:e], dims, streams.block(Streams.FIT, b))
        Z[a:e] = Zb
        s += Zb.sum(axis=0)
        S2 += Zb.T @ Zb
    return CopulaModel(plan, dims, _correlation(s, S2, X.shape[0])), Z


@dataclass
class _Sampler:
    synth: np.ndarray        # dimensions drawn
    given: np.ndarray        # dimensions conditioned on (kept columns)
    A: np.ndarray            # mean of the drawn given the kept: Z_given @ A.T
    L: np.ndarray            # factor of the conditional covariance


def _sampler(model: CopulaModel, lam: float) -> _Sampler:
    R = (1.0 - lam) * model.corr + lam * np.eye(model.corr.shape[0])
    kept = set(model.plan.kept)
    given = np.array([k for k, d in enumerate(model.dims) if d.column in kept], dtype=np.int64)
    synth = np.array([k for k, d in enumerate(model.dims) if d.column not in kept],
                     dtype=np.int64)
    if given.size == 0:
        return _Sampler(synth, given, np.zeros((synth.size, 0)), cov_factor(R[np.ix_(synth, synth)]))
    Rgg = R[np.ix_(given, given)]
    Rsg = R[np.ix_(synth, given)]
    A = Rsg @ np.linalg.pinv(Rgg, hermitian=True)
    C = R[np.ix_(synth, synth)] - A @ Rsg.T
    C = (C + C.T) / 2.0
    return _Sampler(synth, given, A, cov_factor(C))


def copula_sample_block(model: CopulaModel, sampler: _Sampler, Xb: np.ndarray, Zb: np.ndarray,
                        rng: np.random.Generator) -> np.ndarray:
    """The block with its replaced columns drawn (kept columns untouched)."""
    from scipy.special import ndtr   # on first use: the registry loads without it
    nb = Xb.shape[0]
    W = rng.standard_normal((nb, sampler.synth.size))
    Zs = W @ sampler.L.T
    if sampler.given.size:
        Zs += Zb[:, sampler.given] @ sampler.A.T
    out = Xb.copy()
    U = ndtr(Zs)
    missing: dict[int, np.ndarray] = {}
    for i, k in enumerate(sampler.synth):
        d = model.dims[k]
        u = U[:, i]
        if d.kind == "num":
            col = empirical_quantile(d.values, u)
            if d.column in missing:
                col[missing[d.column]] = np.nan
            out[:, d.column] = col
            continue
        pos = np.minimum(np.searchsorted(d.bounds, u, side="right"), d.bounds.size - 1)
        code = d.codes[pos]
        if d.kind == "ind":
            missing[d.column] = code == 1
        else:
            col = code.astype(np.float64)
            if d.missing_code >= 0:
                col[code == d.missing_code] = np.nan
            out[:, d.column] = col
    return out


@register("copula", param="lambda", kind="float", low=0.0, high=1.0, random=True,
          acts_on="mixed",
          options=("synth_columns", "columns", "labels"),
          description="Gaussian copula synthesis (SDV's model): empirical marginals, categories "
                      "as frequency intervals, normal-score correlation shrunk to "
                      "(1 - lambda) R + lambda I; kept columns condition the draws",
          reference="SDV GaussianCopulaSynthesizer (Patki, Wedge and Veeramachaneni 2016); "
                    "[DTMS §6]")
def copula(X: np.ndarray, lam: float, *, rng: np.random.Generator,
           categorical: Sequence[int] = (), keep: Sequence[int] = (),
           columns: Sequence[str] | None = None,
           labels: Mapping[str, Sequence[str]] | None = None,
           synth_columns: Sequence[str] | None = None) -> np.ndarray:
    """Gaussian-copula release of ``X`` (n, m; categorical columns as codes, NaN missing).

    Parameters
    ----------
    lam : float in [0, 1]
        Correlation shrinkage: 0 the plain copula, 1 independent columns.
    synth_columns : list of column names, optional
        The replaced columns (default all but ``keep``); the others are kept bit for bit.

    Returns
    -------
    ndarray (n, m)
    """
    plan = plan_columns("copula", X, categorical=categorical, keep=keep, columns=columns,
                        synth_columns=synth_columns)
    streams = Streams(rng)
    order = content_order(X)
    Xs = X[order]
    model, Z = copula_fit(Xs, plan, streams, columns=columns, labels=labels)
    sampler = _sampler(model, float(lam))
    out_s = np.empty_like(Xs)
    for b, (a, e) in enumerate(blocks(Xs.shape[0])):
        out_s[a:e] = copula_sample_block(model, sampler, Xs[a:e], Z[a:e],
                                         streams.block(Streams.SYNTH, b))
    out = np.empty_like(X)
    out[order] = out_s
    out[:, list(plan.kept)] = X[:, list(plan.kept)]
    return out
