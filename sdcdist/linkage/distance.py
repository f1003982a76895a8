"""Distance-linkage kernels: plain numpy on one block of query rows x candidate rows.

Distances are squared Euclidean, accumulated column by column in a fixed
order, so the distance of a pair is the same float whichever block computes
it: ties found in different blocks are real ties, and the reference brute
force gives bit-identical answers.

Top-2 partials
--------------
For each query row a partial holds the two smallest *distinct* distances to
the candidates seen so far, with how many candidates sit at each:
``{"d1", "c1", "d2", "c2"}`` (float arrays ``d``, int arrays ``c``; ``inf`` and
0 where there is none). Partials over different candidate blocks merge
exactly with :func:`merge_top2`.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

import numpy as np

from ..errors import constant_error, magnitude_error
from ..moments import column_moments, constant_columns, overflowing_columns, sorted_column
from .gower import Gower, gathered_gower, gower_distances

if TYPE_CHECKING:
    from scipy.spatial import cKDTree

__all__ = ["sq_distances", "hit_total", "raw_columns", "block_top2", "merge_top2", "standardize", "top2_link_credit",
           "credit_counts", "add_counts", "credit_total", "METRICS", "pair_distances",
           "true_distances", "CandidateIndex", "build_index", "index_top2", "index_knn",
           "index_credit_top2", "weighted_top2", "empty_top2", "scale_columns", "pair_abs_sd",
           "rank_columns"]

#: Distances the kernels compute, all accumulated column by column in a fixed order:
#: ``sqeuclidean`` (sum of squares; the nearest is the Euclidean nearest),
#: ``cityblock`` (sum of absolute differences) and ``chebyshev`` (max).
#: The value is the Minkowski ``p`` of the equivalent cKDTree query.
METRICS = {"sqeuclidean": 2.0, "cityblock": 1.0, "chebyshev": np.inf}


def standardize(X: np.ndarray, cols: tuple[int, ...] | None = None, *,
                what: str = "file", names: tuple[str, ...] | None = None) -> np.ndarray:
    """Z-score the columns ``cols`` of ``X`` with its own means and sds (ddof=1).

    The means and sds are summed over each column's sorted values
    (:func:`sdcdist.moments.column_moments`), so they are the same floats in every
    row order of ``X``: the z-scores, every distance and every tie between
    candidates are then functions of the records' values alone.

    Raises
    ------
    SdcInputError
        If a selected column is constant: all its non-missing values are equal
        (:func:`sdcdist.moments.constant_columns`, exact: a column of copies of 0.1 has a
        computed sd of about 1e-17, not 0), or its sd is not a positive number (fewer
        than two values), or its values are so large that its variance is not a finite
        float64 (:func:`sdcdist.moments.overflowing_columns`).
    """
    A = np.asarray(X[:, list(cols)] if cols is not None else X[:, :], dtype=np.float64)
    mu, sd = column_moments(A)
    bad = np.flatnonzero(constant_columns(A) | ~(sd > 0))
    if bad.size:
        label = [names[i] if names else (cols[i] if cols else i) for i in bad]
        raise constant_error(label, f"the {what}", "distance linkage standardises each key "
                             "column", "leave constant columns out of the key sets")
    big = np.flatnonzero(overflowing_columns(A))
    if big.size:
        label = [names[i] if names else (cols[i] if cols else i) for i in big]
        raise magnitude_error(label, f"the {what}", "linking on them")
    return (A - mu) / sd


def _accumulate(D: np.ndarray, diff: np.ndarray, metric: str) -> None:
    """Add one column's contribution to ``D`` in place (the one place distances are summed)."""
    if metric == "sqeuclidean":
        D += diff * diff
    elif metric == "cityblock":
        D += np.abs(diff)
    elif metric == "chebyshev":
        np.maximum(D, np.abs(diff), out=D)
    else:
        raise ValueError(f"unknown linkage distance {metric!r}; valid: {', '.join(METRICS)}")


def pair_distances(Q: np.ndarray, C: np.ndarray, metric: str = "sqeuclidean") -> np.ndarray:
    """Distances of every query row to every candidate row, shape (len(Q), len(C)).

    Accumulated column by column in column order, so the distance of a pair is
    the same float whichever block (or index lookup) computes it. ``metric`` may be a
    :class:`~sdcdist.linkage.gower.Gower` (integer units on prepared columns).
    """
    if isinstance(metric, Gower):
        return gower_distances(Q, C, metric)
    D = np.zeros((Q.shape[0], C.shape[0]))
    for j in range(Q.shape[1]):
        _accumulate(D, Q[:, j, None] - C[None, :, j], metric)
    return D


