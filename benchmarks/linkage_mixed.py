"""DLD by the Gower distance on mixed keys at scale.

Run: ``python benchmarks/linkage_mixed.py [--sizes 200000,1000000] [--workers 2]
[--budget 600]``

For each size n: synthetic records with 4 categorical keys (2, 6 and 12 nominal levels, one
ordinal column of 8 levels, a few suppressed values) and 3 numeric keys (age on a grid of
1, income with 2 decimals, a continuous score), masked by swapping 10 % of each categorical
column's values and adding noise to the numbers. Exact DLD (one key set of the 7 keys,
Gower: the default on categorical keys) on a LocalCluster of ``--workers`` single-threaded
processes, with its wall time, where it fits the time budget; else it is estimated from the
time of one block (one task of the cluster: a block of masked records against all original
records) and marked "~". The estimate for a 32-worker cluster divides the blocks over 32
workers (the same task sizes; the scheduler's overhead is not included).

Baselines from the same run:
- the numpy reference kernel (distance matrix + top-2 of :mod:`sdcdist.linkage.distance`,
  the plain-numpy path of every other distance) on a subsample of masked records,
  extrapolated to all of them;
- the previous default on categorical keys: Euclidean distance within blocks of equal
  categories (``dld_distance: euclidean``).

The machine may be shared: the load average is printed before and after; compare ratios
within one run.
"""

from __future__ import annotations

import argparse
import math
import os
import time

import numpy as np

from sdcdist.linkage import distance, gower
from sdcdist.metrics import measure

COLS = ["sex", "region", "occupation", "education", "age", "income", "score"]
CAT = COLS[:4]
KINDS = ("nominal", "nominal", "nominal", "ordinal", "numeric", "numeric", "numeric")


def mixed_pair(n: int, seed: int = 0) -> tuple[np.ndarray, np.ndarray]:
    rng = np.random.default_rng(seed)
    X = np.column_stack([
        rng.integers(0, 2, n), rng.integers(0, 6, n), rng.integers(0, 12, n),
        np.clip(np.rint(rng.normal(3.5, 1.8, n)), 0, 7),
        rng.integers(16, 91, n),
        np.round(np.exp(rng.normal(10, 0.8, n)), 2),
        rng.standard_normal(n)]).astype(float)
    Y = X.copy()
    for j, levels in enumerate((2, 6, 12, 8)):
        swap = rng.random(n) < 0.10
        Y[swap, j] = rng.integers(0, levels, swap.sum())
        Y[rng.random(n) < 0.01, j] = np.nan                 # suppressed
    Y[:, 4] = np.clip(Y[:, 4] + rng.integers(-2, 3, n), 16, 90)
    Y[:, 5] = Y[:, 5] * (1 + rng.normal(0, 0.05, n))
    Y[:, 6] = Y[:, 6] + rng.normal(0, 0.1, n)
    return X, Y


def cluster(workers: int):
    from distributed import Client, LocalCluster
    c = LocalCluster(n_workers=workers, threads_per_worker=1, processes=True,
                     dashboard_address=":0", memory_limit=None)
    return c, Client(c)


def timed(fn):
    t = time.perf_counter()
    out = fn()
    return out, time.perf_counter() - t


def prepared(X: np.ndarray, Y: np.ndarray):
    cols = tuple(range(len(COLS)))
    g, prep = gower.plan(KINDS, gower.column_stats(X, cols), gower.column_stats(Y, cols))
    return g, gower.prepare(Y, cols, KINDS, prep), gower.prepare(X, cols, KINDS, prep)


def block_seconds(X: np.ndarray, Y: np.ndarray, rows: int) -> float:
    """Seconds of one cluster task: ``rows`` masked records against all original records."""
    g, Q, C = prepared(X, Y)
    gower.gower_top2(Q[:8], C[:8], g)                      # compiled (cached) before timing
    _, s = timed(lambda: gower.gower_top2(Q[:rows], C, g))
    return s


def numpy_reference(X: np.ndarray, Y: np.ndarray, budget: float) -> tuple[float, int]:
    """The numpy kernel (pair matrix, then top-2) on a subsample, extrapolated (seconds on
    one core for all masked records)."""
    g, Q, C = prepared(X, Y)
    n = len(Q)
    m = 256
    step = 4096

    def run(m: int) -> None:
        for a in range(0, m, 64):
            for b in range(0, len(C), step):
                distance.block_top2(gower.gower_distances(Q[a:a + 64], C[b:b + step], g))
    _, s = timed(lambda: run(m))
    while s * 4 < budget / 4 and m * 4 <= n:
        m *= 4
        _, s = timed(lambda: run(m))
    return s * n / m, m


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--sizes", default="200000,1000000")
    ap.add_argument("--workers", type=int, default=2)
    ap.add_argument("--budget", type=float, default=600.0,
                    help="seconds a full cluster run may take before it is estimated")
    a = ap.parse_args()
    print(f"load average before: {os.getloadavg()}  (cpus: {os.cpu_count()})")
    c, client = cluster(a.workers)
    opts = {"ordinal": ["education"]}
    try:
        for n in [int(s) for s in a.sizes.split(",")]:
            X, Y = mixed_pair(n)
            rows = max(4096, -(-n // 16))          # the driver's masked rows per task
            blocks = -(-n // rows)
            t_block = block_seconds(X, Y, min(rows, 16384)) * rows / min(rows, 16384)
            est_2 = t_block * math.ceil(blocks / a.workers)
            est_32 = t_block * math.ceil(blocks / 32)
            print(f"\nn = {n:,}: {blocks} tasks of {rows:,} x {n:,} pairs; one task "
                  f"~{t_block:.1f} s; estimate {est_2:.0f} s on {a.workers} workers, "
                  f"{est_32:.0f} s on 32")
            if est_2 <= a.budget:
                r, s = timed(lambda: measure(X, Y, ["DLD", "DLD2"], columns=COLS,
                                             categorical=CAT, keysets=[COLS], options=opts,
                                             client=client))
                print(f"  Gower DLD (cluster, {a.workers} workers): {s:.1f} s  "
                      f"DLD = {r['DLD'].value:.4f} %, DLD2 = {r['DLD2'].value:.4f} %")
            else:
                print(f"  Gower DLD (cluster, {a.workers} workers): ~{est_2:.0f} s "
                      "(estimated from one task, over the budget)")
            t_np, m = numpy_reference(X, Y, min(a.budget, 120.0))
            print(f"  numpy reference kernel, one core: ~{t_np:.0f} s (from {m:,} masked "
                  f"records); compiled kernel one core ~{t_block * blocks:.0f} s: "
                  f"{t_np / (t_block * blocks):.1f}x")
            r, s = timed(lambda: measure(X, Y, ["DLD"], columns=COLS, categorical=CAT,
                                         keysets=[COLS],
                                         options={**opts, "dld_distance": "euclidean"},
                                         client=client))
            print(f"  previous default (Euclidean within blocks of equal categories): "
                  f"{s:.1f} s, DLD = {r['DLD'].value:.4f} %")
    finally:
        client.close()
        c.close()
    print(f"\nload average after: {os.getloadavg()}")


if __name__ == "__main__":
    main()
