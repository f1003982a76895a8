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
