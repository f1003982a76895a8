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

Whether a column is constant is not read from its sd: a column of 1,000 copies of 0.1
has a computed sd of about 1e-17, not 0 (the mean of the copies is not exactly 0.1), and
its z-scores would be rounding noise the size of real data. :func:`constant_columns`
compares the values themselves.

A column of values near the float64 limit (1.8e308) can have a variance that is not a
finite float64; :func:`overflowing_columns` finds such columns, which every computation
that scales by a column's sd refuses with one message
(:func:`sdcdist.errors.magnitude_error`).
"""

from __future__ import annotations

import math

import numpy as np

__all__ = ["column_moments", "sorted_column", "constant_columns", "overflowing_columns"]


def sorted_column(x: np.ndarray) -> np.ndarray:
    """The values of ``x`` (any shape) sorted in a contiguous float64 vector.

    -0.0 becomes 0.0 (the two compare equal, so their places would follow the input
    order); NaN sorts last.
    """
    return np.sort(np.asarray(x, dtype=np.float64).ravel() + 0.0)


def _matrix(X: np.ndarray, fn: str) -> np.ndarray:
    # X as a float64 array of two dimensions (rows, columns), for the function fn
    X = np.asarray(X, dtype=np.float64)
    if X.ndim != 2:
        raise ValueError(f"{fn} takes a 2-D array (rows, columns); got {X.ndim}-D")
    return X


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
    X = _matrix(X, "column_moments")
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


def constant_columns(X: np.ndarray) -> np.ndarray:
    """Whether each column holds a single value: all its non-missing values are equal.

    Exact, whatever the column's sd computes to: ``min == max`` over the non-NaN values
    (-0.0 equals 0.0). A column without a value (all NaN, or no rows) counts as
    constant. Two values one ulp apart are not constant.

    Parameters
    ----------
    X : ndarray (n, K)

    Returns
    -------
    ndarray (K,) of bool
    """
    X = _matrix(X, "constant_columns")
    if X.shape[0] == 0:
        return np.ones(X.shape[1], dtype=bool)
    # fmin/fmax skip NaN (NaN only where a column has no value; NaN < NaN is False)
    return ~(np.fmin.reduce(X, axis=0) < np.fmax.reduce(X, axis=0))



def overflowing_columns(X: np.ndarray) -> np.ndarray:
    """Whether each column's sample variance (ddof=1, NaN and infinities left out) is too
    large to be a finite float64: values near the float64 limit, or spread over more than
    about 1e154.

    The rule :func:`sdcdist.errors.magnitude_error` words (the information-loss metrics
    apply it to their exact sums): each column is scaled by a power of two near its
    largest magnitude (exact), its variance computed, and scaled back.

    Parameters
    ----------
    X : ndarray (n, K)

    Returns
    -------
    ndarray (K,) of bool
    """
    X = _matrix(X, "overflowing_columns")
    out = np.zeros(X.shape[1], dtype=bool)
    for k in range(X.shape[1]):
        col = X[:, k]
        col = col[np.isfinite(col)]
        if col.size < 2:
            continue
        top = float(np.max(np.abs(col)))
        if top < 2.0 ** 500:          # (2 * 2^500)^2 * n / (n - 1): far from overflow
            continue
        e = math.frexp(top)[1]
        var = float(np.var(sorted_column(np.ldexp(col, -e)), ddof=1))
        try:
            out[k] = not math.isfinite(math.ldexp(var, 2 * e))
        except OverflowError:
            out[k] = True
    return out
