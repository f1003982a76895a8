"""Exact cross sums: the compiled one-pass kernel against rational brute force and against
the numpy path it replaced (the same integers, so every measure built on them keeps its
bits)."""

from fractions import Fraction

import numpy as np
import pytest

from sdcdist.metrics.exactsum import (SQ_SCALE, _exact_cross_sums_arrays, exact_cross_sums,
                                      exact_square_sums)


def _cases():
    rng = np.random.default_rng(5)
    yield rng.normal(size=(200, 4))
    yield np.round(rng.lognormal(8, 2, (300, 5)), 2) * np.where(rng.random((300, 5)) < .3, -1, 1)
    yield np.c_[np.ones(40), rng.normal(size=(40, 2)) * 1e-300, rng.normal(size=(40, 2)) * 1e150]
    yield np.array([[0.0, -0.0, 5e-324], [-1.5, 2.0**60, -(2.0**-1070)], [3.0, 1.0, 0.0]])
    yield np.zeros((7, 3))
    yield rng.integers(-3, 4, (500, 6)).astype(float)          # ties


def _spread(c):
    """log2 of a column's largest over its smallest non-zero magnitude."""
    nz = np.abs(c[c != 0])
    return 0.0 if nz.size == 0 else float(np.log2(nz.max()) - np.log2(nz.min()))


@pytest.mark.parametrize("x", list(_cases()), ids=lambda x: f"{x.shape}")
def test_cross_sums_are_exact_and_equal_the_array_path(x):
    got = exact_cross_sums(x)
    assert (got == _exact_cross_sums_arrays(x)).all()
    m = x.shape[1]
    for i in range(m):
        for j in range(i, m):
            want = sum(Fraction(a) * Fraction(b) for a, b in zip(x[:, i], x[:, j]))
            if _spread(x[:, i]) > 500 or _spread(x[:, j]) > 500:
                continue              # values below 2**-500 of their column's peak: inexact
            assert Fraction(int(got[i, j]), 2**SQ_SCALE) == want, (i, j)
    assert list(np.diag(got)) == list(exact_square_sums(x))


def test_cross_sums_do_not_depend_on_row_order():
    rng = np.random.default_rng(9)
    x = rng.lognormal(3, 3, (1000, 4))
    assert (exact_cross_sums(x) == exact_cross_sums(x[rng.permutation(1000)])).all()


def test_folding_the_bins_gives_the_integer_of_every_bin_added():
    """The compiled fold (carries from the lowest bit up, then one integer of the bits)
    equals the bins added one by one as Python integers: signed bins, bins at both ends of
    the exponent range, totals that cancel to 0 or turn negative."""
    from sdcdist.metrics.exactsum import SCALE, _fold_bins
    rng = np.random.default_rng(9)
    hi = rng.integers(-2**52, 2**52, size=(6, 2048))
    lo = rng.integers(-2**51, 2**51, size=(6, 2048))
    hi[1], lo[1] = 0, 0
    hi[2, :] = 0
    lo[2, :] = 0
    hi[2, 2047], lo[2, 0] = -(2**52), 1                    # the two ends, negative total
    hi[3] = np.where(rng.random(2048) < 0.98, 0, hi[3])   # sparse
    lo[3] = np.where(rng.random(2048) < 0.98, 0, lo[3])
    hi[4, 10], lo[4, 36] = 1, -1                           # cancels exactly: hi at 2**36
    lo[4, :36] = 0
    lo[4, 37:] = 0
    hi[4, :10] = 0
    hi[4, 11:] = 0
    got = _fold_bins(hi, lo)
    for p in range(hi.shape[0]):
        want = sum((int(hi[p, e]) * 2**26 + int(lo[p, e])) << (e - 1075 + SCALE)
                   for e in range(2048))
        assert got[p] == want and type(got[p]) is int, p
    assert got[1] == 0 and got[4] == 0 and got[2] < 0
