"""PRL KD-tree of A's compared values for the candidate search
(:func:`~sdcdist.linkage.prl.topc.topc_search`): the compiled node split at the median
(:func:`_build_kernel`), each node's bounding box and tolerance maxima, and the tree
(:func:`build_tree`) with the column weights it splits by (:func:`split_scale`)."""

from __future__ import annotations

from typing import Any

import numba
import numpy as np

from .comparison import Comparison
from .ranked import BLOCK_ROWS, constant_tolerances, rank_blocks

__all__ = ["build_tree", "split_scale", "split_columns", "LEAF_SIZE", "SPLITS_PER_COLUMN",
           "RANKED_LEAF_SIZE"]


#: A records per leaf of the candidate tree.
LEAF_SIZE = 128

#: The same where the leaves are bounded pair by pair by ranks (:mod:`.ranked`): a pair
#: costs little there, a node's bound much more (1.3x faster than 128 leaves, 1.1x than
#: 512, on 200,000 synthetic records of 8 keys).
RANKED_LEAF_SIZE = 1024

#: Splits of a root-to-leaf path per column the tree aims at, where weights are given
#: (:func:`split_columns`).
SPLITS_PER_COLUMN = 2.5


def split_columns(n: int, leaf_size: int, n_columns: int) -> int:
    """How many columns a tree of ``n`` rows with weights (``scale``) splits: the
    largest scales only, about :data:`SPLITS_PER_COLUMN` times each on a path of
    ``log2(n / leaf_size)`` splits, at least 3.

    A box bounds the weights only in the columns it was split on; split evenly over 8
    columns, the 1,000 leaves of 1,000,000 records are split about once in each, and
    the search bounds nearly every pair. Chosen on the synthetic files of 8 keys
    (time per B row against all 8 columns: 59,315 records 3 columns 0.56x,
    200,000 3 0.56x, 1,000,000 4 0.65x); it changes the speed, never the candidates.
    """
    depth = np.log2(max(2.0, n / max(1, leaf_size)))
    return int(min(n_columns, max(3, round(depth / SPLITS_PER_COLUMN))))


def build_tree(a: dict, *, leaf_size: int | None = None, scale: np.ndarray | None = None,
               ranks: bool | None = None) -> dict[str, np.ndarray]:
    """KD-tree of A's compared values for :func:`~sdcdist.linkage.prl.topc.topc_search`.

    Nodes split at the median of their widest column (NaN sorts last): widest
    by spread, or with ``scale`` (K,) by ``spread * scale / max(median |v|,
    0.1)``, the spread in tolerances times a weight factor
    (:func:`split_scale`), among the :func:`split_columns` columns of largest
    ``scale`` (the others only where none of those varies in a node). A node of
    ``n`` rows sends its ``n // 2`` smallest values to the left child, rows of
    equal value by their row in A (so the tree is a function of A's values and row
    order, on any CPU); a leaf lists its rows in A's order. Every node keeps the
    bounding box of its finite values (empty: ``lo > hi``). Nodes are numbered depth
    first, the left child first. Compiled (:func:`_build_kernel`).

    Returns
    -------
    dict
        ``perm`` (n_a,) A rows in leaf order; ``vT`` (K, n_a), ``tolT``
        (K, L, n_a): A's values and tolerances in that order; ``start``,
        ``stop``, ``left``, ``right``
        (n_nodes,) int64 (children -1 at leaves); ``lo``, ``hi`` (n_nodes, K);
        ``ranks``: :func:`~sdcdist.linkage.prl.ranked.rank_blocks`, where every
        column's tolerances are the same on every row (unless ``ranks`` is False; then
        :func:`~sdcdist.linkage.prl.topc.topc_search` bounds each pair of a leaf by its ranks).
    """
    v = np.asarray(a["v"], dtype=np.float64)
    n, K = v.shape
    tolA = np.asarray(a["tol"]).transpose(1, 2, 0)
    tc = constant_tolerances(tolA, np.full(K, tolA.shape[1] + 1)) if n else None
    if ranks is None:
        ranks = tc is not None
    if leaf_size is None:
        leaf_size = RANKED_LEAF_SIZE if ranks else LEAF_SIZE
    chosen = np.ones(K, dtype=np.bool_)
    if scale is not None:
        chosen[np.argsort(-np.asarray(scale), kind="stable")[split_columns(n, leaf_size, K):]] \
            = False
    sc = np.ones(K) if scale is None else np.ascontiguousarray(scale, dtype=np.float64)
    keyT = np.ascontiguousarray(np.where(np.isnan(v), np.inf, v).T)
    perm, start_a, stop_a, left, right, dim, cut = _build_kernel(
        keyT, max(1, int(leaf_size)), chosen, sc, scale is not None)
    vp = np.ascontiguousarray(v[perm])
    lo, hi = _boxes(vp, start_a, stop_a, left, right)
    tolT = _gather_tol(np.ascontiguousarray(a["tol"], dtype=np.float64), perm)
    tree = {"perm": perm, "vT": np.ascontiguousarray(vp.T), "tolT": tolT,
            "tmx": _tol_max(tolT, start_a, stop_a, left, right),
            "start": start_a, "stop": stop_a, "left": left, "right": right, "lo": lo, "hi": hi,
            "dim": dim, "cut": cut}
    if ranks and tc is not None and leaf_size <= BLOCK_ROWS:
        tree["ranks"] = rank_blocks(tree, tc)
    return tree


