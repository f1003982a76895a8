"""What the synthetic-data generators (``cart``, ``copula``, ``privbayes``) share.

Every generator follows the same plan (CATALOG, "Synthetic releases of mixed data"):

1. :func:`plan_columns` reads the options: the replaced columns (``synth_columns``,
   default every column but the weight and household id), the kept ones (predictors,
   released bit for bit), the categorical ones; a replaced column with a single value
   (a missing value counts as a value) is refused.
2. The records are put in content order (:func:`content_order`: a lexicographic sort
   of the whole rows), so that the fit and the draws do not depend on how the input
   was sorted: a permuted input gives the same output permuted the same way.
3. The model is fitted from statistics summed over fixed-size blocks of
   :data:`BLOCK_ROWS` records (the copula's score sums, PrivBayes's counts; CART's
   trees in one task), and the release is drawn block by block, block ``b`` with its
   own generator :meth:`Streams.block` derived from the cell's rng. Blocks are a
   property of the definition, not of the file's chunks or the workers: the same seed
   gives the same bits however the data are chunked or spread.

A missing value is a category of its own for categorical columns; a numeric column
with missing values first gets a synthesised missing indicator.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass

import numpy as np

from ..errors import SdcInputError, column_positions, count_error, option_error

__all__ = ["BLOCK_ROWS", "ColumnPlan", "plan_columns", "content_order", "Streams",
           "blocks", "column_label", "check_order", "open_unit", "category_order",
           "labels_of"]

#: records per block of the fit's sums and of the synthesis (fixed: part of the definition)
BLOCK_ROWS = 65_536


def column_label(j: int, columns: Sequence[str] | None) -> str:
    """A column's name for messages (never a value), else its 1-based position."""
    if columns is not None and j < len(columns):
        return repr(str(columns[j]))
    return f"{j + 1} (1-based)"


@dataclass(frozen=True)
class ColumnPlan:
    """Which columns a generator replaces and which it keeps."""

    n: int
    m: int
    replaced: tuple[int, ...]       # positions, file order
    kept: tuple[int, ...]           # positions, file order
    categorical: frozenset[int]

    def is_cat(self, j: int) -> bool:
        return j in self.categorical


def _names(option: str, value: object, columns: Sequence[str] | None, method: str
           ) -> list[int]:
    if isinstance(value, str):
        value = [value]
    if not isinstance(value, (list, tuple)) or not value:
        raise option_error(option, "a non-empty list of column names", value, owner=method)
    if columns is None:
        raise SdcInputError(f"{method} got {option!r} but not the file's column names; "
                            "pass columns=[...] as well")
    seen: set[str] = set()
    dup = [c for c in value if c in seen or seen.add(c)]        # type: ignore[func-returns-value]
    if dup:
        raise SdcInputError(f"The {option!r} option of {method} names column {dup[0]!r} "
                            "twice; name each column once.")
    return column_positions(value, columns, what="column", where=f"the {option!r} option "
                            f"of {method}")


def plan_columns(method: str, X: np.ndarray, *, categorical: Sequence[int] = (),
                 keep: Sequence[int] = (), columns: Sequence[str] | None = None,
                 synth_columns: Sequence[str] | None = None) -> ColumnPlan:
    """The replaced and kept columns of ``X`` (checked).

    Raises
    ------
    SdcInputError
        Fewer than 2 records; ``synth_columns`` not a list of known column names, or
        naming one twice; a replaced column taking a single value (missing counts as
        a value).
    """
    n, m = X.shape
    if n < 2:
        raise count_error(f"The file {method} synthesises", "at least 2", "records", n)
    never = {int(j) for j in keep}
    if synth_columns is None:
        replaced = [j for j in range(m) if j not in never]
    else:
        pos = set(_names("synth_columns", synth_columns, columns, method))
        replaced = [j for j in range(m) if j in pos and j not in never]
    if not replaced:
        raise SdcInputError(f"{method} has no column to replace: name some in its "
                            "'synth_columns' option (the weight and household id are kept)")
    single = []
    for j in replaced:
        x = X[:, j]
        nan = np.isnan(x)
        if nan.all() or (not nan.any() and x.min() == x.max()):
            single.append(j)
    if single:
        names = ", ".join(column_label(j, columns) for j in single[:10])
        raise SdcInputError(
            f"{method} cannot synthesise a column that takes a single value (column "
            f"{names}): it carries no information and gives the model nothing to fit. "
            "Leave it out of the 'synth_columns' option, or drop it from the file.")
    kept = tuple(j for j in range(m) if j not in set(replaced))
    return ColumnPlan(n, m, tuple(replaced), kept, frozenset(int(j) for j in categorical))


def check_order(method: str, order: Sequence[str] | None, plan: ColumnPlan,
                columns: Sequence[str] | None) -> list[int]:
    """The visit sequence (``synth_order``): a permutation of the replaced columns."""
    if order is None:
        return list(plan.replaced)
    pos = _names("synth_order", order, columns, method)
    if sorted(pos) != sorted(plan.replaced):
        want = ", ".join(column_label(j, columns) for j in plan.replaced)
        raise SdcInputError(f"The 'synth_order' option of {method} must name each replaced "
                            f"column once ({want}), in the order they are synthesised. "
                            f"Got {list(order)!r} instead.")
    return pos


def content_order(X: np.ndarray) -> np.ndarray:
    """Positions of the records sorted by content (column 1 first, then 2, ...; missing
    last). Records that tie are identical, so any order of them gives the same bits."""
    if X.shape[1] == 0:
        return np.arange(X.shape[0])
    return np.lexsort(X.T[::-1])


def blocks(n: int) -> list[tuple[int, int]]:
    """The fixed blocks [a, b) of :data:`BLOCK_ROWS` records."""
    return [(a, min(a + BLOCK_ROWS, n)) for a in range(0, n, BLOCK_ROWS)] or [(0, 0)]


class Streams:
    """Independent generators derived from the cell's rng: one per (purpose, block)."""

    FIT, SYNTH, MODEL = 1, 2, 3

    def __init__(self, rng: np.random.Generator):
        self.root = [int(v) for v in rng.integers(0, 2**63 - 1, size=2, dtype=np.int64)]

    def block(self, purpose: int, b: int) -> np.random.Generator:
        return np.random.default_rng([*self.root, purpose, b])

    def seed(self, purpose: int) -> int:
        """A 31-bit seed (scikit-learn's ``random_state``)."""
        return int(self.block(purpose, 0).integers(0, 2**31 - 1))


def open_unit(rng: np.random.Generator, size: int) -> np.ndarray:
    """Uniform draws strictly inside (0, 1): (k + 1/2) / 2^53."""
    return rng.random(size) + 2.0 ** -54


def category_order(freq: np.ndarray) -> np.ndarray:
    """Categories by decreasing frequency, ties by label: codes are in label order (the
    labels sorted numerically where they read as numbers, else as text), so by code; the
    missing category, the last code, after every label."""
    return np.lexsort((np.arange(freq.size), -freq))


def labels_of(j: int, columns: Sequence[str] | None,
              labels: Mapping[str, Sequence[str]] | None) -> Sequence[str] | None:
    if columns is None or labels is None or j >= len(columns):
        return None
    return labels.get(columns[j])

