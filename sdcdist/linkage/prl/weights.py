"""PRL weights from a fitted model: per-column weights, the one column-weight function
every kernel inlines, and the weights of given pairs or of all pairs."""

from __future__ import annotations

from dataclasses import dataclass

import numba
import numpy as np

from .comparison import RULE_LEVEL, RULE_LINEAR, Comparison, same_tolerances, transposed
from .em import EMResult

__all__ = ["WeightParams", "weight_params", "linear_segments", "column_weight", "linear_at",
           "linear6_all", "linear_column", "weights_row", "pair_weights", "dense_weights",
           "grid_rows",
           "match_probability"]


@dataclass(frozen=True)
class WeightParams:
    """Per-column weights from a fitted model.

    ``w_agr``, ``w_dis``: (K,) full agreement / disagreement weights of the
    binary numeric columns; ``w_level``: (K, Lmax+1) level weights of
    categorical and multi-level columns; ``rule``: (K,) int8, which rule a
    column uses (:attr:`Comparison.rule`: ``RULE_DOWNWEIGHT`` (0) d/l downweighting,
    ``RULE_LEVEL`` the level's weight, ``RULE_LINEAR`` linear between the levels' middles;
    non-zero = weighted by level);
    ``lin``: (K, 4, P + 1) the linear weights' segments (:func:`linear_segments`).
    """

    w_agr: np.ndarray
    w_dis: np.ndarray
    w_level: np.ndarray
    rule: np.ndarray
    log_prior_odds: float
    lin: np.ndarray

    @property
    def order(self) -> np.ndarray:
        """Order in which column weights are summed: widest weight range first.

        Fixed for a fitted model, so every kernel adds the same terms in the same
        order (bit-identical pair weights); the most discriminating columns come
        first.
        """
        lo = np.where(self.rule != 0, self.w_level.min(axis=1),
                      np.minimum(self.w_agr, self.w_dis))
        return np.argsort(-(self._best - lo), kind="stable").astype(np.int64)

    @property
    def _best(self) -> np.ndarray:
        return np.where(self.rule != 0, self.w_level.max(axis=1),
                        np.maximum(self.w_agr, self.w_dis))


def weight_params(fit: EMResult, cmp: Comparison) -> WeightParams:
    K = len(fit.m)
    L = int(cmp.n_levels.max())
    wl = np.zeros((K, L))
    wa, wd = np.zeros(K), np.zeros(K)
    for k in range(K):
        wk = np.log(fit.m[k]) - np.log(fit.u[k])
        wl[k, :wk.size] = wk
        wa[k] = np.log(fit.m[k][0] / fit.u[k][0])
        wd[k] = np.log((1 - fit.m[k][0]) / (1 - fit.u[k][0]))
    return WeightParams(wa, wd, wl, cmp.rule,
                        float(np.log(fit.p) - np.log1p(-fit.p)), linear_segments(wl, cmp))


def linear_segments(wl: np.ndarray, cmp: Comparison) -> np.ndarray:
    """The linear weights of multi-level numeric columns as segments, for the kernels.

    Column k's weight is a function of ``x = |a - b| / t_L`` (``t_L`` the pair's
    last tolerance; the same for every method, as all tolerances of a row scale
    together): through the points ``(x_l, w_l)`` of the levels ``l`` after an
    exact-agreement level, ``x_l`` the middle of level ``l``'s interval
    ``(t_{l-1} + t_l) / 2 / t_L`` (``t_{-1} = 0``), the last level at ``x = 1``;
    constant before the first point and after the last.

    Returns
    -------
    ndarray, shape (K, 4, P + 1)
        ``[k, 0, :P]`` the points' x, increasing, padded with +inf (P = the most
        levels of a column); for segment ``s`` (the number of points at or left
        of x) ``[k, 1, s]``, ``[k, 2, s]``, ``[k, 3, s]``: its start x0, the
        weight there and the slope: ``w = w0 + slope (x - x0)``. Zeros for the
        other columns.
    """
    K, P = wl.shape
    out = np.zeros((K, 4, P + 1))
    out[:, 0, :] = np.inf
    T = cmp.flat_tolerances
    for k, rule in enumerate(cmp.rule):
        if rule != RULE_LINEAR:
            continue
        last = int(cmp.n_levels[k]) - 1
        t = T[k, :last]
        first = 1 if t[0] == 0.0 else 0
        lower = np.r_[0.0, t[:-1]]
        xs = np.r_[0.5 * (lower + t) / t[-1], 1.0][first:]
        ws = wl[k, first:last + 1]
        out[k, 0, :xs.size] = xs
        out[k, 1, 0], out[k, 2, 0] = xs[0], ws[0]           # before the first point
        for s in range(1, xs.size + 1):
            out[k, 1, s], out[k, 2, s] = xs[s - 1], ws[s - 1]
            if s < xs.size and xs[s] > xs[s - 1]:
                out[k, 3, s] = (ws[s] - ws[s - 1]) / (xs[s] - xs[s - 1])
    return out


