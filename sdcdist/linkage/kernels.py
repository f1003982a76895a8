"""Record-linkage block kernels: plain numpy on one block of query rows x candidate rows.

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

import numpy as np

from ..errors import SdcInputError

__all__ = ["sq_distances", "block_top2", "merge_top2", "standardize", "true_sq_distances",
           "top2_link_credit", "credit_counts", "add_counts", "credit_total"]


def standardize(X: np.ndarray, cols: tuple[int, ...] | None = None, *,
                what: str = "file", names: tuple[str, ...] | None = None) -> np.ndarray:
    """Z-score the columns ``cols`` of ``X`` with its own means and sds (ddof=1).

    Raises
    ------
    SdcInputError
        If a selected column is constant (its sd is 0).
    """
    A = np.asarray(X[:, list(cols)] if cols is not None else X[:, :], dtype=np.float64)
    mu = A.mean(axis=0)
    sd = A.std(axis=0, ddof=1) if A.shape[0] > 1 else np.zeros(A.shape[1])
    bad = np.flatnonzero(~(sd > 0))
    if bad.size:
        label = [names[i] if names else (cols[i] if cols else i) for i in bad]
        raise SdcInputError(
            f"key column(s) {label} are constant in the {what}; distance linkage standardises "
            "each key column, so leave constant columns out of the key sets")
    return (A - mu) / sd


def sq_distances(Q: np.ndarray, C: np.ndarray) -> np.ndarray:
    """Squared Euclidean distances, shape (len(Q), len(C)), summed column by column."""
    D = np.zeros((Q.shape[0], C.shape[0]))
    for j in range(Q.shape[1]):
        diff = Q[:, j, None] - C[None, :, j]
        D += diff * diff
    return D


def true_sq_distances(Q: np.ndarray, C: np.ndarray, truth: np.ndarray) -> np.ndarray:
    """Squared distance of each query row to its true candidate (inf when absent).

    Summed column by column in the same order as :func:`sq_distances`.
    """
    out = np.zeros(Q.shape[0])
    ok = truth >= 0
    T = C[np.where(ok, truth, 0)]
    for j in range(Q.shape[1]):
        diff = Q[:, j] - T[:, j]
        out += diff * diff
    out[~ok] = np.inf
    return out


def block_top2(D: np.ndarray) -> dict[str, np.ndarray]:
    """Top-2 distinct distances with their multiplicities for each row of ``D``."""
    if D.shape[1] == 0:
        r = D.shape[0]
        return {"d1": np.full(r, np.inf), "c1": np.zeros(r, np.int64),
                "d2": np.full(r, np.inf), "c2": np.zeros(r, np.int64)}
    d1 = D.min(axis=1)
    at1 = D == d1[:, None]
    c1 = at1.sum(axis=1)
    rest = np.where(at1, np.inf, D)
    d2 = rest.min(axis=1)
    c2 = np.where(np.isfinite(d2), (rest == d2[:, None]).sum(axis=1), 0)
    return {"d1": d1, "c1": c1.astype(np.int64), "d2": d2, "c2": c2.astype(np.int64)}


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
