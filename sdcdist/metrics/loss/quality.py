"""SDMetrics 0.32's QualityReport measures of a release (they apply to any masked file):
``ks_complement``, ``tv_complement``, ``corr_similarity``, ``contingency_similarity`` and
``quality``, computed from chunk-wise value counts (exact integers,
:mod:`~sdcdist.metrics.loss.profiles`) and exact sums of cross-products, so they depend only
on the records' contents.

Plain numpy on record chunks; the drivers are the metric functions at the bottom.
"""

from __future__ import annotations

import itertools
import math
from collections.abc import Sequence
from fractions import Fraction
from typing import Any

import numpy as np

from ...parallel import map_reduce
from .._registry import MeasureContext, MetricResult, register
from ..exactsum import SQ_SCALE, exact_cross_sums
from .profiles import READS, column_profiles, merge_counts

__all__ = ["ks_statistic", "tv_complement_counts", "pair_counts_chunk", "merge_pair_counts",
           "contingency_score", "cramers_v", "cross_chunk", "merge_cross", "pearson_from_sums",
           "MAX_DECIMALS"]

#: SDMetrics' KSComplement rounds values to this many decimals before the test
MAX_DECIMALS = 14
#: bins of a numeric column in a numeric-categorical pair (SDMetrics' ColumnPairTrends)
PAIR_BINS = 10
#: scale of exact cross sums (units 2**-SQ_SCALE)
_Q = Fraction(1, 2**SQ_SCALE)


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
    return merge_counts([r], [c])


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
    pr = column_profiles(ctx, name)
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
        out.append(_key_counts(key))
    return {"tables": out}


def _key_counts(key: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """The sorted distinct keys (non-negative ints) and their counts: ``np.unique``'s
    answer, by a count per key where the keys span a range no wider than a few times
    their number (no sort)."""
    if key.size and int(key.max()) < max(4 * key.size, 1 << 16):
        c = np.bincount(key)
        k = np.flatnonzero(c)
        return k.astype(key.dtype), c[k].astype(np.int64)
    k, c = np.unique(key, return_counts=True)
    return k, c.astype(np.int64)


def merge_pair_counts(*parts: dict[str, Any]) -> dict[str, Any]:
    """``combine`` of :func:`pair_counts_chunk` (exact integer sums)."""
    return {"tables": [merge_counts([p["tables"][i][0] for p in parts],
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
    pr = column_profiles(ctx, name)

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


# -- registered metrics ------------------------------------------------------------

_UNIT01 = "score (0 to 1; 1 best)"
_SDM = "SDMetrics 0.32 QualityReport"


@register("ks_complement", kind="utility", same_shape=False, categorical=True, mixed=True,
          reads=READS,
          ascending=False, options=("chunk_rows",), unit=_UNIT01, reference=_SDM,
          description="mean over numeric columns of 1 - the two-sample Kolmogorov-Smirnov "
                      "statistic (SDMetrics' KSComplement)")
def _ks(ctx: MeasureContext) -> MetricResult:
    s, cat, names = _column_shapes(ctx, "ks_complement")
    v, bad = _mean([x for x, c in zip(s, cat) if not c])
    return MetricResult(v, excluded=bad, info={"columns": [n for n, c in zip(names, cat)
                                                           if not c]})


@register("tv_complement", kind="utility", same_shape=False, categorical=True,
          reads=READS,
          ascending=False, options=("chunk_rows",), unit=_UNIT01, reference=_SDM,
          description="mean over categorical columns of 1 - the total variation distance "
                      "of the category shares (SDMetrics' TVComplement)")
def _tv(ctx: MeasureContext) -> MetricResult:
    s, cat, names = _column_shapes(ctx, "tv_complement")
    v, bad = _mean([x for x, c in zip(s, cat) if c])
    return MetricResult(v, excluded=bad, info={"columns": [n for n, c in zip(names, cat) if c]})


_PAIR_OPTIONS = ("chunk_rows", "quality_corr_threshold", "quality_assoc_threshold")


@register("corr_similarity", kind="utility", same_shape=False, categorical=True, mixed=True,
          reads=READS,
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
          reads=READS,
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
          reads=READS,
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

