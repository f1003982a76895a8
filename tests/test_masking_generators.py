"""The synthetic-data generators cart, copula and privbayes: each one's defining property,
partial synthesis, bad input, and invariance."""

from __future__ import annotations

import numpy as np
import pytest
from click.testing import CliRunner
from scipy import stats
from scipy.special import ndtri

from sdcdist import SdcInputError
from sdcdist.cli import main
from sdcdist.data import from_array, load_microdata, write_microdata
from sdcdist.masking import REGISTRY, check_data
from sdcdist.masking._synth import Streams, plan_columns
from sdcdist.masking.copula import copula_dims, copula_scores_block
from sdcdist.masking.privbayes import encode_columns, laplace_scale, privbayes_fit

GENERATORS = ("cart", "copula", "privbayes")
PARAM = {"cart": 5, "copula": 0.2, "privbayes": 1.0}


def _mixed(n, seed=0, missing=True):
    """x numeric, y numeric depending on x, c categorical (4 codes) depending on x."""
    r = np.random.default_rng(seed)
    x = r.standard_normal(n)
    y = 0.8 * x + 0.6 * r.standard_normal(n)
    c = np.clip(np.floor(x + 2 + r.standard_normal(n) * 0.7), 0, 3)
    if missing:
        y[r.random(n) < 0.1] = np.nan
        c[r.random(n) < 0.05] = np.nan
    return np.column_stack([x, y, c])


COLS = ["x", "y", "c"]


def _gen(name, X, p=None, seed=1, **opts):
    return REGISTRY[name](X, PARAM[name] if p is None else p, rng=np.random.default_rng(seed),
                          categorical=[2], columns=COLS, **opts)


# -- cart -------------------------------------------------------------------------

def test_cart_minbucket_n_draws_each_column_from_its_marginal():
    n = 600
    X = _mixed(n, missing=False)
    out = _gen("cart", X, n)
    # categorical column: chi-square goodness of fit to the original shares
    obs = np.bincount(out[:, 2].astype(int), minlength=4)
    exp = np.bincount(X[:, 2].astype(int), minlength=4) / n * n
    assert stats.chisquare(obs[exp > 0], exp[exp > 0]).pvalue > 1e-3
    # numeric: every value an original one, KS against the original sample
    for j in (0, 1):
        assert np.isin(out[:, j], X[:, j]).all()
        assert stats.ks_2samp(out[:, j], X[:, j]).pvalue > 1e-3
    # one leaf: drawn from the marginal, so x and y lose their correlation (0.8 originally)
    assert abs(np.corrcoef(out[:, 0], out[:, 1])[0, 1]) < 4 / np.sqrt(n)
    small = _gen("cart", X, 1)
    assert np.corrcoef(small[:, 0], small[:, 1])[0, 1] > 0.6


def test_cart_minbucket_1_reproduces_a_function_exactly():
    r = np.random.default_rng(3)
    n = 500
    x = r.integers(0, 25, n).astype(float)
    X = np.column_stack([x, x ** 2 - 7 * x + 3, x % 3])
    out = _gen("cart", X, 1)
    assert np.array_equal(out[:, 1], out[:, 0] ** 2 - 7 * out[:, 0] + 3)
    assert np.array_equal(out[:, 2], out[:, 0] % 3)
    assert (out[:, 0] != X[:, 0]).mean() > 0.5          # x itself is a bootstrap sample


def test_cart_same_bits_with_any_number_of_threads(monkeypatch):
    # the trees are fitted, and the blocks drawn, in threads: their number changes nothing
    import sdcdist.masking._synth as synth
    import sdcdist.masking.cart as cartmod
    monkeypatch.setattr(synth, "BLOCK_ROWS", 64)          # 5 blocks of the 300 records
    X = _mixed(300, seed=7)
    runs = []
    for t in (1, 2, 3):
        monkeypatch.setattr(cartmod, "_threads", lambda jobs, t=t: max(1, min(t, jobs)))
        runs.append(_gen("cart", X, 2, synth_order=["c", "x", "y"]))
    assert np.array_equal(runs[0], runs[1], equal_nan=True)
    assert np.array_equal(runs[0], runs[2], equal_nan=True)


