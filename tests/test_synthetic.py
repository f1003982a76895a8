"""Distances for synthetic releases (DCR against training and holdout, NNDR,
CategoricalCAP): against SDMetrics 0.32.0 on the reference files, against a brute-force
computation on small tie-heavy files with missing values and one-value columns, for any
chunking and worker count, and the refusals."""

from __future__ import annotations

import json
import math
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from sdcdist.errors import SdcInputError
from sdcdist.metrics import measure
from sdcdist.metrics.risk.synthetic import random_like

ROOT = Path(__file__).resolve().parents[1]
#: Figures of SDMetrics 0.32.0 (benchmarks/peers/synthetic_sdmetrics.py, run once in
#: benchmarks/.venv-peers-synth) on the files it wrote (tests/data/synthetic_*.csv).
REFERENCE = json.loads((ROOT / "tests" / "data" / "synthetic_reference.json").read_text())
DCR = ["dcr_train_median", "dcr_holdout_median", "dcr_closer_train", "dcr_overfit",
       "nndr_median"]


def _files(case: str):
    """Training, holdout and released files of a reference case as arrays (categorical
    labels coded alike in the three; read with pandas, as sdcdist refuses missing values
    in numeric columns when it reads a file, and the kernels are tested with them)."""
    ref = REFERENCE[case]
    cols = ref["columns"]

    def read(spec: str) -> pd.DataFrame:
        path, _, rows = spec.partition("[")
        d = pd.read_csv(ROOT / path)[cols]
        if rows:
            a, b = (int(x) if x else None for x in rows.rstrip("]").split(":"))
            d = d.iloc[a:b]
        return d
    frames = [read(ref[k]) for k in ("train", "holdout", "released")]
    for c in ref["categorical"]:
        labels = sorted({str(v) for f in frames for v in f[c].dropna()})
        for f in frames:
            f[c] = f[c].map(lambda v: np.nan if pd.isna(v) else labels.index(str(v)))
    return (ref, *(f.to_numpy(np.float64) for f in frames))


@pytest.mark.parametrize("case", ["household", "ties"])
def test_equals_sdmetrics(case):
    ref, tr, ho, re_ = _files(case)
    kw = dict(categorical=ref["categorical"], keysets=[ref["keys"]],
              confidential=ref["confidential"])
    res = measure(tr, re_, DCR + ["cap"], holdout=ho, columns=ref["columns"], **kw)
    assert res["dcr_train_median"].value == ref["median_dcr_synthetic"]
    assert res["dcr_holdout_median"].value == ref["median_dcr_holdout"]
    assert res["dcr_closer_train"].value == ref["closer_to_training"]
    assert res["dcr_overfit"].value == ref["dcr_overfit"]
    assert res["cap"].value == pytest.approx(ref["cap"], rel=1e-13)
    # the random baseline, drawn as SDMetrics draws it from the same generators
    cat = [c in ref["categorical"] for c in ref["columns"]]
    R = random_like(tr, re_.shape[0], cat, rng=np.random.default_rng(
        REFERENCE["baseline_seed"]), rng_missing=np.random.Generator(
        np.random.MT19937(REFERENCE["missing_seed"])), code_order="first")
    rnd = measure(tr, R, ["dcr_train_median"], columns=ref["columns"],
                  categorical=ref["categorical"])
    assert rnd["dcr_train_median"].value == ref["median_dcr_random"]
    base = min(ref["median_dcr_synthetic"] / rnd["dcr_train_median"].value, 1.0)
    assert base == ref["dcr_baseline"]


def test_per_record_distances_equal_sdmetrics():
    """Every released record's DCR to the training and to the holdout file, bit for bit."""
    from sdcdist.metrics import Inputs
    from sdcdist.metrics._registry import MeasureContext
    from sdcdist.metrics.risk.synthetic import _nearest
    from sdcdist.parallel import Runner
    ref, tr, ho, re_ = _files("ties")
    ctx = MeasureContext(Runner(None), tr, re_, inputs=Inputs(
        shape_original=tr.shape, shape_masked=re_.shape, columns=ref["columns"],
        categorical=ref["categorical"]), holdout=ho, shape_holdout=ho.shape)
    np.testing.assert_array_equal(_nearest(ctx, "x", "train")["d1"], ref["dcr_train"])
    np.testing.assert_array_equal(_nearest(ctx, "x", "holdout")["d1"], ref["dcr_holdout"])


