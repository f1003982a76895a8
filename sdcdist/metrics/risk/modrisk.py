"""Model-based risk: log-linear models of the key cell counts (Skinner and Holmes 1998;
Skinner and Shlomo 2008), as sdcMicro's ``modRisk`` computes it.

The cells are the combinations of the levels of the model's categorical columns
(every combination, the empty ones too: the cross product of the levels present
in the released file). Each cell j has its sample count f_j, weight sum w_j and
π_j = Σ 1 / w over its records (the sum of inclusion probabilities; 1 per record
without a weight column). A Poisson log-linear model with the formula's main
effects and interactions (treatment contrasts, as R's ``glm``) gives each cell
its fitted λ_j; for the method (option ``modrisk_method``):

- ``default``: the model of the counts f_j;
- ``CE`` (Clogg and Eliason): f_j with the offset log(f_j / w_j + 0.1) (log 0.1 in
  an empty cell);
- ``PML`` (pseudo maximum likelihood): the model of round(w_j Σf / Σw);
- ``weightedLLM``: the counts with w_j as one more covariate;
- ``IPF``: the main-effects model fitted by iterative proportional fitting (MASS's
  ``loglm``, tolerance 0.1 on the margins, at most 40 cycles); refused with
  interactions.

The Poisson models are fitted by R's ``glm.fit`` iterations (start μ = y + 0.1,
iteratively reweighted least squares, stopping when the relative change of the
deviance is below 1e-8, at most 25 iterations), so the fitted values are sdcMicro's
up to rounding. The design matrix of the full grid is never formed: each least-squares
step solves its normal equations, whose products are margins of the grid
(:class:`~sdcdist.metrics.risk.loglinear.GridDesign`, O(cells x terms^2) an iteration instead of O(cells x
parameters^2)); a step whose matrix is too ill-conditioned for them takes the dense
pivoted QR instead. For each sample unique (f_j = 1), with v_j = (1 - π_j) λ_j:

- P(F_j = 1 | f_j = 1) = exp(-v_j);
- E(1 / F_j | f_j = 1) = (1 - exp(-v_j)) / v_j.

Metrics (released file):

- ``modrisk_tau1``: Σ over the sample uniques of exp(-v_j), the expected number of
  sample uniques that are population uniques;
- ``modrisk_tau2``: Σ of (1 - exp(-v_j)) / v_j, the expected number of correct matches
  of the sample uniques (expected re-identifications);
- ``modrisk_gr1``, ``modrisk_gr2``: sdcMicro's ``gr1`` and ``gr2``, tau1 and tau2
  divided by the number of non-empty cells with at most ``modrisk_bound`` records.

Conventions: a record with a missing value in a model column belongs to no cell (left
out, counted in ``excluded``), as ``glm`` drops such cells; a column with one level
adds nothing to the model (R refuses it); where v_j <= 0 (π_j >= 1: weights of at most
1, the sample is the population there) both risks are 1 (sdcMicro gives 0/0 = NaN for
the second at v_j = 0); only the sample uniques enter the sums (sdcMicro multiplies
every cell's risk by [f_j = 1], so an overflowing exp() in a large cell turns its sums
into NaN).

Map / combine / aggregate over record chunks: each chunk returns the table of its
distinct (cell, weight) pairs with their counts (:func:`sdcdist.keytables.pair_table`),
merged by exact integer counts into one sorted table, so the sums w_j and π_j (over
distinct weights in increasing order), the fit and the figures are the same for any
chunking and worker count. The fit is on the client, on the cells (not the records).
"""

from __future__ import annotations

import itertools
import math
from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np

from ...errors import SdcInputError, column_positions, option_error, weight_error
from ...keytables import merge_weighted_tables, pair_table, weighted_chunk
from ...parallel import map_reduce
from .._registry import MeasureContext, MetricResult, register
from ..categorical_keys import frequency_keys
from .loglinear import GridDesign, ipf_main_effects, poisson_glm_grid

