"""Utility measures of a synthetic release (pmse, pmse_ratio, the SDMetrics QualityReport
measures, ci_overlap): each against an independent brute force, chunking and row order
invariance (bit for bit), missing values, bad input."""

from __future__ import annotations

import itertools
import math
from collections import Counter

import numpy as np
import pandas as pd
import pytest
from scipy import stats

from sdcdist.errors import SdcInputError
from sdcdist.metrics import measure

NAMES = ["a", "b", "g", "h", "c"]
CATS = ["g", "h"]
QUALITY = ["ks_complement", "tv_complement", "corr_similarity", "contingency_similarity",
           "quality"]
ALL = ["pmse", "pmse_ratio", *QUALITY, "ci_overlap"]


def _pair(seed: int = 5, n: int = 120, m: int = 97, missing: bool = True):
    """A tie-heavy mixed original (n records) and a release of another size (m): numeric
    a, b, c (rounded: many ties), categorical g, h; missing values in both kinds."""
    rng = np.random.default_rng(seed)

    def make(k, shift):
        a = np.round(rng.normal(shift, 1, k), 1)
        b = np.round(2 * a + rng.normal(0, 1, k), 0)
        g = rng.integers(0, 4, k).astype(float)
        h = (g + rng.integers(0, 2, k)) % 3
        c = np.round(rng.gamma(2, 3, k) + g, 2)
        X = np.column_stack([a, b, g, h, c])
        if missing:
            X[rng.random(k) < 0.08, 1] = np.nan
            X[rng.random(k) < 0.08, 2] = np.nan
        return X
    X, Y = make(n, 0.0), make(m, 0.3)
    Y[Y[:, 3] == 2, 3] = 1            # a category the release lacks
    return X, Y


def _measure(X, Y, names=ALL, **options):
    opts = {"regression": "c ~ a + b"} | options
    return measure(X, Y, names, columns=NAMES, categorical=CATS, options=opts)


# -- brute forces (pandas / scipy, record by record) ---------------------------------------

def _frames(X, Y):
    return pd.DataFrame(X, columns=NAMES), pd.DataFrame(Y, columns=NAMES)


def _ks(r, s):
    r, s = r.dropna().round(14), s.dropna().round(14)
    return 1 - stats.ks_2samp(r, s).statistic


def _tv(r, s):
    real, syn = Counter(r.dropna()), Counter(s.dropna())
    for v in syn:
        if v not in real:
            real[v] += 1e-6
    return 1 - 0.5 * sum(abs(syn[v] / sum(syn.values()) - real[v] / sum(real.values()))
                         for v in real)


def _corr(r, s, thr):
    if r.nunique().min() == 1 or s.nunique().min() == 1:
        return np.nan
    r, s = r.dropna(), s.dropna()
    rr = stats.pearsonr(r.iloc[:, 0], r.iloc[:, 1])[0]
    if thr > 0 and not abs(rr) > thr:
        return np.nan
    return 1 - abs(rr - stats.pearsonr(s.iloc[:, 0], s.iloc[:, 1])[0]) / 2


def _binned(col):
    edges = np.histogram_bin_edges(col.dropna())
    return pd.Series(np.digitize(col, edges), index=col.index)


def _cont(r, s, thr):
    if thr > 0:
        from scipy.stats.contingency import association
        t2 = r.groupby(list(r.columns), dropna=False).size().unstack(fill_value=0)
        if min(t2.shape) < 2 or not association(t2.to_numpy(), method="cramer") > thr:
            return np.nan
    cr = r.groupby(list(r.columns), dropna=False).size() / len(r)
    cs = s.groupby(list(s.columns), dropna=False).size() / len(s)
    idx = cr.index.union(cs.index)
    return 1 - (cr.reindex(idx, fill_value=0) - cs.reindex(idx, fill_value=0)).abs().sum() / 2


def _brute_quality(X, Y, thr_r=0.5, thr_v=0.3):
    R, S = _frames(X, Y)
    shapes = {c: (_tv if c in CATS else _ks)(R[c], S[c]) for c in NAMES}
    pairs = {}
    for a, b in itertools.combinations(NAMES, 2):
        if a not in CATS and b not in CATS:
            pairs[(a, b)] = _corr(R[[a, b]], S[[a, b]], thr_r)
        else:
            r, s = R[[a, b]].copy(), S[[a, b]].copy()
            for c in (a, b):
                if c not in CATS:
                    r[c], s[c] = _binned(R[c]), _binned(S[c])
            pairs[(a, b)] = _cont(r, s, thr_v)
    num = [p for p in pairs if p[0] not in CATS and p[1] not in CATS]
    cat = [p for p in pairs if p[0] in CATS and p[1] in CATS]
    sh, tr = np.nanmean(list(shapes.values())), np.nanmean(list(pairs.values()))
    return {"ks_complement": np.nanmean([shapes[c] for c in NAMES if c not in CATS]),
            "tv_complement": np.nanmean([shapes[c] for c in CATS]),
            "corr_similarity": np.nanmean([pairs[p] for p in num]),
            "contingency_similarity": np.nanmean([pairs[p] for p in cat]),
            "quality": np.nanmean([sh, tr])}


