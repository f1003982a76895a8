"""Column means and standard deviations that are the same floats in every row order.

A floating-point sum depends on the order of its terms, so the mean or the sd of a
column and of the same column shuffled can differ in their last bit. Where such a
moment scales values that are then compared (z-scores before a nearest-neighbour
search, tolerances of a comparison), that rounding moves every distance or weight
with it, and the row order of a file, not the records' content, can decide between
tied candidates. Here each column is sorted before it is summed, so its values alone
fix the result: -0.0 counts as 0.0 and NaN is left out (it sorts last).

Plain numpy; the distance linkage (:func:`sdcdist.linkage.distance.standardize`,
:func:`~sdcdist.linkage.distance.pair_abs_sd`), the PRL comparison
(:func:`sdcdist.linkage.prl.comparison.column_sd`) and interval disclosure read it.
"""

from __future__ import annotations

import numpy as np

__all__ = ["column_moments", "sorted_column"]


def sorted_column(x: np.ndarray) -> np.ndarray:
    """The values of ``x`` (any shape) sorted in a contiguous float64 vector.

    -0.0 becomes 0.0 (the two compare equal, so their places would follow the input
    order); NaN sorts last.
    """
    return np.sort(np.asarray(x, dtype=np.float64).ravel() + 0.0)


def column_moments(X: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Each column's mean and sd (ddof=1), NaN left out, the same floats in every row order.

    Each column is sorted (:func:`sorted_column`) and then summed by
    ``numpy.nanmean`` / ``numpy.nanstd`` (pairwise summation over the contiguous
    sorted values): a function of the column's multiset of values alone.

    Parameters
    ----------
    X : ndarray (n, K)

    Returns
    -------
    mean : ndarray (K,)
        NaN for a column without a value.
    sd : ndarray (K,)
        NaN for a column with fewer than two values.
    """
    X = np.asarray(X, dtype=np.float64)
    if X.ndim != 2:
        raise ValueError(f"column_moments takes a 2-D array (rows, columns); got {X.ndim}-D")
    mean = np.full(X.shape[1], np.nan)
    sd = np.full(X.shape[1], np.nan)
    for k in range(X.shape[1]):
        col = sorted_column(X[:, k])
        m = np.count_nonzero(~np.isnan(col))
        if m > 0:
            mean[k] = np.nanmean(col)
        if m > 1:
            sd[k] = np.nanstd(col, ddof=1)
    return mean, sd
