"""PRL candidates: the leaves of the candidate search bounded pair by pair from ranks
(:func:`~sdcdist.linkage.prl.topc.topc_search` uses it where it applies).

Where every column's tolerances are the same on every A row (the default ``s``,
categorical columns), whether a pair's difference meets a tolerance is whether its A row's
rank in the column lies in a run of ranks (the rank kernel of :mod:`.patterns`). Each
column is given a few tolerances of its own, where its weight changes most
(:func:`bound_tolerances`), and the largest weight of each interval between them
(:func:`level_bounds`), so a pair's weight is at most the sum of its intervals' bounds.
The sums are taken in int16 fixed point, rounded up, 16 pairs a vector
(:func:`leaf_bounds`); a pair is weighed (exactly, as every other kernel weighs it) only
where its bound reaches the B row's c-th weight so far. Ranks are per block of the tree
(:func:`rank_blocks`), the runs of a B row found by binary search over every
:data:`_SKIP`-th sorted value (:func:`block_intervals`: a run may hold a few ranks too
many, never one too few). The candidates, weights and ties are the all-pairs ones.
"""

from __future__ import annotations

import numba
import numpy as np

from .comparison import RULE_LEVEL, RULE_LINEAR, Comparison, same_tolerances
from .weights import WeightParams, column_weight, linear_at, linear_column

__all__ = ["constant_tolerances", "ranked_eligible", "bound_tolerances", "level_bounds",
           "bound_table", "rank_blocks", "block_intervals", "fixed_threshold", "leaf_bounds",
           "leaf_weigh", "BOUND_SCALE", "BLOCK_ROWS", "BOUND_U"]

#: The fixed-point range of a pair's bound (int16 sums: at most this, plus one per column).
BOUND_SCALE = 30000

#: Tolerances per column the bound tells apart (intervals: one more).
BOUND_U = 5

#: Rows of a block of :func:`rank_blocks` at most (int16 ranks: 2^15, the int16 interval
#: test of :func:`_add_bound` holds up to there).
BLOCK_ROWS = 32768

#: Every this many sorted values of a block are kept apart (:func:`block_intervals`
#: searches them first: they stay in cache).
_SKIP = 64

_FAST = dict(cache=True, nogil=True, boundscheck=False, error_model="numpy")


def _sup_linear(lin: np.ndarray, k: int, x0: float, x1: float, last: int) -> float:
    # the largest value of column k's linear weights on [x0, x1]: piecewise linear, so at
    # an end or at one of its points in between (there on both segments meeting at it)
    best = max(float(linear_at(lin, k, x0, last)), float(linear_at(lin, k, x1, last)))
    for p in lin[k, 0, :last + 1]:
        if np.isfinite(p) and x0 <= p <= x1:
            s = int(np.sum(lin[k, 0, :last + 1] <= p))
            for t in (s - 1, s):
                best = max(best, float(lin[k, 2, t] + lin[k, 3, t] * (p - lin[k, 1, t])))
    return best


def bound_tolerances(wp: WeightParams, cmp: Comparison, tc: np.ndarray) -> np.ndarray:
    """The tolerances whose intervals the bound tells apart: ``(K, U)``, ``U`` =
    :data:`BOUND_U`, padded with -1 (never met).

    A level-weighted column keeps its levels. A linear column's weight varies within its
    levels, so it gets its own ``U`` tolerances: where the weight's variation over
    ``x = |a - b| / t_last`` (up to ``x = 1``, beyond which it is constant) reaches each
    ``i / (U + 1)`` of its total, which spreads the bound's slack evenly over the
    intervals (any tolerances give a valid bound; these make it tight).
    """
    K = len(cmp.n_levels)
    U = BOUND_U
    out = np.full((K, U), -1.0)
    for k in range(K):
        L = int(cmp.n_levels[k]) - 1
        if int(wp.rule[k]) == RULE_LEVEL:
            out[k, :L] = tc[k, :L]
            continue
        tl = float(tc[k, L - 1])
        x = np.linspace(0.0, 1.0, 4097)
        f = np.array([float(linear_at(wp.lin, k, v, L)) for v in x])
        var = np.concatenate([[0.0], np.cumsum(np.abs(np.diff(f)))])
        if var[-1] <= 0:
            out[k, :L] = tc[k, :L]
            continue
        cut = np.searchsorted(var, var[-1] * np.arange(1, U + 1) / (U + 1))
        t = np.unique(x[np.minimum(cut, x.size - 1)] * tl)
        out[k, :t.size] = t
    return out


