"""Attribute disclosure: sdcdist against pycanon at 100,000 and 1,000,000 records.

    .venv/bin/python benchmarks/attribute.py [--sizes 100000,1000000] [--timeout 900]

A seeded synthetic file: three categorical keys (12 x 8 x 5 categories, 480 classes, skewed
so that some classes are small), a nominal confidential column (10 categories, its
distribution depending on the first key) and an ordered one (20 levels). sdcdist computes
its 15 attribute-disclosure metrics in this process (chunk-wise tables); pycanon 1.3.6 runs
in the peers' environment (benchmarks/.venv-peers, `sh benchmarks/peers/setup.sh`) on the
same file: l_diversity, entropy_l_diversity, recursive_c_l_diversity, t_closeness,
basic_beta_likeness, enhanced_beta_likeness and delta_disclosure. Prints the figures of
both, the wall times and the ratio; a pycanon run that does not finish within --timeout
seconds is reported as such. Peak memory: sdcdist's Python allocations (tracemalloc) and
pycanon's process (maximum resident set).
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
PEERS = HERE / ".venv-peers" / "bin" / "python"
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


def synthetic(n: int, seed: int = 20261127) -> pd.DataFrame:
    rng = np.random.default_rng(seed)
    k1 = rng.choice(12, n, p=np.r_[np.full(6, 0.14), np.full(6, 0.16 / 6)])
    k2 = rng.integers(0, 8, n)
    k3 = rng.choice(5, n, p=[0.5, 0.3, 0.15, 0.04, 0.01])
    base = rng.dirichlet(np.ones(10), 12)
    nominal = (base[k1].cumsum(axis=1) > rng.random(n)[:, None]).argmax(axis=1)
    ordered = np.clip(np.round(rng.normal(8 + k2, 3)), 0, 19).astype(int)
    return pd.DataFrame({"k1": k1, "k2": k2, "k3": k3, "nominal": nominal,
                         "ordered": ordered})


def run_sdcdist(d: pd.DataFrame) -> tuple[dict, float, float]:
    from sdcdist.metrics import REGISTRY, measure
    from sdcdist.metrics.attribute import MEASURES
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
    a = ap.parse_args()
    rows = []
    for n in [int(s) for s in a.sizes.split(",")]:
        d = synthetic(n)
        ours, secs, peak = run_sdcdist(d)
        theirs = run_pycanon(d, a.timeout)
        print(f"\n== {n:,} records, {d.groupby(KEYS).ngroups} key classes")
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
        rows.append((n, f"{secs:.2f}", f"{peak:.0f}", tt, tpeak, ratio))
    print("\n| records | sdcdist s | sdcdist peak MiB | pycanon s | pycanon peak MiB "
          "| pycanon / sdcdist |")
    print("|---|---|---|---|---|---|")
    for r in rows:
        print("| " + " | ".join(str(x) for x in r) + " |")


if __name__ == "__main__":
    sys.exit(main())
