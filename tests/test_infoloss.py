"""Information-loss metrics: hand-computed values, identities, chunking, paper findings."""

from __future__ import annotations

import math

import numpy as np
import pytest
from scipy.stats import spearmanr

from sdcdist import SdcInputError
from sdcdist.data import from_array
from sdcdist.masking import get_method
from sdcdist.metrics import REGISTRY, measure
from sdcdist.metrics.exactsum import SQ_SCALE, exact_square_sums, exact_sums, to_fraction

TABLE1 = [f"{o}_{e}" for o in "XMVSR" for e in ("MSE", "MAE", "MV")]
LOSS = TABLE1 + ["IL", "IL_S2", "IL1", "IL1s", "IL1s_sum", "IL2", "IL3", "IL4", "IL5",
                 "s0", "s1", "s2", "MAE", "MSE"]

# A 3 x 2 example worked out by hand.
X3 = np.array([[1.0, 2.0], [2.0, 4.0], [3.0, 9.0]])
Y3 = np.array([[1.0, 3.0], [3.0, 4.0], [2.0, 7.0]])


def _hand_values() -> dict[str, float]:
    # |X - Y| = [[0, 1], [1, 0], [1, 2]]
    x_mv = (0 / 1 + 1 / 2 + 1 / 3 + 1 / 2 + 0 / 4 + 2 / 9) / 6
    # means: X (2, 5), Y (2, 14/3)
    m_mv = (0 + (1 / 3) / 5) / 2
    # covariances (n - 1): X v00=1, v01=3.5, v11=13; Y v00=1, v01=0.5, v11=13/3
    v_mv = (0 + 3 / 3.5 + (26 / 3) / 13) / 3
    s_mv = (0 + (26 / 3) / 13) / 2
    rx, ry = 3.5 / math.sqrt(13), 0.5 / math.sqrt(13 / 3)
    r_mae = abs(rx - ry)
    il1 = (0 + 1 / 2.5 + 1 / 2.5 + 1 / 2.5 + 0 + 2 / 8) / 6
    il1s_sum = 2 / math.sqrt(2) + 3 / (math.sqrt(2) * math.sqrt(13))
    v = {"X_MSE": 7 / 6, "X_MAE": 5 / 6, "X_MV": x_mv,
         "M_MSE": (1 / 3) ** 2 / 2, "M_MAE": (1 / 3) / 2, "M_MV": m_mv,
         "V_MSE": (0 + 9 + (26 / 3) ** 2) / 3, "V_MAE": (0 + 3 + 26 / 3) / 3, "V_MV": v_mv,
         "S_MSE": (26 / 3) ** 2 / 2, "S_MAE": (26 / 3) / 2, "S_MV": s_mv,
         "R_MSE": r_mae ** 2, "R_MAE": r_mae, "R_MV": r_mae / rx,
         "IL1": il1, "IL1s_sum": il1s_sum, "IL1s": il1s_sum / 6}
    v["IL"] = 100 * (x_mv + m_mv + v_mv + s_mv + r_mae) / 5
    v["IL_S2"] = 100 * (x_mv + (m_mv + s_mv) / 2 + (v_mv + r_mae) / 2) / 3
    v.update(IL2=m_mv, IL3=v_mv, IL4=s_mv, IL5=r_mae, MAE=5 / 6, MSE=7 / 6)
    v["s0"] = (m_mv + v_mv + s_mv + r_mae) / 4
    v["s1"] = (il1 + m_mv + v_mv + s_mv + r_mae) / 5
    v["s2"] = (il1s_sum / 6 + m_mv + s_mv + r_mae) / 4
    return v


@pytest.mark.parametrize("name", LOSS)
def test_hand_computed(name):
    got = measure(X3, Y3, [name])[name]
    assert got.value == pytest.approx(_hand_values()[name], rel=1e-12)
    assert got.excluded == 0


