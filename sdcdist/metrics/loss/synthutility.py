"""Utility measures a synthetic release is judged by (they apply to any masked file).

- ``pmse``, ``pmse_ratio``: the propensity-score mean squared error of synthpop's
  ``utility.gen`` (``method = "logit"``, main effects): stack the original (label 0) and
  the release (label 1), c = n_release / N, fit a logistic model of the label on the
  columns (numeric columns scaled to [-1, 1] by the stacked range, with a 0/1 missing
  indicator when either file has a missing value; categorical columns as indicators of
  their categories, a missing value a category of its own, the first category the
  reference; columns with one value in both files left out as synthpop does), pMSE =
  mean of (p - c)**2 over the N stacked records. The fit is the Newton-Raphson of
  ``PS`` (:mod:`sdcdist.metrics.loss.propensity`) on the same fixed-point kernel
  (:func:`~sdcdist.metrics.loss.propensity.logistic_rows`): every sum is exact, so the figure does
  not depend on the chunking or on the records' order, and on an all-numeric pair of
  equal sizes it is ``PS``. A category present in one file only separates its records
  (their fitted p tends to their label); they are taken out of the fit with that p, as
  the supremum of the likelihood has them. ``pmse_ratio`` = pMSE / ((k - 1)(1 - c)**2 c / N),
  k the number of model parameters (synthpop's ``utilR``).
- ``ks_complement``, ``tv_complement``, ``corr_similarity``, ``contingency_similarity``,
  ``quality``: SDMetrics 0.32's QualityReport measures, computed from chunk-wise value
  counts (exact integers) and exact sums of cross-products, so they depend only on the
  records' contents.
- ``ci_overlap``: Karr et al.'s interval overlap for the linear regression of option
  ``regression``, from exact X'X, X'y and y'y, solved in rational arithmetic.

Plain numpy/numba on record chunks; the drivers are the metric functions at the bottom.
"""

from __future__ import annotations

import itertools
import math
import re
from collections.abc import Sequence
from fractions import Fraction
from typing import Any

import numpy as np

from ...errors import SdcInputError, column_positions
from ...parallel import map_reduce, one_blas_thread
from .._registry import MeasureContext, MetricResult, register
from ..exactsum import SCALE, SQ_SCALE, exact_cross_sums, to_fraction
from .propensity import FIX_BITS as _FIX
from .propensity import MAX_NEWTON, PS_BLOCK_ROWS
from .propensity import fixed_quanta as _quanta
from .propensity import logistic_rows as _logistic_rows

__all__ = ["profile_chunk", "merge_profiles", "ks_statistic", "tv_complement_counts",
           "pair_counts_chunk", "merge_pair_counts", "contingency_score", "cramers_v", "cross_chunk",
           "merge_cross", "pearson_from_sums", "parse_regression", "ols_intervals",
           "interval_overlap", "MAX_DECIMALS"]

#: SDMetrics' KSComplement rounds values to this many decimals before the test
MAX_DECIMALS = 14
#: bins of a numeric column in a numeric-categorical pair (SDMetrics' ColumnPairTrends)
PAIR_BINS = 10
#: scale of exact cross sums (units 2**-SQ_SCALE)
_Q = Fraction(1, 2**SQ_SCALE)


# -- which columns -------------------------------------------------------------------

def shared_columns(ctx: MeasureContext, name: str) -> tuple[list[str], list[int], list[int],
                                                            list[bool]]:
    """The columns both files share, in the original's order, the weight and the household
    id left out: names, positions in each file, and whether each is categorical."""
    names = [c for c in ctx.columns if c in set(ctx.masked_columns)
             and c not in (ctx.weight, ctx.household)]
    if not names:
        raise SdcInputError(f"{name} compares the columns both files share, and they share "
                            "none besides the weight; give both files the same column names")
    po = column_positions(names, ctx.columns, what="column", where="the original file")
    pm = column_positions(names, ctx.masked_columns, what="column", where="the masked file")
    return names, po, pm, [c in ctx.categorical for c in names]


# -- pass 1: value counts of every column --------------------------------------------

def profile_chunk(start: int, stop: int, X: Any, pos: Sequence[int]) -> dict[str, Any]:
    """Task: per column of ``pos``, the sorted distinct values of records ``start:stop``
    with their counts (NaN left out and counted apart; -0.0 counted as 0.0)."""
    B = np.asarray(X[start:stop], dtype=np.float64)[:, list(pos)] + 0.0
    vals, cnts, miss = [], [], []
    for j in range(B.shape[1]):
        col = B[:, j]
        m = np.isnan(col)
        v, c = np.unique(col[~m], return_counts=True)
        vals.append(v)
        cnts.append(c.astype(np.int64))
        miss.append(int(m.sum()))
    return {"values": vals, "counts": cnts, "missing": np.array(miss, np.int64),
            "n": int(B.shape[0])}


def _merge_counts(values: Sequence[np.ndarray], counts: Sequence[np.ndarray]
                  ) -> tuple[np.ndarray, np.ndarray]:
    v = np.concatenate(values)
    c = np.concatenate(counts)
    u, inv = np.unique(v, return_inverse=True)
    out = np.zeros(u.size, np.int64)
    np.add.at(out, inv.ravel(), c)
    return u, out


def merge_profiles(*parts: dict[str, Any]) -> dict[str, Any]:
    """``combine`` of :func:`profile_chunk` (exact: unions of values, integer sums)."""
    m = len(parts[0]["values"])
    vals, cnts = [], []
    for j in range(m):
        u, c = _merge_counts([p["values"][j] for p in parts], [p["counts"][j] for p in parts])
        vals.append(u)
        cnts.append(c)
    return {"values": vals, "counts": cnts,
            "missing": np.sum([p["missing"] for p in parts], axis=0),
            "n": sum(p["n"] for p in parts)}


