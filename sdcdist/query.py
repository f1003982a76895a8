"""A small, safe filter language over the metrics of a cube (``sdcdist query --where``).

Grammar (keywords case-insensitive, parentheses optional)::

    expr       := term ("or" term)*
    term       := factor ("and" factor)*
    factor     := "(" expr ")" | comparison
    comparison := NAME OP NUMBER | NUMBER OP NAME
    OP         := "<" | "<=" | ">" | ">=" | "==" | "=" | "!="

``NAME`` must be a metric of the cube, ``NUMBER`` a decimal number (sign and
exponent allowed). Nothing else is accepted: no function calls, attributes,
arithmetic or strings; the text is tokenised and parsed here and never
handed to ``eval``. A comparison with a NaN value is false. Parentheses nest
at most :data:`sdcdist.limits.MAX_QUERY_DEPTH` deep; error messages quote at
most the first 100 characters of the filter.

>>> import pandas as pd
>>> t = pd.DataFrame({"DLD": [1.0, 7.0, 3.0], "IL": [30.0, 5.0, 12.0]})
>>> where(t, "DLD < 5 and (IL <= 12 or IL > 25)").tolist()
[True, False, True]
>>> where(t, "DLD < 5; import os")
Traceback (most recent call last):
...
sdcdist.errors.SdcInputError: cannot read the filter 'DLD < 5; import os': unexpected ';' at position 7. A filter compares metric names with numbers (DLD < 5, IL >= 10.5), joined by and/or, with optional parentheses.
"""

from __future__ import annotations

import operator
import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

import pandas as pd
import xarray as xr

from .errors import SdcInputError, empty_error
from .limits import MAX_QUERY_DEPTH

__all__ = ["parse_where", "where", "query", "Comparison", "BoolOp"]

_HELP = ("A filter compares metric names with numbers (DLD < 5, IL >= 10.5), joined by "
         "and/or, with optional parentheses.")

_OPS: dict[str, Callable[[Any, Any], Any]] = {
    "<": operator.lt, "<=": operator.le, ">": operator.gt, ">=": operator.ge,
    "==": operator.eq, "=": operator.eq, "!=": operator.ne}
_FLIP = {"<": ">", "<=": ">=", ">": "<", ">=": "<=", "==": "==", "=": "==", "!=": "!="}

_TOKEN = re.compile(r"""
    (?P<ws>\s+)
  | (?P<num>[+-]?(?:\d+\.?\d*|\.\d+)(?:[eE][+-]?\d+)?)
  | (?P<name>[A-Za-z_][A-Za-z0-9_]*)
  | (?P<op><=|>=|==|!=|<|>|=)
  | (?P<paren>[()])
""", re.VERBOSE)


@dataclass(frozen=True)
class Comparison:
    """``name op number``."""

    name: str
    op: str
    number: float

    def evaluate(self, table: pd.DataFrame) -> pd.Series:
        col = table[self.name].astype(float)
        return _OPS[self.op](col, self.number) & col.notna()


@dataclass(frozen=True)
class BoolOp:
    """``and`` / ``or`` of two or more parts."""

    op: str
    parts: tuple[Any, ...]

    def evaluate(self, table: pd.DataFrame) -> pd.Series:
        out = self.parts[0].evaluate(table)
        for p in self.parts[1:]:
            out = (out & p.evaluate(table)) if self.op == "and" else (out | p.evaluate(table))
        return out


def _tokens(text: str) -> list[tuple[str, str, int]]:
    out, pos = [], 0
    while pos < len(text):
        m = _TOKEN.match(text, pos)
        if m is None:
            raise _error(text, f"unexpected {text[pos]!r} at position {pos}")
        kind = m.lastgroup
        if kind != "ws":
            val = m.group()
            if kind == "name" and val.lower() in ("and", "or"):
                kind, val = "bool", val.lower()
            out.append((kind, val, pos))
        pos = m.end()
    return out


def _error(text: str, what: str) -> SdcInputError:
    shown = repr(text) if len(text) <= 100 else f"{text[:100]!r}... ({len(text)} characters)"
    return SdcInputError(f"cannot read the filter {shown}: {what}. {_HELP}")