def level_bounds(wp: WeightParams, cmp: Comparison, tb: np.ndarray, tc: np.ndarray
                 ) -> np.ndarray:
    """The largest weight of each column in each interval of the bound's tolerances ``tb``
    (:func:`bound_tolerances`): ``(K, U + 1)`` float64, ``[k, i]`` for the pairs missing
    ``i`` of the column's (real) bound tolerances, -inf beyond.

    Level-weighted columns (categorical) weigh their level's weight exactly. A linear
    column's pair in interval ``i`` has ``tb_{i-1} < |a - b| <= tb_i``, so its ``x = |a -
    b| / t_last`` (``t_last = tc[k, L - 1]``, the comparison's last tolerance) lies in
    ``[tb_{i-1} / t_last, tb_i / t_last]`` (rounding is monotone); the bound is the
    supremum of the piecewise linear weight there, and for the first interval at least
    the exact-agreement weight (``|a - b| = 0`` with ``t_0 = 0``); the last also holds
    a missing value, which weighs the last level's weight. Rounding of the sums is left
    to the caller's margin.
    """
    K = len(cmp.n_levels)
    U = BOUND_U
    ub = np.full((K, U + 1), -np.inf)
    for k in range(K):
        L = int(cmp.n_levels[k]) - 1
        if int(wp.rule[k]) == RULE_LEVEL:
            ub[k, :L + 1] = wp.w_level[k, :L + 1]
            continue
        tl = float(tc[k, L - 1])
        t = [float(v) for v in tb[k] if v >= 0.0]
        for i in range(len(t) + 1):
            lo = 0.0 if i == 0 else t[i - 1] / tl
            hi = 1e300 if i == len(t) else t[i] / tl
            ub[k, i] = _sup_linear(wp.lin, k, lo, hi, L)
            if i == 0 and tc[k, 0] == 0.0:
                ub[k, 0] = max(ub[k, 0], wp.w_level[k, 0])
            if i == len(t):
                ub[k, i] = max(ub[k, i], wp.w_level[k, L])
    return ub


def constant_tolerances(tolT: np.ndarray, nlev: np.ndarray) -> np.ndarray | None:
    """A's tolerances ``tolT`` (K, L, n) as one row ``(K, L)`` where every column's are the
    same on every row (the ``s`` method, categorical columns; a column's first
    ``nlev[k] - 1``), else None."""
    if not same_tolerances(tolT, nlev).all():
        return None
    return tolT[:, :, 0] if tolT.shape[2] else np.zeros(tolT.shape[:2])


def ranked_eligible(tc: np.ndarray, cmp: Comparison, wp: WeightParams,
                    *values: np.ndarray) -> bool:
    """Whether the leaves of a candidate search can be bounded by ranks
    (:func:`leaf_bounds`), for A's tolerances ``tc`` (K, L), the same on every row
    (:func:`constant_tolerances`): every column weighed by its level (at most
    :data:`BOUND_U` tolerances, finite and >= 0, so that the rows meeting one form a run
    of the sorted values) or linearly within its level (a last tolerance > 0); no
    infinite value in ``values`` (a missing one is fine)."""
    if not bool(np.all(np.isin(wp.rule, (RULE_LEVEL, RULE_LINEAR)))):
        return False
    for k, rule in enumerate(wp.rule):
        L = int(cmp.n_levels[k]) - 1
        t = tc[k, :L]
        if rule == RULE_LEVEL and not (L <= BOUND_U and bool(np.all(np.isfinite(t) & (t >= 0.0)))):
            return False
        if rule == RULE_LINEAR and not (L >= 1 and np.isfinite(t[-1]) and t[-1] > 0):
            return False
    return not any(bool(np.isinf(v).any()) for v in values)