__all__ = ["parse_formula", "modrisk_summary", "MODRISK_METHODS", "MAX_CELLS", "MAX_DESIGN"]

MODRISK_METHODS = ("default", "CE", "PML", "weightedLLM", "IPF")
#: most cells (combinations of the model columns' levels) a model may have
MAX_CELLS = 5_000_000
#: most entries (cells x parameters) of a design matrix
MAX_DESIGN = 25_000_000


def parse_formula(text: str, columns: Sequence[str]) -> tuple[list[str], list[tuple[str, ...]]]:
    """The columns and terms of a model formula ``'~ a + b + c + a:b'`` (``a*b``: a + b + a:b).

    Returns the main-effect columns in order of appearance and the terms (tuples of
    column names, each once). Every interaction's lower-order terms must be in the
    model (a hierarchical model); unknown columns raise listing the valid ones.
    """
    body = text.strip()
    if body.startswith("~"):
        body = body[1:]
    if "~" in body or not body.strip():
        raise option_error("modrisk_formula", "a right-hand side such as '~ a + b + a:b'",
                           text)
    terms: list[tuple[str, ...]] = []
    for part in body.split("+"):
        part = part.strip()
        if not part:
            raise SdcInputError(f"modrisk_formula {text!r} has an empty term; join column "
                                "names with + (main effects), : (interactions) or *")
        if "*" in part:
            names = [p.strip() for p in part.split("*")]
            new = [c for r in range(1, len(names) + 1) for c in itertools.combinations(names, r)]
        else:
            new = [tuple(p.strip() for p in part.split(":"))]
        for t in new:
            if any(not c for c in t) or len(set(t)) != len(t):
                raise SdcInputError(f"modrisk_formula {text!r} has a malformed term "
                                    f"{':'.join(t)!r}; name each column once per term")
            column_positions(t, columns, what="modrisk_formula column")
            key = tuple(sorted(t, key=list(columns).index))
            if key not in terms:
                terms.append(key)
    have = set(terms)
    for t in terms:
        for r in range(1, len(t)):
            for sub in itertools.combinations(t, r):
                if sub not in have:
                    raise SdcInputError(
                        f"modrisk_formula {text!r} holds the interaction {':'.join(t)} "
                        f"without its term {':'.join(sub)}; give a hierarchical model (every "
                        f"lower-order term of an interaction, e.g. {'*'.join(t)})")
    main = [t[0] for t in terms if len(t) == 1]
    return main, terms


def _chunk(start: int, stop: int, X: Any, cols: Sequence[int], w: int | None) -> dict[str, Any]:
    _, k, wv, bad = weighted_chunk(X, start, stop, cols, w)
    return {"tables": {"cells": pair_table(k, wv)}, "bad_weights": bad}