# -- brute force -------------------------------------------------------------------------

def brute_distance(x, y, numeric, span) -> float:
    """SDMetrics' distance of two records, term by term in plain Python."""
    total = 0.0
    for a, b, num, r in zip(x, y, numeric, span):
        if math.isnan(a) and math.isnan(b):
            t = 0.0
        elif math.isnan(a) or math.isnan(b):
            t = 1.0
        elif not num:
            t = float(a != b)
        elif r == 0:
            t = float(abs(b - a) > 0)
        else:
            t = min(abs(b - a) / r, 1.0)
        total += t
    return total / len(x)


def brute(released, reference, numeric):
    with np.errstate(all="ignore"):
        span = np.nanmax(reference, axis=0) - np.nanmin(reference, axis=0)
    d1, d2 = [], []
    for x in released:
        d = sorted(brute_distance(x, y, numeric, span) for y in reference)
        d1.append(d[0])
        d2.append(d[1] if len(d) > 1 else math.inf)
    return np.array(d1), np.array(d2)


def tie_file(rng, n, lo, hi):
    X = np.column_stack([
        rng.integers(lo, hi, n).astype(float),      # numeric, few values
        np.full(n, 3.0),                            # numeric, one value
        rng.integers(0, 3, n).astype(float),        # categorical, three codes
        np.zeros(n),                                # categorical, one code
        rng.integers(0, 4, n) / 4.0])               # numeric
    for j in (0, 2, 4):
        X[rng.random(n) < 0.15, j] = np.nan
    return X


COLS = ["a", "b", "c", "d", "e"]
CATS = ["c", "d"]
NUMERIC = [c not in CATS for c in COLS]


@pytest.mark.parametrize("seed", range(4))
def test_against_brute_force(seed):
    rng = np.random.default_rng(seed)
    T, H, S = tie_file(rng, 37, 0, 3), tie_file(rng, 23, 1, 4), tie_file(rng, 29, -1, 5)
    S[rng.random(29) < 0.2, 1] = 4.0                # the one-value column differs
    S[rng.random(29) < 0.1, 3] = 1.0                # a code the training file lacks
    S[:4] = T[:4]                                   # copies of training records
    bt1, bt2 = brute(S, T, NUMERIC)
    bh1, _ = brute(S, H, NUMERIC)
    kw = dict(columns=COLS, categorical=CATS, holdout=H, keysets=[["c", "d"]],
              confidential=["a"])
    names = DCR + ["cap"]
    want = {"dcr_train_median": np.median(bt1), "dcr_holdout_median": np.median(bh1),
            "dcr_closer_train": float(np.sum(bt1 < bh1)) / 29,
            "nndr_median": np.median(np.where(bt2 == 0, 1.0, bt1 / np.where(bt2 == 0, 1, bt2)))}
    want["dcr_overfit"] = min(2 * (1 - want["dcr_closer_train"]), 1.0)
    want["cap"] = brute_cap(T, S, [2, 3], [0])
    for br in (None, [1, 1], [5, 3], [29, 37], [7, 100]):
        res = measure(T, S, names, options={"block_rows": br, "chunk_rows": 5}, **kw)
        for n in names:
            assert res[n].value == pytest.approx(want[n], rel=1e-14, abs=0), (n, br)
            if br is not None:
                assert res[n].value == first[n], (n, br)
        if br is None:
            first = {n: res[n].value for n in names}


def brute_cap(T, S, keys, conf):
    def tup(r, cols):
        return tuple("NA" if math.isnan(r[j]) else r[j] for j in cols)
    score, count = 0.0, 0
    for r in T:
        same = [s for s in S if tup(s, keys) == tup(r, keys)]
        if same:
            count += 1
            score += sum(tup(s, conf) == tup(r, conf) for s in same) / len(same)
    return 1 - score / count if count else math.nan


