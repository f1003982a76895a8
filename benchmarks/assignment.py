"""Benchmark: exact 1-1 assignment, before and after.

Dense (the PRL path up to ``dense_limit``): for each weight matrix, as the linkage
hands it over (B records x A records, both in the content order of their values),
the time of :func:`scipy.optimize.linear_sum_assignment`, of ``exact_dense`` of a
former revision (``--before REV``: that revision's whole ``sdcdist``, timed in a child
process; none by default)
and of :func:`sdcdist.linkage.assignment.exact_dense` (sparse shortest augmenting
paths proved optimal for the whole matrix by LP duality; from ``AUCTION_MIN`` rows
on started from the prices of a dense epsilon-scaling auction), wall and CPU
seconds, with the total weights, which must agree to 1e-9 relative (tied optima may
pair records differently). A second table times what PRL calls,
``assign_by_content`` (content-order permutation of the matrix included), before and
after. Compilation is excluded (every kernel runs once on a small matrix first); the
first line says what that first, cold call cost in this process. Matrices: the dense
PRL weights (default comparison, and the papers' binary ``l`` at t = 0.05) of Census
(1080 x 13) against micmul k = 3 and against additive noise (variance 0.1 var, seed
1), and of a synthetic 5,000 x 10 tax-like file (zeros, values rounded to 2
significant digits) against noise; and a 3,000 x 3,000 tie-heavy integer matrix
(``--ties``: values -5..3, 60 % at the floor, rows repeated in triplets, a quarter
of the columns equal).

Sparse (the PRL path above ``dense_limit``): a top-20 candidate graph with PRL-like
weights (sums of 8 per-key agreement weights, so at most 256 distinct values and
ties everywhere; the true partner a candidate of 90 % of the rows) at 100,000 and
1,000,000 rows: the former solver, LAPJVsp
(:func:`scipy.sparse.csgraph.min_weight_full_bipartite_matching` with one dummy
column per row, run in a child process that is killed after ``--timeout`` seconds,
since it cannot be interrupted), against :func:`sdcdist.linkage.assignment.assign`,
for ``unmatched="row_floor"`` (the PRL default) and ``None``, with the objective
each maximises (:func:`objective`; equal to 1e-9 relative).

    python benchmarks/assignment.py [--synth 5000] [--sparse 100000,1000000]
                                    [--timeout 300] [--before REV | --old-module OLD.py]

``--before REV``: a git revision whose ``sdcdist`` (extracted with ``git archive``) is timed
as "before" in a child process, on the same matrices; ``--old-module``: a file with a
former single-file ``assignment.py``, timed in this process, instead. Without either the
"before" columns show nan.
"""

from __future__ import annotations

import argparse
import importlib.util
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

HERE = Path(__file__).resolve().parent


def weights(X: np.ndarray, Y: np.ndarray, **kw
            ) -> tuple[np.ndarray, np.ndarray, None]:
    """The dense PRL weight matrix the linkage assigns, as the solver sees it (masked rows
    in the content order of their values x original columns, already in theirs), the rows'
    content order PRL passes along, and None (the columns' order: their own)."""
    from sdcdist.linkage import prl
    from sdcdist.linkage.prl import blocks
    from sdcdist.parallel import Runner
    saved = {}

    class _Got(Exception):
        pass

    def grab(W, row_order, col_order, *, rows_ordered=False, **_):
        # the linkage hands the rows over already in content order (rows_ordered, the
        # order kept to map them back) and A's columns in content order (col_order None):
        # W as the solver sees it, with its rows' content order
        saved["W"] = np.array(W, dtype=np.float64)
        saved["ro"] = np.asarray(row_order)
        saved["co"] = None if col_order is None else np.asarray(col_order)
        saved["rows_ordered"] = bool(rows_ordered)
        raise _Got

    orig, blocks.assign_by_content = blocks.assign_by_content, grab
    try:
        settings = prl.PRLSettings.from_options(
            {"prl_dense_limit": max(X.shape[0], Y.shape[0]),
             **{"prl_" + k: v for k, v in kw.items()}})
        prl.probabilistic_linkage(Runner(), X, Y, X.shape[0], Y.shape[0],
                                  tuple(range(X.shape[1])), settings=settings)
    except _Got:
        pass
    finally:
        blocks.assign_by_content = orig
    assert saved["rows_ordered"] and saved["co"] is None, "the linkage's hand-over changed"
    return saved["W"], saved["ro"], None