@numba.njit(cache=True, nogil=True)
def _select(vals, rows, pos, s, e, m):
    """Reorder ``vals``, ``rows``, ``pos`` (together) in ``s:e`` so that the ``m``-th (from
    ``s``) in the order by value, then row, is at ``s + m``, those before it left of it and
    the others right (quickselect; the order is total, so both sides are determined)."""
    lo, hi = s, e - 1
    kth = s + m
    while hi > lo:
        mid = lo + (hi - lo) // 2
        # median of three to hi
        if _before(vals, rows, mid, lo):
            _swap3(vals, rows, pos, mid, lo)
        if _before(vals, rows, hi, lo):
            _swap3(vals, rows, pos, hi, lo)
        if _before(vals, rows, mid, hi):
            _swap3(vals, rows, pos, mid, hi)
        pv, pr = vals[hi], rows[hi]
        st = lo
        for i in range(lo, hi):
            if vals[i] < pv or (vals[i] == pv and rows[i] < pr):
                _swap3(vals, rows, pos, i, st)
                st += 1
        _swap3(vals, rows, pos, st, hi)
        if st == kth:
            return
        if st < kth:
            lo = st + 1
        else:
            hi = st - 1


@numba.njit(cache=True, nogil=True, inline="always")
def _before(vals, rows, i, j):
    # entry i before entry j: by value, then by row (values are never NaN here)
    return vals[i] < vals[j] or (vals[i] == vals[j] and rows[i] < rows[j])


@numba.njit(cache=True, nogil=True, inline="always")
def _swap3(vals, rows, pos, i, j):
    vals[i], vals[j] = vals[j], vals[i]
    rows[i], rows[j] = rows[j], rows[i]
    pos[i], pos[j] = pos[j], pos[i]


@numba.njit(cache=True, nogil=True)
def _median_abs(col, s, e, buf):
    """Median of ``|v|`` over the finite values of ``col[s:e]`` (NaN if none), as
    ``np.nanmedian``: the middle value, or the mean of the two middle ones."""
    m = 0
    for p in range(s, e):
        x = col[p]
        if np.isfinite(x):
            buf[m] = abs(x)
            m += 1
    if m == 0:
        return np.nan
    h = m // 2
    hi_val = _kth_smallest(buf, m, h)
    if m % 2 == 1:
        return hi_val
    lo_val = buf[0]
    for p in range(1, h):                # the h smallest are left of the h-th
        if buf[p] > lo_val:
            lo_val = buf[p]
    return (lo_val + hi_val) / 2.0


