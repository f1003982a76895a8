"""Benchmark: the exact dense assignment on PRL weights of categorical keys.

PRL weights on categorical keys take one value per agreement pattern (at most 2^K for K
binary comparisons), and the records come in large groups of equal key values: rows and
columns of the weight matrix repeat by the thousand. This script builds the weight
matrices PRL assigns on sdcMicro's household file (4 categorical keys: urbrur, water,
sex, age; 4,580 records) against PRAM (``pd`` 0.5, 0.8) and against each key recoded
at random with probability 0.3 (``swap``), on the fixed-point grid exactly as
:func:`sdcdist.probabilistic_linkage` hands them over, and times
:func:`sdcdist.linkage.assignment.exact_dense` (``integer=True``, as PRL calls it):

- ``before``: the auction as it ran on every matrix (two epsilon phases, range / 2048
  then range * 1e-4: ``AUCTION_FEW_VALUES = 0``);
- ``after``: the same code with a matrix of few distinct values auctioned in one coarse
  phase (``AUCTION_EPS_FEW``) and, below ``AUCTION_MIN``, from the auction too.

Both must return the same assignment, bit for bit (the lexicographically smallest
optimum); the script checks it. Also the same at 1,000 records (a subsample), where the
``before`` start is the sparse one.

    python benchmarks/assignment_categorical.py [--repeats 3]
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time
from pathlib import Path

import numpy as np

HERE = Path(__file__).resolve().parent
KEYS = ("urbrur", "water", "sex", "age")


def grid(X: np.ndarray, Y: np.ndarray) -> np.ndarray:
    """The fixed-point weight matrix PRL assigns (B rows x A columns, content order)."""
    from sdcdist.linkage.prl import blocks, probabilistic_linkage
    from sdcdist.parallel import Runner
    saved = {}

    class _Got(Exception):
        pass

    def grab(W, *args, **kw):
        saved["W"] = np.array(W, dtype=np.float64)
        raise _Got

    orig, blocks.assign_by_content = blocks.assign_by_content, grab
    try:
        probabilistic_linkage(Runner(), X, Y, X.shape[0], Y.shape[0],
                              tuple(range(X.shape[1])), categorical=[True] * X.shape[1])
    except _Got:
        pass
    finally:
        blocks.assign_by_content = orig
    return saved["W"]


def cases(rng_seed: int = 1):
    from sdcdist.data import load_microdata, reference_file
    from sdcdist.masking.pram import pram_column
    md = load_microdata(reference_file("household"))
    cols = [list(md.columns).index(k) for k in KEYS]
    X = np.asarray(md.values, dtype=np.float64)[:, cols]
    for pd in (0.5, 0.8):
        rng = np.random.default_rng(rng_seed)
        Y = np.column_stack([pram_column(X[:, j], pd, rng=rng) for j in range(X.shape[1])])
        yield f"household pram pd={pd}", X, Y
    rng = np.random.default_rng(rng_seed)
    Y = X.copy()
    for j in range(X.shape[1]):
        vals = np.unique(X[:, j])
        sel = rng.random(len(Y)) < 0.3
        Y[sel, j] = rng.choice(vals, sel.sum())
    yield "household swap 0.3", X, Y
    sub = np.sort(np.random.default_rng(rng_seed).choice(len(X), 1000, replace=False))
    yield "household swap 0.3 (1000)", X[sub], Y[sub]


def timed(W: np.ndarray, repeats: int, few: bool) -> tuple[float, tuple, dict]:
    from sdcdist.linkage.assignment import auction, exact_dense
    saved = auction.AUCTION_FEW_VALUES
    auction.AUCTION_FEW_VALUES = saved if few else 0
    try:
        ts, out = [], None
        for _ in range(repeats):
            t0 = time.perf_counter()
            out = exact_dense(W, maximize=True, integer=True)
            ts.append(time.perf_counter() - t0)
    finally:
        auction.AUCTION_FEW_VALUES = saved
    return statistics.median(ts), out[:2], out[2]


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--repeats", type=int, default=3, help="runs of each solve (median)")
    a = ap.parse_args()
    sys.path.insert(0, str(HERE.parent))
    from sdcdist.linkage.assignment import exact_dense
    exact_dense(np.eye(3), integer=True, auction=True)       # compile outside the timings
    exact_dense(np.eye(3), integer=True, auction=False)
    print(f"{'matrix':<28} {'n':>5} {'values':>6} {'before s':>9} {'after s':>8} "
          f"{'ratio':>6} {'bids before':>11} {'bids after':>10} {'same':>5}")
    for name, X, Y in cases():
        W = grid(X, Y)
        tb, rb, ib = timed(W, a.repeats, few=False)
        ta, ra, ia = timed(W, a.repeats, few=True)
        same = all(np.array_equal(x, y) for x, y in zip(rb, ra))
        print(f"{name:<28} {W.shape[0]:>5} {np.unique(W).size:>6} {tb:>9.3f} {ta:>8.3f} "
              f"{tb / ta:>6.1f} {ib.get('auction_bids', 0):>11} "
              f"{ia.get('auction_bids', 0):>10} {str(same):>5}", flush=True)
        if not same:
            raise SystemExit(f"{name}: the assignments differ")


if __name__ == "__main__":
    main()
