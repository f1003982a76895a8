"""Propensity-score utility of [DRS]: how well a logistic regression tells the masked file
from the original (``PS``, ``PS2``; earth mover's distances: :mod:`.emd`).

``PS``/``PS2`` fit an unpenalised logistic regression of "is masked" on the
z-scored columns of the stacked files by Newton-Raphson, where every
iteration is one reduction over record chunks (gradient, Hessian and
log-likelihood add up over chunks), so the fit is the exact maximum-likelihood
fit on files of any size. The chunks are fixed blocks of :data:`PS_BLOCK_ROWS`
records whatever the ``chunk_rows`` option, and every sum is a fixed-point sum:
each term is rounded to a grid set by the largest |z| of each column (a power of
two, 2**-88 of the terms' bound with two int64 parts) and the integers add up
exactly (a numba loop, not BLAS), so the fitted bits depend only on the data:
not on the records' order, the worker count, the scheduling or the BLAS thread
pool. A fit whose hyperplane classifies every record
correctly proves complete separation: the likelihood has no maximum and its
supremum is approached as every propensity score tends to its label, so U
is its maximum 0.25, flagged (flag 1, ``info["separation"] = "complete"``).
"""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import Any

import numba
import numpy as np

from ...parallel import map_reduce, one_blas_thread
from .._registry import MeasureContext, MetricResult, register
from ..exactsum import SCALE, to_fraction
from .infoloss import il_sd, record_stats

__all__ = ["ps_features", "logistic_chunk", "propensity_utility", "newton_step"]

#: Newton iterations before a fit is reported as not converged (flag 1)
MAX_NEWTON = 100

#: ``info`` of a saturated fit (flag 1): the files are completely separated
_SEPARATED = {"separation": "complete",
              "why": "the logistic fit separates the files completely (no maximum-likelihood "
                     "estimate): U is its supremum 0.25"}


def ps_features(z: np.ndarray, degree: int) -> np.ndarray:
    """Design matrix: intercept, z (degree 1); plus squares and pairwise products (2)."""
    cols = [np.ones((z.shape[0], 1)), z]
    if degree == 2:
        iu = np.triu_indices(z.shape[1])
        cols.append(z[:, iu[0]] * z[:, iu[1]])
    return np.hstack(cols)


#: rows of one reduction task of the PS/PS2 fit: fixed, so that the partial sums (and the
#: fit's bits) do not depend on the ``chunk_rows`` option
PS_BLOCK_ROWS = 65_536


#: bits of one fixed-point term above its quantum (each term is split in two such parts):
#: 2**17 terms of a block (65,536 records of both files) add up below 2**62 in int64
_FIX = 44


@numba.njit(cache=True, inline="always")
def _fix_add(t: float, inv_q: float, hi: np.ndarray, lo: np.ndarray, i: int
             ) -> None:  # pragma: no cover - numba
    """Add term ``t`` to the fixed-point sum ``hi[i] * q + lo[i] * q * 2**-_FIX`` (``q`` =
    1 / ``inv_q``, a power of two at least the term's bound times ``2**-_FIX``): ``t`` is
    rounded to a multiple of ``q * 2**-_FIX`` (a deterministic rounding of each term), and
    integers add up exactly in any order."""
    x = t * inv_q                                   # exact: a power-of-two scaling
    h = np.rint(x)
    r = (x - h) * 17592186044416.0                  # 2**44, exact
    hi[i] += np.int64(h)
    lo[i] += np.int64(np.rint(r))


@numba.njit(cache=True)
def _logistic_rows(D: np.ndarray, beta: np.ndarray, label: float, inv_q: np.ndarray,
                   hi: np.ndarray, lo: np.ndarray) -> int:  # pragma: no cover - numba
    """Add the rows of design ``D`` (label ``label``) to the fit's fixed-point sums.

    Sums (flat index ``i``, quantum ``1 / inv_q[i]``): 0 the log-likelihood, 1 the sum of
    (p - 1/2)**2, ``2 .. 2 + k`` the gradient, then the upper triangle of the Hessian row
    by row. Each term is rounded to a fixed grid (:func:`_fix_add`) and the grid's
    integers add up exactly, so the sums do not depend on the order of the rows (nor on
    BLAS, the thread count or the chunking). Returns the number of misclassified rows.
    """
    n, k = D.shape
    wrong = 0
    for i in range(n):
        row = D[i]
        eta = 0.0
        for j in range(k):
            eta += row[j] * beta[j]
        if eta >= 0.0:
            t = math.exp(-eta)
            mu = 1.0 / (1.0 + t)
            softplus = eta + math.log1p(t)          # log(1 + e**eta)
        else:
            t = math.exp(eta)
            mu = t / (1.0 + t)
            softplus = math.log1p(t)
        _fix_add(label * eta - softplus, inv_q[0], hi, lo, 0)
        _fix_add((mu - 0.5) * (mu - 0.5), inv_q[1], hi, lo, 1)
        r = label - mu
        w = mu * (1.0 - mu)
        p = 2 + k
        for a in range(k):
            _fix_add(row[a] * r, inv_q[2 + a], hi, lo, 2 + a)
            wa = w * row[a]
            for b in range(a, k):
                _fix_add(wa * row[b], inv_q[p], hi, lo, p)
                p += 1
        if label == 0.0:
            if eta > 0.0:
                wrong += 1
        elif eta <= 0.0:
            wrong += 1
    return wrong


