"""Information-loss metrics computed as record-chunk reductions.

One pass over both files (:func:`record_stats`, shared by all metrics here
through ``ctx.cached``) returns per-chunk sufficient statistics; ``combine``
merges them (exact integer sums for column sums, square sums, the sums of
products of every pair of columns and the error totals). Means, variances,
covariances and error totals come from the exact sums, so they do not depend on
record order or chunking at all (a permutation of a column leaves them bit-identical, which is
why rank swapping gives exactly 0 for M_MV and S_MV). The reduction chunking is the
fixed ``chunk_rows`` option, never the storage chunking, so results do not
depend on how the data were stored or on the number of workers.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from ...errors import SdcInputError, constant_error, count_error, magnitude_error
from ...parallel import map_reduce
from .._registry import REGISTRY, MeasureContext, MetricResult, register
from ..exactsum import SQ_SCALE, exact_cross_sums, exact_square_sums, exact_sums, to_fraction

__all__ = ["stats_chunk", "combine_stats", "record_stats", "table1", "il_sd"]

_CHUNK = ("chunk_rows",)      # the options of every metric computed from record_stats

_MV_OBJECTS = ("X", "M", "V", "S", "R")


#: rows per sub-block inside a chunk task (bounds the temporaries to about one chunk)
SUB_ROWS = 8192


def stats_chunk(start: int, stop: int, X: Any, Y: Any) -> dict[str, Any]:
    """Sufficient statistics of records ``start:stop`` of both files.

    Returns counts, exact column sums, square sums and sums of products of pairs of
    columns (Python ints, see :mod:`~sdcdist.metrics.exactsum`), and exact per-column
    totals of the record-wise errors: ``|x - x'|``, ``(x - x')**2``, ``|x - x'|/|x|`` over ``x != 0``
    (with the count of ``x == 0``), and the IL1 terms ``|x - x'|/(0.5(|x|+|x'|))``.
    """
    x = np.asarray(X[start:stop], dtype=np.float64)
    y = np.asarray(Y[start:stop], dtype=np.float64)
    return combine_stats(*[_block_stats(x[a:a + SUB_ROWS], y[a:a + SUB_ROWS])
                           for a in range(0, x.shape[0], SUB_ROWS)])


def _block_stats(x: np.ndarray, y: np.ndarray) -> dict[str, Any]:
    out: dict[str, Any] = {"n": np.array(x.shape[0], dtype=np.int64),
                           "bad_x": np.count_nonzero(~np.isfinite(x), axis=0),
                           "bad_y": np.count_nonzero(~np.isfinite(y), axis=0)}
    if out["bad_x"].any() or out["bad_y"].any():
        return out                       # reported by the aggregate, nothing else computed
    for name, a in (("x", x), ("y", y)):
        out[f"sum_{name}"] = exact_sums(a)
        out[f"sq_{name}"] = exact_square_sums(a)
        out[f"cross_{name}"] = exact_cross_sums(a)
    d = np.abs(x - y)
    ax = np.abs(x)
    den = 0.5 * (ax + np.abs(y))
    # every total exact (Python ints, units 2**-SCALE): the same bits in any row order
    out.update(absdiff=exact_sums(d), sqdiff=exact_sums(d * d),
               mv_sum=exact_sums(np.divide(d, ax, out=np.zeros_like(d), where=ax != 0)),
               mv_zero=np.count_nonzero(ax == 0, axis=0),
               il1_sum=exact_sums(np.divide(d, den, out=np.zeros_like(d), where=den != 0)))
    return out


def combine_stats(*parts: dict[str, Any]) -> dict[str, Any]:
    """Merge chunk statistics: exact sums (Python ints) and counts are added."""
    out = dict(parts[0])
    for p in parts[1:]:
        bad = "sum_x" not in out or "sum_x" not in p
        merged = {"n": out["n"] + p["n"], "bad_x": out["bad_x"] + p["bad_x"],
                  "bad_y": out["bad_y"] + p["bad_y"]}
        if not bad:
            for k in ("sum_x", "sq_x", "cross_x", "sum_y", "sq_y", "cross_y", "absdiff",
                      "sqdiff", "mv_sum", "mv_zero", "il1_sum"):
                merged[k] = out[k] + p[k]
        out = merged
    return out


def record_stats(ctx: MeasureContext) -> dict[str, Any]:
    """The one pass over both files shared by every metric of this module (cached).

    Raises :class:`SdcInputError` when a file holds NaN or infinite values.
    """
    def run() -> dict[str, Any]:
        chunk = int(ctx.options["chunk_rows"])   # checked in [1, MAX_CHUNK] (sdcdist.options)
        st = map_reduce(ctx.runner, stats_chunk, combine_stats, [ctx.original, ctx.masked],
                        ctx.shape_original[0], chunk_rows=chunk)
        for key, what in (("bad_x", "original"), ("bad_y", "masked")):
            bad = np.flatnonzero(st[key])
            if bad.size:
                cols = {ctx.columns[j]: int(st[key][j]) for j in bad}
                raise SdcInputError(f"the {what} file has missing or infinite values "
                                    f"(count per column: {cols}); information-loss metrics "
                                    f"need complete numeric data: impute or drop them first")
        n = int(st["n"])
        st["exact_mean_x"], st["exact_var_x"] = _exact_moments(st["sum_x"], st["sq_x"], n)
        st["exact_mean_y"], st["exact_var_y"] = _exact_moments(st["sum_y"], st["sq_y"], n)
        for key, what in (("exact_var_x", "original"), ("exact_var_y", "masked")):
            big = np.flatnonzero(np.isinf(st[key]))
            if big.size:
                cols = [ctx.columns[j] for j in big]
                raise magnitude_error(cols, f"the {what} file", "measuring")
        return st
    return ctx.cached("record_stats", run)


def _exact_moments(s: np.ndarray, q: np.ndarray, n: int) -> tuple[np.ndarray, np.ndarray]:
    """Correctly rounded means and sample variances (n - 1) from exact sums."""
    mean = np.empty(len(s))
    var = np.full(len(s), np.nan)
    for j, (sj, qj) in enumerate(zip(s, q)):
        fs, fq = to_fraction(sj), to_fraction(qj, SQ_SCALE)
        mean[j] = float(fs / n)
        if n > 1:
            try:
                var[j] = float((n * fq - fs * fs) / (n * (n - 1)))
            except OverflowError:        # values near 1e308: refused by the caller
                var[j] = np.inf
    return mean, var


def _covariances(st: dict[str, Any], name: str) -> np.ndarray:
    """Sample covariance matrix (n - 1), each entry the correctly rounded exact value
    ``(n sum x_j x_k - sum x_j sum x_k) / (n (n - 1))``; the diagonal is the exact variance."""
    n = int(st["n"])
    s = [to_fraction(v) for v in st[f"sum_{name}"]]
    c = st[f"cross_{name}"]
    m = len(s)
    v = np.empty((m, m))
    for i in range(m):
        for j in range(i, m):
            try:
                v[i, j] = v[j, i] = float((n * to_fraction(c[i, j], SQ_SCALE) - s[i] * s[j])
                                          / (n * (n - 1)))
            except OverflowError:
                v[i, j] = v[j, i] = np.inf if i == j else np.nan
    np.fill_diagonal(v, st[f"exact_var_{name}"])
    return v


def _total(v: Any) -> float:
    """The correctly rounded float of an exact total (units ``2**-SCALE``)."""
    return float(to_fraction(int(v)))


def _totals(vs: Any) -> np.ndarray:
    """:func:`_total` of each column's exact total."""
    return np.array([_total(v) for v in vs], dtype=np.float64)


