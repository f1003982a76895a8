"""Linkage risk: distance, rank and correlation linkage of the masked file to the original.

Linkage metrics are computed per key set (column positions into the original
file's columns; the masked file's columns are matched by name) through the
exact drivers of :mod:`sdcdist.linkage`. Metrics sharing a transform and a
neighbour search (``DLD`` and ``DLD2``) share one
computation through :meth:`MeasureContext.cached`, and the column transforms
are computed once per column for all key sets.

Options (``ctx.options``; declared and checked in :mod:`sdcdist.options`)
-------------------------------------------------------------------------
``linkage_method``
    ``"index"`` (KD-tree per original block, default) or ``"brute"`` (distance
    matrices); identical results.
``block_memory``, ``block_rows``
    Memory budget of one linkage task / explicit block rows ``(masked, original)``.
``gdbrl_dense_max``
    Largest file size (records) solved by the dense exact assignment (5000).
``gdbrl_candidates``
    Candidates per record of the sparse assignment above it (20).
``crl_external``, ``crl_released``
    CRL without shared attributes: the intruder's quasi-identifier columns
    (taken from the original file) and the released quasi-identifier columns
    (taken from the masked file). Both or neither; without them CRL links on
    each key set (the same columns in both files).
``dld``
    Convention of DLD and DLD2: ``"catalog"`` (default) or ``"dmt"`` (raw key
    values, original -> masked, a full hit when the true record is among the
    tied nearest); see :data:`sdcdist.conventions.DLD_CONVENTIONS`.
"""

from __future__ import annotations

import logging
import math
from typing import Any

import numpy as np

from ...errors import (SdcInputError, column_positions, constant_error, empty_error,
                        exclusive_error, magnitude_error)
from ...linkage import distance
from ...linkage.distance_drivers import link_top2, nearest_candidates, standardized_keys
from ...linkage.truth import invert_truth, row_truth
from ...moments import constant_columns
from .._registry import MeasureContext, MetricResult, register, take_columns
from ..content import content_order, row_hashes

log = logging.getLogger(__name__)

__all__ = ["key_positions", "crl_links", "ordinal_columns", "spearman_cross"]


# -- shared plumbing -----------------------------------------------------------------

def key_positions(ctx: MeasureContext, keys: tuple[int, ...]
                  ) -> tuple[tuple[str, ...], tuple[int, ...], tuple[int, ...]]:
    """Names of the key columns and their positions in the original and the masked file."""
    if not keys:
        raise SdcInputError("an empty key set was given; every key set needs at least one "
                            "column")
    names = tuple(ctx.columns[k] for k in keys)
    return names, tuple(keys), tuple(column_positions(names, ctx.masked_columns,
                                                      what="key column", where="the masked file"))


_LINK_OPTIONS = ("block_memory", "block_rows", "linkage_method")
#: blocked linkage also reads chunk_rows (the pass that finds global recodings)
_BLOCKED = _LINK_OPTIONS + ("chunk_rows",)


def _options(ctx: MeasureContext) -> dict[str, Any]:
    br = ctx.options.get("block_rows")
    return {"block_memory": int(ctx.options["block_memory"]),
            "block_rows": tuple(br) if br else None,
            "method": ctx.options["linkage_method"]}


def _column_refused(X: Any, j: int) -> bool:
    """Task: whether column ``j`` cannot be linked on: it is constant (all its non-missing
    values equal, :func:`sdcdist.moments.constant_columns`: exact, whatever its sd
    computes to; a column of copies of 0.1 has an sd of about 1e-17), or its sd is not a
    positive number."""
    x = np.asarray(X[:, j], dtype=np.float64)
    sd = float(x.std(ddof=1)) if x.size > 1 else 0.0
    return bool(constant_columns(x[:, None])[0]) or not sd > 0


def _check_constant(ctx: MeasureContext, name: str, j_a: int, j_b: int) -> None:
    def refused() -> tuple[bool, bool]:
        return (ctx.runner.call(_column_refused, ctx.original, j_a),
                ctx.runner.call(_column_refused, ctx.masked, j_b))
    ra, rb = ctx.cached(("column_refused", name), refused)
    for r, what in ((ra, "original file"), (rb, "masked file")):
        if r:
            raise constant_error([name], f"the {what}", "linkage cannot use a constant key "
                                 "column", "leave it out of the key sets")