def _profiles(ctx: MeasureContext, name: str) -> dict[str, Any]:
    """Both files' value counts (cached), with the column description."""
    names, po, pm, cat = shared_columns(ctx, name)

    def compute() -> dict[str, Any]:
        chunk = int(ctx.options["chunk_rows"])
        a = map_reduce(ctx.runner, profile_chunk, merge_profiles, [ctx.original],
                       ctx.shape_original[0], chunk_rows=chunk, args=(tuple(po),))
        b = map_reduce(ctx.runner, profile_chunk, merge_profiles, [ctx.masked],
                       ctx.shape_masked[0], chunk_rows=chunk, args=(tuple(pm),))
        return {"names": names, "po": po, "pm": pm, "cat": cat, "a": a, "b": b}
    return ctx.cached(("synthutility_profiles", tuple(names)), compute)


# -- column shapes ----------------------------------------------------------------------

def ks_statistic(va: np.ndarray, ca: np.ndarray, vb: np.ndarray, cb: np.ndarray) -> float:
    """The two-sample Kolmogorov-Smirnov statistic of two samples given as sorted distinct
    values and counts: max over values of |F_a - F_b|, from exact integer cumulative counts
    (one rounding: the final division). NaN when a sample is empty."""
    na, nb = int(ca.sum()), int(cb.sum())
    if na == 0 or nb == 0:
        return math.nan
    u = np.union1d(va, vb)
    fa = np.zeros(u.size, np.int64)
    fb = np.zeros(u.size, np.int64)
    fa[np.searchsorted(u, va)] = ca
    fb[np.searchsorted(u, vb)] = cb
    ea, eb = np.cumsum(fa), np.cumsum(fb)
    if max(na, nb) < 2**31:                       # the products stay below 2**62: exact
        diff = np.abs(ea * nb - eb * na)
    else:
        diff = np.abs(ea.astype(object) * nb - eb.astype(object) * na)
    return float(Fraction(int(diff.max()), na * nb))


