"""Correlated, mixture and multiplicative noise: covariances and moments they must give."""

from __future__ import annotations

import numpy as np
import pytest

from sdcdist import SdcInputError
from sdcdist.masking import REGISTRY
from sdcdist.masking.noise import cov_factor

N = 100_000


@pytest.fixture(scope="module")
def big():
    """N x 4 correlated data on very different scales."""
    rng = np.random.default_rng(7)
    C = np.array([[1, .6, .3, 0], [.6, 1, .5, .2], [.3, .5, 1, .4], [0, .2, .4, 1.]])
    return rng.standard_normal((N, 4)) @ np.linalg.cholesky(C).T * np.array([1, 10, 1e3, .1])


def _cov(A):
    return np.cov(A, rowvar=False)


def _tol(S, n, mult=1.0, sds=6.0):
    """`sds` standard errors of a sample covariance of n normal records with covariance
    mult * S: var(S_ij-hat) = (S_ii S_jj + S_ij^2) / n."""
    d = np.diag(S)
    return sds * mult * np.sqrt((np.outer(d, d) + S ** 2) / n)


@pytest.mark.parametrize("gamma", [0.05, 1.0])
def test_corrnoise_noise_covariance(big, gamma):
    E = REGISTRY["corrnoise"](big, gamma, rng=np.random.default_rng(1)) - big
    target = gamma * _cov(big)
    assert np.all(np.abs(_cov(E) - target) <= _tol(target, N))
    assert np.all(np.abs(E.mean(0)) <= 6 * np.sqrt(np.diag(target) / N))


@pytest.mark.parametrize("d", [0.1, 0.5, 1.0])
def test_mixnoise_inflates_covariance_and_is_bimodal(big, d):
    S = _cov(big)
    Y = REGISTRY["mixnoise"](big, d, rng=np.random.default_rng(2))
    # Cov(X') - (1+d) S = d (noise cov - S) + cross terms; its sd is below that of a
    # sample covariance of records with covariance (1+d) S
    assert np.all(np.abs(_cov(Y) - (1 + d) * S) <= _tol(S, N, 1 + d))
    # whitened noise W = L^-1 (X' - X) / sqrt(d): components +-sqrt(1 - 0.025) + N(0, 0.025)
    W = np.linalg.solve(np.linalg.cholesky(S), (Y - big).T).T / np.sqrt(d)
    # P(|w| < 0.3) = P(N(0,1) > (0.987 - 0.3)/0.158 = 4.35) ~ 1e-5; a normal would give 24%
    assert np.mean(np.abs(W) < 0.3) < 1e-3
    assert np.all(np.abs(np.mean(W > 0, axis=0) - 0.5) < 6 * 0.5 / np.sqrt(N))
    np.testing.assert_allclose(np.mean(np.abs(W), axis=0), np.sqrt(0.975), rtol=0.01)


@pytest.mark.parametrize("d", [0.2, 1.0])
def test_mixnoise_scaled(big, d):
    S = _cov(big)
    Z = REGISTRY["mixnoise"](big, d, rng=np.random.default_rng(3))
    Zs = REGISTRY["mixnoise_scaled"](big, d, rng=np.random.default_rng(3))
    np.testing.assert_allclose(Zs.mean(0), Z.mean(0), rtol=1e-9, atol=1e-9 * np.abs(big).max())
    np.testing.assert_allclose(_cov(Zs), _cov(Z) / (1 + d), rtol=1e-9)
    assert np.all(np.abs(_cov(Zs) - S) <= _tol(S, N))
    # the sign of the mean term: the catalogue's (appendix) form, not eq. 1's
    mu = Z.mean(0)
    np.testing.assert_allclose(Zs, Z / np.sqrt(1 + d) + (1 - 1 / np.sqrt(1 + d)) * mu,
                               rtol=1e-12, atol=1e-12 * np.abs(Z).max())


@pytest.mark.parametrize("s", [0.05, 0.5, 1.0])
def test_multnoise_keeps_means_and_sds(small, s):
    X = small.copy()
    X[::5, 1] = 0.0                                 # zeros stay tied
    Y = REGISTRY["multnoise"](X, s, rng=np.random.default_rng(4))
    np.testing.assert_allclose(Y.mean(0), X.mean(0), rtol=1e-9)
    np.testing.assert_allclose(Y.std(0, ddof=1), X.std(0, ddof=1), rtol=1e-9)
    assert not np.allclose(Y, X)
    # multiplicative: every zero got the same value (0 x (1+e) = 0, then the same affine map)
    assert np.ptp(Y[::5, 1]) == 0


def test_multnoise_is_multiplicative_before_rescaling(rng):
    # before the affine rescaling, the relative error x'/x - 1 has sd s
    x = np.exp(rng.standard_normal((200_000, 1)))
    Y = REGISTRY["multnoise"](x, 0.3, rng=np.random.default_rng(5))
    # undo the affine map with the fitted line y = a x' + b: x' = (y - b)/a, where
    # x' = x (1 + e) and E x' = E x, so regress y on x: slope a, residual sd ~ a s x
    a, b = np.polyfit(x[:, 0], Y[:, 0], 1)
    rel = (Y[:, 0] - b) / a / x[:, 0] - 1
    assert abs(rel.std() - 0.3) < 0.01


def test_cov_factor_singular():
    S = np.array([[1.0, 1.0], [1.0, 1.0]])     # collinear columns: no Cholesky factor
    L = cov_factor(S)
    np.testing.assert_allclose(L @ L.T, S, atol=1e-12)


@pytest.mark.parametrize("name,bad", [("corrnoise", 0), ("corrnoise", -1), ("corrnoise", 11),
                                      ("mixnoise", 0), ("mixnoise", 1.5),
                                      ("mixnoise_scaled", -0.1), ("multnoise", 0),
                                      ("multnoise", 3)])
def test_bad_params(small, name, bad):
    m = REGISTRY[name]
    with pytest.raises(SdcInputError, match=rf"The '{m.param}' parameter of {name} must be a "
                                            r"number in \["):
        m(small, bad, rng=np.random.default_rng(0))