def sq_distances(Q: np.ndarray, C: np.ndarray) -> np.ndarray:
    """Squared Euclidean distances, shape (len(Q), len(C)), summed column by column."""
    return pair_distances(Q, C, "sqeuclidean")


def gathered_distances(Q: np.ndarray, C: np.ndarray, idx: np.ndarray,
                       metric: str = "sqeuclidean") -> np.ndarray:
    """Distance of query row i to candidate rows ``idx[i, :]``, shape ``idx.shape``.

    Same column-by-column accumulation as :func:`pair_distances`, hence the same floats.
    """
    if isinstance(metric, Gower):
        return gathered_gower(Q, C, idx, metric)
    D = np.zeros(idx.shape)
    for j in range(Q.shape[1]):
        _accumulate(D, Q[:, j, None] - C[:, j][idx], metric)
    return D


def true_distances(Q: np.ndarray, C: np.ndarray, truth: np.ndarray,
                   metric: str = "sqeuclidean") -> np.ndarray:
    """Distance of each query row to its true candidate (inf when absent)."""
    ok = truth >= 0
    out = gathered_distances(Q, C, np.where(ok, truth, 0)[:, None], metric)[:, 0]
    out[~ok] = np.inf
    return out


def empty_top2(r: int) -> dict[str, np.ndarray]:
    """The top-2 partial of ``r`` query rows that have seen no candidate."""
    return {"d1": np.full(r, np.inf), "c1": np.zeros(r, np.int64),
            "d2": np.full(r, np.inf), "c2": np.zeros(r, np.int64)}


def weighted_top2(D: np.ndarray, w: np.ndarray | None = None) -> dict[str, np.ndarray]:
    """Top-2 distinct distances per row of ``D``; candidate ``(i, k)`` counts ``w[i, k]`` times."""
    if D.shape[1] == 0:
        return empty_top2(D.shape[0])
    d1 = D.min(axis=1)
    at1 = D == d1[:, None]
    c1 = at1.sum(axis=1) if w is None else np.where(at1, w, 0).sum(axis=1)
    rest = np.where(at1, np.inf, D)
    d2 = rest.min(axis=1)
    at2 = rest == d2[:, None]
    c2 = np.where(np.isfinite(d2), at2.sum(axis=1) if w is None
                  else np.where(at2, w, 0).sum(axis=1), 0)
    return {"d1": d1, "c1": c1.astype(np.int64), "d2": d2, "c2": c2.astype(np.int64)}


def block_top2(D: np.ndarray) -> dict[str, np.ndarray]:
    """Top-2 distinct distances with their multiplicities for each row of ``D``."""
    return weighted_top2(D)


def merge_top2(*parts: dict[str, np.ndarray]) -> dict[str, np.ndarray]:
    """Merge top-2 partials of the same query rows over disjoint candidate sets."""
    d = np.stack([p[k] for p in parts for k in ("d1", "d2")], axis=1)
    c = np.stack([p[k] for p in parts for k in ("c1", "c2")], axis=1)
    d1 = d.min(axis=1)
    at1 = d == d1[:, None]
    c1 = np.where(at1, c, 0).sum(axis=1)
    rest = np.where(at1, np.inf, d)
    d2 = rest.min(axis=1)
    c2 = np.where((rest == d2[:, None]) & np.isfinite(rest), c, 0).sum(axis=1)
    return {"d1": d1, "c1": c1, "d2": d2, "c2": c2}