def test_cart_missing_values_synthesised():
    X = _mixed(2000, seed=5)
    out = _gen("cart", X, 5)
    for j in (1, 2):
        assert abs(np.isnan(out[:, j]).mean() - np.isnan(X[:, j]).mean()) < 0.03


def test_cart_screens_predictors_as_synthpop():
    # synthpop's remove.lindep.syn, run in R on these constructions, keeps (x1, x2) and
    # leaves out x3 = x1 + x2 (largest loading), a near-constant x4 and x5 = 2y + 1
    from sdcdist.masking.cart import screen_predictors
    r = np.random.default_rng(3)
    x1, x2 = r.standard_normal(200), r.standard_normal(200)
    y = x1 ** 2 + r.standard_normal(200)
    x3, x4, x5 = x1 + x2, np.tile([0.0, 0.001], 100), 2 * y + 1
    assert screen_predictors(np.column_stack([x1, x2, x3, x4, x5]), y).tolist() == [
        True, True, False, False, False]
    for order in ([2, 0, 1], [1, 2, 0]):            # the dependent one, wherever it stands
        P = np.column_stack([x1, x2, x3])[:, order]
        assert screen_predictors(P, y).tolist() == [k != 2 for k in order]
    # missing values: the screen reads the complete records
    P = np.column_stack([x1, x2, x3])
    P[::7, 0] = np.nan
    assert screen_predictors(P, y).tolist() == [True, True, False]
    # a constant response leaves nothing out but the constant predictor
    assert screen_predictors(np.column_stack([x1, x4]), np.ones(200)).tolist() == [True, False]


def test_cart_census_trees_never_split_on_ptotval():
    # PTOTVAL = PEARNVAL + POTHVAL exactly: synthpop (R) leaves PTOTVAL out of the trees of
    # FICA, WSALVAL and ERNVAL, the steps that have both parts, and nothing else anywhere
    from sdcdist.data.refdata import reference_file
    from sdcdist.masking.cart import cart_fit
    md = load_microdata(reference_file("census"))
    X = np.asarray(md.values, dtype=float)
    cols = list(md.columns)
    plan = plan_columns("cart", X, categorical=[], keep=[], columns=cols, synth_columns=None)
    steps = cart_fit(X, plan, list(range(len(cols))), 50, Streams(np.random.default_rng(0)))
    dropped = {cols[s.column]: sorted(set(range(s.column)) - set(s.predictors)) for s in steps}
    assert {k: [cols[i] for i in v] for k, v in dropped.items() if v} == {
        "FICA": ["PTOTVAL"], "WSALVAL": ["PTOTVAL"], "ERNVAL": ["PTOTVAL"]}


# -- copula -----------------------------------------------------------------------

def _scores(v):
    """Normal scores of a numeric column (mid-ranks)."""
    return ndtri((stats.rankdata(v) - 0.5) / v.size)


def test_copula_lambda_one_independent_lambda_zero_keeps_correlation():
    n = 4000
    X = _mixed(n, missing=False)
    rho = np.corrcoef(_scores(X[:, 0]), _scores(X[:, 1]))[0, 1]
    ind = _gen("copula", X, 1.0)
    assert abs(np.corrcoef(_scores(ind[:, 0]), _scores(ind[:, 1]))[0, 1]) < 4 / np.sqrt(n)
    tab = np.histogram2d(ind[:, 0] > 0, ind[:, 2], bins=[2, 4])[0]
    assert stats.chi2_contingency(tab).pvalue > 1e-3
    kept = _gen("copula", X, 0.0)
    got = np.corrcoef(_scores(kept[:, 0]), _scores(kept[:, 1]))[0, 1]
    assert abs(got - rho) < 4 * (1 - rho ** 2) / np.sqrt(n)
    # every categorical share lies within its binomial interval
    for k in range(4):
        p = np.mean(X[:, 2] == k)
        assert abs(np.mean(kept[:, 2] == k) - p) <= 4 * np.sqrt(p * (1 - p) / n)


