"""Distances for synthetic releases: DCR against the training and holdout sets and NNDR, as
SDMetrics 0.32.0 defines them (CategoricalCAP: :mod:`.cap`).

A synthetic (or otherwise masked) release is judged by how close its records lie to
the records it was made from (the *training* file, sdcdist's original file) and, for
comparison, to records of the same population that it was not made from (a *holdout*
file, named with ``holdout=`` / ``--holdout`` / the spec dataset's ``holdout:``).

The distance (SDMetrics' ``calculate_dcr``) between a released record x and a
reference record y is the mean over the m columns the files share (the weight left
out) of a per-column term in [0, 1]:

- numeric column: ``min(|x - y| / R, 1)`` with R = max - min of the column in the
  *reference* file (the training or the holdout file, so each has its own scale);
  where R = 0, 1 if the values differ and 0 if not;
- categorical column: 0 if the codes are equal, else 1;
- missing values (either type): 0 if both are missing, 1 if exactly one is.

The terms are added left to right in column order and the sum divided by m, as
SDMetrics does, so the figures are the same to the last bit.

The DCR of a released record is its distance to the closest reference record.
Metrics (each figure is one SDMetrics returns):

- ``dcr_train_median``: median DCR to the training file
  (``DCRBaselineProtection``'s ``median_DCR_to_real_data.synthetic_data``);
- ``dcr_holdout_median``: median DCR to the holdout file;
- ``dcr_closer_train``: share of released records strictly closer to the training
  file than to the holdout (``DCROverfittingProtection``'s ``closer_to_training``);
- ``dcr_overfit``: ``min(2 (1 - dcr_closer_train), 1)``
  (``DCROverfittingProtection``'s score);
- ``dcr_baseline``: ``min(dcr_train_median / median DCR of random data, 1)``, NaN
  when the random median is 0 (``DCRBaselineProtection``'s score). The random file
  has as many records as the release, drawn column by column from the training
  file as SDMetrics draws them (integers uniform on [min, max] for whole-number
  columns without missing values, uniform reals on [min, max) for other numeric
  columns, a uniform choice among the distinct codes for categorical ones, then
  each value missing with the column's missing share);
- ``nndr_median``: median over released records of d1 / d2, the distances to the
  closest and second-closest training records (a duplicate counts: two equal
  training records give d1 = d2), 1 where d2 = 0. SDMetrics 0.32.0 has no NNDR;
  this is the usual definition on SDMetrics' distance.

Exact at any size, on a cluster: the reference file is split into blocks of rows;
each block becomes one task holding its distinct rows and a KD-tree over an L1
embedding of them (numeric columns scaled to [0, 1], the released values clipped to
the reference's range; with missing values three coordinates whose L1 distance is
the term above; categorical columns one-hot with weight 1/2). The embedded distance
never exceeds the true one (the clip only shortens, and the cap of 1 is never
reached inside the range), so a query that has found its nearest (and second
nearest) records at true distances below the tree's distance to every record it
did not return is settled; the others ask for four times as many. Distances are
recomputed exactly (as above) for every candidate, and the partial minima of the
blocks merge exactly, so the figures never depend on block sizes or the worker count.
"""

from __future__ import annotations

import os
from collections.abc import Sequence
from dataclasses import dataclass
from functools import partial
from typing import TYPE_CHECKING, Any

import numpy as np

from ...errors import SdcInputError, column_positions, count_error, magnitude_error
from ...keytables import distinct_float_rows
from ...linkage.distance_drivers import linkage_block_rows
from ...parallel import indexed_reduce, map_reduce
from .._registry import MeasureContext, MetricResult, register

if TYPE_CHECKING:
    from scipy.spatial import cKDTree

__all__ = ["DcrColumns", "column_summary", "merge_summaries", "dcr_columns",
           "dcr_distances", "embed", "DcrIndex", "build_dcr_index", "dcr_top2",
           "merge_top2", "random_like", "EXACT_INTEGERS", "nndr", "overfit_figures",
           "baseline_figures"]