def _brute_pmse(X, Y):
    """synthpop utility.gen (logit, main effects) written out: design from pandas, the fit
    by a plain float Newton-Raphson on the whole design (not sdcdist's fixed-point kernel);
    the separated records' coefficients run off, so their p end within e**-30 of the
    label."""
    R, S = _frames(X, Y)
    df = pd.concat([R, S], ignore_index=True)
    t = np.r_[np.zeros(len(R)), np.ones(len(S))]
    parts = []
    for c in NAMES:
        col = df[c]
        if c in CATS:
            parts.append(pd.get_dummies(col.astype("category").cat.add_categories([-1])
                                        .fillna(-1).cat.remove_unused_categories(),
                                        drop_first=True, dtype=float))
        else:
            parts.append(col.fillna(0).rename(c))
            if col.isna().any():
                parts.append(col.isna().astype(float).rename(c + "_NA"))
    D = pd.concat(parts, axis=1).to_numpy(float)
    D = (D - D.mean(axis=0)) / D.std(axis=0)
    D = np.column_stack([np.ones(len(D)), D])
    beta = np.zeros(D.shape[1])
    for _ in range(60):                   # Newton-Raphson in float64, record by record
        p = 1 / (1 + np.exp(-D @ beta))
        H = D.T @ (D * (p * (1 - p))[:, None])
        beta = beta + np.linalg.lstsq(H, D.T @ (t - p), rcond=None)[0]
    p = 1 / (1 + np.exp(-D @ beta))
    c = len(S) / len(df)
    k = D.shape[1]
    pmse = float(np.mean((p - c) ** 2))
    return pmse, pmse / ((k - 1) * (1 - c) ** 2 * c / len(df))


def _brute_ci(X, Y, y="c", xs=("a", "b")):
    out = []
    for F in _frames(X, Y):
        d = F[[*xs, y]].dropna()
        A = np.column_stack([np.ones(len(d)), d[list(xs)].to_numpy()])
        beta, *_ = np.linalg.lstsq(A, d[y].to_numpy(), rcond=None)
        resid = d[y].to_numpy() - A @ beta
        s2 = resid @ resid / (len(d) - A.shape[1])
        se = np.sqrt(s2 * np.diag(np.linalg.inv(A.T @ A)))
        q = stats.t.ppf(0.975, len(d) - A.shape[1])
        out.append((beta - q * se, beta + q * se))
    (lo, hi), (ls, us) = out
    inter = np.minimum(hi, us) - np.maximum(lo, ls)
    return float(np.mean(0.5 * (inter / (hi - lo) + inter / (us - ls))))


# -- tests ------------------------------------------------------------------------------------

@pytest.fixture(scope="module")
def pair():
    X, Y = _pair()
    return X, Y, _measure(X, Y)


def test_quality_measures_equal_a_brute_force(pair):
    X, Y, res = pair
    want = _brute_quality(X, Y)
    for name in QUALITY:
        assert res[name].value == pytest.approx(want[name], abs=1e-13), name
    assert 0 < res["quality"].value < 1


def test_quality_thresholds_follow_the_options(pair):
    X, Y, res = pair
    assert res["corr_similarity"].info["pairs_left_out"] >= 1      # SDMetrics' 0.5
    want = _brute_quality(X, Y, 0.0, 0.0)
    r = _measure(X, Y, QUALITY, quality_corr_threshold=0, quality_assoc_threshold=0)
    for name in QUALITY:
        assert r[name].value == pytest.approx(want[name], abs=1e-13), name
    assert r["corr_similarity"].value != res["corr_similarity"].value


def test_pmse_equals_a_logistic_brute_force(pair):
    X, Y, res = pair
    pmse, ratio = _brute_pmse(X, Y)
    assert res["pmse"].value == pytest.approx(pmse, rel=1e-6)
    assert res["pmse_ratio"].value == pytest.approx(ratio, rel=1e-6)
    assert res["pmse"].info["separated_records"] > 0      # h = 2 only in the original
    # a numeric column missing in the release only: its indicator separates those records
    Z = Y.copy()
    Z[::9, 0] = np.nan
    r = _measure(X, Z, ["pmse", "pmse_ratio"])
    pmse, ratio = _brute_pmse(X, Z)
    assert r["pmse"].value == pytest.approx(pmse, rel=1e-6) and r["pmse"].flag == 0
    assert r["pmse_ratio"].value == pytest.approx(ratio, rel=1e-6)


