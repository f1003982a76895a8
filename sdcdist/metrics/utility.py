"""Utility metrics of [DRS]: propensity scores and earth mover's distances.

``PS``/``PS2`` fit an unpenalised logistic regression of "is masked" on the
z-scored columns of the stacked files by Newton-Raphson, where every
iteration is one reduction over record chunks (gradient, Hessian and
log-likelihood add up over chunks), so the fit is the exact maximum-likelihood
fit on files of any size. The chunks are fixed blocks of :data:`PS_BLOCK_ROWS`
records whatever the ``chunk_rows`` option, and each block's sums run record by
record in a fixed order (a numba loop, not BLAS, whose sums are split
differently for different thread counts), so the fitted bits depend only on
the data: not on the worker count, the scheduling or the BLAS thread pool. A fit whose hyperplane classifies every record
correctly proves complete separation: the likelihood has no maximum and its
supremum is approached as every propensity score tends to its label, so U
is its maximum 0.25, flagged (flag 1, ``info["separation"] = "complete"``).

``EMD`` clusters each z-scored file with seeded k-means (scikit-learn) and
solves the transportation problem between the weighted centroid sets exactly
with scipy's linear programming (HiGHS). ``EMD1`` pairs order statistics of
each column from the distributed sort of :mod:`~sdcdist.metrics.ranks`.
"""

from __future__ import annotations

import math
import warnings
from typing import Any

import numba
import numpy as np
from scipy import sparse

from ..parallel import add_dicts, map_reduce, one_blas_thread
from ._registry import MeasureContext, MetricResult, register
from .content import content_order, row_hashes
from .infoloss import il_sd, record_stats
from .ranks import RANK_OPTIONS, rank_pass

__all__ = ["ps_features", "logistic_chunk", "propensity_utility", "transport_emd",
           "weighted_centroids"]

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


@numba.njit(cache=True)
def _logistic_rows(D: np.ndarray, beta: np.ndarray, label: float, acc: np.ndarray,
                   grad: np.ndarray, hess: np.ndarray) -> int:  # pragma: no cover - numba
    """Add the rows of design ``D`` (label ``label``) to the fit's sums.

    ``acc`` = [log-likelihood, sum of (p - 1/2)**2]; ``grad`` (k,); the upper
    triangle of ``hess`` (k, k). Every sum runs over the rows in a fixed order
    written out here (the Hessian adds rows four at a time as
    ``((r0 + r1) + (r2 + r3))``), not through BLAS, whose sums are split
    differently for different thread counts: the same rows give the same bits
    whatever the machine's state. Returns the number of misclassified rows.
    """
    n, k = D.shape
    wrong = 0
    W = np.empty((n, k))
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
        acc[0] += label * eta - softplus
        acc[1] += (mu - 0.5) * (mu - 0.5)
        r = label - mu
        w = mu * (1.0 - mu)
        for a in range(k):
            grad[a] += row[a] * r
            W[i, a] = w * row[a]
        if label == 0.0:
            if eta > 0.0:
                wrong += 1
        elif eta <= 0.0:
            wrong += 1
    i = 0
    while i + 4 <= n:
        r0, r1, r2, r3 = D[i], D[i + 1], D[i + 2], D[i + 3]
        for a in range(k):
            w0, w1, w2, w3 = W[i, a], W[i + 1, a], W[i + 2, a], W[i + 3, a]
            h = hess[a]
            for b in range(a, k):
                h[b] += (w0 * r0[b] + w1 * r1[b]) + (w2 * r2[b] + w3 * r3[b])
        i += 4
    while i < n:
        r0 = D[i]
        for a in range(k):
            w0 = W[i, a]
            h = hess[a]
            for b in range(a, k):
                h[b] += w0 * r0[b]
        i += 1
    return wrong