def parse_where(text: str, names: Sequence[str]) -> Comparison | BoolOp:
    """Parse a filter over the metric ``names``; raise :class:`SdcInputError` otherwise."""
    toks = _tokens(text)
    if not toks:
        raise _error(text, "it is empty")
    pos = 0
    depth = 0

    def peek() -> tuple[str, str, int] | None:
        return toks[pos] if pos < len(toks) else None

    def take(kind: str, what: str) -> tuple[str, str, int]:
        nonlocal pos
        t = peek()
        if t is None:
            raise _error(text, f"it ends where {what} was expected")
        if t[0] != kind:
            raise _error(text, f"expected {what} at position {t[2]}, found {t[1]!r}")
        pos += 1
        return t

    def name(t: tuple[str, str, int]) -> str:
        if t[1] not in names:
            raise _error(text, f"{t[1]!r} (position {t[2]}) is not a metric of this cube; "
                               f"metrics: {', '.join(names)}")
        return t[1]

    def comparison() -> Comparison:
        t = peek()
        if t is not None and t[0] == "num":
            num = take("num", "a number")
            op = take("op", "a comparison operator")
            nm = take("name", "a metric name")
            return Comparison(name(nm), _FLIP[op[1]], float(num[1]))
        nm = take("name", "a metric name or '('")
        op = take("op", "a comparison operator (<, <=, >, >=, ==, !=)")
        num = take("num", "a number")
        return Comparison(name(nm), op[1], float(num[1]))

    def factor() -> Comparison | BoolOp:
        nonlocal pos, depth
        t = peek()
        if t is not None and t[1] == "(":
            if depth >= MAX_QUERY_DEPTH:
                raise _error(text, f"the '(' at position {t[2]} nests parentheses more than "
                                   f"{MAX_QUERY_DEPTH} deep, the limit; remove redundant "
                                   "parentheses")
            pos += 1
            depth += 1
            e = expr()
            depth -= 1
            close = take("paren", "')'")
            if close[1] != ")":
                raise _error(text, f"expected ')' at position {close[2]}, found '('")
            return e
        return comparison()

    def chain(op: str, sub: Callable[[], Any]) -> Any:
        nonlocal pos
        parts = [sub()]
        while (t := peek()) is not None and t[0] == "bool" and t[1] == op:
            pos += 1
            parts.append(sub())
        return parts[0] if len(parts) == 1 else BoolOp(op, tuple(parts))

    def term() -> Any:
        return chain("and", factor)

    def expr() -> Any:
        return chain("or", term)

    try:
        tree = expr()
    except RecursionError:   # only if the caller's own stack is already nearly full
        raise _error(text, "it nests too deep to read here; remove redundant "
                           "parentheses") from None
    if pos != len(toks):
        t = toks[pos]
        raise _error(text, f"unexpected {t[1]!r} at position {t[2]}")
    return tree


def where(table: pd.DataFrame, text: str) -> pd.Series:
    """Boolean mask of the rows of ``table`` (columns = metrics) that satisfy ``text``."""
    names = [c for c in table.columns if table[c].dtype.kind in "fiu"]
    return parse_where(text, names).evaluate(table)


def query(cube: xr.Dataset, *, where_: str | None = None, sort: str | None = None,
          top: int | None = None, dataset: str | None = None) -> pd.DataFrame:
    """The cells of ``cube`` (replicate means) that pass a filter, sorted best first.

    Parameters
    ----------
    where_ : str, optional
        A filter in the language above, e.g. ``"DLD < 5 and IL < 20"``.
    sort : str, optional
        A metric; rows are sorted best first by its ``ascending`` coordinate.
    top : int, optional
        Keep the first ``top`` rows.
    dataset : str, optional
        Which dataset, for cubes of several.

    Examples
    --------
    >>> from sdcdist.cube import example_cube
    >>> query(example_cube(), where_="DLD < 5", sort="IL1s")[["DLD", "IL1s"]]
                     DLD  IL1s
    method   param
    rankswap 10.0    2.0   0.3
    noise    0.2     2.0   0.4
    """
    from .cube import cell_table, check_metrics, metric_ascending
    metrics = [str(m) for m in cube["metric"].values]
    if sort is not None:
        check_metrics(cube, [sort])
    if where_ is not None:
        tree = parse_where(where_, metrics)
    t = cell_table(cube, dataset=dataset)
    if t.empty:
        raise empty_error("The cube", "it has no finished cells yet: run the audit first")
    if where_ is not None:
        t = t[tree.evaluate(t).to_numpy()]
    if sort is not None:
        t = t.sort_values(sort, ascending=metric_ascending(cube)[sort], kind="stable",
                          na_position="last")
    return t if top is None else t.head(top)
