"""Benchmark: the PRL candidate KD-tree build at 1,000,000 records, before and after it was
compiled, in one run.

Synthetic file (``benchmarks/prl_scale.make_files``: 8 numeric keys, seed 1), the default
comparison; the split scale of weights fitted on the first ``--fit`` records (the EM on all
their pairs, as the driver fits). Times (wall, best of ``--repeat``) the node-by-node build
as it was (:func:`build_tree_loop`, kept here verbatim) and :func:`kdtree.build_tree`, after a
warm-up that compiles the kernels, then checks that both trees give the same candidates
and weights (top 20 of ``--check`` B rows, by :func:`topc.topc_search`) and says whether
their nodes are the same (they differ only where tied values straddle a node's median: the
old build placed those by ``np.argpartition``, the new one by row).

    python benchmarks/prl_tree.py [--n 1000000] [--repeat 1] [--check 2000]
"""

from __future__ import annotations

import argparse
import os
import sys
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))
from prl_scale import make_files  # noqa: E402

from sdcdist.linkage.prl.ranked import BLOCK_ROWS, constant_tolerances, rank_blocks  # noqa: E402
from sdcdist.linkage.prl.kdtree import LEAF_SIZE, RANKED_LEAF_SIZE, split_columns  # noqa: E402


import numba  # noqa: E402


@numba.njit(cache=True, nogil=True)
def _boxes(vp, start, stop):
    nn = start.size
    K = vp.shape[1]
    lo = np.full((nn, K), np.inf)
    hi = np.full((nn, K), -np.inf)
    for q in range(nn):
        for p in range(start[q], stop[q]):
            for k in range(K):
                x = vp[p, k]
                if x < lo[q, k]:
                    lo[q, k] = x
                if x > hi[q, k]:
                    hi[q, k] = x
    return lo, hi


@numba.njit(cache=True, nogil=True)
def _tol_max(tolT, start, stop):
    # (n_nodes, K, L) the largest tolerance of each node, column and level (NaN: +inf)
    K, L = tolT.shape[0], tolT.shape[1]
    nn = start.size
    out = np.full((nn, K, L), -np.inf)
    for q in range(nn):
        for k in range(K):
            for l in range(L):
                m = -np.inf
                for p in range(start[q], stop[q]):
                    t = tolT[k, l, p]
                    if not (t <= m):
                        m = t if t == t else np.inf
                out[q, k, l] = m
    return out


def build_tree_loop(a: dict, *, leaf_size: int | None = None, scale: np.ndarray | None = None,
               ranks: bool | None = None) -> dict[str, np.ndarray]:
    """The KD-tree build as it was before it was compiled (a Python loop over the nodes,
    numpy per node; ties at a median placed by ``np.argpartition``), verbatim, for the
    comparison. KD-tree of A's compared values for :func:`topc_search`.

    Nodes split at the median of their widest column (NaN sorts last): widest
    by spread, or with ``scale`` (K,) by ``spread * scale / max(median |v|,
    0.1)``, the spread in tolerances times a weight factor
    (:func:`split_scale`), among the :func:`split_columns` columns of largest
    ``scale`` (the others only where none of those varies in a node). Every
    node keeps the bounding box of its finite values (empty: ``lo > hi``).

    Returns
    -------
    dict
        ``perm`` (n_a,) A rows in leaf order; ``vT`` (K, n_a), ``tolT``
        (K, L, n_a): A's values and tolerances in that order; ``start``,
        ``stop``, ``left``, ``right``
        (n_nodes,) int64 (children -1 at leaves); ``lo``, ``hi`` (n_nodes, K);
        ``ranks``: :func:`~sdcdist.linkage.prl.ranked.rank_blocks`, where every
        column's tolerances are the same on every row (unless ``ranks`` is False; then
        :func:`topc_search` bounds each pair of a leaf by its ranks).
    """
    v = np.asarray(a["v"], dtype=np.float64)
    n, K = v.shape
    tolA = np.asarray(a["tol"]).transpose(1, 2, 0)
    tc = constant_tolerances(tolA, np.full(K, tolA.shape[1] + 1)) if n else None
    if ranks is None:
        ranks = tc is not None
    if leaf_size is None:
        leaf_size = RANKED_LEAF_SIZE if ranks else LEAF_SIZE
    key = np.where(np.isnan(v), np.inf, v)
    chosen = np.ones(K, dtype=bool)
    if scale is not None:
        chosen[np.argsort(-np.asarray(scale), kind="stable")[split_columns(n, leaf_size, K):]] \
            = False
    perm = np.arange(n, dtype=np.int64)
    start, stop, left, right, dim, cut = [], [], [], [], [], []
    stack = [(0, n, -1, 0)]
    while stack:
        s, e, parent, side = stack.pop()
        node = len(start)
        start.append(s)
        stop.append(e)
        left.append(-1)
        right.append(-1)
        dim.append(0)
        cut.append(0.0)
        if parent >= 0:
            (left if side == 0 else right)[parent] = node
        if e - s <= leaf_size:
            continue
        seg = key[perm[s:e]]
        fin = np.where(np.isfinite(seg), seg, np.nan)
        with np.errstate(invalid="ignore"):
            spread = np.nanmax(np.where(np.isnan(fin), -np.inf, fin), axis=0) - \
                np.nanmin(np.where(np.isnan(fin), np.inf, fin), axis=0)
        spread = np.where(np.isnan(spread), -1.0, spread)
        if scale is not None:
            # spread in tolerances at the node's median magnitude, times the weight range
            med = np.nanmedian(np.abs(fin), axis=0) if np.isfinite(fin).any() else 0.0
            spread = spread * scale / np.maximum(np.nan_to_num(med, nan=0.0), 0.1)
        k = int(np.argmax(np.where(chosen, spread, -np.inf)))
        if not spread[k] > 0:                  # none of the chosen columns varies here
            k = int(np.argmax(spread))
        mid = (e - s) // 2
        part = np.argpartition(seg[:, k], mid, kind="introselect")
        perm[s:e] = perm[s:e][part]
        dim[node] = k
        cut[node] = float(seg[part[mid], k])
        stack.append((s + mid, e, node, 1))
        stack.append((s, s + mid, node, 0))
    start_a = np.asarray(start, dtype=np.int64)
    stop_a = np.asarray(stop, dtype=np.int64)
    vp = np.ascontiguousarray(v[perm])
    lo, hi = _boxes(vp, start_a, stop_a)
    tolT = np.ascontiguousarray(a["tol"][perm].transpose(1, 2, 0))
    tree = {"perm": perm, "vT": np.ascontiguousarray(vp.T), "tolT": tolT,
            "tmx": _tol_max(tolT, start_a, stop_a),
            "start": start_a, "stop": stop_a, "left": np.asarray(left, dtype=np.int64),
            "right": np.asarray(right, dtype=np.int64), "lo": lo, "hi": hi,
            "dim": np.asarray(dim, dtype=np.int64), "cut": np.asarray(cut)}
    if ranks and tc is not None and leaf_size <= BLOCK_ROWS:
        tree["ranks"] = rank_blocks(tree, tc)
    return tree


