"""The filter language accepts comparisons joined by and/or, and nothing else."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest
from hypothesis import example, given, strategies as st

from sdcdist.cube import example_cube
from sdcdist.errors import SdcInputError
from sdcdist.query import parse_where, query, where

TABLE = pd.DataFrame({"DLD": [1.0, 7.0, 3.0, np.nan], "IL": [30.0, 5.0, 12.0, 1.0],
                      "Ascore_20": [10.0, 20.0, 30.0, 40.0]})


@pytest.mark.parametrize("text, want", [
    ("DLD < 5", [True, False, True, False]),
    ("5 > DLD", [True, False, True, False]),
    ("DLD<=3 and IL>=12", [True, False, True, False]),
    ("DLD > 2 or IL < 2", [False, True, True, True]),
    ("DLD > 2 or IL < 2 and Ascore_20 > 35", [False, True, True, True]),  # and binds tighter
    ("(DLD > 2 or IL < 2) and Ascore_20 > 35", [False, False, False, True]),
    ("((IL == 5))", [False, True, False, False]),
    ("IL = 5 OR IL != 5", [True, True, True, True]),
    ("DLD != 1", [False, True, True, False]),           # NaN compares false
    ("IL < 1.2e1 AND DLD > -1", [False, True, False, False]),
])
def test_accepts_comparisons(text, want):
    assert where(TABLE, text).tolist() == want


@pytest.mark.parametrize("text, says", [
    ("", "it is empty"),
    ("DLD", "ends where a comparison operator"),
    ("DLD <", "ends where a number"),
    ("DLD < IL", "expected a number at position 6, found 'IL'"),
    ("3 < 4", "expected a metric name at position 4, found '4'"),
    ("X < 3", "'X' (position 0) is not a metric of this cube; metrics: DLD, IL, Ascore_20"),
    ("DLD < 5 and", "ends where a metric name or '('"),
    ("DLD < 5 xor IL > 1", "unexpected 'xor' at position 8"),
    ("not DLD < 5", "expected a comparison operator"),
    ("(DLD < 5", "ends where ')' was expected"),
    ("DLD < 5)", "unexpected ')' at position 7"),
    ("DLD < (5)", "expected a number at position 6, found '('"),
    ("DLD + 1 < 5", "unexpected '+'"),
    ("DLD < 5; import os", "unexpected ';' at position 7"),
    ("__import__('os').system('ls')", "unexpected"),
    ("DLD.real < 3", "unexpected '.' at position 3"),
    ("DLD < '5'", "unexpected \"'\""),
    ("abs(DLD) < 3", "found '('"),
    ("DLD < 5 and and IL < 3", "expected a metric name or '('"),
])
def test_rejects_everything_else(text, says):
    with pytest.raises(SdcInputError) as exc:
        where(TABLE, text)
    msg = str(exc.value)
    assert says in msg
    assert "compares metric names with numbers" in msg


def _mask_or_clear_error(text: str) -> None:
    """A filter either gives one boolean per cell or the parser's own clear error."""
    try:
        out = where(TABLE, text)
    except SdcInputError as exc:
        assert "cannot read the filter" in str(exc)
    else:
        assert out.dtype == bool and len(out) == len(TABLE)


@given(st.text(alphabet="DLI<>=!()0123456789.e- andor", max_size=30))
def test_never_anything_but_a_mask_or_a_clear_error(text):
    _mask_or_clear_error(text)


def test_deep_nesting_is_refused_with_the_limit():
    ok = "(" * 100 + "DLD < 5" + ")" * 100
    assert where(TABLE, ok).tolist() == [True, False, True, False]
    for n in (101, 150, 5000):
        with pytest.raises(SdcInputError, match=r"nests parentheses more than 100 deep, the "
                                                 r"limit; remove redundant parentheses"):
            where(TABLE, "(" * n + "DLD < 5" + ")" * n)
    # the message quotes only the start of a long filter
    with pytest.raises(SdcInputError) as exc:
        where(TABLE, "(" * 5000 + "DLD < 5" + ")" * 5000)
    assert "(10007 characters)" in str(exc.value) and len(str(exc.value)) < 500


# tokens the tokenizer accepts, so that the text reaches the parser
_TOKENS = ["(", ")", "(((", ")))", "DLD", "IL", "X", "and", "or", "AND", "<", "<=", ">=", "==",
           "=", "!=", "1", "-2.5e3", "1e999", ".5"]


@given(st.lists(st.sampled_from(_TOKENS), max_size=40), st.sampled_from([" ", "\t"]),
       st.one_of(st.integers(0, 120), st.integers(120, 3000)),
       st.sampled_from(["", ";", "'", "\u00e9", "\x00"]))
@example(["DLD", "<", "1"], " ", 400, "")
@example(["DLD", "<", "1", "or", "(((", "IL"], " ", 140, "")
def test_random_tokens_never_raise_anything_but_a_clear_error(parts, sep, nest, tail):
    text = "(" * nest + sep.join(parts) + ")" * nest + tail
    _mask_or_clear_error(text)


def test_parse_tree_flips_number_first():
    c = parse_where("5 >= DLD", ["DLD"])
    assert (c.name, c.op, c.number) == ("DLD", "<=", 5.0)


def test_query_on_a_cube():
    t = query(example_cube(), where_="DLD < 5 or IL1s <= 0.1", sort="IL1s", top=2)
    assert list(t.index) == [("rankswap", 5.0), ("rankswap", 10.0)]
    with pytest.raises(SdcInputError, match="Unknown metric 'Score'"):
        query(example_cube(), sort="Score")
    with pytest.raises(SdcInputError, match="not a metric of this cube"):
        query(example_cube(), where_="Score < 3")
