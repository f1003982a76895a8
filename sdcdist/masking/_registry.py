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
from ..errors import SdcInputError, count_error, param_error, unknown_name_error, value_error

__all__ = ["MaskingMethod", "REGISTRY", "register", "get_method", "options_of"]


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
    acts_on : {"numeric", "categorical", "mixed"}
        The columns the method masks. A numeric method called with
        ``categorical=`` positions masks the other columns only and returns the
        categorical ones bit-identical; a categorical method receives the
        positions and masks (some of) those columns; a mixed method (the
        synthetic-data generators) receives the positions and the ``keep``
        columns and masks columns of both kinds.
    open_low : bool
        The parameter must be strictly above ``low`` (privbayes's ε > 0).
    infinite : bool
        ``high`` may be +inf and the parameter may be +inf (ε = ∞: no noise).
    data_check : callable or None
        The checks of the data this method needs beyond its parameter's fixed range,
        ``data_check(X, params, *, method, categorical, options)`` raising
        :class:`~sdcdist.errors.SdcInputError` (``k <= n/2``, no constant column, enough
        records for a regression); :func:`~sdcdist.masking.check_data` calls it before an
        audit starts. ``X`` holds the columns the method masks (a numeric method's numeric
        columns); ``categorical`` the positions of the categorical columns (a categorical
        method's).
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
    steps: tuple[str, ...] = ()
    open_low: bool = False
    infinite: bool = False
    data_check: Callable[..., None] | None = None

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
            raise param_error("params", self.name, f"left out of its spec entry (or 0): "
                              f"{self.name} has no parameter", value)
        if isinstance(value, bool) or not isinstance(value, (int, float, np.integer, np.floating)):
            raise param_error(self.param, self.name, self.allowed_text(), value)
        v = float(value)
        if self.infinite and v == math.inf:
            return v
        if not math.isfinite(v) or v < self.low or v > self.high or \
                (self.open_low and v == self.low):
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
                 categorical: Sequence[int] = (), keep: Sequence[int] = (),
                 **options) -> np.ndarray:
        """Check the parameter, then mask ``X`` (n x p float64). Returns a new array.

        ``categorical``: 0-based positions of the categorical columns (codes);
        ``keep``: columns never masked (the sampling weight, the household id). A
        numeric method masks the other columns only (its ``roles`` and ``columns``
        options are narrowed to them) and copies these through unchanged; a
        categorical method's output keeps them as they were, even where they are
        categorical and no key role limits what it masks.
        """
        X = np.asarray(X, dtype=np.float64)
        if X.ndim != 2:
            raise value_error(f"The array given to {self.name}", "2-D (records x variables)",
                              got_text=f"{X.ndim} dimensions")
        p = self.check_param(param)
        arg = int(p) if self.kind == "int" else p
        cats = sorted({int(j) for j in categorical})
        if self.acts_on == "mixed":
            out = np.asarray(self.func(X, arg, rng=rng, categorical=cats,
                                       keep=sorted({int(j) for j in keep}), **options),
                             dtype=np.float64)
            kept = sorted({int(j) for j in keep})
            if kept and out.shape == X.shape:
                out[:, kept] = X[:, kept]
            return out
        if self.acts_on == "categorical":
            if self.steps:
                options["keep"] = list(keep)
            out = np.asarray(self.func(X, arg, rng=rng, categorical=cats, **options),
                             dtype=np.float64)
            kept = sorted({int(j) for j in keep})
            if kept and out.shape == X.shape:
                out[:, kept] = X[:, kept]
            return out
        cats = sorted(set(cats) | {int(j) for j in keep})
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
             options: tuple[str, ...] = (), acts_on: str = "numeric",
             open_low: bool = False, infinite: bool = False,
             data_check: Callable[..., None] | None = None) -> Callable:
    """Decorator: register ``func`` as the masking method ``name``; ``data_check`` states
    the checks of the data it needs (:attr:`MaskingMethod.data_check`)."""
    if kind not in ("float", "int", "none"):
        raise ValueError(f"kind must be float, int or none, not {kind!r}")
    if acts_on not in ("numeric", "categorical", "mixed"):
        raise ValueError(f"acts_on must be numeric, categorical or mixed, not {acts_on!r}")
    options = _options.check_declared(options, scope="method", owner=f"method {name!r}")

    def deco(func: Callable) -> Callable:
        if name in REGISTRY:
            raise ValueError(f"masking method {name!r} registered twice")
        REGISTRY[name] = MaskingMethod(
            name=name, func=func, param=param if kind != "none" else "none", kind=kind,
            low=low, high=high, random=random, description=description,
            reference=reference, allowed=allowed, options=tuple(options), acts_on=acts_on,
            open_low=open_low, infinite=infinite, data_check=data_check)
        return func

    return deco


def get_method(name: str) -> MaskingMethod:
    """Look up a method by canonical name; an unknown name lists the valid ones.

    ``"a+b+c"`` names a pipeline of registered methods (:func:`pipeline_method`).
    """
    if isinstance(name, str) and "+" in name:
        return pipeline_method(name)
    try:
        return REGISTRY[name]
    except (KeyError, TypeError):
        raise unknown_name_error("masking method", name, REGISTRY) from None