def prl_like_graph(n: int, c: int = 20, keys: int = 8, seed: int = 0
                   ) -> tuple[np.ndarray, np.ndarray]:
    """Per-row top-c candidates ``(idx, w)``, shape (n, c), with PRL-like weights.

    A pair's weight is the sum over ``keys`` keys of an agreement weight (1 to 3) or a
    disagreement weight (-0.5 to -2), so there are at most 2^keys distinct weights.
    Candidates are columns within 300 of the row (mod n), so rows compete for them;
    row i's true partner, column i, is a candidate of 90 % of the rows and agrees on
    each key with probability 0.8 (other pairs 0.25).
    """
    rng = np.random.default_rng(seed)
    agree = np.linspace(1.0, 3.0, keys)
    disagree = -np.linspace(0.5, 2.0, keys)
    idx = (np.arange(n)[:, None] + rng.integers(-300, 301, size=(n, c))) % n
    p = np.full((n, c), 0.25)
    has = rng.random(n) < 0.9
    idx[has, 0] = np.flatnonzero(has)
    p[has, 0] = 0.8
    w = np.zeros((n, c))
    for k in range(keys):
        w += np.where(rng.random((n, c)) < p, agree[k], disagree[k])
    order = np.argsort(-w, axis=1, kind="stable")
    return np.take_along_axis(idx, order, 1), np.take_along_axis(w, order, 1)


def objective(cand, r: np.ndarray, c: np.ndarray, unmatched: str | None) -> float:
    """What the sparse solve maximises: the pairs' total weight, plus (``row_floor``)
    each unassigned row's value, a hair below its worst candidate's weight. Tied optima
    may differ in the rows they leave out, so row_floor solutions compare on this."""
    total = float(cand.lookup(r, c).sum())
    if unmatched is None:
        return total
    w = cand.weights
    cost = (w.max() - w) + 1.0
    worst = np.full(cand.shape[0], 1.0)
    np.maximum.at(worst, cand.rows, cost)
    dummy = worst + 1e-9 * (1.0 + float(cost.max()))
    left = np.ones(cand.shape[0], bool)
    left[r] = False
    return total + float((w.max() + 1.0 - dummy[left]).sum())


def _lapjvsp_child(path: str, unmatched: str) -> None:
    """Child process: the former sparse solve (LAPJVsp with dummy columns); prints time
    and total weight."""
    import scipy.sparse as sp
    from scipy.sparse.csgraph import min_weight_full_bipartite_matching

    from sdcdist.linkage.assignment import Candidates
    z = np.load(path)
    cand = Candidates.from_topc(z["idx"], z["w"], int(z["n"])).dedup(True)
    n_r, n_c = cand.shape
    t0 = time.perf_counter()
    w = cand.weights
    cost = (w.max() - w) + 1.0
    if unmatched == "none":
        dummy = np.full(n_r, float(n_r) * (float(cost.max()) + 1.0) + 1.0)
    else:
        worst = np.full(n_r, 1.0)
        np.maximum.at(worst, cand.rows, cost)
        dummy = worst + 1e-9 * (1.0 + float(cost.max()))
    G = sp.csr_array((np.concatenate([cost, dummy]),
                      (np.concatenate([cand.rows, np.arange(n_r)]),
                       np.concatenate([cand.cols, n_c + np.arange(n_r)]))),
                     shape=(n_r, n_c + n_r))
    r, c = min_weight_full_bipartite_matching(G)
    real = c < n_c
    t = time.perf_counter() - t0
    print(f"{t} {objective(cand, r[real], c[real], None if unmatched == 'none' else unmatched)}"
          f" {int(real.sum())}")


def lapjvsp_timed(idx: np.ndarray, w: np.ndarray, n: int, unmatched: str | None,
                  timeout: float) -> tuple[float | None, float | None]:
    """(seconds, objective) of the former sparse solve, or (None, None) on timeout."""
    with tempfile.TemporaryDirectory() as d:
        path = str(Path(d) / "g.npz")
        np.savez(path, idx=idx, w=w, n=n)
        try:
            out = subprocess.run([sys.executable, __file__, "--lapjvsp", path,
                                  "none" if unmatched is None else unmatched],
                                 capture_output=True, text=True, timeout=timeout, check=True)
        except subprocess.TimeoutExpired:
            return None, None
    t, total, _ = out.stdout.split()
    return float(t), float(total)


