"""The masking-method registry: canonical name -> :class:`MaskingMethod`.

A method is a plain numpy function ``func(X, param, *, rng, **options) -> X'``
registered with the :func:`register` decorator. The audit, the spec validator,
the command line and the docs all read :data:`REGISTRY`; nothing lists the
methods a second time.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field

import numpy as np

from .. import options as _options
from ..errors import SdcInputError, param_error, unknown_name_error

__all__ = ["MaskingMethod", "REGISTRY", "register", "get_method"]


@dataclass(frozen=True)
class MaskingMethod:
    """One registered masking method.

    Attributes
    ----------
    name : str
        Canonical name (CATALOG.md), e.g. ``"rankswap"``.
    func : callable
        ``func(X, param, *, rng, **options) -> ndarray`` of the same shape as X.
        Must not modify X.
    param : str
        What the parameter means (``"p"``, ``"k"``, ...), or ``"none"``.
    kind : {"float", "int", "none"}
        Type of the parameter. Methods without a parameter take the value 0.
    low, high : float
        Closed valid range of the parameter.
    random : bool
        Whether the output depends on ``rng``.
    description : str
        One line for ``--help``, the docs and reports.
    reference : str
        Where the definition comes from.
    allowed : str
        Human wording of the valid range, used in error messages.
    options : tuple of str
        Extra keyword options the function accepts (e.g. ``roles``), each declared
        (default, check, description) in :mod:`sdcdist.options`; a spec's
        ``methods[i].options`` may set those not marked API-only.
    acts_on : {"numeric", "categorical"}
        The columns the method masks. A numeric method called with
        ``categorical=`` positions masks the other columns only and returns the
        categorical ones bit-identical; a categorical method receives the
        positions and masks (some of) those columns.
    """

    name: str
    func: Callable[..., np.ndarray]
    param: str
    kind: str
    low: float
    high: float
    random: bool
    description: str
    reference: str = ""
    allowed: str = ""
    options: tuple[str, ...] = field(default_factory=tuple)
    acts_on: str = "numeric"

    def check_param(self, value: object) -> float:
        """Return ``value`` as a float if it is valid for this method, else raise.

        Raises
        ------
        SdcInputError
            With the standard message naming the parameter and its valid range.
        """
        if self.kind == "none":
            if value in (None, 0, 0.0):
                return 0.0
            raise SdcInputError(f"{self.name} has no parameter: leave 'params' out of its "
                                f"spec entry (or give 0). Got {value!r} instead.")
        if isinstance(value, bool) or not isinstance(value, (int, float, np.integer, np.floating)):
            raise param_error(self.param, self.name, self.allowed_text(), value)
        v = float(value)
        if not math.isfinite(v) or v < self.low or v > self.high:
            raise param_error(self.param, self.name, self.allowed_text(), value)
        if self.kind == "int" and v != int(v):
            raise param_error(self.param, self.name, self.allowed_text(), value)
        return v

    def allowed_text(self) -> str:
        if self.allowed:
            return self.allowed
        what = "an integer" if self.kind == "int" else "a number"
        low = int(self.low) if self.kind == "int" else self.low
        high = int(self.high) if self.kind == "int" else self.high
        return f"{what} in [{low}, {high}]"

    def __call__(self, X: np.ndarray, param: float = 0.0, *, rng: np.random.Generator,
                 categorical: Sequence[int] = (), **options) -> np.ndarray:
        """Check the parameter, then mask ``X`` (n x p float64). Returns a new array.

        ``categorical``: 0-based positions of the categorical columns (codes). A
        numeric method masks the other columns only (its ``roles`` and ``columns``
        options are narrowed to them) and copies these through unchanged.
        """
        X = np.asarray(X, dtype=np.float64)
        if X.ndim != 2:
            raise SdcInputError(
                f"{self.name} needs a 2-D array (records x variables). Got {X.ndim} dimensions."
            )
        p = self.check_param(param)
        arg = int(p) if self.kind == "int" else p
        cats = sorted({int(j) for j in categorical})
        if self.acts_on == "categorical":
            out = np.asarray(self.func(X, arg, rng=rng, categorical=cats, **options),
                             dtype=np.float64)
            return out
        if not cats:
            out = np.asarray(self.func(X, arg, rng=rng, **options), dtype=np.float64)
            self._check_finite(X, out)
            return out
        num = [j for j in range(X.shape[1]) if j not in set(cats)]
        out = X.copy()
        if not num:
            return out
        sub = np.ascontiguousarray(X[:, num])
        res = np.asarray(self.func(sub, arg, rng=rng, **narrow_options(options, num)),
                         dtype=np.float64)
        self._check_finite(sub, res)
        out[:, num] = res
        return out

    def _check_finite(self, X: np.ndarray, out: np.ndarray) -> None:
        """Finite input must give finite output (e.g. noise on values near 1e308 overflows)."""
        if out.shape != X.shape or np.isfinite(out).all():
            return
        bad = np.flatnonzero(~np.isfinite(out).all(axis=0) & np.isfinite(X).all(axis=0))
        if bad.size == 0:
            return
        cols = ", ".join(str(int(j) + 1) for j in bad[:10]) + (", ..." if bad.size > 10 else "")
        raise SdcInputError(
            f"{self.name} produced infinite or undefined values in column(s) {cols} (1-based "
            "positions) from finite data: the values are too large in magnitude for float64 "
            "arithmetic. Rescale those columns (e.g. divide by a power of 10) and try again.")


def narrow_options(options: dict, keep: Sequence[int]) -> dict:
    """A method's ``roles`` (positions) and ``columns`` (names) restricted to the columns
    at positions ``keep``, renumbered as in ``X[:, keep]``."""
    opts = dict(options)
    where = {j: i for i, j in enumerate(keep)}
    if isinstance(opts.get("roles"), dict):
        opts["roles"] = {r: [where[j] for j in pos if j in where]
                         for r, pos in opts["roles"].items()}
    if isinstance(opts.get("columns"), (list, tuple)):
        cols = list(opts["columns"])
        opts["columns"] = [cols[j] for j in keep if j < len(cols)]
    return opts


REGISTRY: dict[str, MaskingMethod] = {}


def register(name: str, *, param: str, kind: str, low: float = 0.0, high: float = 0.0,
             random: bool, description: str, reference: str = "", allowed: str = "",
             options: tuple[str, ...] = (), acts_on: str = "numeric") -> Callable:
    """Decorator: register ``func`` as the masking method ``name``."""
    if kind not in ("float", "int", "none"):
        raise ValueError(f"kind must be float, int or none, not {kind!r}")
    if acts_on not in ("numeric", "categorical"):
        raise ValueError(f"acts_on must be numeric or categorical, not {acts_on!r}")
    options = _options.check_declared(options, scope="method", owner=f"method {name!r}")

    def deco(func: Callable) -> Callable:
        if name in REGISTRY:
            raise ValueError(f"masking method {name!r} registered twice")
        REGISTRY[name] = MaskingMethod(
            name=name, func=func, param=param if kind != "none" else "none", kind=kind,
            low=low, high=high, random=random, description=description,
            reference=reference, allowed=allowed, options=tuple(options), acts_on=acts_on)
        return func

    return deco


def get_method(name: str) -> MaskingMethod:
    """Look up a method by canonical name; an unknown name lists the valid ones."""
    try:
        return REGISTRY[name]
    except (KeyError, TypeError):
        raise unknown_name_error("masking method", name, REGISTRY) from None
