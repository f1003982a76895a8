"""Earth mover's distances of [DRS]: ``EMD`` between the k-means centroid sets of both
files, ``EMD1`` one column at a time.

``EMD`` clusters each z-scored file with seeded k-means (scikit-learn) and
solves the transportation problem between the weighted centroid sets exactly
with scipy's linear programming (HiGHS). ``EMD1`` pairs order statistics of
each column from the distributed sort of :mod:`~sdcdist.metrics.loss.ranks`.
Both z-score with the original file's exact moments (:mod:`.infoloss`).
"""

from __future__ import annotations

import math
import warnings
from typing import Any

import numpy as np

from .._registry import MeasureContext, MetricResult, register
from ..content import content_order, row_hashes
from .infoloss import il_sd, record_stats
from .ranks import RANK_OPTIONS, rank_pass

__all__ = ["transport_emd", "weighted_centroids"]


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
    from scipy import sparse   # on first use: listing the metrics stays light
    rows = sparse.kron(sparse.eye(h), np.ones((1, k)))
    cols = sparse.kron(np.ones((1, h)), sparse.eye(k))
    A = sparse.vstack([rows, cols]).tocsr()
    total = min(wa.sum(), wb.sum())
    wb = wb * (total / wb.sum())
    wa = wa * (total / wa.sum())
    from scipy.optimize import linprog   # imported here: scipy.optimize takes a second

    res = linprog(d.ravel(), A_eq=A, b_eq=np.concatenate([wa, wb]), bounds=(0, None),
                  method="highs")
    if res.status != 0 and d.size and np.max(d) > 0:
        # HiGHS gives up on costs of huge magnitude (a masked column far off the original's
        # scale puts every ground distance near 1e12): the same problem with the costs
        # scaled by a power of two near the largest (exact; the same optimal flows)
        scale = math.ldexp(1.0, -math.frexp(float(np.max(d)))[1])
        res = linprog(d.ravel() * scale, A_eq=A, b_eq=np.concatenate([wa, wb]),
                      bounds=(0, None), method="highs")
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
          scaled=True,
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
          scaled=True,
          unit="standard deviations",
          options=RANK_OPTIONS,
          description="mean over columns of the 1-D Wasserstein distance between the columns "
                      "of both files z-scored with the original's moments")
def emd1(ctx: MeasureContext) -> MetricResult:
    sd = il_sd(ctx, "EMD1")
    n = ctx.shape_original[0]
    return MetricResult(float(np.mean(rank_pass(ctx)["l1"] / n / sd)))