def test_zero_denominators_left_out_and_counted():
    # column 0 has a zero value and a zero mean; cov(X) has a zero off-diagonal term
    X = np.array([[-1.0, 1.0], [0.0, 2.0], [1.0, 1.0]])
    Y = np.array([[-2.0, 1.0], [1.0, 2.0], [1.0, 2.0]])
    r = measure(X, Y, ["X_MV", "M_MV", "V_MV", "R_MV", "IL", "IL1"])
    # X_MV: terms |d|/|x| = 1/1, (0 left out), 0/1 | 0/1, 0/2, 1/1 -> 2 / 5 terms
    assert r["X_MV"].value == pytest.approx(2 / 5) and r["X_MV"].excluded == 1
    # means X (0, 4/3), Y (0, 5/3): the first term is left out
    assert r["M_MV"].value == pytest.approx((1 / 3) / (4 / 3)) and r["M_MV"].excluded == 1
    # cov(X) = [[1, 0], [0, 1/3]]; cov(Y) = [[7/3, 1/2*...]]: the zero covariance is left out
    vy = np.cov(Y, rowvar=False)
    assert r["V_MV"].excluded == 1
    assert r["V_MV"].value == pytest.approx((abs(1 - vy[0, 0]) / 1 + abs(1 / 3 - vy[1, 1]) * 3) / 2)
    assert r["R_MV"].excluded == 1 and math.isnan(r["R_MV"].value)   # its only term is 0
    assert r["IL"].excluded == 3                                   # X_MV + M_MV + V_MV
    # IL1: the term with x = x' = 0 does not occur; |d|/(0.5(|x|+|x'|)) otherwise
    il1 = (1 / 1.5 + 1 / 0.5 + 0 + 0 + 0 + 1 / 1.5) / 6
    assert r["IL1"].value == pytest.approx(il1)
    both_zero = measure(np.array([[0.0, 1], [1, 2], [2, 4]]), np.array([[0.0, 1], [1, 3], [3, 4]]),
                        ["IL1"])["IL1"]
    assert both_zero.value == pytest.approx((0 + 0 + 1 / 2.5 + 0 + 1 / 2.5 + 0) / 6)


def test_identity_gives_zero(census):
    X = census.values
    r = measure(X, X.copy(), LOSS + ["rMAE", "brMAE", "brMSE"])
    for name, res in r.items():
        assert res.value == 0.0, name


def test_rankswap_keeps_means_and_variances_exactly(census):
    """[YWC] Table 1: rank swapping gives IL2 = IL4 = 0 (means and variances kept)."""
    Xs = get_method("rankswap")(census.values, 15, rng=np.random.default_rng(5))
    r = measure(census.values, Xs, ["M_MV", "S_MV", "IL4", "IL2", "M_MAE", "S_MSE", "IL1s"])
    for name in ("M_MV", "S_MV", "IL4", "IL2", "M_MAE", "S_MSE"):
        assert r[name].value == 0.0, name
    assert r["IL1s"].value > 0.01


def _numpy_reference(X: np.ndarray, Y: np.ndarray) -> dict[str, float]:
    """Plain in-memory numpy, written independently of the package."""
    n, p = X.shape
    d = X - Y
    out = {"X_MSE": np.mean(d ** 2), "X_MAE": np.mean(np.abs(d)),
           "X_MV": np.mean(np.abs(d)[X != 0] / np.abs(X[X != 0]))}

    def errs(a, b, tag):
        keep = a != 0
        out.update({f"{tag}_MSE": np.mean((a - b) ** 2), f"{tag}_MAE": np.mean(np.abs(a - b)),
                    f"{tag}_MV": np.mean(np.abs(a - b)[keep] / np.abs(a[keep]))})
    errs(X.mean(0), Y.mean(0), "M")
    vx, vy = np.cov(X, rowvar=False), np.cov(Y, rowvar=False)
    errs(vx[np.triu_indices(p)], vy[np.triu_indices(p)], "V")
    errs(np.diag(vx), np.diag(vy), "S")
    rx, ry = np.corrcoef(X, rowvar=False), np.corrcoef(Y, rowvar=False)
    errs(rx[np.triu_indices(p, 1)], ry[np.triu_indices(p, 1)], "R")
    sd = X.std(0, ddof=1)
    out["IL1s"] = np.mean(np.abs(d) / (np.sqrt(2) * sd))
    out["IL1s_sum"] = np.sum(np.abs(d) / (np.sqrt(2) * sd))
    den = 0.5 * (np.abs(X) + np.abs(Y))
    out["IL1"] = np.mean(np.where(den > 0, np.abs(d) / np.where(den > 0, den, 1), 0))
    return out