#: Relative and absolute slack between cKDTree's L1 sums and the exact distances.
_SLACK = 1e-9


# -- column descriptions ----------------------------------------------------------------

def column_summary(start: int, stop: int, X: Any, pos: Sequence[int],
                   categorical: Sequence[bool]) -> dict[str, Any]:
    """Task: per column of ``pos`` for records ``start:stop``: min, max, whether a value is
    missing, and the distinct codes of the categorical ones."""
    B = np.asarray(X[start:stop], dtype=np.float64)[:, list(pos)]
    miss = np.isnan(B)
    known = np.where(miss, np.inf, B)
    lo = known.min(axis=0) if B.shape[0] else np.full(B.shape[1], np.inf)
    hi = np.where(miss, -np.inf, B).max(axis=0) if B.shape[0] else np.full(B.shape[1], -np.inf)
    codes = [np.unique(B[~miss[:, j], j]) if c else np.zeros(0)
             for j, c in enumerate(categorical)]
    return {"lo": lo, "hi": hi, "missing": miss.any(axis=0), "codes": codes,
            "n": np.int64(B.shape[0]), "n_missing": miss.sum(axis=0).astype(np.int64)}


def merge_summaries(*parts: dict[str, Any]) -> dict[str, Any]:
    """``combine`` of :func:`column_summary` (exact: min, max, or, union, integer sums)."""
    return {"lo": np.minimum.reduce([p["lo"] for p in parts]),
            "hi": np.maximum.reduce([p["hi"] for p in parts]),
            "missing": np.logical_or.reduce([p["missing"] for p in parts]),
            "codes": [np.unique(np.concatenate([p["codes"][j] for p in parts]))
                      for j in range(len(parts[0]["codes"]))],
            "n": np.int64(sum(int(p["n"]) for p in parts)),
            "n_missing": np.sum([p["n_missing"] for p in parts], axis=0)}


@dataclass(frozen=True)
class DcrColumns:
    """How the columns of one (released, reference) pair enter the distance.

    Attributes
    ----------
    pos_q, pos_r : tuple of int
        Positions of the m columns in the released (query) and the reference file.
    numeric : ndarray (m,) of bool
    lo, span : ndarray (m,)
        The reference file's minimum and range (max - min; NaN where it has no value).
    missing : ndarray (m,) of bool
        A value is missing in this column in either file (three embedding coordinates).
    codes : tuple of ndarray
        The sorted codes of each categorical column in either file (empty for numeric).
    """

    pos_q: tuple[int, ...]
    pos_r: tuple[int, ...]
    numeric: np.ndarray
    lo: np.ndarray
    span: np.ndarray
    missing: np.ndarray
    codes: tuple[np.ndarray, ...]


def dcr_columns(pos_q: Sequence[int], pos_r: Sequence[int], numeric: Sequence[bool],
                released: dict[str, Any], reference: dict[str, Any]) -> DcrColumns:
    """The :class:`DcrColumns` from the two files' merged :func:`column_summary`."""
    num = np.asarray(numeric, bool)
    lo = np.where(np.isfinite(reference["lo"]), reference["lo"], np.nan)
    hi = np.where(np.isfinite(reference["hi"]), reference["hi"], np.nan)
    codes = tuple(np.unique(np.concatenate([released["codes"][j], reference["codes"][j]]))
                  if not num[j] else np.zeros(0) for j in range(num.size))
    miss = released["missing"] | reference["missing"] | np.isnan(lo)
    with np.errstate(over="ignore"):     # a range beyond float64 is inf: refused by the caller
        span = hi - lo
    return DcrColumns(tuple(int(p) for p in pos_q), tuple(int(p) for p in pos_r), num,
                      lo, span, miss, codes)


# -- the exact distance -----------------------------------------------------------------

