"""Benchmark: the information-loss and utility catalogue on 1,000,000 x 13 records.

Computes every loss and utility metric except PS2 and EMD on a synthetic file
and its noise-masked version, both stored as Zarr, on a LocalCluster (the
workers read their own chunks), and the same metrics with plain single-process
numpy (and scikit-learn for the logistic fit) on the arrays in memory. Prints
wall times, their ratio, the peak resident memory of every worker process and
of the numpy run, and the largest relative difference between the two sets of
values.

    python benchmarks/infoloss.py [--rows 1000000] [--workers 2]

Timings on a shared machine are noisy; run it twice before drawing conclusions.
"""

from __future__ import annotations

import argparse
import os
import tempfile
import threading
import time

import numpy as np
import psutil

from sdcdist.data import StoredArray, from_array, synth, write_microdata
from sdcdist.masking import get_method
from sdcdist.metrics import REGISTRY, Inputs, MeasureContext, measure
from sdcdist.metrics.loss.ranks import _tie_seeds, max_abs_rank_distance, max_sq_rank_distance
from sdcdist.parallel import Runner
from sdcdist.parallel.sort import tie_keys

SKIP = {"PS2", "EMD"}


class PeakRSS:
    """Poll the resident memory of some processes; keep each one's peak."""

    def __init__(self, pids: list[int], every: float = 0.05):
        self.procs = [psutil.Process(p) for p in pids]
        self.peak = {p: 0 for p in pids}
        self.every = every
        self._stop = threading.Event()
        self._t = threading.Thread(target=self._run, daemon=True)

    def _run(self) -> None:
        while not self._stop.is_set():
            for pr in self.procs:
                try:
                    self.peak[pr.pid] = max(self.peak[pr.pid], pr.memory_info().rss)
                except psutil.Error:
                    pass
            time.sleep(self.every)

    def __enter__(self) -> "PeakRSS":
        self._t.start()
        return self

    def __exit__(self, *exc) -> None:
        self._stop.set()
        self._t.join()


def _warm_up() -> None:
    import scipy.optimize  # noqa: F401
    import sklearn.cluster  # noqa: F401

    import sdcdist.metrics  # noqa: F401
    from sdcdist.metrics.exactsum import exact_sums
    exact_sums(np.ones((2, 2)))                  # loads the compiled numba kernel