@pytest.mark.parametrize("chunk_rows", [1, 7, 16, 50, 65536])
def test_chunked_equals_in_memory(chunk_rows, small, rng):
    X = small[:50]                            # 50 = 7*7 + 1: a last chunk of 1 record
    Y = X * np.exp(0.1 * rng.standard_normal(X.shape))
    ref = _numpy_reference(X, Y)
    got = measure(X, Y, list(ref), options={"chunk_rows": chunk_rows})
    for name, v in ref.items():
        assert got[name].value == pytest.approx(v, rel=1e-10), name
    whole = measure(X, Y, ["M_MV", "S_MV"], options={"chunk_rows": 65536})
    assert got["M_MV"].value == whole["M_MV"].value        # exact sums: bit-identical
    assert got["S_MV"].value == whole["S_MV"].value


def test_on_cluster_bit_identical(small, rng, client):
    Y = small + rng.standard_normal(small.shape)
    here = measure(small, Y, LOSS, options={"chunk_rows": 16})
    there = measure(small, Y, LOSS, options={"chunk_rows": 16}, client=client)
    assert {k: v.value for k, v in here.items()} == {k: v.value for k, v in there.items()}


def test_exact_sums_order_free(rng):
    x = rng.standard_normal((500, 3)) * np.array([1e-8, 1.0, 1e8])
    perm = rng.permutation(500)
    assert all(exact_sums(x) == exact_sums(x[perm]))
    assert all(exact_square_sums(x) == exact_square_sums(x[perm]))
    split = exact_sums(x[:1]) + exact_sums(x[1:333]) + exact_sums(x[333:])
    assert all(split == exact_sums(x))
    assert [float(to_fraction(v)) for v in exact_sums(x)] == [math.fsum(c) for c in x.T]
    from fractions import Fraction
    sq = [to_fraction(v, SQ_SCALE) for v in exact_square_sums(x)]
    assert sq == [sum(Fraction(float(a)) ** 2 for a in c) for c in x.T]


def test_loss_grows_with_noise_spearman(census):
    """[CN]: over increasing noise the metrics rank the masked files like the noise level."""
    X = census.values
    ps = np.linspace(0.01, 0.3, 8)
    names = ["MAE", "MSE", "IL1s", "brMAE", "brMSE"]
    rows, levels = [], []
    for i, p in enumerate(ps):
        for rep in range(3):
            Y = get_method("noise")(X, p, rng=np.random.default_rng([i, rep]))
            r = measure(X, Y, names, seed=rep)
            rows.append([r[n].value for n in names])
            levels.append(p)
    rows = np.array(rows)
    for j, name in enumerate(names):
        assert spearmanr(levels, rows[:, j]).statistic > 0.9, name


def test_bad_input(small):
    X = small[:20]
    with pytest.raises(SdcInputError, match="same shape"):
        measure(X, X[:19], ["X_MSE"])
    with pytest.raises(SdcInputError, match="columns"):
        measure(X, X[:, :3], ["X_MSE"])
    a = from_array(X, ["a", "b", "c", "d"])
    b = from_array(X, ["a", "b", "c", "e"])
    with pytest.raises(SdcInputError, match="columns"):
        measure(a, b, ["X_MSE"])
    const = X.copy()
    const[:, 2] = 7.0
    # a column constant in the original is left out of the metrics that divide by its sd
    for name in ("IL1s", "IL1s_sum", "R_MAE", "IL", "s2", "PS", "EMD1"):
        res = measure(const, X, [name], columns=["a", "b", "c", "d"])
        assert np.isfinite(res[name].value), name
    for name in ("IL1s", "IL1s_sum", "R_MAE", "PS", "EMD1"):
        r = measure(const, X, [name], columns=["a", "b", "c", "d"])[name]
        assert r.info["constant_columns_left_out"] == ["c"]
    with pytest.raises(SdcInputError, match="masked"):
        measure(X, const, ["R_MAE"])
    nan = X.copy()
    nan[3, 1] = np.nan
    for name in ("X_MSE", "brMAE", "PS"):
        with pytest.raises(SdcInputError, match="masked file has missing"):
            measure(X, nan, [name])
    with pytest.raises(SdcInputError, match="chunk_rows"):
        measure(X, X, ["X_MSE"], options={"chunk_rows": 0})


def test_registered_with_kinds():
    for name in LOSS + ["rMAE", "brMAE", "brMSE"]:
        assert REGISTRY[name].kind == "loss"
    for name in ("PS", "PS2", "EMD", "EMD1"):
        assert REGISTRY[name].kind == "utility"
