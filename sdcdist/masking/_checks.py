"""Checks of a method's parameters against the data, before any masking starts.

A spec's parameters are checked when it is parsed (:meth:`MaskingMethod.check_param`);
some ranges depend on the data (``k <= n/2`` for microaggregation, enough records
for IPSO's regression, no constant column for ``jpeg`` and ``distr``). Each method
declares those checks when it registers (``data_check=``); :func:`check_data` runs them
right after the data is read, so that an audit refuses them before it starts a cluster
or creates a cube. It names no method.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

import numpy as np

from ..errors import SdcInputError
from ._registry import get_method

__all__ = ["check_data"]


def check_data(method: str, X: np.ndarray, params: Iterable[float],
               options: dict[str, Any] | None = None) -> None:
    """Raise :class:`SdcInputError` if ``method`` cannot mask ``X`` with some of ``params``.

    Parameters
    ----------
    method : str
        A registered method name.
    X : ndarray, shape (n, m)
        The data the method will mask.
    params : iterable of float
        The parameter values (already checked against the method's fixed range).
    options : dict, optional
        The method's options as the method receives them (``roles``, ``columns``).
    """
    meth = get_method(method)
    n, m = X.shape
    if n < 2:
        raise SdcInputError(f"{meth.name} needs at least 2 records. Got {n}.")
    opts = dict(options or {})
    if meth.steps:
        for i, step in enumerate(meth.steps):
            m_i = get_method(step)
            own = dict(opts.get(step) or {})
            ps = list(params) if i == len(meth.steps) - 1 else [own.pop(m_i.param, 0.0)]
            own.pop(m_i.param, None)
            for key in ("roles", "columns", "labels", "categorical", "keep"):
                if key in opts and (key in m_i.options or key in ("categorical", "keep")):
                    own.setdefault(key, opts[key])
            check_data(step, X, ps, own)
        return
    cats = opts.pop("categorical", ())
    if meth.acts_on == "mixed":
        from .generators import check_generator_data
        check_generator_data(meth.name, X, params, categorical=list(cats or ()),
                             keep=list(opts.pop("keep", None) or ()), **opts)
        return
    cats = sorted(set(cats) | set(opts.pop("keep", ()))) if meth.acts_on == "numeric" \
        else cats
    opts.pop("keep", None)
    if meth.acts_on == "categorical":
        from .categorical import check_categorical_data
        check_categorical_data(meth.name, X, params, list(cats), opts)
        if meth.data_check is not None:
            meth.data_check(X, list(params), method=meth.name, categorical=list(cats),
                            options=opts)
        return
    if cats:
        from ._registry import narrow_options
        keep = [j for j in range(m) if j not in set(cats)]
        X = X[:, keep]
        opts = narrow_options(opts, keep)
        n, m = X.shape
        if m == 0:
            return
    if meth.data_check is not None:
        meth.data_check(X, list(params), method=meth.name, categorical=[], options=opts)