@numba.njit(inline="always", **_FAST)
def _add_bound(rk, acc, c, d, n):
    # acc[q] += the bound's increments of one column for the A rows of ranks rk[:n]: d[l]
    # for each tolerance l met (nested: the column's bound at its interval, less its bound
    # beyond the last tolerance), met iff the rank lies in its run: int16(r + c[l]) <
    # c[U + l] (patterns._rank_intervals' encoding); unrolled for BOUND_U = 5 (a loop
    # over them does not vectorise)
    c0, c1, c2, c3, c4 = c[0], c[1], c[2], c[3], c[4]
    w0, w1, w2, w3, w4 = c[5], c[6], c[7], c[8], c[9]
    d0, d1, d2, d3, d4 = d[0], d[1], d[2], d[3], d[4]
    z = np.int16(0)
    for q in range(n):
        x = rk[q]
        v = ((d0 if np.int16(x + c0) < w0 else z) + (d1 if np.int16(x + c1) < w1 else z)
             + (d2 if np.int16(x + c2) < w2 else z) + (d3 if np.int16(x + c3) < w3 else z)
             + (d4 if np.int16(x + c4) < w4 else z))
        acc[q] += np.int16(v)


def bound_table(wp: WeightParams, cmp: Comparison, tc: np.ndarray) -> dict:
    """What :func:`leaf_bounds` needs of a fitted model, for A's tolerances ``tc`` (K, L),
    the same on every row (:func:`constant_tolerances`): the bound's tolerances ``tb``
    (K, U) and intervals per column ``nint`` (K,); ``dq`` (K, U) int16, the fixed-point
    increments of each tolerance met (the column's bound rounded up, :data:`BOUND_SCALE`
    over the range of the pair sums); ``S`` the scale and ``lift`` the weight to add to a
    pair's fixed-point sum over ``S``, so that ``floor(S (thr - lift)) - 1`` is the
    threshold a pair of weight ``>= thr`` always reaches (:func:`fixed_threshold`)."""
    K = len(cmp.n_levels)
    U = BOUND_U
    tb = bound_tolerances(wp, cmp, tc)
    ub = level_bounds(wp, cmp, tb, tc)
    L = (tb >= 0.0).sum(axis=1).astype(np.int64)
    for k in range(K):
        # never rising with the tolerances missed (block_intervals may count one too few)
        ub[k, :L[k] + 1] = np.maximum.accumulate(ub[k, :L[k] + 1][::-1])[::-1]
    base = np.array([ub[k, :L[k] + 1].min() for k in range(K)])
    span = float(sum(ub[k, :L[k] + 1].max() - base[k] for k in range(K)))
    S = BOUND_SCALE / span if span > 0 else 1.0
    q = np.zeros((K, U + 1))
    dq = np.zeros((K, U), dtype=np.int16)
    for k in range(K):
        q[k, :L[k] + 1] = np.ceil((ub[k, :L[k] + 1] - base[k]) * S) + 1.0
        for i in range(L[k]):
            dq[k, i] = np.int16(q[k, i] - q[k, i + 1])
    lift = float(base.sum()) + float(sum(q[k, L[k]] for k in range(K))) / S
    return {"tb": tb, "nint": L + 1, "dq": dq, "S": float(S), "lift": lift}


