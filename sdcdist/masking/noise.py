"""Noise masking: additive (uncorrelated, correlated, normal-mixture) and multiplicative."""

from __future__ import annotations

import numpy as np

from ._registry import register

__all__ = ["noise", "corrnoise", "mixnoise", "mixnoise_scaled", "multnoise", "cov_factor",
           "mixture_white_noise"]


@register("noise", param="p", kind="float", low=0.001, high=1.0, random=True,
          allowed="a fraction in [0.001, 1]",
          description="additive Gaussian noise, sd = p x the column's sd, independent per value",
          reference="[DMT §2]")
def noise(X: np.ndarray, p: float, *, rng: np.random.Generator) -> np.ndarray:
    """Add independent noise ``E_ij ~ N(0, (p s_j)^2)``.

    Parameters
    ----------
    X : ndarray, shape (n, m)
        Original data (float64). Not modified.
    p : float
        Noise sd as a fraction of each column's sample sd (ddof=1).
    rng : numpy.random.Generator

    Returns
    -------
    ndarray, shape (n, m)
    """
    s = X.std(axis=0, ddof=1)
    return X + rng.standard_normal(X.shape) * (p * s)


def cov_factor(S: np.ndarray) -> np.ndarray:
    """A matrix L with ``L @ L.T == S`` for a symmetric positive semi-definite S.

    The Cholesky factor when S is positive definite; otherwise (collinear or
    constant columns) ``V sqrt(max(w, 0))`` from the eigendecomposition.
    """
    S = np.atleast_2d(np.asarray(S, dtype=np.float64))
    try:
        return np.linalg.cholesky(S)
    except np.linalg.LinAlgError:
        w, V = np.linalg.eigh(S)
        return V * np.sqrt(np.clip(w, 0.0, None))


def _covariance(X: np.ndarray) -> np.ndarray:
    m = X.shape[1]
    return np.cov(X, rowvar=False).reshape(m, m)


@register("corrnoise", param="gamma", kind="float", low=0.001, high=10.0, random=True,
          allowed="a number in [0.001, 10]",
          description="correlated Gaussian noise: X' = X + N(0, gamma x the covariance of X) "
                      "per record",
          reference="[DRS §5]")
def corrnoise(X: np.ndarray, gamma: float, *, rng: np.random.Generator) -> np.ndarray:
    """Add correlated noise, each record's noise vector drawn from ``N(0, gamma Σ)``.

    Parameters
    ----------
    X : ndarray, shape (n, m)
        Original data. Not modified.
    gamma : float
        Noise covariance as a multiple of Σ, the sample covariance of X (ddof=1).
    rng : numpy.random.Generator

    Returns
    -------
    ndarray, shape (n, m)
        Cov(X') = (1 + gamma) Σ in expectation.
    """
    L = cov_factor(_covariance(X))
    return X + (rng.standard_normal(X.shape) @ L.T) * np.sqrt(gamma)


#: variance of each component of the two-point normal mixture [YWC appendix]
MIX_SIGMA2 = 0.025


def mixture_white_noise(shape: tuple[int, int], rng: np.random.Generator,
                        sigma2: float = MIX_SIGMA2) -> np.ndarray:
    """I.i.d. draws from ½N(√(1-σ²), σ²) + ½N(-√(1-σ²), σ²): mean 0, variance 1, bimodal."""
    sign = np.where(rng.random(shape) < 0.5, -1.0, 1.0)
    return sign * np.sqrt(1.0 - sigma2) + np.sqrt(sigma2) * rng.standard_normal(shape)


_D = dict(param="d", kind="float", low=0.001, high=1.0, random=True,
          allowed="a number in [0.001, 1]", reference="[YWC §3.3, appendix]")


@register("mixnoise", **_D,
          description="mixture noise: bimodal white noise coloured by the covariance of X, "
                      "Cov(X') = (1+d) x Cov(X)")
def mixnoise(X: np.ndarray, d: float, *, rng: np.random.Generator) -> np.ndarray:
    """Add normal-mixture noise with covariance ``d Σ`` (Yancey, Winkler and Creecy).

    W has i.i.d. components from ½N(√(1-σ²), σ²) + ½N(-√(1-σ²), σ²) with
    σ² = 0.025; Y = W Lᵀ with L the Cholesky factor of Σ (ddof=1); X' = X + √d Y.

    Parameters
    ----------
    X : ndarray, shape (n, m)
        Original data. Not modified.
    d : float
        Covariance inflation: Cov(X') = (1 + d) Σ in expectation.
    rng : numpy.random.Generator

    Returns
    -------
    ndarray, shape (n, m)
    """
    L = cov_factor(_covariance(X))
    return X + np.sqrt(d) * (mixture_white_noise(X.shape, rng) @ L.T)


@register("mixnoise_scaled", **_D,
          description="mixture noise rescaled towards the masked means so that Cov(X') is "
                      "Cov(X) again")
def mixnoise_scaled(X: np.ndarray, d: float, *, rng: np.random.Generator) -> np.ndarray:
    """:func:`mixnoise`, then ``z_s = z/√(1+d) + (1 - 1/√(1+d)) μ``.

    μ is the column means of the unscaled masked file, which the rescaling keeps;
    Cov(X') = Σ in expectation.

    Parameters
    ----------
    X : ndarray, shape (n, m)
        Original data. Not modified.
    d : float
        The mixture noise level, as in :func:`mixnoise`.
    rng : numpy.random.Generator

    Returns
    -------
    ndarray, shape (n, m)
    """
    Z = mixnoise(X, d, rng=rng)
    a = 1.0 / np.sqrt(1.0 + d)
    return Z * a + (1.0 - a) * Z.mean(axis=0)


@register("multnoise", param="s", kind="float", low=0.001, high=2.0, random=True,
          allowed="a number in [0.001, 2]",
          description="multiplicative noise x(1+e), e ~ N(0, s^2), then each column rescaled "
                      "to X's mean and sd (Hoehne)",
          reference="[DRS §5, Höhne]")
def multnoise(X: np.ndarray, s: float, *, rng: np.random.Generator) -> np.ndarray:
    """Höhne's multiplicative noise, keeping each column's mean and sd.

    Each value is multiplied by (1 + e), e ~ N(0, s²) independent; then per
    column ``x'' = (x' - mean(x')) s_j / sd(x') + mean(x)`` (sds with ddof=1).
    A column whose noisy version is constant (all zeros) gets mean(x).

    Parameters
    ----------
    X : ndarray, shape (n, m)
        Original data. Not modified.
    s : float
        Sd of the multiplicative factor's noise.
    rng : numpy.random.Generator

    Returns
    -------
    ndarray, shape (n, m)
        Each column has exactly (to rounding) X's mean and sd.
    """
    Y = X * (1.0 + s * rng.standard_normal(X.shape))
    my = Y.mean(axis=0)
    sy = Y.std(axis=0, ddof=1)
    scale = np.divide(X.std(axis=0, ddof=1), sy, out=np.zeros_like(sy), where=sy > 0)
    return (Y - my) * scale + X.mean(axis=0)
