"""Probabilistic record linkage risk: PLD, PLD20 and PLD_best (CATALOG.md, "Probabilistic
record linkage"; PLD_best: docs/catalog.md).

Options (``ctx.options``; declared in :mod:`sdcdist.options`): ``prl_method``
("s": absolute differences in sd of the original column), ``prl_t``
([0, 0.1, 0.25, 0.5, 1]: a multi-level comparison; the papers' binary comparison is
``prl_method: l``, ``prl_t: 0.05``), ``prl_weights`` ("linear": a multi-level
column's weight linear in the difference between its levels' weights; "step"),
``prl_top_c`` (20), ``prl_dense_limit`` (5000), ``prl_blocking``
(``None``; a key column name for exact blocks on its values, e.g. a
categorical key; or ``[key column name, half window]`` for sorted-neighbourhood
blocking), ``prl_block_rows``, ``prl_em`` (dict of EM settings),
``prl_unmatched`` (sparse assignment mode), ``prl_counting`` (all pairs or the
exact counting path for the pattern counts). Sparse
assignment or blocking set ``MetricResult.flag`` = 1; ``info`` says which
assignment was used, the pairs compared, EM iterations and log-likelihood.
"""

from __future__ import annotations

from typing import Any

from ..options import prl_names
from ..linkage.prl import PRLResult, PRLSettings, probabilistic_linkage
from ._registry import MeasureContext, MetricResult, register

__all__ = ["prl_linkage", "em_note"]

#: the options every PRL metric reads: all of the registry's ``prl_*`` options
PRL_OPTIONS = prl_names()


def prl_linkage(ctx: MeasureContext, keys: tuple[int, ...]) -> PRLResult:
    """Probabilistic linkage of the masked to the original file on ``keys`` (cached)."""
    def run() -> PRLResult:
        settings = PRLSettings.from_options({n: ctx.options[n] for n in PRL_OPTIONS})
        return probabilistic_linkage(
            ctx.runner, ctx.original, ctx.masked, ctx.shape_original[0], ctx.shape_masked[0],
            keys, settings=settings, truth=ctx.truth,
            categorical=[ctx.columns[k] in ctx.categorical for k in keys],
            key_names=[ctx.columns[k] for k in keys])
    return ctx.cached(("prl", keys), run)


def em_note(name: str, result: Any) -> str | None:
    """Lines saying that the EM of a PLD/PLD20 result hit its iteration limit, or that the
    counts do not identify its fit (a flat likelihood), or None."""
    infos = result.info.get("per_keyset_info") or [result.info]
    notes = []

    def where(bad: list) -> str:
        return "" if "per_keyset_info" not in result.info else \
            " on key set(s) " + ", ".join(str(i + 1) for i, _ in bad)
    bad = [(i, x["em_iterations"]) for i, x in enumerate(infos)
           if isinstance(x, dict) and x.get("em_converged") is False]
    if bad:
        notes.append(f"{name}: EM did not converge within {bad[0][1]} iterations{where(bad)}; "
                     "the value is flagged (raise prl_em max_iter)")
    flat = [(i, x.get("em_info_ratio")) for i, x in enumerate(infos)
            if isinstance(x, dict) and x.get("em_identified") is False]
    if flat:
        notes.append(f"{name}: the pattern counts do not identify the EM fit{where(flat)} "
                     "(a flat likelihood: other parameters, another P(M), fit them as well); "
                     "the value is flagged (use more or other key columns)")
    return "\n".join(notes) or None


def _share(ctx: MeasureContext, keys: tuple[int, ...], count: str) -> MetricResult:
    """100 x (correct pairs counted by ``count``) / n_B, with the linkage detail."""
    r = prl_linkage(ctx, keys)
    info = {k: r.info[k] for k in ("assignment", "blocking", "pairs_compared", "em_iterations",
                                   "em_loglik", "em_converged", "em_fit", "em_identified",
                                   "em_info_ratio", "p_match", "unassigned_b",
                                   "true_in_candidates")}
    return MetricResult(100.0 * getattr(r, count) / r.n_b, flag=r.flag, info=info)


@register("PLD", kind="risk", keysets=True, same_shape=False, categorical=True,
          unit="% of records",
          reference="[DMT §4.2, YWC §3.4]",
          options=PRL_OPTIONS,
          description="probabilistic record linkage: % of masked records paired with their own "
                      "record by the 1-1 assignment maximising Fellegi-Sunter weights (EM)")
def pld(ctx: MeasureContext, keys: tuple[int, ...]) -> MetricResult:
    return _share(ctx, keys, "correct")


@register("PLD20", kind="risk", keysets=True, same_shape=False, categorical=True,
          unit="% of records",
          reference="[YWC §4.2]",
          options=PRL_OPTIONS,
          description="PLD counting correct pairs only down to the weight where the precision "
                      "of the weight-sorted assignment falls to 20%")
def pld20(ctx: MeasureContext, keys: tuple[int, ...]) -> MetricResult:
    return _share(ctx, keys, "correct20")


@register("PLD_best", kind="risk", keysets=True, same_shape=False, categorical=True,
          unit="% of records",
          reference="[DMT §4.2]; best link as DLD",
          options=PRL_OPTIONS,
          description="PLD's Fellegi-Sunter weights, each masked record linked to its "
                      "best-weighted original record(s) (no 1-1 assignment): % linked to "
                      "their own record, t tied best count 1/t")
def pld_best(ctx: MeasureContext, keys: tuple[int, ...]) -> MetricResult:
    return _share(ctx, keys, "correct_best")