def test_copula_category_draws_lie_in_frequency_intervals():
    X = _mixed(1000)
    plan = plan_columns("copula", X, categorical=[2])
    dims = copula_dims(X, plan, COLS, None)
    cat = next(d for d in dims if d.kind == "cat")
    width = cat.high - cat.low
    codes = np.where(np.isnan(X[:, 2]), cat.missing_code, X[:, 2]).astype(int)
    assert np.allclose(width, np.bincount(codes) / X.shape[0])
    assert np.all(np.diff(width[cat.codes]) <= 0)             # decreasing frequency
    Z = copula_scores_block(X, dims, np.random.default_rng(0))
    u = stats.norm.cdf(Z[:, dims.index(cat)])
    assert np.all((u > cat.low[codes]) & (u < cat.high[codes]))


# -- privbayes --------------------------------------------------------------------

def _three_categorical(n, seed=0):
    r = np.random.default_rng(seed)
    a = r.integers(0, 3, n)
    b = (a + (r.random(n) < 0.25)) % 3
    c = (b + a * (r.random(n) < 0.5)) % 4
    return np.column_stack([a, b, c]).astype(float)


def test_privbayes_without_noise_and_full_degree_reproduces_the_joint():
    n = 6000
    X = _three_categorical(n)
    out = REGISTRY["privbayes"](X, np.inf, rng=np.random.default_rng(2),
                                categorical=[0, 1, 2], synth_degree=2)
    cell = lambda Y: (Y[:, 0] * 3 + Y[:, 1]) * 4 + Y[:, 2]         # noqa: E731
    exp = np.bincount(cell(X).astype(int), minlength=36).astype(float)
    obs = np.bincount(cell(out).astype(int), minlength=36)
    assert obs[exp == 0].sum() == 0
    assert stats.chisquare(obs[exp > 0], exp[exp > 0]).pvalue > 1e-3


def test_privbayes_laplace_noise_has_the_stated_scale():
    n, eps = 400, 2.0
    r = np.random.default_rng(0)
    X = np.column_stack([r.integers(0, 2, n), r.integers(0, 2, n)]).astype(float)
    plan = plan_columns("privbayes", X, categorical=[0, 1])
    codes, cards, _ = encode_columns(X, plan, 20)
    scale = laplace_scale(n, 2 - 1, eps)                       # d - k tables, k = 1
    assert scale == pytest.approx(2 * 1 / (n * eps / 2))
    truth = np.bincount(codes[:, 0] * 2 + codes[:, 1], minlength=4) / n
    assert truth.min() > 10 * scale                            # clipping at 0 negligible
    R = 2000
    cells = np.empty((R, 4))
    for s in range(R):
        model = privbayes_fit(codes, cards, plan, eps, 1, Streams(np.random.default_rng(s)))
        T = model.noisy[0]                                     # axes (root, child)
        cells[s] = (T if model.root == 0 else T.T).ravel()
    np.testing.assert_allclose(cells.mean(axis=0), truth, atol=4 * scale * np.sqrt(2 / R))
    np.testing.assert_allclose(cells.var(axis=0), 2 * scale ** 2, rtol=0.2)
    # and no noise at all without a budget limit
    exact = privbayes_fit(codes, cards, plan, np.inf, 1, Streams(np.random.default_rng(0)))
    assert exact.scale == 0.0


