"""Column moments summed over sorted values: the same floats in every row order."""

from __future__ import annotations

import numpy as np
import pytest

from sdcdist.moments import column_moments, sorted_column


def test_column_moments_are_the_same_floats_in_every_row_order():
    rng = np.random.default_rng(3)
    X = rng.normal(size=(45, 3)) * 1e3 + 1 / 3
    X[:5, 1] = [np.nan, -0.0, 0.0, np.nan, -0.0]
    X[:, 2] = np.r_[np.zeros(20), -np.zeros(25)]
    X[0, 2] = 1.0
    mean, sd = column_moments(X)
    plain_moved = 0
    for _ in range(20):
        p = rng.permutation(45)
        plain_moved += X[p, 0].std(ddof=1) != X[:, 0].std(ddof=1)
        m, s = column_moments(X[p])
        assert m.tobytes() == mean.tobytes() and s.tobytes() == sd.tobytes()
    assert plain_moved > 0
    assert mean == pytest.approx(np.nanmean(X, axis=0), rel=1e-14)
    assert sd == pytest.approx(np.nanstd(X, axis=0, ddof=1), rel=1e-14)
    assert np.signbit(sorted_column(X[:, 2])).sum() == 0          # -0.0 counts as 0.0


def test_column_moments_of_short_columns():
    mean, sd = column_moments(np.array([[1.0, np.nan, np.nan], [np.nan, 2.0, np.nan]]))
    assert mean.tolist()[:2] == [1.0, 2.0] and np.isnan(mean[2])
    assert np.isnan(sd).all()                                      # fewer than two values
    mean, sd = column_moments(np.zeros((0, 2)))
    assert np.isnan(mean).all() and np.isnan(sd).all()
    with pytest.raises(ValueError, match="2-D"):
        column_moments(np.ones(3))


def test_constant_columns_compares_values_not_the_sd():
    """A column of copies of 0.1 (or 1/3) has a computed sd of about 1e-17, not 0; it is
    constant all the same. NaN is left out, -0.0 equals 0.0, and two values one ulp apart
    are not constant."""
    from sdcdist.moments import constant_columns
    n = 1000
    tenth, third = np.full(n, 0.1), np.full(n, 1 / 3)
    holed = tenth.copy()
    holed[[3, 500, 999]] = np.nan
    signed = np.where(np.arange(n) % 2 == 0, -0.0, 0.0)
    ulp = np.where(np.arange(n) % 2 == 0, 0.1, np.nextafter(0.1, 1.0))
    varied = np.linspace(0.0, 1.0, n)
    X = np.c_[tenth, third, holed, signed, ulp, varied, np.full(n, np.nan)]
    sd = column_moments(X)[1]
    assert sd[0] > 0 and sd[1] > 0 and sd[2] > 0     # what an sd test would have accepted
    assert sd[4] > 0
    assert constant_columns(X).tolist() == [True, True, True, True, False, False, True]
    assert constant_columns(X[:1]).all() and constant_columns(np.empty((0, 2))).all()
    assert constant_columns(np.array([[np.inf], [np.inf]])).tolist() == [True]
    assert constant_columns(np.array([[-np.inf], [np.inf]])).tolist() == [False]
    with pytest.raises(ValueError, match="2-D"):
        constant_columns(tenth)