def modrisk_summary(table: dict[str, Any], terms: Sequence[tuple[int, ...]], *,
                    method: str, bound: float | None) -> dict[str, Any]:
    """The model-based risks from the merged (cell, weight) table.

    Parameters
    ----------
    table : dict
        ``rows`` (N, d) codes (-1 missing), ``value`` weights, ``count`` records, sorted
        by row then value.
    terms : sequence of tuple of int
        Model terms as column positions 0..d-1 (all main effects included).
    method : {"default", "CE", "PML", "weightedLLM", "IPF"}
    bound : float or None
        Cells with more records do not count in the divisor of gr1, gr2.

    Returns
    -------
    dict
        ``modrisk_tau1``, ``modrisk_tau2``, ``modrisk_gr1``, ``modrisk_gr2``, ``cells``,
        ``uniques``, ``excluded`` (records with a missing model value), ``iterations``,
        ``converged``.
    """
    rows, val, cnt = table["rows"], table["value"], table["count"]
    d = rows.shape[1]
    levels = [np.unique(rows[rows[:, j] >= 0, j]) for j in range(d)]
    nlev = [int(lv.size) for lv in levels]
    complete = (rows >= 0).all(axis=1)
    excluded = int(cnt[~complete].sum())
    if not complete.any():
        raise SdcInputError("every record has a missing value in a column of the model "
                            "(modrisk_formula); the model needs complete records")
    G = int(np.prod(nlev, dtype=np.float64))
    P = 1 + sum(int(np.prod([nlev[j] - 1 for j in t])) for t in terms) + \
        (method == "weightedLLM")
    if G > MAX_CELLS or (method != "IPF" and G * P > MAX_DESIGN):
        raise SdcInputError(
            f"the model of modrisk has {G} cells and {P} parameters, more than it fits "
            f"({MAX_CELLS} cells, {MAX_DESIGN} design entries); use fewer or coarser model "
            "columns (modrisk_formula), or recode the keys first")
    r, v, c = rows[complete], val[complete], cnt[complete].astype(np.float64)
    cell = np.zeros(r.shape[0], np.int64)
    for j in range(d):
        cell = cell * nlev[j] + np.searchsorted(levels[j], r[:, j])
    counts = np.bincount(cell, weights=c, minlength=G)
    # sorted by cell then weight: sums over the distinct weights in increasing order
    weights = np.bincount(cell, weights=v * c, minlength=G)
    incl = np.bincount(cell, weights=c / v, minlength=G)
    converged, iterations = True, 0
    if method == "IPF":
        fit, iterations, converged = ipf_main_effects(counts.reshape(nlev))
        lam = fit.reshape(-1)
    else:
        extra = None
        offset = None
        y = counts
        if method == "CE":
            ec = np.divide(counts, weights, out=np.zeros(G), where=weights > 0)
            offset = np.log(ec + 0.1)
        elif method == "PML":
            # the scale over every record (sdcMicro's sums include the cells with a
            # missing value)
            f = float(cnt.sum()) / math.fsum((val * cnt).tolist())
            y = np.rint(weights * f)
        elif method == "weightedLLM":
            extra = weights
        lam, iterations, converged = poisson_glm_grid(GridDesign(nlev, terms, extra), y,
                                                      offset)
    sel = (counts > 0) & (lam > 0)
    if bound is not None:
        sel &= counts <= bound
    ncell = int(sel.sum())
    uni = sel & (counts == 1)
    vv = (1.0 - incl[uni]) * lam[uni]
    pos = vv > 0
    r1 = np.ones(vv.size)
    r2 = np.ones(vv.size)
    r1[pos] = np.exp(-vv[pos])
    r2[pos] = -np.expm1(-vv[pos]) / vv[pos]
    tau1, tau2 = math.fsum(r1.tolist()), math.fsum(r2.tolist())
    return {"modrisk_tau1": tau1, "modrisk_tau2": tau2,
            "modrisk_gr1": tau1 / ncell if ncell else 0.0,
            "modrisk_gr2": tau2 / ncell if ncell else 0.0,
            "cells": G, "nonempty_cells": ncell, "uniques": int(uni.sum()),
            "excluded": excluded, "iterations": iterations, "converged": bool(converged)}