def test_pmse_is_ps_on_all_numeric_files_of_one_size():
    rng = np.random.default_rng(3)
    X = rng.normal(size=(150, 3))
    Y = X + rng.normal(scale=0.7, size=X.shape)
    r = measure(X, Y, ["pmse", "PS"], columns=["a", "b", "c"])
    assert r["pmse"].value == pytest.approx(r["PS"].value, rel=1e-10)


def test_ci_overlap_equals_least_squares_intervals(pair):
    X, Y, res = pair
    assert res["ci_overlap"].value == pytest.approx(_brute_ci(X, Y), abs=1e-12)
    # intervals that do not meet give a negative overlap
    Z = X.copy()
    Z[:, 4] = Z[:, 4] + 50 * Z[:, 0]
    v = _measure(X, Z, ["ci_overlap"])["ci_overlap"].value
    assert v < 0 and v == pytest.approx(_brute_ci(X, Z), abs=1e-12)


def test_identical_files_score_perfectly():
    X, _ = _pair(missing=False)
    r = _measure(X, X.copy())
    for name in QUALITY:
        assert r[name].value == 1.0, name
    assert r["ci_overlap"].value == 1.0
    assert r["pmse"].value < 1e-20


def _bits(res):
    return {k: (repr(v.value), v.flag) for k, v in res.items()}


def test_same_bits_for_any_chunking_and_row_order(pair):
    X, Y, res = pair
    base = _bits(res)
    assert _bits(_measure(X, Y, chunk_rows=7)) == base
    rng = np.random.default_rng(0)
    Xp, Yp = X[rng.permutation(len(X))], Y[rng.permutation(len(Y))]
    assert _bits(_measure(Xp, Yp, chunk_rows=13)) == base


def test_constant_and_empty_columns_follow_sdmetrics():
    X, Y = _pair(missing=False)
    Y[:, 0] = 1.0                         # constant in the release: its correlations are NaN
    r = _measure(X, Y, QUALITY, quality_corr_threshold=0, quality_assoc_threshold=0)
    want = _brute_quality(X, Y, 0.0, 0.0)
    for name in QUALITY:
        assert r[name].value == pytest.approx(want[name], abs=1e-13), name
    assert r["corr_similarity"].excluded == 2


def test_bad_regressions_are_refused(pair):
    X, Y, _ = pair
    for reg, words in (("g ~ a + b", "categorical"), ("c ~ a + zz", "zz"),
                       ("zz ~ a", "zz"), ("c a b", r"y ~ x1 \+ x2"), ("c ~ a + a", "twice")):
        with pytest.raises(SdcInputError, match=words):
            _measure(X, Y, ["ci_overlap"], regression=reg)
    with pytest.raises(SdcInputError, match="regression"):
        _measure(X, Y, ["ci_overlap"], regression=3)


@pytest.mark.slow
def test_same_bits_on_two_workers(pair, client):
    X, Y, res = pair
    opts = {"regression": "c ~ a + b", "chunk_rows": 17}
    r = measure(X, Y, ALL, columns=NAMES, categorical=CATS, options=opts, client=client)
    assert _bits(r) == _bits(res)


def test_utility_and_distance_measures_run_on_all_numeric_files():
    """The synthetic-release measures read categorical columns when there are any, but an
    all-numeric file (the Census study of examples/synthetic_reid.yaml) is theirs too: the
    audit's dataset check and applicable() must not ask for a categorical column."""
    from sdcdist.audit import parse_spec
    from sdcdist.audit.run import load_data
    from sdcdist.metrics import Inputs, applicable, get_metric
    names = ["pmse", "pmse_ratio", "ks_complement", "corr_similarity", "quality",
             "ci_overlap", "dcr_train_median", "dcr_baseline", "nndr_median"]
    for n in names:
        assert not get_metric(n).needs_categorical, n
        assert applicable(n, Inputs(columns=("a", "b"))) is None, n
    for n in ("uniques", "tv_complement", "contingency_similarity"):   # these still need them
        assert get_metric(n).needs_categorical, n
    spec = parse_spec({"name": "t", "seed": 1,
                       "dataset": {"synthetic": {"rows": 60, "columns": 3, "seed": 1}},
                       "methods": [{"name": "noise", "params": [0.1]}],
                       "metrics": names, "options": {"regression": "V1 ~ V2"}})
    load_data(spec)                                         # no SdcInputError
    bad = parse_spec({**spec.raw, "metrics": ["uniques"]})
    with pytest.raises(SdcInputError, match="uniques measure categorical columns"):
        load_data(bad)


def test_two_way_counts_by_bincount_equal_numpy_unique():
    from sdcdist.metrics.loss.quality import _key_counts
    rng = np.random.default_rng(3)
    for key in (rng.integers(0, 40, 1000), rng.integers(0, 10**9, 300), np.zeros(0, np.int64),
                np.array([5, 5, 70000, 3])):
        k, c = _key_counts(key)
        uk, uc = np.unique(key, return_counts=True)
        assert np.array_equal(k, uk) and np.array_equal(c, uc) and c.dtype == np.int64