def numpy_catalogue(X: np.ndarray, Y: np.ndarray, tie_seeds: np.ndarray) -> dict[str, float]:
    """The same metrics with plain numpy on in-memory arrays (one process)."""
    from scipy.special import expit
    from sklearn.linear_model import LogisticRegression
    n, p = X.shape
    out: dict[str, float] = {}
    d = np.abs(X - Y)
    out["X_MSE"] = float(np.mean(d ** 2))
    out["X_MAE"] = float(np.mean(d))
    nz = X != 0
    out["X_MV"] = float(np.sum(d[nz] / np.abs(X[nz])) / nz.sum())

    def errs(a, b, tag):
        keep = a != 0
        out[f"{tag}_MSE"] = float(np.mean((a - b) ** 2))
        out[f"{tag}_MAE"] = float(np.mean(np.abs(a - b)))
        out[f"{tag}_MV"] = float(np.mean(np.abs(a - b)[keep] / np.abs(a[keep])))
    mx, my = X.mean(0), Y.mean(0)
    errs(mx, my, "M")
    vx, vy = np.cov(X, rowvar=False), np.cov(Y, rowvar=False)
    errs(vx[np.triu_indices(p)], vy[np.triu_indices(p)], "V")
    errs(np.diag(vx), np.diag(vy), "S")
    rx, ry = np.corrcoef(X, rowvar=False), np.corrcoef(Y, rowvar=False)
    errs(rx[np.triu_indices(p, 1)], ry[np.triu_indices(p, 1)], "R")
    sd = np.sqrt(np.diag(vx))
    out["IL1s_sum"] = float(np.sum(d / (np.sqrt(2) * sd)))
    out["IL1s"] = out["IL1s_sum"] / (n * p)
    den = 0.5 * (np.abs(X) + np.abs(Y))
    out["IL1"] = float(np.sum(np.divide(d, den, out=np.zeros_like(d), where=den > 0)) / (n * p))
    out["IL"] = 100 * np.mean([out["X_MV"], out["M_MV"], out["V_MV"], out["S_MV"], out["R_MAE"]])
    out["IL_S2"] = 100 * (out["X_MV"] + (out["M_MV"] + out["S_MV"]) / 2
                          + (out["V_MV"] + out["R_MAE"]) / 2) / 3
    out.update(IL2=out["M_MV"], IL3=out["V_MV"], IL4=out["S_MV"], IL5=out["R_MAE"],
               MAE=out["X_MAE"], MSE=out["X_MSE"])
    out["s0"] = (out["IL2"] + out["IL3"] + out["IL4"] + out["IL5"]) / 4
    out["s1"] = (out["IL1"] + out["IL2"] + out["IL3"] + out["IL4"] + out["IL5"]) / 5
    out["s2"] = (out["IL1s"] + out["IL2"] + out["IL4"] + out["IL5"]) / 4
    tot_abs = tot_sq = 0
    w1 = []
    for j in range(p):
        u = tie_keys(int(tie_seeds[j]), 0, n)
        ra = np.empty(n, np.int64)
        rb = np.empty(n, np.int64)
        oa, ob = np.lexsort((u, X[:, j])), np.lexsort((u, Y[:, j]))
        ra[oa] = np.arange(1, n + 1)
        rb[ob] = np.arange(1, n + 1)
        dr = np.abs(ra - rb)
        tot_abs += int(dr.sum())
        tot_sq += int((dr * dr).sum())
        w1.append(np.mean(np.abs(X[oa, j] - Y[ob, j])) / sd[j])
    out["rMAE"] = tot_abs / (n * p)
    out["brMAE"] = tot_abs / (p * max_abs_rank_distance(n))
    out["brMSE"] = tot_sq / (p * max_sq_rank_distance(n))
    out["EMD1"] = float(np.mean(w1))
    Z = np.vstack([(X - mx) / sd, (Y - mx) / sd])
    T = np.r_[np.zeros(n), np.ones(n)]
    lr = LogisticRegression(C=np.inf, tol=1e-10, max_iter=10_000).fit(Z, T)
    out["PS"] = float(np.mean((expit(lr.decision_function(Z)) - 0.5) ** 2))
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--rows", type=int, default=1_000_000)
    ap.add_argument("--workers", type=int, default=2)
    ap.add_argument("--noise", type=float, default=0.1)
    args = ap.parse_args()
    from distributed import Client, LocalCluster

    names = [n for n, m in REGISTRY.items() if m.kind in ("loss", "utility") and n not in SKIP]
    X = synth.generate(args.rows, columns=13, seed=0)
    Y = get_method("noise")(X.values, args.noise, rng=np.random.default_rng(1))
    print(f"{args.rows} x 13 synthetic records, noise p = {args.noise}; {len(names)} metrics: "
          f"{', '.join(names)}")
    with tempfile.TemporaryDirectory() as tmp:
        write_microdata(X, os.path.join(tmp, "x.zarr"))
        write_microdata(from_array(Y, X.columns), os.path.join(tmp, "y.zarr"))
        A, B = StoredArray(os.path.join(tmp, "x.zarr")), StoredArray(os.path.join(tmp, "y.zarr"))
        chunk = 65_536
        chunk_mb = chunk * 13 * 8 / 2**20
        with LocalCluster(n_workers=args.workers, threads_per_worker=1, processes=True,
                          dashboard_address=":0") as cluster, Client(cluster) as client:
            pids = list(client.run(os.getpid).values())
            client.run(_warm_up)                 # imports count as idle memory
            base = {p: psutil.Process(p).memory_info().rss for p in pids}
            t0 = time.perf_counter()
            with PeakRSS(pids) as mon:
                res = measure(A, B, names, columns=list(X.columns), client=client, seed=0)
            t_dask = time.perf_counter() - t0
        ctx = MeasureContext(Runner(), None, None, inputs=Inputs(
            shape_original=X.values.shape, shape_masked=Y.shape, columns=X.columns),
            seed=np.random.SeedSequence(0))
        seeds = _tie_seeds(ctx)
        me = psutil.Process()
        before = me.memory_info().rss
        t0 = time.perf_counter()
        with PeakRSS([me.pid]) as mon_np:
            ref = numpy_catalogue(X.values, Y, seeds)
        t_np = time.perf_counter() - t0

    print(f"\ndask, {args.workers} worker processes (chunks of {chunk} records = "
          f"{chunk_mb:.1f} MB): {t_dask:8.1f} s")
    print(f"numpy, one process, arrays in memory:                {t_np:8.1f} s")
    print(f"ratio dask / numpy: {t_dask / t_np:.2f}")
    for p in pids:
        print(f"  worker pid {p}: peak RSS {mon.peak[p] / 2**20:7.0f} MB "
              f"(+{(mon.peak[p] - base[p]) / 2**20:.0f} MB over idle = "
              f"{(mon.peak[p] - base[p]) / 2**20 / chunk_mb:.1f} chunks)")
    print(f"  numpy process: peak RSS {mon_np.peak[me.pid] / 2**20:7.0f} MB "
          f"(+{(mon_np.peak[me.pid] - before) / 2**20:.0f} MB during the metrics; the two "
          f"arrays themselves take {2 * X.values.nbytes / 2**20:.0f} MB)")
    worst, worst_name = 0.0, ""
    print(f"\n{'metric':10s} {'dask':>16s} {'numpy':>16s} {'rel. diff':>10s}")
    for n in names:
        a, b = res[n].value, ref[n]
        rel = abs(a - b) / max(abs(b), 1e-300)
        if n != "PS" and rel > worst:
            worst, worst_name = rel, n
        print(f"{n:10s} {a:16.9g} {b:16.9g} {rel:10.1e}")
    print(f"largest relative difference (all but PS, whose fits stop at different "
          f"tolerances): {worst:.1e} ({worst_name})")


if __name__ == "__main__":
    main()
