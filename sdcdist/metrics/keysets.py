"""Key sets: the default prefixes, and whether a metric uses them or all key columns.

Linkage risk is computed per key set (a tuple of column names) and averaged.
When a spec or a caller names no key sets, the default is the prefixes of the
key columns of sizes 1..min(7, p) [DMT §5]; metrics registered with
``keyset_default="all"`` (RR and PDL, which [DRS] defines over all m
attributes) link instead on all the key columns as one key set. Named key
sets are used as given by every metric.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence

from ..errors import SdcInputError

__all__ = ["KEYSET_DEFAULTS", "KeySets", "default_keysets", "check_distinct"]

#: What a key-set metric links on when no key sets were named: the ``prefixes`` (averaged)
#: or ``all`` the key columns as one key set.
KEYSET_DEFAULTS = ("prefixes", "all")


class KeySets(list):
    """A list of key sets (tuples of column names) that remembers where it came from.

    ``given`` is False for the default prefixes (:func:`default_keysets`) and True
    for key sets a spec or a caller named; ``columns`` are the key columns the
    default was made from. A metric registered with ``keyset_default="all"``
    links on ``columns`` as one key set unless the key sets were given. A plain
    list of key sets counts as given.
    """

    def __init__(self, sets: Iterable[Sequence[str]] = (), *, given: bool,
                 columns: Sequence[str] = ()):
        super().__init__(tuple(k) for k in sets)
        self.given = bool(given)
        self.columns = tuple(columns)

    def __repr__(self) -> str:
        return (f"KeySets({list.__repr__(self)}, given={self.given}, "
                f"columns={self.columns!r})")


def default_keysets(columns: Sequence[str], keys: Sequence[str] | None = None,
                    max_size: int = 7) -> KeySets:
    """Prefixes of sizes 1..min(7, p) of the key columns (all columns by default).

    >>> default_keysets(["a", "b", "c"])
    KeySets([('a',), ('a', 'b'), ('a', 'b', 'c')], given=False, columns=('a', 'b', 'c'))
    """
    base = list(keys) if keys else list(columns)
    return KeySets([tuple(base[:k]) for k in range(1, min(max_size, len(base)) + 1)],
                   given=False, columns=base)


def check_distinct(keysets: Iterable[Sequence[str]], *, what: str = "key sets") -> None:
    """Refuse two named key sets of the same columns (in any order): each is linked and
    averaged once, so naming one twice would compute it twice and weigh it double.

    >>> check_distinct([["a"], ["a", "b"]])
    >>> check_distinct([["a", "b"], ["b", "a"]])  # doctest: +NORMALIZE_WHITESPACE
    Traceback (most recent call last):
    ...
    sdcdist.errors.SdcInputError: key sets 1 and 2 ([a, b] and [b, a]) have the same
    columns; give each key set once
    """
    seen: dict[frozenset, tuple[int, Sequence[str]]] = {}
    for i, ks in enumerate(keysets, 1):
        cols = frozenset(ks)
        if cols in seen:
            j, first = seen[cols]
            raise SdcInputError(f"{what} {j} and {i} ([{', '.join(first)}] and "
                                f"[{', '.join(ks)}]) have the same columns; give each key "
                                "set once")
        seen[cols] = (i, ks)
