"""Masking of categorical columns: what the PRAM (:mod:`.pram`), global recoding
(:mod:`.recoding`) and local suppression (:mod:`.suppression`) methods share.

These methods receive the whole file ``X`` (n, m) with the categorical columns
as codes 0..L-1 (NaN: missing) and the positions of those columns
(``categorical``); they mask the columns named by the ``variables`` option (default:
the categorical key columns, else every categorical column) and return every
other column bit-identical.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from typing import Any

import numpy as np

from ..errors import SdcInputError, param_error

__all__ = ["masked_columns", "category_codes", "check_suppress_k", "check_categorical_data"]


# -- which columns ------------------------------------------------------------------

def masked_columns(method: str, X: np.ndarray, categorical: Sequence[int],
                   variables: Sequence[str] | None, columns: Sequence[str] | None,
                   roles: Mapping[str, Sequence[int]] | None) -> list[int]:
    """Positions of the columns ``method`` masks (checked to be categorical)."""
    cats = list(categorical)
    if variables:
        if not columns:
            raise SdcInputError(f"{method} got 'variables' but not the file's column names")
        from ..errors import column_positions
        pos = column_positions(variables, columns, what="column", where=f"the 'variables' option of {method}")
        numeric = [columns[j] for j in pos if j not in set(cats)]
        if numeric:
            raise SdcInputError(f"{method} masks categorical columns, and {numeric} are "
                                "numeric; declare them categorical (ingest --categorical, "
                                "or 'categorical:' in the spec's dataset) or leave them out "
                                "of 'variables'")
        return pos
    keys = [j for j in (roles or {}).get("key", []) if j in set(cats)]
    out = keys or cats
    if not out:
        raise SdcInputError(f"{method} masks categorical columns, and the file has none: "
                            "declare integer-coded ones categorical (ingest --categorical, "
                            "or 'categorical:' in the spec's dataset)")
    return out


def category_codes(x: np.ndarray) -> tuple[np.ndarray, np.ndarray, int]:
    """(integer codes with -1 for missing, the present mask, number of codes)."""
    ok = ~np.isnan(x)
    c = np.where(ok, x, -1).astype(np.int64)
    L = int(c.max()) + 1 if c.size else 0
    return c, ok, max(L, 1)



def check_suppress_k(k: int, n: int) -> None:
    if k > n:
        raise param_error("k", "suppress", f"an integer in [2, n] with n = {n} records", k)



def check_categorical_data(method: str, X: np.ndarray, params: Iterable[float],
                           categorical: Sequence[int], options: Mapping[str, Any]) -> None:
    """Data-dependent checks of a categorical method (before an audit starts)."""
    masked_columns(method, X, categorical, options.get("variables"), options.get("columns"),
                   options.get("roles"))
    if method == "suppress":
        for p in params:
            check_suppress_k(int(p), X.shape[0])