def _fitted(A: np.ndarray, B: np.ndarray, n_fit: int):
    from sdcdist.linkage.prl import DEFAULTS, comparison
    from sdcdist.linkage.prl.blocks import blocked_pattern_counts, prepare_sides
    from sdcdist.linkage.prl.driver import fit_model
    from sdcdist.parallel import Runner
    runner = Runner()
    cols = tuple(range(A.shape[1]))
    cmp = comparison(len(cols))
    Ap, Bp, _ = prepare_sides(runner, runner.share(A[:n_fit]), runner.share(B[:n_fit]), cols,
                              cols, cmp)
    counts, pairs = blocked_pattern_counts(runner, Ap, Bp, n_fit, n_fit, cmp,
                                           rows=DEFAULTS.block_rows)
    return cmp, fit_model(counts, cmp, n_fit, n_fit, pairs, DEFAULTS)[1]


def _best(f, repeat: int):
    best, out = np.inf, None
    for _ in range(repeat):
        t0 = time.perf_counter()
        out = f()
        best = min(best, time.perf_counter() - t0)
    return best, out


def main() -> None:
    from sdcdist.linkage.prl import kdtree, prepare_side, topc
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--n", type=int, default=1_000_000)
    ap.add_argument("--repeat", type=int, default=1)
    ap.add_argument("--check", type=int, default=2000)
    ap.add_argument("--fit", type=int, default=3000)
    args = ap.parse_args()
    A, B = make_files(args.n)
    cmp, wp = _fitted(A, B, args.fit)
    cols = tuple(range(A.shape[1]))
    a = prepare_side(A, cols, cmp, side="a")
    b = prepare_side(B[:args.check], cols, cmp, side="b")
    scale = kdtree.split_scale(wp, cmp)
    small = {k: v[:5000] for k, v in a.items()}
    kdtree.build_tree(small, scale=scale)                  # compile (cached) before timing
    build_tree_loop(small, scale=scale)
    print(f"KD-tree build of {args.n:,} x {A.shape[1]} records (default comparison, fitted "
          f"split scale); load average %.1f %.1f %.1f" % os.getloadavg())
    t_old, old = _best(lambda: build_tree_loop(a, scale=scale), args.repeat)
    t_new, new = _best(lambda: kdtree.build_tree(a, scale=scale), args.repeat)
    print(f"  before (Python loop per node): {t_old:7.2f} s, {old['start'].size:,} nodes")
    print(f"  after  (compiled):             {t_new:7.2f} s, {new['start'].size:,} nodes "
          f"({t_old / t_new:.1f}x)")
    same = all(np.array_equal(old[k], new[k]) for k in ("start", "stop", "left", "right", "dim",
                                                        "cut"))
    print(f"  same nodes (split columns, cuts, children): {same}")
    c_old = topc.topc_search(old, b, cmp, wp, 20)
    c_new = topc.topc_search(new, b, cmp, wp, 20)
    eq = all(np.array_equal(c_old[k], c_new[k]) for k in ("idx", "w"))
    print(f"  same top-20 candidates and weights of {args.check:,} B rows: {eq}")


if __name__ == "__main__":
    main()
