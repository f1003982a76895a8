"""``ci_overlap``: Karr et al.'s interval overlap for the linear regression of option
``regression``, from exact X'X, X'y and y'y (chunk-wise integer sums), solved in rational
arithmetic, so the figure depends only on the records' contents.

Plain numpy on record chunks; the driver is the metric function at the bottom.
"""

from __future__ import annotations

import math
import re
from collections.abc import Sequence
from fractions import Fraction
from typing import Any

import numpy as np

from ...errors import SdcInputError, column_positions
from ...parallel import map_reduce
from .._registry import MeasureContext, MetricResult, register
from ..exactsum import SQ_SCALE, exact_cross_sums
from .profiles import READS, column_profiles, shared_columns

__all__ = ["parse_regression", "ols_chunk", "ols_intervals", "interval_overlap"]

#: scale of exact cross sums (units 2**-SQ_SCALE)
_Q = Fraction(1, 2**SQ_SCALE)


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


# -- the registered metric ----------------------------------------------------------

@register("ci_overlap", kind="utility", same_shape=False, categorical=True, mixed=True,
          reads=READS, ascending=False,
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
        pr = column_profiles(ctx, "ci_overlap")
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