@numba.njit(cache=True, nogil=True)
def _kth_smallest(buf, m, h):
    """The ``h``-th smallest of ``buf[:m]`` (no NaN), moved to ``buf[h]`` with the smaller
    ones left of it (quickselect)."""
    lo, hi = 0, m - 1
    while hi > lo:
        mid = lo + (hi - lo) // 2
        if buf[mid] < buf[lo]:
            buf[mid], buf[lo] = buf[lo], buf[mid]
        if buf[hi] < buf[lo]:
            buf[hi], buf[lo] = buf[lo], buf[hi]
        if buf[mid] < buf[hi]:
            buf[mid], buf[hi] = buf[hi], buf[mid]
        piv = buf[hi]
        i, j = lo, hi - 1
        # Hoare-style: equal values split between the sides (no quadratic time on ties)
        while True:
            while i < hi and buf[i] < piv:
                i += 1
            while j > lo and buf[j] > piv:
                j -= 1
            if i >= j:
                break
            buf[i], buf[j] = buf[j], buf[i]
            i += 1
            j -= 1
        buf[i], buf[hi] = buf[hi], buf[i]
        if i == h:
            break
        if i < h:
            lo = i + 1
        else:
            hi = i - 1
    return buf[h]


@numba.njit(cache=True, nogil=True)
def _scale_spread(W, s, e, buf, spread, scale, chosen, which, any_finite):
    # spread[k] *= scale[k] / max(median |v|, 0.1) for the columns with chosen[k] == which
    for k in range(spread.size):
        if chosen[k] == which:
            med = _median_abs(W[k], s, e, buf) if any_finite else 0.0
            if np.isnan(med):
                med = 0.0
            spread[k] = spread[k] * scale[k] / max(med, 0.1)


@numba.njit(cache=True, nogil=True)
def _build_kernel(keyT, leaf_size, chosen, scale, scaled):
    """The nodes of :func:`build_tree` (values ``keyT`` (K, n), NaN as +inf): ``perm``,
    ``start``, ``stop``, ``left``, ``right``, ``dim``, ``cut``. The values are kept in
    node order (``W``, reordered with ``perm`` at each split), so that a node reads its
    rows' values contiguously."""
    K, n = keyT.shape
    W = keyT.copy()
    perm = np.arange(n, dtype=np.int64)
    cap = 1
    while cap * leaf_size < n:
        cap *= 2
    cap = 4 * cap + 1
    start = np.empty(cap, np.int64)
    stop = np.empty(cap, np.int64)
    left = np.full(cap, -1, np.int64)
    right = np.full(cap, -1, np.int64)
    dim = np.zeros(cap, np.int64)
    cut = np.zeros(cap)
    stack = np.empty((128, 4), np.int64)
    stack[0, 0], stack[0, 1], stack[0, 2], stack[0, 3] = 0, n, -1, 0
    top = 1
    nn = 0
    spread = np.empty(K)
    buf = np.empty(n)
    vals = np.empty(n)
    rows = np.empty(n, np.int64)
    pos = np.empty(n, np.int64)
    while top > 0:
        top -= 1
        s, e, parent, side = stack[top, 0], stack[top, 1], stack[top, 2], stack[top, 3]
        node = nn
        nn += 1
        start[node] = s
        stop[node] = e
        if parent >= 0:
            if side == 0:
                left[parent] = node
            else:
                right[parent] = node
        if e - s <= leaf_size:
            perm[s:e] = np.sort(perm[s:e])          # a leaf lists its rows in A's order
            continue
        any_finite = False
        for k in range(K):
            mx = -np.inf
            mn = np.inf
            col = W[k]
            for p in range(s, e):
                x = col[p]
                if np.isfinite(x):
                    any_finite = True
                    if x > mx:
                        mx = x
                    if x < mn:
                        mn = x
            spread[k] = mx - mn          # -inf without a finite value, as np.nanmax - nanmin
        for k in range(K):
            if np.isnan(spread[k]):
                spread[k] = -1.0
        if scaled:
            # spread in tolerances at the node's median magnitude, times the weight range
            # (the chosen columns' first; the others only where needed)
            _scale_spread(W, s, e, buf, spread, scale, chosen, True, any_finite)
        k = -1
        for c in range(K):                # the first largest among the chosen columns
            if chosen[c] and (k < 0 or spread[c] > spread[k]
                              or (np.isnan(spread[c]) and not np.isnan(spread[k]))):
                k = c
        if k < 0 or not spread[k] > 0:   # none of the chosen columns varies here
            if scaled:
                _scale_spread(W, s, e, buf, spread, scale, chosen, False, any_finite)
            k = 0
            for c in range(1, K):
                if spread[c] > spread[k] or (np.isnan(spread[c]) and not np.isnan(spread[k])):
                    k = c
        mid = (e - s) // 2
        for p in range(s, e):
            vals[p] = W[k, p]
            rows[p] = perm[p]
            pos[p] = p
        _select(vals, rows, pos, s, e, mid)
        for p in range(s, e):
            perm[p] = rows[p]
        for c in range(K):               # the values follow their rows
            col = W[c]
            for p in range(s, e):
                buf[p] = col[pos[p]]
            col[s:e] = buf[s:e]
        dim[node] = k
        cut[node] = W[k, s + mid]
        if top + 2 > stack.shape[0]:
            grown = np.empty((2 * stack.shape[0], 4), np.int64)
            grown[:top] = stack[:top]
            stack = grown
        stack[top, 0], stack[top, 1], stack[top, 2], stack[top, 3] = s + mid, e, node, 1
        stack[top + 1, 0], stack[top + 1, 1], stack[top + 1, 2], stack[top + 1, 3] = \
            s, s + mid, node, 0
        top += 2
    return (perm, start[:nn].copy(), stop[:nn].copy(), left[:nn].copy(), right[:nn].copy(),
            dim[:nn].copy(), cut[:nn].copy())

