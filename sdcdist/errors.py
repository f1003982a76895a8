"""The one exception users see, and the message templates that go with it."""

from __future__ import annotations

from collections.abc import Iterable

__all__ = ["SdcInputError", "param_error", "unknown_name_error", "check_choice"]


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


def unknown_name_error(kind: str, name: object, valid: Iterable[str]) -> SdcInputError:
    """The standard message for a name that is not in a registry or a list."""
    valid = sorted(valid)
    return SdcInputError(f"Unknown {kind} {name!r}. Valid {kind}s: {', '.join(valid)}.")


def check_choice(kind: str, name: object, valid: Iterable[str]) -> str:
    """Return ``name`` if it is one of ``valid``, else raise the standard error."""
    valid = list(valid)
    if name not in valid:
        raise unknown_name_error(kind, name, valid)
    return name  # type: ignore[return-value]
