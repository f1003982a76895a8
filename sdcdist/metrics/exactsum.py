"""Exact sums of float64 values, independent of order and chunking.

A sum of floats rounded at every step depends on the order of the terms, so
the mean of a column and the mean of the same column permuted (rank swapping,
resampling) can differ in the last bit. Here every value ``x = M * 2**e``
(``M`` a 53-bit integer) is split into two 26/27-bit integer halves that are
added per exponent with :func:`numpy.bincount` (exact: the bin totals stay
far below 2**53 for chunks of up to 2**27 values) and then folded into one
Python integer in units of ``2**-SCALE``. Chunk sums are Python integers, so
combining them is exact too, and the final mean or variance is the correctly
rounded float of the exact rational value. Squares are made exact with
Dekker's two-product (``x*x = hi + lo`` exactly, barring overflow).
"""

from __future__ import annotations

from fractions import Fraction

import numpy as np

__all__ = ["exact_sums", "exact_square_sums", "SCALE", "SQ_SCALE", "to_fraction", "MAX_CHUNK"]

#: sums are Python ints in units of 2**-SCALE (below the smallest subnormal's mantissa unit)
SCALE = 1130
#: square sums are Python ints in units of 2**-SQ_SCALE
SQ_SCALE = SCALE + 2200
#: largest chunk whose per-exponent bin totals are exact in float64
MAX_CHUNK = 2**26
_SPLIT = 134217729.0  # 2**27 + 1 (Veltkamp)


def _fold(x: np.ndarray) -> np.ndarray:
    """Exact column sums of ``x`` (rows x cols) as an object array of Python ints."""
    x = np.asarray(x, dtype=np.float64)
    if x.ndim != 2:
        raise ValueError("exact sums need a 2-D array")
    if x.shape[0] > MAX_CHUNK:
        raise ValueError(f"exact sums take at most {MAX_CHUNK} rows per chunk")
    cols = x.shape[1]
    out = np.zeros(cols, dtype=object)
    m, e = np.frexp(x)                       # x = m * 2**e, 0.5 <= |m| < 1
    nz = m != 0
    if not nz.any():
        return out
    big = m[nz] * 2.0**53                    # signed integer values, |big| < 2**53
    hi = np.trunc(big / 2.0**26)
    lo = big - hi * 2.0**26                  # exact; same sign as hi
    emin = int(e[nz].min())
    width = int(e[nz].max()) - emin + 1
    col = np.broadcast_to(np.arange(cols), x.shape)[nz]
    idx = col * width + (e[nz] - emin)
    h = np.bincount(idx, weights=hi, minlength=cols * width)
    lw = np.bincount(idx, weights=lo, minlength=cols * width)
    for k in np.flatnonzero((h != 0) | (lw != 0)):
        j, b = divmod(int(k), width)
        # value of bin (j, b): (h * 2**26 + lw) * 2**(emin + b - 53)
        out[j] += (int(h[k]) * 2**26 + int(lw[k])) << (emin + b - 53 + SCALE)
    return out


def exact_sums(x: np.ndarray) -> np.ndarray:
    """Exact column sums of a 2-D float array, in units of ``2**-SCALE`` (object ints)."""
    return _fold(x)


def exact_square_sums(x: np.ndarray) -> np.ndarray:
    """Exact column sums of squares ``sum x**2`` (object ints, units ``2**-SQ_SCALE``).

    Each column is first scaled by a power of two (exact) so that its squares
    cannot overflow; each square is then split exactly into ``hi + lo`` with
    Dekker's algorithm, so the result does not depend on the order of the
    values. (Values below ``2**-500`` times the column's largest one lose
    exactness to underflow.)
    """
    x = np.asarray(x, dtype=np.float64)
    peak = np.max(np.abs(x), axis=0, initial=0.0)
    k = np.frexp(np.where(peak > 0, peak, 1.0))[1].astype(np.int64)
    x = np.ldexp(x, -k)
    hi = x * x
    t = _SPLIT * x
    xh = t - (t - x)
    xl = x - xh
    lo = ((xh * xh - hi) + 2.0 * xh * xl) + xl * xl
    folded = _fold(hi) + _fold(lo)
    return np.array([int(v) << int(2 * kj + 2200) for v, kj in zip(folded, k)], dtype=object)


def to_fraction(total: int, scale: int = SCALE) -> Fraction:
    """The exact rational value of a sum returned above (``scale=SQ_SCALE`` for squares)."""
    return Fraction(int(total), 2**scale)
