"""Checks on the columns of the array a method receives (messages carry positions, never values)."""

from __future__ import annotations

import numpy as np

from ..errors import constant_error, count_error

__all__ = ["check_not_constant"]


def check_not_constant(X: np.ndarray, method: str, why: str) -> None:
    """Raise if any column of X takes a single value (or X has fewer than 2 records).

    Parameters
    ----------
    X : ndarray, shape (n, m)
    method : str
        Name of the method, for the message.
    why : str
        What the method does that a constant column breaks.
    """
    if X.shape[0] < 2:
        raise count_error(f"The array given to {method}", "at least 2", "records", X.shape[0])
    const = np.flatnonzero(X.max(axis=0) == X.min(axis=0))
    if const.size:
        raise constant_error([int(j) + 1 for j in const],
                             f"the array given to {method} (1-based positions, of {X.shape[1]})",
                             f"{method} cannot mask constant columns, as {why}",
                             "drop constant columns before masking (they carry no information)")