@numba.njit(cache=True, nogil=True, inline="always")
def linear_at(lin, k, x, last):
    """Value at ``x`` of column ``k``'s linear weights (:func:`linear_segments`): the segment
    holding ``x`` (the number of points at or left of it)."""
    s = 0
    for p in range(last + 1):
        s += lin[k, 0, p] <= x
    return lin[k, 2, s] + lin[k, 3, s] * (x - lin[k, 1, s])


@numba.njit(cache=True, nogil=True, inline="always")
def column_weight(rule, d, tolT, i, k, nlev, wak, wdk, wl, lin):
    """The weight of key column ``k`` for a pair at difference ``d = |a - b|`` (NaN: missing),
    A row ``i`` (its tolerances ``tolT[k, :, i]``). The one formula of a pair's column weight:
    every kernel inlines it, so all give the same float.

    ``rule`` (:attr:`Comparison.rule`): ``RULE_LINEAR`` linear in ``x = d / t_last`` between
    the levels' middles (exact agreement, ``t_0 = 0`` and ``d = 0``, keeps ``wl[k, 0]``; NaN
    the last level's weight); ``RULE_LEVEL`` the weight ``wl[k, level]`` of the pair's level
    (the tolerances it misses); ``RULE_DOWNWEIGHT`` the d/l downweighting from ``wak``
    (``d = 0``) down to ``wdk`` at the tolerance and beyond (NaN: ``wdk``).
    """
    if rule == RULE_LINEAR:
        last = nlev - 1
        if d == 0.0 and tolT[k, 0, i] == 0.0:
            return wl[k, 0]
        x = d / tolT[k, last - 1, i]
        if not (x >= 0.0):
            return wl[k, last]
        return linear_at(lin, k, x, last)
    if rule == RULE_LEVEL:
        lev = 0
        for l in range(nlev - 1):
            if not (d <= tolT[k, l, i]):
                lev += 1
        return wl[k, lev]
    y = wak - (wak - wdk) * d / tolT[k, 0, i]
    return y if y > wdk else wdk


@numba.njit(cache=True, nogil=True, inline="always")
def _five_selects(xx, P, X, Ws, Ls):
    # linear6_all's segment of xx among the first five points P (start X, weight Ws,
    # slope Ls of segment s at index s): the last point at or left of xx wins, by selects
    c = P[0] <= xx
    sx, sw, sl = (X[1] if c else X[0]), (Ws[1] if c else Ws[0]), (Ls[1] if c else Ls[0])
    c = P[1] <= xx
    sx, sw, sl = (X[2] if c else sx), (Ws[2] if c else sw), (Ls[2] if c else sl)
    c = P[2] <= xx
    sx, sw, sl = (X[3] if c else sx), (Ws[3] if c else sw), (Ls[3] if c else sl)
    c = P[3] <= xx
    sx, sw, sl = (X[4] if c else sx), (Ws[4] if c else sw), (Ls[4] if c else sl)
    c = P[4] <= xx
    sx, sw, sl = (X[5] if c else sx), (Ws[5] if c else sw), (Ls[5] if c else sl)
    return sx, sw, sl