def _load_old(path: str):
    spec = importlib.util.spec_from_file_location("sdcdist.linkage._assignment_before", path)
    mod = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = mod
    spec.loader.exec_module(mod)
    return mod


class _InProcess:
    """A former single-file assignment module (``--old-module``), timed in this process."""

    def __init__(self, mod):
        self.mod = mod
        mod.exact_dense(np.eye(3))
        mod.assign_by_content(np.eye(3), np.arange(3), np.arange(3))

    def dense(self, P):
        (r, c, _), t, tc = _timed(self.mod.exact_dense, P)
        return float(P[r, c].sum()), t, tc

    def by_content(self, W, ro, co, kw):
        (r, c, _), t, tc = _timed(self.mod.assign_by_content, W, ro, co, **kw)
        return float(W[r, c].sum()), t, tc


#: The child that times a former revision's solver: ``sdcdist`` of that revision first on
#: the path; the call runs once untimed (the extracted tree's kernels compile into its
#: own cache), then timed.
_CHILD = """
import json, sys, time
import numpy as np
import sdcdist
from sdcdist.linkage import assignment as old
assert sdcdist.__file__.startswith(sys.argv[3]), sdcdist.__file__
kind, path = sys.argv[1], sys.argv[2]
d = np.load(path)
W = d["W"]

def solve():
    if kind == "dense":
        return old.exact_dense(W)[:2]
    r, c, _ = old.assign_by_content(W, d["ro"], None, maximize=True, rows_ordered=True,
                                    dense_limit=int(max(W.shape)))
    inv = np.empty_like(d["ro"])
    inv[d["ro"]] = np.arange(inv.size)
    return inv[r], c


solve()            # this tree's kernels compiled (its own cache) outside the timing
w0, c0 = time.perf_counter(), time.process_time()
r, c = solve()
print(json.dumps([float(W[r, c].sum()), time.perf_counter() - w0, time.process_time() - c0]))
"""


class _Revision:
    """The assignment of ``sdcdist`` at a git revision (its whole package, extracted with
    ``git archive``), timed in a child process, since two versions of the package cannot
    be imported in one: the same matrices, through a file."""

    def __init__(self, rev: str):
        tmp = Path(tempfile.mkdtemp(prefix="assign_before_"))
        self.root = tmp / "rev"
        self.root.mkdir()
        archive = subprocess.run(["git", "archive", rev, "sdcdist"], cwd=HERE.parent,
                                 capture_output=True)
        if archive.returncode != 0:
            raise SystemExit(f"--before {rev}: git archive failed: "
                             f"{archive.stderr.decode().strip()}")
        subprocess.run(["tar", "-x", "-C", str(self.root)], input=archive.stdout, check=True)
        self.tmp = tmp

    def _run(self, kind, **arrays):
        import json
        import os
        path = self.tmp / "m.npz"
        np.savez(path, **arrays)
        env = {**os.environ, "PYTHONPATH": str(self.root)}
        # run from the extracted tree: ``python -c`` puts its working directory first
        out = subprocess.run([sys.executable, "-c", _CHILD, kind, str(path), str(self.root)],
                             capture_output=True, text=True, env=env, cwd=self.root)
        if out.returncode != 0:
            raise SystemExit(f"the former solver failed:\n{out.stderr[-2000:]}")
        return tuple(json.loads(out.stdout.strip().splitlines()[-1]))

    def dense(self, P):
        return self._run("dense", W=P)

    def by_content(self, W, ro, co, kw):
        return self._run("content", W=W, ro=ro)


def _timed(f, *args, **kw):
    """(result, wall seconds, CPU seconds of this process)."""
    w0, c0 = time.perf_counter(), time.process_time()
    out = f(*args, **kw)
    return out, time.perf_counter() - w0, time.process_time() - c0


