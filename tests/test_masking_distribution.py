"""Distribution fitting: rank order kept exactly, the right family chosen and recorded."""

from __future__ import annotations

import numpy as np
import pytest
from scipy import stats

from sdcdist import SdcInputError
from sdcdist.masking import REGISTRY
from sdcdist.masking.distribution import distr_fit, fit_column


def test_keeps_rank_order_exactly(small):
    info = {}
    Y = REGISTRY["distr"](small, 0, rng=np.random.default_rng(0), info=info)
    for j in range(small.shape[1]):
        assert np.array_equal(np.argsort(Y[:, j]), np.argsort(small[:, j]))
    assert len(info["family"]) == small.shape[1]
    assert set(info["family"]) <= {"normal", "lognormal", "gamma", "weibull", "exponential",
                                   "uniform"}


def test_ties_in_x_broken_by_record_order():
    x = np.array([[3.0], [1.0], [3.0], [2.0], [5.0]])
    Y, _ = distr_fit(x, rng=np.random.default_rng(0))
    assert Y[1, 0] < Y[3, 0] < Y[0, 0] < Y[2, 0] < Y[4, 0]


def test_chosen_family_is_recorded_and_right():
    rng = np.random.default_rng(11)
    n = 5000
    X = np.column_stack([rng.normal(-5, 2, n), rng.lognormal(1, 0.9, n), rng.exponential(3, n),
                         rng.uniform(-1, 4, n), rng.weibull(3.5, n) * 10, rng.gamma(9, 2, n)])
    Y, info = distr_fit(X, rng=np.random.default_rng(1))
    assert info["family"] == ["normal", "lognormal", "exponential", "uniform", "weibull",
                              "gamma"]
    # families the support forbids are not fitted: negative values allow only two
    assert set(info["aic"][0]) == {"normal", "uniform"}
    assert set(info["aic"][3]) == {"normal", "uniform"}
    # each AIC is 2k - 2 loglik of scipy's fit
    par = stats.lognorm.fit(X[:, 1], floc=0)
    ll = stats.lognorm.logpdf(X[:, 1], *par).sum()
    assert np.isclose(info["aic"][1]["lognormal"], 4 - 2 * ll, rtol=1e-9)
    # the released values are a sample of the chosen distribution
    fam = stats.lognorm(*info["params"][1])
    assert stats.kstest(Y[:, 1], fam.cdf).pvalue > 1e-3


def test_zeros_allow_exponential_not_lognormal():
    x = np.concatenate([[0.0, 0.0], np.random.default_rng(2).exponential(2.0, 3000)])
    fit = fit_column(x)
    assert "lognormal" not in fit["aic"] and "gamma" not in fit["aic"]
    assert fit["family"] == "exponential"


def test_constant_column_rejected(small):
    X = small.copy()
    X[:, 0] = 0.0
    with pytest.raises(SdcInputError, match=r"Column\(s\) \[1\] are constant in the array given to distr \(1-based"):
        REGISTRY["distr"](X, 0, rng=np.random.default_rng(0))


def test_param_must_be_zero(small):
    with pytest.raises(SdcInputError, match=r"'params' parameter of distr must be left out"):
        REGISTRY["distr"](small, 3, rng=np.random.default_rng(0))
