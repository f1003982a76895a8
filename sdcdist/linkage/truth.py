"""Which record is whose: the truth of a linkage (row order, identifiers, inverse).

A truth maps each query (masked) record to the row of its true record in the
candidate (original) file, -1 when that record is absent from the file.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from ..errors import SdcInputError, bad_values_error, value_error

__all__ = ["row_truth", "truth_from_ids", "truth_counts", "check_truth", "invert_truth",
           "ids_of", "check_id_forms"]


def row_truth(n_query: int, n_cand: int) -> np.ndarray:
    """Row-order truth: query row i's true record is candidate row i (if it exists)."""
    t = np.arange(n_query)
    t[t >= n_cand] = -1
    return t


def truth_from_ids(id_original: np.ndarray, id_masked: np.ndarray, *,
                   column: str | None = None) -> np.ndarray:
    """Truth from an identifier column present in both files.

    Returns, for each masked record, the row of the original record with the
    same identifier (-1 if none). How many matched is :func:`truth_counts`
    of the result; callers report a partial match.

    Parameters
    ----------
    id_original, id_masked : array
        The identifier column of each file.
    column : str, optional
        The column's name, for messages.

    Raises
    ------
    SdcInputError
        If an identifier repeats within a file, or if no masked identifier
        occurs in the original file (every risk figure would be 0).
    """
    a = np.asarray(id_original)
    b = np.asarray(id_masked)
    name = f"identifier column {column!r}" if column is not None else "identifier column"
    for v, what in ((a, "original"), (b, "masked")):
        uniq = np.unique(v)
        if uniq.size != v.size:
            raise bad_values_error(column or "identifier", v.size - uniq.size, "repeated",
                                   "identifiers must be unique per file",
                                   where=f"the {what} file")
    order = np.argsort(a, kind="stable")
    pos = np.searchsorted(a[order], b)
    pos = np.minimum(pos, max(len(a) - 1, 0))
    hit = (len(a) > 0) & (a[order][pos] == b) if len(a) else np.zeros(len(b), bool)
    truth = np.where(hit, order[pos], -1).astype(np.int64)
    check_truth(truth, len(a), what=f"the {name}")
    return truth


def truth_counts(truth: np.ndarray) -> dict[str, int]:
    """``matched``: masked records whose true record is in the original file; ``unmatched``: the rest."""
    t = np.asarray(truth)
    matched = int(np.count_nonzero(t >= 0))
    return {"matched": matched, "unmatched": int(t.size) - matched}


def check_truth(truth: np.ndarray, n_cand: int, *, what: str = "the truth") -> dict[str, int]:
    """Refuse a truth that matches no masked record; return its :func:`truth_counts`.

    Raises
    ------
    SdcInputError
        If ``truth`` is not one row number in [-1, n_cand) per masked record,
        or if it has masked records but matches none of them.
    """
    t = np.asarray(truth)
    if t.ndim != 1 or (t.size and (not np.issubdtype(t.dtype, np.integer)
                                   or t.min() < -1 or t.max() >= n_cand)):
        raise value_error(what, f"one row of the original file (0..{n_cand - 1}) or -1 per "
                          "masked record")
    counts = truth_counts(t)
    if t.size and n_cand and counts["matched"] == 0:
        raise SdcInputError(
            f"{what} matches no record: none of the masked file's {t.size} records has "
            f"its identifier in the original file, so every risk figure would be 0. Give "
            "the column that identifies the same people in both files (--id COLUMN), or "
            "leave --id out to take row order as the truth")
    return counts


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


def ids_of(md: Any, id_column: str, what: str) -> np.ndarray:
    """The identifiers of the Microdata ``md``'s column ``id_column`` (``what``: which file,
    for messages): its numbers, or for a text (categorical) column its labels, so that two
    files match on their identifiers and not on the codes each file gives its own labels."""
    col = md.values[:, md.columns.index(id_column)]
    if id_column not in md.categories:
        return col
    missing = int(np.count_nonzero(np.isnan(col)))
    if missing:
        raise SdcInputError(f"the identifier column {id_column!r} of the {what} file has "
                            f"{missing} missing value(s); give every record its identifier, "
                            "or leave --id out to take row order as the truth")
    labels = np.asarray(md.categories[id_column], dtype=str)
    return labels[col.astype(np.int64)]


def check_id_forms(id_a: np.ndarray, id_b: np.ndarray, id_column: str) -> None:
    """Refuse identifiers that are text in one file and numbers in the other."""
    text_a, text_b = id_a.dtype.kind == "U", id_b.dtype.kind == "U"
    if text_a != text_b:
        raise SdcInputError(
            f"the identifier column {id_column!r} holds text in the "
            f"{'original' if text_a else 'masked'} file and numbers in the "
            f"{'masked' if text_a else 'original'} file, so no record could be matched by it; "
            f"give it the same form in both files (or read both as text: --categorical "
            f"{id_column})")
