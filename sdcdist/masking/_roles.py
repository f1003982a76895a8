"""The keyword options a method is called with on a file: roles and column names.

The command line (``sdcdist mask``) and the audit both call a method on a
file whose columns have names and roles (``key``, ``confidential``, ...);
:func:`method_options` turns those into the options the method takes, so
both build them the same way.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from ..errors import SdcInputError, column_positions
from ._registry import MaskingMethod, get_method

__all__ = ["method_options", "missing_roles"]

#: Roles a method taking ``roles`` needs, each with the role names that satisfy it
#: (``quasi`` is the IPSO papers' word for the dataset's ``key`` role).
_NEEDED = (("confidential", ("confidential",)), ("key", ("key", "quasi")))


def _method(method: str | MaskingMethod) -> MaskingMethod:
    return method if isinstance(method, MaskingMethod) else get_method(method)


def method_options(method: str | MaskingMethod, *, columns: Sequence[str],
                   roles: Mapping[str, Sequence[str]] | None = None,
                   options: Mapping[str, Any] | None = None,
                   categorical: Sequence[str] = ()) -> dict[str, Any]:
    """Keyword options for calling ``method`` on a file with these columns and roles.

    Parameters
    ----------
    method : str or MaskingMethod
        The method (canonical name or registry entry).
    columns : sequence of str
        Names of the file's columns, in order.
    roles : mapping, optional
        Role -> column names (e.g. ``{"key": [...], "confidential": [...]}``), the
        dataset's roles.
    options : mapping, optional
        Options given explicitly (e.g. a spec's method options); they win over
        what is filled in here.
    categorical : sequence of str, or mapping of str to labels
        Names of the categorical columns (or ``{name: labels}``): passed as
        ``categorical`` positions (numeric methods carry them through
        unchanged), and their labels as ``labels`` to a method taking them.
        The ``weight`` role's column and the ``household`` role's column (a household
        id) are passed as ``keep``: never masked.

    Returns
    -------
    dict
        ``options`` plus, for a method taking them, ``roles`` (every role as
        0-based column positions) and ``columns`` (the names).

    Raises
    ------
    SdcInputError
        If a role names a column the file does not have.
    """
    meth = _method(method)
    opts = dict(options or {})
    if "roles" in meth.options and "roles" not in opts and roles:
        filled = {r: column_positions(cols, columns, what=f"{r} column",
                                      where=f"the {r!r} role of {meth.name}")
                  for r, cols in roles.items()}
        opts["roles"] = filled
    if "columns" in meth.options and "columns" not in opts:
        opts["columns"] = list(columns)
    cats = [c for c in categorical if c in set(columns)]
    if cats or meth.acts_on != "numeric":
        opts["categorical"] = column_positions(cats, columns, what="categorical column")
    weight = [c for c in ((roles or {}).get("weight") or []) if c in set(columns)]
    household = [c for c in ((roles or {}).get("household") or []) if c in set(columns)]
    if weight or household:
        opts["keep"] = column_positions(weight, columns, what="weight column") + \
            column_positions(household, columns, what="household id column")
    if "labels" in meth.options and "labels" not in opts and isinstance(categorical, Mapping):
        opts["labels"] = {c: list(categorical[c]) for c in cats}
    return opts


def missing_roles(method: str | MaskingMethod,
                  roles: Mapping[str, Sequence[str]] | None) -> list[str]:
    """The roles ``method`` needs that ``roles`` leaves empty: ``"confidential"`` and/or
    ``"key"``; empty for a method that takes no roles.

    >>> missing_roles("ipso_a", {"key": ["A"]})
    ['confidential']
    >>> missing_roles("noise", {})
    []
    """
    meth = _method(method)
    if meth.steps:
        need = {r for step in meth.steps for r in missing_roles(step, roles)}
        return [r for r, _ in _NEEDED if r in need]
    if "roles" not in meth.options or meth.acts_on != "numeric":
        return []
    roles = roles or {}
    return [need for need, names in _NEEDED if not any(roles.get(n) for n in names)]
