"""The three criteria of the Article 29 Working Party: singling out, linkability and
inference, each measured by an attack on the released (masked) file, as anonymeter
(Giomi et al., 2023) defines them.

Three sets of records take part: the original records that were masked (``ori``,
the context's original file), the released file (``syn``, the masked file) and the
control set (``control``): original records held out of what was masked (the
audit's ``control`` share, or ``measure(..., control=...)``). Each attack is run

- against ``ori`` (the main attack: its success rate r_main over n attacks);
- as a baseline that guesses at random (r_base);
- against the control set (r_control), whose records the release cannot reveal:
  what the attacker gets right there comes from what the data say about everyone.

A success rate is the Wilson score estimate (k + z²/2) / (n + z²) with error
z / (n + z²) sqrt(k (n - k) / n + z²/4), z = probit((1 + c) / 2) the two-sided normal
quantile of the confidence level c (option ``attack_confidence``: 0.95 gives z = 1.96). The risk is the residual (r_main - r_control) /
(1 - r_control), its error propagated from both, bounded to [0, 1] with its
interval; without a control set the risk is r_main. Each attack registers four
metrics: the risk (``so_uni``, ``so_multi``, ``linkability``, ``inference``), the
bounds of its interval (``_lo``, ``_hi``) and the baseline's risk (``_base``); a
risk below its baseline means the attack did no better than guessing.

- Singling out: queries (conjunctions of ``col op value``) built from the release
  that match exactly one of its distinct records; a query succeeds when it matches
  exactly one distinct record of ``ori``. Univariate queries: a value held by one
  record, ``<= min`` or ``>= max`` of a numeric column, ``is missing`` when one
  record is missing there. Multivariate: a random record's values in ``so_n_cols``
  random columns (categorical: ``==``; numeric: ``>=`` above the column's median,
  else ``<=``; missing: ``is missing``). Baseline: random values and operators
  (numeric ``== != > < >= <=``, categorical ``== !=``). The control's successes are
  scaled to ``ori``'s size by the model of Cohen and Nissim fitted as anonymeter describes
  it (to the exact expected successes on random subsets instead of five draws per size;
  option ``so_control_scale``). anonymeter 1.1.0 fits the model to the number of queries
  instead of their successes, so its scale comes out as (n_control + 1) / (n_original + 1)
  (``so_control_scale: sizes`` reproduces it).
- Linkability: each target record is split into the columns of the attacker's two
  files (``link_aux``); each half finds its ``link_neighbors`` nearest released
  records; a link succeeds when the two sets share a record. Baseline: two random
  sets of released records.
- Inference: the attacker knows a target's ``infer_aux`` columns, takes the secret
  (``infer_secret``) of the nearest released record; right when equal (categorical
  secret) or within the relative difference ``infer_tolerance`` of the guess
  (numeric). Baseline: the secret of a random released record.

Distance (anonymeter's Gower-like distance): the sum over columns of |x - y| / range
for numeric columns (range over the released file and the targets), of 1 for
unequal categories; 1 where both are missing; a pair with one value missing in a
numeric column is farther than any complete pair (anonymeter's NaN distance sorts
last). Ties are broken at random, reproducibly, by a hash of (salt, target, row).

Work on the cluster: counts of queries over record chunks (exact integer sums; each
chunk is indexed once, its rows sorted by each column, and a query tests only the rows
of its most selective term: :func:`map_chunks`, :func:`reduce_chunks`),
nearest-neighbour searches as blocks of targets x released rows (:func:`pairwise_reduce`),
each block keeping its k nearest by (distance, tie key): any chunking and worker count gives
the same figures, bit for bit. Singling out works on
distinct records (a record's 64-bit hash of its values; the first of equal records
is kept).
"""

from __future__ import annotations

import logging
from collections.abc import Sequence
from typing import Any

import numpy as np
from scipy.special import gammaln, ndtri

from ..errors import SdcInputError, column_positions, option_error
from ..parallel import map_chunks, map_reduce, pair_block_rows, pairwise_reduce, reduce_chunks
from ._attack_kernels import (EQ, GE, GT, ISNULL, LE, LT, NE, NOTNULL, NUMPY_QUERIES,
                              count_indexed, count_kernel as _count_kernel, count_numpy,
                              knn_ids_kernel as _knn_ids_kernel, query_index)
from ._registry import MeasureContext, MetricResult, register
from .content import content_hashes, content_order, content_ranks, row_hashes

log = logging.getLogger(__name__)

__all__ = ["ControlFitError", "success_rate", "residual", "bound_risk", "risk_from_counts", "gower_knn",
           "count_queries", "count_numpy", "singling_out", "linkability", "inference", "ATTACKS",
           "ATTACK_METRICS", "control_correction", "row_hashes"]

#: attack metric -> description
ATTACKS = {
    "so_uni": "singling out with univariate queries",
    "so_multi": "singling out with multivariate queries (so_n_cols columns)",
    "linkability": "linkability of the attacker's two files through the release",
    "inference": "inference of a secret column from the attacker's columns",
}

_NUM_OPS = np.array([EQ, NE, GT, LT, GE, LE])
_CAT_OPS = np.array([EQ, NE])


# -- statistics ---------------------------------------------------------------------------

