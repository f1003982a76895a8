"""Masking methods: the registry contract, and each method's defining property."""

from __future__ import annotations

import numpy as np
import pytest

from sdcdist import SdcInputError
from sdcdist.masking import REGISTRY, get_method
from sdcdist.masking.swapping import rankswap_column_order


def _valid_param(m):
    if m.kind == "none":
        return 0
    if m.kind == "int":
        return int(m.low) if m.low >= 2 else 3
    return m.low + (m.high - m.low) / 4


def _options(m, X):
    if m.acts_on != "numeric":      # the two code columns appended by _with_codes
        return {"categorical": [X.shape[1] - 2, X.shape[1] - 1]}
    if "roles" in m.options:   # IPSO: two regressors, the other columns quasi-identifiers
        return {"roles": {"confidential": [0, 1], "quasi": list(range(2, X.shape[1]))}}
    return {}


def _with_codes(X, seed=0):
    """X with two categorical code columns appended (4 and 7 categories, a rare one)."""
    r = np.random.default_rng(seed)
    a = r.integers(0, 4, X.shape[0]).astype(float)
    b = r.integers(0, 7, X.shape[0]).astype(float)
    a[0] = 3.0
    return np.column_stack([X, a, b])


@pytest.mark.parametrize("name", sorted(REGISTRY))
def test_contract(name, small):
    m = REGISTRY[name]
    X = _with_codes(small) if m.acts_on != "numeric" else small.copy()
    before = X.copy()
    p = _valid_param(m)
    a = m(X, p, rng=np.random.default_rng(1), **_options(m, X))
    assert np.array_equal(X, before), "input modified"
    assert a.shape == X.shape and a.dtype == np.float64
    b = m(X, p, rng=np.random.default_rng(1), **_options(m, X))
    assert np.array_equal(a, b, equal_nan=True), "same seed, different output"
    if m.random:
        c = m(X, p, rng=np.random.default_rng(2), **_options(m, X))
        assert not np.array_equal(a, c), "different seed, same output"
    assert m.description and m.param
    # out-of-range parameter: the standard message
    bad = (m.low - 1 if m.infinite else m.high + 1) if m.kind != "none" else 7
    want = (rf"The '{m.param}' parameter of {name} must be .* Got {bad!r} instead" if m.kind != "none"
            else rf"{name} has no parameter\. Got {bad!r} instead")
    with pytest.raises(SdcInputError, match=want):
        m(X, bad, rng=np.random.default_rng(1), **_options(m, X))


@pytest.mark.parametrize("name", sorted(n for n, m in REGISTRY.items() if m.acts_on == "numeric"))
def test_numeric_methods_carry_categorical_columns_bit_identical(name, small):
    m = REGISTRY[name]
    X = _with_codes(small, seed=4)
    Xc = np.column_stack([X[:, :2], X[:, 4], X[:, 2:4], X[:, 5]])   # codes at 2 and 5
    cats = [2, 5]
    opts = _options(m, small)
    if "roles" in opts:                 # positions in the full file: numeric 0, 1, 3, 4
        opts = {"roles": {"confidential": [0, 1], "quasi": [3, 4]}}
    p = _valid_param(m)
    out = m(Xc, p, rng=np.random.default_rng(1), categorical=cats, **opts)
    assert out.shape == Xc.shape
    assert out[:, cats].tobytes() == Xc[:, cats].tobytes()
    # the numeric columns are masked as the method masks them alone
    alone = m(small, p, rng=np.random.default_rng(1), **_options(m, small))
    np.testing.assert_array_equal(out[:, [0, 1, 3, 4]], alone)


def test_unknown_method_lists_valid_ones():
    with pytest.raises(SdcInputError, match="Valid masking methods: .*rankswap"):
        get_method("rank_swap")


@pytest.mark.parametrize("p", [1, 5, 15, 20])
def test_rankswap_keeps_marginals_and_bounds_rank_moves(rng, p):
    n = 997
    X = np.column_stack([rng.standard_normal(n), rng.integers(0, 20, n).astype(float),
                         rng.exponential(size=n)])
    Y = REGISTRY["rankswap"](X, p, rng=rng)
    h = int(np.floor(p * n / 100))
    for j in range(X.shape[1]):
        assert np.array_equal(np.sort(X[:, j]), np.sort(Y[:, j]))
        # rank positions: value at rank r of X moved to a record whose X-rank is within h
        order = np.argsort(X[:, j], kind="stable")
        rank_of_record = np.empty(n, int)
        rank_of_record[order] = np.arange(n)
        # each record receives the value of a rank at most h away from its own rank
        xs = np.sort(X[:, j], kind="stable")
        for i in range(n):
            r = rank_of_record[i]
            lo, hi = max(0, r - h), min(n - 1, r + h)
            assert xs[lo] <= Y[i, j] <= xs[hi]


def test_rankswap_walk_swaps_pairs_within_window(rng):
    x = np.arange(50, dtype=float)
    y = rankswap_column_order(x, 10, rng)   # h = 5
    moved = y - x
    assert np.all(np.abs(moved) <= 5)
    # swaps are pairwise: the value at i came from j and vice versa
    assert np.array_equal(y[y.astype(int)], x)


def test_rankswap_zero_is_identity(rng):
    X = rng.standard_normal((40, 3))
    assert np.array_equal(REGISTRY["rankswap"](X, 0, rng=rng), X)


def test_noise_variance(rng):
    n = 200_000
    X = rng.standard_normal((n, 3)) * np.array([1.0, 10.0, 1000.0])
    p = 0.1
    Y = REGISTRY["noise"](X, p, rng=np.random.default_rng(5))
    E = Y - X
    target = (p * X.std(axis=0, ddof=1)) ** 2
    # var of a sample variance of n normal draws: 2 s^4 / (n - 1); allow 5 sd
    tol = 5 * np.sqrt(2.0 / (n - 1))
    assert np.all(np.abs(E.var(axis=0, ddof=1) / target - 1) < tol)
    assert np.all(np.abs(E.mean(axis=0)) < 5 * np.sqrt(target / n))
    # independent across columns
    assert np.all(np.abs(np.corrcoef(E.T)[np.triu_indices(3, 1)]) < 5 / np.sqrt(n))


def test_every_catalogue_method_is_registered():
    catalogue = {"noise", "corrnoise", "mixnoise", "mixnoise_scaled", "multnoise", "rankswap",
                 "micmul", "mic2mul", "mic3mul", "mic4mul", "micir", "micz", "micpcp",
                 "resample", "jpeg", "distr", "ipso_a", "ipso_b", "ipso_c"}
    assert catalogue <= set(REGISTRY)
    for name in catalogue:
        m = REGISTRY[name]
        assert m.reference and m.description and "\n" not in m.description
        assert (m.param == "none") == (m.kind == "none")
