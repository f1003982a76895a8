"""Data distortion by probability distribution (Liew, Choi and Liew).

Each column is replaced by a sample of the best-fitting of six parametric
families, handed out in X's rank order. :func:`distr_fit` returns the masked
file together with what was fitted; the registered method ``distr`` fills an
``info`` dict when the caller passes one (``REGISTRY["distr"](X, 0, rng=rng,
info=d)`` then ``d["family"]`` lists the chosen family per column).
"""

from __future__ import annotations

import functools
import warnings
from typing import Any

import numpy as np

from ._columns import check_not_constant
from ._registry import register

__all__ = ["distr", "distr_fit", "fit_column", "FAMILIES"]

#: name -> (name of the scipy.stats distribution, which values the support allows):
#: "positive": every value > 0; "nonnegative": every value >= 0; "any": no restriction.
_FAMILY_NAMES: dict[str, tuple[str, str]] = {
    "normal": ("norm", "any"),
    "lognormal": ("lognorm", "positive"),
    "gamma": ("gamma", "positive"),
    "weibull": ("weibull_min", "positive"),
    "exponential": ("expon", "nonnegative"),
    "uniform": ("uniform", "any"),
}


@functools.cache
def _families() -> dict[str, tuple[Any, str]]:
    """:data:`FAMILIES`, built on first use: importing scipy.stats takes about half a
    second, which listing or choosing a method should not pay."""
    from scipy import stats
    return {name: (getattr(stats, dist), support)
            for name, (dist, support) in _FAMILY_NAMES.items()}


def __getattr__(name: str) -> Any:
    # FAMILIES: name -> (scipy distribution, support), in the order families are tried
    if name == "FAMILIES":
        return _families()
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


def _fit(name: str, x: np.ndarray) -> tuple[float, ...]:
    """Maximum-likelihood parameters (scipy order) of family ``name`` for x."""
    if name == "normal":
        return (float(x.mean()), float(x.std()))            # ML: ddof=0
    if name == "uniform":
        return (float(x.min()), float(x.max() - x.min()))   # ML: the sample range
    if name == "exponential":
        return (0.0, float(x.mean()))                       # ML scale: the mean
    dist = _families()[name][0]
    return tuple(float(v) for v in dist.fit(x, floc=0))


def fit_column(x: np.ndarray) -> dict[str, Any]:
    """Fit every family the support of ``x`` allows; keep the lowest AIC.

    The normal and uniform families are fitted with location and scale; the
    lognormal, gamma and Weibull families with location 0 (two parameters,
    only when every value is positive) and the exponential with location 0
    (one parameter, only when no value is negative). AIC = 2 (number of
    fitted parameters) - 2 log-likelihood.

    Returns
    -------
    dict
        ``family`` (the chosen name), ``params`` (scipy's argument order for
        that family), ``aic`` (name -> AIC of every family fitted; families the
        support forbids or whose fit failed are absent).
    """
    lo = x.min()
    aic: dict[str, float] = {}
    params: dict[str, tuple[float, ...]] = {}
    for name, (dist, support) in _families().items():
        if (support == "positive" and lo <= 0) or (support == "nonnegative" and lo < 0):
            continue
        try:
            with warnings.catch_warnings():
                warnings.simplefilter("ignore", RuntimeWarning)
                par = _fit(name, x)
                if name == "uniform":   # closed form: rounding in loc + scale must not
                    ll = -x.size * float(np.log(par[1]))   # push the maximum outside
                else:
                    ll = float(np.sum(dist.logpdf(x, *par)))
        except (ValueError, RuntimeError, FloatingPointError):
            continue
        if not np.isfinite(ll) or not all(np.isfinite(par)):
            continue
        k = 1 if name == "exponential" else 2
        aic[name] = 2 * k - 2 * ll
        params[name] = par
    best = min(aic, key=aic.__getitem__)   # normal always fits a non-constant column
    return {"family": best, "params": params[best], "aic": aic}


def distr_fit(X: np.ndarray, *, rng: np.random.Generator) -> tuple[np.ndarray, dict]:
    """Mask X by distribution fitting; return ``(X', info)``.

    Per column: fit the families of :func:`fit_column` by maximum likelihood,
    keep the lowest AIC, draw n values from it, and give the j-th smallest
    draw to the record of rank j (ties in X by record order), so X's rank
    order is kept exactly.

    Parameters
    ----------
    X : ndarray, shape (n, m)
        Original data. Not modified. No column may be constant.
    rng : numpy.random.Generator

    Returns
    -------
    X' : ndarray, shape (n, m)
    info : dict
        ``family``: list of m chosen family names; ``params``: list of m
        parameter tuples; ``aic``: list of m dicts (family -> AIC).
    """
    check_not_constant(X, "distr", "a distribution cannot be fitted to a single value")
    n, m = X.shape
    out = np.empty_like(X)
    info: dict[str, list] = {"family": [], "params": [], "aic": []}
    for j in range(m):
        x = X[:, j]
        fit = fit_column(x)
        draws = _families()[fit["family"]][0].rvs(*fit["params"], size=n, random_state=rng)
        out[np.argsort(x, kind="stable"), j] = np.sort(draws)
        for key in info:
            info[key].append(fit[key])
    return out, info


def _check_distr_data(X: np.ndarray, params: object, **_: Any) -> None:
    """Data check of distr: no constant column."""
    check_not_constant(X, "distr", "a distribution cannot be fitted to a single value")


@register("distr", param="none", kind="none", random=True, options=("info",),
          data_check=_check_distr_data,
          description="distribution fitting: each column replaced by a rank-ordered sample of "
                      "its best-AIC family (normal, lognormal, gamma, Weibull, exponential, "
                      "uniform)",
          reference="[DMT §2, Liew et al.]")
def distr(X: np.ndarray, param: float = 0.0, *, rng: np.random.Generator,
          info: dict | None = None) -> np.ndarray:
    """Registered form of :func:`distr_fit`.

    Parameters
    ----------
    X : ndarray, shape (n, m)
    param : 0 (the method has no parameter)
    rng : numpy.random.Generator
    info : dict, optional
        When given, updated with :func:`distr_fit`'s info (``info["family"]``
        is the chosen family of each column).

    Returns
    -------
    ndarray, shape (n, m)
    """
    out, fitted = distr_fit(X, rng=rng)
    if info is not None:
        info.update(fitted)
    return out
