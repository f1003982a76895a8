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

from ..errors import SdcInputError, column_error, column_positions, count_error
from ..parallel import Runner
from .prl import DEFAULTS, PRLResult, PRLSettings, probabilistic_linkage
from .truth import check_id_forms, ids_of, truth_counts, truth_from_ids

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

    def figures(self) -> dict[str, float | None]:
        """The re-identification figures under their metric names (``PLD``, ``PLD20``,
        ``PLD_best``; None without the truth), as ``sdcdist link --json`` prints them."""
        best = None if self.pld is None else \
            100.0 * self.result.correct_best / self.result.n_b
        return {"PLD": self.pld, "PLD20": self.pld20, "PLD_best": best}


def link_files(original: Any, masked: Any, keys: Sequence[str], *,
               id_column: str | None = None, categorical: Sequence[str] = (),
               settings: PRLSettings | None = None, client: Any = None) -> LinkResult:
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
    settings : PRLSettings, optional
        The PRL options, checked (default: the registry's defaults), e.g.
        ``PRLSettings.from_options({"prl_t": 0.05, "prl_blocking": "region"})``; the
        blocking column, if any, is one of ``keys``.
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
        raise count_error("Linkage", "at least 1", "key column", 0,
                          "give key columns (e.g. --keys V1,V2)")
    ca = column_positions(keys, original.columns, what="key column", where="the original file")
    cb = column_positions(keys, masked.columns, what="key column", where="the masked file")
    column_positions(categorical, keys, what="categorical column", where="the key columns")
    settings = DEFAULTS if settings is None else settings
    blocking = None
    if settings.blocking is not None:
        if settings.blocking[0] not in keys:
            raise column_error([settings.blocking[0]], keys, what="blocking column",
                               where="the key columns")
        blocking = settings.blocking_position(keys)
    runner = Runner(client)
    truth = None
    if id_column is not None:
        column_positions([id_column], original.columns, what="identifier column",
                         where="the original file")
        column_positions([id_column], masked.columns, what="identifier column",
                         where="the masked file")
        if id_column in keys:
            raise SdcInputError(f"the identifier column {id_column!r} cannot also be a key")
        # identifiers by value (a text column's labels, not each file's own codes)
        id_o, id_m = ids_of(original, id_column, "original"), ids_of(masked, id_column, "masked")
        check_id_forms(id_o, id_m, id_column)
        truth = truth_from_ids(id_o, id_m, column=id_column)
    n_a, n_b = original.values.shape[0], masked.values.shape[0]
    tr = truth if truth is not None else np.full(n_b, -1, dtype=np.int64)
    res = probabilistic_linkage(runner, runner.share(original.values),
                                runner.share(masked.values), n_a, n_b, tuple(ca), tuple(cb),
                                settings=settings, categorical=[k in categorical for k in keys],
                                truth=runner.share(tr), blocking=blocking)
    df = pd.DataFrame({"row_b": res.rows_b, "row_a": res.cols_a, "weight": res.weights,
                       "match_probability": res.prob})
    pld = pld20 = None
    counts: dict[str, Any] = {}
    if truth is not None:
        counts = truth_counts(truth)
        df["id_b"] = id_m[res.rows_b]
        df["id_a"] = id_o[res.cols_a]
        df["correct"] = truth[res.rows_b] == res.cols_a
        df["true_weight"] = res.true_weight[res.rows_b]
        pld, pld20 = 100.0 * res.correct / n_b, 100.0 * res.correct20 / n_b
    return LinkResult(df, res, pld, pld20, **counts)