def _before(a: argparse.Namespace):
    """The former solver (``--old-module`` file, or the package at ``--before`` REV), or
    None (``--before ""``)."""
    if a.old_module:
        return _InProcess(_load_old(a.old_module))
    if not a.before:
        return None
    return _Revision(a.before)


def dense_part(a: argparse.Namespace) -> None:
    from scipy.optimize import linear_sum_assignment

    from sdcdist.data import load_microdata, reference_file
    from sdcdist.linkage import assignment as new
    from sdcdist.masking import REGISTRY
    sys.path.insert(0, str(HERE))
    from prl import utility_like
    old = _before(a)
    what = (a.old_module if a.old_module else f"sdcdist at {a.before}" if a.before else
            "none (--before REV times a former revision)")
    print(f"before: {what}")

    census = load_microdata(reference_file("census")).values.astype(np.float64)
    noise = REGISTRY["noise"]
    cases = [("census micmul k=3", census,
              REGISTRY["micmul"](census, 3, rng=np.random.default_rng(1))),
             ("census noise 0.1", census, noise(census, np.sqrt(0.1),
                                                rng=np.random.default_rng(1)))]
    if a.synth:
        X = utility_like(a.synth)
        # the EM capped at 30 iterations: the weights keep their structure (sums of
        # per-column level weights), and the benchmark is about the assignment
        cases.append((f"synth {a.synth} noise 0.1", X,
                      noise(X, np.sqrt(0.1), rng=np.random.default_rng(1)),
                      {"em_options": {"max_iter": 30}}))
    # compile (or load the compiled kernels) outside the timings: both starts of the
    # new solver, the old one
    _, tw, tc = _timed(lambda: (new.exact_dense(np.eye(3), auction=False),
                                new.exact_dense(np.eye(3), auction=True),
                                new.assign_by_content(np.eye(3), np.arange(3), np.arange(3))))
    print(f"first (cold) call of the new exact_dense in this process: {tw:.2f} s wall, "
          f"{tc:.2f} s CPU (numba compilation, or loading its cache)")
    hdr = (f"{'dense matrix':<24} {'cmp':<7} {'distinct w':>10} {'scipy s':>8} "
           f"{'before s':>8} {'cpu':>6} {'after s':>7} {'cpu':>6} {'before/after':>12} "
           f"{'scipy/after':>11} {'rounds':>6} {'edges':>7} {'total (scipy)':>15} "
           f"{'total (after)':>15}")
    print(hdr)
    driver = []
    mats = [(name, lab, kw, X, Y, extra) for name, X, Y, *extra in cases
            for lab, kw in [("default", {}), ("l 0.05", {"method": "l", "t": 0.05})]]
    if a.ties:
        mats.append((f"integer ties {a.ties}", "-", None, None, None, None))
    for name, lab, kw, X, Y, extra in mats:
        if kw is None:
            W = tie_heavy(a.ties)
            ro, co = np.arange(a.ties), None
        else:
            W, ro, co = weights(X, Y, **kw, **(extra[0] if extra else {}))
        P = W                                           # as the solver sees it
        (r0, c0), ts, _ = _timed(linear_sum_assignment, P, maximize=True)
        s0 = P[r0, c0].sum()
        to = tco = float("nan")
        if old is not None:
            s2, to, tco = old.dense(P)
            assert abs(s2 - s0) <= 1e-9 * max(1.0, abs(s0))
        (r1, c1, info), te, tce = _timed(new.exact_dense, P)
        s1 = P[r1, c1].sum()
        assert abs(s0 - s1) <= 1e-9 * max(1.0, abs(s0)), (name, lab, s0, s1)
        print(f"{name:<24} {lab:<7} {np.unique(W).size:>10} {ts:>8.2f} {to:>8.3f} "
              f"{tco:>6.3f} {te:>7.3f} {tce:>6.3f} {to / te:>12.1f} {ts / te:>11.1f} "
              f"{info['exact_rounds']:>6} {info['exact_edges']:>7} {s0:>15.6f} "
              f"{s1:>15.6f}", flush=True)
        del P
        # what PRL runs: assign_by_content on the matrix in the linkage's order
        kw2 = {"maximize": True, "dense_limit": max(W.shape), "rows_ordered": True}
        tb = tbc = float("nan")
        if old is not None:
            _, tb, tbc = old.by_content(W, ro, co, kw2)
        (r3, c3, _), ta, tac = _timed(new.assign_by_content, W, ro, co, **kw2)
        inv = np.empty_like(ro)                # row of W of each masked record
        inv[ro] = np.arange(ro.size)
        assert abs(W[inv[r3], c3].sum() - s0) <= 1e-9 * max(1.0, abs(s0))
        driver.append((name, lab, tb, tbc, ta, tac))
    print(f"\n{'assign_by_content (PRL)':<24} {'cmp':<7} {'before s':>8} {'cpu':>6} "
          f"{'after s':>7} {'cpu':>6} {'before/after':>12} {'cpu ratio':>9}")
    for name, lab, tb, tbc, ta, tac in driver:
        print(f"{name:<24} {lab:<7} {tb:>8.3f} {tbc:>6.3f} {ta:>7.3f} {tac:>6.3f} "
              f"{tb / ta:>12.1f} {tbc / tac:>9.1f}", flush=True)


