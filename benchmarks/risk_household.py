"""Household (hierarchical) risk and model-based risk: sdcdist against sdcMicro at 100,000
and 1,000,000 records.

    .venv/bin/python benchmarks/risk_household.py [--sizes 100000,1000000] [--timeout 900]

A seeded synthetic file from the household file (sdcdist/data/reference/household.csv):
whole households drawn with replacement, each copy with a household id of its own, so the
household sizes and the members' key values are the survey's. Keys urbrur, roof, walls,
water, sex (household risk) and the model ~ urbrur + roof + walls + water + sex + age
(model-based risk, method "default": 42,240 cells); the weight is household_weights scaled to a population of 1,000 times
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

KEYS = ["urbrur", "roof", "walls", "water", "sex"]
MODEL = ["urbrur", "roof", "walls", "water", "sex", "age"]
CODED = sorted(set(KEYS + MODEL))

R_SCRIPT = r"""
suppressMessages(library(sdcMicro))
args <- commandArgs(trailingOnly = TRUE)
d <- read.csv(args[1])
what <- args[2]
t <- proc.time()[["elapsed"]]
if (what == "household") {
  r <- measure_risk(d, keyVars = c("urbrur", "roof", "walls", "water", "sex"), w = "w",
                    hid = "hid")
  out <- sprintf('{"hier_risk": %.17g, "hier_risk_ER": %.17g}', r$hier_risk, r$hier_risk_ER)
} else {
  vars <- c("urbrur", "roof", "walls", "water", "sex", "age")
  x <- d[, c(vars, "w")]
  for (v in vars) x[[v]] <- factor(x[[v]])
  r <- modRisk(x, method = "default", weights = "w",
               formulaM = ~ urbrur + roof + walls + water + sex + age)
  out <- sprintf('{"gr1": %.17g, "gr2": %.17g}', r$gr1, r$gr2)
}
secs <- proc.time()[["elapsed"]] - t
cat(sub("}$", sprintf(', "seconds": %.6f}', secs), out), "\n")
"""


def synthetic(n: int, seed: int = 20261127) -> pd.DataFrame:
    from sdcdist.data import reference_file
    d = pd.read_csv(reference_file("household"))
    rng = np.random.default_rng(seed)
    groups = [g for _, g in d.groupby("ori_hid", sort=True)]
    parts, total, hid = [], 0, 0
    while total < n:
        for i in rng.integers(0, len(groups), 1000):
            g = groups[i].copy()
            g["hid"] = hid
            hid += 1
            parts.append(g)
            total += len(g)
            if total >= n:
                break
    out = pd.concat(parts, ignore_index=True).iloc[:n]
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
