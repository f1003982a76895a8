"""The one exception users see, and the message templates that go with it.

Every message a user can cause is built from one of these templates, so the
same mistake always reads the same way:

- a parameter (:func:`param_error`):
  ``The 'k' parameter of micmul must be an integer in [2, n/2]. Got 1 instead.``
- an option (:func:`option_error`):
  ``The 'chunk_rows' option must be an integer >= 1. Got 'abc' instead.``
- a name that is not one of a fixed set (:func:`unknown_name_error`,
  :func:`check_choice`): ``Unknown metric 'DDL'. Valid metrics: DLD, ...``
- a column (:func:`column_error`, :func:`column_positions`):
  ``Unknown key column 'AGI' in the masked file. Valid columns: WAGES, TAXINC.``
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence

__all__ = ["SdcInputError", "param_error", "option_error", "unknown_name_error",
           "check_choice", "one_of", "column_error", "column_positions"]


class SdcInputError(ValueError):
    """A problem with the user's input: a file, a spec, a parameter or an option.

    The message names the culprit and says how to fix it. It never contains
    original record values: only counts, shapes, names, row numbers and hashes.
    The command line turns it into a one-line message and exit code 2.
    """


def param_error(param: str, owner: str, allowed: str, got: object) -> SdcInputError:
    """The standard message for a bad parameter value.

    >>> str(param_error("k", "micmul", "an integer in [2, n/2]", 1))
    "The 'k' parameter of micmul must be an integer in [2, n/2]. Got 1 instead."
    """
    return SdcInputError(
        f"The {param!r} parameter of {owner} must be {allowed}. Got {got!r} instead."
    )


def option_error(option: str, allowed: str, got: object, owner: str | None = None
                 ) -> SdcInputError:
    """The standard message for a bad option value (``owner``: a method, for its options).

    >>> str(option_error("chunk_rows", "an integer >= 1", "abc"))
    "The 'chunk_rows' option must be an integer >= 1. Got 'abc' instead."
    >>> str(option_error("roles", "a mapping", [1], owner="ipso_a"))
    "The 'roles' option of ipso_a must be a mapping. Got [1] instead."
    """
    of = f" of {owner}" if owner else ""
    return SdcInputError(f"The {option!r} option{of} must be {allowed}. Got {got!r} instead.")


def unknown_name_error(kind: str, name: object, valid: Iterable[str]) -> SdcInputError:
    """The standard message for a name that is not in a registry or a list.

    >>> str(unknown_name_error("metric", "DDL", ["DLD", "ID1"]))
    "Unknown metric 'DDL'. Valid metrics: DLD, ID1."
    """
    valid = sorted(valid)
    if not valid:
        return SdcInputError(f"Unknown {kind} {name!r}. There are no {kind}s.")
    return SdcInputError(f"Unknown {kind} {name!r}. Valid {kind}s: {', '.join(valid)}.")


def check_choice(kind: str, name: object, valid: Iterable[str]) -> str:
    """Return ``name`` if it is one of ``valid``, else raise the standard error."""
    valid = list(valid)
    try:
        ok = name in valid
    except TypeError:          # an unhashable or incomparable value is no valid name
        ok = False
    if not ok:
        raise unknown_name_error(kind, name, valid)
    return name  # type: ignore[return-value]


def one_of(values: Iterable[object]) -> str:
    """Wording of a choice for :func:`param_error` / :func:`option_error`.

    >>> one_of(["d", "l"])
    "one of 'd', 'l'"
    """
    return "one of " + ", ".join("null" if v is None else repr(v) for v in values)


def column_error(names: Sequence[str], valid: Sequence[str], *, what: str = "column",
                 where: str = "") -> SdcInputError:
    """The standard message for column names a file does not have.

    ``what`` says which role the names play (``"key column"``), ``where`` which
    file (``"the masked file"``). The valid columns are listed in file order.

    >>> str(column_error(["AGI"], ["WAGES", "TAXINC"], what="key column",
    ...                  where="the masked file"))
    "Unknown key column 'AGI' in the masked file. Valid columns: WAGES, TAXINC."
    """
    names = list(names)
    shown = ", ".join(repr(c) for c in names)
    plural = "s" if len(names) > 1 else ""
    at = f" in {where}" if where else ""
    return SdcInputError(f"Unknown {what}{plural} {shown}{at}. "
                         f"Valid columns: {', '.join(map(str, valid))}.")


def column_positions(names: Iterable[str], columns: Sequence[str], *, what: str = "column",
                     where: str = "") -> list[int]:
    """Positions of ``names`` in ``columns``; unknown names raise :func:`column_error`.

    A single string is one column name (``variables: region`` in a spec), never a
    sequence of one-letter names.

    >>> column_positions(["b", "a"], ["a", "b", "c"])
    [1, 0]
    >>> column_positions("b", ["a", "b", "c"])
    [1]
    """
    pos = {c: i for i, c in enumerate(columns)}
    names = [names] if isinstance(names, str) else list(names)
    missing = [c for c in names if not isinstance(c, str) or c not in pos]
    if missing:
        raise column_error(missing, columns, what=what, where=where)
    return [pos[c] for c in names]
