"""Exact sums of float64 values, independent of order and chunking.

A sum of floats rounded at every step depends on the order of the terms, so
the mean of a column and the mean of the same column permuted (rank swapping,
resampling) can differ in the last bit. Here every value ``x = M * 2**e``
(``M`` a 53-bit integer) is split into two 26/27-bit integer halves that are
added per exponent into int64 bins (a numba loop; exact: the bin totals stay
far below 2**63 for chunks of up to 2**26 values) and then folded into one
Python integer in units of ``2**-SCALE`` (the carries propagated bit by bit in the
same compiled code, the bits then read as one integer). Chunk sums are Python integers, so
combining them is exact too, and the final mean or variance is the correctly
rounded float of the exact rational value. Squares are made exact with
Dekker's two-product (``x*x = hi + lo`` exactly, barring overflow).
"""

from __future__ import annotations

from fractions import Fraction

import numba
import numpy as np

__all__ = ["exact_sums", "exact_square_sums", "exact_cross_sums", "SCALE", "SQ_SCALE", "to_fraction", "MAX_CHUNK"]

#: sums are Python ints in units of 2**-SCALE (below the smallest subnormal's mantissa unit)
SCALE = 1130            # >= 1075 - 1 + 53: every bin shifts left
#: square sums are Python ints in units of 2**-SQ_SCALE
SQ_SCALE = SCALE + 2200
#: largest chunk whose per-exponent bin totals are exact in float64
MAX_CHUNK = 2**26
_SPLIT = 134217729.0  # 2**27 + 1 (Veltkamp)


@numba.njit(cache=True, inline="always")
def _bin_one(b, hi, lo, row):  # pragma: no cover
    # the float64 of bit pattern b (biased exponent E, 53-bit mantissa M: the value is
    # M * 2**(max(E, 1) - 1075)) into the bins of its exponent: the mantissa's signed high
    # 27 and low 26 bits added to hi[row, e] and lo[row, e]
    e = (b >> 52) & 0x7FF
    m = b & 0xFFFFFFFFFFFFF
    if e == 0:
        e = 1
    else:
        m |= 0x10000000000000
    h = m >> 26
    low = m & 0x3FFFFFF
    if b < 0:
        h = -h
        low = -low
    hi[row, e] += h
    lo[row, e] += low


@numba.njit(cache=True)
def _bin_mantissas(bits: np.ndarray, hi: np.ndarray, lo: np.ndarray) -> None:  # pragma: no cover
    """Add each value's signed mantissa halves into the bins of its exponent.

    ``bits`` is the (rows, cols) int64 view of float64 values; a value with
    biased exponent E and 53-bit mantissa M equals M * 2**(max(E, 1) - 1075).
    """
    rows, cols = bits.shape
    for i in range(rows):
        for j in range(cols):
            _bin_one(bits[i, j], hi, lo, j)


#: bits of a folded row of bins: the 2048 exponents and the 26 bits the high halves sit above
_FOLD_BITS = 2048 + 26


@numba.njit(cache=True)
def _carry_bins(hi: np.ndarray, lo: np.ndarray, bits: np.ndarray, top: np.ndarray) -> None:  # pragma: no cover
    """Each row p of bins (``hi[p, e] * 2**26 + lo[p, e]`` at 2**e) as binary digits
    ``bits[p, k]`` (0/1, at 2**k) and a signed ``top[p]`` at 2**_FOLD_BITS: the same integer,
    the carries propagated from the lowest bit up (floor halving: the carry stays below
    the largest bin, far from overflow)."""
    P = hi.shape[0]
    for p in range(P):
        carry = np.int64(0)
        for k in range(_FOLD_BITS):
            acc = carry
            if k < 2048:
                acc += lo[p, k]
            if k >= 26:
                acc += hi[p, k - 26]
            bits[p, k] = acc & 1
            carry = acc >> 1
        top[p] = carry


def _fold_bins(hi: np.ndarray, lo: np.ndarray) -> list[int]:
    """The Python integer of each row of bins, in units of ``2**-SCALE``: ``sum_e (hi[p, e]
    * 2**26 + lo[p, e]) * 2**(e - 1075)``, exactly."""
    P = hi.shape[0]
    bits = np.empty((P, _FOLD_BITS), dtype=np.uint8)
    top = np.empty(P, dtype=np.int64)
    _carry_bins(hi, lo, bits, top)
    packed = np.packbits(bits, axis=1, bitorder="little")
    shift = SCALE - 1075
    return [(int.from_bytes(packed[p].tobytes(), "little") + (int(top[p]) << _FOLD_BITS))
            << shift for p in range(P)]


