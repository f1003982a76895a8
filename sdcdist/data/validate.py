"""Checks that microdata are usable, with messages that never show a value."""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from ..errors import SdcInputError, bad_values_error, constant_error, count_error, value_error

__all__ = ["check_column_names", "check_values", "first_rows", "MIN_RECORDS",
           "TINY_MAGNITUDE"]

MIN_RECORDS = 3


def first_rows(mask: np.ndarray, offset: int = 0, limit: int = 3) -> list[int]:
    """1-based record numbers of the first ``limit`` True entries of ``mask``."""
    return [int(i) + 1 + offset for i in np.flatnonzero(mask)[:limit]]


def _rows_text(rows: Sequence[int], count: int) -> str:
    more = ", ..." if count > len(rows) else ""
    return ", ".join(str(r) for r in rows) + more


def _unsafe_name(name: str) -> bool:
    """Commas separate names in --keys/--columns and key-set labels; control characters
    (line breaks, tabs, ...) break one-line messages and logs."""
    return "," in name or any(ord(ch) < 32 or 0x7F <= ord(ch) < 0xA0 or ch in "\u2028\u2029"
                              for ch in name)


def _capital(source: str) -> str:
    """``source`` at the start of a sentence (``the data`` -> ``The data``)."""
    return source[:1].upper() + source[1:] if source.startswith("the ") else source


def check_column_names(names: Sequence[str], source: str = "the data") -> None:
    """Raise if names are empty, blank or duplicated."""
    if len(names) == 0:
        raise count_error(_capital(source), "at least 1", "column", 0,
                          "sdcdist needs at least one numeric column")
    blank = [i + 1 for i, c in enumerate(names) if str(c).strip() == ""]
    if blank:
        raise value_error(f"The column names of {source}", "non-empty",
                          got_text=f"unnamed columns at positions {blank}",
                          hint="Give every column a header name.")
    unsafe = [i + 1 for i, c in enumerate(names) if _unsafe_name(str(c))]
    if unsafe:
        raise value_error(f"The column names of {source}",
                          "free of commas, line breaks and other control characters",
                          got_text=f"such names at positions {unsafe}",
                          hint="Such names cannot be given to --columns or --keys and break "
                               "one-line messages: rename these columns.")
    seen: dict[str, int] = {}
    dups = []
    for c in names:
        seen[c] = seen.get(c, 0) + 1
        if seen[c] == 2:
            dups.append(c)
    if dups:
        raise value_error(f"The column names of {source}", "unique",
                          got_text=f"duplicates {dups}",
                          hint="Rename them so that every column name is unique.")


#: A non-constant numeric column all of whose values are below this in magnitude is refused:
#: their squares (below 1e-300) come within a few powers of ten of float64's smallest
#: normal number (2.2e-308), and a variance, a distance or a noise sd on such a column
#: underflows (to 0 for subnormal values).
TINY_MAGNITUDE = 1e-150