def _transformed(ctx: MeasureContext, keys: tuple[int, ...], kind: str) -> tuple[Any, Any]:
    """(masked, original) handles of the key columns under transform ``kind``.

    ``z``: each file z-scored with its own moments (DRL1); ``raw``: the values
    themselves (DLD under ``dld: dmt``); ``drl2``: raw values
    over the all-pairs sd of |a - b| per column; ``rank``: within-column ranks
    (the masked file's mapped onto the original's size when they differ).
    Every transform works column by column, so it is computed once for the
    union of the key sets' columns, and each key set takes its columns.
    """
    seen = [k for ks in ctx.keysets for k in ctx.key_index(ks) if k < len(ctx.columns)
            and ctx.columns[k] not in ctx.categorical]
    union = tuple(dict.fromkeys(seen))
    if not set(keys) <= set(union):
        union = tuple(keys)
    key_positions(ctx, keys)
    M, O = _transformed_columns(ctx, union, kind)
    if tuple(keys) == union:
        return M, O
    pos = [union.index(k) for k in keys]
    return ctx.cached(("transform", kind, keys), lambda: (
        ctx.runner.task(take_columns, M, pos), ctx.runner.task(take_columns, O, pos)))


def _transformed_columns(ctx: MeasureContext, keys: tuple[int, ...], kind: str
                         ) -> tuple[Any, Any]:
    names, ja, jb = key_positions(ctx, keys)
    if kind != "raw":
        for nm, a, b in zip(names, ja, jb):
            _check_constant(ctx, nm, a, b)

    def run() -> tuple[Any, Any]:
        sub = ctx.runner.task
        if kind == "z":
            return (sub(standardized_keys, ctx.masked, jb, "masked file", names),
                    sub(standardized_keys, ctx.original, ja, "original file", names))
        if kind == "drl2":
            scale = np.array([ctx.cached(("drl2_sd", nm), lambda a=a, b=b: ctx.runner.call(
                _pair_sd, ctx.original, ctx.masked, a, b)) for nm, a, b in zip(names, ja, jb)])
            wide = [nm for nm, x in zip(names, scale) if not np.isfinite(x)]
            if wide:
                # the sd of |a - b| over all pairs overflows: no scale to divide by
                raise magnitude_error(wide, "the original and masked files", "linking on them")
            return (sub(distance.scale_columns, ctx.masked, jb, scale),
                    sub(distance.scale_columns, ctx.original, ja, scale))
        if kind == "raw":
            return (sub(distance.raw_columns, ctx.masked, jb),
                    sub(distance.raw_columns, ctx.original, ja))
        if kind == "rank":
            n_ref = ctx.shape_original[0]
            return (sub(distance.rank_columns, ctx.masked, jb, n_ref),
                    sub(distance.rank_columns, ctx.original, ja))
        raise ValueError(kind)
    return ctx.cached(("transform_columns", kind, keys), run)


def _pair_sd(X: Any, Y: Any, a: int, b: int) -> float:
    return distance.pair_abs_sd(X[:, a], Y[:, b])


def _zero_width(X: Any, n: int) -> np.ndarray:
    return np.zeros((n, 0))


