"""SDMetrics' DCR and CategoricalCAP figures on the reference files (run once, in
benchmarks/.venv-peers-synth; the tests never run it).

    benchmarks/.venv-peers-synth/bin/python benchmarks/peers/synthetic_sdmetrics.py \
        > tests/data/synthetic_reference.json

Writes the cases' released files first (tests/data/synthetic_*.csv, from a fixed seed),
then prints {case: figures} as JSON with the tool's name and version. The cases:

- ``household``: sdcMicro's household file, records 0..2289 the training file and the
  rest the holdout; the released file is 600 training records copied and 900 records
  drawn column by column from the training file (a marginal synthesizer).
- ``ties``: small files of few values (many ties) with missing values, a numeric and a
  categorical column of one value, and released values outside the training range.

How the files are given to SDMetrics: categorical columns as text (sdtype categorical),
numeric ones as numbers (sdtype numerical), whole-number numeric columns without a
missing value as integers (sdcdist reads every number as float64 and draws the random
baseline of such a column as integers, as SDMetrics does for an integer column). For
CategoricalCAP a missing value is passed as None, which SDMetrics compares equal to
itself: a missing value is a value of its own, as sdcdist counts it. The random baseline
of DCRBaselineProtection draws its values with numpy.random.default_rng(BASELINE_SEED)
and which are missing with the global numpy generator, set to the state of
numpy.random.MT19937(MISSING_SEED).
"""

import json
import sys
import warnings
from pathlib import Path

import numpy as np
import pandas as pd
import sdmetrics
from sdmetrics.single_table import (CategoricalCAP, DCRBaselineProtection,
                                    DCROverfittingProtection)
from sdmetrics.single_table.privacy.dcr_utils import calculate_dcr

ROOT = Path(__file__).resolve().parents[2]
DATA = ROOT / "tests" / "data"
BASELINE_SEED = 11
MISSING_SEED = 12


def household_case():
    d = pd.read_csv(ROOT / "sdcdist" / "data" / "reference" / "household.csv")
    cats = ["urbrur", "roof", "walls", "water", "sex", "relat"]
    nums = ["age", "expend", "income", "savings"]
    d = d[cats + nums]
    train, hold = d.iloc[:2290].reset_index(drop=True), d.iloc[2290:].reset_index(drop=True)
    rng = np.random.default_rng(20261127)
    copied = train.iloc[rng.choice(len(train), 600, replace=False)]
    drawn = pd.DataFrame({c: train[c].to_numpy()[rng.integers(0, len(train), 900)]
                          for c in train.columns})
    rel = pd.concat([copied, drawn], ignore_index=True)
    rel.to_csv(DATA / "synthetic_household_released.csv", index=False)
    return {"train": "sdcdist/data/reference/household.csv[0:2290]",
            "holdout": "sdcdist/data/reference/household.csv[2290:]",
            "released": "tests/data/synthetic_household_released.csv",
            "categorical": cats, "numeric": nums, "keys": ["urbrur", "water", "sex"],
            "confidential": ["roof"]}, train, hold, rel


def ties_case():
    rng = np.random.default_rng(7)

    def make(n, lo, hi):
        f = pd.DataFrame({
            "a": rng.integers(lo, hi, n).astype(float),
            "b": np.full(n, 5.0),
            "e": rng.integers(0, 5, n) / 2.0,
            "c": rng.choice(["x", "y", "z"], n),
            "d": np.full(n, "only"),
            "s": rng.choice(["p", "q"], n)})
        for col, share in (("a", 0.15), ("e", 0.1), ("c", 0.15), ("s", 0.1)):
            f.loc[rng.random(n) < share, col] = np.nan
        return f
    train, hold, rel = make(60, 0, 4), make(50, 1, 4), make(40, -1, 6)
    rel.loc[rng.random(40) < 0.1, "b"] = np.nan
    rel.loc[rng.random(40) < 0.2, "b"] = 6.0
    rel.loc[rng.random(40) < 0.1, "d"] = np.nan
    for name, f in (("train", train), ("holdout", hold), ("released", rel)):
        f.to_csv(DATA / f"synthetic_ties_{name}.csv", index=False)
    return {"train": "tests/data/synthetic_ties_train.csv",
            "holdout": "tests/data/synthetic_ties_holdout.csv",
            "released": "tests/data/synthetic_ties_released.csv",
            "categorical": ["c", "d", "s"], "numeric": ["a", "b", "e"], "keys": ["c", "d"],
            "confidential": ["s"]}, train, hold, rel


def as_sdmetrics(f, case):
    f = f.copy()
    for c in case["numeric"]:
        x = f[c]
        if not x.isna().any() and (x == np.floor(x)).all():
            f[c] = x.astype(np.int64)
    for c in case["categorical"]:
        f[c] = f[c].map(lambda v: v if isinstance(v, str) else (np.nan if pd.isna(v)
                                                                  else f"c{int(v)}"))
    return f


def figures(case, train, hold, rel):
    cols = case["categorical"] + case["numeric"]
    meta = {"columns": {**{c: {"sdtype": "categorical"} for c in case["categorical"]},
                        **{c: {"sdtype": "numerical"} for c in case["numeric"]}}}
    tr, ho, re = (as_sdmetrics(f[cols], case) for f in (train, hold, rel))
    of = DCROverfittingProtection.compute_breakdown(tr, re, ho, meta, None)
    DCRBaselineProtection._seed = BASELINE_SEED
    np.random.set_state(("MT19937", *np.random.MT19937(MISSING_SEED).state["state"].values()))
    bl = DCRBaselineProtection.compute_breakdown(tr, re, meta, None)
    d_tr = calculate_dcr(re, tr, meta)
    d_ho = calculate_dcr(re, ho, meta)
    none = {c: (lambda v: None if pd.isna(v) else v) for c in cols}
    tr_n, re_n = tr.astype(object).apply(lambda s: s.map(none[s.name])), \
        re.astype(object).apply(lambda s: s.map(none[s.name]))
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", DeprecationWarning)
        cap = CategoricalCAP.compute(tr_n, re_n, meta, key_fields=case["keys"],
                                     sensitive_fields=case["confidential"])
    return {**case, "columns": cols,
            "dcr_overfit": of["score"],
            "closer_to_training": of["synthetic_data_percentages"]["closer_to_training"],
            "dcr_baseline": bl["score"],
            "median_dcr_synthetic": bl["median_DCR_to_real_data"]["synthetic_data"],
            "median_dcr_random": bl["median_DCR_to_real_data"]["random_data_baseline"],
            "median_dcr_holdout": float(d_ho.median()),
            "dcr_train": [float(v) for v in d_tr], "dcr_holdout": [float(v) for v in d_ho],
            "cap": cap}


out = {"tool": f"SDMetrics {sdmetrics.__version__}", "how": (
    "benchmarks/.venv-peers-synth/bin/python benchmarks/peers/synthetic_sdmetrics.py "
    "(writes tests/data/synthetic_*.csv, prints this)"),
    "baseline_seed": BASELINE_SEED, "missing_seed": MISSING_SEED}
for make in (household_case, ties_case):
    case, train, hold, rel = make()
    name = make.__name__[:-5]
    print(f"{name} ...", file=sys.stderr)
    out[name] = figures(case, train, hold, rel)
print(json.dumps(out, indent=1))