def dcr_distances(Q: np.ndarray, C: np.ndarray, cols: DcrColumns) -> np.ndarray:
    """SDMetrics' distance between released rows and reference rows, exactly.

    Parameters
    ----------
    Q : ndarray (..., m)
        Released rows (the columns of ``cols``, in order).
    C : ndarray (..., m)
        Reference rows, broadcastable against ``Q``.
    cols : DcrColumns

    Returns
    -------
    ndarray
        The mean over columns of the per-column terms (added left to right), shape of
        the broadcast without the last axis.
    """
    m = Q.shape[-1]
    total = None
    for j in range(m):
        q, c = Q[..., j], C[..., j]
        qn, cn = np.isnan(q), np.isnan(c)
        if cols.numeric[j]:
            diff = np.abs(c - q)
            r = cols.span[j]
            with np.errstate(invalid="ignore", divide="ignore"):
                t = (diff > 0).astype(np.float64) if r == 0 else np.minimum(diff / r, 1.0)
        else:
            t = (q != c).astype(np.float64)
        t = np.where(qn & cn, 0.0, np.where(qn | cn, 1.0, t))
        total = t if total is None else total + t
    return total / m


# -- the L1 embedding and the KD-tree ---------------------------------------------------

def embed(X: np.ndarray, cols: DcrColumns) -> np.ndarray:
    """L1 coordinates of rows ``X`` (n, m) whose distance is a lower bound of the exact
    one (numeric values clipped to the reference's range); see the module's text."""
    parts = []
    for j in range(X.shape[1]):
        x = X[:, j]
        miss = np.isnan(x)
        if cols.numeric[j]:
            r = cols.span[j]
            if np.isnan(r) or r == 0:
                v = np.zeros(x.size)
            else:
                v = np.clip((np.where(miss, cols.lo[j], x) - cols.lo[j]) / r, 0.0, 1.0)
            if cols.missing[j]:
                parts += [np.where(miss, 0.0, v / 2), np.where(miss, 0.0, (1 - v) / 2),
                          np.where(miss, 0.5, 0.0)]
            else:
                parts.append(v)
        else:
            k = cols.codes[j]
            idx = np.searchsorted(k, np.where(miss, 0.0, x))
            idx = np.where(miss, k.size, idx)           # missing: a category of its own
            levels = k.size + int(cols.missing[j])
            if levels <= 2:
                parts.append(idx.astype(np.float64))
            else:
                oh = np.zeros((x.size, levels))
                oh[np.arange(x.size), idx] = 0.5
                parts += list(oh.T)
    return np.ascontiguousarray(np.column_stack(parts)) if parts else np.zeros((X.shape[0], 0))


@dataclass
class DcrIndex:
    """A block of reference rows prepared for exact nearest-record queries.

    ``rows`` (u, m) the distinct rows, ``weight`` (u,) how many records each stands
    for, ``tree`` a KD-tree over their :func:`embed` coordinates.
    """

    rows: np.ndarray
    weight: np.ndarray
    tree: cKDTree


def build_dcr_index(c0: int, c1: int, C: Any, cols: DcrColumns) -> DcrIndex:
    """Task: the :class:`DcrIndex` of reference records ``c0:c1``."""
    from scipy.spatial import cKDTree   # on first use: listing the metrics stays light
    R = np.asarray(C[c0:c1], dtype=np.float64)[:, list(cols.pos_r)]
    if R.shape[0] == 0:
        return DcrIndex(R, np.zeros(0, np.int64), cKDTree(np.zeros((0, 1))))
    rows, weight = distinct_float_rows(R)
    return DcrIndex(rows, weight.astype(np.int64),
                    cKDTree(embed(rows, cols), balanced_tree=False, compact_nodes=False))