def _blocked_link(ctx: MeasureContext, keys: tuple[int, ...], kind: str, metric: str,
                  reverse: bool) -> dict[str, Any]:
    """Linkage within blocks of equal categorical keys, distance on the numeric keys."""
    from ...linkage.blocked import block_keys, blocked_link_top2, max_codes
    names, ja, jb = key_positions(ctx, keys)
    cat = [i for i, nm in enumerate(names) if nm in ctx.categorical]
    num = tuple(keys[i] for i in range(len(keys)) if i not in cat)
    ca, cb = tuple(ja[i] for i in cat), tuple(jb[i] for i in cat)
    n_m, n_o = ctx.shape_masked[0], ctx.shape_original[0]
    if num:
        M, O = _transformed(ctx, num, kind)
    else:
        M, O = ctx.runner.task(_zero_width, None, n_m), ctx.runner.task(_zero_width, None, n_o)
    from ..categorical_keys import recodings
    lookups = recodings(ctx, [names[i] for i in cat])
    lookups = lookups if any(lk is not None for lk in lookups) else None
    hi = np.maximum(ctx.runner.call(max_codes, ctx.original, ca),
                    ctx.runner.call(max_codes, ctx.masked, cb))
    if lookups is not None:
        hi = np.maximum(hi, [int(np.nanmax(lk)) if lk is not None and np.isfinite(lk).any()
                             else -1 for lk in lookups])
    radix = tuple(int(h) + 2 for h in hi)
    ko = ctx.runner.task(block_keys, ctx.original, ca, radix, lookups)
    km = ctx.runner.task(block_keys, ctx.masked, cb, radix)
    opt = _options(ctx)
    if reverse:
        truth = ctx.runner.task(invert_truth, ctx.truth, n_m, n_o)
        return blocked_link_top2(ctx.runner, O, M, ko, km, n_o, n_m, len(num), truth=truth,
                                 metric=metric, **opt)
    truth = ctx.truth if ctx.truth is not None else \
        ctx.runner.share(row_truth(n_m, n_o))
    return blocked_link_top2(ctx.runner, M, O, km, ko, n_m, n_o, len(num), truth=truth,
                             metric=metric, **opt)


def _link(ctx: MeasureContext, keys: tuple[int, ...], kind: str, metric: str, *,
          reverse: bool = False, keep_nearest: bool = False) -> dict[str, Any]:
    """Nearest-neighbour linkage on ``keys`` (cached): masked -> original, or the reverse.

    A key set holding categorical columns is linked within blocks of equal
    categories (:mod:`sdcdist.linkage.blocked`)."""
    if any(ctx.columns[k] in ctx.categorical for k in keys):
        if keep_nearest:
            raise SdcInputError("this metric needs every record's nearest distance, which "
                                "blocking on categorical keys leaves undefined; name key sets "
                                "of numeric columns for it")
        return ctx.cached(("blocked", kind, metric, reverse, keys),
                          lambda: _blocked_link(ctx, keys, kind, metric, reverse))

    def run() -> dict[str, Any]:
        M, O = _transformed(ctx, keys, kind)
        n_m, n_o = ctx.shape_masked[0], ctx.shape_original[0]
        if reverse:
            truth = ctx.runner.task(invert_truth, ctx.truth, n_m, n_o)
            return link_top2(ctx.runner, O, M, n_o, n_m, len(keys), metric=metric, truth=truth,
                             keep_nearest=keep_nearest, **_options(ctx))
        return link_top2(ctx.runner, M, O, n_m, n_o, len(keys), metric=metric, truth=ctx.truth,
                         keep_nearest=keep_nearest, **_options(ctx))
    return ctx.cached(("link", kind, metric, reverse, keep_nearest, keys), run)


def _linked_share(ctx: MeasureContext, keys: tuple[int, ...], kind: str, metric: str,
                  which: str = "first", reverse: bool = False) -> float:
    """100 x share of query records linked to their own record.

    ``which`` is ``first``/``second`` (expected share under the 1/t rule) or
    ``first_hits``/``second_hits`` (tie-as-hit: a full hit when the true
    record is among the tied nearest).
    """
    r = _link(ctx, keys, kind, metric, reverse=reverse)
    return 100.0 * r[which] / r["n"]


def ordinal_columns(ctx: MeasureContext) -> tuple[str, ...]:
    """The ordinal columns of the context's inputs (categorical columns whose codes are
    ordered: :attr:`Inputs.ordinal <sdcdist.metrics.Inputs.ordinal>`, filled from option
    ``ordinal``); an unknown or numeric column raises."""
    cols = list(ctx.inputs.ordinal)
    if not cols:
        return ()
    column_positions(cols, ctx.columns, what="ordinal column", where="the original file")
    bad = [c for c in cols if c not in ctx.categorical]
    if bad:
        raise SdcInputError(f"the 'ordinal' option names the numeric column(s) {bad}; it "
                            "names categorical columns whose codes are ordered (numeric "
                            "columns are ordered already): declare them categorical, or "
                            "leave them out of 'ordinal'")
    return tuple(dict.fromkeys(cols))