class ValueChecker:
    """Streaming check of record chunks: missing/infinite values and constant columns.

    Feed chunks with :meth:`update` (record offset first), then call :meth:`finish`.
    Only counts and 1-based record numbers are kept, never values, except the
    per-column minimum and maximum needed to find constant columns, which stay
    in memory and are never printed.
    """

    def __init__(self, names: Sequence[str], source: str = "the data"):
        self.names = list(names)
        self.source = source
        m = len(self.names)
        self.n = 0
        self.nan = np.zeros(m, dtype=np.int64)
        self.inf = np.zeros(m, dtype=np.int64)
        self.nan_rows: list[list[int]] = [[] for _ in range(m)]
        self.inf_rows: list[list[int]] = [[] for _ in range(m)]
        self.lo = np.full(m, np.inf)
        self.hi = np.full(m, -np.inf)

    def update(self, block: np.ndarray) -> None:
        block = np.asarray(block, dtype=np.float64)
        if block.shape[0]:
            # NaN-ignoring extremes; a column holding an infinity is refused by finish()
            # before its extremes are used, so only such columns are searched for them
            lo = np.fmin.reduce(block, axis=0)
            hi = np.fmax.reduce(block, axis=0)
            inf_cols = np.flatnonzero(np.isinf(lo) | np.isinf(hi))
            nan_cols = np.flatnonzero(np.isnan(block).any(axis=0))
        else:
            lo = hi = None
            inf_cols = nan_cols = np.empty(0, dtype=np.intp)
        for j in nan_cols:
            isnan = np.isnan(block[:, j])
            self.nan[j] += int(isnan.sum())
            if len(self.nan_rows[j]) < 3:
                self.nan_rows[j] += first_rows(isnan, self.n, 3 - len(self.nan_rows[j]))
        for j in inf_cols:
            isinf = np.isinf(block[:, j])
            self.inf[j] += int(isinf.sum())
            if len(self.inf_rows[j]) < 3:
                self.inf_rows[j] += first_rows(isinf, self.n, 3 - len(self.inf_rows[j]))
        if lo is not None:
            self.lo = np.fmin(self.lo, lo)
            self.hi = np.fmax(self.hi, hi)
        self.n += block.shape[0]

    def finish(self, *, allow_constant: bool = False, constant_ok: Sequence[str] = (),
               missing_ok: Sequence[str] = ()) -> None:
        """Raise :class:`SdcInputError` for the first problem found.

        ``missing_ok``: columns that may hold missing values (categorical columns,
        where a missing value is a wildcard or a suppressed value).
        """
        if self.n == 0:
            raise count_error(_capital(self.source), f"at least {MIN_RECORDS}", "records", 0)
        for j, name in enumerate(self.names):
            if self.nan[j] and name not in missing_ok:
                raise bad_values_error(
                    name, self.nan[j], "missing", "sdcdist needs complete numeric data: impute "
                    "or drop them first (a categorical column may have missing values: "
                    "declare an integer-coded one with --categorical)", where=self.source,
                    rows=_rows_text(self.nan_rows[j], self.nan[j]))
            if self.inf[j]:
                raise bad_values_error(
                    name, self.inf[j], "infinite", "sdcdist needs finite numeric data: replace "
                    "or drop them first", where=self.source,
                    rows=_rows_text(self.inf_rows[j], self.inf[j]))
        if self.n < MIN_RECORDS:
            raise count_error(_capital(self.source), f"at least {MIN_RECORDS}", "records", self.n)
        if not allow_constant:
            const = [name for j, name in enumerate(self.names)
                     if self.lo[j] == self.hi[j] and name not in constant_ok]
            if const:
                raise constant_error(const, self.source, "they carry no information and "
                                     "break standardisation", "drop them (select the others "
                                     "with --columns)")
        tiny = [name for j, name in enumerate(self.names) if self.lo[j] != self.hi[j]
                and max(abs(self.lo[j]), abs(self.hi[j])) < TINY_MAGNITUDE]
        if tiny:
            raise SdcInputError(
                f"Column(s) {tiny} of {self.source} hold only values below {TINY_MAGNITUDE:.0e} "
                "in magnitude (near the smallest float64, 2.2e-308): their squares underflow, "
                "so their variance reads as 0 (standardised metrics take them for constant, "
                "noise on them would add none); rescale them (e.g. express them in smaller "
                "units) first.")


def check_values(values: np.ndarray, names: Sequence[str], source: str = "the data", *,
                 allow_constant: bool = False) -> None:
    """Validate an in-memory (n, m) array; raise :class:`SdcInputError` on a problem."""
    values = np.asarray(values)
    if values.ndim != 2:
        raise value_error(source, "2-D (records x variables)",
                          got_text=f"shape {values.shape}")
    check_column_names(names, source)
    if values.shape[1] != len(names):
        raise count_error(f"The names of {source}", f"exactly {values.shape[1]}",
                          "names (one per column)", len(names))
    checker = ValueChecker(names, source)
    checker.update(values)
    checker.finish(allow_constant=allow_constant)
