"""Singling out (see :mod:`sdcdist.metrics.risk.attacks`): metrics ``so_uni`` and ``so_multi``.

Singling out: queries (conjunctions of ``col op value``) built from the release
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

Work on the cluster: counts of queries over record chunks (exact integer sums; each
chunk is indexed once, its rows sorted by each column, and a query tests only the rows
of its most selective term: :func:`map_chunks`, :func:`reduce_chunks`). Singling out
works on distinct records (a record's 64-bit hash of its values; the first of equal
records is kept).
"""

from __future__ import annotations

import logging
from collections.abc import Sequence
from typing import Any

import numpy as np

from ....errors import column_positions, option_error
from ....parallel import map_chunks, map_reduce, reduce_chunks
from .kernels import (EQ, GE, GT, ISNULL, LE, LT, NE, NOTNULL, NUMPY_QUERIES,
                               count_indexed,
                               count_kernel as _count_kernel, count_numpy, query_index)
from ..._registry import MeasureContext
from ...content import content_hashes
from .common import (attack_columns, chunk_rows_option, concat_lists, read_block,
                     register_attack, risk_from_counts)

log = logging.getLogger(__name__)

__all__ = ["singling_out", "control_correction", "ControlFitError", "count_queries",
           "distinct_rows"]

_NUM_OPS = np.array([EQ, NE, GT, LT, GE, LE])
_CAT_OPS = np.array([EQ, NE])


# -- chunk tasks ------------------------------------------------------------------------

def _chunk_counts(start: int, stop: int, X: Any, keep: np.ndarray | None,
                  cols: Sequence[int], q: dict[str, np.ndarray], cap: int) -> dict[str, Any]:
    B = read_block(X, start, stop, cols)
    k = np.ones(stop - start, np.bool_) if keep is None else keep[start:stop]
    if q["cols"].shape[0] <= NUMPY_QUERIES:
        return {"n": count_numpy(B, k, q["cols"], q["ops"], q["vals"], cap), "cap": cap}
    return {"n": _count_kernel(B, k, q["cols"], q["ops"], q["vals"], cap), "cap": cap}


def _chunk_index(start: int, stop: int, X: Any, keep: np.ndarray | None, cols: Sequence[int]
                 ) -> dict[str, Any]:
    k = np.ones(stop - start, np.bool_) if keep is None else keep[start:stop]
    return {"start": start, "ix": query_index(read_block(X, start, stop, cols), k)}


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
    B = read_block(X, start, stop, cols)[keep[start:stop]]
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

def distinct_rows(ctx: MeasureContext, X: Any, n: int, cols: Sequence[int],
                  hashes: bool = False) -> Any:
    """Boolean (n,): the first of each group of equal records (on ``cols``); with
    ``hashes``, also the (n,) hashes of the records on ``cols``."""
    h = content_hashes(ctx.runner, X, n, chunk_rows=chunk_rows_option(ctx), cols=cols)
    _, first = np.unique(h, return_index=True)
    keep = np.zeros(n, np.bool_)
    keep[first] = True
    return (keep, h) if hashes else keep


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
                          chunk_rows=chunk_rows_option(ctx),
                          args=(keep_h, list(cols), q, cap))["n"]
    chunks = map_chunks(ctx.runner, _chunk_index, [X], n, chunk_rows=chunk_rows_option(ctx),
                        args=(keep_h, list(cols)))
    return reduce_chunks(ctx.runner, _index_counts, _add_counts, chunks, args=(q, cap))["n"]


# -- the attack -----------------------------------------------------------------------------

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

    from scipy.special import gammaln   # on first use: listing the metrics stays light

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
    chunks = map_chunks(ctx.runner, _chunk_index, [S], n_s, chunk_rows=chunk_rows_option(ctx),
                        args=(ctx.runner.share(keep), cols))
    while len(out) < n_attacks and attempts < max_attempts:
        b = min(batch, max_attempts - attempts)
        pick = kept[rng.integers(0, kept.size, size=b)]
        got = reduce_chunks(ctx.runner, _index_rows, concat_lists, chunks, args=(pick,))
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
    cols, is_cat = attack_columns(ctx, name)
    mcols = column_positions([ctx.columns[j] for j in cols], ctx.masked_columns,
                             what="attack column", where="the masked file")
    o = ctx.options
    n_attacks = int(o["attack_n"])
    n_cols = 1 if mode == "univariate" else int(o["so_n_cols"])
    if n_cols > len(cols):
        raise option_error("so_n_cols", f"at most {len(cols)}, the attack columns of {name} "
                           f"({[ctx.columns[j] for j in cols]}; name more attack_columns to "
                           "combine more)", n_cols)
    rng = ctx.rng(name)
    n_o, n_s = ctx.shape_original[0], ctx.shape_masked[0]
    keep_s, h_s = distinct_rows(ctx, ctx.masked, n_s, mcols, hashes=True)
    keep_o = distinct_rows(ctx, ctx.original, n_o, cols)
    attempts = None
    vals = map_reduce(ctx.runner, _chunk_values, _merge_values, [ctx.masked], n_s,
                      chunk_rows=chunk_rows_option(ctx),
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


register_attack("so_uni", lambda ctx: singling_out(ctx, "univariate"))
register_attack("so_multi", lambda ctx: singling_out(ctx, "multivariate"))
