"""What the three attacks share (:mod:`.singling_out`, :mod:`.linkability`,
:mod:`.inference`): the Wilson score statistics of their figures, the chunk tasks
and drivers that read records, the nearest-neighbour search, the attacker's columns
and the registration of each attack's four metrics.

Distance (anonymeter's Gower-like distance): the sum over columns of |x - y| / range
for numeric columns (range over the released file and the targets), of 1 for
unequal categories; 1 where both are missing; a pair with one value missing in a
numeric column is farther than any complete pair (anonymeter's NaN distance sorts
last). Ties are broken at random, reproducibly, by a hash of (salt, target, row).

Work on the cluster: nearest-neighbour searches run as blocks of targets x released rows
(:func:`pairwise_reduce`), each block keeping its k nearest by (distance, tie key): any
chunking and worker count gives the same figures, bit for bit.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

import numpy as np

from ....errors import column_positions, count_error, option_error
from ....parallel import map_reduce, pair_block_rows, pairwise_reduce
from .kernels import knn_ids_kernel as _knn_ids_kernel
from ..._registry import MeasureContext, MetricResult, register
from ...content import content_hashes, content_order, content_ranks

__all__ = ["ATTACKS", "ATTACK_METRICS", "success_rate", "residual", "bound_risk",
           "risk_from_counts", "read_block", "concat_lists", "chunk_rows_option", "file_order",
           "take_rows", "gower_knn", "attack_columns", "attack_targets", "register_attack"]

#: attack metric -> description
ATTACKS = {
    "so_uni": "singling out with univariate queries",
    "so_multi": "singling out with multivariate queries (so_n_cols columns)",
    "linkability": "linkability of the attacker's two files through the release",
    "inference": "inference of a secret column from the attacker's columns",
}

#: every metric of the attacks (asked for by name: they are not among the CLI's defaults)
ATTACK_METRICS = tuple(a + s for a in ATTACKS for s in ("", "_lo", "_hi", "_base"))


# -- statistics ---------------------------------------------------------------------------

def success_rate(n_total: float, n_success: float, confidence: float) -> tuple[float, float]:
    """Wilson score estimate of a success rate and its error (anonymeter's ``success_rate``)."""
    # the probit: scipy.stats.norm.ppf is ndtri (bit for bit), without importing
    # scipy.stats (a second or more)
    from scipy.special import ndtri   # on first use: listing the metrics stays light
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


# -- chunk tasks ------------------------------------------------------------------------

def read_block(X: Any, start: int, stop: int, cols: Sequence[int]) -> np.ndarray:
    return np.ascontiguousarray(np.asarray(X[start:stop], dtype=np.float64)[:, list(cols)])


def concat_lists(*parts: dict[str, Any]) -> dict[str, Any]:
    return {k: [x for p in parts for x in p[k]] for k in parts[0]}


def _chunk_minmax(start: int, stop: int, X: Any, cols: Sequence[int]) -> dict[str, Any]:
    B = read_block(X, start, stop, cols)
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
    return {"rows": [sel], "values": [read_block(X, start, stop, cols)[sel - start]]}


# -- drivers --------------------------------------------------------------------------------

def chunk_rows_option(ctx: MeasureContext) -> int:
    return int(ctx.options["chunk_rows"])


def file_order(ctx: MeasureContext, which: str) -> tuple[np.ndarray, np.ndarray]:
    """The content order of the file ``which`` ("original", "masked" or "control") on all
    its columns, and each row's position in it (cached): the attacks draw their targets
    and guesses in this order, and break nearest-neighbour ties by these positions, so
    that their figures do not depend on the files' row order. The masked file's columns
    are read in the original's order (by name), so neither do they depend on the order of
    its columns."""
    def run() -> tuple[np.ndarray, np.ndarray]:
        X = getattr(ctx, which)
        n = {"original": ctx.shape_original, "masked": ctx.shape_masked,
             "control": ctx.shape_control}[which][0]
        cols = None
        mc = list(ctx.masked_columns)
        if which == "masked" and mc != list(ctx.columns):
            # the masked file's columns in the original's order (by name), then its others
            # by name: its content order does not follow how its columns are laid out
            own = set(mc)
            cols = [mc.index(c) for c in ctx.columns if c in own] + \
                [mc.index(c) for c in sorted(own - set(ctx.columns))]
        order = content_order(content_hashes(ctx.runner, X, n, cols=cols,
                                             chunk_rows=chunk_rows_option(ctx)))
        return order, content_ranks(order)
    return ctx.cached(("content_order", which), run)


def take_rows(ctx: MeasureContext, X: Any, n: int, rows: np.ndarray,
              cols: Sequence[int]) -> np.ndarray:
    """``X[rows][:, cols]`` read chunk by chunk (rows in the order given)."""
    srt = np.unique(rows)
    got = map_reduce(ctx.runner, _chunk_rows, concat_lists, [X], n,
                     chunk_rows=chunk_rows_option(ctx), args=(srt, list(cols)))
    vals = np.concatenate(got["values"]) if got["values"] else np.zeros((0, len(cols)))
    return vals[np.searchsorted(srt, rows)]


def _knn_block(a0: int, a1: int, b0: int, b1: int, T: np.ndarray, X: Any,
               cols: Sequence[int], inv_range: np.ndarray, is_cat: np.ndarray,
               k: int, salt: int, ids: np.ndarray | None) -> dict[str, np.ndarray]:
    bid = (np.arange(b0, b1, dtype=np.int64) if ids is None
           else np.ascontiguousarray(ids[b0:b1], dtype=np.int64))
    D, Tk, Ix = _knn_ids_kernel(np.ascontiguousarray(T[a0:a1]), read_block(X, b0, b1, cols),
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
                    chunk_rows=chunk_rows_option(ctx), args=(list(cols),))
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
    got = pairwise_reduce(ctx.runner, _knn_block, _merge_knn, _finish_knn, concat_lists, Th, X,
                          T.shape[0], n, rows_a=rows_a, rows_b=rows_b,
                          args=(list(cols), inv, np.asarray(is_cat, np.bool_), k,
                                int(salt), None if ids is None else ctx.runner.share(
                                    np.asarray(ids, np.int64))))
    return np.concatenate(got["i"], axis=0)


def attack_targets(ctx: MeasureContext, which: str, n: int, n_att: int, cols: Sequence[int],
             rng: np.random.Generator) -> np.ndarray:
    """``n_att`` records of the file ``which`` drawn at random in content order."""
    rows = file_order(ctx, which)[0][rng.choice(n, size=n_att, replace=False)]
    return take_rows(ctx, getattr(ctx, which), n, rows, cols)


# -- the metrics ----------------------------------------------------------------------------

def attack_columns(ctx: MeasureContext, name: str) -> tuple[list[int], np.ndarray]:
    """Positions (original file) of the attacker's columns and whether each is categorical."""
    given = ctx.options["attack_columns"]
    if given is None:
        hh = getattr(ctx, "household", None)
        names = [c for c in ctx.columns if c not in (ctx.weight, hh)
                 and c in set(ctx.masked_columns)]
    else:
        names = [given] if isinstance(given, str) else list(given)
    if not names:
        raise count_error(f"The attack columns of {name}", "at least 1",
                          "column shared by both files besides the weight", 0,
                          "name attack_columns")
    pos = column_positions(names, ctx.columns, what="attack column", where="the original file")
    column_positions(names, ctx.masked_columns, what="attack column", where="the masked file")
    cat = set(ctx.categorical)
    return pos, np.array([c in cat for c in names], np.bool_)


_OPTIONS = ("chunk_rows", "block_memory", "block_rows", "attack_n", "attack_confidence",
            "attack_columns", "so_n_cols", "so_max_attempts", "so_control_scale", "link_aux",
            "link_neighbors",
            "infer_secret", "infer_aux", "infer_tolerance")
_REF = "Giomi et al. (2023), anonymeter; Article 29 Working Party opinion 05/2014"


def _figures(ctx: MeasureContext, attack: str,
             compute: Callable[[MeasureContext], dict[str, Any]]) -> dict[str, Any]:
    o = ctx.options
    if ctx.control is not None and ctx.shape_control[0] < 1:
        raise option_error("control", "a share leaving at least one control record", 0)
    key = ("attack", attack) + tuple(
        (k, repr(o[k])) for k in _OPTIONS)
    return ctx.cached(key, lambda: compute(ctx))


def register_attack(attack: str, compute: Callable[[MeasureContext], dict[str, Any]],
                    **declared: Any) -> None:
    """Register the four metrics of ``attack`` (a key of :data:`ATTACKS`), whose figures
    ``compute(ctx)`` gives (computed once per context and options); ``declared`` are further
    keywords of :func:`~sdcdist.metrics.register` (``needs``, ``needs_unless``)."""
    desc = ATTACKS[attack]

    def info(f: dict[str, Any]) -> dict[str, Any]:
        return {k: v for k, v in f.items() if k not in ("risk",)}

    for suffix, field_, part, what in (
            ("", "risk", "", "risk (residual over the control set)"),
            ("_lo", "lo", "lo", "lower bound of the risk's interval"),
            ("_hi", "hi", "hi", "upper bound of the risk's interval"),
            ("_base", "baseline", "base", "risk of the random-guess baseline")):
        def func(ctx: MeasureContext, field_: str = field_, name: str = attack + suffix
                 ) -> MetricResult:
            f = _figures(ctx, attack, compute)
            return MetricResult(float(f[field_]), flag=int(f.get("flag", 0)), info=info(f))
        register(attack + suffix, kind="risk", same_shape=False, by_name=True,
                 random=True, options=_OPTIONS, unit="share of attacks (0 to 1)",
                 reference=_REF, description=f"{desc}: {what}",
                 part_of=attack if part else "", part=part,
                 reads=("household",), **declared)(func)