def _dld_gower(ctx: MeasureContext, keys: tuple[int, ...]) -> bool:
    """Whether DLD links ``keys`` by the Gower distance (option ``dld_distance``; by
    default on key sets holding a categorical column)."""
    d = ctx.options.get("dld_distance")
    if d is None:
        return any(ctx.columns[k] in ctx.categorical for k in keys)
    return d == "gower"


def _gower_stats(X: Any, cols: tuple[int, ...], lookups: Any) -> dict[str, np.ndarray]:
    from ...linkage.gower import column_stats
    return column_stats(X, cols, lookups)


def _gower_link(ctx: MeasureContext, keys: tuple[int, ...], reverse: bool) -> dict[str, Any]:
    """Nearest-neighbour linkage on ``keys`` by the Gower distance (cached)."""
    from ...linkage.gower import plan, prepare

    def run() -> dict[str, Any]:
        names, ja, jb = key_positions(ctx, keys)
        ordinal = set(ordinal_columns(ctx))
        kinds = tuple("ordinal" if nm in ordinal else "nominal" if nm in ctx.categorical
                      else "numeric" for nm in names)
        cat = [nm for nm, kind in zip(names, kinds) if kind != "numeric"]
        lookups: list[Any] = [None] * len(names)
        if cat:
            from ..categorical_keys import recodings
            for nm, lk in zip(cat, recodings(ctx, cat)):
                lookups[names.index(nm)] = lk
        lk = lookups if any(x is not None for x in lookups) else None
        so = ctx.runner.call(_gower_stats, ctx.original, ja, lk)
        sm = ctx.runner.call(_gower_stats, ctx.masked, jb, None)
        for nm, kind, lo, hi in zip(names, kinds, so["min"], so["max"]):
            # the terms divide by the original column's range (missing values aside; the
            # masked column may be constant: a release that collapsed it is still linked)
            if kind == "numeric" and not hi > lo:
                raise constant_error([nm], "the original file", "the Gower distance divides "
                                     "by each numeric key column's range",
                                     "leave it out of the key sets")
        # an ordinal column's levels L_j: its declared categories, used or not (the
        # largest code in either file + 1 only when no labels are known)
        levels = tuple(ctx.n_levels(nm) if kind == "ordinal" else None
                       for nm, kind in zip(names, kinds))
        g, prep = plan(kinds, so, sm, levels=levels)
        O = ctx.runner.task(prepare, ctx.original, ja, kinds, prep, lk)
        M = ctx.runner.task(prepare, ctx.masked, jb, kinds, prep, None)
        n_m, n_o = ctx.shape_masked[0], ctx.shape_original[0]
        opt = dict(_options(ctx), method="brute")
        if reverse:
            truth = ctx.runner.task(invert_truth, ctx.truth, n_m, n_o)
            return link_top2(ctx.runner, O, M, n_o, n_m, len(keys), metric=g, truth=truth,
                             **opt)
        return link_top2(ctx.runner, M, O, n_m, n_o, len(keys), metric=g, truth=ctx.truth,
                         **opt)
    return ctx.cached(("gower", reverse, keys), run)


def _dld_share(ctx: MeasureContext, keys: tuple[int, ...], which: str) -> float:
    dmt = ctx.options.get("dld", "catalog") == "dmt"
    ordinal_columns(ctx)                      # a bad 'ordinal' is refused on every path
    if _dld_gower(ctx, keys):
        r = _gower_link(ctx, keys, reverse=dmt)
        return 100.0 * r[which + "_hits" if dmt else which] / r["n"]
    if dmt:
        return _linked_share(ctx, keys, "raw", "sqeuclidean", which + "_hits", reverse=True)
    return _linked_share(ctx, keys, "z", "sqeuclidean", which)


# -- distance linkage ----------------------------------------------------------------

@register("DLD", kind="risk", keysets=True, same_shape=False, categorical=True,
          unit="% of records",
          reference="[DMT §4.1]",
          options=_BLOCKED + ("dld", "dld_distance", "ordinal"),
          description="distance-based linkage: % of masked records whose nearest original "
                      "record (standardised Euclidean on numeric key columns, Gower on key "
                      "sets with categorical columns: option dld_distance) is their own; "
                      "option dld: dmt links original to masked on raw values, ties as hits")
