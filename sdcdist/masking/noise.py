"""Additive noise masking: uncorrelated Gaussian noise scaled to each column's sd."""

from __future__ import annotations

import numpy as np

from ._registry import register

__all__ = ["noise"]


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
