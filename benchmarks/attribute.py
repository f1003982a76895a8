"""Attribute disclosure: sdcdist against pycanon and sdcMicro at 100,000 and 1,000,000 records.

    .venv/bin/python benchmarks/attribute.py [--sizes 100000,1000000] [--timeout 900]
        [--classes 480,120] [--peers pycanon,sdcmicro]

Seeded synthetic files: three categorical keys (12 x 8 x 5 categories, 480 classes, skewed
so that some classes are small; with --classes 120 the first key is taken modulo 3, 3 x 8 x
5 = 120 classes), a nominal confidential column (10 categories, its distribution depending
on the first key) and an ordered one (20 levels). pycanon's time depends on the number of
key classes far more than on the records, so each file is named by its classes.

sdcMicro (system R, R_LIBS with sdcMicro 5.8.x; `benchmarks/peers/setup.sh`): its
``ldiversity`` (distinct, entropy and recursive c = 2 l-diversity of both confidential
columns) on the same CSV, read by data.table's fread. Two ratios: per call (sdcdist's three
l-diversity metrics in this process, against ldiversity() alone) and per command (the wall
time of `python -m sdcdist risk FILE FILE --metric ldiv_distinct,ldiv_entropy,ldiv_recursive
--local` against `Rscript` loading sdcMicro, reading the CSV and calling ldiversity).

sdcdist computes
its 15 attribute-disclosure metrics in this process (chunk-wise tables); pycanon 1.3.6 runs
in the peers' environment (benchmarks/.venv-peers, `sh benchmarks/peers/setup.sh`) on the
same file: l_diversity, entropy_l_diversity, recursive_c_l_diversity, t_closeness,
basic_beta_likeness, enhanced_beta_likeness and delta_disclosure. Prints the figures of
both, the wall times (sdcdist's after one call on 1,000 records in the same process, which
loads its compiled kernels) and the ratio; a pycanon run that does not finish within --timeout
seconds is reported as such. Peak memory: sdcdist's Python allocations (tracemalloc) and
pycanon's process (maximum resident set). SDCDIST_PEERS_PYTHON names another Python with
pycanon 1.3.6.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
import tracemalloc
from pathlib import Path

import numpy as np
import pandas as pd

HERE = Path(__file__).resolve().parent
PEERS = Path(os.environ.get("SDCDIST_PEERS_PYTHON", HERE / ".venv-peers" / "bin" / "python"))
KEYS = ["k1", "k2", "k3"]
CONF = ["nominal", "ordered"]

PYCANON = r"""
import json, resource, sys, time
import pandas as pd
from pycanon import anonymity as an
d = pd.read_csv(sys.argv[1])
d["nominal"] = d["nominal"].map(lambda v: f"c{v}")
keys, conf = ["k1", "k2", "k3"], ["nominal", "ordered"]
t = time.perf_counter()
c, l_ = an.recursive_c_l_diversity(d, keys, conf)
out = {"ldiv_distinct": int(an.l_diversity(d, keys, conf)),
       "ldiv_entropy_int": int(an.entropy_l_diversity(d, keys, conf)),
       "recursive_c": None if c != c else int(c),
       "tclose": float(an.t_closeness(d, keys, conf)),
       "beta_basic": float(an.basic_beta_likeness(d, keys, conf)),
       "beta_enhanced": float(an.enhanced_beta_likeness(d, keys, conf)),
       "delta_disc": float(an.delta_disclosure(d, keys, conf))}
out["seconds"] = time.perf_counter() - t
out["peak_mb"] = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
print(json.dumps(out))
"""


def synthetic(n: int, seed: int = 20261127, classes: int = 480) -> pd.DataFrame:
    rng = np.random.default_rng(seed)
    k1 = rng.choice(12, n, p=np.r_[np.full(6, 0.14), np.full(6, 0.16 / 6)])
    k2 = rng.integers(0, 8, n)
    k3 = rng.choice(5, n, p=[0.5, 0.3, 0.15, 0.04, 0.01])
    base = rng.dirichlet(np.ones(10), 12)
    nominal = (base[k1].cumsum(axis=1) > rng.random(n)[:, None]).argmax(axis=1)
    ordered = np.clip(np.round(rng.normal(8 + k2, 3)), 0, 19).astype(int)
    if classes == 120:
        k1 = k1 % 3
    elif classes != 480:
        raise SystemExit("--classes takes 480 and 120")
    return pd.DataFrame({"k1": k1, "k2": k2, "k3": k3, "nominal": nominal,
                         "ordered": ordered})


SDCMICRO = r"""
suppressMessages({library(sdcMicro); library(data.table)})
args <- commandArgs(trailingOnly = TRUE)
t0 <- proc.time()[["elapsed"]]
d <- as.data.frame(fread(args[1]))
t1 <- proc.time()[["elapsed"]]
r <- ldiversity(d, keyVars = c("k1", "k2", "k3"), ldiv_index = c("nominal", "ordered"),
                l_recurs_c = 2)
