"""The data checks of the synthetic-data generators (``cart``, ``copula``, ``privbayes``)
before an audit starts: columns, visit sequence, PrivBayes's table bound."""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from ._synth import check_order, plan_columns
from .cart import check_float32
from .privbayes import check_table_size, encode_columns

__all__ = ["check_generator_data"]


def check_generator_data(method: str, X: np.ndarray, params: Sequence[float], *,
                         categorical: Sequence[int] = (), keep: Sequence[int] = (),
                         columns: Sequence[str] | None = None,
                         synth_columns: Sequence[str] | None = None,
                         synth_order: Sequence[str] | None = None,
                         synth_bins: int = 20, synth_degree: int = 2,
                         **_: object) -> None:
    """The data checks of a generator, before an audit starts (nothing is drawn)."""
    plan = plan_columns(method, X, categorical=categorical, keep=keep, columns=columns,
                        synth_columns=synth_columns)
    if method == "cart":
        check_order(method, synth_order, plan, columns)
        check_float32(X, plan, columns)
    elif method == "privbayes":
        check_table_size(encode_columns(X, plan, synth_bins, columns=columns)[1], plan,
                         synth_bins, synth_degree, columns)