def _summary(ctx: MeasureContext, name: str) -> tuple[dict[str, Any], str, list[str]]:
    formula = ctx.options["modrisk_formula"]
    method = ctx.options["modrisk_method"]
    bound = ctx.options["modrisk_bound"]
    if formula is None:
        keys = list(frequency_keys(ctx, name))
        formula = "~ " + " + ".join(keys)
    cols, terms = parse_formula(formula, ctx.masked_columns)
    bad = [c for c in cols if c not in ctx.categorical]
    if bad:
        raise SdcInputError(
            f"{name} models counts of categorical columns, and the model's column(s) {bad} "
            "are numeric; declare them categorical (ingest --categorical, or 'categorical:' in "
            "the spec's dataset) or leave them out of modrisk_formula")
    for role, col in (("weight", ctx.weight), ("household id", ctx.household)):
        if col is not None and col in cols:
            raise SdcInputError(f"modrisk_formula holds the {role} column {col!r}; it is no "
                                "key an intruder knows: leave it out of the model")
    if method == "IPF" and any(len(t) > 1 for t in terms):
        raise SdcInputError(f"modrisk_method 'IPF' fits main effects only, and "
                            f"modrisk_formula {formula!r} has interactions; use another "
                            "modrisk_method or leave the interactions out")
    pos = tuple(column_positions(cols, ctx.masked_columns, what="modrisk_formula column",
                                 where="the masked file"))
    tpos = [tuple(cols.index(c) for c in t) for t in terms]
    w = None
    if ctx.weight is not None and ctx.weight in ctx.masked_columns:
        w = ctx.masked_columns.index(ctx.weight)

    def compute() -> dict[str, Any]:
        t = map_reduce(ctx.runner, _chunk, merge_weighted_tables, [ctx.masked],
                       ctx.shape_masked[0], chunk_rows=int(ctx.options["chunk_rows"]),
                       args=(pos, w))
        if t["bad_weights"]:
            raise weight_error(ctx.weight, bad=int(t["bad_weights"]))
        return modrisk_summary(t["tables"]["cells"], tpos, method=method, bound=bound)
    key = ("modrisk", tuple(cols), tuple(tpos), method, bound, w)
    return ctx.cached(key, compute), formula, cols


_OPTIONS = ("chunk_rows", "modrisk_method", "modrisk_formula", "modrisk_bound")


def _guard(inputs: Any, options: Mapping[str, Any]) -> Any:
    """Why the log-linear model would refuse these inputs without a ``modrisk_formula``:
    more cells (the product of the categorical keys' numbers of values) than it fits."""
    from ..inputs import Reason
    keys = inputs.categorical_keys()
    levels = dict(inputs.levels)
    if "modrisk_formula" in options or not keys or any(c not in levels for c in keys):
        return None
    cells = 1.0
    for c in keys:
        cells *= max(1, levels[c])
    if cells <= MAX_CELLS:
        return None
    return Reason(f"{len(keys)} categorical keys make a log-linear model of {cells:.3g} cells",
                  "ask with --metric and -o modrisk_formula=... on fewer or coarser keys",
                  order=4)


def _metric(name: str, description: str, unit: str) -> None:
    def func(ctx: MeasureContext) -> MetricResult:
        s, formula, cols = _summary(ctx, name)
        return MetricResult(s[name], excluded=s["excluded"], flag=0 if s["converged"] else 1,
                            info={"formula": formula, "method": ctx.options["modrisk_method"],
                                  "columns": cols, "weighted": ctx.weight is not None,
                                  **{k: s[k] for k in ("cells", "nonempty_cells", "uniques",
                                                       "iterations", "converged")}})
    register(name, kind="risk", same_shape=False, categorical=True, options=_OPTIONS,
             description=description, unit=unit, guard=_guard,
             reference="Skinner and Holmes (1998); Skinner and Shlomo (2008); sdcMicro "
                       "modRisk")(func)


_metric("modrisk_tau1", "log-linear model: expected number of sample uniques that are "
        "population uniques, sum of exp(-(1 - pi) lambda) over the sample-unique cells",
        "records")
_metric("modrisk_tau2", "log-linear model: expected number of correct matches of the sample "
        "uniques (expected re-identifications), sum of (1 - exp(-v)) / v, v = (1 - pi) lambda",
        "records")
_metric("modrisk_gr1", "log-linear model: sdcMicro modRisk's gr1, modrisk_tau1 divided by "
        "the number of non-empty key cells (within modrisk_bound)", "ratio")
_metric("modrisk_gr2", "log-linear model: sdcMicro modRisk's gr2, modrisk_tau2 divided by "
        "the number of non-empty key cells (within modrisk_bound)", "ratio")
