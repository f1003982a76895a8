"""Checks on the columns of the array a method receives (messages carry positions, never values)."""

from __future__ import annotations

import numpy as np

from ..errors import SdcInputError

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
        raise SdcInputError(f"{method} needs at least 2 records. Got {X.shape[0]}.")
    const = np.flatnonzero(X.max(axis=0) == X.min(axis=0))
    if const.size:
        cols = ", ".join(str(j + 1) for j in const[:10])
        more = f" (and {const.size - 10} more)" if const.size > 10 else ""
        raise SdcInputError(
            f"{method} cannot mask constant columns: column{'s' if const.size > 1 else ''} "
            f"{cols}{more} (1-based) of {X.shape[1]} take a single value, and {why}. "
            f"Drop constant columns before masking (they carry no information).")