def _sd_check(var: np.ndarray, columns: tuple[str, ...], metric: str, what: str) -> np.ndarray:
    sd = np.sqrt(var)
    bad = [columns[j] for j in np.flatnonzero(~(sd > 0))]
    if bad:
        raise constant_error(bad, f"the {what} file", f"{metric} divides by each {what} "
                             "column's standard deviation", "drop them from both files first")
    return sd


def il_sd(ctx: MeasureContext, metric: str) -> np.ndarray:
    """The original file's column standard deviations; error if one is zero."""
    st = record_stats(ctx)
    if int(st["n"]) < 2:
        raise count_error(f"The file measured by {metric}", "at least 2", "records",
                          int(st["n"]))
    return _sd_check(st["exact_var_x"], ctx.columns, metric, "original")


def _errors(a: np.ndarray, b: np.ndarray) -> dict[str, MetricResult]:
    """MSE, MAE and MV (|a - b|/|a|, zero denominators left out and counted)."""
    d = np.abs(a - b)
    keep = a != 0
    excluded = int(np.count_nonzero(~keep))
    mv = float(np.mean(d[keep] / np.abs(a[keep]))) if keep.any() else float("nan")
    return {"MSE": MetricResult(float(np.mean(d * d))), "MAE": MetricResult(float(np.mean(d))),
            "MV": MetricResult(mv, excluded=excluded,
                               info={"terms": int(a.size), "excluded": excluded})}


