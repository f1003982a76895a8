"""Special uniques (SUDA2): sdcdist against sdcMicro's suda2 at 100,000 and 1,000,000 records.

    .venv/bin/python benchmarks/risk_suda2.py [--sizes 100000,1000000] [--timeout 900]

A seeded synthetic file drawn from the household reference file's key distributions: each
record starts as the key combination of a random household record (urbrur, roof, walls,
water, electcon, relat, sex, hhcivil and age), and each of its keys is redrawn from that
key's marginal distribution with probability 0.3, so the file keeps much of the joint
structure and holds many new combinations (and many special uniques). sdcdist computes its
SUDA2 metrics (all MSU sizes, as sdcMicro) with ``measure``; sdcMicro 5.8.1 runs ``suda2``
on the same CSV under ``/usr/bin/time -v`` (system R). Both compute the same per-record
scores, so the table also prints the mean SUDA and DIS-SUDA scores of both.

sdcMicro's clock covers ``suda2`` only: R's start-up, ``library(sdcMicro)`` (which loads its
compiled code) and reading the CSV are outside it. sdcdist is timed twice, each time in a
fresh Python process that reads the same CSV before the clock:

- *cold*: the first call in the process, so the clock also covers loading sdcdist's compiled
  (numba, cached on disk) kernels and initialising numba, about half a second;
- *warm*: after one call on a 1,000-record file of the same keys (before the clock), so,
  like sdcMicro's, the clock covers the computation only.

Both read the CSV before the clock (sdcdist into a row-major float64 array, the layout
its own reader ``load_microdata`` gives). The ratio column uses the warm time (the
like-for-like comparison); the cold ratio is printed beside it. Wall time covers the computation only, as does sdcdist's CPU time
(printed below the table, with the Rscript process' user + system time, for loaded
machines); peak memory is the maximum resident set of the sdcdist process (``ru_maxrss``)
and of the Rscript process. An sdcMicro run that does not finish within --timeout seconds
is reported as such.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import resource
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np
import pandas as pd

ROOT = Path(__file__).resolve().parents[1]
KEYS = ["urbrur", "roof", "walls", "water", "electcon", "relat", "sex", "hhcivil", "age"]

R_SCRIPT = r"""
suppressMessages(library(sdcMicro))
args <- commandArgs(trailingOnly = TRUE)
d <- read.csv(args[1])
t <- proc.time()[["elapsed"]]
s <- suda2(d, variables = colnames(d))
t <- proc.time()[["elapsed"]] - t
cat(sprintf("seconds %.6f\nsuda_mean %.17g\ndis_suda_mean %.17g\nsuda_share %.17g\n", t,
            mean(s$score), mean(s$disScore), 100 * mean(s$score > 0)))
"""


def synthetic(n: int, seed: int = 20261127) -> pd.DataFrame:
    """``n`` records of the household file's nine keys (see the module)."""
    rng = np.random.default_rng(seed)
    hh = pd.read_csv(ROOT / "sdcdist" / "data" / "reference" / "household.csv")[KEYS]
    H = hh.to_numpy(np.int64)
    X = H[rng.integers(0, H.shape[0], n)]
    for j in range(X.shape[1]):
        redraw = rng.random(n) < 0.3
        X[redraw, j] = H[rng.integers(0, H.shape[0], int(redraw.sum())), j]
    return pd.DataFrame(X, columns=KEYS)


def _measure(d: pd.DataFrame) -> dict:
    from sdcdist.metrics import measure
    from sdcdist.metrics.risk.suda import METRICS
    # the row-major layout sdcdist's own reader (load_microdata) gives, made before the clock
    # as sdcMicro's data.frame is
    X = np.ascontiguousarray(d.to_numpy(np.float64))
    t, cpu = time.perf_counter(), time.process_time()
    res = measure(X, X, list(METRICS), columns=KEYS, categorical=KEYS)
    sec, cpu = time.perf_counter() - t, time.process_time() - cpu
    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    return {"seconds": sec, "cpu": cpu, "peak_mb": peak, "suda_mean": res["suda_mean"].value,
            "dis_suda_mean": res["dis_suda_mean"].value, "suda_share": res["suda_share"].value}


def worker(path: str, warm: bool) -> None:
    """One timed sdcdist run on the CSV ``path`` in this (fresh) process; prints JSON."""
    d = pd.read_csv(path)[KEYS]
    if warm:
        _measure(synthetic(1000, seed=1))
    print(json.dumps(_measure(d)))


