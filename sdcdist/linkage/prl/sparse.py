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
    if codes.size == 0:
        return codes, counts
    # a stable sort (quick on runs of increasing codes, as merged parts are), then each
    # code's counts summed in place
    order = np.argsort(codes, kind="stable")
    c = codes[order]
    start = np.flatnonzero(np.r_[True, c[1:] != c[:-1]])
    tot = np.add.reduceat(counts[order], start)
    keep = tot != 0
    return c[start][keep], tot[keep]


def merge_counts(*parts: tuple[np.ndarray, np.ndarray]) -> tuple[np.ndarray, np.ndarray]:
    """Sum of several sparse pattern counts (:func:`sparse_counts` form); exact, order-free."""
    if len(parts) == 1:
        return parts[0]
    return sparse_counts(np.concatenate([p[0] for p in parts]),
                         np.concatenate([p[1] for p in parts]))
