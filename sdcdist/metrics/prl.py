"""Probabilistic record linkage risk: PLD and PLD20 (CATALOG.md, "Probabilistic record linkage").

Options (``ctx.options``): ``prl_method`` ("l"), ``prl_t`` (0.05; a list of
increasing tolerances gives a multi-level comparison), ``prl_top_c`` (20),
``prl_dense_limit`` (5000), ``prl_blocking`` (``None`` or ``[key column name,
half window]`` for sorted-neighbourhood blocking), ``prl_block_rows``,
``prl_em`` (dict of EM settings). Sparse assignment or blocking set
``MetricResult.flag`` = 1; ``info`` says which assignment was used, the pairs
compared, EM iterations and log-likelihood.
"""

from __future__ import annotations

from ..errors import SdcInputError
from ..linkage.assignment import DEFAULT_DENSE_LIMIT
from ..linkage.prl_drivers import PRLResult, probabilistic_linkage
from ._registry import MeasureContext, MetricResult, register

__all__ = ["prl_linkage"]


def prl_linkage(ctx: MeasureContext, keys: tuple[int, ...]) -> PRLResult:
    """Probabilistic linkage of the masked to the original file on ``keys`` (cached)."""
    def run() -> PRLResult:
        o = ctx.options
        blocking = o.get("prl_blocking")
        if blocking is not None:
            name, width = blocking
            if ctx.columns[keys[0]] != name and name not in [ctx.columns[k] for k in keys]:
                # a blocking key outside this key set cannot be compared on
                raise SdcInputError(f"the blocking key {name!r} is not in the key set "
                                    f"{[ctx.columns[k] for k in keys]}; block on a key column")
            blocking = ([ctx.columns[k] for k in keys].index(name), int(width))
        br = o.get("prl_block_rows")
        return probabilistic_linkage(
            ctx.runner, ctx.original, ctx.masked, ctx.shape_original[0], ctx.shape_masked[0],
            keys, method=o.get("prl_method", "l"), t=o.get("prl_t", 0.05),
            truth=ctx.truth, top_c=int(o.get("prl_top_c", 20)),
            dense_limit=int(o.get("prl_dense_limit", DEFAULT_DENSE_LIMIT)),
            block_rows=tuple(br) if br else None, blocking=blocking,
            em_options=o.get("prl_em"))
    return ctx.cached(("prl", keys), run)


def _info(r: PRLResult) -> dict:
    return {k: r.info[k] for k in ("assignment", "blocking", "pairs_compared", "em_iterations",
                                   "em_loglik", "em_converged", "unassigned_b",
                                   "true_in_candidates")}


@register("PLD", kind="risk", keysets=True, same_shape=False, reference="[DMT §4.2, YWC §3.4]",
          description="probabilistic record linkage: % of masked records paired with their own "
                      "record by the 1-1 assignment maximising Fellegi-Sunter weights (EM)")
def pld(ctx: MeasureContext, keys: tuple[int, ...]) -> MetricResult:
    r = prl_linkage(ctx, keys)
    return MetricResult(100.0 * r.correct / r.n_b, flag=r.flag, info=_info(r))


@register("PLD20", kind="risk", keysets=True, same_shape=False, reference="[YWC §4.2]",
          description="PLD counting correct pairs only down to the weight where the precision "
                      "of the weight-sorted assignment falls to 20%")
def pld20(ctx: MeasureContext, keys: tuple[int, ...]) -> MetricResult:
    r = prl_linkage(ctx, keys)
    return MetricResult(100.0 * r.correct20 / r.n_b, flag=r.flag, info=_info(r))