def rank_blocks(tree: dict, tc: np.ndarray, *, rows: int = BLOCK_ROWS) -> dict:
    """Per-block ranks of a KD-tree's A values (:func:`~sdcdist.linkage.prl.kdtree.
    build_tree`) for :func:`leaf_bounds`: the largest subtrees of at most ``rows`` rows
    (or a leaf, of at most :data:`BLOCK_ROWS`) are the blocks, and in each, every
    column's values are ranked (int16, NaN last). ``tc`` (K, L): A's tolerances, the same
    on every row (:func:`constant_tolerances`), kept for the search.

    Returns
    -------
    dict
        ``block`` (n_nodes,) int64 the block of each node (-1 above the blocks);
        ``bstart`` (n_blocks,) the first row of each; ``rank`` (K, n) int16 each row's
        rank in its block; ``nfin`` (n_blocks, K) its non-NaN values; ``sk`` (K,
        n_blocks, rows / :data:`_SKIP`) every ``_SKIP``-th of its sorted values (+inf
        beyond); ``vR`` (n, K) the values row by row (a row's in one cache line or two);
        ``tc``.
    """
    start, stop, left, right = tree["start"], tree["stop"], tree["left"], tree["right"]
    vT = tree["vT"]
    K, n = vT.shape
    block = np.full(start.size, -1, dtype=np.int64)
    roots = []
    stack = [0] if start.size else []
    while stack:
        q = stack.pop()
        if stop[q] - start[q] <= rows or left[q] < 0:
            sub = [q]
            while sub:
                x = sub.pop()
                block[x] = len(roots)
                if left[x] >= 0:
                    sub += [int(left[x]), int(right[x])]
            roots.append(q)
        else:
            stack += [int(left[q]), int(right[q])]
    rank = np.empty((K, n), dtype=np.int16)
    nfin = np.zeros((len(roots), K), dtype=np.int64)
    widest = max((int(stop[q] - start[q]) for q in roots), default=0)
    if widest > BLOCK_ROWS:
        raise ValueError(f"a leaf of {widest} rows exceeds the {BLOCK_ROWS} rows a block of "
                         "int16 ranks can hold")
    sk = np.full((K, len(roots), max(1, -(-widest // _SKIP))), np.inf)
    bstart = np.array([start[q] for q in roots], dtype=np.int64)
    for b, q in enumerate(roots):
        s, e = int(start[q]), int(stop[q])
        pos = np.arange(e - s, dtype=np.int16)
        for k in range(K):
            o = np.argsort(vT[k, s:e], kind="stable")             # NaN last
            rank[k, s + o] = pos
            nfin[b, k] = e - s - int(np.count_nonzero(np.isnan(vT[k, s:e])))
            every = vT[k, s:e][o[::_SKIP]]
            sk[k, b, :every.size] = every
    return {"block": block, "bstart": bstart, "rank": rank, "nfin": nfin, "sk": sk,
            "vR": np.ascontiguousarray(vT.T), "tc": np.ascontiguousarray(tc)}


@numba.njit(inline="always", **_FAST)
def _meets(v, x, t, upper):
    # the walk's predicates (patterns._walk_bounds): the start of the run of values with
    # |v - x| <= t (v >= x or within t), or its end (v > x and not within t)
    if upper:
        return v > x and not abs(v - x) <= t
    return v >= x or abs(v - x) <= t


@numba.njit(inline="always", **_FAST)
def _first(sk, k, b, nf, x, t, upper):
    # among every _SKIP-th sorted value of the block (sk: in cache), the first meeting the
    # predicate (false, then true along them), in ranks: the exact first lies in the
    # _SKIP ranks before it, so this is an upper end and minus _SKIP - 1 a lower one
    a = 0
    e = (nf + _SKIP - 1) // _SKIP
    while a < e:
        h = (a + e) >> 1
        if _meets(sk[k, b, h], x, t, upper):
            e = h
        else:
            a = h + 1
    return a


@numba.njit(**_FAST)
def block_intervals(sk, b, nfin, bj, tb, nint, cst):
    """``cst`` (K, 2U) int16 for B row ``bj`` against block ``b`` (``nfin`` (K,) its
    non-NaN values; ``sk`` every :data:`_SKIP`-th of its sorted values): per column and
    bound tolerance a run of ranks holding every rank that meets it, as
    :func:`~sdcdist.linkage.prl.patterns._rank_intervals` encodes a run.

    Found with the very predicate (``|a - b| <= t`` is false, true, then false along
    sorted values, rounding being monotone) on every ``_SKIP``-th value only: the run
    is widened to those values, by less than ``_SKIP`` ranks at each end. The runs stay
    nested, so a pair may be taken to meet more tolerances than it does, never fewer;
    :func:`bound_table`'s bounds never rise with the tolerances missed, so its bound
    only grows."""
    K = sk.shape[0]
    U = BOUND_U
    for k in range(K):
        x = bj[k]
        nf = nfin[k]
        for l in range(U):
            cst[k, l] = np.int16(-32768)
            cst[k, U + l] = np.int16(-32768)
        if not np.isfinite(x):
            continue
        for l in range(nint[k] - 1):
            t = tb[k, l]
            a = _first(sk, k, b, nf, x, t, False)
            lo = (a - 1) * _SKIP + 1 if a > 0 else 0
            hi = min(_first(sk, k, b, nf, x, t, True) * _SKIP, nf)
            cst[k, l] = np.int16(32768 - lo)
            cst[k, U + l] = np.int16(hi - lo - 32768)


@numba.njit(**_FAST)
def fixed_threshold(thr, S, lift):
    """The fixed-point threshold of :func:`leaf_bounds` for the weight ``thr``: every pair
    of weight ``>= thr`` has a fixed-point bound at least this (-32768: every pair)."""
    if not thr > -np.inf:
        return -32768
    t = np.floor(S * (thr - lift)) - 1.0
    if t < -32768.0:
        return -32768
    if t > 32767.0:
        return 32768
    return int(t)


@numba.njit(**_FAST)
def leaf_bounds(rank, s0, s1, cst, dq, acc):
    """``acc[:s1 - s0]`` (int16) the fixed-point bound of each A row ``s0:s1`` (tree
    order): the sum of its columns' bounds at their intervals, ``dq`` per tolerance met,
    met iff the rank lies in its run ``cst``. Returns the largest."""
    n = s1 - s0
    for q in range(n):
        acc[q] = 0
    for k in range(rank.shape[0]):
        _add_bound(rank[k, s0:s1], acc, cst[k], dq[k], n)
    mx = np.int16(-32768)
    for q in range(n):
        mx = max(mx, acc[q])
    return mx


@numba.njit(**_FAST)
def leaf_weigh(vR, s0, n, acc, lo, hi, bj, order, rules, nlev, tolT, wa, wd, wl, lin, buf, w, g):
    """The A rows ``s0 + q`` (q < n) whose bound ``acc[q]`` (:func:`leaf_bounds`) lies in
    ``[lo, hi)``, into ``buf``, and their exact weights into ``w``: their values gathered
    column by column into ``g`` (K, >= n), then weighed column by column in ``order`` as
    :func:`~sdcdist.linkage.prl.weights.weights_row` adds them (the same floats; ``tolT``
    (K, L, >= n) A's tolerances, the same on every row, so any rows serve). Returns how
    many."""
    npass = 0
    for q in range(n):
        buf[npass] = s0 + q
        npass += (acc[q] >= lo) & (acc[q] < hi)
    if npass == 0:
        return 0
    K = order.size
    for p in range(npass):
        w[p] = 0.0
        i = buf[p]
        for k in range(K):
            g[k, p] = vR[i, k]
    for pos in range(K):
        k = order[pos]
        if rules[k] == RULE_LINEAR:
            linear_column(g, tolT, k, 0, npass, bj[k], wl, lin, nlev[k], w)
        else:
            for p in range(npass):
                w[p] += column_weight(rules[k], abs(g[k, p] - bj[k]), tolT, p, k, nlev[k],
                                      wa[k], wd[k], wl, lin)
    return npass