def run_sdcdist(path: str, warm: bool) -> dict:
    p = subprocess.run([sys.executable, __file__, "--worker", path] + (["--warm"] if warm else []),
                       capture_output=True, text=True, check=True)
    return json.loads(p.stdout.strip().splitlines()[-1])


def run_sdcmicro(path: str, timeout: float) -> dict | None:
    with tempfile.NamedTemporaryFile("w", suffix=".R", delete=False) as f:
        f.write(R_SCRIPT)
    try:
        p = subprocess.run(["/usr/bin/time", "-v", "Rscript", f.name, path],
                           capture_output=True, text=True, timeout=timeout)
    except subprocess.TimeoutExpired:
        return None
    finally:
        os.unlink(f.name)
    if p.returncode != 0:
        raise RuntimeError(f"Rscript failed: {p.stderr[-2000:]}")
    out = dict(line.split(" ", 1) for line in p.stdout.strip().splitlines())
    peak = re.search(r"Maximum resident set size \(kbytes\): (\d+)", p.stderr)
    user = float(re.search(r"User time \(seconds\): ([\d.]+)", p.stderr).group(1))
    system = float(re.search(r"System time \(seconds\): ([\d.]+)", p.stderr).group(1))
    return {"seconds": float(out["seconds"]), "peak_mb": int(peak.group(1)) / 1024,
            "cpu": user + system,
            "suda_mean": float(out["suda_mean"]),
            "dis_suda_mean": float(out["dis_suda_mean"]),
            "suda_share": float(out["suda_share"])}


def main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--sizes", default="100000,1000000")
    ap.add_argument("--timeout", type=float, default=900.0,
                    help="seconds sdcMicro may take per size (default 15 min)")
    ap.add_argument("--worker", help=argparse.SUPPRESS)
    ap.add_argument("--warm", action="store_true", help=argparse.SUPPRESS)
    args = ap.parse_args(argv)
    if args.worker:
        worker(args.worker, args.warm)
        return
    rows = []
    with tempfile.TemporaryDirectory() as tmp:
        for n in [int(s) for s in args.sizes.split(",")]:
            d = synthetic(n)
            path = os.path.join(tmp, f"keys_{n}.csv")
            d.to_csv(path, index=False)
            cold = run_sdcdist(path, warm=False)
            ours = run_sdcdist(path, warm=True)
            theirs = run_sdcmicro(path, args.timeout)
            rows.append((n, ours, theirs, cold))
    print(f"SUDA2 on {len(KEYS)} categorical keys (all MSU sizes), synthetic household keys")
    head = (f"{'measure':<8} {'n':>9} {'sdcdist cold s':>14} {'warm s':>7} {'MB':>5} "
            f"{'sdcMicro s':>11} {'MB':>5} {'ratio (warm)':>12} {'ratio (cold)':>12}")
    print(head)
    print("-" * len(head))
    for n, ours, theirs, cold in rows:
        lead = (f"{'suda2':<8} {n:>9} {cold['seconds']:>14.2f} {ours['seconds']:>7.2f} "
                f"{ours['peak_mb']:>5.0f} ")
        if theirs is None:
            print(lead + f"{'did not finish in ' + str(int(args.timeout // 60)) + ' min':>43}")
        else:
            print(lead + f"{theirs['seconds']:>11.2f} {theirs['peak_mb']:>5.0f} "
                  f"{theirs['seconds'] / ours['seconds']:>11.1f}x "
                  f"{theirs['seconds'] / cold['seconds']:>11.1f}x")
    print("(sdcdist MB: the warm run's process; ratio (warm) = sdcMicro s / warm s, the "
          "like-for-like one: see the module docstring)")
    print()
    print("CPU seconds (sdcdist cold / warm: the process during the computation; sdcMicro: "
          "the whole Rscript process, reading the CSV included):")
    for n, ours, theirs, cold in rows:
        other = "-" if theirs is None else f"{theirs['cpu']:.2f}"
        print(f"  n={n:<9} {cold['cpu']:.2f} / {ours['cpu']:.2f} / {other}")
    print()
    print("figures (sdcdist / sdcMicro):")
    for n, ours, theirs, _ in rows:
        for k in ("suda_share", "suda_mean", "dis_suda_mean"):
            other = "-" if theirs is None else f"{theirs[k]:.12g}"
            print(f"  n={n:<9} {k:<14} {ours[k]:.12g} / {other}")


if __name__ == "__main__":
    main()