t2 <- proc.time()[["elapsed"]]
cat(sprintf('{"ldiv_distinct": %.17g, "ldiv_entropy": %.17g, "read": %.6f, "call": %.6f}\n',
            min(r[, grep("_Distinct_Ldiversity$", colnames(r))]),
            min(r[, grep("_Entropy_Ldiversity$", colnames(r))]),
            t1 - t0, t2 - t1))
"""
LDIV = ["ldiv_distinct", "ldiv_entropy", "ldiv_recursive"]


def run_sdcmicro(path: str, timeout: float) -> dict | None:
    """sdcMicro's ldiversity on the CSV: the call, the read, and the whole command's wall
    time (R's start and the package load included)."""
    with tempfile.NamedTemporaryFile("w", suffix=".R", delete=False) as f:
        f.write(SDCMICRO)
        script = f.name
    try:
        t = time.perf_counter()
        p = subprocess.run(["Rscript", script, path], capture_output=True, text=True,
                           timeout=timeout)
        wall = time.perf_counter() - t
    except (subprocess.TimeoutExpired, FileNotFoundError) as e:
        return None if isinstance(e, subprocess.TimeoutExpired) else {"error": "no Rscript"}
    finally:
        os.unlink(script)
    if p.returncode != 0:
        return {"error": (p.stderr.strip().splitlines() or ["failed"])[-1]}
    out = json.loads([s for s in p.stdout.splitlines() if s.startswith("{")][-1])
    out["command"] = wall
    return out


def run_sdcdist_command(path: str) -> float:
    """Wall time of the sdcdist command computing the three l-diversity metrics."""
    t = time.perf_counter()
    subprocess.run([sys.executable, "-m", "sdcdist", "risk", path, path, "--keyset",
                    ",".join(KEYS), "--confidential", ",".join(CONF), "--categorical",
                    ",".join(KEYS + ["nominal"]), "--metric", ",".join(LDIV), "--local"],
                   check=True, capture_output=True)
    return time.perf_counter() - t


def run_sdcdist_ldiv(d: pd.DataFrame) -> float:
    """sdcdist's three l-diversity metrics in this process (the call sdcMicro's ldiversity
    is compared with)."""
    from sdcdist.metrics import measure
    X = d[KEYS + CONF].to_numpy(np.float64)
    t = time.perf_counter()
    measure(X, X, LDIV, columns=KEYS + CONF, keysets=[KEYS],
            categorical=KEYS + ["nominal"], confidential=CONF)
    return time.perf_counter() - t


def run_sdcdist(d: pd.DataFrame) -> tuple[dict, float, float]:
    from sdcdist.metrics import REGISTRY, measure
    from sdcdist.metrics.risk.attribute import MEASURES
    names = [k for k in REGISTRY if k in MEASURES or k[:-5] in MEASURES]
    X = d[KEYS + CONF].to_numpy(np.float64)
    tracemalloc.start()
    t = time.perf_counter()
    res = measure(X, X, names, columns=KEYS + CONF, keysets=[KEYS],
                  categorical=KEYS + ["nominal"], confidential=CONF)
    secs = time.perf_counter() - t
    peak = tracemalloc.get_traced_memory()[1] / 2**20
    tracemalloc.stop()
    return {k: r.value for k, r in res.items()}, secs, peak


def run_pycanon(d: pd.DataFrame, timeout: float) -> dict | None:
    if not PEERS.exists():
        return {"error": "no peers environment (sh benchmarks/peers/setup.sh)"}
    with tempfile.TemporaryDirectory() as tmp:
        path = os.path.join(tmp, "data.csv")
        d.to_csv(path, index=False)
        try:
            p = subprocess.run([str(PEERS), "-c", PYCANON, path], capture_output=True,
                               text=True, timeout=timeout)
        except subprocess.TimeoutExpired:
            return None
    if p.returncode != 0:
        return {"error": p.stderr.strip().splitlines()[-1] if p.stderr else "failed"}
    return json.loads(p.stdout)


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--sizes", default="100000,1000000")
    ap.add_argument("--timeout", type=float, default=900.0)
    ap.add_argument("--classes", default="480,120")
    ap.add_argument("--peers", default="pycanon,sdcmicro")
    a = ap.parse_args()
    peers = set(a.peers.split(","))
    # sdcdist's compiled kernels loaded before any clock (pycanon and sdcMicro are timed
    # after their imports as well)
    run_sdcdist(synthetic(1000))
    rows, rrows = [], []
    for classes in [int(c) for c in a.classes.split(",")]:
        for n in [int(s) for s in a.sizes.split(",")]:
            d = synthetic(n, classes=classes)
            ours, secs, peak = run_sdcdist(d)
            ncls = d.groupby(KEYS).ngroups
            theirs = run_pycanon(d, a.timeout) if "pycanon" in peers else {"error": "not run"}
            print(f"\n== {n:,} records, {ncls} key classes")
            print(f"{'measure':16s} {'sdcdist':>14s} {'pycanon':>14s}")
            pairs = [("ldiv_distinct", "ldiv_distinct"), ("ldiv_entropy", "ldiv_entropy_int"),
                     ("tclose", "tclose"), ("beta_basic", "beta_basic"),
                     ("beta_enhanced", "beta_enhanced"), ("delta_disc", "delta_disc")]
            for ours_k, theirs_k in pairs:
                tv = "-" if not theirs or "error" in theirs else f"{theirs[theirs_k]:.10g}"
                print(f"{ours_k:16s} {ours[ours_k]:14.10g} {tv:>14s}")
            for k in ("ldiv_recursive", "cl_c", "ldiv_distinct_fail", "tclose_fail",
                      "beta_enhanced_fail", "delta_disc_fail"):
                print(f"{k:16s} {ours[k]:14.10g}")
            if theirs is None:
                tt, ratio, tpeak = f"> {a.timeout:.0f} (did not finish)", "-", "-"
            elif "error" in theirs:
                tt, ratio, tpeak = theirs["error"], "-", "-"
            else:
                tt = f"{theirs['seconds']:.2f}"
                ratio = f"{theirs['seconds'] / secs:.1f}x"
                tpeak = f"{theirs['peak_mb']:.0f}"
            rows.append((f"{n:,}", ncls, f"{secs:.2f}", f"{peak:.0f}", tt, tpeak, ratio))
            if "sdcmicro" in peers:
                with tempfile.TemporaryDirectory() as tmp:
                    path = os.path.join(tmp, "data.csv")
                    d.to_csv(path, index=False)
                    call = run_sdcdist_ldiv(d)
                    cmd = run_sdcdist_command(path)
                    r = run_sdcmicro(path, a.timeout)
                if r is None or "error" in r:
                    msg = "did not finish" if r is None else r["error"]
                    rrows.append((f"{n:,}", ncls, f"{call:.2f}", msg, "-", f"{cmd:.2f}", "-",
                                  "-"))
                else:
                    print(f"ldiv_distinct    sdcdist {ours['ldiv_distinct']:.10g}  "
                          f"sdcMicro {r['ldiv_distinct']:.10g}")
                    print(f"ldiv_entropy     sdcdist {ours['ldiv_entropy']:.10g}  "
                          f"sdcMicro {r['ldiv_entropy']:.10g}")
                    rrows.append((f"{n:,}", ncls, f"{call:.2f}", f"{r['call']:.2f}",
                                  f"{r['call'] / call:.2f}x", f"{cmd:.2f}",
                                  f"{r['command']:.2f} (read {r['read']:.2f})",
                                  f"{r['command'] / cmd:.2f}x"))
    print("\n| records | key classes | sdcdist s (15 metrics) | sdcdist peak MiB | pycanon s "
          "| pycanon peak MiB | pycanon / sdcdist |")
    print("|---|---|---|---|---|---|---|")
    for r in rows:
        print("| " + " | ".join(str(x) for x in r) + " |")
    if rrows:
        print("\nl-diversity (distinct, entropy, recursive) against sdcMicro's ldiversity")
        print("| records | key classes | sdcdist call s | sdcMicro call s | per call "
              "| sdcdist command s | sdcMicro command s | per command |")
        print("|---|---|---|---|---|---|---|---|")
        for r in rrows:
            print("| " + " | ".join(str(x) for x in r) + " |")


if __name__ == "__main__":
    sys.exit(main())
