"""Exact distance linkage, interval disclosure and GDBRL at scale.

Run: ``python benchmarks/linkage.py [--sizes 10000,100000,1000000] [--workers 2]``

For each size n: synthetic records (8 key columns) masked by ``noise`` p = 0.1;
exact DLD (one key set of all 8 columns) on a LocalCluster of ``--workers``
single-threaded processes, with the wall time and the peak resident memory of
every process; the same linkage by a brute-force blocked numpy reference (one
process) and by ``sklearn.neighbors.NearestNeighbors`` (kd-tree, 2 neighbours,
``n_jobs = workers``), where they finish in the time budget, else extrapolated
from a subsample of the masked records and marked "~". Then ID1 + ID2 on
1,000,000 x 13, GDBRL (dense exact assignment) on 4,092 records, and DLD on a
million records with a single integer key (heavy ties).

Timings on a shared machine are noisy; compare ratios within one run.
"""

from __future__ import annotations

import argparse
import resource
import time

import numpy as np

from sdcdist.data import synth
from sdcdist.linkage import distance
from sdcdist.linkage.distance_drivers import link_top2
from sdcdist.masking import REGISTRY as MASKING
from sdcdist.metrics import measure
from sdcdist.parallel import Runner

GiB = 2**30


def _peak_rss() -> int:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024


def masked_pair(n: int, columns: int = 8, seed: int = 0) -> tuple[np.ndarray, np.ndarray]:
    X = synth.generate(n, columns=columns, seed=seed).values
    return X, MASKING["noise"](X, 0.1, rng=np.random.default_rng(seed + 1))


def cluster(workers: int):
    from distributed import Client, LocalCluster
    c = LocalCluster(n_workers=workers, threads_per_worker=1, processes=True,
                     dashboard_address=":0", memory_limit=None)
    return c, Client(c)


def timed(fn):
    t = time.perf_counter()
    out = fn()
    return out, time.perf_counter() - t


def brute(Q, C, budget: float) -> tuple[float, str]:
    """Brute-force blocked numpy on all masked records, or extrapolated from a subsample."""
    n = len(Q)
    m = n
    est_s = 1.5e-8 * n * n * Q.shape[1]        # rough cost model to pick the subsample
    if est_s > budget:
        m = max(200, int(n * budget / est_s))
    _, s = timed(lambda: link_top2(Runner(), Q[:m], C, m, len(C), Q.shape[1],
                                   method="brute", block_rows=None, block_memory=64 * 2**20))
    return s * n / m, "" if m == n else f"~ (from {m} records)"


def sklearn_nn(Q, C, workers: int, budget: float) -> tuple[float, str]:
    from sklearn.neighbors import NearestNeighbors
    n = len(Q)
    nn, t_fit = timed(lambda: NearestNeighbors(n_neighbors=2, algorithm="kd_tree",
                                               n_jobs=workers).fit(C))
    m = min(n, 20_000)
    _, t = timed(lambda: nn.kneighbors(Q[:m]))
    if t * n / m <= budget and m < n:
        m = n
        _, t = timed(lambda: nn.kneighbors(Q))
    return t_fit + t * n / m, "" if m == n else f"~ (from {m} records)"


def bench_dld(n: int, workers: int, budget: float) -> None:
    X, Y = masked_pair(n)
    cols = [f"V{j + 1}" for j in range(8)]
    cl, client = cluster(workers)
    try:
        res, wall = timed(lambda: measure(X, Y, ["DLD", "DLD2"], columns=cols,
                                          keysets=[cols], client=client))
        peaks = client.run(_peak_rss)
    finally:
        client.close()
        cl.close()
    worst = max(peaks.values())
    print(f"n={n:>9,}  DLD exact {res['DLD'].value:7.3f} %  DLD2 {res['DLD2'].value:6.3f} %  "
          f"wall {wall:7.1f} s  peak RSS per worker {worst / GiB:.2f} GiB "
          f"(client {_peak_rss() / GiB:.2f} GiB)", flush=True)
    Q, C = distance.standardize(Y), distance.standardize(X)
    t_b, note_b = brute(Q, C, budget)
    print(f"    brute-force blocked numpy (1 process): {t_b:9.1f} s {note_b}  "
          f"ratio {t_b / wall:6.1f}x", flush=True)
    t_s, note_s = sklearn_nn(Q, C, workers, budget)
    print(f"    sklearn NearestNeighbors kd_tree (n_jobs={workers}, approximate on ties): "
          f"{t_s:9.1f} s {note_s}  ratio {t_s / wall:6.1f}x", flush=True)


def bench_id(n: int, workers: int) -> None:
    X, Y = masked_pair(n, columns=13)
    cl, client = cluster(workers)
    try:
        res, wall = timed(lambda: measure(X, Y, ["ID1", "ID2"], client=client))
        peaks = client.run(_peak_rss)
    finally:
        client.close()
        cl.close()
    print(f"ID1 + ID2 on {n:,} x 13: ID1 {res['ID1'].value:.3f} %  ID2 {res['ID2'].value:.3f} %"
          f"  wall {wall:.1f} s  peak RSS per worker {max(peaks.values()) / GiB:.2f} GiB",
          flush=True)


def bench_gdbrl(n: int) -> None:
    X, Y = masked_pair(n)
    cols = [f"V{j + 1}" for j in range(8)]
    res, wall = timed(lambda: measure(X, Y, ["GDBRL", "DLD"], columns=cols, keysets=[cols]))
    print(f"GDBRL dense on {n:,} x 8 (one key set, in-process): {res['GDBRL'].value:.3f} % "
          f"[{res['GDBRL'].info.get('per_keyset_info', [{}])[0].get('assignment', 'dense')}]"
          f"  wall {wall:.1f} s  (DLD {res['DLD'].value:.3f} %)", flush=True)


def bench_ties(n: int) -> None:
    """Heavy ties: one integer key column (ages 16..90), each value shared by ~n/75 records."""
    rng = np.random.default_rng(5)
    X = rng.integers(16, 91, size=(n, 1)).astype(float)
    Y = X + rng.integers(-1, 2, size=X.shape)
    res, wall = timed(lambda: measure(X, Y, ["DLD", "DLD2"], keysets=[["V1"]]))
    print(f"heavy ties: one integer key, {n:,} records (in-process): DLD "
          f"{res['DLD'].value:.4f} %  DLD2 {res['DLD2'].value:.4f} %  wall {wall:.1f} s",
          flush=True)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--sizes", default="10000,100000,1000000")
    ap.add_argument("--workers", type=int, default=2)
    ap.add_argument("--budget", type=float, default=120.0,
                    help="seconds a baseline may run before it is extrapolated")
    ap.add_argument("--skip", default="", help="comma list of: dld,id,gdbrl,ties")
    a = ap.parse_args()
    skip = set(a.skip.split(","))
    if "dld" not in skip:
        for n in (int(s) for s in a.sizes.split(",")):
            bench_dld(n, a.workers, a.budget)
    if "id" not in skip:
        bench_id(1_000_000, a.workers)
    if "gdbrl" not in skip:
        bench_gdbrl(4092)
    if "ties" not in skip:
        bench_ties(1_000_000)


if __name__ == "__main__":
    main()
