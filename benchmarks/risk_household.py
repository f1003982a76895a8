"""Household (hierarchical) risk and model-based risk: sdcdist against sdcMicro at 100,000
and 1,000,000 records.

    .venv/bin/python benchmarks/risk_household.py [--sizes 100000,1000000] [--timeout 900]

A seeded synthetic file from the household file (sdcdist/data/reference/household.csv):
whole households drawn with replacement, each copy with a household id of its own and its
members' ages moved by a random -3..3 years (so that copies differ), so the household sizes
and the other key values are the survey's. Keys urbrur, roof, water,
sex, age, relat (household risk) and the model ~ urbrur + roof + water + sex + age + relat
(model-based risk, main effects, method "default": about 137,000 cells); the weight is household_weights scaled to a population of 1,000 times
the file (sdcMicro's modRisk needs sum(1/w) < 1 in its large cells, else its sum turns
NaN). sdcdist computes HR_mean, HR_ER, HR_max (with the individual risks) and the four
modrisk_* figures in this process from an in-memory array; sdcMicro 5.8.1 (system R)
runs measure_risk(..., hid = "hid") and modRisk(...) on the same CSV, under
/usr/bin/time -v. Wall times are of the computation alone (reading the CSV and loading
the package are left out on both sides); peak memory: sdcdist's Python allocations
(tracemalloc), sdcMicro's process (maximum resident set, so it includes R and the data).
A run that does not finish within --timeout seconds is reported as such.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import subprocess
import sys
import tempfile
import time
import tracemalloc

import numpy as np
import pandas as pd

KEYS = ["urbrur", "roof", "water", "sex", "age", "relat"]
MODEL = KEYS
CODED = sorted(set(KEYS + MODEL))

R_SCRIPT = r"""
suppressMessages(library(sdcMicro))
args <- commandArgs(trailingOnly = TRUE)
d <- read.csv(args[1])
what <- args[2]
t <- proc.time()[["elapsed"]]
if (what == "household") {
  r <- measure_risk(d, keyVars = c("urbrur", "roof", "water", "sex", "age", "relat"),
                    w = "w", hid = "hid")
  out <- sprintf('{"hier_risk": %.17g, "hier_risk_ER": %.17g}', r$hier_risk, r$hier_risk_ER)
} else {
  vars <- c("urbrur", "roof", "water", "sex", "age", "relat")
  x <- d[, c(vars, "w")]
  for (v in vars) x[[v]] <- factor(x[[v]])
  r <- modRisk(x, method = "default", weights = "w",
               formulaM = ~ urbrur + roof + water + sex + age + relat)
  out <- sprintf('{"gr1": %.17g, "gr2": %.17g}', r$gr1, r$gr2)
}
secs <- proc.time()[["elapsed"]] - t
cat(sub("}$", sprintf(', "seconds": %.6f}', secs), out), "\n")
"""


def synthetic(n: int, seed: int = 20261127) -> pd.DataFrame:
    from sdcdist.data import reference_file
    d = pd.read_csv(reference_file("household")).sort_values("ori_hid", kind="stable")
    rng = np.random.default_rng(seed)
    hid = d["ori_hid"].to_numpy()
    starts = np.flatnonzero(np.r_[True, hid[1:] != hid[:-1]])
    sizes = np.diff(np.r_[starts, len(d)])
    # whole households drawn with replacement until n records
    draws = rng.integers(0, starts.size, 2 * n // int(sizes.mean()) + 10)
    cum = np.cumsum(sizes[draws])
    draws = draws[:int(np.searchsorted(cum, n)) + 1]
    rows = np.concatenate([np.arange(starts[i], starts[i] + sizes[i]) for i in draws])[:n]
    out = d.iloc[rows].reset_index(drop=True)
    out["hid"] = np.repeat(np.arange(draws.size), sizes[draws])[:n]
    # each copy's members' ages moved by up to 3 years, so that copies differ in their keys
    out["age"] = np.clip(out["age"].to_numpy() + rng.integers(-3, 4, n), 0, None)
    out["w"] = out["household_weights"] * 1000 * (n / len(d))
    return out[CODED + ["hid", "w"]]


def run_sdcdist(d: pd.DataFrame) -> dict[str, tuple[dict, float, float]]:
    from sdcdist.data import Microdata
    from sdcdist.metrics import measure
    X = d.to_numpy(np.float64).copy()
    cols = list(d.columns)
    cats = {}
    for k in CODED:
        j = cols.index(k)
        lv = np.unique(X[:, j])
        X[:, j] = np.searchsorted(lv, X[:, j])
        cats[k] = [str(int(v)) for v in lv]
    md = Microdata(X, tuple(cols), {"household": ["hid"], "weight": ["w"]}, None, cats)
    out = {}
    for what, names, kw in (
            ("household", ["HR_mean", "HR_ER", "HR_max"], {"keysets": [KEYS]}),
            ("model", ["modrisk_gr1", "modrisk_gr2", "modrisk_tau1", "modrisk_tau2"],
             {"options": {"modrisk_formula": "~ " + " + ".join(MODEL)}})):
        tracemalloc.start()
        t = time.perf_counter()
        res = measure(md, md, names, **kw)
        secs = time.perf_counter() - t
        peak = tracemalloc.get_traced_memory()[1] / 2**20
        tracemalloc.stop()
        out[what] = ({k: r.value for k, r in res.items()}, secs, peak)
    return out


def run_sdcmicro(path: str, what: str, timeout: float) -> dict | None:
    with tempfile.NamedTemporaryFile("w", suffix=".R", delete=False) as f:
        f.write(R_SCRIPT)
        script = f.name
    try:
        p = subprocess.run(["/usr/bin/time", "-v", "Rscript", script, path, what],
                           capture_output=True, text=True, timeout=timeout)
    except subprocess.TimeoutExpired:
        return None
    finally:
        os.unlink(script)
    if p.returncode != 0:
        return {"error": (p.stderr.strip().splitlines() or ["failed"])[0]}
    line = [s for s in p.stdout.splitlines() if s.strip().startswith("{")][-1]
    out = json.loads(line)
    m = re.search(r"Maximum resident set size \(kbytes\): (\d+)", p.stderr)
    out["peak_mb"] = int(m.group(1)) / 1024 if m else float("nan")
    return out


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--sizes", default="100000,1000000")
    ap.add_argument("--timeout", type=float, default=900.0)
    a = ap.parse_args()
    rows = []
    for n in [int(s) for s in a.sizes.split(",")]:
        d = synthetic(n)
        ours = run_sdcdist(d)
        with tempfile.TemporaryDirectory() as tmp:
            path = os.path.join(tmp, "household.csv")
            d.to_csv(path, index=False)
            for what, pairs in (("household", [("HR_mean", "hier_risk"),
                                               ("HR_ER", "hier_risk_ER")]),
                                ("model", [("modrisk_gr1", "gr1"), ("modrisk_gr2", "gr2")])):
                vals, secs, peak = ours[what]
                theirs = run_sdcmicro(path, what, a.timeout)
                print(f"\n== {what}, {n:,} records ({d['hid'].nunique():,} households)")
                for k, rk in pairs:
                    tv = "-" if not theirs or "error" in theirs else f"{theirs[rk]:.15g}"
                    print(f"{k:14s} sdcdist {vals[k]:.15g}  sdcMicro {tv}")
                if theirs is None:
                    tt, tpeak, ratio = f"did not finish in {a.timeout / 60:g} min", "-", "-"
                elif "error" in theirs:
                    tt, tpeak, ratio = theirs["error"], "-", "-"
                else:
                    tt, tpeak = f"{theirs['seconds']:.2f}", f"{theirs['peak_mb']:.0f}"
                    ratio = f"{theirs['seconds'] / secs:.1f}x"
                rows.append((what, f"{n:,}", f"{secs:.2f}", f"{peak:.0f}", tt, tpeak, ratio))
    print("\n| measure | records | sdcdist s | sdcdist peak MiB | sdcMicro s | sdcMicro peak MiB "
          "| sdcMicro / sdcdist |")
    print("|---|---|---|---|---|---|---|")
    for r in rows:
        print("| " + " | ".join(str(x) for x in r) + " |")


if __name__ == "__main__":
    sys.exit(main())
