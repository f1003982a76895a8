"""The message templates of sdcdist.errors and the one column-name helper."""

from __future__ import annotations

import doctest

import numpy as np
import pytest

from sdcdist import errors
from sdcdist.errors import (SdcInputError, check_choice, column_error, column_positions,
                            one_of, option_error, param_error, unknown_name_error)


def test_doctests():
    res = doctest.testmod(errors)
    assert res.attempted >= 6 and res.failed == 0


def test_templates():
    assert str(param_error("k", "micmul", "an integer in [2, n/2]", 1)) == \
        "The 'k' parameter of micmul must be an integer in [2, n/2]. Got 1 instead."
    assert str(option_error("chunk_rows", "an integer >= 1", "abc")) == \
        "The 'chunk_rows' option must be an integer >= 1. Got 'abc' instead."
    assert str(option_error("roles", "a mapping", [1], owner="ipso_a")) == \
        "The 'roles' option of ipso_a must be a mapping. Got [1] instead."
    assert str(unknown_name_error("metric", "DDL", ["ID1", "DLD"])) == \
        "Unknown metric 'DDL'. Valid metrics: DLD, ID1."
    assert str(unknown_name_error("noise option", "x", [])) == \
        "Unknown noise option 'x'. There are no noise options."
    assert one_of(["index", "brute"]) == "one of 'index', 'brute'"
    assert one_of(["row_floor", None]) == "one of 'row_floor', null"
    for e in (param_error("a", "b", "c", 1), option_error("a", "b", 1),
              unknown_name_error("a", "b", []), column_error(["a"], ["b"])):
        assert isinstance(e, SdcInputError) and isinstance(e, ValueError)


def test_check_choice():
    assert check_choice("mode", "risk", ("risk", "utility")) == "risk"
    with pytest.raises(SdcInputError, match=r"^Unknown mode 'cost'. Valid modes: risk, utility.$"):
        check_choice("mode", "cost", ("risk", "utility"))
    with pytest.raises(SdcInputError, match=r"^Unknown mode \['risk'\]"):
        check_choice("mode", ["risk"], {"risk": 1})          # unhashable: refused, not a crash


def test_column_error_lists_the_file_s_columns_in_order():
    assert str(column_error(["AGI"], ["WAGES", "TAXINC"])) == \
        "Unknown column 'AGI'. Valid columns: WAGES, TAXINC."
    assert str(column_error(["A", "B"], ["Z", "C"], what="key column",
                            where="the masked file")) == \
        "Unknown key columns 'A', 'B' in the masked file. Valid columns: Z, C."


def test_column_positions():
    cols = ("a", "b", "c")
    assert column_positions(["c", "a"], cols) == [2, 0]
    assert column_positions([], cols) == []
    assert column_positions(("b", "b"), list(cols)) == [1, 1]
    with pytest.raises(SdcInputError, match=r"^Unknown role column 'z'. Valid columns: a, b, c.$"):
        column_positions(["a", "z"], cols, what="role column")
    with pytest.raises(SdcInputError, match=r"^Unknown key columns 'y', 'z' in the original file"):
        column_positions(["y", "a", "z"], cols, what="key column", where="the original file")
    with pytest.raises(SdcInputError, match=r"^Unknown column \['a'\]\. Valid"):
        column_positions([["a"]], cols)                     # not a name: refused, not a crash