def test_privbayes_mixed_columns_and_bins():
    X = _mixed(3000)
    out = _gen("privbayes", X, np.inf, synth_bins=10)
    for j in (0, 1):
        v = out[~np.isnan(out[:, j]), j]
        assert v.min() >= np.nanmin(X[:, j]) and v.max() <= np.nanmax(X[:, j])
    assert abs(np.isnan(out[:, 1]).mean() - np.isnan(X[:, 1]).mean()) < 0.03
    assert np.corrcoef(out[:, 0][~np.isnan(out[:, 1])],
                       out[:, 1][~np.isnan(out[:, 1])])[0, 1] > 0.5


# -- all three --------------------------------------------------------------------

@pytest.mark.parametrize("name", GENERATORS)
def test_partially_synthetic_keeps_the_other_columns_bit_for_bit(name):
    X = _mixed(800, seed=7)
    out = _gen(name, X, synth_columns=["y"])
    assert out[:, [0, 2]].tobytes() == X[:, [0, 2]].tobytes()
    assert not np.array_equal(out[:, 1], X[:, 1], equal_nan=True)
    full = _gen(name, X)
    assert not np.array_equal(full[:, 0], X[:, 0])


@pytest.mark.parametrize("name", GENERATORS)
def test_the_weight_and_household_id_are_never_replaced(name):
    X = _mixed(300, seed=8)
    out = _gen(name, X, keep=[0])                      # e.g. the weight at position 0
    assert out[:, 0].tobytes() == X[:, 0].tobytes()
    assert not np.array_equal(out[:, 1], X[:, 1], equal_nan=True)


@pytest.mark.parametrize("name", GENERATORS)
def test_same_seed_same_bits_and_row_order_irrelevant(name):
    X = _mixed(700, seed=9)              # no two records alike
    a = _gen(name, X, seed=4)
    assert a.tobytes() == _gen(name, X, seed=4).tobytes()
    perm = np.random.default_rng(0).permutation(X.shape[0])
    assert _gen(name, X[perm], seed=4).tobytes() == a[perm].tobytes()
    assert a.tobytes() != _gen(name, X, seed=5).tobytes()


@pytest.mark.parametrize("name, p, opts, match", [
    ("privbayes", 0.0, {}, "'epsilon' parameter of privbayes must be a number > 0"),
    ("privbayes", -1.0, {}, "'epsilon' parameter"),
    ("cart", 0, {}, r"'minbucket' parameter of cart must be an integer in \[1, 10\^9\]"),
    ("copula", 1.5, {}, "'lambda' parameter of copula must be"),
    ("copula", -0.1, {}, "'lambda' parameter of copula must be"),
    ("copula", 0.5, {"synth_columns": ["x", "nope"]}, "Unknown column 'nope'"),
    ("cart", 5, {"synth_columns": ["x", "x"]}, "names column 'x' twice"),
    ("cart", 5, {"synth_order": ["c", "y"]}, "'synth_order' option of cart must name each"),
    ("privbayes", 1.0, {"synth_bins": 5000, "synth_degree": 2},
     "Lower the 'synth_bins' option .* or the 'synth_degree' option"),
])
def test_bad_input_is_refused(name, p, opts, match):
    X = _mixed(200)
    with pytest.raises(SdcInputError, match=match):
        _gen(name, X, p, **opts)


def test_cart_refuses_values_beyond_float32_before_and_during():
    """scikit-learn's trees hold predictors in float32: a numeric column beyond +-3.4e38
    is refused by name, before an audit (check_data) and by the method, with no record
    value in the message (the tree fit crashed with "unexpected failure"); 1e38 is fine."""
    X = _mixed(200, missing=False)
    X[:, 0] = X[:, 0] * 1e299 + 123456.789
    for call in (lambda: _gen("cart", X),
                 lambda: check_data("cart", X, [5], {"categorical": [2], "columns": COLS})):
        with pytest.raises(SdcInputError, match=r"cart cannot use column\(s\) 'x'") as e:
            call()
        assert "123456" not in str(e.value) and "e+299" not in str(e.value)
    X[:, 0] = _mixed(200, missing=False)[:, 0] * 1e38
    assert np.isfinite(_gen("cart", X)[:, :2]).all()


