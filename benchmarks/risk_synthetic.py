"""Distances for synthetic releases: sdcdist against SDMetrics 0.32.0 at 100,000 and
1,000,000 records.

    .venv/bin/python benchmarks/risk_synthetic.py [--sizes 100000,1000000] [--timeout 900]
                                                  [--workers 2] [--check dcr_overfit]

A seeded file of n records (three categorical columns: 2, 8 and 5 categories; three
numeric ones: age, a rounded income and weekly hours) is the training file; a second
draw of n records the holdout; the release has n records, a tenth of them copies of
training records and the rest drawn column by column from the training file (a marginal
synthesizer). Each metric runs in a fresh process of its own, sdcdist's in this
environment (in-process, one core) and SDMetrics' in the peers' environment
(benchmarks/.venv-peers-synth): DCROverfittingProtection (sdcdist's ``dcr_overfit`` with
``dcr_closer_train`` and the two median DCRs), DCRBaselineProtection (``dcr_baseline``),
CategoricalCAP (``cap``; keys: the categorical columns, confidential: hours) and NNDR
(``nndr_median``, which SDMetrics 0.32.0 does not have). Wall time and peak memory (the
process's maximum resident set) of each, the figures of both and the ratio. SDMetrics'
two DCR runs of a size start together at the beginning of that size and run beside the
others (their pairwise distances take hours at these sizes, so the benchmark waits for
their timeout only once); its CategoricalCAP runs alone. A SDMetrics
run that does not finish within --timeout seconds is reported as such, and not started
again at a larger size. At the largest size sdcdist also runs the groups of --check (default: dcr_overfit, the
nearest records in the training and the holdout file) on a local cluster of --workers
worker processes with other block sizes, and the figures are checked to be the same bit
for bit. ``--sizes 1000000 --gave-up dcr_overfit,dcr_baseline`` continues a run whose
SDMetrics DCR runs did not finish at 100,000 records.
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

HERE = Path(__file__).resolve().parent
PEERS = HERE / ".venv-peers-synth" / "bin" / "python"
COLS = ["sex", "region", "edu", "age", "income", "hours"]
CATS = COLS[:3]
NUMS = COLS[3:]
KEYS = CATS
CONF = ["hours"]
GROUPS = {"dcr_overfit": ["dcr_overfit", "dcr_closer_train", "dcr_train_median",
                          "dcr_holdout_median"],
          "dcr_baseline": ["dcr_baseline"], "nndr_median": ["nndr_median"], "cap": ["cap"]}

SDMETRICS = r"""
import json, resource, sys, time, warnings
import numpy as np, pandas as pd
from sdmetrics.single_table import (CategoricalCAP, DCRBaselineProtection,
                                    DCROverfittingProtection)
which, tmp = sys.argv[1], sys.argv[2]
cats, nums = ["sex", "region", "edu"], ["age", "income", "hours"]
def read(name):
    X = np.load(f"{tmp}/{name}.npy")
    d = pd.DataFrame({c: [f"c{int(v)}" for v in X[:, j]] for j, c in enumerate(cats)})
    for j, c in enumerate(nums):
        d[c] = X[:, 3 + j].astype(np.int64)
    return d
tr, ho, re = read("train"), read("holdout"), read("released")
meta = {"columns": {**{c: {"sdtype": "categorical"} for c in cats},
                    **{c: {"sdtype": "numerical"} for c in nums}}}
t = time.perf_counter()
if which == "dcr_overfit":
    r = DCROverfittingProtection.compute_breakdown(tr, re, ho, meta, None)
    out = {"dcr_overfit": r["score"],
           "dcr_closer_train": r["synthetic_data_percentages"]["closer_to_training"]}
elif which == "dcr_baseline":
    r = DCRBaselineProtection.compute_breakdown(tr, re, meta, None)
    out = {"dcr_baseline": r["score"],
           "dcr_train_median": r["median_DCR_to_real_data"]["synthetic_data"]}
else:
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", DeprecationWarning)
        out = {"cap": CategoricalCAP.compute(tr, re, meta, key_fields=cats,
                                             sensitive_fields=["hours"])}