def success_rate(n_total: float, n_success: float, confidence: float) -> tuple[float, float]:
    """Wilson score estimate of a success rate and its error (anonymeter's ``success_rate``)."""
    # the probit: scipy.stats.norm.ppf is ndtri (bit for bit), without importing
    # scipy.stats (a second or more)
    z = float(ndtri(0.5 * (1.0 + confidence)))
    z2 = z * z
    var = n_success * (n_total - n_success) / n_total
    den = n_total + z2
    return (n_success + 0.5 * z2) / den, (z / den) * np.sqrt(var + 0.25 * z2)


def residual(main: tuple[float, float], control: tuple[float, float]) -> tuple[float, float]:
    """(main - control) / (1 - control) and its propagated error."""
    (a, ea), (c, ec) = main, control
    res = (a - c) / (1.0 - c)
    err = np.sqrt((ea / abs(1.0 - c)) ** 2 + (ec * (a - 1.0) / (1.0 - c) ** 2) ** 2)
    return res, float(err)


def bound_risk(value: float, error: float) -> tuple[float, float, float]:
    """The risk and its interval, bounded to [0, 1]."""
    def b(x: float) -> float:
        return float(min(max(x, 0.0), 1.0))
    return b(value), b(value - error), b(value + error)


def risk_from_counts(n: tuple[int, int, int | None], success: int, baseline: int,
                     control: float | None, confidence: float) -> dict[str, Any]:
    """The figures of one attack from its counts.

    Parameters
    ----------
    n : (n_main, n_baseline, n_control)
        Attacks of each kind (``n_control`` None: no control set).
    success, baseline : int
        Successes of the main and baseline attacks.
    control : float or None
        Successes against the control set (scaled for singling out).
    """
    main = success_rate(n[0], success, confidence)
    base = success_rate(n[1], baseline, confidence)
    if control is None:
        val, err = main
        ctl = None
    else:
        ctl = success_rate(n[2], control, confidence)
        val, err = residual(main, ctl)
    risk, lo, hi = bound_risk(val, err)
    b, _, _ = bound_risk(*base)
    return {"risk": risk, "lo": lo, "hi": hi, "baseline": b,
            "main_rate": float(main[0]), "baseline_rate": float(base[0]),
            "control_rate": None if ctl is None else float(ctl[0]),
            "n_attacks": [int(n[0]), int(n[1]), None if n[2] is None else int(n[2])],
            "successes": int(success), "baseline_successes": int(baseline),
            "control_successes": None if control is None else float(control)}


# -- kernels --------------------------------------------------------------------------------

# -- chunk tasks ------------------------------------------------------------------------

def _block(X: Any, start: int, stop: int, cols: Sequence[int]) -> np.ndarray:
    return np.ascontiguousarray(np.asarray(X[start:stop], dtype=np.float64)[:, list(cols)])


def _cat_lists(*parts: dict[str, Any]) -> dict[str, Any]:
    return {k: [x for p in parts for x in p[k]] for k in parts[0]}


def _chunk_minmax(start: int, stop: int, X: Any, cols: Sequence[int]) -> dict[str, Any]:
    B = _block(X, start, stop, cols)
    with np.errstate(all="ignore"):
        ok = ~np.isnan(B)
        lo = np.where(ok, B, np.inf).min(axis=0) if B.size else np.full(len(cols), np.inf)
        hi = np.where(ok, B, -np.inf).max(axis=0) if B.size else np.full(len(cols), -np.inf)
    return {"lo": lo, "hi": hi}


def _merge_minmax(*parts: dict[str, Any]) -> dict[str, Any]:
    return {"lo": np.min([p["lo"] for p in parts], axis=0),
            "hi": np.max([p["hi"] for p in parts], axis=0)}


def _chunk_rows(start: int, stop: int, X: Any, rows: np.ndarray,
                cols: Sequence[int]) -> dict[str, Any]:
    sel = rows[(rows >= start) & (rows < stop)]
    return {"rows": [sel], "values": [_block(X, start, stop, cols)[sel - start]]}


def _chunk_counts(start: int, stop: int, X: Any, keep: np.ndarray | None,
                  cols: Sequence[int], q: dict[str, np.ndarray], cap: int) -> dict[str, Any]:
    B = _block(X, start, stop, cols)
    k = np.ones(stop - start, np.bool_) if keep is None else keep[start:stop]
    if q["cols"].shape[0] <= NUMPY_QUERIES:
        return {"n": count_numpy(B, k, q["cols"], q["ops"], q["vals"], cap), "cap": cap}
    return {"n": _count_kernel(B, k, q["cols"], q["ops"], q["vals"], cap), "cap": cap}


def _chunk_index(start: int, stop: int, X: Any, keep: np.ndarray | None, cols: Sequence[int]
                 ) -> dict[str, Any]:
    k = np.ones(stop - start, np.bool_) if keep is None else keep[start:stop]
    return {"start": start, "ix": query_index(_block(X, start, stop, cols), k)}


def _index_counts(state: dict[str, Any], q: dict[str, np.ndarray], cap: int) -> dict[str, Any]:
    return {"n": count_indexed(state["ix"], q["cols"], q["ops"], q["vals"], cap), "cap": cap}


def _index_rows(state: dict[str, Any], rows: np.ndarray) -> dict[str, Any]:
    X, a = state["ix"]["X"], state["start"]
    at = np.flatnonzero((rows >= a) & (rows < a + X.shape[0]))
    return {"at": [at], "values": [X[rows[at] - a]]}