def options_of(name: str) -> list[_options.Option]:
    """The options (:class:`sdcdist.options.Option`) masking method ``name`` accepts,
    spec-settable and API-only, in its declaration order."""
    return [_options.OPTIONS[n] for n in get_method(name).options]


#: the pipelines built so far (a pipeline is a pure function of its name)
_PIPELINES: dict[str, MaskingMethod] = {}


def pipeline_method(name: str) -> MaskingMethod:
    """The pipeline ``"a+b+..."``: methods applied one after the other with one generator.

    The pipeline's parameter is its last step's (the one an audit sweeps); the
    other steps take theirs from the options: ``{step: {param_name: value,
    option: value, ...}}`` (e.g. ``{"recode": {"w": 5, "variables": ["age"]}}``). Each
    step masks the previous step's output; numeric steps carry categorical
    columns through, categorical steps the numeric ones. Options filled from
    the data (``roles``, ``columns``, ``labels``, ``categorical``, ``info``) go
    to every step that takes them.

    Raises
    ------
    SdcInputError
        An unknown step, a step named twice, or fewer than two steps.
    """
    if name in _PIPELINES:
        return _PIPELINES[name]
    steps = tuple(s.strip() for s in name.split("+"))
    if len(steps) < 2 or any(not s for s in steps):
        raise count_error(f"Pipeline {name!r}", "at least 2", "method names joined by '+'",
                          len([s for s in steps if s]), "e.g. recode+noise")
    if len(set(steps)) != len(steps):
        raise SdcInputError(f"pipeline {name!r} names a method twice; a step is one method "
                            "with one parameter")
    meths = [get_method(s) for s in steps]
    last = meths[-1]
    shared = tuple(dict.fromkeys(o for m in meths for o in m.options))

    def run(X: np.ndarray, param: float, *, rng: np.random.Generator,
            categorical: Sequence[int] = (), keep: Sequence[int] = (),
            **options: object) -> np.ndarray:
        Y = X
        if "info" not in options and any("info" in m.options for m in meths):
            # a step's detail for the next ones: recode's new labels tell PRAM the
            # categories of the recoded columns
            options = {**options, "info": {}}
        for m in meths:
            own = dict(options.get(m.name) or {})          # type: ignore[call-overload]
            if m is last:
                p = param
            elif m.kind == "none":
                p = 0.0
            else:
                if m.param not in own:
                    raise SdcInputError(
                        f"step {m.name} of pipeline {name} needs its {m.param!r} parameter "
                        f"in the options: {{{m.name}: {{{m.param}: ...}}}} "
                        f"({m.allowed_text()})")
                p = own.pop(m.param)
            own.pop(m.param, None)
            for key in ("roles", "columns", "labels", "info"):
                if key in m.options and key in options and key not in own:
                    own[key] = options[key]
            Y = m(Y, p, rng=rng, categorical=categorical, keep=keep, **own)
        return Y

    meth = MaskingMethod(
        name=name, func=run, param=last.param, kind=last.kind, low=last.low, high=last.high,
        random=any(m.random for m in meths),
        description="pipeline: " + ", then ".join(steps) + " (one generator)",
        reference="; ".join(m.reference for m in meths if m.reference),
        allowed=last.allowed, options=shared, acts_on="categorical", steps=steps)
    _PIPELINES[name] = meth
    return meth


def check_pipeline_options(meth: MaskingMethod, options: object) -> dict:
    """A pipeline's spec options: a mapping of step name to that step's parameter (not for
    the last step) and options, each checked against the step's declarations."""
    from .. import options as _opts
    if options is None:
        options = {}
    if not isinstance(options, dict):
        raise value_error(f"The options of pipeline {meth.name}",
                          "a mapping of step names to their options", options)
    bad = [k for k in options if k not in meth.steps]
    if bad:
        raise unknown_name_error(f"{meth.name} step", bad[0], meth.steps)
    out = {}
    for i, step in enumerate(meth.steps):
        m = get_method(step)
        given = options.get(step)
        if given is not None and not isinstance(given, dict):
            raise value_error(f"the options of step {step} of pipeline {meth.name}",
                              f"a mapping of option names to values, e.g. {{{step}: "
                              f"{{{m.param}: ...}}}}", got_text=f"a {type(given).__name__}")
        own = dict(given or {})
        last = i == len(meth.steps) - 1
        if m.kind != "none" and not last:
            if m.param not in own:
                raise SdcInputError(f"step {step} of pipeline {meth.name} needs its "
                                    f"{m.param!r} parameter: options: {{{step}: "
                                    f"{{{m.param}: ...}}}} ({m.allowed_text()})")
            own[m.param] = m.check_param(own[m.param])
        elif m.param in own and m.kind != "none":
            raise SdcInputError(f"the last step {step} of pipeline {meth.name} takes the "
                                "pipeline's 'params'; leave its parameter out of the options")
        fixed = {m.param: own.pop(m.param)} if m.param in own else {}
        checked = _opts.validate_method_options(m, own)
        if fixed or checked:
            out[step] = {**fixed, **checked}
    return out
