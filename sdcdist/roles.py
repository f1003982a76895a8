"""The roles a column holds in a file, and the rules between them, stated once.

A column may be a linkage key (quasi-identifier), confidential (what an intruder wants to
learn), the sampling weight or the household id. Some roles exclude each other: the
household id and the weight are never linkage keys, and the household id is neither the
weight nor confidential. :data:`EXCLUSIVE` says which pairs and why; the two places that
check roles read it: a file's declared roles (:func:`sdcdist.data.check_roles`, when a file
is read or ingested) and the roles a command or an audit gives
(:meth:`sdcdist.metrics.Inputs.check`). Messages name columns and roles, never values.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from .errors import SdcInputError

__all__ = ["ROLES", "EXCLUSIVE", "role_clash_error", "key_role_error", "first_clash"]

#: the roles a dataset declares for its columns
ROLES = ("key", "confidential", "weight", "household")

#: how a message names a column of each role: (after "the", after "a")
_NOUN = {"key": "key column", "confidential": "confidential column", "weight": "weight",
         "household": "household id"}
_AS_OTHER = {"key": "a key column", "confidential": "a confidential column",
             "weight": "the weight", "household": "the household id"}

#: pairs of roles one column never holds together, and why (read by both role checks)
EXCLUSIVE: dict[tuple[str, str], str] = {
    ("household", "key"): "a household id is never a linkage key (it identifies the "
                          "household, not a trait an intruder knows)",
    ("weight", "key"): "the sampling weight is never a linkage key (it is not masked, so it "
                       "would link every record to itself)",
    ("household", "weight"): "a household id is not a sampling weight",
    ("household", "confidential"): "a household id is not a confidential attribute",
}


def role_clash_error(column: str, role: str, other: str, *, source: str = "") -> SdcInputError:
    """The standard message for ``column`` given two roles that exclude each other.

    >>> str(role_clash_error("hid", "household", "weight"))
    "column 'hid' is both the household id and the weight; a household id is not a sampling weight: give it one role"
    """
    why = EXCLUSIVE[(role, other)]
    of = f" of {source}" if source else ""
    return SdcInputError(f"column {column!r} is both the {_NOUN[role]} and "
                         f"{_AS_OTHER[other]}{of}; {why}: give it one role")


def key_role_error(where: str, column: str, role: str, fix: str) -> SdcInputError:
    """The standard message for a key list (``where``: "key set [...]", "--keys", ...)
    holding the column of a role that is never a key (``household``, ``weight``).

    >>> str(key_role_error("--keys", "w", "weight", "--keys"))
    "--keys holds the weight column 'w'; the sampling weight is never a linkage key (it is not masked, so it would link every record to itself): leave it out of --keys"
    """
    return SdcInputError(f"{where} holds the {_NOUN[role]} column {column!r}; "
                         f"{EXCLUSIVE[(role, 'key')]}: leave it out of {fix}")


def first_clash(roles: Mapping[str, Sequence[str] | str | None]
                ) -> tuple[str, str, str] | None:
    """The first ``(column, role, other)`` of ``roles`` (role -> column or columns) that
    breaks :data:`EXCLUSIVE`, in the table's order; None when the roles are compatible.

    >>> first_clash({"key": ["a", "w"], "weight": "w"})
    ('w', 'weight', 'key')
    >>> first_clash({"key": ["a"], "household": ["h"]}) is None
    True
    """
    def cols(r: str) -> list[str]:
        v = roles.get(r)
        return [] if v is None else [v] if isinstance(v, str) else list(v)

    for role, other in EXCLUSIVE:
        theirs = set(cols(other))
        hit = [c for c in cols(role) if c in theirs]
        if hit:
            return hit[0], role, other
    return None
