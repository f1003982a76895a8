"""Resampling: rank order kept; values are (averages of) sorted bootstrap samples."""

from __future__ import annotations

import numpy as np
import pytest

from sdcdist import SdcInputError
from sdcdist.masking import REGISTRY


def _reference(X, t, seed):
    """Brute force: the same draws, column by column, sample by sample."""
    rng = np.random.default_rng(seed)
    n, m = X.shape
    out = np.empty_like(X)
    for j in range(m):
        samples = [np.sort(X[rng.integers(0, n, size=n), j]) for _ in range(t)]
        v = np.mean(samples, axis=0)
        ranks = np.argsort(np.argsort(X[:, j], kind="stable"), kind="stable")
        out[:, j] = v[ranks]
    return out


@pytest.mark.parametrize("t", [1, 3, 10])
def test_keeps_rank_order(small, t):
    Y = REGISTRY["resample"](small, t, rng=np.random.default_rng(0))
    for j in range(small.shape[1]):
        order = np.argsort(small[:, j])
        assert np.all(np.diff(Y[order, j]) >= 0)
    np.testing.assert_allclose(Y, _reference(small, t, 0), rtol=1e-15)


def test_t1_is_a_sorted_bootstrap_sample(small):
    Y = REGISTRY["resample"](small, 1, rng=np.random.default_rng(9))
    for j in range(small.shape[1]):
        x = small[:, j]
        assert np.all(np.isin(Y[:, j], x))                       # drawn from the column
        ys = Y[np.argsort(x), j]
        assert np.array_equal(ys, np.sort(ys))
    assert np.array_equal(Y, _reference(small, 1, 9))
    # with replacement: some values repeat, some are missing
    assert any(np.unique(Y[:, j]).size < small.shape[0] for j in range(small.shape[1]))


def test_ties_broken_by_record_order():
    X = np.array([[2.0], [1.0], [2.0], [0.0]])
    Y = REGISTRY["resample"](X, 3, rng=np.random.default_rng(1))
    assert Y[3, 0] <= Y[1, 0] <= Y[0, 0] <= Y[2, 0]


def test_t3_averages_three_samples(rng):
    x = rng.standard_normal((2000, 1))
    Y1 = REGISTRY["resample"](x, 1, rng=np.random.default_rng(3))
    Y3 = REGISTRY["resample"](x, 3, rng=np.random.default_rng(3))
    # averaging smooths: the t = 3 file is closer to the original than t = 1
    assert np.mean((Y3 - x) ** 2) < np.mean((Y1 - x) ** 2)


@pytest.mark.parametrize("t", [0, 1001, 2.5])
def test_bad_t(small, t):
    with pytest.raises(SdcInputError, match=r"The 't' parameter of resample must be an integer"):
        REGISTRY["resample"](small, t, rng=np.random.default_rng(0))
