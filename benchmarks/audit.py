"""The full Table 2 study of Domingo-Ferrer, Mateo-Sanz and Torra on the Census file, timed.

Run as ``python benchmarks/audit.py [--spec examples/dmt_table2.yaml] [--workers 1,2]
[--quick]``.

Runs the spec (109 parameterisations, 3 replicates for the random methods,
IL + DLD and PLD over 7 key sets + ID1, Score, Score2) once on a local cluster
of 1 worker process and once on 2 (one thread each), each into a fresh cube,
and prints wall time, cells per second and the speed-up of 2 workers over 1
measured in this run, then checks that both cubes are bit-identical. Before
each timed run every worker compiles the numba kernels on a tiny file, so
the timings are of the study, not of the compiler. ``--quick`` keeps 2
parameters per method (a smoke test). The machine is shared: timings are
noisy.
"""

from __future__ import annotations

import argparse
import logging
import tempfile
import time
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]


def warm_up() -> None:
    """Compile the numba kernels of every method and metric in this process."""
    from sdcdist.audit.run import mask_cell, measure_cell
    from sdcdist.masking import REGISTRY
    from sdcdist.metrics import REGISTRY as METRICS
    from sdcdist.audit.plan import Cell
    from sdcdist.parallel import Runner
    X = np.random.default_rng(0).lognormal(size=(60, 4)) * 100
    cols = ("a", "b", "c", "d")
    for name, m in REGISTRY.items():
        if "roles" in m.options:
            continue
        p = 0 if m.kind == "none" else (m.low if m.kind == "int" and m.low >= 3 else
                                         max(m.low, min(3, m.high)))
        try:
            Y = mask_cell(X, name, p, 0, (0,), {})
        except Exception:  # a parameter this tiny file cannot take: nothing to compile
            continue
    metrics = tuple(k for k in ("IL", "DLD", "PLD", "ID1") if k in METRICS)
    measure_cell(Runner(None), X, Y, X.shape, cols, [("a",), ("a", "b")], metrics,
                 Cell("noise", 0.1, 0, 0, 0, 0, (0,)), {})


def run(spec, workers: int, out: str) -> tuple[float, int]:
    from distributed import Client, LocalCluster
    from sdcdist.audit import run_audit
    with LocalCluster(n_workers=workers, threads_per_worker=1, processes=True,
                      dashboard_address=":0", silence_logs=logging.ERROR) as cluster, \
            Client(cluster) as client:
        client.run(warm_up)
        t0 = time.perf_counter()
        res = run_audit(spec, out, client=client)
        return time.perf_counter() - t0, res.computed


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--spec", default=str(ROOT / "examples" / "dmt_table2.yaml"))
    ap.add_argument("--workers", default="1,2", help="worker counts to time, e.g. 1,2")
    ap.add_argument("--quick", action="store_true", help="2 parameters per method")
    args = ap.parse_args()
    from sdcdist.audit import load_spec, parse_spec
    from sdcdist.cube import open_cube
    from sdcdist.audit.plan import plan_cells
    spec = load_spec(args.spec)
    if args.quick:
        raw = dict(spec.raw)
        raw["methods"] = [{**m, "params": m["params"][:2]} for m in raw["methods"]]
        raw["metrics"] = list(spec.raw["metrics"])
        spec = parse_spec(raw, base_dir=spec.base_dir)
    cells = len(plan_cells(spec))
    print(f"study {spec.name!r}: {len(spec.methods)} methods, "
          f"{sum(len(m.params) for m in spec.methods)} parameterisations, {cells} cells, "
          f"metrics {', '.join(spec.metrics)}")
    counts = [int(w) for w in args.workers.split(",")]
    times = {}
    with tempfile.TemporaryDirectory() as tmp:
        for w in counts:
            secs, computed = run(spec, w, f"{tmp}/w{w}.zarr")
            times[w] = secs
            print(f"{w} worker(s): {secs:8.1f} s wall, {computed} cells, "
                  f"{computed / secs:6.2f} cells/s")
        if len(counts) > 1:
            base = counts[0]
            for w in counts[1:]:
                print(f"speed-up of {w} workers over {base}: {times[base] / times[w]:.2f}x "
                      "(same run)")
            a = open_cube(f"{tmp}/w{counts[0]}.zarr")["value"].values
            b = open_cube(f"{tmp}/w{counts[-1]}.zarr")["value"].values
            same = np.array_equal(a, b, equal_nan=True)
            print(f"cubes bit-identical across worker counts: {same}")


if __name__ == "__main__":
    main()
