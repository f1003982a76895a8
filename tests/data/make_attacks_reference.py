"""Writes tests/data/attacks_{original,released,control}.csv and the figures anonymeter 1.1.0
gives on them (tests/data/attacks_reference.json), read by tests/test_attacks.py.

Run once, in the benchmark environment that has anonymeter (never sdcdist's dependency):

    benchmarks/.venv-peers-synth/bin/python tests/data/make_attacks_reference.py

The tests do not run it. The files are synthetic: a mixed file of 1,200 records (ages,
incomes, hours, sex, region), split into 800 records that are masked (noise on the
numbers, 10% of the regions swapped) and 400 held out as the control set.
"""

from __future__ import annotations

import json
import warnings
from pathlib import Path

import numpy as np
import pandas as pd

HERE = Path(__file__).resolve().parent
N_ATTACKS = 300


def files() -> tuple[pd.DataFrame, pd.DataFrame, pd.DataFrame]:
    rng = np.random.default_rng(20261127)
    n = 1200
    region = rng.choice(["north", "south", "east", "west", "centre"], n, p=[.3, .25, .2, .15, .1])
    sex = rng.choice(["f", "m"], n)
    age = rng.integers(18, 90, n).astype(float)
    hours = np.clip(np.round(rng.normal(38, 8, n)), 0, 80)
    income = np.round(np.exp(rng.normal(10, 0.6, n)) * (1 + (age - 18) / 100), 0)
    d = pd.DataFrame({"age": age, "income": income, "hours": hours, "sex": sex,
                      "region": region})
    ori, control = d.iloc[:800].reset_index(drop=True), d.iloc[800:].reset_index(drop=True)
    syn = ori.copy()
    syn["age"] = syn["age"] + rng.integers(-2, 3, len(syn))
    syn["income"] = np.round(syn["income"] * rng.normal(1, 0.05, len(syn)), 0)
    syn["hours"] = syn["hours"] + rng.integers(-1, 2, len(syn))
    swap = rng.random(len(syn)) < 0.1
    syn.loc[swap, "region"] = rng.permutation(syn.loc[swap, "region"].to_numpy())
    return ori, syn, control


def figures(ev, **kw) -> dict:
    r = ev.risk(**kw)
    b = ev.risk(baseline=True)
    res = ev.results()
    return {"risk": r.value, "ci": list(r.ci), "baseline": b.value, "baseline_ci": list(b.ci),
            "main_rate": res.attack_rate.value, "control_rate": res.control_rate.value}


def main() -> None:
    import anonymeter
    from importlib.metadata import version
    from anonymeter.evaluators import (InferenceEvaluator, LinkabilityEvaluator,
                                       SinglingOutEvaluator)
    ori, syn, control = files()
    for name, d in (("original", ori), ("released", syn), ("control", control)):
        d.to_csv(HERE / f"attacks_{name}.csv", index=False)
    warnings.simplefilter("ignore")
    out = {"tool": f"anonymeter {version('anonymeter')}", "n_attacks": N_ATTACKS}
    ev = SinglingOutEvaluator(ori, syn, n_attacks=N_ATTACKS, control=control, seed=1)
    out["so_uni"] = figures(ev.evaluate(mode="univariate"))
    ev = SinglingOutEvaluator(ori, syn, n_attacks=N_ATTACKS, n_cols=3, control=control, seed=2)
    out["so_multi"] = figures(ev.evaluate(mode="multivariate"))
    aux = (["age", "sex", "region"], ["income", "hours"])
    ev = LinkabilityEvaluator(ori, syn, aux_cols=aux, n_attacks=N_ATTACKS, n_neighbors=5,
                              control=control)
    out["linkability"] = figures(ev.evaluate(n_jobs=1))
    out["linkability"]["aux"] = [list(a) for a in aux]
    out["linkability"]["neighbors"] = 5
    for secret, regression in (("region", False), ("income", True)):
        aux_i = [c for c in ori.columns if c != secret]
        ev = InferenceEvaluator(ori, syn, aux_cols=aux_i, secret=secret, regression=regression,
                                n_attacks=N_ATTACKS, control=control)
        out[f"inference_{secret}"] = figures(ev.evaluate(n_jobs=1))
    (HERE / "attacks_reference.json").write_text(json.dumps(out, indent=1) + "\n")
    print(json.dumps(out, indent=1))
    _ = anonymeter


if __name__ == "__main__":
    main()
