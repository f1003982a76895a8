"""Fit + synthesis time of the generators cart, copula and privbayes on a mixed file.

Run: ``python benchmarks/generators.py [--rows 100000 1000000] [--only copula cart]``

The file: sdcdist's synthetic generator (13 columns) made mixed, 8 numeric columns and 5
categorical ones (age band 9 levels, hours band 6, charity given 2, property-tax quintile
5, state-tax decile 10), 5 % missing values in INTINC and in the hours band. Each
generator runs once per size on the whole array in one process (the masking interface),
with its defaults: cart minbucket 5, copula lambda 0, privbayes epsilon 1 (k = 2, 20 bins).
As a baseline of the machine's speed in the same run: ``noise`` (p = 0.1) on the same file.

The machine is shared: wall times are noisy; the load average is printed with each size,
and the process's CPU time beside the wall time (the generators run on one core: on an
idle machine the wall time is about the CPU time).

One run on the shared 2-core machine (load average 13-17), wall / CPU seconds:

=========  ===================  ====================
generator  100,000 x 13         1,000,000 x 13
=========  ===================  ====================
noise      0.16 / 0.04          2.45 / 0.67
copula     2.34 / 0.52          24.4 / 6.8
privbayes  4.28 / 0.91          49.0 / 12.9
cart       64.2 / 11.2          604 / 147
=========  ===================  ====================
"""

from __future__ import annotations

import argparse
import os
import time

import numpy as np

from sdcdist.data.synth import generate
from sdcdist.masking import REGISTRY

COLUMNS = ["WAGES", "BUSINC", "INTINC", "DIVINC", "PENSION", "TAXINC", "FEDTAX", "FICA",
           "AGEBAND", "HOURSBAND", "CHARITY", "PROPTAX5", "STATETAX10"]
CATEGORICAL = list(range(8, 13))
PARAMS = {"cart": 5, "copula": 0.0, "privbayes": 1.0}


def mixed_file(n: int, seed: int = 0) -> np.ndarray:
    md = generate(n, columns=13, seed=seed)
    V = md.values
    col = {c: V[:, i] for i, c in enumerate(md.columns)}
    rng = np.random.default_rng(seed + 1)

    def quantile_codes(x, q):
        edges = np.quantile(x, np.linspace(0, 1, q + 1)[1:-1])
        return np.searchsorted(edges, x, side="right").astype(np.float64)

    out = np.column_stack([
        *(col[c] for c in COLUMNS[:8]),
        np.clip((col["AGE"] - 16) // 10, 0, 8),
        np.clip(col["HOURS"] // 20, 0, 5),
        (col["CHARITY"] > 0).astype(np.float64),
        quantile_codes(col["PROPTAX"] + rng.random(n), 5),
        quantile_codes(col["STATETAX"] + rng.random(n), 10),
    ])
    out[rng.random(n) < 0.05, 2] = np.nan
    out[rng.random(n) < 0.05, 9] = np.nan
    return out


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--rows", type=int, nargs="+", default=[100_000, 1_000_000])
    ap.add_argument("--only", nargs="+", default=["noise", "copula", "privbayes", "cart"])
    args = ap.parse_args()
    for n in args.rows:
        X = mixed_file(n)
        print(f"{n:,} records x {X.shape[1]} columns (8 numeric, 5 categorical); load "
              f"average {os.getloadavg()[0]:.1f} on {os.cpu_count()} cores", flush=True)
        for name in args.only:
            t, c = time.perf_counter(), time.process_time()
            if name == "noise":
                REGISTRY["noise"](X, 0.1, rng=np.random.default_rng(0), categorical=CATEGORICAL)
            else:
                REGISTRY[name](X, PARAMS[name], rng=np.random.default_rng(0),
                               categorical=CATEGORICAL, columns=COLUMNS)
            print(f"  {name:10s} {time.perf_counter() - t:8.2f} s wall, "
                  f"{time.process_time() - c:8.2f} s CPU  (load {os.getloadavg()[0]:.1f})",
                  flush=True)


if __name__ == "__main__":
    main()