def _add_counts(*parts: dict[str, Any]) -> dict[str, Any]:
    n = parts[0]["n"].copy()
    for p in parts[1:]:
        n += p["n"]
    cap = parts[0]["cap"]
    return {"n": np.minimum(n, cap) if cap > 0 else n, "cap": cap}


def _chunk_values(start: int, stop: int, X: Any, keep: np.ndarray,
                  cols: Sequence[int]) -> dict[str, Any]:
    """Distinct values of each column and their counts among the kept (distinct) rows."""
    B = _block(X, start, stop, cols)[keep[start:stop]]
    out = []
    for j in range(B.shape[1]):
        x = B[:, j]
        nan = int(np.isnan(x).sum())
        u, c = np.unique(x[~np.isnan(x)] + 0.0, return_counts=True)
        out.append((u, c.astype(np.int64), nan))
    return {"cols": out}


def _merge_values(*parts: dict[str, Any]) -> dict[str, Any]:
    out = []
    for j in range(len(parts[0]["cols"])):
        u = np.concatenate([p["cols"][j][0] for p in parts])
        c = np.concatenate([p["cols"][j][1] for p in parts])
        uu, inv = np.unique(u, return_inverse=True)
        out.append((uu, np.bincount(inv.reshape(-1), weights=c,
                                    minlength=uu.size).astype(np.int64),
                    sum(p["cols"][j][2] for p in parts)))
    return {"cols": out}


# -- drivers --------------------------------------------------------------------------------

def _chunk_rows_opt(ctx: MeasureContext) -> int:
    return int(ctx.options["chunk_rows"])


def distinct_rows(ctx: MeasureContext, X: Any, n: int, cols: Sequence[int],
                  hashes: bool = False) -> Any:
    """Boolean (n,): the first of each group of equal records (on ``cols``); with
    ``hashes``, also the (n,) hashes of the records on ``cols``."""
    h = content_hashes(ctx.runner, X, n, chunk_rows=_chunk_rows_opt(ctx), cols=cols)
    _, first = np.unique(h, return_index=True)
    keep = np.zeros(n, np.bool_)
    keep[first] = True
    return (keep, h) if hashes else keep


def file_order(ctx: MeasureContext, which: str) -> tuple[np.ndarray, np.ndarray]:
    """The content order of the file ``which`` ("original", "masked" or "control") on all
    its columns, and each row's position in it (cached): the attacks draw their targets
    and guesses in this order, and break nearest-neighbour ties by these positions, so
    that their figures do not depend on the files' row order."""
    def run() -> tuple[np.ndarray, np.ndarray]:
        X = getattr(ctx, which)
        n = {"original": ctx.shape_original, "masked": ctx.shape_masked,
             "control": ctx.shape_control}[which][0]
        order = content_order(content_hashes(ctx.runner, X, n,
                                             chunk_rows=_chunk_rows_opt(ctx)))
        return order, content_ranks(order)
    return ctx.cached(("content_order", which), run)


def take_rows(ctx: MeasureContext, X: Any, n: int, rows: np.ndarray,
              cols: Sequence[int]) -> np.ndarray:
    """``X[rows][:, cols]`` read chunk by chunk (rows in the order given)."""
    srt = np.unique(rows)
    got = map_reduce(ctx.runner, _chunk_rows, _cat_lists, [X], n,
                     chunk_rows=_chunk_rows_opt(ctx), args=(srt, list(cols)))
    vals = np.concatenate(got["values"]) if got["values"] else np.zeros((0, len(cols)))
    return vals[np.searchsorted(srt, rows)]


def count_queries(ctx: MeasureContext, X: Any, n: int, keep: np.ndarray | None,
                  cols: Sequence[int], q: dict[str, np.ndarray], *, cap: int,
                  indexed: bool = False) -> np.ndarray:
    """Records (kept rows) each query matches, over record chunks; ``cap`` > 0: counts
    stop at ``cap`` (enough to tell 0, 1 and more). ``indexed``: each chunk is indexed
    first (its rows sorted by each column, :func:`query_index`) and a query tests only
    the rows of its most selective term (for conjunctions; one-term queries are counted
    from sorted values without it). The same counts either way."""
    if q["cols"].shape[0] == 0:
        return np.zeros(0, np.int64)
    keep_h = None if keep is None else ctx.runner.share(keep)
    if not indexed:
        return map_reduce(ctx.runner, _chunk_counts, _add_counts, [X], n,
                          chunk_rows=_chunk_rows_opt(ctx),
                          args=(keep_h, list(cols), q, cap))["n"]
    chunks = map_chunks(ctx.runner, _chunk_index, [X], n, chunk_rows=_chunk_rows_opt(ctx),
                        args=(keep_h, list(cols)))
    return reduce_chunks(ctx.runner, _index_counts, _add_counts, chunks, args=(q, cap))["n"]


def _knn_block(a0: int, a1: int, b0: int, b1: int, T: np.ndarray, X: Any,
               cols: Sequence[int], inv_range: np.ndarray, is_cat: np.ndarray,
               k: int, salt: int, ids: np.ndarray | None) -> dict[str, np.ndarray]:
    bid = (np.arange(b0, b1, dtype=np.int64) if ids is None
           else np.ascontiguousarray(ids[b0:b1], dtype=np.int64))
    D, Tk, Ix = _knn_ids_kernel(np.ascontiguousarray(T[a0:a1]), _block(X, b0, b1, cols),
                                inv_range, is_cat, k, a0, bid, np.uint64(salt))
    return {"d": D, "t": Tk, "i": Ix}