def top2_link_credit(top: dict[str, np.ndarray], dtrue: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Tie denominators of each query row's credit for linking to its true record.

    Under random tie-breaking among candidates at equal distance (the 1/t
    rule) a row whose true record is the nearest, tied with t-1 others, counts
    1/t. Returns ``(first, second)``: int arrays with t where the true record
    is the nearest (resp. the second nearest) with probability 1/t, and 0 where
    it cannot be. ``dtrue`` is inf for rows whose true record is absent.
    Keeping integers (not 1/t floats) lets totals be summed exactly.
    """
    d1, c1, d2, c2 = top["d1"], top["c1"], top["d2"], top["c2"]
    present = np.isfinite(dtrue)
    at1 = present & (dtrue == d1)
    at2 = present & (dtrue == d2)
    first = np.where(at1, c1, 0)
    second = np.where(at1 & (c1 >= 2), c1, np.where(at2 & (c1 == 1), c2, 0))
    return first.astype(np.int64), second.astype(np.int64)


def credit_counts(den: np.ndarray) -> np.ndarray:
    """``bincount`` of tie denominators (index t = rows credited 1/t; index 0 unused)."""
    return np.bincount(den[den > 0], minlength=2).astype(np.int64)


def add_counts(*parts: np.ndarray) -> np.ndarray:
    """Add bincount arrays of different lengths."""
    out = np.zeros(max(len(p) for p in parts), dtype=np.int64)
    for p in parts:
        out[:len(p)] += p
    return out


def credit_total(counts: np.ndarray) -> float:
    """Sum of count_t / t in increasing t: the same float however rows were blocked."""
    t = np.arange(len(counts))
    keep = (counts > 0) & (t > 0)
    return float(np.sum(counts[keep] / t[keep]))


def hit_total(counts: np.ndarray) -> int:
    """Rows with any credit, each counted as a full hit (the tie-as-hit rule).

    A row has a positive tie denominator exactly when its true record is among
    the candidates tied at the nearest (resp. second-nearest) place, so the
    number of hits is the sum of the counts at t >= 1: an integer, whatever the
    blocking.
    """
    return int(np.sum(counts[1:]))


# -- exact nearest neighbours through a KD-tree ---------------------------------------

@dataclass
class CandidateIndex:
    """A block of candidate rows prepared for exact neighbour queries.

    Attributes
    ----------
    rows : ndarray (u, m)
        The distinct candidate rows (exact duplicates collapsed: they are at the
        same distance from every query, so a tie group of a million equal
        records is one point of weight a million).
    weight : ndarray (u,) of int
        How many candidate rows each distinct row stands for.
    members : ndarray (n,) of int
        Row numbers (in the whole candidate file) grouped by distinct row:
        distinct row g stands for ``members[start[g]:start[g] + weight[g]]``.
    start : ndarray (u,) of int
    tree : scipy.spatial.cKDTree
    """

    rows: np.ndarray
    weight: np.ndarray
    members: np.ndarray
    start: np.ndarray
    tree: cKDTree


def build_index(C: np.ndarray, offset: int = 0) -> CandidateIndex:
    """Collapse duplicate rows of ``C`` (shape (n, m)) and build a KD-tree over them."""
    from scipy.spatial import cKDTree   # on first use: listing the metrics stays light
    C = np.ascontiguousarray(C, dtype=np.float64)
    if C.shape[0] == 0:
        z = np.zeros(0, np.int64)
        return CandidateIndex(C, z, z, z, cKDTree(C))
    U, inverse, weight = np.unique(C, axis=0, return_inverse=True, return_counts=True)
    members = np.argsort(inverse.ravel(), kind="stable").astype(np.int64) + offset
    start = np.concatenate([[0], np.cumsum(weight)[:-1]]).astype(np.int64)
    return CandidateIndex(U, weight.astype(np.int64), members, start,
                          cKDTree(U, balanced_tree=False, compact_nodes=False))


#: Relative slack between cKDTree's distances and ours (the two sum the same
#: nonnegative terms in different orders; the difference is a few ulps).
_SLACK = 1e-9


def _kd_bound(kd: np.ndarray, metric: str) -> np.ndarray:
    """Lower bound, on our distance scale, of every candidate cKDTree did not return."""
    b = kd * kd if metric == "sqeuclidean" else kd
    return b * (1.0 - _SLACK)


def _kd_query(index: CandidateIndex, Q: np.ndarray, k: int, metric: str, eps: float = 0.0):
    kd, idx = index.tree.query(Q, k=k, p=METRICS[metric], eps=eps)
    return kd.reshape(len(Q), k), idx.reshape(len(Q), k)


def index_top2(Q: np.ndarray, index: CandidateIndex, metric: str = "sqeuclidean", *,
               k: int = 3) -> dict[str, np.ndarray]:
    """Exact top-2 partial (as :func:`block_top2`) of ``Q`` against an indexed block.

    cKDTree proposes the ``k`` nearest distinct rows; their distances are
    recomputed with :func:`gathered_distances` (bit-identical to the brute
    force). A query is settled when its second distinct distance lies below
    the tree's bound on every row not returned (with a relative slack that
    covers the different summation order of cKDTree), so no candidate at
    ``d1`` or ``d2`` can be missing; unsettled queries are asked again with
    four times ``k`` until settled or every row was returned.
    """
    Q = np.ascontiguousarray(Q, dtype=np.float64)
    u = index.rows.shape[0]
    out = empty_top2(Q.shape[0])
    if u == 0 or Q.shape[0] == 0:
        return out
    pending = np.arange(Q.shape[0])
    while pending.size:
        kk = min(k, u)
        kd, idx = _kd_query(index, Q[pending], kk, metric)
        top = weighted_top2(gathered_distances(Q[pending], index.rows, idx, metric),
                            index.weight[idx])
        done = (np.ones(pending.size, bool) if kk == u
                else top["d2"] < _kd_bound(kd[:, -1], metric))
        for key in out:
            out[key][pending[done]] = top[key][done]
        pending = pending[~done]
        k *= 4
    return out


def index_credit_top2(Q: np.ndarray, dtrue: np.ndarray, index: CandidateIndex,
                      metric: str = "sqeuclidean", *, k: int = 3,
                      eps: float = 2.0) -> dict[str, np.ndarray]:
    """A top-2 partial that is exact *for the tie credits* of :func:`top2_link_credit`.

    The credits of a query depend only on the candidates at distance
    ``<= dtrue`` (its true record's distance), and are 0 as soon as two
    candidates are strictly nearer. So a query row is settled by either

    - a *certificate*: two candidate rows (counting duplicates) whose exact
      distance is ``< dtrue``, found by a cheap approximate cKDTree search
      (``eps``); the partial holds just them, and any merge stays ``< dtrue``;
    - or all candidates at distance ``<= dtrue``: the exact ``k``-nearest
      search (as :func:`index_top2`) returned every row the tree's bound does
      not exclude; the partial holds those, truncated at ``dtrue``.

    Merged with :func:`merge_top2` (with partials of the same kind from other
    candidate blocks), the credits equal those of the full top-2 exactly; the
    nearest distance ``d1`` of such a partial is *not* the nearest in general.
    Rows with no true record (``dtrue`` inf) get an empty partial.
    """
    Q = np.ascontiguousarray(Q, dtype=np.float64)
    dtrue = np.asarray(dtrue, dtype=np.float64)
    u = index.rows.shape[0]
    out = empty_top2(Q.shape[0])
    pending = np.flatnonzero(np.isfinite(dtrue))
    if u == 0 or pending.size == 0:
        return out

    def settle(rows: np.ndarray, idx: np.ndarray, done: np.ndarray) -> None:
        E = gathered_distances(Q[rows], index.rows, idx, metric)
        E = np.where(E <= dtrue[rows, None], E, np.inf)      # only what the credits see
        top = weighted_top2(E, np.where(np.isfinite(E), index.weight[idx], 0))
        for key in out:
            out[key][rows[done]] = top[key][done]

    def certified(rows: np.ndarray, idx: np.ndarray) -> np.ndarray:
        E = gathered_distances(Q[rows], index.rows, idx, metric)
        return np.where(E < dtrue[rows, None], index.weight[idx], 0).sum(axis=1) >= 2

    if eps > 0 and u > 2:
        _, idx = _kd_query(index, Q[pending], 2, metric, eps)
        done = certified(pending, idx)
        settle(pending, idx, done)
        pending = pending[~done]
    while pending.size:
        kk = min(k, u)
        kd, idx = _kd_query(index, Q[pending], kk, metric)
        done = (np.ones(pending.size, bool) if kk == u
                else certified(pending, idx) | (dtrue[pending] < _kd_bound(kd[:, -1], metric)))
        settle(pending, idx, done)
        pending = pending[~done]
        k *= 4
    return out


def index_knn(Q: np.ndarray, index: CandidateIndex, c: int,
              metric: str = "sqeuclidean") -> tuple[np.ndarray, np.ndarray]:
    """The ``c`` nearest candidate rows of each query (duplicates expanded), exact distances.

    Returns ``(dist, rows)``, shapes (len(Q), c'), c' = min(c, candidates),
    rows numbered in the whole candidate file. Used to build sparse
    assignment graphs: a group of exact duplicates supplies as many distinct
    candidate rows as it has (in row order), so a 1-1 assignment can use them.
    Which of several candidates tied at the c-th distance are kept follows
    cKDTree's order.
    """
    Q = np.ascontiguousarray(Q, dtype=np.float64)
    cc = min(c, len(index.members))
    kk = min(c, index.rows.shape[0])
    if kk == 0:
        return np.zeros((len(Q), 0)), np.zeros((len(Q), 0), np.int64)
    _, idx = _kd_query(index, Q, kk, metric)
    dist = gathered_distances(Q, index.rows, idx, metric)
    cw = np.cumsum(index.weight[idx], axis=1)
    d_out = np.full((len(Q), cc), np.inf)
    r_out = np.full((len(Q), cc), -1, np.int64)
    rows = np.arange(len(Q))
    for t in range(cc):
        g = (cw <= t).sum(axis=1)                      # which distinct row position t falls in
        ok = g < kk
        gg = np.minimum(g, kk - 1)
        before = np.where(gg > 0, cw[rows, np.maximum(gg - 1, 0)], 0)
        grp = idx[rows, gg]
        d_out[ok, t] = dist[rows, gg][ok]
        r_out[ok, t] = index.members[index.start[grp] + t - before][ok]
    order = np.lexsort((r_out, d_out), axis=1)         # nearest first, then row number
    return np.take_along_axis(d_out, order, 1), np.take_along_axis(r_out, order, 1)


# -- column transforms of the linkage variants --------------------------------------

def raw_columns(X: np.ndarray, cols: tuple[int, ...]) -> np.ndarray:
    """``X[:, cols]`` as float64, unscaled (the ``dmt`` convention of DLD)."""
    return np.ascontiguousarray(np.asarray(X[:, list(cols)], dtype=np.float64))


def scale_columns(X: np.ndarray, cols: tuple[int, ...], scale: np.ndarray) -> np.ndarray:
    """``X[:, cols] / scale`` (DRL2: raw values over the pair sd of each column)."""
    return np.asarray(X[:, list(cols)], dtype=np.float64) / scale


def pair_abs_sd(a: np.ndarray, b: np.ndarray) -> float:
    """Standard deviation of ``|a_i - b_j|`` over all ``len(a) * len(b)`` pairs, exactly.

    E|a - b| from sorted ``b`` and prefix sums (no pair matrix);
    E(a - b)^2 from the moments. Population sd (the divisor does not change
    which record is nearest). Both columns are summed in sorted order
    (:func:`sdcdist.moments.sorted_column`), so the scale is the same float in
    every row order of either file.
    """
    a = sorted_column(a)
    b = sorted_column(b)
    # |a - b| is the same with both files moved by one value: both are taken relative to
    # the middle value of a (a function of the values), so that the prefix sums below do
    # not cancel where the values sit far from 0 for their spread (keys like
    # 9007199254740993 + 0..99 gave an sd of 0). Subtracting one value keeps the order.
    finite = a[~np.isnan(a)]
    if finite.size:
        mid = finite[finite.size // 2]
        a, b = a - mid, b - mid
    cs = np.concatenate([[0.0], np.cumsum(b)])
    k = np.searchsorted(b, a, side="right")
    below = a * k - cs[k]
    above = (cs[-1] - cs[k]) - a * (len(b) - k)
    mean_abs = float(np.sum(below + above)) / (len(a) * len(b))
    ca, cb = a.mean(), b.mean()
    mean_sq = a.var() + b.var() + (ca - cb) ** 2
    return float(np.sqrt(max(mean_sq - mean_abs * mean_abs, 0.0)))


def rank_columns(X: np.ndarray, cols: tuple[int, ...], n_ref: int | None = None) -> np.ndarray:
    """Within-column ranks 1..n (ties get their average rank), shape (n, len(cols)).

    With ``n_ref`` (the other file's size, when the two differ) ranks are
    mapped onto the scale 1..n_ref: ``(r - 0.5) n_ref / n + 0.5``.
    """
    from scipy.stats import rankdata   # imported here: scipy.stats takes a second

    A = np.asarray(X[:, list(cols)], dtype=np.float64)
    R = rankdata(A, method="average", axis=0)
    n = A.shape[0]
    if n_ref is not None and n_ref != n:
        R = (R - 0.5) * (n_ref / n) + 0.5
    return R