@pytest.mark.slow
def test_bit_for_bit_with_two_workers(client):
    rng = np.random.default_rng(5)
    T, H, S = tie_file(rng, 300, 0, 6), tie_file(rng, 200, 0, 6), tie_file(rng, 250, -1, 7)
    kw = dict(columns=COLS, categorical=CATS, holdout=H, keysets=[["c", "d"]],
              confidential=["a"], seed=3)
    names = DCR + ["cap", "dcr_baseline"]
    a = measure(T, S, names, **kw)
    b = measure(T, S, names, options={"block_rows": [17, 41], "chunk_rows": 13},
                client=client, **kw)
    c = measure(T, S, names, options={"block_rows": [250, 300]}, client=client, **kw)
    for n in names:
        assert a[n].value == b[n].value == c[n].value, n
    assert not math.isnan(a["dcr_baseline"].value)


# -- the random baseline -----------------------------------------------------------------

def test_random_like_draws_each_column_as_described():
    rng = np.random.default_rng(0)
    X = np.column_stack([rng.integers(2, 9, 500).astype(float), rng.random(500) * 10,
                         rng.choice([4.0, 1.0, 7.0], 500)])
    X[:50, 1] = np.nan
    R = random_like(X, 2000, [False, False, True], rng=np.random.default_rng(1),
                    rng_missing=np.random.default_rng(2))
    assert set(np.unique(R[:, 0])) <= set(range(2, 9)) and R[:, 0].min() == 2
    assert np.isnan(R[:, 1]).mean() == pytest.approx(0.1, abs=0.03)
    assert set(np.unique(R[:, 2])) == {1.0, 4.0, 7.0}
    assert not np.isnan(R[:, [0, 2]]).any()


def test_random_like_takes_whole_numbers_beyond_2_53_for_reals():
    """Beyond 2^53 every float64 is a whole number: such a column (here beyond int64 too)
    is drawn as reals on [min, max), where integer draws could not even be asked for;
    within +-2^53 whole numbers are drawn as integers, up to the bound itself."""
    big = np.array([[1e19], [3e19], [-2e19], [5e19]])
    R = random_like(big, 1000, [False], rng=np.random.default_rng(1),
                    rng_missing=np.random.default_rng(2))
    assert R.min() >= -2e19 and R.max() < 5e19 and np.unique(R).size == 1000
    edge = np.array([[-2.0 ** 53], [2.0 ** 53]])
    R = random_like(edge, 1000, [False], rng=np.random.default_rng(1),
                    rng_missing=np.random.default_rng(2))
    assert np.all(R == np.floor(R)) and R.min() >= -2.0 ** 53 and R.max() <= 2.0 ** 53


def test_dcr_baseline_on_whole_numbers_beyond_int64():
    """A whole-number column whose values exceed int64 (20-digit numbers read as
    numbers) gets a baseline figure, not a crash of the integer draw."""
    rng = np.random.default_rng(3)
    X = np.column_stack([rng.normal(size=300), np.floor(rng.random(300) * 9e19) + 1e19])
    Y = X + np.column_stack([rng.normal(size=300), np.zeros(300)])
    r = measure(X, Y, ["dcr_baseline"])["dcr_baseline"]
    assert 0.0 <= r.value <= 1.0


@pytest.mark.parametrize("name", ["dcr_train_median", "nndr_median", "dcr_baseline"])
def test_distance_metrics_refuse_a_range_beyond_float64(name):
    """A numeric column whose range (max - min, the distance's scale) is not a finite
    float64 is refused by name before any distance is computed (it crashed the KD-tree),
    and the message holds no record value."""
    X = np.column_stack([np.arange(8.0), [1.5e308, -1.5e308, 0.0, 1.0, 2.0, 3.0, 4.0,
                                          123456.789]])
    with pytest.raises(SdcInputError, match=r"\['c'\] of the training file hold values so "
                       "large") as e:
        measure(X, X, [name], columns=["a", "c"])
    assert "123456" not in str(e.value) and "e+308" not in str(e.value)


# -- refusals ----------------------------------------------------------------------------

def test_holdout_metrics_need_a_holdout():
    X = np.arange(12.0).reshape(6, 2)
    with pytest.raises(SdcInputError, match="holdout"):
        measure(X, X, ["dcr_overfit"])


def test_holdout_with_other_columns_is_refused():
    X = np.arange(12.0).reshape(6, 2)
    with pytest.raises(SdcInputError, match="holdout file has 3 columns"):
        measure(X, X, ["dcr_overfit"], holdout=np.zeros((4, 3)))


