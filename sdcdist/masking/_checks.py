"""Checks of a method's parameters against the data, before any masking starts.

A spec's parameters are checked when it is parsed (:meth:`MaskingMethod.check_param`);
some ranges depend on the data (``k <= n/2`` for microaggregation, enough records
for IPSO's regression, no constant column for ``jpeg`` and ``distr``).
:func:`check_data` checks those right after the data is read, so that an audit
refuses them before it starts a cluster or creates a cube.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

import numpy as np

from ..errors import SdcInputError
from ._columns import check_not_constant
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
        if meth.name == "recode":
            # deterministic and one pass over the data: run it, so that what depends on
            # the labels (bands on text, a mapping naming an absent category) is refused
            # here rather than on a worker
            rng = np.random.default_rng(0)
            own = {k: v for k, v in opts.items() if k != "info"}
            for p in params:
                meth(X, p, rng=rng, categorical=list(cats), **own)
        return
    if cats:
        from ._registry import narrow_options
        keep = [j for j in range(m) if j not in set(cats)]
        X = X[:, keep]
        opts = narrow_options(opts, keep)
        n, m = X.shape
        if m == 0:
            return
    if meth.param == "k" and meth.func.__module__.endswith(".microaggregation"):
        from .microaggregation import check_k
        for p in params:
            check_k(int(p), n, meth.name)
    elif meth.name == "jpeg":
        check_not_constant(X, "jpeg", "jpeg maps each column's range [min, max] onto 0..255")
    elif meth.name == "distr":
        check_not_constant(X, "distr", "a distribution cannot be fitted to a single value")
    elif meth.name.startswith("ipso_"):
        from .synthetic import check_records
        check_records(n, m, meth.name[-1], roles=opts.get("roles"),
                      columns=opts.get("columns"))