def table1(ctx: MeasureContext, obj: str) -> dict[str, MetricResult]:
    """The three errors of Table 1 [DMT] for one object: X, M, V, S or R (cached)."""
    def run() -> dict[str, MetricResult]:
        st = record_stats(ctx)
        n, p = int(st["n"]), len(ctx.columns)
        if obj == "X":
            terms = n * p
            excluded = int(st["mv_zero"].sum())
            mv = (float(to_fraction(sum(st["mv_sum"])) / (terms - excluded))
                  if terms > excluded else float("nan"))
            return {"MSE": MetricResult(float(to_fraction(sum(st["sqdiff"])) / terms)),
                    "MAE": MetricResult(float(to_fraction(sum(st["absdiff"])) / terms)),
                    "MV": MetricResult(mv, excluded=excluded,
                                       info={"terms": terms, "excluded": excluded})}
        if obj == "M":
            return _errors(st["exact_mean_x"], st["exact_mean_y"])
        if n < 2:
            raise count_error(f"The file measured by {obj}_MSE, {obj}_MAE and {obj}_MV",
                              "at least 2", "records", n)
        if obj == "S":
            return _errors(st["exact_var_x"], st["exact_var_y"])
        vx, vy = _covariances(st, "x"), _covariances(st, "y")
        if obj == "V":
            iu = np.triu_indices(p)
            return _errors(vx[iu], vy[iu])
        sx = _sd_check(st["exact_var_x"], ctx.columns, "R_MSE/R_MAE/R_MV (correlations)",
                       "original")
        sy = _sd_check(st["exact_var_y"], ctx.columns, "R_MSE/R_MAE/R_MV (correlations)",
                       "masked")
        rx, ry = vx / np.outer(sx, sx), vy / np.outer(sy, sy)
        iu = np.triu_indices(p, 1)
        if iu[0].size == 0:
            raise count_error("The files of the correlation metrics", "at least 2", "columns", 1)
        return _errors(rx[iu], ry[iu])
    return ctx.cached(("table1", obj), run)


def _two_numeric(inputs: Any, options: Any) -> Any:
    """Why the correlation metrics (R_*) would refuse these inputs: fewer than two numeric
    columns, so no pair of columns to correlate."""
    from ..inputs import Reason
    if len(inputs.numeric) >= 2:
        return None
    return Reason(f"{len(inputs.numeric)} numeric column(s)",
                  "correlations need two numeric columns", order=2)


def _register_table1(obj: str, err: str) -> None:
    what = {"X": "all values", "M": "column means", "V": "covariances (upper triangle with "
            "diagonal)", "S": "variances", "R": "correlations (strict upper triangle)"}[obj]
    how = {"MSE": "mean squared error", "MAE": "mean absolute error",
           "MV": "mean variation |a - a'|/|a| (zero denominators left out and counted)"}[err]

    unit = {"MSE": "squared units of the data", "MAE": "units of the data",
            "MV": "fraction (relative change)"}[err]
    if obj == "R" and err != "MV":
        unit = {"MSE": "squared correlation", "MAE": "correlation"}[err]

    @register(f"{obj}_{err}", kind="loss", reference="[DMT Table 1]", options=_CHUNK,
              description=f"{how} of the {what}", unit=unit, scaled=obj == "R",
              guard=_two_numeric if obj == "R" else None)
    def metric(ctx: MeasureContext) -> MetricResult:
        return table1(ctx, obj)[err]


for _obj in _MV_OBJECTS:
    for _err in ("MSE", "MAE", "MV"):
        _register_table1(_obj, _err)


def _combine(ctx: MeasureContext, names: tuple[str, ...], scale: float = 1.0,
             weights: tuple[float, ...] | None = None) -> MetricResult:
    """Weighted mean of other metrics; excluded terms add up."""
    parts = [ctx.measure(n) for n in names]
    w = np.asarray(weights if weights else [1.0 / len(names)] * len(names))
    return MetricResult(scale * float(np.dot(w, [r.value for r in parts])),
                        excluded=sum(r.excluded for r in parts))


@register("IL", kind="loss", reference="[DMT §5]",
          unit="% relative error",
          requires=("X_MV", "M_MV", "V_MV", "S_MV", "R_MAE"),
          description="100 * mean(X_MV, M_MV, V_MV, S_MV, R_MAE)")