def dld(ctx: MeasureContext, keys: tuple[int, ...]) -> float:
    return _dld_share(ctx, keys, "first")


@register("DLD2", kind="risk", keysets=True, same_shape=False, categorical=True,
          unit="% of records",
          reference="[DMT §4.1]",
          options=_BLOCKED + ("dld", "dld_distance", "ordinal"),
          description="% of masked records whose second-nearest original record "
                      "(standardised Euclidean, or Gower as DLD) is their own; options dld "
                      "and dld_distance as DLD")
def dld2(ctx: MeasureContext, keys: tuple[int, ...]) -> float:
    return _dld_share(ctx, keys, "second")


@register("DRL2", kind="risk", keysets=True, same_shape=False, categorical=True,
          unit="% of records",
          reference="[DTMS §4.1]",
          options=_BLOCKED,
          description="distance-standardising linkage: sum of |a_i - b_i| / sd of |a_i - b_i| "
                      "over all pairs; % of masked records linked to their own")
def drl2(ctx: MeasureContext, keys: tuple[int, ...]) -> float:
    return _linked_share(ctx, keys, "drl2", "cityblock")


@register("PDL", kind="risk", keysets=True, same_shape=False, categorical=True,
          unit="% of records",
          reference="[DRS §2.1]",
          options=_BLOCKED,
          keyset_default="all",
          description="permutation-distance linkage: each original record linked to the masked "
                      "record(s) at minimal max rank difference over all key columns (one key "
                      "set unless key sets are named); % correct")
def pdl(ctx: MeasureContext, keys: tuple[int, ...]) -> float:
    return _linked_share(ctx, keys, "rank", "chebyshev", reverse=True)


@register("RR", kind="risk", keysets=True, same_shape=False, ascending=False,
          unit="log(1 + rank distance)",
          options=_LINK_OPTIONS,
          reference="[DRS §4, eq. 3]", keyset_default="all",
          description="rank-distance risk: mean log(1 + Euclidean rank distance of each "
                      "original record to its nearest masked record, over all key columns: "
                      "one key set unless key sets are named); lower = riskier")
def rr(ctx: MeasureContext, keys: tuple[int, ...]) -> float:
    r = _link(ctx, keys, "rank", "sqeuclidean", reverse=True, keep_nearest=True)
    d = np.log1p(np.sqrt(r["nearest"]))
    return math.fsum(d.tolist()) / max(len(d), 1)


# -- global (1-1) distance linkage ---------------------------------------------------

def _dense_distances(Q: np.ndarray, C: np.ndarray) -> np.ndarray:
    return np.sqrt(distance.sq_distances(Q, C))


def _truth_array(ctx: MeasureContext) -> np.ndarray:
    if ctx.truth is None:
        return row_truth(ctx.shape_masked[0], ctx.shape_original[0])
    return np.asarray(ctx.runner.result(ctx.truth), dtype=np.int64)


@register("GDBRL", kind="risk", keysets=True, same_shape=False,
          unit="% of records",
          options=("block_memory", "gdbrl_dense_max", "gdbrl_candidates"),
          reference="sdcMicro recordLinkage",
          description="global distance-based linkage: 1-1 assignment minimising total "
                      "standardised Euclidean distance; % of masked records paired with their own")
