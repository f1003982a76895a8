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
