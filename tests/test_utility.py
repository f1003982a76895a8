"""Utility metrics of [DRS]: propensity scores, EMD and EMD1."""

from __future__ import annotations

import numpy as np
import pytest
from scipy.stats import wasserstein_distance

from sdcdist import SdcInputError
from sdcdist.masking import get_method
from sdcdist.metrics import measure
from sdcdist.metrics.loss.emd import transport_emd
from sdcdist.metrics.loss.propensity import ps_features


def _sklearn_ps(X: np.ndarray, Y: np.ndarray, degree: int) -> float:
    from sklearn.linear_model import LogisticRegression
    m, s = X.mean(0), X.std(0, ddof=1)
    Z = np.vstack([(X - m) / s, (Y - m) / s])
    D = ps_features(Z, degree)[:, 1:]
    T = np.r_[np.zeros(len(X)), np.ones(len(Y))]
    lr = LogisticRegression(C=np.inf, tol=1e-14, max_iter=100_000).fit(D, T)
    return float(np.mean((lr.predict_proba(D)[:, 1] - 0.5) ** 2))


def test_ps_hand_computed():
    # Both files hold the same values: the fitted slope is 0 and the intercept
    # log(n_b / n_a) = 0, so every propensity is 1/2 and U = 0.
    X = np.array([[0.0], [1.0], [2.0], [3.0]])
    assert measure(X, X[::-1].copy(), ["PS"])["PS"].value == pytest.approx(0.0, abs=1e-20)
    # One binary column, original (0, 0, 0, 1), masked (0, 1, 1, 1): the model is
    # saturated, so p(x=0) = 1/4 and p(x=1) = 3/4, and every record has
    # (p - 1/2)^2 = 1/16: U = 1/16.
    X = np.array([[0.0], [0.0], [0.0], [1.0]])
    Y = np.array([[0.0], [1.0], [1.0], [1.0]])
    assert measure(X, Y, ["PS"])["PS"].value == pytest.approx(1 / 16, rel=1e-9)


@pytest.mark.parametrize("chunk_rows", [1, 37, 65536])
def test_ps_matches_sklearn(chunk_rows, small, rng):
    X = small[:60, :3]
    Y = X * np.exp(0.4 * rng.standard_normal(X.shape))
    got = measure(X, Y, ["PS", "PS2"], options={"chunk_rows": chunk_rows})
    assert got["PS"].value == pytest.approx(_sklearn_ps(X, Y, 1), rel=1e-6)
    assert got["PS2"].value == pytest.approx(_sklearn_ps(X, Y, 2), rel=1e-5)
    assert got["PS"].flag == 0 and got["PS2"].flag == 0


def test_ps_separable_gives_quarter(small):
    X = small[:30]
    Y = X.copy()
    Y[:, 1] += 100 * X[:, 1].std()          # one column moved far away: separable
    for name in ("PS", "PS2"):
        r = measure(X, Y, [name])[name]
        assert r.value == 0.25 and r.info["separation"] == "complete"


def test_ps_grows_with_noise(census):
    X = census.values
    vals = [measure(X, get_method("noise")(X, p, rng=np.random.default_rng(0)), ["PS"])["PS"].value
            for p in (0.05, 0.5, 1.0)]
    assert 0 <= vals[0] < vals[1] < vals[2] <= 0.25


def test_transport_hand_computed():
    a, wa = np.array([[0.0], [1.0]]), np.array([0.5, 0.5])
    b, wb = np.array([[0.0], [3.0]]), np.array([0.5, 0.5])
    assert transport_emd(a, wa, b, wb) == pytest.approx(1.0)        # 0.5*0 + 0.5*2
    a, wa = np.array([[0.0, 0.0]]), np.array([1.0])
    b, wb = np.array([[3.0, 4.0], [0.0, 1.0]]), np.array([0.25, 0.75])
    assert transport_emd(a, wa, b, wb) == pytest.approx(0.25 * 5 + 0.75 * 1)
    # unequal weights, where a greedy nearest match is not optimal
    a, wa = np.array([[0.0], [2.0]]), np.array([0.5, 0.5])
    b, wb = np.array([[1.0], [3.0]]), np.array([0.75, 0.25])
    assert transport_emd(a, wa, b, wb) == pytest.approx(0.5 * 1 + 0.25 * 1 + 0.25 * 1)