def gdbrl(ctx: MeasureContext, keys: tuple[int, ...]) -> MetricResult:
    from ...linkage.assignment import (Candidates, assign_by_content, content_order,
                                      expected_hits, identical_classes)
    M, O = _transformed(ctx, keys, "z")
    n_m, n_o = ctx.shape_masked[0], ctx.shape_original[0]
    dense_max = int(ctx.options["gdbrl_dense_max"])
    c = int(ctx.options["gdbrl_candidates"])
    # ties between optimal assignments (and at the candidates' cut) broken by the records'
    # values, never their positions; identical records count their expected hits
    # (CATALOG PRL item 5)
    order_m = np.asarray(ctx.runner.call(content_order, M), dtype=np.int64)
    order_o = np.asarray(ctx.runner.call(content_order, O), dtype=np.int64)
    if max(n_m, n_o) <= dense_max:
        W = ctx.runner.call(_dense_distances, M, O)
        rows, cols, info = assign_by_content(W, order_m, order_o, maximize=False,
                                             dense_limit=dense_max)
    else:
        opt = _options(ctx)
        Oc = ctx.runner.task(_take_rows, O, order_o)
        d, idx = nearest_candidates(ctx.runner, M, Oc, n_m, n_o, len(keys), c,
                                    block_memory=opt["block_memory"])
        cand = Candidates.from_topc(idx, np.sqrt(d), n_o)
        rows, cols, info = assign_by_content(cand, order_m, None, maximize=False,
                                             dense_limit=dense_max)
        cols = order_o[cols]
    truth = _truth_array(ctx)
    credit = expected_hits(rows, cols, truth, ctx.runner.call(identical_classes, M),
                           ctx.runner.call(identical_classes, O))
    return MetricResult(100.0 * math.fsum(credit.tolist()) / n_m, flag=int(info["flag"]),
                        info={"assignment": info["method"],
                              "unassigned": int(info["n_unassigned_rows"])})


def _take_rows(A: np.ndarray, order: np.ndarray) -> np.ndarray:
    return np.ascontiguousarray(A[order])


# -- correlation-based linkage without shared attributes -----------------------------

def crl_links(A: np.ndarray, B: np.ndarray, corr: np.ndarray,
              rng: np.random.Generator | None = None) -> np.ndarray:
    """Correlation-based record linkage [DTMS §4.3].

    Parameters
    ----------
    A : ndarray (n_a, p)
        The intruder's quasi-identifiers.
    B : ndarray (n_b, q)
        The released quasi-identifiers.
    corr : ndarray (p, q)
        Cross-correlations of A's and B's attributes.
    rng : Generator, optional
        Breaks the ties left after all attribute pairs (records identical on all the
        attributes); None: they keep their row order.

    Returns
    -------
    ndarray (n_a,) of int
        Row of B linked to each row of A: A and B are sorted by the attribute
        pair of highest |correlation| (B descending when it is negative), ties
        broken by the next pairs, remaining ties at random; the k-th of A is
        linked to the k-th of B (to the same quantile when the sizes differ).
    """
    n_a, n_b = A.shape[0], B.shape[0]
    flat = np.argsort(-np.abs(corr).ravel(), kind="stable")       # pairs by |corr|
    pairs = [divmod(int(f), corr.shape[1]) for f in flat]
    sign = [1.0 if corr[i, j] >= 0 else -1.0 for i, j in pairs]
    # np.lexsort: the last key is the primary one.
    last_a = [rng.permutation(n_a)] if rng is not None else []
    last_b = [rng.permutation(n_b)] if rng is not None else []
    keys_a = last_a + [A[:, i] for i, _ in reversed(pairs)]
    keys_b = last_b + [s * B[:, j] for (_, j), s in zip(reversed(pairs), reversed(sign))]
    order_a = np.lexsort(keys_a)
    order_b = np.lexsort(keys_b)
    k = np.arange(n_a, dtype=np.int64)
    at = k if n_a == n_b else (2 * k + 1) * n_b // (2 * n_a)
    links = np.empty(n_a, dtype=np.int64)
    links[order_a] = order_b[at]
    return links


def spearman_cross(pa: np.ndarray, pb: np.ndarray) -> np.ndarray:
    """Spearman's correlations of every column of ``pa`` with every column of ``pb`` (rows
    are the matching pairs), shape (p, q).

    Each pair of columns over the rows where both are present (pairwise complete),
    mid-ranks for ties, Pearson's correlation of the ranks; 0 where it is undefined
    (fewer than two rows, or a constant column among them). The rows come in content
    order, so the sums are the same floats in every row order."""
    from scipy.stats import rankdata   # imported here: scipy.stats takes a second

    out = np.zeros((pa.shape[1], pb.shape[1]))
    for i in range(pa.shape[1]):
        for j in range(pb.shape[1]):
            ok = ~np.isnan(pa[:, i]) & ~np.isnan(pb[:, j])
            if np.count_nonzero(ok) < 2:
                continue
            ra = rankdata(pa[ok, i]) - (np.count_nonzero(ok) + 1) / 2.0
            rb = rankdata(pb[ok, j]) - (np.count_nonzero(ok) + 1) / 2.0
            den = np.sqrt(np.dot(ra, ra) * np.dot(rb, rb))
            if den > 0:
                out[i, j] = float(np.dot(ra, rb) / den)
    return out