@numba.njit(cache=True, nogil=True, inline="always")
def linear6_all(avT, tolT, k, s0, n, x, wl, lin, w, const=False):
    # w[p] += column_weight(2, |a - x|, ...) of column k (6 levels) for A rows s0 + p,
    # p < n, written without branches or table look-ups so that the loop vectorises (in a
    # caller compiled with error_model="numpy": no zero-division check; the last tolerance
    # is > 0): the segment's start, weight and slope are picked by selects (the points
    # increase, so the last one at or left of xx wins: lin[k, :, s] for s points at or
    # left of it), then the same operations in the same order, so the same floats. const:
    # the column's tolerances are the same on every A row (the default ``s`` method): read
    # once, as scalars (the same values; two loads less a pair)
    a = avT[k, s0:s0 + n]
    t0 = tolT[k, 0, s0:s0 + n]
    tl = tolT[k, 4, s0:s0 + n]
    p0, p1, p2, p3, p4, p5 = lin[k, 0, 0], lin[k, 0, 1], lin[k, 0, 2], lin[k, 0, 3], \
        lin[k, 0, 4], lin[k, 0, 5]
    x0, x1, x2, x3, x4, x5, x6 = lin[k, 1, 0], lin[k, 1, 1], lin[k, 1, 2], lin[k, 1, 3], \
        lin[k, 1, 4], lin[k, 1, 5], lin[k, 1, 6]
    w0, w1, w2, w3, w4, w5, w6 = lin[k, 2, 0], lin[k, 2, 1], lin[k, 2, 2], lin[k, 2, 3], \
        lin[k, 2, 4], lin[k, 2, 5], lin[k, 2, 6]
    l0, l1, l2, l3, l4, l5, l6 = lin[k, 3, 0], lin[k, 3, 1], lin[k, 3, 2], lin[k, 3, 3], \
        lin[k, 3, 4], lin[k, 3, 5], lin[k, 3, 6]
    wz = wl[k, 0]
    wn = wl[k, 5]
    P, X = (p0, p1, p2, p3, p4), (x0, x1, x2, x3, x4, x5)
    Ws, Ls = (w0, w1, w2, w3, w4, w5), (l0, l1, l2, l3, l4, l5)
    if p5 == np.inf and const and n > 0:
        # five points (the default tolerances: exact agreement keeps its own weight): the
        # sixth select never fires on a finite x (at x = +inf both give NaN, 0 * inf);
        # the tolerances read once
        tls = tl[0]
        zero = t0[0] == 0.0
        for p in range(n):
            d = abs(a[p] - x)
            xx = d / tls
            sx, sw, sl = _five_selects(xx, P, X, Ws, Ls)
            v = sw + sl * (xx - sx)
            v = v if xx >= 0.0 else wn
            w[p] += wz if ((d == 0.0) & zero) else v
        return
    for p in range(n):
        d = abs(a[p] - x)
        xx = d / tl[p]
        sx, sw, sl = _five_selects(xx, P, X, Ws, Ls)
        c = p5 <= xx
        sx, sw, sl = (x6 if c else sx), (w6 if c else sw), (l6 if c else sl)
        v = sw + sl * (xx - sx)
        v = v if xx >= 0.0 else wn
        w[p] += wz if ((d == 0.0) & (t0[p] == 0.0)) else v


@numba.njit(cache=True, nogil=True, inline="always")
def linear_column(avT, tolT, k, s0, n, x, wl, lin, nlev, w, const=False):
    """``w[p] += column_weight(RULE_LINEAR, |a - x|, ...)`` of column ``k`` (``nlev``
    levels) for A rows ``s0 + p``, ``p < n``, the same floats on every level count: the
    default comparison's 6 levels by :func:`linear6_all` (vectorised; ``const``: column
    ``k``'s tolerances are the same on every row, :func:`~.comparison.same_tolerances`), any other
    count by :func:`column_weight` row by row."""
    if nlev == 6:
        linear6_all(avT, tolT, k, s0, n, x, wl, lin, w, const)
    else:
        for p in range(n):
            i = s0 + p
            w[p] += column_weight(RULE_LINEAR, abs(avT[k, i] - x), tolT, i, k, nlev, 0.0, 0.0,
                                  wl, lin)


@numba.njit(cache=True, nogil=True, error_model="numpy")
def weights_row(avT, tolT, bj, lo, hi, aidx, identity, nlev, wa, wd, wl, rules, lin, order, w,
                tconst):
    """Weights of B row ``bj`` against A rows ``aidx[lo:hi]`` (``lo:hi`` when ``identity``)
    into ``w[:n]``: column by column in ``order`` (bit-identical sums in every kernel), so
    the inner loop runs over contiguous A values. ``tconst`` (K,): the columns whose
    tolerances are the same on every A row (:func:`~.comparison.same_tolerances`). Returns n."""
    n = hi - lo
    w[:n] = 0.0
    for k in order:
        x = bj[k]
        rule = rules[k]
        nk = nlev[k]
        wak = wa[k]
        wdk = wd[k]
        if identity and rule == RULE_LINEAR:
            # the same floats as column_weight, vectorised
            linear_column(avT, tolT, k, lo, n, x, wl, lin, nk, w, tconst[k])
        elif identity:
            for q in range(n):
                i = lo + q
                w[q] += column_weight(rule, abs(avT[k, i] - x), tolT, i, k, nk, wak, wdk, wl, lin)
        else:
            for q in range(n):
                i = aidx[lo + q]
                w[q] += column_weight(rule, abs(avT[k, i] - x), tolT, i, k, nk, wak, wdk, wl, lin)
    return n


@numba.njit(cache=True, nogil=True)
def _pairs_kernel(avT, tolT, bv, ia, jb, nlev, wa, wd, wl, rules, lin, order):
    out = np.empty(ia.size)
    for q in range(ia.size):
        i = ia[q]
        j = jb[q]
        w = 0.0
        for k in order:
            w += column_weight(rules[k], abs(avT[k, i] - bv[j, k]), tolT, i, k, nlev[k], wa[k],
                               wd[k], wl, lin)
        out[q] = w
    return out


