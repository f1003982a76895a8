"""Link two files by name: key columns and an identifier column resolved in each file.

The user-facing entry point behind ``sdcdist link``: the files may have
different sizes (an external file covering part of the population) and
different column orders; the truth, when wanted, comes from an identifier
column present in both files.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from ..errors import SdcInputError, column_error, column_positions
from ..parallel import Runner
from .assignment import DEFAULT_DENSE_LIMIT
from .prl_drivers import PRLResult, probabilistic_linkage
from .truth import truth_counts, truth_from_ids

__all__ = ["LinkResult", "link_files"]


@dataclass
class LinkResult:
    """Linked pairs (a DataFrame), the PRL result, and PLD / PLD20 when the truth is known.

    With an identifier column, ``matched`` counts the masked records whose
    identifier occurs in the original file and ``unmatched`` the others (they
    have no true pair, and count as not linked correctly in PLD); both are
    None without one.
    """

    pairs: Any
    result: PRLResult
    pld: float | None
    pld20: float | None
    matched: int | None = None
    unmatched: int | None = None


def link_files(original: Any, masked: Any, keys: Sequence[str], *,
               id_column: str | None = None, categorical: Sequence[str] = (),
               method: str = "s", t: Any = (0.0, 0.1, 0.25, 0.5, 1.0), top_c: int = 20,
               dense_limit: int = DEFAULT_DENSE_LIMIT,
               blocking: tuple[str, int] | None = None,
               block_rows: tuple[int, int] | None = None, em_options: dict | None = None,
               counting: str = "auto", weights: str = "linear",
               client: Any = None) -> LinkResult:
    """Probabilistic record linkage of ``masked`` (B) to ``original`` (A) on named keys.

    Parameters
    ----------
    original, masked : Microdata
        Files A (n_a records) and B (n_b records); sizes and column orders may differ.
    keys : list of str
        Key columns, present in both files.
    id_column : str, optional
        Identifier present in both files; gives the truth (PLD, ``correct``).
    categorical : list of str
        Keys compared by equality.
    method, t, top_c, dense_limit, block_rows, em_options, counting, weights
        See :func:`~sdcdist.linkage.prl_drivers.probabilistic_linkage`.
    blocking : (str, int), optional
        Blocking on a key column: half window 0 compares only records with equal
        values (exact blocks); >= 1 is sorted-neighbourhood blocking.
    client : distributed.Client, optional

    Returns
    -------
    LinkResult
        ``pairs`` has one row per assigned pair: ``row_b``, ``row_a``, ``weight``,
        ``match_probability`` and, with ``id_column``, ``id_b``, ``id_a``, ``correct``
        and ``true_weight`` (weight of the B record's true pair; NaN if absent);
        ``matched`` / ``unmatched`` count the B records whose identifier is / is
        not in A.

    Raises
    ------
    SdcInputError
        Among others, if no identifier of B occurs in A (``id_column`` given).
    """
    import pandas as pd

    keys = list(keys)
    if not keys:
        raise SdcInputError("no key columns given; give at least one (e.g. --keys V1,V2)")
    ca = column_positions(keys, original.columns, what="key column", where="the original file")
    cb = column_positions(keys, masked.columns, what="key column", where="the masked file")
    column_positions(categorical, keys, what="categorical column", where="the key columns")
    if blocking is not None:
        if blocking[0] not in keys:
            raise column_error([blocking[0]], keys, what="blocking column",
                               where="the key columns")
        blocking = (keys.index(blocking[0]), int(blocking[1]))
    runner = Runner(client)
    truth = None
    if id_column is not None:
        ia, = column_positions([id_column], original.columns, what="identifier column",
                               where="the original file")
        ib, = column_positions([id_column], masked.columns, what="identifier column",
                               where="the masked file")
        if id_column in keys:
            raise SdcInputError(f"the identifier column {id_column!r} cannot also be a key")
        truth = truth_from_ids(original.values[:, ia], masked.values[:, ib], column=id_column)
    n_a, n_b = original.values.shape[0], masked.values.shape[0]
    tr = truth if truth is not None else np.full(n_b, -1, dtype=np.int64)
    res = probabilistic_linkage(runner, runner.share(original.values),
                                runner.share(masked.values), n_a, n_b, tuple(ca), tuple(cb),
                                method=method, t=t,
                                categorical=[k in categorical for k in keys],
                                truth=runner.share(tr), top_c=top_c, dense_limit=dense_limit,
                                block_rows=block_rows, blocking=blocking,
                                em_options=em_options, counting=counting, weights=weights)
    df = pd.DataFrame({"row_b": res.rows_b, "row_a": res.cols_a, "weight": res.weights,
                       "match_probability": res.prob})
    pld = pld20 = None
    counts: dict[str, Any] = {}
    if truth is not None:
        counts = truth_counts(truth)
        df["id_b"] = masked.values[res.rows_b, ib]
        df["id_a"] = original.values[res.cols_a, ia]
        df["correct"] = truth[res.rows_b] == res.cols_a
        df["true_weight"] = res.true_weight[res.rows_b]
        pld, pld20 = 100.0 * res.correct / n_b, 100.0 * res.correct20 / n_b
    return LinkResult(df, res, pld, pld20, **counts)
