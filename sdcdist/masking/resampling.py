"""Resampling: each column replaced by the rank-wise average of t sorted bootstrap samples."""

from __future__ import annotations

import numpy as np

from ._registry import register

__all__ = ["resample", "resample_column"]


def resample_column(x: np.ndarray, t: int, rng: np.random.Generator) -> np.ndarray:
    """Resample one column (n,): see :func:`resample`."""
    n = x.shape[0]
    v = np.zeros(n)
    for _ in range(t):
        v += np.sort(x[rng.integers(0, n, size=n)])
    v /= t
    out = np.empty(n)
    out[np.argsort(x, kind="stable")] = v
    return out


@register("resample", param="t", kind="int", low=1, high=1000, random=True,
          allowed="an integer in [1, 1000]",
          description="resampling: each column replaced, rank by rank, by the average of t "
                      "sorted bootstrap samples",
          reference="[DMT §2]")
def resample(X: np.ndarray, t: int, *, rng: np.random.Generator) -> np.ndarray:
    """Resampling masking, column by column.

    Per column: draw t bootstrap samples of size n (with replacement), sort
    each, average them rank-wise into v'_(1..n); the record whose original
    value has rank j gets v'_j (ties in X broken by record order). Each
    column keeps X's rank order.

    Parameters
    ----------
    X : ndarray, shape (n, m)
        Original data. Not modified.
    t : int
        Number of bootstrap samples averaged.
    rng : numpy.random.Generator

    Returns
    -------
    ndarray, shape (n, m)
    """
    out = np.empty_like(X)
    for j in range(X.shape[1]):
        out[:, j] = resample_column(X[:, j], t, rng)
    return out
