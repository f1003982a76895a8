"""Sparse PRL pattern counts: the patterns that occur (increasing codes) and their pair
counts, two int64 arrays (:func:`sparse_counts`); blocks merge exactly in any order
(:func:`merge_counts`). The pattern space is never materialised."""

from __future__ import annotations

import numpy as np

__all__ = ["sparse_counts", "merge_counts"]


def sparse_counts(codes: np.ndarray, counts: np.ndarray | None = None
                  ) -> tuple[np.ndarray, np.ndarray]:
    """Sparse pattern counts from per-pair pattern codes (or from weighted codes).

    This is the one representation of pattern counts used everywhere: only the
    patterns that occur, as two int64 arrays sorted by code, never a dense
    vector over all ``prod(n_levels)`` patterns (13 columns x 5 levels would be
    1.2e9 entries).

    Parameters
    ----------
    codes : int array, shape (n,)
        Mixed-radix pattern code of each pair (``sum_k level_k * radix_k``,
        :attr:`Comparison.radix`), in any order, repeats allowed.
    counts : int array, shape (n,), optional
        Multiplicity of each entry of ``codes`` (default 1 each), e.g. to merge
        several sparse counts: ``sparse_counts(concat(codes), concat(counts))``.

    Returns
    -------
    codes : ndarray of int64, shape (p,)
        The distinct codes that occur (with a non-zero count), increasing.
    counts : ndarray of int64, shape (p,)
        Number of pairs with each code (> 0). The result depends only on the
        multiset of codes, so counts merge exactly in any order.
    """
    codes = np.asarray(codes, dtype=np.int64).ravel()
    if counts is None:
        u, c = np.unique(codes, return_counts=True)
        return u.astype(np.int64), c.astype(np.int64)
    counts = np.asarray(counts, dtype=np.int64).ravel()
    if counts.shape != codes.shape:
        raise ValueError("codes and counts must have the same length")
    u, inv = np.unique(codes, return_inverse=True)
    c = np.zeros(u.size, dtype=np.int64)
    np.add.at(c, inv.ravel(), counts)
    keep = c != 0
    return u[keep].astype(np.int64), c[keep]


def merge_counts(*parts: tuple[np.ndarray, np.ndarray]) -> tuple[np.ndarray, np.ndarray]:
    """Sum of several sparse pattern counts (:func:`sparse_counts` form); exact, order-free."""
    if len(parts) == 1:
        return parts[0]
    codes = np.concatenate([np.asarray(p[0], dtype=np.int64).ravel() for p in parts])
    counts = np.concatenate([np.asarray(p[1], dtype=np.int64).ravel() for p in parts])
    if codes.size == 0:
        return codes, counts
    # the parts are runs of increasing codes: a stable sort merges them quickly, then the
    # counts of each code are summed in place (sparse_counts' result, without a hash)
    order = np.argsort(codes, kind="stable")
    c = codes[order]
    start = np.flatnonzero(np.r_[True, c[1:] != c[:-1]])
    tot = np.add.reduceat(counts[order], start)
    keep = tot != 0
    return c[start][keep], tot[keep]