def _crl_task(X: Any, Y: Any, ja: tuple[int, ...], jb: tuple[int, ...], truth: Any,
              correlation: str = "pearson") -> tuple[float, int]:
    """Expected correct links of CRL and the number of released records.

    Records identical on all the attributes tie in both sorts; a link counts its
    expected correctness over the orders of identical records (as the other linkage
    metrics count identical records: :func:`~sdcdist.linkage.assignment.expected_hits`),
    summed exactly, so the figure does not depend on the files' row order."""
    from ...linkage.assignment import expected_hits, identical_classes
    A = np.asarray(X[:, list(ja)], dtype=np.float64)
    B = np.asarray(Y[:, list(jb)], dtype=np.float64)
    t = np.asarray(truth, dtype=np.int64)      # masked -> original
    ok = np.flatnonzero(t >= 0)
    # worst case: exact correlations over the truly matching records
    # (over the pairs in content order: the same float sums in every row order)
    pa, pb = A[t[ok]], B[ok]
    co = content_order(row_hashes(np.hstack([pa, pb])))
    if correlation == "spearman":
        corr = spearman_cross(pa[co], pb[co])
    else:
        corr = np.corrcoef(pa[co], pb[co], rowvar=False)[:len(ja), len(ja):]
    inv = np.full(A.shape[0], -1, np.int64)
    inv[t[ok]] = ok
    links = crl_links(A, B, corr)
    credit = expected_hits(np.arange(A.shape[0]), links, inv, identical_classes(A),
                           identical_classes(B))
    return math.fsum(credit.tolist()), B.shape[0]


def _crl_columns(ctx: MeasureContext) -> list[tuple[tuple[int, ...], tuple[int, ...]]]:
    ext, rel = ctx.options.get("crl_external"), ctx.options.get("crl_released")
    if (ext is None) != (rel is None):
        raise exclusive_error(["The option 'crl_external' (columns of the original file)",
                               "'crl_released' (columns of the masked file)"], "all")
    if ext is None:
        if not ctx.keysets:
            raise SdcInputError("CRL needs a key set or the 'crl_external'/'crl_released' "
                                "options; got neither")
        return [key_positions(ctx, ctx.key_index(k))[1:] for k in ctx.keysets]
    out = []
    for cols, have, what in ((ext, ctx.columns, "original"), (rel, ctx.masked_columns, "masked")):
        cols = [cols] if isinstance(cols, str) else list(cols)
        if not cols:
            raise empty_error(f"The CRL column list for the {what} file",
                              "name at least one column")
        out.append(tuple(column_positions(cols, have, what="CRL column",
                                          where=f"the {what} file")))
    return [tuple(out)]  # type: ignore[list-item]


def _pearson_categorical(categorical: Any, columns: Any) -> list[str]:
    """The categorical columns among CRL's ``columns`` (the names of both sides)."""
    cats = set(categorical)
    return list(dict.fromkeys(c for c in columns if c in cats))


def _crl_guard(inputs: Any, options: Any) -> Any:
    """Why CRL on Pearson's correlations (the default) would refuse these inputs: its
    columns (the key sets, or crl_external and crl_released) hold categorical ones."""
    from ..inputs import Reason
    if (options.get("crl_correlation") or "pearson") != "pearson" or not inputs.categorical:
        return None
    ext, rel = options.get("crl_external"), options.get("crl_released")
    if ext is not None and rel is not None:
        cols = [*([ext] if isinstance(ext, str) else ext),
                *([rel] if isinstance(rel, str) else rel)]
    else:
        cols = [c for k in inputs.link_keysets() for c in k]
    bad = _pearson_categorical(inputs.categorical, cols)
    if not bad:
        return None
    return Reason(f"CRL's columns hold categorical column(s) {', '.join(bad)}",
                  "Pearson's correlations compare numeric values; -o "
                  "crl_correlation=spearman ranks ordinal ones and leaves nominal ones out, "
                  "or name numeric key sets with --keyset", order=1)