def _merge_knn(*parts: dict[str, np.ndarray]) -> dict[str, np.ndarray]:
    D = np.concatenate([p["d"] for p in parts], axis=1)
    Tk = np.concatenate([p["t"] for p in parts], axis=1)
    Ix = np.concatenate([p["i"] for p in parts], axis=1)
    k = parts[0]["d"].shape[1]
    o = np.lexsort((Ix, Tk, D), axis=-1)[:, :k]
    return {"d": np.take_along_axis(D, o, 1), "t": np.take_along_axis(Tk, o, 1),
            "i": np.take_along_axis(Ix, o, 1)}


def _finish_knn(a0: int, a1: int, merged: dict[str, np.ndarray], *_: Any) -> dict[str, Any]:
    return {"i": [merged["i"]]}


def gower_knn(ctx: MeasureContext, T: np.ndarray, X: Any, n: int, cols: Sequence[int],
              is_cat: np.ndarray, k: int, *, salt: int = 0,
              ids: np.ndarray | None = None) -> np.ndarray:
    """The ``k`` nearest rows of ``X`` (released, ``n`` records, columns ``cols``) to each
    target row of ``T`` (same columns), by the mixed distance; (len(T), k) row numbers, or
    with ``ids`` (n,) (the rows' positions in content order) their ids.

    Numeric columns are divided by their range over ``X`` and the targets (1 if that is 0).
    Ties are broken by a hash of (``salt``, target, row id): at random, and reproducibly.
    Blocks of targets x released rows are tasks (:func:`pairwise_reduce`).
    """
    mm = map_reduce(ctx.runner, _chunk_minmax, _merge_minmax, [X], n,
                    chunk_rows=_chunk_rows_opt(ctx), args=(list(cols),))
    with np.errstate(all="ignore"):
        lo = np.fmin(mm["lo"], np.nanmin(np.where(np.isnan(T), np.inf, T), axis=0))
        hi = np.fmax(mm["hi"], np.nanmax(np.where(np.isnan(T), -np.inf, T), axis=0))
    rng_ = hi - lo
    rng_ = np.where(np.isfinite(rng_) & (rng_ > 0), rng_, 1.0)
    inv = 1.0 / rng_
    k = min(k, n)
    br = ctx.options.get("block_rows")
    rows_a, rows_b = (tuple(br) if br else
                      pair_block_rows(T.shape[0], n, len(cols),
                                      memory_bytes=int(ctx.options["block_memory"])))
    Th = ctx.runner.share(np.ascontiguousarray(T))
    got = pairwise_reduce(ctx.runner, _knn_block, _merge_knn, _finish_knn, _cat_lists, Th, X,
                          T.shape[0], n, rows_a=rows_a, rows_b=rows_b,
                          args=(list(cols), inv, np.asarray(is_cat, np.bool_), k,
                                int(salt), None if ids is None else ctx.runner.share(
                                    np.asarray(ids, np.int64))))
    return np.concatenate(got["i"], axis=0)


# -- singling out ---------------------------------------------------------------------------

def _pack(queries: list[list[tuple[int, int, float]]], width: int) -> dict[str, np.ndarray]:
    nq = len(queries)
    cols = np.full((nq, width), -1, np.int64)
    ops = np.zeros((nq, width), np.int64)
    vals = np.zeros((nq, width))
    for i, q in enumerate(queries):
        for s, (c, o, v) in enumerate(q):
            cols[i, s], ops[i, s], vals[i, s] = c, o, v
    return {"cols": cols, "ops": ops, "vals": vals}


def _key(q: list[tuple[int, int, float]]) -> tuple:
    return tuple((c, o, 0.0 if o in (ISNULL, NOTNULL) else v) for c, o, v in q)


def _so_model(x: Any, w: float, norm_: float) -> Any:
    x = np.asarray(x, dtype=np.float64)
    return norm_ * (1.0 - (x * w + 1.0) * (1.0 - w) ** x) / (x + 1.0)


def control_correction(matches: np.ndarray, n_control: int, n_ori: int) -> float:
    """anonymeter's size correction of the control's singling-out successes.

    ``matches``: distinct control records each query matches. The expected number of
    queries matching exactly one record of a random subset of s of the ``n_control``
    records is Σ_q c_q C(N - c_q, s - 1) / C(N, s); the model
    norm (1 - (s w + 1)(1 - w)^s) / (s + 1) is fitted to it at anonymeter's ten sizes,
    and the correction is model(n_ori) / model(n_control).
    """
    N = int(n_control)
    sizes = np.linspace(min(1000, N), N, 10).astype(int)
    c = np.asarray(matches, dtype=np.float64)
    c = c[(c >= 1) & (c <= N)]

    def lbinom(a: Any, b: Any) -> Any:
        return gammaln(a + 1) - gammaln(b + 1) - gammaln(a - b + 1)
    exp = []
    for s in sizes:
        ok = N - c >= s - 1
        e = np.zeros_like(c)
        e[ok] = c[ok] * np.exp(lbinom(N - c[ok], s - 1) - lbinom(N, s))
        exp.append(e.sum())
    exp = np.array(exp)
    if not np.any(exp > 0):
        return 1.0
    w0 = 1.0 / sizes.max()
    n0 = 1.0 / _so_model(sizes.max(), w0, 1.0)
    import warnings

    from scipy.optimize import OptimizeWarning, curve_fit   # imported here: it takes a second

    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", OptimizeWarning)
            popt, _ = _fit(curve_fit, sizes.astype(np.float64), exp, (w0, float(n0)))
    except (RuntimeError, ValueError) as exc:  # no convergence (max evaluations), or no fit
        raise ControlFitError(str(exc)) from None
    den = float(_so_model(N, *popt))
    out = float(_so_model(n_ori, *popt)) / den if den > 0 else float("nan")
    if not (np.isfinite(out) and out > 0):
        raise ControlFitError("the fitted model gives no positive scale")
    return out


