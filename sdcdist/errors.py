"""The one exception users see, and the message templates that go with it.

A mistake of a kind that recurs is worded by one template here, so the same
mistake always reads the same way wherever it is made:

- a parameter (:func:`param_error`):
  ``The 'k' parameter of micmul must be an integer in [2, n/2]. Got 1 instead.``
- an option (:func:`option_error`):
  ``The 'chunk_rows' option must be an integer >= 1. Got 'abc' instead.``
- a name that is not one of a fixed set (:func:`unknown_name_error`,
  :func:`check_choice`): ``Unknown metric 'DDL'. Valid metrics: DLD, ...``
- a column (:func:`column_error`, :func:`column_positions`):
  ``Unknown key column 'AGI' in the masked file. Valid columns: WAGES, TAXINC.``
- any other value of the wrong type or out of range: a spec field, a command-line
  value, an array's shape (:func:`value_error`):
  ``'methods' must be a non-empty list of {name, params}. Got {} instead.``
- keys a mapping does not take (:func:`unknown_keys_error`):
  ``Unknown key(s) ['sed'] in the spec. Valid keys: dataset, methods, seed.``
- a sampling-weight column that is not one (:func:`weight_error`);
- a file that does not exist (:func:`missing_file_error`) or cannot be opened as what
  it should be (:func:`unreadable_error`):
  ``The spec file 'a.yaml' does not exist.``,
  ``Cannot open 'x.zarr' as an sdcdist cube (no zarr.json); check the path.``
- an output that exists (:func:`exists_error`):
  ``The --out 'cube.zarr' already exists; pass --overwrite to replace it, ...``
- too few or too many of something (:func:`count_error`):
  ``The masked file must have at least 2 records. Got 1 instead.``
- something given empty (:func:`empty_error`): ``--weight is empty; give ...``
- values of a column that are not what they must be, counted, never shown
  (:func:`bad_values_error`):
  ``Column 'age' of a.csv has 3 missing values (records 2, 5, 9); impute or drop them first.``
- constant columns a computation cannot use (:func:`constant_error`);
- numeric columns too large in magnitude for their variance to be a float64
  (:func:`magnitude_error`);
- an output that cannot be written there (:func:`unwritable_error`);
- settings that set the same thing, or go together (:func:`exclusive_error`):
  ``--chunk-rows and --option chunk_rows=... set the same thing; give one of them.``

A mistake that is made in one place only (a spec naming its data twice, a cube
written by an older version) is worded where it is raised, in the same voice: the
culprit by name, what is wrong, and the fix. Messages never hold a record value.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence

__all__ = ["SdcInputError", "param_error", "option_error", "unknown_name_error",
           "check_choice", "one_of", "column_error", "column_positions", "value_error",
           "unknown_keys_error", "missing_file_error", "unreadable_error", "weight_error",
           "exists_error", "count_error", "empty_error", "bad_values_error", "constant_error",
           "exclusive_error", "unwritable_error", "magnitude_error"]

_NOTHING = object()


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


def value_error(what: str, allowed: str, got: object = _NOTHING, *, got_text: str = "",
                hint: str = "") -> SdcInputError:
    """The standard message for a value of the wrong type or out of range that is not a
    parameter or an option: a spec field, a command-line value, an array's shape.

    ``got`` is shown with ``repr`` (``got_text`` instead when given); never pass a record
    value. ``hint`` adds the fix when ``allowed`` does not say it.

    >>> str(value_error("'replicates'", "an integer in [1, 1000]", 0))
    "'replicates' must be an integer in [1, 1000]. Got 0 instead."
    >>> str(value_error("microdata", "2-D (records x variables)", got_text="shape (3,)"))
    'microdata must be 2-D (records x variables). Got shape (3,) instead.'
    >>> str(value_error("'metrics'", "a non-empty list of metric names"))
    "'metrics' must be a non-empty list of metric names."
    """
    msg = f"{what} must be {allowed}."
    if got_text:
        msg += f" Got {got_text} instead."
    elif got is not _NOTHING:
        msg += f" Got {got!r} instead."
    return SdcInputError(f"{msg} {hint}" if hint else msg)


def unknown_keys_error(where: str, bad: Iterable[str], valid: Iterable[str]
                       ) -> SdcInputError:
    """The standard message for keys a mapping (a spec, one of its sections) does not take.

    >>> str(unknown_keys_error("the spec", ["sed"], ["seed", "dataset", "methods"]))
    "Unknown key(s) ['sed'] in the spec. Valid keys: dataset, methods, seed."
    """
    return SdcInputError(f"Unknown key(s) {sorted(bad, key=str)} in {where}. Valid keys: "
                         f"{', '.join(sorted(map(str, valid)))}.")


def missing_file_error(what: str, path: object, hint: str = "") -> SdcInputError:
    """The standard message for a file or store that does not exist.

    >>> str(missing_file_error("spec file", "a.yaml"))
    "The spec file 'a.yaml' does not exist."
    >>> str(missing_file_error("dataset file", "d.csv", "paths are relative to the spec"))
    "The dataset file 'd.csv' does not exist; paths are relative to the spec."
    """
    return SdcInputError(f"The {what} {str(path)!r} does not exist"
                         + (f"; {hint}." if hint else "."))


def unreadable_error(what: str, path: object, reason: str, hint: str = "check the path"
                     ) -> SdcInputError:
    """The standard message for a file that exists but cannot be opened as ``what``.

    ``reason`` names the exception or what is missing, never file content.

    >>> str(unreadable_error("an sdcdist cube", "x.zarr", "no zarr.json"))
    "Cannot open 'x.zarr' as an sdcdist cube (no zarr.json); check the path."
    """
    return SdcInputError(f"Cannot open {str(path)!r} as {what} ({reason}); {hint}.")


def weight_error(column: str, *, bad: int = 0, fix: str = "leave the weight role out"
                 ) -> SdcInputError:
    """The standard message for a sampling-weight column that cannot be one: categorical
    (``bad=0``) or with ``bad`` values that are zero, negative or missing (a count, never
    the values).

    >>> str(weight_error("w", bad=3))  # doctest: +NORMALIZE_WHITESPACE
    "Weight column 'w' has 3 values that are zero, negative or missing; sampling weights
    must be positive (a record stands for at least one unit): fix or drop those records,
    or leave the weight role out."
    >>> str(weight_error("w"))  # doctest: +NORMALIZE_WHITESPACE
    "Weight column 'w' is categorical; a sampling weight must be a numeric column of
    positive values: leave the weight role out."
    """
    if bad:
        return SdcInputError(
            f"Weight column {column!r} has {bad} values that are zero, negative or missing; "
            "sampling weights must be positive (a record stands for at least one unit): fix "
            f"or drop those records, or {fix}.")
    return SdcInputError(f"Weight column {column!r} is categorical; a sampling weight must be "
                         f"a numeric column of positive values: {fix}.")


def exists_error(what: str, path: object,
                 hint: str = "pass --overwrite to replace it, or choose another path"
                 ) -> SdcInputError:
    """The standard message for an output that exists and may not be replaced.

    >>> str(exists_error("--out", "cube.zarr"))
    "The --out 'cube.zarr' already exists; pass --overwrite to replace it, or choose another path."
    """
    return SdcInputError(f"The {what} {str(path)!r} already exists; {hint}.")


def count_error(what: str, bound: str, unit: str, got: object, hint: str = ""
                ) -> SdcInputError:
    """The standard message for too few or too many of something (records, columns, keys,
    cells): ``bound`` is ``"at least 2"``, ``"at most 5000000"``, ``"exactly 3"``.

    >>> str(count_error("The masked file", "at least 2", "records", 1))
    'The masked file must have at least 2 records. Got 1 instead.'
    >>> str(count_error("A key set", "at least 1", "column", 0, "name its columns"))
    'A key set must have at least 1 column. Got 0 instead; name its columns.'
    """
    return SdcInputError(f"{what} must have {bound} {unit}. Got {got} instead"
                         + (f"; {hint}." if hint else "."))


def empty_error(what: str, fix: str) -> SdcInputError:
    """The standard message for something given empty: a flag without a value, a list
    without an item.

    >>> str(empty_error("--weight", "give the weight column, or leave --weight out"))
    '--weight is empty; give the weight column, or leave --weight out.'
    """
    return SdcInputError(f"{what} is empty; {fix}.")


def bad_values_error(column: str, count: int, problem: str, fix: str, *, where: str = "",
                     rows: str = "") -> SdcInputError:
    """The standard message for values of a column that are not what they must be: a count
    and, when known, the records' numbers, never the values.

    >>> str(bad_values_error("age", 3, "missing", "impute or drop them first",
    ...                      where="a.csv", rows="2, 5, 9"))
    "Column 'age' of a.csv has 3 missing values (records 2, 5, 9); impute or drop them first."
    """
    of = f" of {where}" if where else ""
    at = f" (records {rows})" if rows else ""
    return SdcInputError(f"Column {column!r}{of} has {count} {problem} values{at}; {fix}.")


def constant_error(columns: Sequence[object], where: str, why: str, fix: str
                   ) -> SdcInputError:
    """The standard message for constant columns (one value in every record) that a
    computation cannot use.

    >>> str(constant_error(["AGE"], "the masked file", "linkage scales keys", "drop it"))
    "Column(s) ['AGE'] are constant in the masked file; linkage scales keys: drop it."
    """
    return SdcInputError(f"Column(s) {list(columns)} are constant in {where}; {why}: {fix}.")


def magnitude_error(columns: Sequence[object], where: str, before: str) -> SdcInputError:
    """The standard message for numeric columns whose values are so large in magnitude (near
    the float64 limit) that their variance (ddof=1) is not a finite float64: a computation
    that scales by a column's sd or sums its squares cannot use them
    (:func:`sdcdist.moments.overflowing_columns` finds them in memory).

    >>> str(magnitude_error(["A"], "the original file", "measuring"))  # doctest: +NORMALIZE_WHITESPACE
    "Column(s) ['A'] of the original file hold values so large (near the float64 limit,
    1.8e308) that their variance is not a finite number; rescale them (e.g. express them in
    larger units) before measuring."
    """
    return SdcInputError(f"Column(s) {list(columns)} of {where} hold values so large (near "
                         "the float64 limit, 1.8e308) that their variance is not a finite "
                         "number; rescale them (e.g. express them in larger units) before "
                         f"{before}.")


def exclusive_error(names: Sequence[str], rule: str) -> SdcInputError:
    """The standard message for settings that go together or exclude each other: ``rule``
    is ``"one"`` (they set the same thing), ``"exactly one"`` or ``"all"`` (all or none).

    >>> str(exclusive_error(["--chunk-rows", "--option chunk_rows=..."], "one"))
    '--chunk-rows and --option chunk_rows=... set the same thing; give one of them.'
    >>> str(exclusive_error(["--risk", "--utility"], "exactly one"))
    'Give exactly one of --risk and --utility.'
    >>> str(exclusive_error(["--certfile", "--keyfile"], "all"))
    '--certfile and --keyfile go together; give both or neither.'
    """
    shown = ", ".join(names[:-1]) + " and " + names[-1] if len(names) > 1 else names[0]
    if rule == "one":
        return SdcInputError(f"{shown} set the same thing; give one of them.")
    if rule == "exactly one":
        return SdcInputError(f"Give exactly one of {shown}.")
    both = "both or neither" if len(names) == 2 else "all of them or none"
    return SdcInputError(f"{shown} go together; give {both}.")


def unwritable_error(what: str, place: object, reason: str = "permission denied",
                     hint: str = "choose another place") -> SdcInputError:
    """The standard message for an output that cannot be written where it is asked for.

    >>> str(unwritable_error("--out", "/root"))
    "--out: cannot write in '/root' (permission denied); choose another place."
    """
    return SdcInputError(f"{what}: cannot write in {str(place)!r} ({reason}); {hint}.")