@register("CRL", kind="risk", same_shape=False, reference="[DTMS §4.3]",
          unit="% of records", guard=_crl_guard,
          options=("crl_external", "crl_released", "crl_correlation", "ordinal"),
          description="correlation-based linkage (works without shared attributes): sort both "
                      "files by their most correlated attribute pair (Pearson, or Spearman: "
                      "option crl_correlation); % linked correctly")
def crl(ctx: MeasureContext) -> MetricResult:
    scen = _crl_columns(ctx)
    correlation = ctx.options.get("crl_correlation") or "pearson"
    info: dict[str, Any] = {}
    if correlation == "spearman":
        # nominal categorical attributes have no rank order: left out, with a note
        ordinal = set(ordinal_columns(ctx))
        nominal = {c for c in ctx.categorical if c not in ordinal}
        left: list[str] = []
        kept = []
        for ja, jb in scen:
            ka = tuple(j for j in ja if ctx.columns[j] not in nominal)
            kb = tuple(j for j in jb if ctx.masked_columns[j] not in nominal)
            left += [ctx.columns[j] for j in ja if j not in ka]
            left += [ctx.masked_columns[j] for j in jb if j not in kb]
            if not ka or not kb:
                raise SdcInputError(
                    "CRL on Spearman's correlations leaves nominal categorical columns out "
                    "(they have no rank order), and then no column is left on one side; "
                    "name ordinal columns in the 'ordinal' option, or name key sets (or "
                    "crl_external and crl_released) with a numeric column on each side")
            kept.append((ka, kb))
        scen = kept
        if left:
            left = list(dict.fromkeys(left))
            log.info("CRL (Spearman) leaves the nominal column(s) %s out", left)
            info["nominal_left_out"] = left
    else:
        bad = _pearson_categorical(ctx.categorical, [
            *(ctx.columns[j] for ja, _ in scen for j in ja),
            *(ctx.masked_columns[j] for _, jb in scen for j in jb)])
        if bad:
            raise SdcInputError(
                f"CRL on Pearson's correlations compares numeric values, and its columns "
                f"hold the categorical column(s) {bad}; leave them out (name numeric key "
                "sets, or crl_external and crl_released), or use crl_correlation: spearman "
                "(ordinal columns by their codes, nominal ones left out)")
    truth = ctx.truth if ctx.truth is not None else ctx.runner.share(_truth_array(ctx))
    names_a, names_b = ctx.columns, ctx.masked_columns
    for ja, jb in scen:
        for j in ja:
            _check_constant_one(ctx, ctx.original, j, names_a[j], "original file",
                                missing=correlation == "spearman")
        for j in jb:
            _check_constant_one(ctx, ctx.masked, j, names_b[j], "masked file",
                                missing=correlation == "spearman")
    vals = []
    for ja, jb in scen:
        hits, n = ctx.runner.call(_crl_task, ctx.original, ctx.masked, ja, jb, truth,
                                  correlation)
        vals.append(100.0 * hits / n)
    return MetricResult(float(np.mean(vals)),
                        per_keyset=tuple(vals) if len(scen) > 1 or
                        ctx.options.get("crl_external") is None else None, info=info)


def _few_values(X: Any, j: int) -> bool:
    """Task: whether column ``j`` has fewer than two distinct non-missing values."""
    x = np.asarray(X[:, j], dtype=np.float64)
    x = x[~np.isnan(x)]
    return bool(x.size < 2 or x.min() == x.max())


def _check_constant_one(ctx: MeasureContext, X: Any, j: int, name: str, what: str, *,
                        missing: bool = False) -> None:
    """Refuse a constant CRL column (``missing``: missing values allowed, Spearman's
    pairwise-complete correlations leave them out)."""
    fn = _few_values if missing else _column_refused
    if ctx.cached(("column_refused_one", what, j, missing),
                  lambda: ctx.runner.call(fn, X, j)):
        raise constant_error([name], f"the {what}", "correlation linkage cannot use a constant "
                             "column", "leave it out")
