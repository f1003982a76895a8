"""PRL candidates: each masked record's ``c`` best original records by weight, over a block
of pairs (:func:`topc_block`) or by a best-first search of a KD-tree of A
(:func:`topc_search`, the counting path), with the same candidates, weights and ties."""

from __future__ import annotations

from typing import Any

import numba
import numpy as np

from .comparison import RULE_LINEAR, Comparison, all_rows, same_tolerances, transposed
from .ranked import (BOUND_U, block_intervals, bound_table, fixed_threshold, leaf_bounds,
                     leaf_weigh, ranked_eligible)
from .weights import WeightParams, column_weight, linear_column, weights_row

__all__ = ["topc_block", "merge_topc", "keep_top", "topc_search", "GROUP_ROWS"]


@numba.njit(cache=True, nogil=True, inline="always")
def keep_top(wt, idx, filled, x, g):
    """Offer candidate ``g`` with weight ``x`` to one B row's top list ``wt``/``idx``
    (length c, ``filled`` entries kept sorted by weight desc, then A row asc); returns
    the new fill."""
    c = wt.shape[0]
    if filled == c:
        if x < wt[c - 1] or (x == wt[c - 1] and g > idx[c - 1]):
            return filled
        p = c - 1
    else:
        p = filled
        filled += 1
    # the list is sorted: insertion from the tail
    while p > 0 and (wt[p - 1] < x or (wt[p - 1] == x and idx[p - 1] > g)):
        wt[p] = wt[p - 1]
        idx[p] = idx[p - 1]
        p -= 1
    wt[p] = x
    idx[p] = g
    return filled


@numba.njit(cache=True, nogil=True)
def _topc_kernel(avT, tolT, bv, lo, hi, aidx, identity, aglob, nlev, wa, wd, wl, rules, lin, order,
                 c, tconst):
    nb = bv.shape[0]
    idx = np.full((nb, c), -1, dtype=np.int64)
    wt = np.full((nb, c), -np.inf)
    w = np.empty(avT.shape[1] if identity else max(1, aidx.size))
    for j in range(nb):
        n = weights_row(avT, tolT, bv[j], lo[j], hi[j], aidx, identity, nlev, wa, wd, wl,
                         rules, lin, order, w, tconst)
        filled = 0
        for q in range(n):
            i = lo[j] + q if identity else aidx[lo[j] + q]
            filled = keep_top(wt[j], idx[j], filled, w[q], aglob[i])
    return idx, wt


def topc_block(a: dict, b: dict, cmp: Comparison, wp: WeightParams, c: int, *, a0: int = 0,
               lo: np.ndarray | None = None, hi: np.ndarray | None = None,
               aidx: np.ndarray | None = None, aglob: np.ndarray | None = None) -> dict:
    """Each B row's ``c`` best A rows of the block by weight (ties: lower A row first).

    Returns
    -------
    dict
        ``idx`` (n_b, c) int64 global A rows (-1 = none), ``w`` (n_b, c) weights.
    """
    identity = lo is None
    if identity:
        lo, hi, aidx = all_rows(b["v"].shape[0], a["v"].shape[0])
    if aglob is None:
        aglob = a0 + np.arange(a["v"].shape[0], dtype=np.int64)
    avT, tolT = transposed(a)
    idx, w = _topc_kernel(avT, tolT, b["v"], lo, hi, aidx, identity, aglob, cmp.n_levels,
                          wp.w_agr, wp.w_dis, wp.w_level, wp.rule, wp.lin, wp.order, int(c),
                          same_tolerances(tolT, cmp.n_levels))
    return {"idx": idx, "w": w}


def merge_topc(*parts: dict) -> dict:
    """Merge top-c lists of the same B rows over A blocks (exact, order-free)."""
    idx = np.concatenate([p["idx"] for p in parts], axis=1)
    w = np.concatenate([p["w"] for p in parts], axis=1)
    c = parts[0]["idx"].shape[1]
    key_idx = np.where(idx < 0, np.iinfo(np.int64).max, idx)
    order = _rowwise_order(w, key_idx, c)
    return {"idx": np.take_along_axis(idx, order, 1), "w": np.take_along_axis(w, order, 1)}