class ControlFitError(Exception):
    """The singling-out model's fit for the control scale did not converge."""


def _fit(curve_fit: Any, x: np.ndarray, y: np.ndarray, p0: tuple[float, float]) -> Any:
    """``curve_fit`` of the singling-out model (a seam: tests force a failure here)."""
    return curve_fit(_so_model, x, y, bounds=(0, (1, np.inf)), p0=p0)


def _univariate(vals: list, is_cat: np.ndarray, n_attacks: int, rng: np.random.Generator
                ) -> list[list[tuple[int, int, float]]]:
    """anonymeter's univariate queries: every candidate (a single missing value, the
    minimum and maximum of a numeric column, a value held by one record), in random
    order, the first ``n_attacks`` that single out in the release."""
    cols, ops, vs, ok = [], [], [], []
    for j, (u, cnt, nan) in enumerate(vals):
        if nan == 1:
            cols.append([j]); ops.append([ISNULL]); vs.append([0.0]); ok.append([True])
        if not is_cat[j] and u.size:
            cols.append([j, j]); ops.append([LE, GE]); vs.append([u[0], u[-1]])
            # min / max single out when the extreme value is held by one record
            ok.append([cnt[0] == 1, cnt[-1] == 1])
        rare = u[cnt == 1]
        cols.append(np.full(rare.size, j)); ops.append(np.full(rare.size, EQ))
        vs.append(rare); ok.append(np.ones(rare.size, bool))
    cols_a = np.concatenate([np.asarray(x, np.int64) for x in cols]) if cols else \
        np.zeros(0, np.int64)
    ops_a = np.concatenate([np.asarray(x, np.int64) for x in ops]) if ops else cols_a
    vs_a = np.concatenate([np.asarray(x, np.float64) for x in vs]) if vs else \
        np.zeros(0)
    ok_a = np.concatenate([np.asarray(x, bool) for x in ok]) if ok else np.zeros(0, bool)
    order = rng.permutation(cols_a.size)
    take = order[ok_a[order]][:n_attacks]
    return [[(int(cols_a[i]), int(ops_a[i]), float(vs_a[i]))] for i in take]