def split_scale(wp: Any, cmp: Comparison) -> np.ndarray:
    """How much each column's weight can vary, to the 4th power: :func:`build_tree`'s
    ``scale`` for a candidate search with these weights.

    The search's bound is loose in the columns whose weights vary most, so the
    tree splits those more often. The power was chosen on synthetic files (8
    keys: 4x fewer pairs weighed than splitting by spread alone); it changes
    the speed, never the candidates.
    """
    rng = np.empty(len(cmp.levels))
    for k, L in enumerate(cmp.n_levels):
        if wp.rule[k]:
            w = wp.w_level[k, :L]
            rng[k] = w.max() - w.min()
        else:
            rng[k] = abs(wp.w_agr[k] - wp.w_dis[k])
    return np.nan_to_num(rng, nan=1.0, posinf=1e300) ** 4 + 1e-300


@numba.njit(cache=True, nogil=True)
def _boxes(vp, start, stop, left, right):
    # (n_nodes, K) each node's smallest and largest value of each column (NaN left out; an
    # empty box lo > hi): a leaf's from its rows, a parent's from its children (numbered
    # after it), so every row is read once
    nn = start.size
    K = vp.shape[1]
    lo = np.full((nn, K), np.inf)
    hi = np.full((nn, K), -np.inf)
    for q in range(nn - 1, -1, -1):
        if left[q] >= 0:
            a, b = left[q], right[q]
            for k in range(K):
                lo[q, k] = min(lo[a, k], lo[b, k])
                hi[q, k] = max(hi[a, k], hi[b, k])
            continue
        for p in range(start[q], stop[q]):
            for k in range(K):
                x = vp[p, k]
                if x < lo[q, k]:
                    lo[q, k] = x
                if x > hi[q, k]:
                    hi[q, k] = x
    return lo, hi


@numba.njit(cache=True, nogil=True)
def _tol_max(tolT, start, stop, left, right):
    # (n_nodes, K, L) the largest tolerance of each node, column and level (NaN: +inf): a
    # leaf's from its rows, a parent's from its children
    K, L = tolT.shape[0], tolT.shape[1]
    nn = start.size
    out = np.full((nn, K, L), -np.inf)
    for q in range(nn - 1, -1, -1):
        if left[q] >= 0:
            a, b = left[q], right[q]
            for k in range(K):
                for l in range(L):
                    out[q, k, l] = max(out[a, k, l], out[b, k, l])
            continue
        for k in range(K):
            for l in range(L):
                m = -np.inf
                for p in range(start[q], stop[q]):
                    t = tolT[k, l, p]
                    if not (t <= m):
                        m = t if t == t else np.inf
                out[q, k, l] = m
    return out


@numba.njit(cache=True, nogil=True)
def _gather_tol(tol, perm):
    # A's tolerances (n, K, L) in leaf order, transposed to (K, L, n)
    n, K, L = tol.shape
    out = np.empty((K, L, n))
    for p in range(n):
        i = perm[p]
        for k in range(K):
            for l in range(L):
                out[k, l, p] = tol[i, k, l]
    return out