def _rowwise_order(w: np.ndarray, idx: np.ndarray, c: int) -> np.ndarray:
    # sort by A row, then stably by weight descending: ties keep the lower A row first
    o1 = np.argsort(idx, axis=1, kind="stable")
    w1 = np.take_along_axis(w, o1, 1)
    o2 = np.argsort(-w1, axis=1, kind="stable")
    return np.take_along_axis(o1, o2, 1)[:, :c]


@numba.njit(cache=True, nogil=True)
def _leaf_of(bv, left, right, dim, cut):
    # the leaf each B row falls into (NaN goes right, as NaN sorts last in the build)
    out = np.empty(bv.shape[0], dtype=np.int64)
    for j in range(bv.shape[0]):
        q = 0
        while left[q] >= 0:
            x = bv[j, dim[q]]
            q = left[q] if x < cut[q] else right[q]
        out[j] = q
    return out


def linear_envelope(lin: np.ndarray, wl: np.ndarray) -> np.ndarray:
    """(K, P + 3) for :func:`_bound`: ``[k, s]`` (s <= P + 1) the largest weight of column
    ``k``'s linear segments at a point right of segment ``s`` (the starts of segments
    ``s + 1`` on; -inf if none), so that the supremum of the linear weight on ``[x, inf)``
    is the larger of its value at ``x`` and this
    (:func:`~sdcdist.linkage.prl.weights.linear_segments`); ``[k, -1]`` that supremum at
    ``x = 0``, with the exact-agreement weight ``wl[k, 0]``."""
    K, _, P1 = lin.shape
    out = np.full((K, P1 + 2), -np.inf)
    for k in range(K):
        points = int(np.isfinite(lin[k, 0]).sum())
        for s in range(P1 - 1, -1, -1):
            out[k, s] = out[k, s + 1]
            if s + 1 <= points and lin[k, 2, s + 1] > out[k, s]:
                out[k, s] = lin[k, 2, s + 1]
        # the bound at distance 0 (x = 0), as _bound computes it
        s0 = int((lin[k, 0] <= 0.0).sum())
        out[k, -1] = max(lin[k, 2, s0], out[k, s0], wl[k, 0]) if points else -np.inf
    return out


