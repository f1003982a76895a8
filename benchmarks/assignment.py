"""Benchmark: exact 1-1 assignment of PRL weight matrices, scipy against exact_dense.

PRL weights are sums of per-column level weights, so a weight matrix holds huge
numbers of equal entries (and, after micro-aggregation, groups of identical
rows). For each matrix this prints the time of
:func:`scipy.optimize.linear_sum_assignment` and of
:func:`sdcdist.linkage.assignment.exact_dense`, and both total weights (equal to
rounding: both are the exact optimum; tied optima may pair differently).

Matrices: the dense PRL weights (default comparison, and the papers' binary
``l`` at t = 0.05) of Census (1080 x 13) against micmul k = 3 and against
additive noise (variance 0.1 var, seed 1), and of a synthetic 5,000 x 10
tax-like file (zeros, values rounded to 2 significant digits) against noise.

    python benchmarks/assignment.py [--synth 5000]   (--synth 0 skips the large file)
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

import numpy as np

HERE = Path(__file__).resolve().parent


def weights(X: np.ndarray, Y: np.ndarray, **kw) -> np.ndarray:
    """The dense PRL weight matrix (masked rows x original columns) the linkage assigns."""
    from sdcdist.linkage import prl_drivers
    from sdcdist.parallel import Runner
    saved = {}

    class _Got(Exception):
        pass

    def grab(W, **_):
        saved["W"] = np.array(W, dtype=np.float64)
        raise _Got

    orig, prl_drivers.assign = prl_drivers.assign, grab
    try:
        prl_drivers.probabilistic_linkage(Runner(), X, Y, X.shape[0], Y.shape[0],
                                          tuple(range(X.shape[1])),
                                          dense_limit=max(X.shape[0], Y.shape[0]), **kw)
    except _Got:
        pass
    finally:
        prl_drivers.assign = orig
    return saved["W"]


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--synth", type=int, default=5000, help="records of the synthetic file")
    a = ap.parse_args()
    from scipy.optimize import linear_sum_assignment

    from sdcdist.data import load_microdata, reference_file
    from sdcdist.linkage.assignment import exact_dense
    from sdcdist.masking import REGISTRY
    sys.path.insert(0, str(HERE))
    from prl import utility_like

    census = load_microdata(reference_file("census")).values.astype(np.float64)
    noise = REGISTRY["noise"]
    cases = [("census micmul k=3", census, REGISTRY["micmul"](census, 3, rng=np.random.default_rng(1))),
             ("census noise 0.1", census, noise(census, np.sqrt(0.1),
                                                rng=np.random.default_rng(1)))]
    if a.synth:
        X = utility_like(a.synth)
        # the EM capped at 30 iterations: the weights keep their structure (sums of
        # per-column level weights), and the benchmark is about the assignment
        cases.append((f"synth {a.synth} noise 0.1", X,
                      noise(X, np.sqrt(0.1), rng=np.random.default_rng(1)),
                      {"em_options": {"max_iter": 30}}))
    exact_dense(np.eye(3))  # compile outside the timings
    print(f"{'matrix':<26} {'comparison':<10} {'distinct w':>10} {'scipy s':>8} "
          f"{'exact s':>8} {'rounds':>6} {'total (scipy)':>16} {'total (exact)':>16}")
    for name, X, Y, *extra in cases:
        for lab, kw in [("default", {}), ("l 0.05", {"method": "l", "t": 0.05})]:
            W = weights(X, Y, **kw, **(extra[0] if extra else {}))
            t0 = time.perf_counter()
            r0, c0 = linear_sum_assignment(W, maximize=True)
            ts = time.perf_counter() - t0
            t0 = time.perf_counter()
            r1, c1, info = exact_dense(W)
            te = time.perf_counter() - t0
            s0, s1 = W[r0, c0].sum(), W[r1, c1].sum()
            assert abs(s0 - s1) <= 1e-9 * max(1.0, abs(s0)), (name, lab, s0, s1)
            print(f"{name:<26} {lab:<10} {np.unique(W).size:>10} {ts:>8.2f} {te:>8.2f} "
                  f"{info['exact_rounds']:>6} {s0:>16.6f} {s1:>16.6f}", flush=True)


if __name__ == "__main__":
    main()