out["seconds"] = time.perf_counter() - t
out["peak_mb"] = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
print(json.dumps(out))
"""


def synthetic(n: int, seed: int) -> np.ndarray:
    rng = np.random.default_rng(seed)
    sex = rng.integers(0, 2, n)
    region = rng.integers(0, 8, n)
    edu = rng.choice(5, n, p=[0.3, 0.3, 0.2, 0.15, 0.05])
    age = np.clip(np.round(rng.normal(40, 15, n)), 16, 90)
    income = np.round(np.exp(rng.normal(10 + 0.1 * edu, 0.6, n)), -2)
    hours = np.clip(np.round(rng.normal(38, 8, n)), 0, 80)
    return np.column_stack([sex, region, edu, age, income, hours]).astype(np.float64)


def files(n: int, tmp: str) -> None:
    T, H = synthetic(n, 1), synthetic(n, 2)
    rng = np.random.default_rng(3)
    S = np.column_stack([T[rng.integers(0, n, n), j] for j in range(len(COLS))])
    S[: n // 10] = T[rng.choice(n, n // 10, replace=False)]
    for name, X in (("train", T), ("holdout", H), ("released", S)):
        np.save(os.path.join(tmp, f"{name}.npy"), X)


def sdcdist_worker(which: str, tmp: str, workers: int) -> None:
    """In a fresh process: one metric group of sdcdist, printed as a JSON line."""
    from sdcdist.metrics import measure
    T, H, S = (np.load(os.path.join(tmp, f"{k}.npy")) for k in ("train", "holdout",
                                                                  "released"))
    kw = dict(columns=COLS, categorical=CATS, holdout=H, keysets=[KEYS], confidential=CONF,
              seed=1)
    client = cluster = None
    if workers:
        from distributed import Client, LocalCluster
        cluster = LocalCluster(n_workers=workers, threads_per_worker=1, processes=True,
                               dashboard_address=":0")
        client = Client(cluster)
        kw.update(client=client, options={"block_rows": [50_000, 300_000],
                                          "chunk_rows": 100_003})
    t = time.perf_counter()
    res = measure(T, S, GROUPS[which], **kw)
    out = {k: r.value for k, r in res.items()}
    out["seconds"] = time.perf_counter() - t
    out["peak_mb"] = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    if client is not None:
        client.close()
        cluster.close()
    print(json.dumps(out))


def run(cmd: list[str], timeout: float) -> dict | None:
    return collect(start(cmd), timeout)


def start(cmd: list[str]) -> tuple[subprocess.Popen, float]:
    return subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                            text=True), time.monotonic()


def collect(job: tuple[subprocess.Popen, float], timeout: float) -> dict | None:
    """The JSON line a job printed; None if it did not finish ``timeout`` s after it began."""
    p, began = job
    try:
        out, err = p.communicate(timeout=max(0.0, began + timeout - time.monotonic()))
    except subprocess.TimeoutExpired:
        p.kill()
        p.communicate()
        return None
    if p.returncode != 0:
        return {"error": (err.strip().splitlines() or ["failed"])[-1]}
    return json.loads(out.strip().splitlines()[-1])


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--sizes", default="100000,1000000")
    ap.add_argument("--timeout", type=float, default=900.0)
    ap.add_argument("--workers", type=int, default=2)
    ap.add_argument("--gave-up", default="",
                    help="SDMetrics runs that did not finish at a smaller size in an earlier "
                         "run (comma-separated groups): not started again")
    ap.add_argument("--check", default="dcr_overfit",
                    help="metric groups run again on the cluster at the largest size")
    ap.add_argument("--worker", nargs=3, help=argparse.SUPPRESS)
    a = ap.parse_args()
    if a.worker:
        sdcdist_worker(a.worker[0], a.worker[1], int(a.worker[2]))
        return
    sizes = [int(s) for s in a.sizes.split(",")]
    rows, gave_up = [], set(filter(None, a.gave_up.split(",")))
    for n in sizes:
        with tempfile.TemporaryDirectory() as tmp:
            files(n, tmp)
            # SDMetrics' DCR runs (hours at these sizes) wait for their timeout in the
            # background while the rest runs; its CategoricalCAP runs alone, after sdcdist's
            background = {w: start([str(PEERS), "-c", SDMETRICS, w, tmp])
                          for w in ("dcr_overfit", "dcr_baseline")
                          if PEERS.exists() and w not in gave_up}
            for which in GROUPS:
                ours = run([sys.executable, __file__, "--worker", which, tmp, "0"], 4 * 3600)
                theirs: dict | None | str
                if which == "nndr_median":
                    theirs = "SDMetrics 0.32.0 has no NNDR"
                elif which in gave_up:
                    theirs = f"not run (did not finish in {a.timeout / 60:.0f} min at a " \
                             "smaller size)"
                elif not PEERS.exists():
                    theirs = "no peers environment (sh benchmarks/peers/setup.sh)"
                elif which in background:
                    theirs = collect(background[which], a.timeout)
                    if theirs is None:
                        gave_up.add(which)
                else:
                    theirs = run([str(PEERS), "-c", SDMETRICS, which, tmp], a.timeout)
                    if theirs is None:
                        gave_up.add(which)
                same = ""
                if n == sizes[-1] and a.workers and which in a.check.split(",") and ours \
                        and "error" not in ours:
                    clu = run([sys.executable, __file__, "--worker", which, tmp,
                               str(a.workers)], 4 * 3600)
                    same = "error" if clu is None or "error" in clu else (
                        "yes" if all(clu[k] == ours[k] or (clu[k] != clu[k] and ours[k] !=
                                                           ours[k]) for k in GROUPS[which])
                        else "NO")
                    same += f" ({clu['seconds']:.1f} s)" if clu and "seconds" in clu else ""
                rows.append((which, n, ours, theirs, same))
                print(f"{which} {n}: sdcdist {ours}; SDMetrics {theirs}; cluster {same}",
                      file=sys.stderr, flush=True)
    print("\n| metric | records | sdcdist s | sdcdist peak MiB | SDMetrics s "
          "| SDMetrics peak MiB | SDMetrics / sdcdist | sdcdist figure | SDMetrics figure "
          f"| same on {a.workers} workers |")
    print("|---|---|---|---|---|---|---|---|---|---|")
    for which, n, ours, theirs, same in rows:
        if ours is None or "error" in ours:
            o = ("-", "-", "-")
        else:
            o = (f"{ours['seconds']:.1f}", f"{ours['peak_mb']:.0f}", f"{ours[which]:.10g}")
        if theirs is None:
            t = (f"did not finish in {a.timeout / 60:.0f} min", "-", "-", "-")
        elif isinstance(theirs, str):
            t = (theirs, "-", "-", "-")
        elif "error" in theirs:
            t = (theirs["error"], "-", "-", "-")
        else:
            ratio = f"{theirs['seconds'] / ours['seconds']:.1f}x" if o[0] != "-" else "-"
            t = (f"{theirs['seconds']:.1f}", f"{theirs['peak_mb']:.0f}", ratio,
                 f"{theirs[which]:.10g}")
        print(f"| {which} | {n:,} | {o[0]} | {o[1]} | {t[0]} | {t[1]} | {t[2]} | {o[2]} "
              f"| {t[3]} | {same or '-'} |")


if __name__ == "__main__":
    sys.exit(main())