def tie_heavy(n: int, seed: int = 0) -> np.ndarray:
    """Integer weights -5..3, 60 % at the floor -5, rows repeated in triplets (as after
    micro-aggregation) and the last quarter of the columns equal to the first."""
    rng = np.random.default_rng(seed)
    W = np.where(rng.random((n, n)) < 0.6, -5, rng.integers(-5, 4, size=(n, n)))
    W = W.astype(np.float64)[np.repeat(np.arange(n), 3)[:n]]
    W[:, 3 * n // 4:] = W[:, [0]]
    return np.ascontiguousarray(W)


def sparse_part(a: argparse.Namespace) -> None:
    from sdcdist.linkage.assignment import Candidates, assign
    assign(Candidates.from_topc(np.array([[0, 1], [1, 0]]), np.ones((2, 2)), 2))
    print(f"\n{'sparse top-20 graph':<24} {'unmatched':<10} {'LAPJVsp s':>10} {'new s':>7} "
          f"{'old/new':>8} {'assigned':>9} {'objective (LAPJVsp)':>20} {'objective (new)':>16}")
    for n in a.sparse:
        idx, w = prl_like_graph(n)
        g = Candidates.from_topc(idx, w, n)
        for um in ("row_floor", None):
            t_old, tot_old = lapjvsp_timed(idx, w, n, um, a.timeout)
            t0 = time.perf_counter()
            r, c, info = assign(g, unmatched=um)
            t = time.perf_counter() - t0
            tot = objective(g.dedup(True), r, c, um)
            if tot_old is not None:
                assert abs(tot - tot_old) <= 1e-9 * abs(tot_old), (n, um, tot, tot_old)
            old_s = f"{t_old:>10.2f}" if t_old is not None else f"{'>' + str(a.timeout):>10}"
            ratio = f"{t_old / t:>8.1f}" if t_old is not None else f"{'>' + format(a.timeout / t, '.0f'):>8}"
            tot_s = f"{tot_old:>20.2f}" if tot_old is not None else f"{'-':>20}"
            print(f"{n:<24} {str(um):<10} {old_s} {t:>7.2f} {ratio} {r.size:>9} {tot_s} "
                  f"{tot:>16.2f}", flush=True)


def main() -> None:
    if len(sys.argv) > 1 and sys.argv[1] == "--lapjvsp":
        _lapjvsp_child(sys.argv[2], sys.argv[3])
        return
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--synth", type=int, default=5000, help="records of the synthetic file")
    ap.add_argument("--sparse", type=lambda s: [int(x) for x in s.split(",") if x],
                    default=[100_000, 1_000_000], help="rows of the sparse graphs")
    ap.add_argument("--timeout", type=float, default=300.0,
                    help="seconds before the former sparse solver is given up")
    ap.add_argument("--ties", type=int, default=3000,
                    help="size of the tie-heavy integer matrix (0: none)")
    ap.add_argument("--before", default="",
                    help="a git revision whose sdcdist is timed as 'before', in a child "
                         "process (default: none; the 'before' columns then show nan)")
    ap.add_argument("--old-module", default=None,
                    help="a file with a former single-file assignment.py, timed in this "
                         "process (instead of --before)")
    a = ap.parse_args()
    dense_part(a)
    if a.sparse:
        sparse_part(a)


if __name__ == "__main__":
    main()