@numba.njit(cache=True, nogil=True, inline="always")
def _bound(lo, hi, tmx, q, g0, g1, nlev, wa, wd, wl, rules, lin, env, rel, T, order, out):
    # an upper bound of the weight of any B row with values in the box [g0, g1] (g0 > g1
    # in a column: all NaN) with every A row of node q, and in out[pos] the bound of column
    # order[pos]. Per column: the distance between the intervals (a lower bound of every
    # computed |a - b|, by monotone rounding) against the node's largest tolerance
    # (monotone rounding too); NaN values weigh w_dis / the last level, never more.
    tot = 0.0
    for pos in range(order.size):
        k = order[pos]
        x0 = g0[k]
        x1 = g1[k]
        last = nlev[k] - 1
        lq = lo[q, k]
        hq = hi[q, k]
        if not (lq <= hq and x0 <= x1):
            out[pos] = wl[k, last] if rules[k] else wd[k]
            tot += out[pos]
            continue
        d = lq - x1
        d2 = x0 - hq
        if d2 > d:
            d = d2
        if not d > 0.0:
            d = 0.0
            if rules[k] == RULE_LINEAR:
                out[pos] = env[k, -1]           # the column's largest weight
                tot += out[pos]
                continue
        if rules[k] == RULE_LINEAR:
            # linear weights: a piecewise linear function of x = |a - b| / (the pair's last
            # tolerance, at most the box's largest); no pair of the box has x below xmin, so
            # the bound is the supremum on [xmin, inf): the value at xmin or a point beyond
            # (env: the largest of those points, precomputed)
            if rel[k]:
                tmax = max(max(abs(lq), abs(hq)), 0.1) * T[k, last - 1]
            else:
                tmax = tmx[q, k, last - 1]
            xmin = d / tmax
            if not xmin >= 0.0:
                xmin = 0.0                      # an infinite tolerance
            s = 0
            for p in range(last + 1):
                s += lin[k, 0, p] <= xmin
            best = lin[k, 2, s] + lin[k, 3, s] * (xmin - lin[k, 1, s])
            if env[k, s] > best:
                best = env[k, s]
            if xmin == 0.0 and wl[k, 0] > best:
                best = wl[k, 0]                 # d = 0: the exact-agreement weight
            out[pos] = best
            tot += best
            continue
        base = max(max(abs(lq), abs(hq)), 0.1)
        if rules[k]:
            lev = 0
            for l in range(last):
                tl = base * T[k, l] if rel[k] else tmx[q, k, l]
                if d > tl:
                    lev += 1
            best = wl[k, lev]
            for l in range(lev + 1, last + 1):
                best = max(best, wl[k, l])
            out[pos] = best
            tot += best
        else:
            dd = wa[k] - wd[k]
            if dd < 0:
                out[pos] = np.inf
                tot += np.inf
                continue
            if rel[k]:
                # tolerance t max(|a|, 0.1): beyond the nearest end e of the box, |a - x| /
                # max(|a|, 0.1) >= min(1, d / max(|e|, 0.1)) (the distance grows at least
                # as fast as |a|); also >= d over the box's largest tolerance
                y = wa[k] - dd * d / (base * T[k, 0])
            else:
                y = wa[k] - dd * d / tmx[q, k, 0]
            out[pos] = y if y > wd[k] else wd[k]
            tot += out[pos]
    return tot


@numba.njit(cache=True, nogil=True, error_model="numpy")
def _leaf_pruned(avT, tolT, bj, s0, s1, nlev, wa, wd, wl, rules, lin, order, suf, thr, w, alive):
    # the weights of B row bj against A rows s0:s1 (into w, by position), column by column
    # in ``order`` exactly as :func:`weights_row` adds them (bit-identical sums); after each
    # column a row whose partial sum plus ``suf[pos]``, a bound of the columns still to
    # add, is below ``thr`` is dropped. Returns the rows left: positions alive[:na].
    n = s1 - s0
    for p in range(n):
        w[p] = 0.0
    na = n
    K = order.size
    for pos in range(K):
        k = order[pos]
        x = bj[k]
        rule = rules[k]
        nk = nlev[k]
        wak = wa[k]
        wdk = wd[k]
        if na == n and rule == RULE_LINEAR:
            linear_column(avT, tolT, k, s0, n, x, wl, lin, nk, w)
        elif na == n:
            for p in range(n):
                i = s0 + p
                w[p] += column_weight(rule, abs(avT[k, i] - x), tolT, i, k, nk, wak, wdk, wl, lin)
        else:
            for t in range(na):
                p = alive[t]
                i = s0 + p
                w[p] += column_weight(rule, abs(avT[k, i] - x), tolT, i, k, nk, wak, wdk, wl, lin)
        if pos < K - 1 and thr > -np.inf:
            lim = thr - suf[pos]
            t2 = 0
            for t in range(na):
                p = alive[t] if na < n else t
                if w[p] >= lim:
                    alive[t2] = p
                    t2 += 1
            na = t2
            if na == 0:
                return 0
    if na == n:
        for p in range(n):
            alive[p] = p
    return na


