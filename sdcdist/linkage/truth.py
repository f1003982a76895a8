"""Which record is whose: the truth of a linkage (row order, identifiers, inverse).

A truth maps each query (masked) record to the row of its true record in the
candidate (original) file, -1 when that record is absent from the file.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from ..errors import SdcInputError

__all__ = ["row_truth", "truth_from_ids", "invert_truth"]


def row_truth(n_query: int, n_cand: int) -> np.ndarray:
    """Row-order truth: query row i's true record is candidate row i (if it exists)."""
    t = np.arange(n_query)
    t[t >= n_cand] = -1
    return t


def truth_from_ids(id_original: np.ndarray, id_masked: np.ndarray) -> np.ndarray:
    """Truth from an identifier column present in both files.

    Returns, for each masked record, the row of the original record with the
    same identifier (-1 if none).

    Raises
    ------
    SdcInputError
        If an identifier repeats within a file.
    """
    a = np.asarray(id_original)
    b = np.asarray(id_masked)
    for v, what in ((a, "original"), (b, "masked")):
        uniq = np.unique(v)
        if uniq.size != v.size:
            raise SdcInputError(f"the identifier column repeats {v.size - uniq.size} value(s) "
                                f"in the {what} file; identifiers must be unique per file")
    order = np.argsort(a, kind="stable")
    pos = np.searchsorted(a[order], b)
    pos = np.minimum(pos, max(len(a) - 1, 0))
    hit = (len(a) > 0) & (a[order][pos] == b) if len(a) else np.zeros(len(b), bool)
    return np.where(hit, order[pos], -1).astype(np.int64)


def invert_truth(truth: Any, n_q: int, n_c: int) -> np.ndarray:
    """Task: turn masked->original truth into original->masked (-1 where absent).

    ``truth`` is None for row order.
    """
    t = row_truth(n_q, n_c) if truth is None else np.asarray(truth, dtype=np.int64)
    inv = np.full(n_c, -1, dtype=np.int64)
    ok = np.flatnonzero(t >= 0)
    if np.unique(t[ok]).size != ok.size:
        raise SdcInputError("two masked records claim the same original record in the truth; "
                            "each original record can be the true record of one masked record")
    inv[t[ok]] = ok
    return inv
