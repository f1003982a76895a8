"""Time every masking method on 100,000 x 13 synthetic records, and rank swapping on 1,000,000.

Run as ``python benchmarks/masking.py [--rows N] [--big-rows N] [--methods a,b]``.

Prints one row per method: parameter, seconds (wall clock, best of --repeat runs,
compiled code warmed up first), CPU seconds of this process (wall far above CPU
means the machine was busy with other work), the ratio to plain additive noise on the same file (the baseline,
measured in this run), and the peak memory the call allocated through numpy
(tracemalloc; numba's internal work arrays are not traced, which for MDAV is
about five n-long arrays). Then MDAV (the O(n^2/k) method) against a vectorised
numpy version of the same algorithm on a smaller file, and rank swapping on the
big file. Timings on a shared machine are noisy.
"""

from __future__ import annotations

import argparse
import time
import tracemalloc

import numpy as np

from sdcdist.data import synth
from sdcdist.masking import REGISTRY
from sdcdist.masking.microaggregation import mdav_groups, zscores

#: parameter benchmarked for each method (a middle value of the papers' grids)
PARAMS = {"noise": 0.1, "corrnoise": 0.5, "mixnoise": 0.5, "mixnoise_scaled": 0.5,
          "multnoise": 0.3, "rankswap": 10, "micmul": 3, "mic2mul": 3, "mic3mul": 3,
          "mic4mul": 3, "micir": 3, "micz": 3, "micpcp": 3, "resample": 3, "jpeg": 50,
          "distr": 0, "ipso_a": 0, "ipso_b": 0, "ipso_c": 0}
BASELINE = "noise"


def _options(name):
    if "roles" in REGISTRY[name].options:   # IPSO: incomes/taxes as regressors
        return {"roles": {"confidential": [0, 5, 11, 12], "quasi": [6, 7, 8, 9]}}
    return {}


def run_one(name, X, repeat):
    m = REGISTRY[name]
    p = PARAMS.get(name, 0)
    opts = _options(name)
    m(X[:2000], p, rng=np.random.default_rng(0), **opts)   # warm up compiled code
    best, best_cpu = np.inf, np.inf
    for r in range(repeat):
        tracemalloc.start()
        t, c = time.perf_counter(), time.process_time()
        m(X, p, rng=np.random.default_rng(r), **opts)
        best = min(best, time.perf_counter() - t)
        best_cpu = min(best_cpu, time.process_time() - c)
        peak = tracemalloc.get_traced_memory()[1]
        tracemalloc.stop()
    return p, best, best_cpu, peak / 2**20


def mdav_numpy(Z, k):
    """The same MDAV with numpy vector operations per step (the baseline for the compiled one)."""
    n = Z.shape[0]
    labels = np.full(n, -1)
    live = np.arange(n)
    g = 0

    def far(ids, pt):
        d = ((Z[ids] - pt) ** 2).sum(1)
        return ids[np.flatnonzero(d == d.max())[0]]    # ids ascending: lowest record on ties

    def group(ids, centre):
        nonlocal g
        others = ids[ids != centre]
        d = ((Z[others] - Z[centre]) ** 2).sum(1)
        near = others[np.lexsort((others, d))[:k - 1]]
        labels[np.r_[centre, near]] = g
        g += 1
        return ids[labels[ids] < 0]

    while live.size >= 3 * k:
        r = far(live, Z[live].mean(0))
        s = far(live, Z[r])
        live = group(live, r)
        if labels[s] >= 0:
            s = far(live, Z[r])
        live = group(live, s)
    if live.size >= 2 * k:
        live = group(live, far(live, Z[live].mean(0)))
    labels[live] = g
    return labels


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--rows", type=int, default=100_000)
    ap.add_argument("--big-rows", type=int, default=1_000_000)
    ap.add_argument("--mdav-rows", type=int, default=20_000,
                    help="records for the compiled-vs-numpy MDAV comparison")
    ap.add_argument("--repeat", type=int, default=1)
    ap.add_argument("--methods", default=None, help="comma-separated subset")
    a = ap.parse_args()
    names = a.methods.split(",") if a.methods else list(REGISTRY)
    X = synth.generate(a.rows, columns=13, seed=1).values
    print(f"masking {a.rows:,} x 13 synthetic records (best of {a.repeat}; noisy shared "
          f"machine)\n")
    print(f"{'method':16s} {'param':>6s} {'seconds':>9s} {'cpu s':>8s} {'x noise':>8s} "
          f"{'peak MiB':>9s}")
    base = run_one(BASELINE, X, a.repeat)[1]
    for name in names:
        p, sec, cpu, mib = run_one(name, X, a.repeat)
        print(f"{name:16s} {p:>6g} {sec:>9.3f} {cpu:>8.3f} {sec / base:>8.1f} {mib:>9.1f}",
              flush=True)

    n = a.mdav_rows
    Z = zscores(synth.generate(n, columns=13, seed=2).values)
    mdav_groups(Z[:100], 3)
    t = time.process_time()
    fast = mdav_groups(Z, 3)
    t_fast = time.process_time() - t
    t = time.process_time()
    slow = mdav_numpy(Z, 3)
    t_slow = time.process_time() - t
    print(f"\nMDAV k=3 on {n:,} x 13 (CPU seconds): compiled {t_fast:.2f}, vectorised numpy "
          f"{t_slow:.2f} ({t_slow / t_fast:.1f}x); same groups: "
          f"{np.array_equal(fast, slow)}")

    Xb = synth.generate(a.big_rows, columns=13, seed=3).values
    t, c = time.perf_counter(), time.process_time()
    REGISTRY["rankswap"](Xb, 10, rng=np.random.default_rng(0))
    t_swap, c_swap = time.perf_counter() - t, time.process_time() - c
    t = time.perf_counter()
    REGISTRY["noise"](Xb, 0.1, rng=np.random.default_rng(0))
    t_noise = time.perf_counter() - t
    print(f"rankswap p=10 on {a.big_rows:,} x 13: {t_swap:.2f} s ({c_swap:.2f} CPU s; "
          f"noise on the same file: {t_noise:.2f} s, {t_swap / t_noise:.1f}x)")


if __name__ == "__main__":
    main()
