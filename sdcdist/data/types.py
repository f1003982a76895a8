"""Column types: numeric or categorical, and the checks of roles that depend on them.

A categorical column is stored as integer codes ``0 .. L-1`` (as float64 in the
``values`` array, so every kernel keeps one dtype) plus its labels, in code
order, in the store's ``categories`` attribute (``{column: [label, ...]}``).
A missing categorical value (a value set to missing by local suppression) is
NaN. Labels are sorted numerically where they read as numbers, else as text,
so the codes do not depend on the order of the records or on chunking.

A text column is categorical automatically; a numeric column is categorical
when declared (``--categorical A,B`` / ``categorical: [A, B]``).

Every check here names columns, counts and positions, never a value.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from typing import Any

import numpy as np

from ..errors import (SdcInputError, column_positions, count_error, unknown_name_error,
                      weight_error)
from ..roles import ROLES, first_clash, role_clash_error

__all__ = ["MAX_LEVELS", "ROLES", "label_order", "encode_column", "LabelCollector",
           "check_roles", "check_household_role", "check_household_ids", "check_weights",
           "as_text"]

#: Most distinct values a categorical column may have (more looks like an identifier
#: or free text, which is no quasi-identifier a frequency table can use).
MAX_LEVELS = 100_000

#: The roles a column may have.


def _sort_key(label: str) -> tuple:
    try:
        v = float(label)
    except (TypeError, ValueError):
        return (1, 0.0, str(label))
    if v != v:                      # "nan" as a label sorts with the text
        return (1, 0.0, str(label))
    return (0, v, str(label))


def label_order(labels: Iterable[str]) -> list[str]:
    """Labels in code order: numbers numerically first, then text.

    >>> label_order(["10", "9", "b", "a"])
    ['9', '10', 'a', 'b']
    """
    return sorted({str(x) for x in labels}, key=_sort_key)


def as_text(values: Any) -> np.ndarray:
    """An object array of str (None where missing) from a pandas Series or array."""
    import pandas as pd
    s = pd.Series(values, copy=False)
    miss = s.isna().to_numpy()
    if s.dtype == object or pd.api.types.is_string_dtype(s.dtype):
        out = s.to_numpy(dtype=object, na_value=None).copy()
    else:
        num = s.to_numpy()
        if np.issubdtype(num.dtype, np.floating):
            whole = np.isfinite(num) & (num == np.round(num))
            out = np.array([str(int(v)) if w else str(v) for v, w in zip(num, whole)],
                           dtype=object)
        else:
            out = num.astype(str).astype(object)
    out[miss] = None
    return out


class LabelCollector:
    """The distinct labels of categorical columns, fed chunk by chunk."""

    def __init__(self, names: Sequence[str], source: str = "the data"):
        self.names = list(names)
        self.source = source
        self.labels: dict[str, set[str]] = {c: set() for c in self.names}

    def update(self, frame: Any) -> None:
        import pandas as pd
        for c in self.names:
            vals = pd.unique(as_text(frame[c]))
            self.labels[c].update(v for v in vals if v is not None)
            if len(self.labels[c]) > MAX_LEVELS:
                raise too_many_levels(c, self.source)

    def finish(self) -> dict[str, list[str]]:
        return {c: label_order(self.labels[c]) for c in self.names}


def too_many_levels(column: str, source: str) -> SdcInputError:
    """The error of a text column with more distinct values than a categorical column may
    have (the readers' shared message)."""
    return count_error(f"Categorical column {column!r} of {source}", f"at most {MAX_LEVELS}",
                       "distinct values", "more", "an identifier or free text? Leave it out "
                       "with --columns, or recode it into fewer categories first")


def encode_column(values: Any, labels: Sequence[str]) -> np.ndarray:
    """Codes (float64, NaN where missing) of ``values`` under ``labels``.

    Raises
    ------
    SdcInputError
        A value not among the labels (never shown).
    """
    import pandas as pd
    text = as_text(values)
    cat = pd.Categorical(text, categories=list(labels))
    codes = cat.codes.astype(np.float64)
    bad = (codes < 0) & pd.notna(text)
    if bad.any():
        raise SdcInputError(f"{int(bad.sum())} values are not among the column's "
                            f"{len(labels)} categories")
    codes[codes < 0] = np.nan
    return codes


def check_roles(columns: Sequence[str], roles: Mapping[str, Sequence[str]],
                categorical: Iterable[str] = (), *, source: str = "the data") -> None:
    """Refuse unknown roles, unknown columns, a weight that is not one numeric column,
    more than one household id, and a column holding two roles that exclude each other
    (:data:`sdcdist.roles.EXCLUSIVE`).

    Messages name roles and columns only.
    """
    cats = set(categorical)
    for r, cols in roles.items():
        if r not in ROLES:
            raise unknown_name_error(f"role in {source}", r, ROLES)
        column_positions(cols, columns, what=f"{r} column")
    w = list(roles.get("weight") or [])
    if len(w) > 1:
        raise count_error(f"The weight role of {source}", "exactly 1", "column",
                          f"{len(w)} ({', '.join(w)})", "give one sampling-weight column")
    if w and w[0] in cats:
        raise weight_error(w[0], fix="name a numeric column as the weight, or leave the "
                           "weight role out")
    check_household_role(roles, source=source)
    clash = first_clash(roles)
    if clash is not None:
        raise role_clash_error(*clash, source=source)


def check_household_role(roles: Mapping[str, Sequence[str]], *, source: str = "the data"
                         ) -> None:
    """Refuse more than one household id column (its clashes with other roles are the
    rules of :data:`sdcdist.roles.EXCLUSIVE`, checked by :func:`check_roles`)."""
    h = list(roles.get("household") or [])
    if len(h) > 1:
        raise count_error(f"The household role of {source}", "exactly 1", "column",
                          f"{len(h)} ({', '.join(h)})", "give one household id column")


def check_household_ids(h: np.ndarray, name: str, source: str = "the data") -> None:
    """Refuse household ids that are not whole numbers (1.5 would make a household of its
    own); missing ids are refused where the household metrics read them."""
    h = np.asarray(h, dtype=np.float64)
    with np.errstate(invalid="ignore"):
        bad = int(np.count_nonzero(~np.isnan(h) & ~(np.isfinite(h) & (h == np.floor(h)))))
    if bad:
        raise SdcInputError(
            f"the household id column {name!r} of {source} has {bad} values that are not "
            "whole numbers; a household id names a household (1, 2, ... or any integer "
            "code): correct them, or declare the column categorical if its ids are text")


def bad_weights(w: np.ndarray) -> int:
    """How many of the weights ``w`` are not sampling weights: zero, negative or missing
    (the one rule :func:`check_weights` and a streaming reader's count apply)."""
    w = np.asarray(w, dtype=np.float64)
    return int(np.count_nonzero(~(np.isfinite(w) & (w > 0))))


def check_weights(w: np.ndarray, name: str) -> None:
    """Raise unless every weight is finite and > 0 (counts only in the message)."""
    bad = bad_weights(w)
    if bad:
        raise weight_error(name, bad=bad)