def _quanta(bound: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """The inverse quanta (powers of two) of sums whose terms are at most ``bound`` in
    magnitude, and their exponents ``e`` (quantum ``2**e``)."""
    b = np.where(np.isfinite(bound) & (bound > 0), bound, 1.0)
    e = np.maximum(np.frexp(b)[1].astype(np.int64) - _FIX, -1000)   # 2**(e + _FIX) >= bound
    return np.ldexp(1.0, -e), e


def _fixed_bounds(zmax: np.ndarray, beta: np.ndarray, degree: int) -> np.ndarray:
    """Bounds of the fit's terms from the largest |z| of each column (see
    :func:`_logistic_rows` for their order)."""
    F = np.abs(ps_features(np.asarray(zmax, np.float64)[None, :], degree)[0])
    k = F.size
    eta = float(np.sum(np.abs(beta) * F)) * (1 + 1e-9) + 1.0
    iu = np.triu_indices(k)
    return np.concatenate([[2.0 * eta + 1.0, 0.25], F, 0.25 * F[iu[0]] * F[iu[1]] + 1e-300])


def logistic_chunk(start: int, stop: int, X: Any, Y: Any, mean: np.ndarray, sd: np.ndarray,
                   beta: np.ndarray, degree: int, zmax: np.ndarray | None = None
                   ) -> dict[str, Any]:
    """Log-likelihood, gradient, Hessian, sum of (p - 1/2)**2 and misclassified count.

    For records ``start:stop`` of both files (label 0 = original, 1 = masked),
    at coefficients ``beta``. Works through sub-blocks so the design matrix of
    PS2 never exceeds a few MB; every sum is a fixed-point sum of its terms
    (:func:`_logistic_rows`), returned exactly (``exact``: Python ints, units
    ``2**-SCALE``), so the sums depend only on the records, not on their order.
    ``zmax`` (the largest |z| of each column over both files) sets the grids; default
    this block's own.
    """
    beta = np.ascontiguousarray(beta, dtype=np.float64)
    k = beta.size
    if zmax is None:
        zmax = column_zmax(start, stop, X, Y, mean, sd)["zmax"]
    inv_q, e = _quanta(_fixed_bounds(zmax, beta, degree))
    hi = np.zeros(inv_q.size, np.int64)
    lo = np.zeros(inv_q.size, np.int64)
    wrong = 0
    step = max(1, 2**19 // k)
    for label, F in ((0.0, X), (1.0, Y)):
        for s in range(start, stop, step):
            e_ = min(s + step, stop)
            D = ps_features((np.asarray(F[s:e_], dtype=np.float64) - mean) / sd, degree)
            wrong += int(_logistic_rows(np.ascontiguousarray(D), beta, label, inv_q, hi, lo))
    # hi * 2**e + lo * 2**(e - _FIX), in units 2**-SCALE
    exact = np.array([((int(h) << _FIX) + int(x)) << int(ei - _FIX + SCALE)
                      for h, x, ei in zip(hi, lo, e)], dtype=object)
    return {"exact": exact, "wrong": wrong, "k": k}


#: the fit's kernel, its grid and its bits per part, shared with ``pmse``
#: (:mod:`sdcdist.metrics.loss.pmse`): one logistic kernel for both
logistic_rows, fixed_quanta, FIX_BITS = _logistic_rows, _quanta, _FIX


def _exact_fit_sums(st: dict[str, Any]) -> dict[str, Any]:
    """The correctly rounded floats of the fit's exact sums: ``ll``, ``u``, ``grad``,
    ``hess`` (full, symmetric) and ``wrong``."""
    k = int(st["k"])
    v = np.array([float(to_fraction(int(x))) for x in st["exact"]])
    hess = np.zeros((k, k))
    iu = np.triu_indices(k)
    hess[iu] = v[2 + k:]
    hess[iu[1], iu[0]] = v[2 + k:]
    return {"ll": float(v[0]), "u": float(v[1]), "grad": v[2:2 + k], "hess": hess,
            "wrong": int(st["wrong"])}


def column_zmax(start: int, stop: int, X: Any, Y: Any, mean: np.ndarray, sd: np.ndarray
                ) -> dict[str, Any]:
    """The largest |z| of each column over records ``start:stop`` of both files."""
    out = np.zeros(len(mean))
    for F in (X, Y):
        z = np.abs((np.asarray(F[start:stop], dtype=np.float64) - mean) / sd)
        if z.size:
            out = np.fmax(out, z.max(axis=0))
    return {"zmax": out}


def _max_dicts(*parts: dict[str, Any]) -> dict[str, Any]:
    return {"zmax": np.max([p["zmax"] for p in parts], axis=0)}


def _add_fit(*parts: dict[str, Any]) -> dict[str, Any]:
    return {"exact": sum((p["exact"] for p in parts[1:]), parts[0]["exact"]),
            "wrong": sum(p["wrong"] for p in parts), "k": parts[0]["k"]}


def newton_step(evaluate: Callable[[np.ndarray], dict[str, Any]], beta: np.ndarray,
                cur: dict[str, Any]) -> tuple[np.ndarray, dict[str, Any], bool]:
    """One damped Newton-Raphson step of an exact logistic fit (PS, pMSE).

    The step solves ``hess @ step = grad`` on one BLAS thread (the same bits whatever the
    pool's size) and is halved, up to 40 times, until the log-likelihood does not fall.
    Returns the new coefficients, ``evaluate`` of them, and whether the fit has converged
    (the log-likelihood gained at most 1e-11 relative and no coefficient moved 1e-6).
    """
    with one_blas_thread():
        step = np.linalg.lstsq(cur["hess"], cur["grad"], rcond=None)[0]
    for _ in range(40):
        new = evaluate(beta + step)
        if new["ll"] >= cur["ll"] - 1e-12 * abs(cur["ll"]):
            break
        step = step / 2
    gain = new["ll"] - cur["ll"]
    done = bool(abs(gain) <= 1e-11 * (1.0 + abs(new["ll"])) and np.max(np.abs(step)) < 1e-6)
    return beta + step, new, done


def propensity_utility(ctx: MeasureContext, degree: int, name: str) -> MetricResult:
    """U = mean((p - 1/2)**2) over both files' records, p from the logistic fit."""
    st = record_stats(ctx)
    sd = il_sd(ctx, name)
    mean = st["exact_mean_x"]
    n_total = 2 * int(st["n"])
    r = ctx.runner
    mean_h, sd_h = r.share(mean), r.share(sd)

    zmax = map_reduce(r, column_zmax, _max_dicts, [ctx.original, ctx.masked],
                      ctx.shape_original[0], chunk_rows=PS_BLOCK_ROWS,
                      args=(mean_h, sd_h))["zmax"]

    def evaluate(beta: np.ndarray) -> dict[str, Any]:
        return _exact_fit_sums(map_reduce(r, logistic_chunk, _add_fit,
                                          [ctx.original, ctx.masked],
                                          ctx.shape_original[0], chunk_rows=PS_BLOCK_ROWS,
                                          args=(mean_h, sd_h, beta, degree, zmax)))

    k = ps_features(np.zeros((1, len(mean))), degree).shape[1]
    beta = np.zeros(k)
    cur = evaluate(beta)
    for it in range(MAX_NEWTON):
        if cur["wrong"] == 0:
            return MetricResult(0.25, flag=1, info=_SEPARATED | {"iterations": it})
        beta, cur, done = newton_step(evaluate, beta, cur)
        if done:
            return MetricResult(cur["u"] / n_total, info={"iterations": it + 1})
    if cur["wrong"] == 0:
        return MetricResult(0.25, flag=1, info=_SEPARATED | {"iterations": MAX_NEWTON})
    return MetricResult(cur["u"] / n_total, flag=1,
                        info={"converged": False, "iterations": MAX_NEWTON})


@register("PS", kind="utility", scaled=True, reference="[DRS Alg. 1]", options=("chunk_rows",),
          unit="(p − ½)², 0 (indistinguishable) to 0.25",
          description="propensity-score utility loss: mean (p - 1/2)**2 of an unpenalised "
                      "logistic regression of masked vs original on the z-scored columns "
                      "(0 = indistinguishable, 0.25 = separable)")
def ps(ctx: MeasureContext) -> MetricResult:
    return propensity_utility(ctx, 1, "PS")


@register("PS2", kind="utility", scaled=True, reference="[DRS Alg. 1]", options=("chunk_rows",),
          unit="(p − ½)², 0 (indistinguishable) to 0.25",
          description="PS with squares and pairwise products of the z-scored columns")
def ps2(ctx: MeasureContext) -> MetricResult:
    return propensity_utility(ctx, 2, "PS2")