def logistic_chunk(start: int, stop: int, X: Any, Y: Any, mean: np.ndarray, sd: np.ndarray,
                   beta: np.ndarray, degree: int) -> dict[str, Any]:
    """Log-likelihood, gradient, Hessian, sum of (p - 1/2)**2 and misclassified count.

    For records ``start:stop`` of both files (label 0 = original, 1 = masked),
    at coefficients ``beta``. Works through sub-blocks so the design matrix of
    PS2 never exceeds a few MB; the sums run record by record in a fixed order
    (:func:`_logistic_rows`), so their bits depend only on the records.
    """
    beta = np.ascontiguousarray(beta, dtype=np.float64)
    k = beta.size
    acc = np.zeros(2)
    grad = np.zeros(k)
    hess = np.zeros((k, k))
    wrong = 0
    step = max(1, 2**19 // k)
    for label, F in ((0.0, X), (1.0, Y)):
        for s in range(start, stop, step):
            e = min(s + step, stop)
            D = ps_features((np.asarray(F[s:e], dtype=np.float64) - mean) / sd, degree)
            wrong += int(_logistic_rows(np.ascontiguousarray(D), beta, label, acc, grad, hess))
    iu = np.triu_indices(k, 1)
    hess[iu[1], iu[0]] = hess[iu]
    return {"ll": float(acc[0]), "grad": grad, "hess": hess, "u": float(acc[1]),
            "wrong": wrong}


def propensity_utility(ctx: MeasureContext, degree: int, name: str) -> MetricResult:
    """U = mean((p - 1/2)**2) over both files' records, p from the logistic fit."""
    st = record_stats(ctx)
    sd = il_sd(ctx, name)
    mean = st["exact_mean_x"]
    n_total = 2 * int(st["n"])
    r = ctx.runner
    mean_h, sd_h = r.share(mean), r.share(sd)

    def evaluate(beta: np.ndarray) -> dict[str, Any]:
        return map_reduce(r, logistic_chunk, add_dicts, [ctx.original, ctx.masked],
                          ctx.shape_original[0], chunk_rows=PS_BLOCK_ROWS,
                          args=(mean_h, sd_h, beta, degree))

    k = ps_features(np.zeros((1, len(mean))), degree).shape[1]
    beta = np.zeros(k)
    cur = evaluate(beta)
    for it in range(MAX_NEWTON):
        if cur["wrong"] == 0:
            return MetricResult(0.25, flag=1, info=_SEPARATED | {"iterations": it})
        with one_blas_thread():              # the same bits whatever the BLAS pool's size
            step = np.linalg.lstsq(cur["hess"], cur["grad"], rcond=None)[0]
        for _ in range(40):                      # step halving keeps the likelihood rising
            new = evaluate(beta + step)
            if new["ll"] >= cur["ll"] - 1e-12 * abs(cur["ll"]):
                break
            step = step / 2
        beta = beta + step
        gain = new["ll"] - cur["ll"]
        cur = new
        if abs(gain) <= 1e-11 * (1.0 + abs(cur["ll"])) and np.max(np.abs(step)) < 1e-6:
            return MetricResult(cur["u"] / n_total, info={"iterations": it + 1})
    if cur["wrong"] == 0:
        return MetricResult(0.25, flag=1, info=_SEPARATED | {"iterations": MAX_NEWTON})
    return MetricResult(cur["u"] / n_total, flag=1,
                        info={"converged": False, "iterations": MAX_NEWTON})


@register("PS", kind="utility", reference="[DRS Alg. 1]", options=("chunk_rows",),
          unit="(p − ½)², 0 (indistinguishable) to 0.25",
          description="propensity-score utility loss: mean (p - 1/2)**2 of an unpenalised "
                      "logistic regression of masked vs original on the z-scored columns "
                      "(0 = indistinguishable, 0.25 = separable)")
def ps(ctx: MeasureContext) -> MetricResult:
    return propensity_utility(ctx, 1, "PS")


@register("PS2", kind="utility", reference="[DRS Alg. 1]", options=("chunk_rows",),
          unit="(p − ½)², 0 (indistinguishable) to 0.25",
          description="PS with squares and pairwise products of the z-scored columns")
def ps2(ctx: MeasureContext) -> MetricResult:
    return propensity_utility(ctx, 2, "PS2")


def weighted_centroids(Z: np.ndarray, h: int, seed: int) -> tuple[np.ndarray, np.ndarray]:
    """Seeded k-means (h clusters) of the rows of ``Z``: centroids and weights (sum 1).

    Empty clusters (fewer distinct points than h) are dropped.
    """
    from sklearn.cluster import KMeans
    from threadpoolctl import threadpool_limits
    with threadpool_limits(1), warnings.catch_warnings():
        warnings.simplefilter("ignore")          # fewer distinct points than clusters
        km = KMeans(n_clusters=h, n_init=4, random_state=seed, algorithm="lloyd").fit(Z)
    counts = np.bincount(km.labels_, minlength=h)
    keep = counts > 0
    return km.cluster_centers_[keep], counts[keep] / Z.shape[0]


def transport_emd(a: np.ndarray, wa: np.ndarray, b: np.ndarray, wb: np.ndarray) -> float:
    """Exact earth mover's distance between weighted point sets (Euclidean ground distance).

    Solves min sum d_ij f_ij subject to row sums ``wa``, column sums ``wb``,
    f >= 0, with scipy's HiGHS; returns work / total flow.
    """
    h, k = len(wa), len(wb)
    d = np.sqrt(((a[:, None, :] - b[None, :, :]) ** 2).sum(axis=2))
    rows = sparse.kron(sparse.eye(h), np.ones((1, k)))
    cols = sparse.kron(np.ones((1, h)), sparse.eye(k))
    A = sparse.vstack([rows, cols]).tocsr()
    total = min(wa.sum(), wb.sum())
    wb = wb * (total / wb.sum())
    wa = wa * (total / wa.sum())
    from scipy.optimize import linprog   # imported here: scipy.optimize takes a second

    res = linprog(d.ravel(), A_eq=A, b_eq=np.concatenate([wa, wb]), bounds=(0, None),
                  method="highs")
    if res.status != 0:                          # pragma: no cover - balanced problems solve
        raise RuntimeError(f"transportation problem failed: {res.message}")
    flow = res.x
    return float(d.ravel() @ flow / flow.sum())


def _emd_task(X: Any, Y: Any, mean: np.ndarray, sd: np.ndarray, h: int,
              seeds: tuple[int, int]) -> float:
    # each file's records in content order: k-means' seeding picks records by position and
    # its sums follow the records' order, so the centroids would follow the row order
    xa, xb = np.asarray(X[:], dtype=np.float64), np.asarray(Y[:], dtype=np.float64)
    xa = xa[content_order(row_hashes(xa))]
    xb = xb[content_order(row_hashes(xb))]
    za = (xa - mean) / sd
    zb = (xb - mean) / sd
    a, wa = weighted_centroids(za, h, seeds[0])
    b, wb = weighted_centroids(zb, h, seeds[1])
    return transport_emd(a, wa, b, wb)


@register("EMD", kind="utility", reference="[DRS eq. 2]", random=True, options=("chunk_rows",),
          unit="standard deviations",
          description="earth mover's distance between the seeded k-means centroid sets "
                      "(h = min(50, n/10)) of both files z-scored with the original's moments")
def emd(ctx: MeasureContext) -> MetricResult:
    st = record_stats(ctx)
    sd = il_sd(ctx, "EMD")
    n = int(st["n"])
    h = max(1, min(50, n // 10))
    g = ctx.rng("EMD")
    seed = int(g.integers(0, 2**31 - 1))       # the same seed for both files: X' = X gives 0
    seeds = (seed, seed)
    r = ctx.runner
    value = r.call(_emd_task, ctx.original, ctx.masked, st["exact_mean_x"], sd, h, seeds)
    return MetricResult(value, info={"clusters": h})


@register("EMD1", kind="utility", reference="[DRS eq. 2], one dimension at a time",
          unit="standard deviations",
          options=RANK_OPTIONS,
          description="mean over columns of the 1-D Wasserstein distance between the columns "
                      "of both files z-scored with the original's moments")
def emd1(ctx: MeasureContext) -> MetricResult:
    sd = il_sd(ctx, "EMD1")
    n = ctx.shape_original[0]
    return MetricResult(float(np.mean(rank_pass(ctx)["l1"] / n / sd)))
