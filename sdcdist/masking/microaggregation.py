"""Microaggregation: records grouped into clusters of k..2k-1, values replaced by group means.

Seven variants (CATALOG.md): MDAV on all columns (``micmul``), MDAV on consecutive
blocks of 2, 3 or 4 columns (``mic2mul``, ``mic3mul``, ``mic4mul``), individual
ranking (``micir``) and the two projection methods (``micz``, ``micpcp``).

Every function can return the group labels: call it with ``return_groups=True``
to get ``(X', labels)`` where ``labels`` has the shape of X and
``labels[i, j]`` is the group of record i used for column j (group numbers are
0-based and unique within a column; columns aggregated together share their
labels). :func:`mdav_groups` gives MDAV's grouping of any array directly.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numba
import numpy as np

from ..errors import param_error
from ..options import check_option
from ._registry import register

__all__ = ["mdav_groups", "micmul", "mic2mul", "mic3mul", "mic4mul", "micir", "micz",
           "micpcp", "check_k", "zscores", "group_means", "consecutive_groups"]

K_ALLOWED = "an integer in [2, n/2]"


def check_k(k: int, n: int, method: str) -> int:
    """Check the group size against the number of records: 2 <= k <= n/2.

    Raises
    ------
    SdcInputError
        With the standard message, naming n.
    """
    if isinstance(k, bool) or int(k) != k or k < 2 or 2 * k > n:
        raise param_error("k", method, f"{K_ALLOWED} (n = {n} records here, so at most "
                                       f"{max(n // 2, 0)})", k)
    return int(k)


def zscores(X: np.ndarray) -> np.ndarray:
    """Columns standardised with their own mean and sd (ddof=1); a constant column gives 0."""
    mean = X.mean(axis=0)
    sd = X.std(axis=0, ddof=1) if X.shape[0] > 1 else np.zeros(X.shape[1])
    sd = np.where(sd > 0, sd, 1.0)
    return (X - mean) / sd


def group_means(x: np.ndarray, labels: np.ndarray) -> np.ndarray:
    """Replace each value of ``x`` (n,) or (n, m) by the mean of its group.

    ``labels`` (n,) holds group numbers 0..G-1.
    """
    counts = np.bincount(labels)
    if x.ndim == 1:
        return (np.bincount(labels, weights=x, minlength=counts.size) / counts)[labels]
    out = np.empty_like(x)
    for j in range(x.shape[1]):
        out[:, j] = (np.bincount(labels, weights=x[:, j], minlength=counts.size) / counts)[labels]
    return out


def consecutive_groups(score: np.ndarray, k: int, leftover: str = "end") -> np.ndarray:
    """Group labels: records sorted by ``score`` (ties by record order), cut into groups of k.

    The n mod k records left over join one group, so every group has
    k..2k-1 records: the last one (``leftover="end"``) or group
    ``(n // k - 1) // 2`` counted from 0 in the sorted order (``"middle"``).
    """
    check_option("leftover", leftover)
    n = score.shape[0]
    order = np.argsort(score, kind="stable")
    if leftover == "end":
        g = np.minimum(np.arange(n) // k, n // k - 1)
    else:
        q = n // k
        sizes = np.full(q, k, dtype=np.int64)
        sizes[(q - 1) // 2] += n - q * k
        g = np.repeat(np.arange(q, dtype=np.int64), sizes)
    labels = np.empty(n, dtype=np.int64)
    labels[order] = g
    return labels


# --------------------------------------------------------------------------- MDAV

@numba.njit(cache=True)
def _less(d: float, i: int, best_d: float, best_i: int) -> bool:  # pragma: no cover
    return d < best_d or (d == best_d and i < best_i)


@numba.njit(cache=True)
def _distances(W, m, point, d, idx, farthest=True):  # pragma: no cover - compiled
    """Squared distances of the m live records (columns of W, p x n) to ``point`` into d.

    Returns the position of the farthest (ties: lowest record number), or -1
    when ``farthest`` is False. One coordinate row at a time, so the inner
    loop is a vector operation.
    """
    p = W.shape[0]
    for i in range(m):
        d[i] = 0.0
    for j in range(p):
        c = point[j]
        row = W[j]
        for i in range(m):
            t = row[i] - c
            d[i] += t * t
    if not farthest:
        return -1
    best = 0
    best_d = d[0]
    for i in range(1, m):
        di = d[i]
        if di >= best_d and (di > best_d or idx[i] < idx[best]):
            best = i
            best_d = di
    return best


@numba.njit(cache=True)
def _nearest(d, idx, m, centre, k, buf_d, buf_i, buf_pos):  # pragma: no cover - compiled
    """Positions of the k-1 smallest d other than position ``centre`` (ties: lowest record).

    Kept in a small sorted buffer (insertion), so one pass costs O(m) for small k.
    Returns the number found (k-1 when m >= k).
    """
    cnt = 0
    want = k - 1
    if want <= 0:
        return 0
    worst = np.inf              # the buffer's largest distance once it is full
    for i in range(m):
        di = d[i]
        if di > worst or i == centre:   # the common case: one compare
            continue
        ii = idx[i]
        if cnt == want:
            if not _less(di, ii, buf_d[cnt - 1], buf_i[cnt - 1]):
                continue
            pos = cnt - 1
        else:
            pos = cnt
            cnt += 1
        while pos > 0 and _less(di, ii, buf_d[pos - 1], buf_i[pos - 1]):
            buf_d[pos] = buf_d[pos - 1]
            buf_i[pos] = buf_i[pos - 1]
            buf_pos[pos] = buf_pos[pos - 1]
            pos -= 1
        buf_d[pos] = di
        buf_i[pos] = ii
        buf_pos[pos] = i
        if cnt == want:
            worst = buf_d[cnt - 1]
    return cnt


@numba.njit(cache=True)
def _remove(W, idx, pos_of, m, positions, npos):  # pragma: no cover - compiled
    """Remove live positions (distinct) by moving the last live column into each; returns m."""
    # from the highest position down, so a moved column is never one still to remove
    srt = np.sort(positions[:npos])
    p = W.shape[0]
    for t in range(npos - 1, -1, -1):
        q = srt[t]
        m -= 1
        pos_of[idx[q]] = -1
        if q != m:
            for j in range(p):
                W[j, q] = W[j, m]
            idx[q] = idx[m]
            pos_of[idx[q]] = q
    return m


@numba.njit(cache=True)
def _centroid(W, m, out):  # pragma: no cover - compiled
    """Column means of the m live records; four running sums break the add chain."""
    p = W.shape[0]
    q = m - m % 4
    for j in range(p):
        row = W[j]
        s0 = s1 = s2 = s3 = 0.0
        for i in range(0, q, 4):
            s0 += row[i]
            s1 += row[i + 1]
            s2 += row[i + 2]
            s3 += row[i + 3]
        for i in range(q, m):
            s0 += row[i]
        out[j] = ((s0 + s1) + (s2 + s3)) / m


@numba.njit(cache=True)
def _group_around(W, idx, pos_of, m, centre, k, d, labels, g, buf_d, buf_i,
                  buf_pos):  # pragma: no cover - compiled
    """Group the live record at position ``centre`` with its k-1 nearest; returns new m.

    ``d`` must hold the squared distances of the live records to ``centre``.
    """
    cnt = _nearest(d, idx, m, centre, k, buf_d, buf_i, buf_pos)
    buf_pos[cnt] = centre
    for t in range(cnt + 1):
        labels[idx[buf_pos[t]]] = g
    return _remove(W, idx, pos_of, m, buf_pos, cnt + 1)


@numba.njit(cache=True)
def _mdav(Zt, k):  # pragma: no cover - compiled
    """MDAV on the columns of Zt (p x n, a private copy that is overwritten)."""
    p, n = Zt.shape
    labels = np.full(n, -1, dtype=np.int64)
    idx = np.arange(n)          # record number at each live position
    pos_of = np.arange(n)       # live position of each record (-1 once grouped)
    d = np.empty(n)
    c = np.empty(p)
    pr = np.empty(p)
    ps = np.empty(p)
    buf_d = np.empty(k)
    buf_i = np.empty(k, dtype=np.int64)
    buf_pos = np.empty(k, dtype=np.int64)
    m = n
    g = 0
    while m >= 3 * k:
        _centroid(Zt, m, c)
        r = _distances(Zt, m, c, d, idx)
        for j in range(p):
            pr[j] = Zt[j, r]
        s = _distances(Zt, m, pr, d, idx)
        rec_s = idx[s]
        for j in range(p):
            ps[j] = Zt[j, s]
        m = _group_around(Zt, idx, pos_of, m, r, k, d, labels, g, buf_d, buf_i, buf_pos)
        g += 1
        if pos_of[rec_s] < 0:
            # s is the farthest from r, so it joins r's group only when all the
            # distances tie; then take the farthest from r among those left
            s = _distances(Zt, m, pr, d, idx)
            for j in range(p):
                ps[j] = Zt[j, s]
        else:
            s = pos_of[rec_s]
        _distances(Zt, m, ps, d, idx, False)
        m = _group_around(Zt, idx, pos_of, m, s, k, d, labels, g, buf_d, buf_i, buf_pos)
        g += 1
    if m >= 2 * k:
        _centroid(Zt, m, c)
        r = _distances(Zt, m, c, d, idx)
        for j in range(p):
            pr[j] = Zt[j, r]
        _distances(Zt, m, pr, d, idx, False)
        m = _group_around(Zt, idx, pos_of, m, r, k, d, labels, g, buf_d, buf_i, buf_pos)
        g += 1
    for i in range(m):
        labels[idx[i]] = g
    return labels


def mdav_groups(Z: np.ndarray, k: int) -> np.ndarray:
    """MDAV grouping of the rows of ``Z`` (already scaled as wanted).

    Repeat {c = centroid of the remaining records; r = the farthest from c;
    s = the farthest from r; group r with its k-1 nearest; group s with its
    k-1 nearest} while at least 3k records remain; then, if at least 2k
    remain, one more group around the record farthest from their centroid,
    and the rest form the last group; otherwise the rest form one group.
    Distances are Euclidean; ties go to the lowest record number.

    Parameters
    ----------
    Z : ndarray, shape (n, p)
    k : int
        Minimum group size, 1 <= k and 2k <= n (or n < 2k: one group).

    Returns
    -------
    ndarray of int64, shape (n,)
        Group number of each record, 0..G-1 in the order the groups were formed.
        Every group has k..2k-1 records.
    """
    Z = np.asarray(Z, dtype=np.float64)
    if Z.ndim == 1:
        Z = Z[:, None]
    Zt = np.array(Z.T, order="C", copy=True)   # private copy (always), variables x records
    return _mdav(Zt, int(k))


# --------------------------------------------------------------------------- methods

def _finish(X: np.ndarray, labels: np.ndarray, return_groups: bool):
    """X' from per-column labels (n, m); optionally with the labels."""
    out = np.empty_like(X)
    for j in range(X.shape[1]):
        out[:, j] = group_means(X[:, j], labels[:, j])
    return (out, labels) if return_groups else out


def _mdav_blocks(X: np.ndarray, k: int, width: int | None, method: str,
                 return_groups: bool):
    n, m = X.shape
    k = check_k(k, n, method)
    Z = zscores(X)
    width = m if width is None else width
    labels = np.empty((n, m), dtype=np.int64)
    for a in range(0, m, width):
        b = min(a + width, m)
        labels[:, a:b] = mdav_groups(Z[:, a:b], k)[:, None]
    return _finish(X, labels, return_groups)


def _check_k_data(X: np.ndarray, params: Sequence[float], *, method: str,
                  **_: Any) -> None:
    """Data check of the microaggregation methods: ``2 <= k <= n/2`` for every k."""
    for p in params:
        check_k(int(p), X.shape[0], method)


_K = dict(param="k", kind="int", low=2, high=float("inf"), random=False, allowed=K_ALLOWED,
          data_check=_check_k_data)


@register("micmul", **_K, reference="[DMT §2]",
          description="MDAV microaggregation on all columns (z-scored): groups of k..2k-1 "
                      "records replaced by their means")
def micmul(X: np.ndarray, k: int, *, rng: np.random.Generator | None = None,
           return_groups: bool = False):
    """Multivariate MDAV microaggregation on all columns.

    Records are grouped by :func:`mdav_groups` on the columns z-scored with
    X's means and sds (ddof=1); every value is replaced by its group's mean in
    original units, so column means are kept.

    Parameters
    ----------
    X : ndarray, shape (n, m)
    k : int
        Minimum group size, 2 <= k <= n/2.
    rng : ignored (the method is deterministic)
    return_groups : bool
        Also return the labels, shape (n, m) (every column has the same labels).

    Returns
    -------
    ndarray, shape (n, m), or (ndarray, labels)
    """
    return _mdav_blocks(X, k, None, "micmul", return_groups)


def _make_block_method(width: int):
    name = f"mic{width}mul"

    def method(X: np.ndarray, k: int, *, rng: np.random.Generator | None = None,
               return_groups: bool = False):
        return _mdav_blocks(X, k, width, name, return_groups)

    method.__name__ = method.__qualname__ = name
    method.__doc__ = f"""MDAV run separately on consecutive blocks of {width} columns.

    Columns 1..{width}, {width + 1}..{2 * width}, ... are each microaggregated by
    :func:`mdav_groups` (z-scored with X's moments); when the number of columns is
    not a multiple of {width}, the last block holds the remaining columns.

    Parameters and return as :func:`micmul`; the labels are shared within a
    block.
    """
    return register(name, **_K, reference="[DMT §2]",
                    description=f"MDAV microaggregation on consecutive blocks of {width} "
                                f"columns, each block grouped separately")(method)


mic2mul = _make_block_method(2)
mic3mul = _make_block_method(3)
mic4mul = _make_block_method(4)


@register("micir", **_K, reference="[DMT §2]", options=("leftover",),
          description="individual ranking: each column sorted alone, consecutive groups of k "
                      "replaced by their means")
def micir(X: np.ndarray, k: int, *, rng: np.random.Generator | None = None,
          leftover: str = "end", return_groups: bool = False):
    """Individual ranking microaggregation.

    Each column alone is sorted (ties by record order) and cut into
    consecutive groups of k; the n mod k values left over join the last
    group (or the middle one, option ``leftover``). Values are replaced by
    their group's mean.

    Parameters and return as :func:`micmul`; the labels hold one grouping per
    column. Also:

    leftover : {"end", "middle"}
        Where the group holding the n mod k left-over records lies in the
        sorted order: the last group (``"end"``, default) or group
        ``(n // k - 1) // 2`` counted from 0 (``"middle"``; with it Table 2 of
        [DMT] is reproduced where k does not divide n).
    """
    n, m = X.shape
    k = check_k(k, n, "micir")
    labels = np.column_stack([consecutive_groups(X[:, j], k, leftover) for j in range(m)])
    return _finish(X, labels, return_groups)


def first_component_scores(Z: np.ndarray) -> np.ndarray:
    """Scores of the rows of Z (n, p) on the first principal component of Z.

    The component is the leading eigenvector of Z's covariance; its sign is
    fixed so that its entry of largest absolute value (the first such) is
    positive, which makes the projection order reproducible.
    """
    C = np.cov(Z, rowvar=False).reshape(Z.shape[1], Z.shape[1])
    w, V = np.linalg.eigh(C)
    v = V[:, -1]
    if v[np.argmax(np.abs(v))] < 0:
        v = -v
    return Z @ v


def _projected(X: np.ndarray, k: int, method: str, score_of, return_groups: bool,
               leftover: str = "end"):
    n, m = X.shape
    k = check_k(k, n, method)
    labels = consecutive_groups(score_of(zscores(X)), k, leftover)
    return _finish(X, np.repeat(labels[:, None], m, axis=1), return_groups)


@register("micz", **_K, reference="[DMT §2]", options=("leftover",),
          description="records sorted by the sum of their z-scores, consecutive groups of k "
                      "replaced by their means")
def micz(X: np.ndarray, k: int, *, rng: np.random.Generator | None = None,
         leftover: str = "end", return_groups: bool = False):
    """Microaggregation on the z-score projection.

    Records are sorted by the sum of their z-scores (X's means and sds,
    ddof=1; ties by record order) and cut into consecutive groups of k, the
    n mod k left over joining the last group (or the middle one, option
    ``leftover`` as in :func:`micir`); all columns are replaced by group means.

    Parameters and return as :func:`micmul`; ``leftover`` as :func:`micir`.
    """
    return _projected(X, k, "micz", lambda Z: Z.sum(axis=1), return_groups, leftover)


@register("micpcp", **_K, reference="[DMT §2]", options=("leftover",),
          description="records sorted by their first principal component score, consecutive "
                      "groups of k replaced by their means")
def micpcp(X: np.ndarray, k: int, *, rng: np.random.Generator | None = None,
           leftover: str = "end", return_groups: bool = False):
    """Microaggregation on the first principal component projection.

    As :func:`micz`, with records sorted by their score on the first
    principal component of the z-scored data (:func:`first_component_scores`).

    Parameters and return as :func:`micmul`; ``leftover`` as :func:`micir`.
    """
    return _projected(X, k, "micpcp", first_component_scores, return_groups, leftover)
