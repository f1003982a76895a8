"""How the cells of a text file become values: the parsing rules every reader shares.

A CSV reader (Arrow's in :mod:`sdcdist.data.arrowcsv`, pandas' chunked reader in
:mod:`sdcdist.data.sources`) hands each column over as text exactly as the file
spells it (no stripping, no missing-value guessing), and these functions decide
(the Arrow reader applies them to each distinct cell of a block):

- **missing** (:func:`missing_mask`): a cell that is empty (or holds only
  whitespace), or one of the missing markers the user named
  (``--na-values``; compared after trimming surrounding whitespace). Nothing
  else: ``NA``, ``None``, ``null``, ``N/A`` are ordinary labels (a country
  code, "not applicable") unless named.
- **numbers** (:func:`parse_numbers`): a cell is a number when Python's
  ``float()`` reads it, except a spelling with underscores (``1_000``: Python's
  digit grouping, a probable typo in a data file) and the text ``nan`` (any case,
  signed), which is missing only when named in ``--na-values``; the value is
  exactly ``float(cell)`` (correctly rounded, so a file written with 17
  significant digits reads back bit for bit).
- **labels** (:func:`labels_text`): a categorical cell keeps its text verbatim,
  leading and trailing spaces included (``" A"`` and ``"A"`` are two categories).
- **column types** (:class:`TypeScan`, :func:`column_kind`): a column whose every
  present cell is a number is numeric; one where few are numbers is categorical
  (text); one where most cells are numbers and a few are not is refused as a
  probable typo (naming the column and the record numbers, never the cells),
  unless the user declares it categorical.

Every message names columns, counts and record numbers, never a cell.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence

import numpy as np

from ..errors import bad_values_error, empty_error, value_error

__all__ = ["missing_markers", "missing_mask", "parse_numbers", "strict_float", "labels_text",
           "TypeScan",
           "column_kind", "NUMERIC", "CATEGORICAL"]

NUMERIC = "numeric"
CATEGORICAL = "categorical"

#: How many of the non-numeric cells' record numbers a message lists.
_SHOWN_ROWS = 5


def missing_markers(na_values: Iterable[str] | str | None) -> frozenset[str]:
    """The user's missing-value markers, checked (a comma-separated string or a list).

    An empty marker is refused (an empty cell is missing anyway); markers are
    compared with each cell's text after trimming surrounding whitespace.
    """
    if na_values is None:
        return frozenset()
    if isinstance(na_values, str):
        items = na_values.split(",")
    else:
        items = list(na_values)
    out = set()
    for m in items:
        if not isinstance(m, str):
            raise value_error("missing-value markers (na_values)", "text",
                              got_text=f"a {type(m).__name__}",
                              hint="Give them as a list of strings, e.g. [NA, '-99'].")
        if not m.strip():
            raise empty_error("A missing-value marker (na_values)", "an empty cell is missing "
                              "anyway: name only non-empty markers, e.g. NA,-99")
        out.add(m.strip())
    return frozenset(out)


def missing_mask(text: np.ndarray, markers: frozenset[str] = frozenset()) -> np.ndarray:
    """Which cells of an object array of text are missing (bool array).

    ``None`` and float NaN (a typed reader's nulls), empty and whitespace-only
    cells, and cells equal to a marker after trimming are missing.
    """
    text = np.asarray(text, dtype=object)

    def missing(cell: object) -> bool:
        if isinstance(cell, str):
            stripped = cell.strip()
            return not stripped or stripped in markers
        if cell is None:
            return True
        if isinstance(cell, (list, tuple, np.ndarray)):
            return False
        import pandas as pd         # only for a typed reader's cells: text needs none
        return bool(pd.isna(cell))
    return np.fromiter((missing(c) for c in text.ravel().tolist()), dtype=bool,
                       count=text.size).reshape(text.shape)


def parse_numbers(text: np.ndarray, missing: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Numbers of the present cells: ``(values, bad)``.

    ``values`` (float64) is ``float(cell)`` for every present cell that Python reads
    as a number, NaN elsewhere; ``bad`` marks the present cells that are not numbers.
    """
    text = np.asarray(text, dtype=object)
    values = np.full(text.shape, np.nan)
    bad = np.zeros(text.shape, dtype=bool)
    present = ~np.asarray(missing, dtype=bool)
    cells = text[present]
    try:
        fast = cells.astype(np.float64)               # float(cell) for each cell
        if not np.isnan(fast).any() and not any("_" in c for c in cells.tolist()
                                                if isinstance(c, str)):
            values[present] = fast
            return values, bad
    except (ValueError, TypeError):
        pass
    out = np.empty(cells.shape)
    wrong = np.zeros(cells.shape, dtype=bool)
    for i, v in enumerate(cells.tolist()):
        try:
            out[i] = strict_float(v)
        except (ValueError, TypeError):
            out[i] = np.nan
            wrong[i] = True
    values[present] = out
    bad[present] = wrong
    return values, bad


def strict_float(cell: object) -> float:
    """``float(cell)``, refusing (ValueError) what a data file does not mean as a number:
    underscores (``1_000``) and the text ``nan``."""
    if isinstance(cell, str) and ("_" in cell or cell.strip().lstrip("+-").lower() == "nan"):
        raise ValueError("not a number in a data file")
    return float(cell)  # type: ignore[arg-type]


def labels_text(text: np.ndarray, missing: np.ndarray) -> np.ndarray:
    """An object array of the labels, verbatim, with ``None`` where missing."""
    out = np.array(text, dtype=object, copy=True)
    out[np.asarray(missing, dtype=bool)] = None
    return out


def column_kind(numbers: int, others: int) -> str:
    """``numeric`` when no present cell is a non-number, ``categorical`` when at most
    half of them are numbers, ``typo`` when most are numbers and some are not."""
    if others == 0:
        return NUMERIC
    if numbers > others:
        return "typo"
    return CATEGORICAL


class TypeScan:
    """Counts per column, chunk by chunk: present cells that are numbers and that are not,
    with the first record numbers (1-based) of the latter."""

    def __init__(self, names: Sequence[str], source: str = "the data"):
        self.names = list(names)
        self.source = source
        self.numbers = dict.fromkeys(self.names, 0)
        self.others = dict.fromkeys(self.names, 0)
        self.rows: dict[str, list[int]] = {c: [] for c in self.names}

    def update(self, name: str, missing: np.ndarray, bad: np.ndarray, offset: int) -> None:
        """Add one chunk of column ``name`` whose first record is record ``offset + 1``."""
        nb = int(np.count_nonzero(bad))
        self.others[name] += nb
        self.numbers[name] += int(np.count_nonzero(~np.asarray(missing))) - nb
        if nb and len(self.rows[name]) < _SHOWN_ROWS:
            idx = np.flatnonzero(bad)[:_SHOWN_ROWS - len(self.rows[name])]
            self.rows[name] += [int(i) + 1 + offset for i in idx]

    def text_so_far(self) -> list[str]:
        """Columns with a non-number so far."""
        return [c for c in self.names if self.others[c]]

    def kinds(self) -> dict[str, str]:
        """Each column's kind; raises for a numeric column with a few non-numbers."""
        out = {c: column_kind(self.numbers[c], self.others[c]) for c in self.names}
        typos = [c for c in self.names if out[c] == "typo"]
        if typos:
            c = typos[0]
            rows = ", ".join(str(r) for r in self.rows[c])
            more = ", ..." if self.others[c] > len(self.rows[c]) else ""
            total = self.numbers[c] + self.others[c]
            also = (f" (so do columns {typos[1:]})" if len(typos) > 1 else "")
            raise bad_values_error(
                c, self.others[c], f"non-numeric (of {total})",
                f"the column looks numeric{also}, and a typo would silently turn it into a "
                "categorical column: correct those values (or name a missing-value marker "
                f"with --na-values), or declare the column categorical (--categorical {c}) "
                "if it is one", where=self.source, rows=rows + more)
        return out