def pair_weights(a: dict, b: dict, ia: np.ndarray, jb: np.ndarray, cmp: Comparison,
                 wp: WeightParams) -> np.ndarray:
    """Weights of the pairs (A row ``ia[q]`` of ``a``, B row ``jb[q]`` of ``b``)."""
    ia = np.asarray(ia, dtype=np.int64)
    jb = np.asarray(jb, dtype=np.int64)
    avT, tolT = transposed(a)
    return _pairs_kernel(avT, tolT, b["v"], ia, jb, cmp.n_levels, wp.w_agr, wp.w_dis,
                         wp.w_level, wp.rule, wp.lin, wp.order)


@numba.njit(cache=True, nogil=True)
def _dense_kernel(avT, tolT, bv, nlev, wa, wd, wl, rules, lin, order, tconst):
    na = avT.shape[1]
    out = np.empty((bv.shape[0], na))
    none = np.zeros(1, dtype=np.int64)
    for j in range(bv.shape[0]):
        weights_row(avT, tolT, bv[j], 0, na, none, True, nlev, wa, wd, wl, rules, lin, order,
                    out[j], tconst)
    return out


def dense_weights(a: dict, b: dict, cmp: Comparison, wp: WeightParams) -> np.ndarray:
    """All pair weights, shape (n_b, n_a) (rows = B records)."""
    avT, tolT = transposed(a)
    return _dense_kernel(avT, tolT, b["v"], cmp.n_levels, wp.w_agr, wp.w_dis, wp.w_level,
                         wp.rule, wp.lin, wp.order, same_tolerances(tolT, cmp.n_levels))


@numba.njit(cache=True, nogil=True)
def _grid_rows(avT, tolT, bv, j0, j1, nlev, wa, wd, wl, rules, lin, order, scale, Q, top,
               n_top, cmax, tconst):
    # rows j0 .. j1 - 1 of dense_grid: each row's weights as _dense_kernel computes them
    # (weights_row), rounded to the grid (np.rint(w * scale), as quantize and on_grid do)
    # into Q, the row's largest grid value and how many entries have it, each column's
    # largest grid value over these rows into cmax; returns the smallest and largest
    # weight and whether every weight is finite
    na = avT.shape[1]
    w = np.empty(na)
    none = np.zeros(1, dtype=np.int64)
    lo = np.inf
    hi = -np.inf
    bad = 0
    for j in range(j0, j1):
        weights_row(avT, tolT, bv[j], 0, na, none, True, nlev, wa, wd, wl, rules, lin, order,
                    w, tconst)
        mx = -np.inf
        for i in range(na):
            x = w[i]
            bad += np.int64(not (abs(x) < np.inf))
            lo = x if x < lo else lo
            hi = x if x > hi else hi
            q = np.rint(x * scale)
            Q[j, i] = q
            mx = q if q > mx else mx
            cmax[i] = q if q > cmax[i] else cmax[i]
        cnt = 0
        for i in range(na):
            cnt += np.int64(Q[j, i] == mx)
        top[j] = mx
        n_top[j] = cnt
    return lo, hi, bad == 0


def grid_rows(at: tuple[np.ndarray, np.ndarray], b: dict, cmp: Comparison, wp: WeightParams,
              j0: int, j1: int, bits: int, Q: np.ndarray, top: np.ndarray, n_top: np.ndarray,
              tconst: np.ndarray | None = None) -> tuple[float, float, bool]:
    """Rows ``j0 .. j1 - 1`` of :func:`dense_weights` on the grid ``2**-bits`` (each weight
    rounded once from its own float: ``np.rint(w * 2**bits)``, as
    :func:`~sdcdist.linkage.assignment.ties.quantize` and :func:`~.pld.on_grid` do) into
    ``Q[j0:j1]`` (integers held in float64), each row's largest grid value into ``top`` and
    how many of its entries have it into ``n_top``. Returns the smallest and the largest
    weight of the rows (their floats), whether all are finite and each column's largest
    grid value over the rows (n_a,). ``at``: A's :func:`~.comparison.transposed` values;
    ``tconst``: their :func:`~.comparison.same_tolerances` when the caller has them.
    Rows are independent: blocks of rows may be computed in any order, by any thread."""
    avT, tolT = at
    if tconst is None:
        tconst = same_tolerances(tolT, cmp.n_levels)
    cmax = np.full(avT.shape[1], -np.inf)
    lo, hi, ok = _grid_rows(avT, tolT, b["v"], int(j0), int(j1), cmp.n_levels, wp.w_agr,
                            wp.w_dis, wp.w_level, wp.rule, wp.lin, wp.order, 2.0 ** bits, Q,
                            top, n_top, cmax, tconst)
    return lo, hi, ok, cmax


def match_probability(w: np.ndarray, wp: WeightParams) -> np.ndarray:
    """P(M | pair) from its weight: logistic of weight + log prior odds."""
    z = np.asarray(w, dtype=np.float64) + wp.log_prior_odds
    return 1.0 / (1.0 + np.exp(-z))