def _multivariate(ctx: MeasureContext, S: Any, n_s: int, keep: np.ndarray, h: np.ndarray,
                  cols: list[int],
                  is_cat: np.ndarray, vals: list, n_attacks: int, n_cols: int,
                  max_attempts: int, rng: np.random.Generator) -> tuple[list, int]:
    """anonymeter's multivariate queries: a random distinct record's values in ``n_cols``
    random columns (``==`` categorical, ``>=`` above the median, else ``<=``, ``is
    missing``), kept when they single out in the release and were not kept before; batches
    of candidates until ``n_attacks`` are found or ``max_attempts`` were tried."""
    med = np.full(len(cols), np.nan)
    for j, (u, cnt, _) in enumerate(vals):
        if u.size:
            cs = np.cumsum(cnt)
            tot = int(cs[-1])
            lo = u[np.searchsorted(cs, (tot - 1) // 2 + 1)]
            hi = u[np.searchsorted(cs, tot // 2 + 1)]
            med[j] = 0.5 * (lo + hi)
    kept = np.flatnonzero(keep)
    kept = kept[np.argsort(h[kept], kind="stable")]     # distinct records in content order
    m = len(cols)
    n_cols = min(n_cols, m)
    out: list = []
    seen: set = set()
    attempts = 0
    batch = 1000
    # each chunk of the release indexed once (rows sorted by each column): a query's count
    # reads only the rows of its most selective term
    chunks = map_chunks(ctx.runner, _chunk_index, [S], n_s, chunk_rows=_chunk_rows_opt(ctx),
                        args=(ctx.runner.share(keep), cols))
    while len(out) < n_attacks and attempts < max_attempts:
        b = min(batch, max_attempts - attempts)
        pick = kept[rng.integers(0, kept.size, size=b)]
        got = reduce_chunks(ctx.runner, _index_rows, _cat_lists, chunks, args=(pick,))
        recs = np.empty((b, m))
        recs[np.concatenate(got["at"])] = np.concatenate(got["values"])
        chosen = np.sort(np.argsort(rng.random((b, m)), axis=1)[:, :n_cols], axis=1)
        v = np.take_along_axis(recs, chosen, 1) + 0.0
        nan = np.isnan(v)
        with np.errstate(invalid="ignore"):
            ops = np.where(nan, ISNULL, np.where(is_cat[chosen], EQ,
                                                 np.where(v > med[chosen], GE, LE)))
        v = np.where(nan, 0.0, v)
        qd = {"cols": chosen, "ops": ops, "vals": v}
        # most candidates match two records in the first chunk: only the others are
        # counted in the other chunks (the same counts, a fraction of the work)
        first = ctx.runner.call(_index_counts, chunks[0], qd, 2)["n"]
        alive = first <= 1
        cnt = np.minimum(first, 2)
        if alive.any() and len(chunks) > 1:
            rest = reduce_chunks(ctx.runner, _index_counts, _add_counts, chunks[1:],
                                 args=({k: x[alive] for k, x in qd.items()}, 2))["n"]
            cnt[alive] = np.minimum(first[alive] + rest, 2)
        for i in np.flatnonzero(cnt == 1):
            q = [(int(c), int(o), float(x)) for c, o, x in zip(chosen[i], ops[i], v[i])]
            key = _key(q)
            if key in seen:
                continue
            seen.add(key)
            out.append(q)
            if len(out) >= n_attacks:
                break
        attempts += b
        if len(out) < n_attacks:
            batch = min(batch * 2, 65_536)
    return out, attempts


def _random_queries(vals: list, is_cat: np.ndarray, n_queries: int, n_cols: int,
                    rng: np.random.Generator) -> list:
    m = len(vals)
    out = []
    for _ in range(n_queries):
        chosen = np.sort(rng.choice(m, size=min(n_cols, m), replace=False))
        q = []
        for j in chosen:
            u, _, nan = vals[j]
            k = u.size + (1 if nan else 0)
            pick = int(rng.integers(0, k))
            op = int(rng.choice(_CAT_OPS if is_cat[j] else _NUM_OPS))
            if pick == u.size:
                q.append((int(j), ISNULL if op == EQ else NOTNULL, 0.0))
            else:
                q.append((int(j), op, float(u[pick])))
        out.append(q)
    return out


def singling_out(ctx: MeasureContext, mode: str) -> dict[str, Any]:
    """The singling-out attack (``mode`` "univariate" or "multivariate"); its figures."""
    name = "so_uni" if mode == "univariate" else "so_multi"
    cols, is_cat = _attack_columns(ctx, name)
    mcols = column_positions([ctx.columns[j] for j in cols], ctx.masked_columns,
                             what="attack column", where="the masked file")
    o = ctx.options
    n_attacks = int(o["attack_n"])
    n_cols = 1 if mode == "univariate" else int(o["so_n_cols"])
    if n_cols > len(cols):
        raise SdcInputError(
            f"so_n_cols is {n_cols}, but {name} has only {len(cols)} attack column(s) "
            f"({[ctx.columns[j] for j in cols]}): a query cannot combine more columns than "
            f"there are; choose so_n_cols <= {len(cols)} (or name more attack_columns)")
    rng = ctx.rng(name)
    n_o, n_s = ctx.shape_original[0], ctx.shape_masked[0]
    keep_s, h_s = distinct_rows(ctx, ctx.masked, n_s, mcols, hashes=True)
    keep_o = distinct_rows(ctx, ctx.original, n_o, cols)
    attempts = None
    vals = map_reduce(ctx.runner, _chunk_values, _merge_values, [ctx.masked], n_s,
                      chunk_rows=_chunk_rows_opt(ctx),
                      args=(ctx.runner.share(keep_s), mcols))["cols"]
    if mode == "univariate":
        queries = _univariate(vals, is_cat, n_attacks, rng)
    else:
        queries, attempts = _multivariate(ctx, ctx.masked, n_s, keep_s, h_s, mcols, is_cat, vals,
                                          n_attacks, n_cols, int(o["so_max_attempts"]), rng)
    width = max(n_cols, 1)
    q = _pack(queries, width)
    multi = mode != "univariate"
    success = int((count_queries(ctx, ctx.original, n_o, keep_o, cols, q, cap=2,
                                 indexed=multi) == 1).sum())
    base_q = _pack(_random_queries(vals, is_cat, n_attacks, n_cols, rng), width)
    baseline = int((count_queries(ctx, ctx.original, n_o, keep_o, cols, base_q, cap=2,
                                  indexed=multi) == 1).sum())
    control = None
    info: dict[str, Any] = {"queries": len(queries), "distinct_original": int(keep_o.sum()),
                            "distinct_released": int(keep_s.sum())}
    if attempts is not None:
        info["attempts"] = attempts
    if ctx.control is not None:
        n_c = ctx.shape_control[0]
        keep_c = distinct_rows(ctx, ctx.control, n_c, cols)
        matches = count_queries(ctx, ctx.control, n_c, keep_c, cols, q, cap=0, indexed=multi)
        control = float((matches == 1).sum())
        nd_c, nd_o = int(keep_c.sum()), int(keep_o.sum())
        how = o["so_control_scale"]
        if nd_c == nd_o or how == "none":
            corr = 1.0
        elif how == "sizes":
            corr = (nd_c + 1.0) / (nd_o + 1.0)
        else:
            try:
                corr = control_correction(matches, nd_c, nd_o)
            except ControlFitError:
                # the fit did not converge: the stated scale of so_control_scale "sizes",
                # flagged (never an abort: the other figures stand)
                corr = (nd_c + 1.0) / (nd_o + 1.0)
                info.update(flag=1, control_scale="sizes: the singling-out model's fit did "
                            "not converge")
                log.warning("%s: the control-scale fit did not converge; the control's "
                            "successes are scaled by (n_control + 1) / (n_original + 1) "
                            "instead (flagged)", name)
        info.update(distinct_control=nd_c, control_correction=corr,
                    control_unscaled=int(control))
        control *= corr
    res = risk_from_counts((n_attacks, n_attacks, n_attacks if control is not None else None),
                           success, baseline, control, float(o["attack_confidence"]))
    res.update(info)
    return res


# -- linkability and inference ---------------------------------------------------------------

def _targets(ctx: MeasureContext, which: str, n: int, n_att: int, cols: Sequence[int],
             rng: np.random.Generator) -> np.ndarray:
    """``n_att`` records of the file ``which`` drawn at random in content order."""
    rows = file_order(ctx, which)[0][rng.choice(n, size=n_att, replace=False)]
    return take_rows(ctx, getattr(ctx, which), n, rows, cols)


def linkability(ctx: MeasureContext) -> dict[str, Any]:
    """The linkability attack and its figures."""
    name = "linkability"
    cols, is_cat = _attack_columns(ctx, name)
    names = [ctx.columns[j] for j in cols]
    aux = ctx.options["link_aux"]
    if aux is None:
        if len(names) < 2:
            raise SdcInputError("linkability splits the attacker's columns in two files and "
                                f"has one column ({names}); name more attack_columns")
        h = len(names) // 2
        aux = [names[:h], names[h:]]
    aux = [list(a) if not isinstance(a, str) else [a] for a in aux]
    pos = [column_positions(a, ctx.columns, what="link_aux column", where="the original file")
           for a in aux]
    mpos = [column_positions(a, ctx.masked_columns, what="link_aux column",
                             where="the masked file") for a in aux]
    cat = set(ctx.categorical)
    iscat = [np.array([a in cat for a in part], np.bool_) for part in aux]
    o = ctx.options
    k = int(o["link_neighbors"])
    n_o, n_s = ctx.shape_original[0], ctx.shape_masked[0]
    rng = ctx.rng(name)
    n_att = min(int(o["attack_n"]), n_o)
    k_eff = min(k, n_s)

    ids = file_order(ctx, "masked")[1]

    def attack(X: str, n: int, n_att_: int) -> int:
        allpos = sorted(set(pos[0]) | set(pos[1]))
        T = _targets(ctx, X, n, n_att_, allpos, rng)
        where = {p: i for i, p in enumerate(allpos)}
        idx = [gower_knn(ctx, T[:, [where[p] for p in pos[s]]], ctx.masked, n_s, mpos[s],
                         iscat[s], k_eff, salt=int(rng.integers(2**63)), ids=ids)
               for s in (0, 1)]
        return _links(idx[0], idx[1])
    base_rows = [np.array([rng.choice(n_s, size=k_eff, replace=False) for _ in range(n_att)])
                 .reshape(n_att, k_eff) for _ in (0, 1)]
    baseline = _links(*base_rows)
    success = attack("original", n_o, n_att)
    control = None
    n_c = None
    if ctx.control is not None:
        n_c = min(int(o["attack_n"]), ctx.shape_control[0])
        control = attack("control", ctx.shape_control[0], n_c)
    res = risk_from_counts((n_att, n_att, n_c), success, baseline, control,
                           float(o["attack_confidence"]))
    res.update(aux=aux, neighbors=k_eff)
    return res


def _links(a: np.ndarray, b: np.ndarray) -> int:
    """Targets whose two neighbour sets share a record."""
    return int(sum(bool(set(x.tolist()) & set(y.tolist())) for x, y in zip(a, b)))


def _guess_right(guess: np.ndarray, secret: np.ndarray, numeric: bool, tol: float
                 ) -> np.ndarray:
    both = np.isnan(guess) & np.isnan(secret)
    with np.errstate(all="ignore"):
        if numeric:
            ok = np.abs(guess - secret) <= tol * np.abs(guess + 1e-12)
        else:
            ok = guess == secret
    return both | ok


def inference(ctx: MeasureContext) -> dict[str, Any]:
    """The inference attack and its figures."""
    name = "inference"
    cols, _ = _attack_columns(ctx, name)
    names = [ctx.columns[j] for j in cols]
    o = ctx.options
    secret = o["infer_secret"]
    if secret is None:
        conf = [c for c in ctx.confidential if c in ctx.columns]
        if not conf:
            raise SdcInputError(
                "inference guesses a secret column, and none is named; give infer_secret "
                "(an option) or a confidential column (the dataset's 'confidential' role)")
        secret = conf[0]
    spos = column_positions([secret], ctx.columns, what="infer_secret column",
                            where="the original file")[0]
    smpos = column_positions([secret], ctx.masked_columns, what="infer_secret column",
                             where="the masked file")[0]
    aux = o["infer_aux"]
    aux = [c for c in names if c != secret] if aux is None else (
        [aux] if isinstance(aux, str) else list(aux))
    if secret in aux:
        raise SdcInputError(f"the secret column {secret!r} is also among the inference "
                            "attacker's columns (infer_aux); leave it out of them")
    if not aux:
        raise SdcInputError("inference needs at least one column the attacker knows besides "
                            f"the secret {secret!r}; name infer_aux or attack_columns")
    apos = column_positions(aux, ctx.columns, what="infer_aux column", where="the original file")
    ampos = column_positions(aux, ctx.masked_columns, what="infer_aux column",
                             where="the masked file")
    iscat = np.array([c in set(ctx.categorical) for c in aux], np.bool_)
    numeric = secret not in set(ctx.categorical)
    tol = float(o["infer_tolerance"])
    n_o, n_s = ctx.shape_original[0], ctx.shape_masked[0]
    rng = ctx.rng(name)
    n_att = min(int(o["attack_n"]), n_o)
    n_base = min(n_s, n_att)
    order_m, ids = file_order(ctx, "masked")
    T = _targets(ctx, "original", n_o, n_base, [spos], rng)[:, 0]
    g = take_rows(ctx, ctx.masked, n_s, order_m[rng.choice(n_s, size=n_base, replace=False)],
                  [smpos])[:, 0]
    baseline = int(_guess_right(g, T, numeric, tol).sum())

    def attack(X: str, n: int, n_att_: int) -> int:
        T = _targets(ctx, X, n, n_att_, apos + [spos], rng)
        nn = gower_knn(ctx, T[:, :-1], ctx.masked, n_s, ampos, iscat, 1,
                       salt=int(rng.integers(2**63)), ids=ids)[:, 0]
        guess = take_rows(ctx, ctx.masked, n_s, order_m[nn], [smpos])[:, 0]
        return int(_guess_right(guess, T[:, -1], numeric, tol).sum())
    success = attack("original", n_o, n_att)
    control = n_c = None
    if ctx.control is not None:
        n_c = min(int(o["attack_n"]), ctx.shape_control[0])
        control = attack("control", ctx.shape_control[0], n_c)
    res = risk_from_counts((n_att, n_base, n_c), success, baseline, control,
                           float(o["attack_confidence"]))
    res.update(secret=secret, aux=aux, regression=numeric)
    return res


# -- the metrics ----------------------------------------------------------------------------

def _attack_columns(ctx: MeasureContext, name: str) -> tuple[list[int], np.ndarray]:
    """Positions (original file) of the attacker's columns and whether each is categorical."""
    given = ctx.options["attack_columns"]
    if given is None:
        hh = getattr(ctx, "household", None)
        names = [c for c in ctx.columns if c not in (ctx.weight, hh)
                 and c in set(ctx.masked_columns)]
    else:
        names = [given] if isinstance(given, str) else list(given)
    if not names:
        raise SdcInputError(f"{name} needs at least one column shared by both files besides "
                            "the weight; name attack_columns")
    pos = column_positions(names, ctx.columns, what="attack column", where="the original file")
    column_positions(names, ctx.masked_columns, what="attack column", where="the masked file")
    cat = set(ctx.categorical)
    return pos, np.array([c in cat for c in names], np.bool_)


def _figures(ctx: MeasureContext, attack: str) -> dict[str, Any]:
    o = ctx.options
    if ctx.control is not None and ctx.shape_control[0] < 1:
        raise option_error("control", "a share leaving at least one control record", 0)
    key = ("attack", attack) + tuple(
        (k, repr(o[k])) for k in _OPTIONS)

    def compute() -> dict[str, Any]:
        if attack == "so_uni":
            return singling_out(ctx, "univariate")
        if attack == "so_multi":
            return singling_out(ctx, "multivariate")
        if attack == "linkability":
            return linkability(ctx)
        return inference(ctx)
    return ctx.cached(key, compute)


_OPTIONS = ("chunk_rows", "block_memory", "block_rows", "attack_n", "attack_confidence",
            "attack_columns", "so_n_cols", "so_max_attempts", "so_control_scale", "link_aux",
            "link_neighbors",
            "infer_secret", "infer_aux", "infer_tolerance")
_REF = "Giomi et al. (2023), anonymeter; Article 29 Working Party opinion 05/2014"


def _register(attack: str, desc: str) -> None:
    def info(f: dict[str, Any]) -> dict[str, Any]:
        return {k: v for k, v in f.items() if k not in ("risk",)}

    for suffix, field_, part, what in (
            ("", "risk", "", "risk (residual over the control set)"),
            ("_lo", "lo", "lo", "lower bound of the risk's interval"),
            ("_hi", "hi", "hi", "upper bound of the risk's interval"),
            ("_base", "baseline", "base", "risk of the random-guess baseline")):
        def func(ctx: MeasureContext, field_: str = field_, name: str = attack + suffix
                 ) -> MetricResult:
            f = _figures(ctx, attack)
            return MetricResult(float(f[field_]), flag=int(f.get("flag", 0)), info=info(f))
        register(attack + suffix, kind="risk", same_shape=False, by_name=True,
                 random=True, options=_OPTIONS, unit="share of attacks (0 to 1)",
                 reference=_REF, description=f"{desc}: {what}",
                 part_of=attack if part else "", part=part)(func)


for _a, _d in ATTACKS.items():
    _register(_a, _d)

#: every metric of the attacks (asked for by name: they are not among the CLI's defaults)
ATTACK_METRICS = tuple(a + s for a in ATTACKS for s in ("", "_lo", "_hi", "_base"))