def test_the_helper_is_used_where_columns_are_named(tmp_path):
    """The sites that turn names into positions all give the column template."""
    from sdcdist.data import from_array
    from sdcdist.linkage import link_files
    from sdcdist.metrics import measure

    X = np.arange(30.0).reshape(10, 3) * [1, 2, 3] + np.arange(10.0)[:, None] ** 2
    md = from_array(X, ["a", "b", "c"])
    with pytest.raises(SdcInputError, match=r"^Unknown key column 'z'. Valid columns: a, b, c"):
        md.column_index(["a", "z"], what="key column")
    with pytest.raises(SdcInputError, match=r"^Unknown confidential column 'q'"):
        from_array(X, ["a", "b", "c"], roles={"confidential": ["q"]})
    other = from_array(X[:, :2], ["a", "b"])
    with pytest.raises(SdcInputError, match=r"^Unknown key column 'c' in the masked file. "
                                            r"Valid columns: a, b."):
        link_files(md, other, ["a", "c"])
    with pytest.raises(SdcInputError, match=r"^Unknown identifier column 'id' in the original"):
        link_files(md, other, ["a"], id_column="id")
    with pytest.raises(SdcInputError, match=r"^Unknown categorical column 'b' in the key "):
        link_files(md, other, ["a"], categorical=["b"])
    with pytest.raises(SdcInputError, match=r"^Unknown key set column 'c' in the masked file"):
        measure(X, X[:, :2], ["DLD"], columns=["a", "b", "c"], masked_columns=["a", "b"],
                keysets=[["a", "c"]])
    with pytest.raises(SdcInputError, match=r"^Unknown CRL column 'x' in the original file"):
        measure(X, X, ["CRL"], columns=["a", "b", "c"],
                options={"crl_external": ["x"], "crl_released": ["a"]})


# ---------------------------------------------------------------------------
# the templates of the common kinds, and the rule that they are used

from pathlib import Path  # noqa: E402
import ast  # noqa: E402
import re  # noqa: E402

from sdcdist.errors import (missing_file_error, unknown_keys_error, unreadable_error,  # noqa: E402
                            value_error, weight_error)


def test_templates_of_the_common_kinds():
    assert str(value_error("'methods'", "a non-empty list of {name, params}")) == \
        "'methods' must be a non-empty list of {name, params}."
    assert str(value_error("--host", "a DNS name", "a b")) == \
        "--host must be a DNS name. Got 'a b' instead."
    assert str(value_error("x", "text", got_text="a list", hint="Give text.")) == \
        "x must be text. Got a list instead. Give text."
    assert str(unknown_keys_error("the spec", [1, "colour"], {"seed", "name"})) == \
        "Unknown key(s) [1, 'colour'] in the spec. Valid keys: name, seed."
    assert str(missing_file_error("spec file", Path("a.yaml"))) == \
        "The spec file 'a.yaml' does not exist."
    assert str(unreadable_error("an sdcdist cube", "c.zarr", "FileNotFoundError")) == \
        "Cannot open 'c.zarr' as an sdcdist cube (FileNotFoundError); check the path."
    assert str(weight_error("w", bad=2)).startswith(
        "Weight column 'w' has 2 values that are zero, negative or missing")
    assert "is categorical" in str(weight_error("w", fix="drop it"))
    for e in (value_error("a", "b"), unknown_keys_error("a", [], []),
              missing_file_error("a", "b"), unreadable_error("a", "b", "c"), weight_error("w")):
        assert isinstance(e, SdcInputError)


#: message shapes that have a template in sdcdist/errors.py: an ad hoc raise of one fails
TEMPLATED = {
    "value_error / param_error / option_error":
        r"^(\{\}|'[^']*'|--\S+|[Tt]he [\w' ]+?) must be |must be .*Got .* instead",
    "unknown_name_error / unknown_keys_error / column_error": r"^[Uu]nknown |Valid \w+: ",
    "missing_file_error": r"does not exist",
    "unreadable_error": r"^[Cc]annot (open|read) ",
    "weight_error": r"^[Ww]eight column .*(is categorical|values that are zero)",
    "exists_error": r"already exists|\{\} exists; ",
    "count_error": r"needs? at least \d+ records|must have (at least|at most|exactly) ",
    "empty_error": r"^(\{\}|--\S+|[Tt]he [\w' ]+?) is empty; |given without a name",
    "bad_values_error": r"has \{\} (missing|infinite|repeated) values",
    "constant_error": r"(are|is) constant in ",
    "exclusive_error": r"set the same thing|give exactly one of|given twice \(",
    "unwritable_error": r"cannot write in ",
}
#: the kinds that got their template last, and the modules another change is rewriting
#: (their messages move to these templates there)
NEWER_KINDS = ("exists_error", "count_error", "empty_error", "bad_values_error",
               "constant_error", "exclusive_error", "unwritable_error")