def _rounded(v: np.ndarray, c: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Values rounded to :data:`MAX_DECIMALS` decimals as SDMetrics does, counts merged."""
    r = np.round(v, MAX_DECIMALS) + 0.0
    return _merge_counts([r], [c])


def ks_complement_column(pa: dict, pb: dict, j: int) -> float:
    """SDMetrics' KSComplement of column ``j``: 1 - KS of the values rounded to 14 decimals,
    missing values left out; NaN when a file has no value."""
    va, ca = _rounded(pa["values"][j], pa["counts"][j])
    vb, cb = _rounded(pb["values"][j], pb["counts"][j])
    d = ks_statistic(va, ca, vb, cb)
    return math.nan if math.isnan(d) else 1.0 - d


def tv_complement_counts(va: np.ndarray, ca: np.ndarray, vb: np.ndarray, cb: np.ndarray
                         ) -> float:
    """SDMetrics' TVComplement from category counts (missing values left out): categories
    only in the release get a real count of 1e-6 (SDMetrics' regularisation); 1 - ½ Σ
    |share_release - share_original|. NaN when a file has no value."""
    if ca.sum() == 0 or cb.sum() == 0:
        return math.nan
    extra = np.setdiff1d(vb, va)
    u = np.union1d(va, vb)
    ra = np.zeros(u.size)
    sb = np.zeros(u.size)
    ra[np.searchsorted(u, va)] = ca
    ra[np.searchsorted(u, extra)] = 1e-6
    sb[np.searchsorted(u, vb)] = cb
    total_a = float(ca.sum())
    for _ in range(extra.size):
        total_a += 1e-6
    tv = math.fsum(np.abs(sb / float(cb.sum()) - ra / total_a))
    return 1.0 - 0.5 * tv


def _column_shapes(ctx: MeasureContext, name: str) -> tuple[list[float], list[bool], list[str]]:
    pr = _profiles(ctx, name)
    out = []
    for j, c in enumerate(pr["cat"]):
        if c:
            out.append(tv_complement_counts(pr["a"]["values"][j], pr["a"]["counts"][j],
                                            pr["b"]["values"][j], pr["b"]["counts"][j]))
        else:
            out.append(ks_complement_column(pr["a"], pr["b"], j))
    return out, pr["cat"], pr["names"]


# -- column pair trends ----------------------------------------------------------------

def bin_edges(values: np.ndarray) -> np.ndarray:
    """numpy's 10 equal-width bin edges over a column's values (its min and max alone),
    as SDMetrics' ColumnPairTrends discretises a numeric column, each file by its own."""
    if values.size == 0:
        return np.histogram_bin_edges(np.zeros(0), bins=PAIR_BINS)
    return np.histogram_bin_edges(np.array([values[0], values[-1]]), bins=PAIR_BINS)


def pair_counts_chunk(start: int, stop: int, X: Any, pos: Sequence[int],
                      levels: Sequence[np.ndarray | None], edges: Sequence[np.ndarray | None],
                      pairs: Sequence[tuple[int, int]]) -> dict[str, Any]:
    """Task: the two-way counts of each pair of columns (indices into ``pos``) over records
    ``start:stop``, as sorted cell keys and counts. A categorical column's cell is the index
    of its code among ``levels`` (missing: ``len(levels)``); a numeric column's is its bin
    ``numpy.digitize(x, edges)`` (a missing value and the column's maximum both fall in bin
    11, as in SDMetrics)."""
    B = np.asarray(X[start:stop], dtype=np.float64)[:, list(pos)] + 0.0
    idx: dict[int, np.ndarray] = {}
    for j in {k for p in pairs for k in p}:
        col = B[:, j]
        if levels[j] is not None:
            lv = levels[j]
            i = np.searchsorted(lv, col).astype(np.int64)
            i[np.isnan(col)] = lv.size
        else:
            i = np.digitize(col, edges[j]).astype(np.int64)
        idx[j] = i
    out = []
    for a, b in pairs:
        width = (levels[b].size + 1) if levels[b] is not None else PAIR_BINS + 2
        key = idx[a] * width + idx[b]
        k, c = np.unique(key, return_counts=True)
        out.append((k, c.astype(np.int64)))
    return {"tables": out}


def merge_pair_counts(*parts: dict[str, Any]) -> dict[str, Any]:
    """``combine`` of :func:`pair_counts_chunk` (exact integer sums)."""
    return {"tables": [_merge_counts([p["tables"][i][0] for p in parts],
                                     [p["tables"][i][1] for p in parts])
                       for i in range(len(parts[0]["tables"]))]}


def contingency_score(ka: np.ndarray, ca: np.ndarray, kb: np.ndarray, cb: np.ndarray) -> float:
    """SDMetrics' ContingencySimilarity from two-way counts: 1 - ½ Σ over cells of
    |share_original - share_release| (missing values are cells of their own)."""
    na, nb = int(ca.sum()), int(cb.sum())
    if na == 0 or nb == 0:
        return math.nan
    u = np.union1d(ka, kb)
    fa = np.zeros(u.size)
    fb = np.zeros(u.size)
    fa[np.searchsorted(u, ka)] = ca / na
    fb[np.searchsorted(u, kb)] = cb / nb
    return 1.0 - math.fsum(np.abs(fa - fb) / 2)


def cramers_v(keys: np.ndarray, counts: np.ndarray, width: int) -> float:
    """Cramér's V of a two-way table given as cell keys ``row * width + col`` and counts
    (the rows and columns that occur; scipy's ``association(method="cramer")``, chi-square
    without continuity correction). NaN for an empty table or one with a single row or
    column (SDMetrics then gives the pair no score)."""
    r, c = keys // width, keys % width
    ur, ir = np.unique(r, return_inverse=True)
    uc, ic = np.unique(c, return_inverse=True)
    if counts.sum() == 0 or min(ur.size, uc.size) < 2:
        return math.nan
    O = np.zeros((ur.size, uc.size))
    O[ir.ravel(), ic.ravel()] = counts
    n = O.sum()
    E = np.outer(O.sum(axis=1), O.sum(axis=0)) / n
    chi2 = math.fsum(((O - E) ** 2 / E).ravel())
    return math.sqrt(chi2 / n / (min(O.shape) - 1))


def cross_chunk(start: int, stop: int, X: Any, pos: Sequence[int],
                pairs: Sequence[tuple[int, int]]) -> dict[str, Any]:
    """Task: for each pair of numeric columns, exact sums of 1, x, y, x², y², xy over the
    records ``start:stop`` where both are present (object ints, units 2**-SQ_SCALE)."""
    used = sorted({j for p in pairs for j in p})
    where = {j: i for i, j in enumerate(used)}
    pairs = [(where[a], where[b]) for a, b in pairs]
    B = np.asarray(X[start:stop], dtype=np.float64)[:, [pos[j] for j in used]]
    miss = np.isnan(B)
    D = np.column_stack([np.ones(B.shape[0]), np.where(miss, 0.0, B)])
    out = [np.zeros((3, 3), dtype=object) for _ in pairs]
    # one exact pass per pattern of missing values: a pair adds the sums of the patterns
    # where both its columns are present
    code = miss @ (1 << np.arange(miss.shape[1], dtype=np.int64)) if miss.size else \
        np.zeros(B.shape[0], np.int64)
    for pattern in np.unique(code):
        rows = code == pattern
        S = exact_cross_sums(D[rows])
        for i, (a, b) in enumerate(pairs):
            if not (pattern >> a) & 1 and not (pattern >> b) & 1:
                ix = [0, a + 1, b + 1]
                out[i] = out[i] + S[np.ix_(ix, ix)]
    return {"sums": out}


def merge_cross(*parts: dict[str, Any]) -> dict[str, Any]:
    """``combine`` of :func:`cross_chunk` (exact integer sums)."""
    return {"sums": [sum((p["sums"][i] for p in parts[1:]), parts[0]["sums"][i])
                     for i in range(len(parts[0]["sums"]))]}


def pearson_from_sums(S: np.ndarray) -> float:
    """Pearson's r from exact sums [[n, Σx, Σy], [., Σx², Σxy], [., ., Σy²]] (units
    2**-SQ_SCALE): computed in rational arithmetic, one rounding before the square root.
    NaN with fewer than 2 records or a constant column (as scipy's pearsonr)."""
    f = [[Fraction(int(S[i, j])) * _Q for j in range(3)] for i in range(3)]
    n = f[0][0]
    if n < 2:
        return math.nan
    cov = n * f[1][2] - f[0][1] * f[0][2]
    vx = n * f[1][1] - f[0][1] ** 2
    vy = n * f[2][2] - f[0][2] ** 2
    if vx <= 0 or vy <= 0:
        return math.nan
    r = math.sqrt(float(cov * cov / (vx * vy)))
    return math.copysign(min(r, 1.0), float(cov)) if cov != 0 else 0.0


def _pair_trends(ctx: MeasureContext, name: str) -> dict[str, Any]:
    """Every pair of columns as SDMetrics' ColumnPairTrends scores it (cached): numeric
    pairs by CorrelationSimilarity (Pearson), other pairs by ContingencySimilarity with
    each numeric column cut into 10 bins of its own file's range."""
    pr = _profiles(ctx, name)

    def compute() -> dict[str, Any]:
        cat = pr["cat"]
        m = len(cat)
        pairs = list(itertools.combinations(range(m), 2))
        num_pairs = [p for p in pairs if not cat[p[0]] and not cat[p[1]]]
        cont_pairs = [p for p in pairs if cat[p[0]] or cat[p[1]]]
        chunk = int(ctx.options["chunk_rows"])
        thr_r = float(ctx.options["quality_corr_threshold"])
        thr_v = float(ctx.options["quality_assoc_threshold"])
        below = 0
        scores: dict[tuple[int, int], float] = {}
        if num_pairs:
            sums = []
            for X, n, pos in ((ctx.original, ctx.shape_original[0], pr["po"]),
                              (ctx.masked, ctx.shape_masked[0], pr["pm"])):
                sums.append(map_reduce(ctx.runner, cross_chunk, merge_cross, [X], n,
                                       chunk_rows=chunk, args=(tuple(pos), num_pairs))["sums"])
            # SDMetrics refuses a column with one value in either file (NaN score)
            const = [pr["a"]["values"][j].size == 1 or pr["b"]["values"][j].size == 1
                     for j in range(m)]
            for i, (a, b) in enumerate(num_pairs):
                if const[a] or const[b]:
                    scores[(a, b)] = math.nan
                    continue
                ra, rb = pearson_from_sums(sums[0][i]), pearson_from_sums(sums[1][i])
                if thr_r > 0 and not abs(ra) > thr_r:      # NaN r never meets a threshold
                    below += 1
                    scores[(a, b)] = math.nan
                    continue
                scores[(a, b)] = (math.nan if math.isnan(ra) or math.isnan(rb)
                                  else 1.0 - abs(ra - rb) / 2)
        if cont_pairs:
            levels = [np.union1d(pr["a"]["values"][j], pr["b"]["values"][j]) if cat[j]
                      else None for j in range(m)]
            tables = []
            for X, n, pos, p in ((ctx.original, ctx.shape_original[0], pr["po"], pr["a"]),
                                 (ctx.masked, ctx.shape_masked[0], pr["pm"], pr["b"])):
                edges = [None if cat[j] else bin_edges(p["values"][j]) for j in range(m)]
                tables.append(map_reduce(ctx.runner, pair_counts_chunk, merge_pair_counts,
                                         [X], n, chunk_rows=chunk,
                                         args=(tuple(pos), levels, edges, cont_pairs)
                                         )["tables"])
            for i, (a, b) in enumerate(cont_pairs):
                (ka, ca), (kb, cb) = tables[0][i], tables[1][i]
                if thr_v > 0:
                    width = (levels[b].size + 1) if levels[b] is not None else PAIR_BINS + 2
                    v = cramers_v(ka, ca, width)
                    if not v > thr_v:
                        below += 1
                        scores[(a, b)] = math.nan
                        continue
                scores[(a, b)] = contingency_score(ka, ca, kb, cb)
        return {"pairs": pairs, "scores": scores, "cat": cat, "below_threshold": below}
    return ctx.cached(("synthutility_pairs", tuple(pr["names"])), compute)


def _mean(values: Sequence[float]) -> tuple[float, int]:
    """The mean of the non-NaN values (NaN if none) and how many were NaN."""
    ok = [v for v in values if not math.isnan(v)]
    return (math.fsum(ok) / len(ok) if ok else math.nan), len(values) - len(ok)


# -- pMSE ---------------------------------------------------------------------------------

def _design_rows(B: np.ndarray, spec: dict[str, Any]) -> np.ndarray:
    """The design matrix of records ``B`` (their columns of the model): intercept; each
    numeric column scaled to [-1, 1] by the stacked range (0 where missing) and its missing
    indicator; each categorical column's indicators (all categories but the first; a
    missing value is the last category)."""
    cols = [np.ones((B.shape[0], 1))]
    for j, kind, a, b in spec["terms"]:
        col = B[:, j]
        if kind == "num":
            z = (col - a) / b
            cols.append(np.where(np.isnan(col), 0.0, z)[:, None])
        elif kind == "na":
            cols.append(np.isnan(col).astype(np.float64)[:, None])
        else:                                            # "cat": a = levels (NaN last)
            lv = a
            i = np.searchsorted(lv, col)
            i[np.isnan(col)] = lv.size
            cols.append((i[:, None] == np.arange(1, b)[None, :]).astype(np.float64))
    return np.hstack(cols)


def _separated(B: np.ndarray, spec: dict[str, Any]) -> np.ndarray:
    """Whether each record holds a category present in one file only."""
    out = np.zeros(B.shape[0], bool)
    for j, lone in spec["lone"]:
        col = B[:, j]
        hit = np.isin(col, lone[~np.isnan(lone)])
        if np.isnan(lone).any():
            hit |= np.isnan(col)
        out |= hit
    return out


def pmse_chunk(start: int, stop: int, X: Any, Y: Any, pos_x: Sequence[int],
               pos_y: Sequence[int], spec: dict[str, Any], beta: np.ndarray,
               inv_q: np.ndarray, e: np.ndarray) -> dict[str, Any]:
    """Task: the logistic fit's fixed-point sums over records ``start:stop`` of each file
    (the kernel of ``PS``), for the records not separated; and the separated records per
    file."""
    hi = np.zeros(inv_q.size, np.int64)
    lo = np.zeros(inv_q.size, np.int64)
    wrong = 0
    sep = [0, 0]
    fitted = [0, 0]
    for label, F, pos, n in ((0.0, X, pos_x, spec["n"][0]), (1.0, Y, pos_y, spec["n"][1])):
        s, t = min(start, n), min(stop, n)
        if t <= s:
            continue
        B = np.asarray(F[s:t], dtype=np.float64)[:, list(pos)] + 0.0
        drop = _separated(B, spec)
        sep[int(label)] += int(drop.sum())
        B = B[~drop]
        fitted[int(label)] += B.shape[0]
        if B.shape[0]:
            D = np.ascontiguousarray(_design_rows(B, spec))
            wrong += int(_logistic_rows(D, beta, label, inv_q, hi, lo))
    exact = np.array([((int(h) << _FIX) + int(x)) << int(ei - _FIX + SCALE)
                      for h, x, ei in zip(hi, lo, e)], dtype=object)
    return {"exact": exact, "wrong": wrong, "sep": np.array(sep, np.int64),
            "fitted": np.array(fitted, np.int64)}


def merge_pmse(*parts: dict[str, Any]) -> dict[str, Any]:
    return {"exact": sum((p["exact"] for p in parts[1:]), parts[0]["exact"]),
            "wrong": sum(p["wrong"] for p in parts),
            "sep": np.sum([p["sep"] for p in parts], axis=0),
            "fitted": np.sum([p["fitted"] for p in parts], axis=0)}


def _pmse_spec(ctx: MeasureContext, name: str) -> dict[str, Any]:
    """The model's terms from both files' value counts: which columns enter, how numeric
    columns are scaled, the categories, and the categories present in one file only."""
    pr = _profiles(ctx, name)
    terms: list[tuple] = []
    lone: list[tuple] = []
    k = 1
    left_out = []
    for j, (c, nm) in enumerate(zip(pr["cat"], pr["names"])):
        pa, pb = pr["a"], pr["b"]
        miss = bool(pa["missing"][j] or pb["missing"][j])
        vals = np.union1d(pa["values"][j], pb["values"][j])
        distinct = vals.size + int(miss)
        if distinct <= 1:                  # one value (or only missing) in both: synthpop drops it
            left_out.append(nm)
            continue
        if c:
            lv = vals
            L = lv.size + int(miss)
            terms.append((j, "cat", lv, L))
            k += L - 1
            only_a = np.setdiff1d(pa["values"][j], pb["values"][j])
            only_b = np.setdiff1d(pb["values"][j], pa["values"][j])
            one = np.concatenate([only_a, only_b])
            if bool(pa["missing"][j]) != bool(pb["missing"][j]):
                one = np.concatenate([one, [np.nan]])
            if one.size:
                lone.append((j, one))
        else:
            lo_, hi_ = float(vals[0]) if vals.size else 0.0, float(vals[-1]) if vals.size else 0.0
            if hi_ > lo_:
                terms.append((j, "num", (lo_ + hi_) / 2, (hi_ - lo_) / 2))
                k += 1
            if miss:
                terms.append((j, "na", 0.0, 0.0))
                k += 1
                if bool(pa["missing"][j]) != bool(pb["missing"][j]):
                    lone.append((j, np.array([np.nan])))     # its indicator separates
    spec = {"terms": terms, "lone": lone, "k": k, "left_out": left_out,
            "n": (ctx.shape_original[0], ctx.shape_masked[0]),
            "po": pr["po"], "pm": pr["pm"]}
    # taking separated records out can leave other categories in one file only: repeat
    chunk = int(ctx.options["chunk_rows"])
    cat_terms = [t[0] for t in terms if t[1] in ("cat", "na")]
    is_cat = {t[0]: t[1] == "cat" for t in terms if t[1] in ("cat", "na")}
    while lone and cat_terms:
        counts = []
        for X, n, pos in ((ctx.original, spec["n"][0], pr["po"]),
                          (ctx.masked, spec["n"][1], pr["pm"])):
            counts.append(map_reduce(ctx.runner, remaining_chunk, merge_profiles, [X], n,
                                     chunk_rows=chunk, args=(tuple(pos), spec, cat_terms)))
        new = []
        for i, j in enumerate(cat_terms):
            a, b = counts[0], counts[1]
            one = np.concatenate([np.setdiff1d(a["values"][i], b["values"][i]),
                                  np.setdiff1d(b["values"][i], a["values"][i])]) \
                if is_cat[j] else np.zeros(0)
            if bool(a["missing"][i]) != bool(b["missing"][i]):
                one = np.concatenate([one, [np.nan]])
            if one.size:
                new.append((j, one))
        if not new:
            break
        merged = {j: v for j, v in lone}
        for j, v in new:
            merged[j] = np.unique(np.concatenate([merged[j], v])) if j in merged else v
        lone = sorted(merged.items())
        spec["lone"] = lone
    return spec


def remaining_chunk(start: int, stop: int, X: Any, pos: Sequence[int], spec: dict[str, Any],
                    cols: Sequence[int]) -> dict[str, Any]:
    """Task: value counts of columns ``cols`` over records ``start:stop`` that hold no
    category of ``spec["lone"]``."""
    B = np.asarray(X[start:stop], dtype=np.float64)[:, list(pos)] + 0.0
    B = B[~_separated(B, spec)]
    return profile_chunk(0, B.shape[0], B, list(cols))


def _fit_bounds(k: int, beta: np.ndarray) -> np.ndarray:
    """Bounds of the kernel's terms (see ``_logistic_rows``): every design entry is in
    [-1, 1]."""
    F = np.ones(k)
    eta = float(np.sum(np.abs(beta))) * (1 + 1e-9) + 1.0
    iu = np.triu_indices(k)
    return np.concatenate([[2.0 * eta + 1.0, 0.25], F, 0.25 * F[iu[0]] * F[iu[1]] + 1e-300])


def _exact_floats(st: dict[str, Any], k: int) -> dict[str, Any]:
    v = np.array([float(to_fraction(int(x))) for x in st["exact"]])
    hess = np.zeros((k, k))
    iu = np.triu_indices(k)
    hess[iu] = v[2 + k:]
    hess[iu[1], iu[0]] = v[2 + k:]
    return {"ll": float(v[0]), "u": float(v[1]), "grad": v[2:2 + k], "hess": hess,
            "wrong": int(st["wrong"]), "sep": st["sep"], "fitted": st["fitted"]}


def pmse_fit(ctx: MeasureContext, name: str) -> MetricResult:
    """pMSE (cached per context) with ``info`` holding k, c and the fit's detail."""
    def compute() -> MetricResult:
        spec = _pmse_spec(ctx, name)
        n0, n1 = spec["n"]
        N = n0 + n1
        if n0 == 0 or n1 == 0:
            raise SdcInputError(f"{name} fits a model telling the original from the release "
                                "and needs records in both; got an empty file")
        c = n1 / N
        width = 1 + sum(1 if t[1] in ("num", "na") else t[3] - 1 for t in spec["terms"])
        r = ctx.runner
        chunk = min(int(ctx.options["chunk_rows"]), PS_BLOCK_ROWS)
        spec_h = r.share(spec)

        def evaluate(beta: np.ndarray) -> dict[str, Any]:
            inv_q, e = _quanta(_fit_bounds(width, beta))
            st = map_reduce(r, pmse_chunk, merge_pmse, [ctx.original, ctx.masked], max(n0, n1),
                            chunk_rows=chunk, args=(tuple(spec["po"]), tuple(spec["pm"]),
                                                    spec_h, beta, inv_q, e))
            return _exact_floats(st, width)

        beta = np.zeros(width)
        cur = evaluate(beta)
        sep_n = cur["sep"]
        n_fit = int(cur["fitted"].sum())
        # separated records: p = their label; contribution (label - c)**2
        sep_term = float(sep_n[0]) * c * c + float(sep_n[1]) * (1 - c) ** 2
        info: dict[str, Any] = {"parameters": spec["k"], "c": c,
                                "separated_records": int(sep_n.sum())}
        if spec["left_out"]:
            info["one_value_columns_left_out"] = list(spec["left_out"])

        def value(fit: dict[str, Any], exact_u: bool = True) -> float:
            if n_fit == 0:
                return sep_term / N
            # Σ(μ - c)² = Σ(μ - ½)² + 2(½ - c)Σ(μ - ½) + n_fit(½ - c)², Σμ = Σlabel - g₀
            s_mu = float(fit["fitted"][1]) - fit["grad"][0]
            d = 0.5 - c
            u = fit["u"] + 2 * d * (s_mu - n_fit / 2) + n_fit * d * d
            return (u + sep_term) / N

        if n_fit == 0:
            return MetricResult(value(cur), info=info | {"iterations": 0})
        for it in range(MAX_NEWTON):
            if cur["wrong"] == 0:
                # complete separation of the fitted records: every p tends to its label
                sup = (sep_term + float(cur["fitted"][0]) * c * c
                       + float(cur["fitted"][1]) * (1 - c) ** 2) / N
                return MetricResult(sup, flag=1, info=info | {"separation": "complete",
                                                             "iterations": it})
            with one_blas_thread():
                step = np.linalg.lstsq(cur["hess"], cur["grad"], rcond=None)[0]
            for _ in range(40):
                new = evaluate(beta + step)
                if new["ll"] >= cur["ll"] - 1e-12 * abs(cur["ll"]):
                    break
                step = step / 2
            beta = beta + step
            gain = new["ll"] - cur["ll"]
            cur = new
            if abs(gain) <= 1e-11 * (1.0 + abs(cur["ll"])) and np.max(np.abs(step)) < 1e-6:
                return MetricResult(value(cur), info=info | {"iterations": it + 1})
        return MetricResult(value(cur), flag=1,
                            info=info | {"converged": False, "iterations": MAX_NEWTON})
    return ctx.cached(("synthutility_pmse",), compute)


# -- CI overlap ------------------------------------------------------------------------

_NAME = r"[^~+\s]+"


def parse_regression(text: str) -> tuple[str, list[str]]:
    """``"y ~ x1 + x2"`` -> ``("y", ["x1", "x2"])``; anything else raises."""
    m = re.fullmatch(rf"\s*({_NAME})\s*~\s*({_NAME}(?:\s*\+\s*{_NAME})*)\s*", str(text))
    if not m:
        raise SdcInputError(f"option regression must read 'y ~ x1 + x2' (a response column, "
                            f"'~', predictor columns joined by '+'); got {str(text)!r}")
    preds = [p.strip() for p in m.group(2).split("+")]
    if len(set(preds)) != len(preds) or m.group(1) in preds:
        raise SdcInputError("option regression names a column twice; name each predictor "
                            "once and not the response among them")
    return m.group(1), preds


def ols_chunk(start: int, stop: int, X: Any, pos: Sequence[int], cats: Sequence[Any]
              ) -> dict[str, Any]:
    """Task: exact sums of cross-products of [1, predictors..., y] over the complete records
    ``start:stop`` (a categorical predictor as indicators of ``cats[j]`` but the first)."""
    B = np.asarray(X[start:stop], dtype=np.float64)[:, list(pos)]
    B = B[~np.isnan(B).any(axis=1)]
    cols = [np.ones((B.shape[0], 1))]
    for j in range(B.shape[1]):
        if cats[j] is None:
            cols.append(B[:, j:j + 1])
        else:
            cols.append((B[:, j:j + 1] == np.asarray(cats[j])[None, 1:]).astype(np.float64))
    D = np.hstack(cols)
    if D.shape[0] == 0:
        return {"S": np.zeros((D.shape[1],) * 2, dtype=object)}
    return {"S": exact_cross_sums(D)}


def _add_S(*parts: dict[str, Any]) -> dict[str, Any]:
    return {"S": sum((p["S"] for p in parts[1:]), parts[0]["S"])}


def _solve(A: list[list[Fraction]], b: list[list[Fraction]]) -> list[list[Fraction]] | None:
    """Exact Gauss-Jordan: A⁻¹ b in rationals; None if A is singular."""
    p = len(A)
    M = [A[i][:] + b[i][:] for i in range(p)]
    for col in range(p):
        piv = next((r for r in range(col, p) if M[r][col] != 0), None)
        if piv is None:
            return None
        M[col], M[piv] = M[piv], M[col]
        inv = 1 / M[col][col]
        M[col] = [v * inv for v in M[col]]
        for r in range(p):
            if r != col and M[r][col] != 0:
                f = M[r][col]
                M[r] = [x - f * y for x, y in zip(M[r], M[col])]
    return [row[p:] for row in M]


def ols_intervals(S: np.ndarray, level: float = 0.95) -> tuple[np.ndarray, np.ndarray] | None:
    """The OLS coefficients' ``level`` intervals from exact sums of cross-products of
    [1, x..., y] (units 2**-SQ_SCALE): β = (X'X)⁻¹X'y, s² = (y'y - β'X'y)/(n - p), in
    rationals; bounds β ± t s √((X'X)⁻¹_jj). None if X'X is singular or n ≤ p."""
    from scipy.stats import t as student_t
    q = S.shape[0] - 1
    F = [[Fraction(int(S[i, j])) * _Q for j in range(q + 1)] for i in range(q + 1)]
    n = F[0][0]
    if n <= q:
        return None
    A = [row[:q] for row in F[:q]]
    ident = [[Fraction(int(i == j)) for j in range(q)] for i in range(q)]
    inv = _solve(A, ident)
    if inv is None:
        return None
    xty = [F[i][q] for i in range(q)]
    beta = [sum(inv[i][j] * xty[j] for j in range(q)) for i in range(q)]
    rss = F[q][q] - sum(b * v for b, v in zip(beta, xty))
    s2 = max(rss, Fraction(0)) / (n - q)
    tq = float(student_t.ppf(0.5 + level / 2, int(n) - q))
    b = np.array([float(v) for v in beta])
    se = np.array([math.sqrt(float(s2 * inv[i][i])) for i in range(q)])
    return b - tq * se, b + tq * se


def interval_overlap(lo_o: np.ndarray, hi_o: np.ndarray, lo_s: np.ndarray, hi_s: np.ndarray
                     ) -> np.ndarray:
    """Karr et al.'s J per coefficient: ½[(min(U) - max(L))/(U_o - L_o) + (min(U) -
    max(L))/(U_s - L_s)] (negative where the intervals do not meet)."""
    inter = np.minimum(hi_o, hi_s) - np.maximum(lo_o, lo_s)
    return 0.5 * (inter / (hi_o - lo_o) + inter / (hi_s - lo_s))


def _regression(ctx: MeasureContext, name: str) -> tuple[str, list[str]] | None:
    names, _, _, cat = shared_columns(ctx, name)
    text = ctx.options["regression"]
    if text is None:
        numeric = [c for c, k in zip(names, cat) if not k]
        if len(numeric) < 2:
            return None
        return numeric[-1], [c for c in names if c != numeric[-1]]
    y, xs = parse_regression(text)
    column_positions([y], names, what="response column of option regression",
                     where="the columns both files share")
    column_positions(xs, names, what="predictor column of option regression",
                     where="the columns both files share")
    if y in ctx.categorical:
        raise SdcInputError(f"ci_overlap fits a linear regression, and its response {y!r} is "
                            "categorical; name a numeric response in option regression "
                            "('y ~ x1 + x2')")
    return y, xs


# -- registered metrics ------------------------------------------------------------------

_UNIT01 = "score (0 to 1; 1 best)"
_SDM = "SDMetrics 0.32 QualityReport"


#: the measures leave the household id out when one is named (and the weight: an input
#: of the design, not a column of the release)
_READS = ("household",)


@register("pmse", kind="utility", same_shape=False, categorical=True, mixed=True,
          reads=_READS,
          options=("chunk_rows",), unit="(p − c)², 0 (indistinguishable) up",
          reference="Snoke, Raab, Nowok, Dibben and Slavkovic (2018); synthpop utility.gen",
          description="propensity-score mean squared error: mean (p - c)**2 of a logistic "
                      "model (main effects, categories as indicators) telling the release "
                      "from the original, c = the release's share of the stacked records")
def _pmse(ctx: MeasureContext) -> MetricResult:
    return pmse_fit(ctx, "pmse")


@register("pmse_ratio", kind="utility", same_shape=False, categorical=True, mixed=True,
          reads=_READS,
          options=("chunk_rows",), unit="ratio to the null expectation (1 = as expected)",
          reference="Snoke et al. (2018); synthpop utility.gen (utilR)",
          description="pMSE over its null expectation (k - 1)(1 - c)**2 c / N, k the model's "
                      "parameters, N the stacked records")
def _pmse_ratio(ctx: MeasureContext) -> MetricResult:
    res = pmse_fit(ctx, "pmse_ratio")
    k, c = res.info["parameters"], res.info["c"]
    N = ctx.shape_original[0] + ctx.shape_masked[0]
    if k <= 1:
        return MetricResult(math.nan, excluded=1, info=res.info | {
            "why": "the model has no parameter besides the intercept"})
    null = (k - 1) * (1 - c) ** 2 * c / N
    return MetricResult(res.value / null, flag=res.flag, info=res.info | {"null": null})


@register("ks_complement", kind="utility", same_shape=False, categorical=True, mixed=True,
          reads=_READS,
          ascending=False, options=("chunk_rows",), unit=_UNIT01, reference=_SDM,
          description="mean over numeric columns of 1 - the two-sample Kolmogorov-Smirnov "
                      "statistic (SDMetrics' KSComplement)")
def _ks(ctx: MeasureContext) -> MetricResult:
    s, cat, names = _column_shapes(ctx, "ks_complement")
    v, bad = _mean([x for x, c in zip(s, cat) if not c])
    return MetricResult(v, excluded=bad, info={"columns": [n for n, c in zip(names, cat)
                                                           if not c]})


@register("tv_complement", kind="utility", same_shape=False, categorical=True,
          reads=_READS,
          ascending=False, options=("chunk_rows",), unit=_UNIT01, reference=_SDM,
          description="mean over categorical columns of 1 - the total variation distance "
                      "of the category shares (SDMetrics' TVComplement)")
def _tv(ctx: MeasureContext) -> MetricResult:
    s, cat, names = _column_shapes(ctx, "tv_complement")
    v, bad = _mean([x for x, c in zip(s, cat) if c])
    return MetricResult(v, excluded=bad, info={"columns": [n for n, c in zip(names, cat) if c]})


_PAIR_OPTIONS = ("chunk_rows", "quality_corr_threshold", "quality_assoc_threshold")


@register("corr_similarity", kind="utility", same_shape=False, categorical=True, mixed=True,
          reads=_READS,
          ascending=False, options=_PAIR_OPTIONS, unit=_UNIT01, reference=_SDM,
          description="mean over pairs of numeric columns whose original |r| exceeds "
                      "quality_corr_threshold of 1 - |r - r'|/2, Pearson's r (SDMetrics' "
                      "CorrelationSimilarity as its QualityReport averages it)")
def _corr(ctx: MeasureContext) -> MetricResult:
    t = _pair_trends(ctx, "corr_similarity")
    cat = t["cat"]
    v, bad = _mean([t["scores"][p] for p in t["pairs"] if not cat[p[0]] and not cat[p[1]]])
    return MetricResult(v, excluded=bad, info={"pairs_left_out": bad})


@register("contingency_similarity", kind="utility", same_shape=False, categorical=True,
          reads=_READS,
          ascending=False, options=_PAIR_OPTIONS, unit=_UNIT01, reference=_SDM,
          description="mean over pairs of categorical columns whose original Cramér's V "
                      "exceeds quality_assoc_threshold of 1 - the total variation distance of "
                      "their two-way tables (SDMetrics' ContingencySimilarity as its "
                      "QualityReport averages it)")
def _cont(ctx: MeasureContext) -> MetricResult:
    t = _pair_trends(ctx, "contingency_similarity")
    cat = t["cat"]
    v, bad = _mean([t["scores"][p] for p in t["pairs"] if cat[p[0]] and cat[p[1]]])
    return MetricResult(v, excluded=bad, info={"pairs_left_out": bad})


@register("quality", kind="utility", same_shape=False, categorical=True, mixed=True,
          reads=_READS,
          ascending=False, options=_PAIR_OPTIONS, unit=_UNIT01, reference=_SDM,
          description="SDMetrics' quality score: the mean of column shapes (KS and TV "
                      "complements) and column pair trends (correlation and contingency "
                      "similarities, numeric columns binned against categorical ones)")
def _quality(ctx: MeasureContext) -> MetricResult:
    s, _, _ = _column_shapes(ctx, "quality")
    t = _pair_trends(ctx, "quality")
    shapes, bad_s = _mean(s)
    trends, bad_t = _mean([t["scores"][p] for p in t["pairs"]])
    v, _ = _mean([shapes, trends])
    return MetricResult(v, excluded=bad_s + bad_t,
                        info={"column_shapes": shapes, "column_pair_trends": trends})


@register("ci_overlap", kind="utility", same_shape=False, categorical=True, mixed=True,
          reads=_READS, ascending=False,
          options=("chunk_rows", "regression"), unit="overlap (1 = same intervals)",
          reference="Karr, Kohnen, Oganian, Reiter and Sanil (2006)",
          description="mean over the coefficients of the regression named by option "
                      "regression of the overlap J of their 95% intervals from the original "
                      "and the release")
def _ci_overlap(ctx: MeasureContext) -> MetricResult:
    reg = _regression(ctx, "ci_overlap")
    if reg is None:
        return MetricResult(math.nan, excluded=1, info={
            "why": "no regression named and fewer than two numeric columns"})
    y, xs = reg
    cols = xs + [y]
    po = column_positions(cols, ctx.columns, what="column", where="the original file")
    pm = column_positions(cols, ctx.masked_columns, what="column", where="the masked file")
    cat_x = [c in ctx.categorical for c in xs]
    cats: list[Any] = [None] * len(cols)
    if any(cat_x):
        pr = _profiles(ctx, "ci_overlap")
        for i, c in enumerate(xs):
            if cat_x[i]:
                j = pr["names"].index(c)
                cats[i] = tuple(np.union1d(pr["a"]["values"][j], pr["b"]["values"][j]))
    chunk = int(ctx.options["chunk_rows"])
    out = []
    for X, n, pos, which in ((ctx.original, ctx.shape_original[0], po, "original"),
                             (ctx.masked, ctx.shape_masked[0], pm, "release")):
        S = map_reduce(ctx.runner, ols_chunk, _add_S, [X], n, chunk_rows=chunk,
                       args=(tuple(pos), tuple(cats)))["S"]
        ci = ols_intervals(S)
        if ci is None and ctx.options["regression"] is None:
            # the default regression (not named): no figure rather than a refusal
            return MetricResult(math.nan, excluded=1, info={
                "regression": f"{y} ~ {' + '.join(xs)}",
                "why": f"the default regression has no unique least-squares fit on the {which}"})
        if ci is None:
            raise SdcInputError(
                f"ci_overlap: the regression {y} ~ {' + '.join(xs)} has no unique least-"
                f"squares fit on the {which} (fewer complete records than coefficients, or a "
                "predictor constant or collinear with others, or a category absent); name "
                "other predictors in option regression")
        out.append(ci)
    J = interval_overlap(out[0][0], out[0][1], out[1][0], out[1][1])
    return MetricResult(math.fsum(J) / J.size,
                        info={"regression": f"{y} ~ {' + '.join(xs)}",
                              "per_coefficient": [float(v) for v in J]})