def il(ctx: MeasureContext) -> MetricResult:
    return _combine(ctx, ("X_MV", "M_MV", "V_MV", "S_MV", "R_MAE"), 100.0)


@register("IL_S2", kind="loss", reference="[DMT §6]", recommend=True,
          unit="% relative error",
          requires=("X_MV", "M_MV", "S_MV", "V_MV", "R_MAE"),
          description="100 * (X_MV + (M_MV + S_MV)/2 + (V_MV + R_MAE)/2) / 3")
def il_s2(ctx: MeasureContext) -> MetricResult:
    return _combine(ctx, ("X_MV", "M_MV", "S_MV", "V_MV", "R_MAE"), 100.0,
                    (1 / 3, 1 / 6, 1 / 6, 1 / 6, 1 / 6))


@register("IL1", kind="loss", reference="[YWC]", options=_CHUNK,
          unit="relative difference per value (0 to 2)",
          description="mean over all values of |x - x'| / (0.5(|x| + |x'|)); 0 when both are 0")
def il1(ctx: MeasureContext) -> float:
    st = record_stats(ctx)
    return float(to_fraction(sum(st["il1_sum"])) / (int(st["n"]) * len(ctx.columns)))


@register("IL1s", kind="loss", reference="[YWC]", options=_CHUNK, scaled=True, recommend=True,
          unit="standard deviations (√2·s_j) per value",
          description="mean over all values of |x - x'| / (sqrt(2) s_j), s_j the original sd")
def il1s(ctx: MeasureContext) -> float:
    st = record_stats(ctx)
    sd = il_sd(ctx, "IL1s")
    return float(np.mean(_totals(st["absdiff"]) / (np.sqrt(2.0) * sd)) / int(st["n"]))


@register("IL1s_sum", kind="loss", reference="[YWC]; sdcMicro dUtility 'IL1s'", options=_CHUNK,
          scaled=True,
          unit="standard deviations (√2·s_j), summed over all values",
          description="sum over all values of |x - x'| / (sqrt(2) s_j) (sdcMicro's IL1s)")
def il1s_sum(ctx: MeasureContext) -> float:
    st = record_stats(ctx)
    sd = il_sd(ctx, "IL1s_sum")
    return float(np.sum(_totals(st["absdiff"]) / (np.sqrt(2.0) * sd)))


for _name, _src in (("IL2", "M_MV"), ("IL3", "V_MV"), ("IL4", "S_MV"), ("IL5", "R_MAE")):
    def _alias(ctx: MeasureContext, _src: str = _src) -> MetricResult:
        return ctx.measure(_src)
    register(_name, kind="loss", reference="[YWC]", requires=(_src,),
             description=f"= {_src}", unit=REGISTRY[_src].unit)(_alias)


@register("s0", kind="loss", reference="[YWC]", requires=("IL2", "IL3", "IL4", "IL5"),
          unit="fraction (mean relative error)",
          description="(IL2 + IL3 + IL4 + IL5) / 4")
def s0(ctx: MeasureContext) -> MetricResult:
    return _combine(ctx, ("IL2", "IL3", "IL4", "IL5"))


@register("s1", kind="loss", reference="[YWC]", requires=("IL1", "IL2", "IL3", "IL4", "IL5"),
          unit="fraction (mean relative error)",
          description="(IL1 + IL2 + IL3 + IL4 + IL5) / 5")
def s1(ctx: MeasureContext) -> MetricResult:
    return _combine(ctx, ("IL1", "IL2", "IL3", "IL4", "IL5"))


@register("s2", kind="loss", reference="[YWC]", requires=("IL1s", "IL2", "IL4", "IL5"),
          unit="fraction (mean of relative errors and sd units)",
          description="(IL1s + IL2 + IL4 + IL5) / 4")
def s2(ctx: MeasureContext) -> MetricResult:
    return _combine(ctx, ("IL1s", "IL2", "IL4", "IL5"))


@register("MAE", kind="loss", reference="[CN]", requires=("X_MAE",), description="= X_MAE",
          unit="units of the data")
def mae(ctx: MeasureContext) -> MetricResult:
    return ctx.measure("X_MAE")


@register("MSE", kind="loss", reference="[CN]", requires=("X_MSE",), description="= X_MSE",
          unit="squared units of the data")
def mse(ctx: MeasureContext) -> MetricResult:
    return ctx.measure("X_MSE")
