"""pMSE of a release (it applies to any masked file): ``pmse`` and ``pmse_ratio``.

``pmse``, ``pmse_ratio``: the propensity-score mean squared error of synthpop's
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

Plain numpy on record chunks; the drivers are the metric functions at the bottom.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any

import numpy as np

from ...errors import SdcInputError
from ...parallel import map_reduce
from .._registry import MeasureContext, MetricResult, register
from ..exactsum import SCALE, to_fraction
from .profiles import READS, column_profiles, merge_profiles, profile_chunk
from .propensity import FIX_BITS as _FIX
from .propensity import MAX_NEWTON, PS_BLOCK_ROWS, newton_step
from .propensity import fixed_quanta as _quanta
from .propensity import logistic_rows as _logistic_rows

__all__ = ["pmse_chunk", "merge_pmse", "pmse_fit"]


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
    pr = column_profiles(ctx, name)
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
            beta, cur, done = newton_step(evaluate, beta, cur)
            if done:
                return MetricResult(value(cur), info=info | {"iterations": it + 1})
        return MetricResult(value(cur), flag=1,
                            info=info | {"converged": False, "iterations": MAX_NEWTON})
    return ctx.cached(("synthutility_pmse",), compute)


# -- registered metrics ------------------------------------------------------------

@register("pmse", kind="utility", same_shape=False, categorical=True, mixed=True,
          reads=READS,
          options=("chunk_rows",), unit="(p − c)², 0 (indistinguishable) up",
          reference="Snoke, Raab, Nowok, Dibben and Slavkovic (2018); synthpop utility.gen",
          description="propensity-score mean squared error: mean (p - c)**2 of a logistic "
                      "model (main effects, categories as indicators) telling the release "
                      "from the original, c = the release's share of the stacked records")
def _pmse(ctx: MeasureContext) -> MetricResult:
    return pmse_fit(ctx, "pmse")


@register("pmse_ratio", kind="utility", same_shape=False, categorical=True, mixed=True,
          reads=READS,
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

