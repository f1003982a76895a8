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

import logging
from typing import Any

from ...errors import constant_error
from ...options import prl_names
from ...linkage.prl import PRLResult, PRLSettings, probabilistic_linkage
from ...linkage.prl.em import limit_advice
from .._registry import MeasureContext, MetricResult, constant_columns, register
from .linkage import key_positions

log = logging.getLogger(__name__)

__all__ = ["prl_linkage", "em_note", "linkable_keys"]

#: the options every PRL metric reads: all of the registry's ``prl_*`` options
PRL_OPTIONS = prl_names()


def prl_linkage(ctx: MeasureContext, keys: tuple[int, ...]) -> PRLResult:
    """Probabilistic linkage of the masked to the original file on ``keys`` (cached)."""
    def run() -> PRLResult:
        settings = PRLSettings.from_options({n: ctx.options[n] for n in PRL_OPTIONS})
        # the key columns by name in the masked file, which may hold other columns (or the
        # same ones in another order) than the original, as the distance linkage finds them
        names, _, cols_b = key_positions(ctx, keys)
        return probabilistic_linkage(
            ctx.runner, ctx.original, ctx.masked, ctx.shape_original[0], ctx.shape_masked[0],
            keys, cols_b, settings=settings, truth=ctx.truth,
            categorical=[ctx.columns[k] in ctx.categorical for k in keys],
            key_names=list(names))
    return ctx.cached(("prl", keys), run)


def em_note(name: str, result: Any) -> str | None:
    """Lines saying that the EM of a PLD/PLD20 result hit its iteration limit, or that the
    counts do not identify its fit (a flat likelihood), or that constant keys were left
    out, or None."""
    infos = result.info.get("per_keyset_info") or [result.info]
    const = sorted({c for x in infos if isinstance(x, dict)
                    for c in x.get("constant_keys_left_out", ())})
    notes = [f"{name}: constant key column(s) {const} left out (a constant key separates no "
             "pair)"] if const else []
    em = _em_note(name, infos, result)
    flat = [(i, x.get("em_info_ratio")) for i, x in enumerate(infos)
            if isinstance(x, dict) and x.get("em_identified") is False]
    if flat:
        where = "" if "per_keyset_info" not in result.info else \
            " on key set(s) " + ", ".join(str(i + 1) for i, _ in flat)
        notes.append(f"{name}: the pattern counts do not identify the EM fit{where} "
                     "(a flat likelihood: other parameters, another P(M), fit them as well); "
                     "the value is flagged (use more or other key columns)")
    return "\n".join(notes + ([em] if em else [])) or None


def _em_note(name: str, infos: list, result: Any) -> str | None:
    bad = [(i, x["em_iterations"]) for i, x in enumerate(infos)
           if isinstance(x, dict) and x.get("em_converged") is False]
    if not bad:
        return None
    where = "" if "per_keyset_info" not in result.info else \
        " on key set(s) " + ", ".join(str(i + 1) for i, _ in bad)
    plain = any(isinstance(infos[i], dict) and infos[i].get("em_accelerate") is False
                for i, _ in bad)
    return (f"{name}: EM did not converge within {bad[0][1]} iterations{where}; the value is "
            f"flagged ({limit_advice(not plain)})")


def linkable_keys(ctx: MeasureContext, keys: tuple[int, ...]
                  ) -> tuple[tuple[int, ...], list[str]]:
    """``keys`` without the numeric columns that are constant in the original file, and
    the names of those left out.

    A constant numeric key has no spread to scale its differences by (``prl_method: s``
    divides by its sd) and separates no pair: it is left out with a note, as the metrics
    that divide by a column's sd leave such a column out (CATALOG, "constant columns").
    A key set of constant columns only is refused.
    """
    numeric = [k for k in keys if ctx.columns[k] not in ctx.categorical]
    if not numeric:
        return keys, []
    const = ctx.cached(("constant_keys", tuple(numeric)),
                       lambda: ctx.runner.call(constant_columns, ctx.original, numeric))
    drop = {k for k, c in zip(numeric, const) if c}
    if not drop:
        return keys, []
    left = [ctx.columns[k] for k in keys if k in drop]
    kept = tuple(k for k in keys if k not in drop)
    if not kept:
        raise constant_error([ctx.columns[k] for k in keys], "the original file (every key "
                             "of the key set)", "probabilistic linkage needs a key that varies",
                             "leave constant columns out of the key sets")
    log.warning("constant key column(s) %s left out of the probabilistic linkage (PLD, "
                "PLD20): a constant key separates no pair", left)
    return kept, left


def _share(ctx: MeasureContext, keys: tuple[int, ...], count: str) -> MetricResult:
    """100 x (correct pairs counted by ``count``) / n_B, with the linkage detail."""
    keys, left = linkable_keys(ctx, keys)
    r = prl_linkage(ctx, keys)
    info = {k: r.info[k] for k in ("assignment", "blocking", "pairs_compared", "em_iterations",
                                   "em_loglik", "em_converged", "em_accelerate", "em_fit",
                                   "em_identified", "em_info_ratio", "p_match", "unassigned_b",
                                   "true_in_candidates")}
    if left:
        info["constant_keys_left_out"] = left
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
