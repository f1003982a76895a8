"""PRL settings: one frozen object built from the option registry, checked once.

Every PRL option is declared once, in :mod:`sdcdist.options` (``prl_method``,
``prl_t``, ...: default, check, help). :class:`PRLSettings` has one field per
such option, named without the ``prl_`` prefix, and is built only by
:meth:`PRLSettings.from_options`, which checks each given value with the
registry and takes every other value from the registry's defaults. The
kernels and drivers receive it checked and never re-check or re-default a
value. ``sdcdist link`` makes its flags from :data:`NAMES`, ``risk -o``,
``measure -o`` and a spec's ``options:`` go through the same registry, so the
same value reaches the kernels whichever way it is given.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, fields, replace
from typing import Any

from ...errors import column_error, unknown_name_error
from ...options import OPTIONS, PRL_BLOCK_ROWS, PRL_EM_DEFAULTS, prl_names

__all__ = ["PRLSettings", "EMSettings", "NAMES", "DEFAULTS"]

#: The registry's PRL options, in declaration order.
NAMES = prl_names()


@dataclass(frozen=True)
class EMSettings:
    """The EM settings (option ``prl_em``); keys left out take ``PRL_EM_DEFAULTS``.

    ``p_max`` None: the driver's bound ``min(n_a, n_b) / N``; a value >= 1 turns the
    bound off. ``fit``: ``"joint"`` (m, u and P(M)) or ``"m_only"`` (u over all pairs and
    P(M) = ``min(n_a, n_b) / N`` fixed; ``p_max`` is then not used). See
    :func:`sdcdist.linkage.prl.em.em`.
    """

    max_iter: int
    tol: float
    eps: float
    m_start: float
    p_max: float | None
    accelerate: bool
    fit: str = "joint"

    @classmethod
    def build(cls, given: Mapping[str, Any] | None) -> "EMSettings":
        v = {**PRL_EM_DEFAULTS, **dict(given or {})}
        return cls(int(v["max_iter"]), float(v["tol"]), float(v["eps"]), float(v["m_start"]),
                   None if v["p_max"] is None else float(v["p_max"]), bool(v["accelerate"]),
                   str(v["fit"]))

    def as_option(self) -> dict[str, Any]:
        """The settings as a ``prl_em`` value (every key set; ``p_max`` left out when None)."""
        return {f.name: getattr(self, f.name) for f in fields(self)
                if getattr(self, f.name) is not None}


def _tolerances(t: Any) -> float | tuple:
    if isinstance(t, (list, tuple)):
        return tuple(_tolerances(x) if isinstance(x, (list, tuple)) else float(x) for x in t)
    return float(t)


def _blocking(v: Any) -> tuple[str, int] | None:
    if v is None:
        return None
    return (v, 0) if isinstance(v, str) else (str(v[0]), int(v[1]))


#: How a checked registry value becomes a field value (hashable, normalised).
_NORMAL = {
    "prl_t": _tolerances,
    "prl_top_c": int,
    "prl_dense_limit": int,
    "prl_blocking": _blocking,
    "prl_block_rows": lambda v: (PRL_BLOCK_ROWS, PRL_BLOCK_ROWS) if v is None else
    (int(v[0]), int(v[1])),
    "prl_em": EMSettings.build,
}


@dataclass(frozen=True)
class PRLSettings:
    """The PRL options, checked; one field per registry option ``prl_<field>``.

    Attributes
    ----------
    method : {"s", "l", "d"}
    t : float or tuple
        Tolerances (a tuple of floats, or one tuple per key column).
    weights : {"linear", "step"}
    top_c, dense_limit : int
    blocking : (str, int) or None
        Key column name and half window (0: exact blocks).
    block_rows : (int, int)
        Rows of A and of B per pair block.
    em : EMSettings
    unmatched : "row_floor" or None
    counting : {"auto", "pairs", "count"}
    """

    method: str
    t: Any
    weights: str
    top_c: int
    dense_limit: int
    blocking: tuple[str, int] | None
    block_rows: tuple[int, int]
    em: EMSettings
    unmatched: str | None
    counting: str

    @classmethod
    def from_options(cls, options: Mapping[str, Any] | None = None, *, strict: bool = True,
                     owner: str | None = None) -> "PRLSettings":
        """Settings from registry options (``{"prl_t": 0.05, ...}``), defaults for the rest.

        Each value is checked by the registry (its standard message). ``strict``:
        a key that is not a PRL option is refused (the message lists the valid
        ones); otherwise non-PRL keys (a spec's other options) are ignored.
        """
        given = dict(options or {})
        values = {n: OPTIONS[n].default for n in NAMES}
        for key, value in given.items():
            if key not in values:
                if strict:
                    raise unknown_name_error("PRL option", key, list(NAMES))
                continue
            values[key] = OPTIONS[key].validate(value, owner)
        return cls(**{n[4:]: _NORMAL.get(n, _same)(values[n]) for n in NAMES})

    def updated(self, options: Mapping[str, Any]) -> "PRLSettings":
        """A copy with some registry options changed (each checked)."""
        return PRLSettings.from_options({**self.as_options(), **dict(options)})

    def as_options(self) -> dict[str, Any]:
        """The settings as registry options (``{"prl_method": ..., ...}``)."""
        out = {}
        for n in NAMES:
            v = getattr(self, n[4:])
            if n == "prl_em":
                v = v.as_option()
            elif n == "prl_blocking" and v is not None:
                v = v[0] if v[1] == 0 else [v[0], v[1]]
            elif isinstance(v, tuple):
                v = [list(x) if isinstance(x, tuple) else x for x in v]
            out[n] = v
        return out

    def blocking_position(self, names: list[str]) -> tuple[int, int] | None:
        """The blocking rule as (position of its column in the key columns ``names``, half
        window); refuses a column that is not a key."""
        if self.blocking is None:
            return None
        name, width = self.blocking
        if name not in names:
            raise column_error([name], names, what="blocking column", where="the key set")
        return names.index(name), width

    def with_(self, **changes: Any) -> "PRLSettings":
        """A copy with fields replaced (values already in field form; for the kernels' tests)."""
        return replace(self, **changes)


def _same(v: Any) -> Any:
    return v


if tuple(f.name for f in fields(PRLSettings)) != tuple(n[4:] for n in NAMES):
    raise ImportError("PRLSettings must have one field per prl_ option of sdcdist.options, "
                      "in declaration order")

#: The settings of the registry's defaults.
DEFAULTS = PRLSettings.from_options()