@numba.njit(cache=True, nogil=True)
def _search_kernel(tvT, ttolT, perm, start, stop, left, right, lo, hi, tmx, bv, gstart, T,
                   nlev, wa, wd, wl, rules, lin, env, rel, order, c, slack, ranked, block, bstart,
                   rank, sk, nfin, vR, tb, nint, dq, S, lift):
    # best first over the nodes of A for a group of nearby B rows at a time
    # (bv[gstart[g]:gstart[g + 1]]): a node's bound holds for every row of the group, so
    # the tree is walked once per group and each A leaf's values are read once per group;
    # at a leaf each row checks its own bound before weighing
    nb = bv.shape[0]
    nn = start.size
    K = order.size
    idx = np.full((nb, c), -1, dtype=np.int64)
    wt = np.full((nb, c), -np.inf)
    filled = np.zeros(nb, dtype=np.int64)
    sd = np.empty(nb)
    ipos = np.empty(perm.size, dtype=np.int64)
    for p in range(perm.size):
        ipos[perm[p]] = p
    hb = np.empty(nn)            # heap of (bound, node), max-heap on bound
    hn = np.empty(nn, dtype=np.int64)
    width = 1
    for q in range(nn):
        width = max(width, stop[q] - start[q])
    buf = np.empty(width)
    alive = np.empty(width, dtype=np.int64)
    acc = np.empty(width, dtype=np.int16)
    gbuf = np.empty((K, width))
    # ranked leaves: each block's rank intervals of the row being searched (cst_row: which)
    cst = np.empty((bstart.size, K, 2 * BOUND_U), dtype=np.int16)
    cst_row = np.full(bstart.size, -1, dtype=np.int64)
    cb = np.empty(K)
    suf = np.empty(K)
    g0 = np.empty(K)
    g1 = np.empty(K)
    visited = 0
    for g in range(gstart.size - 1):
        j0 = gstart[g]
        j1 = gstart[g + 1]
        for k in range(K):
            g0[k] = np.inf
            g1[k] = -np.inf
            for j in range(j0, j1):
                x = bv[j, k]
                if x < g0[k]:
                    g0[k] = x
                if x > g1[k]:
                    g1[k] = x
        # a first threshold of each row: its lowest weight with the candidates of the last
        # row searched before the group (a nearby B row): c records, so at most its c-th
        # weight; -inf until those are known
        gthr = np.inf
        for j in range(j0, j1):
            sd[j] = -np.inf
            if j0 > 0 and filled[j0 - 1] == c:
                m = np.inf
                for t in range(c):
                    i = ipos[idx[j0 - 1, t]]
                    x = 0.0
                    for pos in range(K):
                        k = order[pos]
                        x += column_weight(rules[k], abs(tvT[k, i] - bv[j, k]), ttolT, i, k,
                                           nlev[k], wa[k], wd[k], wl, lin)
                    m = min(m, x)
                sd[j] = m
            gthr = min(gthr, sd[j])
        size = 1
        hb[0] = _bound(lo, hi, tmx, 0, g0, g1, nlev, wa, wd, wl, rules, lin, env, rel, T, order,
                       cb) + slack
        hn[0] = 0
        while size > 0:
            bound = hb[0]
            q = hn[0]
            if bound < gthr:
                break
            size -= 1
            if size > 0:
                hb[0] = hb[size]
                hn[0] = hn[size]
                p = 0
                while True:
                    ch = 2 * p + 1
                    if ch >= size:
                        break
                    if ch + 1 < size and hb[ch + 1] > hb[ch]:
                        ch += 1
                    if hb[ch] <= hb[p]:
                        break
                    hb[p], hb[ch] = hb[ch], hb[p]
                    hn[p], hn[ch] = hn[ch], hn[p]
                    p = ch
            if left[q] < 0:
                s0 = start[q]
                s1 = stop[q]
                for j in range(j0, j1):
                    bj = bv[j]
                    thr = max(wt[j, c - 1] if filled[j] == c else -np.inf, sd[j]) - slack
                    # the row's own bound of the leaf, column by column in ``order`` (a
                    # group of one row: the node's bound, known to reach the threshold)
                    if not (ranked and j1 - j0 == 1) and \
                            _bound(lo, hi, tmx, q, bj, bj, nlev, wa, wd, wl, rules, lin, env, rel,
                                   T, order, cb) + slack < thr:
                        continue
                    if ranked:
                        # a bound per pair from its ranks; only those reaching thr weighed
                        bq = block[q]
                        if cst_row[bq] != j:
                            block_intervals(sk, bq, nfin[bq], bj, tb, nint, cst[bq])
                            cst_row[bq] = j
                        tau = fixed_threshold(thr, S, lift)
                        if leaf_bounds(rank, s0, s1, cst[bq], dq, acc) < tau:
                            continue
                        # first, while its list is not full, the c rows of the best
                        # bounds (or ties), whose weights raise the threshold; then the
                        # rest of the rows from the threshold up to those
                        n = s1 - s0
                        top = 32768
                        lo_ = tau
                        if filled[j] < c and n > c:
                            lo_ = max(int(np.partition(acc[:n], n - c)[n - c]), tau)
                        while lo_ < top:
                            na = leaf_weigh(vR, s0, n, acc, lo_, top, bj, order, rules, nlev,
                                            ttolT, wa, wd, wl, lin, alive, buf, gbuf)
                            visited += na
                            f = filled[j]
                            for t in range(na):
                                f = keep_top(wt[j], idx[j], f, buf[t], perm[alive[t]])
                            filled[j] = f
                            top = lo_
                            thr = max(wt[j, c - 1] if f == c else -np.inf, sd[j]) - slack
                            lo_ = max(fixed_threshold(thr, S, lift), tau)
                    else:
                        acc0 = 0.0
                        for pos in range(K - 1, -1, -1):
                            suf[pos] = acc0
                            acc0 += cb[pos]
                        na = _leaf_pruned(tvT, ttolT, bj, s0, s1, nlev, wa, wd, wl, rules, lin,
                                          order, suf, thr, buf, alive)
                        visited += s1 - s0
                        f = filled[j]
                        for t in range(na):
                            p = alive[t]
                            f = keep_top(wt[j], idx[j], f, buf[p], perm[s0 + p])
                        filled[j] = f
                gthr = np.inf
                for j in range(j0, j1):
                    gthr = min(gthr, max(wt[j, c - 1] if filled[j] == c else -np.inf, sd[j]))
                continue
            for ch in (left[q], right[q]):
                b = _bound(lo, hi, tmx, ch, g0, g1, nlev, wa, wd, wl, rules, lin, env, rel, T,
                           order, cb) + slack
                if b < gthr:
                    continue
                p = size
                size += 1
                hb[p] = b
                hn[p] = ch
                while p > 0:
                    par = (p - 1) >> 1
                    if hb[par] >= hb[p]:
                        break
                    hb[p], hb[par] = hb[par], hb[p]
                    hn[p], hn[par] = hn[par], hn[p]
                    p = par
    return idx, wt, visited