def test_transport_solves_costs_of_huge_magnitude():
    """Ground distances near 1e14 (a masked column far off the original's scale): HiGHS
    gives up on the raw costs ("model_status is Unknown", an unexpected failure of EMD);
    the costs scaled by a power of two give the optimum, equal to the scaled problem's
    own value times the scale."""
    rng = np.random.default_rng(1)
    a = rng.standard_normal((40, 2))
    b = rng.standard_normal((40, 2))
    b[:, 1] *= 1e14
    w = np.full(40, 1 / 40)
    got = transport_emd(a, w, b, w)
    s = 2.0 ** -40
    assert got == pytest.approx(transport_emd(a * s, w, b * s, w) / s, rel=1e-9)
    assert got >= np.abs(b[:, 1]).mean() * 0.999      # every unit travels that far


def test_emd_identity_zero_and_grows(census):
    X = census.values
    same = measure(X, X.copy(), ["EMD", "EMD1", "PS", "PS2"])
    assert same["EMD"].value == pytest.approx(0.0, abs=1e-12)
    assert same["EMD1"].value == 0.0
    assert same["PS"].value == pytest.approx(0.0, abs=1e-20)
    assert same["PS2"].value == pytest.approx(0.0, abs=1e-20)
    small = measure(X, get_method("noise")(X, 0.05, rng=np.random.default_rng(1)), ["EMD"])
    big = measure(X, get_method("noise")(X, 1.0, rng=np.random.default_rng(1)), ["EMD"])
    assert 0 < small["EMD"].value < big["EMD"].value
    assert small["EMD"].info["clusters"] == 50
    again = measure(X, get_method("noise")(X, 0.05, rng=np.random.default_rng(1)), ["EMD"])
    assert again["EMD"].value == small["EMD"].value


def test_emd_clusters_min_50_n_over_10(small):
    r = measure(small[:45], small[:45] * 1.1, ["EMD"])["EMD"]
    assert r.info["clusters"] == 4 and r.value > 0


@pytest.mark.parametrize("chunk_rows,bucket_rows", [(1, 5), (7, 9), (65536, None)])
def test_emd1_matches_scipy(chunk_rows, bucket_rows, small, rng):
    X = np.round(small[:50], 1)                           # some ties
    Y = np.round(X * np.exp(0.3 * rng.standard_normal(X.shape)), 1)
    m, s = X.mean(0), X.std(0, ddof=1)
    ref = np.mean([wasserstein_distance((X[:, j] - m[j]) / s[j], (Y[:, j] - m[j]) / s[j])
                   for j in range(X.shape[1])])
    got = measure(X, Y, ["EMD1"], options={"chunk_rows": chunk_rows, "bucket_rows": bucket_rows})
    assert got["EMD1"].value == pytest.approx(ref, rel=1e-10)


def test_hand_computed_emd1():
    X = np.array([[0.0], [1.0], [2.0]])          # sd 1
    Y = np.array([[2.0], [0.0], [4.0]])          # sorted (0, 2, 4) vs (0, 1, 2): |0|+|1|+|2|
    assert measure(X, Y, ["EMD1"])["EMD1"].value == pytest.approx(1.0)


def test_utility_bad_input(small):
    X = small[:30]
    nan = X.copy()
    nan[0, 0] = np.inf
    for name in ("PS", "EMD", "EMD1"):
        with pytest.raises(SdcInputError, match="masked file has missing"):
            measure(X, nan, [name])
