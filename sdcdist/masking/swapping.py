"""Rank swapping (Moore): values swapped with partners at most p% of n ranks away."""

from __future__ import annotations

import numba
import numpy as np

from ._registry import register

__all__ = ["rankswap", "rankswap_column_order"]


@numba.njit(cache=True)
def _swap_partners(h: int, u: np.ndarray) -> np.ndarray:  # pragma: no cover - compiled
    """Partner rank of each rank 0..n-1 after Moore's walk.

    ``u`` holds n uniform draws in [0, 1), one per rank (rank i uses ``u[i]``
    when it picks a partner). Returns ``perm`` with ``perm[i]`` = the rank whose
    value ends up at rank i. The untaken ranks are kept in a Fenwick tree so
    that "the k-th untaken rank after i" costs O(log n): O(n log n) per column
    whatever h is.
    """
    n = u.shape[0]
    perm = np.arange(n)
    taken = np.zeros(n, dtype=np.bool_)
    tree = np.zeros(n + 1, dtype=np.int64)  # Fenwick tree of untaken flags (1-based)
    for i in range(1, n + 1):
        tree[i] += 1
        parent = i + (i & -i)
        if parent <= n:
            tree[parent] += tree[i]
    top = 1
    while top * 2 <= n:
        top *= 2
    for i in range(n):
        if taken[i]:
            continue
        # take rank i out of the tree
        taken[i] = True
        k = i + 1
        while k <= n:
            tree[k] -= 1
            k += k & -k
        hi = min(i + h, n - 1)
        if hi <= i:
            continue
        # untaken ranks in (i, hi]: prefix(hi+1) - prefix(i+1); all ranks <= i are taken
        cnt = 0
        k = hi + 1
        while k > 0:
            cnt += tree[k]
            k -= k & -k
        if cnt == 0:
            continue
        target = int(u[i] * cnt)
        if target >= cnt:
            target = cnt - 1
        # find the (target+1)-th untaken rank overall (ranks <= i are all taken)
        want = target + 1
        pos = 0
        step = top
        while step > 0:
            nxt = pos + step
            if nxt <= n and tree[nxt] < want:
                pos = nxt
                want -= tree[nxt]
            step //= 2
        j = pos  # 0-based rank (1-based pos + 1, minus 1)
        taken[j] = True
        k = j + 1
        while k <= n:
            tree[k] -= 1
            k += k & -k
        perm[i] = j
        perm[j] = i
    return perm


def rankswap_column_order(x: np.ndarray, p: float, rng: np.random.Generator) -> np.ndarray:
    """Rank-swap one column; returns the new column (same multiset of values)."""
    n = x.shape[0]
    h = int(np.floor(p * n / 100.0))
    order = np.argsort(x, kind="stable")  # rank r -> record order[r]
    perm = _swap_partners(h, rng.random(n))
    out = np.empty_like(x)
    out[order] = x[order[perm]]
    return out


@register("rankswap", param="p", kind="float", low=0.0, high=100.0, random=True,
          allowed="a percentage in [0, 100]",
          description="rank swapping: each value swapped with a random partner at most p% of n ranks away",
          reference="[DMT §2, Moore]")
def rankswap(X: np.ndarray, p: float, *, rng: np.random.Generator) -> np.ndarray:
    """Moore's rank swapping, column by column.

    Each column is ordered (ties by record order); walking the ranks from the
    lowest, every value not yet swapped is swapped with a value chosen
    uniformly among the not-yet-swapped ones whose rank is higher by at most
    ``floor(p * n / 100)``; when there is none it stays.

    Parameters
    ----------
    X : ndarray, shape (n, m)
    p : float
        Maximum rank distance as a percentage of n.
    rng : numpy.random.Generator

    Returns
    -------
    ndarray, shape (n, m)
        Every column holds exactly the multiset of values of X's column.
    """
    out = np.empty_like(X)
    for j in range(X.shape[1]):
        out[:, j] = rankswap_column_order(X[:, j], p, rng)
    return out