#: B rows of one leaf searched together (at most) by :func:`topc_search`. 1: groups
#: bounded over their box of values opened ~1.4x more of the tree than single rows on
#: the synthetic 1,000,000-record file, slower overall.
GROUP_ROWS = 1


def topc_search(tree: dict, b: dict, cmp: Comparison, wp: Any, c: int, *,
                group: int = GROUP_ROWS) -> dict:
    """Each B row's ``c`` best A rows by weight, as :func:`topc_block` over all of A.

    Best-first branch and bound over :func:`~sdcdist.linkage.prl.kdtree.build_tree`: a
    node is opened only while an upper bound of its weights (per column the weight at the box's
    nearest value and widest tolerance, plus a margin far above rounding) is
    not below the current c-th weight, so the result (weights, and ties
    broken by the lower A row) is exactly the all-pairs one. In a leaf the
    weight is added column by column (widest weight range first) and an A
    row is dropped once its partial weight plus the leaf's bound of the
    remaining columns is below the c-th weight.

    Node bounds: the distance from the B value to the node's box of A values
    against the node's largest tolerance (by monotone rounding no computed
    ``|a - b|`` is smaller, no tolerance larger), for any method. B rows are
    searched in the order of the leaves they fall into, and each starts from a
    threshold: its lowest weight with the ``c`` candidates of the row searched
    before it (at most its own c-th weight, so nothing it needs is pruned).

    Where the tree carries ranks (:func:`~sdcdist.linkage.prl.kdtree.build_tree`; every
    column's tolerances the same on every A row: the default ``s``, categorical columns) and
    :func:`~sdcdist.linkage.prl.ranked.ranked_eligible` holds, a leaf's pairs are
    bounded one by one from their ranks (:func:`~sdcdist.linkage.prl.ranked.
    leaf_bounds`, 16 pairs a vector) and only those whose bound reaches the
    c-th weight are weighed: the same candidates, a fraction of the weighing.

    Parameters
    ----------
    group : int
        B rows falling into the same leaf of the tree searched together (at
        most): one walk of the tree bounded over the group's box of values,
        then each row weighs a leaf only where its own bound reaches its c-th
        weight. The candidates do not depend on it.

    Returns
    -------
    dict
        ``idx`` (n_b, c) int64 A rows (-1 = none), ``w`` (n_b, c) weights,
        ``visited``: pairs weighed (at least in part); ``ranked``: whether the
        leaves were bounded by ranks.
    """
    T = cmp.flat_tolerances.copy()
    T[np.asarray(cmp.categorical, dtype=bool), 0] = 0.0
    mags = np.abs(np.concatenate([wp.w_agr, wp.w_dis, wp.w_level.ravel()]))
    slack = 1e-9 * (1.0 + float(mags.sum()))
    bv = np.ascontiguousarray(b["v"])
    # B rows in the order of the leaves they fall into: a group shares one leaf
    leaf = _leaf_of(bv, tree["left"], tree["right"], tree["dim"], tree["cut"])
    walk = np.argsort(leaf, kind="stable")
    sl = leaf[walk]
    cuts = [0]
    for s in np.flatnonzero(np.diff(sl)) + 1 if sl.size else []:
        cuts.append(int(s))
    cuts.append(sl.size)
    gstart = []
    for s, e in zip(cuts[:-1], cuts[1:]):
        gstart.extend(range(s, e, max(1, int(group))))
    gstart.append(sl.size)
    gstart = np.unique(np.asarray(gstart, dtype=np.int64))
    # tolerances t max(|a|, 0.1) (the l and d methods) give a tighter bound than the box's
    # widest tolerance; other tolerances use the box's widest (``tmx``)
    rel = np.array([cmp.method != "s" and not cat for cat in cmp.categorical], dtype=np.bool_)
    rk = tree.get("ranks")
    ranked = rk is not None and ranked_eligible(rk["tc"], cmp, wp, bv)
    if ranked:
        bt = bound_table(wp, cmp, rk["tc"])
    else:
        rk = {"block": np.zeros(1, np.int64), "bstart": np.zeros(0, np.int64),
              "rank": np.zeros((1, 1), np.int16), "sk": np.zeros((1, 1, 1)),
              "vR": np.zeros((1, 1)),
              "nfin": np.zeros((0, 1), np.int64)}
        bt = {"tb": np.zeros((1, BOUND_U)), "nint": np.zeros(1, np.int64),
              "dq": np.zeros((1, BOUND_U), np.int16), "S": 1.0, "lift": 0.0}
    idx, w, visited = _search_kernel(tree["vT"], tree["tolT"], tree["perm"], tree["start"],
                                     tree["stop"], tree["left"], tree["right"], tree["lo"],
                                     tree["hi"], tree["tmx"], np.ascontiguousarray(bv[walk]),
                                     gstart, T, cmp.n_levels, wp.w_agr, wp.w_dis,
                                     wp.w_level, wp.rule, wp.lin,
                                     linear_envelope(wp.lin, wp.w_level), rel, wp.order, int(c),
                                     slack, ranked, rk["block"], rk["bstart"], rk["rank"],
                                     rk["sk"], rk["nfin"], rk["vR"], bt["tb"], bt["nint"], bt["dq"],
                                     bt["S"], bt["lift"])
    out_idx = np.empty_like(idx)
    out_w = np.empty_like(w)
    out_idx[walk] = idx
    out_w[walk] = w
    return {"idx": out_idx, "w": out_w, "visited": int(visited), "ranked": bool(ranked)}
