"""IPSO: which regression statistics each variant preserves, and its roles."""

from __future__ import annotations

import numpy as np
import pytest

from sdcdist import SdcInputError
from sdcdist.masking import REGISTRY

CONF = [0, 1, 2, 4]
QUASI = [3, 5, 6, 7]


def _fit(X, conf, quasi):
    A = np.column_stack([np.ones(X.shape[0]), X[:, conf]])
    B, *_ = np.linalg.lstsq(A, X[:, quasi], rcond=None)
    R = X[:, quasi] - A @ B
    return B, R.T @ R / X.shape[0]


def _rel(a, b):
    return np.abs(a - b).max() / np.abs(b).max()


@pytest.mark.parametrize("variant", ["a", "b", "c"])
def test_regression_statistics(census, variant):
    X = census.values
    roles = {"confidential": CONF, "quasi": QUASI}
    Y = REGISTRY[f"ipso_{variant}"](X, 0, rng=np.random.default_rng(3), roles=roles)
    other = [j for j in range(X.shape[1]) if j not in QUASI]
    assert np.array_equal(Y[:, other], X[:, other])          # only Y is replaced
    B, S = _fit(X, CONF, QUASI)
    B2, S2 = _fit(Y, CONF, QUASI)
    if variant == "a":
        assert _rel(B2, B) > 1e-4 and _rel(S2, S) > 1e-4
    else:
        assert _rel(B2, B) < 1e-8
    if variant == "b":
        assert _rel(S2, S) > 1e-4
    if variant == "c":
        assert _rel(S2, S) < 1e-8
    assert not np.allclose(Y[:, QUASI], X[:, QUASI])


def test_ipso_a_noise_has_residual_covariance():
    rng = np.random.default_rng(0)
    n = 50_000
    Xc = rng.standard_normal((n, 2))
    Yq = Xc @ np.array([[1.0, 2.0], [0.5, -1.0]]) + rng.standard_normal((n, 2)) @ \
        np.array([[1.0, 0.0], [0.8, 0.6]])
    X = np.column_stack([Xc, Yq])
    Y = REGISTRY["ipso_a"](X, 0, rng=np.random.default_rng(1),
                           roles={"confidential": [0, 1], "quasi": [2, 3]})
    B, S = _fit(X, [0, 1], [2, 3])
    B2, S2 = _fit(Y, [0, 1], [2, 3])
    d = np.diag(S)
    assert np.all(np.abs(S2 - S) <= 6 * np.sqrt((np.outer(d, d) + S ** 2) / n))
    assert _rel(B2, B) < 0.05


def test_roles_by_name_and_dataset_key_role(census):
    X = census.values
    cols = list(census.columns)
    roles_pos = {"confidential": CONF, "quasi": QUASI}
    roles_names = {"confidential": [cols[j] for j in CONF], "key": [cols[j] for j in QUASI]}
    a = REGISTRY["ipso_c"](X, 0, rng=np.random.default_rng(5), roles=roles_pos)
    b = REGISTRY["ipso_c"](X, 0, rng=np.random.default_rng(5), roles=roles_names,
                           columns=cols)
    assert np.array_equal(a, b)


@pytest.mark.parametrize("roles,match", [
    (None, "needs the roles of the columns"),
    ({}, "needs the roles of the columns"),
    ({"confidential": [0, 1]}, "quasi-identifier role of .* must have at least 1 column"),
    ({"quasi": [0, 1]}, "confidential role of .* must have at least 1 column"),
    ({"confidential": [0, 1], "quasi": [1, 2]}, "both confidential and quasi-identifier"),
    ({"confidential": [0], "quasi": [9]}, r"must be a column position in \[0, 3\]"),
    ({"confidential": ["a"], "quasi": [2]}, "no column names were given"),
    ({"confidential": [0], "quasy": [2]}, r"quasi-identifier role of .* \(roles given: "
                                          r"confidential, quasy\) must have at least 1"),
])
@pytest.mark.parametrize("name", ["ipso_a", "ipso_b", "ipso_c"])
def test_bad_roles(small, name, roles, match):
    with pytest.raises(SdcInputError, match=match):
        REGISTRY[name](small, 0, rng=np.random.default_rng(0), roles=roles)


@pytest.mark.parametrize("name,n_ok", [("ipso_a", 5), ("ipso_b", 5), ("ipso_c", 7)])
def test_too_few_records(name, n_ok):
    rng = np.random.default_rng(0)
    roles = {"confidential": [0, 1, 2], "quasi": [3, 4]}   # 4 regressors with the intercept
    with pytest.raises(SdcInputError, match=rf"given to {name} must have at least \d+ records\. "
                                            r"Got 4 instead; more than the 4 regressors"):
        REGISTRY[name](rng.standard_normal((4, 5)), 0, rng=rng, roles=roles)
    with pytest.raises(SdcInputError, match=rf"at least {n_ok}"):
        REGISTRY[name](rng.standard_normal((n_ok - 1, 5)), 0, rng=rng, roles=roles)
    REGISTRY[name](rng.standard_normal((n_ok, 5)), 0, rng=rng, roles=roles)