def test_cap_refuses_a_confidential_key():
    X = np.zeros((6, 2))
    with pytest.raises(SdcInputError, match="both confidential and key"):
        measure(X, X, ["cap"], columns=["k", "s"], categorical=["k", "s"],
                keysets=[["k", "s"]], confidential=["s"])


def test_messages_hold_no_record_value():
    X = np.full((5, 2), 123456.789)
    with pytest.raises(SdcInputError) as e:
        measure(X, X, ["dcr_holdout_median"])
    assert "123456" not in str(e.value)


# -- a holdout in a spec and on the command line ---------------------------------------

def _household_split(tmp_path):
    d = pd.read_csv(ROOT / "sdcdist" / "data" / "reference" / "household.csv")
    d = d[["urbrur", "water", "sex", "roof", "age", "income"]]
    d.iloc[:600].to_csv(tmp_path / "train.csv", index=False)
    d.iloc[600:1200].to_csv(tmp_path / "hold.csv", index=False)
    return d


@pytest.mark.slow
def test_audit_reads_the_holdout_of_the_spec(tmp_path):
    from sdcdist.audit import parse_spec, run_audit
    from sdcdist.cube import open_cube
    _household_split(tmp_path)
    spec = {"name": "syn", "seed": 1,
            "dataset": {"name": "hh", "path": "train.csv", "holdout": "hold.csv",
                        "categorical": ["urbrur", "water", "sex", "roof"],
                        "roles": {"key": ["urbrur", "water", "sex"],
                                  "confidential": ["roof"]}},
            "methods": [{"name": "noise", "params": [0.01]}],
            "metrics": ["dcr_overfit", "dcr_closer_train", "dcr_train_median", "cap"]}
    out = tmp_path / "c.zarr"
    run_audit(parse_spec(spec, base_dir=tmp_path), out)
    cube = open_cube(out)
    assert "SDMetrics 0.32.0" in json.loads(cube.attrs["conventions"])["synthetic_distances"]
    assert "holdout" in json.loads(cube.attrs["datasets"])[0]
    v = cube["value"].isel(method=0, param=0, replicate=0)
    vals = {str(m): float(x) for m, x in zip(cube["metric"].values, v.values)}
    # a lightly noised release lies closer to its training records than to the holdout
    assert vals["dcr_closer_train"] > 0.9 and vals["dcr_overfit"] < 0.2
    assert 0 < vals["dcr_train_median"] < 0.05 and 0 <= vals["cap"] <= 1


def test_spec_refuses_holdout_metrics_without_a_holdout():
    from sdcdist.audit import parse_spec
    spec = {"dataset": {"reference": "household"}, "methods": [{"name": "noise",
                                                               "params": [0.1]}],
            "metrics": ["dcr_overfit"]}
    with pytest.raises(SdcInputError, match="holdout"):
        parse_spec(spec)
    spec["dataset"]["holdout"] = "h.csv"
    with pytest.raises(SdcInputError, match="no 'path'"):
        parse_spec(spec)


@pytest.mark.slow
def test_cli_risk_with_a_holdout(tmp_path, run):
    d = _household_split(tmp_path)
    d.iloc[:600].sample(frac=1.0, random_state=1).to_csv(tmp_path / "rel.csv", index=False)
    args = [tmp_path / "train.csv", tmp_path / "rel.csv", "--categorical",
            "urbrur,water,sex,roof", "--json"]
    res = run("risk", *args, "--holdout", tmp_path / "hold.csv", "--metric",
              "dcr_overfit,dcr_closer_train,dcr_train_median,nndr_median")
    assert res.exit_code == 0, res.output
    m = json.loads(res.output[res.output.index("{"):])["metrics"]
    assert m["dcr_train_median"]["value"] == 0.0          # every record copies one
    assert m["dcr_closer_train"]["value"] > 0.9
    res = run("risk", *args, "--metric", "dcr_overfit")
    assert res.exit_code == 2 and "--holdout" in res.output
    res = run("risk", *args, "--metric", "dcr_train_median")   # no holdout needed
    assert res.exit_code == 0, res.output