def _two_smallest(D: np.ndarray, W: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Per row, the smallest and second-smallest of values ``D`` counted ``W`` times."""
    order = np.argsort(D, axis=1, kind="stable")
    Ds = np.take_along_axis(D, order, axis=1)
    Ws = np.take_along_axis(W, order, axis=1)
    d1 = Ds[:, 0]
    if D.shape[1] > 1:
        d2 = np.where(Ws[:, 0] > 1, d1, Ds[:, 1])
    else:
        d2 = np.where(Ws[:, 0] > 1, d1, np.inf)
    return d1, d2


def dcr_top2(q0: int, q1: int, Q: Any, index: DcrIndex, cols: DcrColumns, need: int,
             threads: int = 1, *, k: int = 4) -> dict[str, np.ndarray]:
    """Task: distances of released records ``q0:q1`` to their closest (``d1``) and, with
    ``need=2``, second-closest (``d2``) record of one reference block; exact.

    ``threads`` share the KD-tree queries (each query is answered on its own, so the
    figures do not depend on it): one in a cluster's task, every core in this process."""
    X = np.asarray(Q[q0:q1], dtype=np.float64)[:, list(cols.pos_q)]
    n = X.shape[0]
    out = {"d1": np.full(n, np.inf), "d2": np.full(n, np.inf)}
    u = index.rows.shape[0]
    if u == 0 or n == 0:
        return out
    E = embed(X, cols)
    pending = np.arange(n)
    while pending.size:
        kk = min(k, u)
        kd, idx = index.tree.query(E[pending], k=kk, p=1, workers=threads)
        kd, idx = kd.reshape(pending.size, kk), idx.reshape(pending.size, kk)
        D = dcr_distances(X[pending][:, None, :], index.rows[idx], cols)
        d1, d2 = _two_smallest(D, index.weight[idx])
        m = len(cols.pos_q)
        bound = (kd[:, -1] - _SLACK * (m + kd[:, -1])) / m
        done = np.ones(pending.size, bool) if kk == u else \
            (d1 if need == 1 else d2) <= bound
        out["d1"][pending[done]] = d1[done]
        out["d2"][pending[done]] = d2[done]
        pending = pending[~done]
        k *= 4
    return out


def merge_top2(*parts: dict[str, np.ndarray]) -> dict[str, np.ndarray]:
    """``merge``: the two smallest distances over reference blocks (exact, any order)."""
    D = np.column_stack([p[key] for p in parts for key in ("d1", "d2")])
    D.sort(axis=1)
    return {"d1": D[:, 0].copy(), "d2": D[:, 1].copy()}


def _concat(*parts: dict[str, np.ndarray]) -> dict[str, np.ndarray]:
    return {key: np.concatenate([p[key] for p in parts]) for key in parts[0]}


# -- figures ----------------------------------------------------------------------------

def nndr(d1: np.ndarray, d2: np.ndarray) -> np.ndarray:
    """d1 / d2 per record, 1 where d2 = 0 (then d1 = d2 = 0)."""
    with np.errstate(invalid="ignore", divide="ignore"):
        return np.where(d2 == 0, 1.0, d1 / d2)


def overfit_figures(d_train: np.ndarray, d_holdout: np.ndarray) -> dict[str, float]:
    """SDMetrics' ``DCROverfittingProtection``: the share closer to training, its score."""
    closer = float(np.where(d_train < d_holdout, 1.0, 0.0).sum()) / d_train.size
    return {"closer_to_training": closer, "closer_to_holdout": 1 - closer,
            "score": min((1.0 - closer) * 2, 1.0)}


def baseline_figures(d_train: np.ndarray, d_random: np.ndarray) -> dict[str, float]:
    """SDMetrics' ``DCRBaselineProtection``: the two medians and the score."""
    ms, mr = float(np.median(d_train)), float(np.median(d_random))
    return {"synthetic_data": ms, "random_data_baseline": mr,
            "score": float("nan") if mr == 0.0 else min(ms / mr, 1.0)}


#: Largest magnitude up to which :func:`random_like` takes a whole-number column for integers:
#: float64 holds every integer up to 2^53, and beyond it every value is a whole number.
EXACT_INTEGERS = 2.0 ** 53


def random_like(X: np.ndarray, n: int, categorical: Sequence[bool], *,
                rng: np.random.Generator, rng_missing: np.random.Generator,
                code_order: str = "sorted") -> np.ndarray:
    """A random file of ``n`` records drawn column by column from ``X`` as SDMetrics'
    ``DCRBaselineProtection`` draws its baseline, with one difference by default: a
    categorical column's codes are drawn from in sorted order, where SDMetrics takes them
    in order of first appearance, which follows the file's row order.

    Parameters
    ----------
    X : ndarray (n_x, m)
        The training file (every column, in order: each draws in turn).
    n : int
        Records to draw.
    categorical : sequence of bool (m,)
    rng : numpy.random.Generator
        Draws the values.
    rng_missing : numpy.random.Generator
        Draws which values are missing (one uniform per record and column).
    code_order : {"sorted", "first"}
        The order of a categorical column's distinct codes that the uniform choice indexes:
        sorted (a function of the file's contents), or of first appearance (SDMetrics').

    Returns
    -------
    ndarray (n, m)
        Whole-number numeric columns without a missing value, within
        +-:data:`EXACT_INTEGERS`: integers uniform on [min, max]; other numeric columns
        (beyond it every float64 is a whole number): uniform on [min, max); categorical: a
        uniform choice among the distinct codes (in ``code_order``); then
        each value is missing with probability the column's missing share.
    """
    out = np.empty((n, X.shape[1]))
    for j in range(X.shape[1]):
        x = X[:, j]
        miss = np.isnan(x)
        ratio = float(miss.sum()) / x.size
        known = x[~miss]
        if categorical[j]:
            u, first = np.unique(known, return_index=True)
            if code_order == "first":
                u = u[np.argsort(first)]
            vals = rng.choice(u, size=n) if u.size else np.full(n, np.nan)
        elif not miss.any() and np.all(known == np.floor(known)) \
                and -EXACT_INTEGERS <= known.min() and known.max() <= EXACT_INTEGERS:
            vals = rng.integers(low=int(known.min()), high=int(known.max()) + 1,
                                size=n).astype(np.float64)
        else:
            lo = known.min() if known.size else np.nan
            hi = known.max() if known.size else np.nan
            vals = rng.uniform(low=lo, high=hi, size=n)
        mask = rng_missing.random(n) < ratio
        out[:, j] = np.where(mask, np.nan, vals)
    return out


# -- the metrics ------------------------------------------------------------------------

_DCR_OPTIONS = ("block_memory", "block_rows", "chunk_rows")


def _dcr_column_names(ctx: MeasureContext, name: str) -> list[str]:
    """The columns the distance uses: those both files share, the weight and the household
    id left out."""
    cols = [c for c in ctx.columns if c in set(ctx.masked_columns)
            and c not in (ctx.weight, getattr(ctx, "household", None))]
    if not cols:
        raise SdcInputError(f"{name} compares released records with training records on the "
                            "columns both files share, and they share none besides the "
                            "weight; give both files the same column names")
    return cols


def _summary(ctx: MeasureContext, X: Any, n: int, pos: Sequence[int],
             cat: Sequence[bool]) -> dict[str, Any]:
    return map_reduce(ctx.runner, column_summary, merge_summaries, [X], n,
                      chunk_rows=int(ctx.options["chunk_rows"]), args=(tuple(pos), tuple(cat)))


def _nearest(ctx: MeasureContext, name: str, which: str) -> dict[str, Any]:
    """Per released record, distances to the closest two records of ``which``
    ("train", "holdout" or "random"), and the column description used."""
    names = _dcr_column_names(ctx, name)
    cat = [c in ctx.categorical for c in names]
    pos_q = column_positions(names, ctx.masked_columns, what="column", where="the masked file")
    pos_r = column_positions(names, ctx.columns, what="column", where="the original file")

    def compute() -> dict[str, Any]:
        if which == "holdout":
            if ctx.holdout is None:
                raise SdcInputError(
                    f"{name} compares the release with a holdout file (records of the same "
                    "population the release was not made from), and none is named; give one "
                    "(--holdout, holdout=..., or 'holdout:' in the spec's dataset)")
            R, n_r = ctx.holdout, ctx.shape_holdout[0]
        elif which == "random":
            R, n_r = _random_file(ctx), ctx.shape_masked[0]
        else:
            R, n_r = ctx.original, ctx.shape_original[0]
        sq = ctx.cached(("dcr_summary", "masked", tuple(pos_q)), lambda: _summary(
            ctx, ctx.masked, ctx.shape_masked[0], pos_q, cat))
        sr = ctx.cached(("dcr_summary", which, tuple(pos_r)), lambda: _summary(
            ctx, R, n_r, pos_r, cat))
        if int(sr["n"]) == 0:
            raise count_error(f"The {which} file of {name}", "at least 1", "record", 0)
        cols = dcr_columns(pos_q, pos_r, [not c for c in cat], sq, sr)
        wide = [nm for nm, num, span in zip(names, cols.numeric, cols.span)
                if num and span == np.inf]
        if wide:
            # the distance divides by the reference's range, which is not a finite number
            raise magnitude_error(wide, "the training file" if which == "train" else
                                  f"the {which} file", f"measuring {name}")
        width = embed(np.zeros((0, len(names))), cols).shape[1]
        br = ctx.options.get("block_rows")
        if br:
            rows_q, rows_c = int(br[0]), int(br[1])
        else:
            rows_q, rows_c = linkage_block_rows(ctx.shape_masked[0], n_r, width,
                                                method="index",
                                                block_memory=int(ctx.options["block_memory"]))
        res = indexed_reduce(ctx.runner, partial(build_dcr_index, cols=cols), dcr_top2,
                             merge_top2, _concat, ctx.masked, R, ctx.shape_masked[0], n_r,
                             rows_q=rows_q, rows_c=rows_c,
                             query_args=(cols, 2 if which == "train" else 1,
                                         _query_threads(ctx.runner)))
        return {**res, "columns": names}
    if ctx.shape_masked[0] == 0:
        raise count_error(f"The released file of {name}", "at least 1", "record", 0)
    return ctx.cached(("dcr_nearest", which, tuple(names)), compute)


def _query_threads(runner: Any) -> int:
    """Threads of a KD-tree query: the cores of this process without a client (the
    work runs here), one per task on a cluster (its workers already share the cores)."""
    if getattr(runner, "client", None) is not None:
        return 1
    try:
        return max(1, len(os.sched_getaffinity(0)))
    except AttributeError:                                       # not on Linux
        return max(1, os.cpu_count() or 1)


def _random_file(ctx: MeasureContext) -> Any:
    """The random baseline file (as many records as the release), a handle."""
    g = ctx.rng("dcr_baseline")
    g_missing = np.random.Generator(np.random.MT19937(g.integers(2**63)))
    cat = [c in ctx.categorical for c in ctx.columns]
    return ctx.runner.task(_random_task, ctx.original, ctx.shape_masked[0], cat, g, g_missing)


def _random_task(X: Any, n: int, cat: Sequence[bool], g: np.random.Generator,
                 g_missing: np.random.Generator) -> np.ndarray:
    return random_like(np.asarray(X[:, :], dtype=np.float64), n, cat, rng=g,
                       rng_missing=g_missing)


def _info(res: dict[str, Any]) -> dict[str, Any]:
    return {"columns": list(res["columns"])}


#: the distance leaves the household id out when one is named
_READS = ("household",)


@register("dcr_train_median", kind="risk", same_shape=False, categorical=True, reads=_READS,
          index=True,
          ascending=False, options=_DCR_OPTIONS, unit="distance (0 to 1)",
          reference="SDMetrics 0.32.0 calculate_dcr; DCRBaselineProtection",
          description="median over released records of the distance to the closest "
                      "training record (SDMetrics' DCR)")
def _dcr_train_median(ctx: MeasureContext) -> MetricResult:
    res = _nearest(ctx, "dcr_train_median", "train")
    return MetricResult(float(np.median(res["d1"])), info=_info(res))


@register("dcr_holdout_median", kind="risk", same_shape=False, categorical=True, reads=_READS,
          index=True, needs=("holdout",),
          ascending=False, options=_DCR_OPTIONS, unit="distance (0 to 1)",
          reference="SDMetrics 0.32.0 calculate_dcr",
          description="median over released records of the distance to the closest "
                      "holdout record (needs a holdout file)")
def _dcr_holdout_median(ctx: MeasureContext) -> MetricResult:
    res = _nearest(ctx, "dcr_holdout_median", "holdout")
    return MetricResult(float(np.median(res["d1"])), info=_info(res))


def _overfit(ctx: MeasureContext, name: str) -> tuple[dict[str, float], dict[str, Any]]:
    tr = _nearest(ctx, name, "train")
    ho = _nearest(ctx, name, "holdout")
    return overfit_figures(tr["d1"], ho["d1"]), {
        **_info(tr), "holdout_records": int(ctx.shape_holdout[0])}


@register("dcr_closer_train", kind="risk", same_shape=False, categorical=True, reads=_READS,
          index=True, needs=("holdout",),
          options=_DCR_OPTIONS, unit="share of released records",
          reference="SDMetrics 0.32.0 DCROverfittingProtection",
          description="share of released records strictly closer to the training file "
                      "than to the holdout file (needs a holdout file)")
def _dcr_closer_train(ctx: MeasureContext) -> MetricResult:
    f, info = _overfit(ctx, "dcr_closer_train")
    return MetricResult(f["closer_to_training"], info=info)


@register("dcr_overfit", kind="risk", same_shape=False, categorical=True, reads=_READS,
          index=True, needs=("holdout",),
          ascending=False, options=_DCR_OPTIONS, unit="score (0 to 1; 1 safest)",
          reference="SDMetrics 0.32.0 DCROverfittingProtection",
          description="DCR overfitting protection: min(2 (1 - dcr_closer_train), 1) "
                      "(needs a holdout file)")
def _dcr_overfit(ctx: MeasureContext) -> MetricResult:
    f, info = _overfit(ctx, "dcr_overfit")
    return MetricResult(f["score"], info={**info, **f})


@register("dcr_baseline", kind="risk", same_shape=False, categorical=True, reads=_READS,
          index=True,
          ascending=False, random=True, options=_DCR_OPTIONS,
          unit="score (0 to 1; 1 safest)",
          reference="SDMetrics 0.32.0 DCRBaselineProtection",
          description="DCR baseline protection: median DCR of the release over that of "
                      "random data drawn from the training file's ranges, capped at 1")
def _dcr_baseline(ctx: MeasureContext) -> MetricResult:
    tr = _nearest(ctx, "dcr_baseline", "train")
    rd = _nearest(ctx, "dcr_baseline", "random")
    f = baseline_figures(tr["d1"], rd["d1"])
    info = {**_info(tr), "median_DCR_to_real_data":
            {"synthetic_data": f["synthetic_data"],
             "random_data_baseline": f["random_data_baseline"]}}
    if np.isnan(f["score"]):
        info["undefined"] = ("the random baseline's median distance to the training file is "
                             "0 (most random records repeat a training record: its columns "
                             "hold few distinct values), and the score divides by it")
    return MetricResult(f["score"], excluded=int(np.isnan(f["score"])), info=info)


@register("nndr_median", kind="risk", same_shape=False, categorical=True, reads=_READS,
          index=True,
          ascending=False, options=_DCR_OPTIONS, unit="ratio (0 to 1)",
          reference="nearest-neighbour distance ratio on SDMetrics 0.32.0's DCR distance",
          description="median over released records of the ratio of the distances to the "
                      "closest and the second-closest training record")
def _nndr_median(ctx: MeasureContext) -> MetricResult:
    res = _nearest(ctx, "nndr_median", "train")
    return MetricResult(float(np.median(nndr(res["d1"], res["d2"]))), info=_info(res))