def _fold(x: np.ndarray) -> np.ndarray:
    """Exact column sums of ``x`` (rows x cols) as an object array of Python ints."""
    x = np.ascontiguousarray(x, dtype=np.float64)
    if x.ndim != 2:
        raise ValueError("exact sums need a 2-D array")
    if x.shape[0] > MAX_CHUNK:
        raise ValueError(f"exact sums take at most {MAX_CHUNK} rows per chunk")
    cols = x.shape[1]
    hi = np.zeros((cols, 2048), dtype=np.int64)
    lo = np.zeros((cols, 2048), dtype=np.int64)
    _bin_mantissas(x.view(np.int64), hi, lo)
    out = np.zeros(cols, dtype=object)
    out[:] = _fold_bins(hi, lo)
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


@numba.njit(cache=True)
def _bin_cross_products(xs: np.ndarray, iu: np.ndarray, ju: np.ndarray, hi: np.ndarray,
                        lo: np.ndarray) -> None:  # pragma: no cover
    """For each pair p = (iu[p], ju[p]) and row, split the product of the two columns
    exactly into ``h + l`` (Dekker's two-product: the operations of the numpy path, in
    its order) and add both parts' signed mantissa halves into the bins of their
    exponents (``hi[p, e]``, ``lo[p, e]``): one pass, no arrays of products. The bin
    totals stay below 2**63 for up to :data:`MAX_CHUNK` rows (two terms < 2**27 a row)."""
    rows = xs.shape[0]
    npairs = iu.size
    buf = np.empty(2, dtype=np.float64)
    ibuf = buf.view(np.int64)
    for r in range(rows):
        for p in range(npairs):
            a = xs[r, iu[p]]
            b = xs[r, ju[p]]
            h = a * b
            t = 134217729.0 * a
            ah = t - (t - a)
            al = a - ah
            t = 134217729.0 * b
            bh = t - (t - b)
            bl = b - bh
            buf[0] = h
            buf[1] = ((ah * bh - h) + ah * bl + al * bh) + al * bl
            _bin_one(ibuf[0], hi, lo, p)
            _bin_one(ibuf[1], hi, lo, p)


def exact_cross_sums(x: np.ndarray) -> np.ndarray:
    """Exact sums of products ``sum x_j * x_k`` of every pair of columns (an m x m symmetric
    object array of Python ints in units ``2**-SQ_SCALE``), independent of the order of the
    rows: each column is scaled by a power of two, each product split exactly into
    ``hi + lo`` (Dekker's two-product) and both parts summed exactly, in one compiled pass
    over the rows. The diagonal equals :func:`exact_square_sums`."""
    x = np.asarray(x, dtype=np.float64)
    if x.ndim != 2:
        raise ValueError("exact sums need a 2-D array")
    if x.shape[0] > MAX_CHUNK:
        raise ValueError(f"exact sums take at most {MAX_CHUNK} rows per chunk")
    m = x.shape[1]
    peak = np.max(np.abs(x), axis=0, initial=0.0)
    k = np.frexp(np.where(peak > 0, peak, 1.0))[1].astype(np.int64)
    xs = np.ascontiguousarray(np.ldexp(x, -k))
    iu, ju = np.triu_indices(m)
    hi = np.zeros((iu.size, 2048), dtype=np.int64)
    lo = np.zeros((iu.size, 2048), dtype=np.int64)
    _bin_cross_products(xs, iu.astype(np.int64), ju.astype(np.int64), hi, lo)
    out = np.zeros((m, m), dtype=object)
    for p, total in enumerate(_fold_bins(hi, lo)):
        i, j = int(iu[p]), int(ju[p])
        out[i, j] = out[j, i] = total << int(k[i] + k[j] + 2200)
    return out


def _exact_cross_sums_arrays(x: np.ndarray) -> np.ndarray:
    """:func:`exact_cross_sums` through numpy arrays of the products (the former path,
    kept as the tests' reference for the compiled pass)."""
    x = np.asarray(x, dtype=np.float64)
    if x.ndim != 2:
        raise ValueError("exact sums need a 2-D array")
    m = x.shape[1]
    peak = np.max(np.abs(x), axis=0, initial=0.0)
    k = np.frexp(np.where(peak > 0, peak, 1.0))[1].astype(np.int64)
    xs = np.ldexp(x, -k)
    iu, ju = np.triu_indices(m)
    a, b = xs[:, iu], xs[:, ju]
    hi = a * b
    t = _SPLIT * a
    ah = t - (t - a)
    al = a - ah
    t = _SPLIT * b
    bh = t - (t - b)
    bl = b - bh
    lo = ((ah * bh - hi) + ah * bl + al * bh) + al * bl
    folded = _fold(hi) + _fold(lo)
    out = np.zeros((m, m), dtype=object)
    for v, i, j in zip(folded, iu, ju):
        out[i, j] = out[j, i] = int(v) << int(k[i] + k[j] + 2200)
    return out