@pytest.mark.parametrize("name", GENERATORS)
def test_a_column_with_one_value_is_refused_before_and_during(name):
    X = _mixed(100)
    X[:, 1] = 4.0
    with pytest.raises(SdcInputError, match=r"column 'y'\): it carries no information"):
        _gen(name, X)
    with pytest.raises(SdcInputError, match="single value"):
        check_data(name, X, [PARAM[name]], {"categorical": [2], "columns": COLS})
    # kept, it is fine: only replaced columns are modelled
    out = _gen(name, X, synth_columns=["x", "c"])
    assert np.array_equal(out[:, 1], X[:, 1])


def test_cli_mask_with_a_generator_and_bad_epsilon(tmp_path):
    X = _mixed(300, seed=11, missing=False)
    src = tmp_path / "in.zarr"
    write_microdata(from_array(X, COLS, categories={"c": ["0", "1", "2", "3"]}), src)
    out = tmp_path / "out.zarr"
    r = CliRunner().invoke(main, ["mask", str(src), "-m", "privbayes", "-p", "inf", "--seed",
                                  "3", "-o", "synth_columns=[x, c]", "--out", str(out)])
    assert r.exit_code == 0, r.output
    md = load_microdata(out)
    want = REGISTRY["privbayes"](X, np.inf, rng=np.random.default_rng(3), categorical=[2],
                                 columns=COLS, synth_columns=["x", "c"])
    assert md.values.tobytes() == want.tobytes()
    # the same file as CSV (categorical column by --categorical): the same bits
    csv = tmp_path / "in.csv"
    write_microdata(from_array(X, COLS, categories={"c": ["0", "1", "2", "3"]}), csv)
    out_csv = tmp_path / "out_csv.zarr"
    r = CliRunner().invoke(main, ["mask", str(csv), "--categorical", "c", "-m", "privbayes",
                                  "-p", "inf", "--seed", "3", "-o", "synth_columns=[x, c]",
                                  "--out", str(out_csv)])
    assert r.exit_code == 0, r.output
    assert load_microdata(out_csv).values.tobytes() == want.tobytes()
    bad = tmp_path / "bad.zarr"
    r = CliRunner().invoke(main, ["mask", str(src), "-m", "privbayes", "-p", "0",
                                  "--out", str(bad)])
    assert r.exit_code == 2 and "epsilon" in r.output
    assert not bad.exists()


@pytest.mark.slow
def test_audit_records_the_privacy_budget_in_the_cube(tmp_path):
    from sdcdist.audit import parse_spec, run_audit
    from sdcdist.cube import open_cube
    spec = parse_spec({
        "name": "gen", "seed": 3,
        "dataset": {"name": "toy", "synthetic": {"rows": 200, "columns": 4, "seed": 1}},
        "methods": [{"name": "privbayes", "params": [1.0, float("inf")],
                     "options": {"synth_bins": 8}},
                    {"name": "copula", "params": [0.5],
                     "options": {"synth_columns": ["WAGES", "BUSINC"]}}],
        "replicates": 1, "metrics": ["IL1s"]})
    out = str(tmp_path / "c.zarr")
    res = run_audit(spec, out)
    cube = open_cube(out)
    assert list(cube["param_name"].values) == ["epsilon", "lambda"]
    assert np.isinf(cube["param"].values).any()
    for p in (1.0, np.inf):
        assert np.isfinite(float(cube.sel(method="privbayes", param=p, metric="IL1s")
                                 ["value"].mean()))
    assert '"params": [1.0, Infinity]' in cube.attrs["spec"]
    assert run_audit(spec, out).computed == 0 and res.computed == 3