NEWER_EXEMPT = ("audit/", "metrics/measure.py", "metrics/_registry.py", "cli/risk.py",
                "cli/_common.py", "masking/_checks.py")
PACKAGE = Path(errors.__file__).parent
#: modules being rewritten elsewhere (their messages move to the templates as they are)
EXEMPT: tuple[str, ...] = ()


def _text(node: ast.AST) -> str:
    out = []
    for n in ast.walk(node):
        if isinstance(n, ast.Constant) and isinstance(n.value, str):
            out.append(n.value)
        elif isinstance(n, ast.FormattedValue):
            out.append("{}")
    return "".join(out)


def ad_hoc_templated(source: str, filename: str = "<string>") -> list[str]:
    """``file:line: kind`` for each ``raise SdcInputError("...")`` of a templated kind."""
    found = []
    for node in ast.walk(ast.parse(source, filename=filename)):
        if isinstance(node, ast.Raise) and isinstance(node.exc, ast.Call) and \
                getattr(node.exc.func, "id", "") == "SdcInputError":
            text = _text(node.exc)
            for kind, pattern in TEMPLATED.items():
                if re.search(pattern, text):
                    found.append(f"{filename}:{node.lineno}: {kind}")
                    break
    return found


def test_every_mistake_of_a_templated_kind_uses_its_template():
    paths = [p for p in sorted(PACKAGE.rglob("*.py")) if p.name != "errors.py"
             and not p.relative_to(PACKAGE).as_posix().startswith(EXEMPT)]
    assert len(paths) > 60
    bad = [v for p in paths for v in ad_hoc_templated(p.read_text(), str(p.relative_to(PACKAGE)))
           if not (v.split(": ")[-1] in NEWER_KINDS and v.startswith(NEWER_EXEMPT))]
    assert not bad, "ad hoc messages of a kind that has a template:\n" + "\n".join(bad)


@pytest.mark.parametrize("source", [
    'raise SdcInputError(f"{what} must be an integer. Got {v!r} instead.")',
    'raise SdcInputError("\'metrics\' must be a non-empty list of metric names")',
    'raise SdcInputError(f"unknown key(s) {bad} in {what}. Valid keys: {k}.")',
    'raise SdcInputError(f"spec file {p!r} does not exist")',
    'raise SdcInputError(f"cannot open {p!r} as a cube ({e}); check the path")',
    'raise SdcInputError(f"weight column {w!r} is categorical; use a numeric one")',
    'raise SdcInputError(f"{out!r} already exists; pass --overwrite to replace it")',
    'raise SdcInputError(f"{method} needs at least 2 records. Got {n}.")',
    'raise SdcInputError("--weight was given without a name; give the column")',
    'raise SdcInputError(f"column {c!r} has {n} missing values (records {rows})")',
    'raise SdcInputError(f"key column(s) {cols} are constant in the {what}; drop them")',
    'raise SdcInputError("chunk_rows is given twice (--chunk-rows and --option chunk_rows)")',
    'raise SdcInputError(f"{what}: cannot write in {d!r} (permission denied)")',
])
def test_the_scan_catches_ad_hoc_messages_of_templated_kinds(source):
    assert len(ad_hoc_templated(source, "m.py")) == 1


@pytest.mark.parametrize("source", [
    'raise value_error("\'metrics\'", "a non-empty list of metric names")',
    'raise SdcInputError("two masked records claim the same original record in the truth")',
    'raise SdcInputError(f"method {m!r} is listed twice; put all its values in one list")',
    'raise SdcInputError(f"{m} needs --param: its {p!r} parameter must be {allowed}")',
])
def test_the_scan_lets_one_off_messages_through(source):
    assert ad_hoc_templated(source) == []
