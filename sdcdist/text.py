"""Text helpers shared by the command line and the service (below both).

- :func:`redact`: URL user-info hidden in any message;
- :func:`slug`, :func:`unique_slugs`: names made safe for file names;
- :func:`split_list`: a comma-separated option or form value as a list;
- :func:`name_list`: the same for a list of names, refused when it names nothing or a
  name twice (the one rule of every command's and the service's name lists);
- :func:`label`: a name given as free text (a dataset's or an audit's), refused empty,
  longer than 255 bytes or holding a control character (:data:`CONTROL`);
- :func:`escape_controls`: control characters shown escaped, for log lines;
- :func:`raised_where`: ``file:line`` where an exception was raised, for failure logs.

Standard library and :mod:`sdcdist.errors` only: the command line reads it at start-up.
"""

from __future__ import annotations

import os
import re
from collections.abc import Iterable, Sequence
from typing import Any

from .errors import SdcInputError, empty_error, value_error

__all__ = ["redact", "slug", "unique_slugs", "split_list", "name_list", "repeated",
           "label", "raised_where", "MAX_LABEL_BYTES", "CONTROL", "escape_controls"]

#: bytes of a name given as free text (a file name's bound on most file systems)
MAX_LABEL_BYTES = 255

#: the control characters: C0 (line feed, carriage return, escape, NUL...), DEL, C1 (NEL...)
#: and the Unicode line and paragraph separators. A log line shows them escaped
#: (:func:`escape_controls`), a name given as free text may not hold one (:func:`label`):
#: a value taken from a request can then neither end a line and forge another nor send a
#: terminal escape sequence
CONTROL = re.compile(r"[\x00-\x1f\x7f-\x9f\u2028\u2029]")
_SHORT = {"\n": "\\n", "\r": "\\r", "\t": "\\t"}


def _escape_one(m: re.Match) -> str:
    c = m.group(0)
    return _SHORT.get(c) or (f"\\x{ord(c):02x}" if ord(c) < 0x100 else f"\\u{ord(c):04x}")


def escape_controls(text: str) -> str:
    """``text`` with each control character (:data:`CONTROL`) shown escaped (``\\n``,
    ``\\x1b``, ``\\u2028``), so that it stays on one log line and cannot drive a terminal.

    >>> print(escape_controls("a\\nb\\x1b[31m\\u2028"))
    a\\nb\\x1b[31m\\u2028
    """
    return CONTROL.sub(_escape_one, text)

_USERINFO = re.compile(r"([A-Za-z][A-Za-z0-9+.-]*://)[^/@\s'\"]*@")


def redact(text: str) -> str:
    """``text`` with the user-info of every URL in it replaced by ``***``.

    >>> redact("cannot read 's3://user:SECRET@bucket/x.zarr'")
    "cannot read 's3://***@bucket/x.zarr'"
    """
    return _USERINFO.sub(r"\1***@", str(text))


_SLUG_BAD = re.compile(r"[^A-Za-z0-9._-]+")


def slug(name: str) -> str:
    """A file-name-safe form of ``name``: letters, digits, ``.``, ``_``, ``-`` only.

    Separators and ``..`` cannot survive, so the result never leaves its folder.

    >>> slug("sub/../../x")
    'sub_x'
    >>> slug("census")
    'census'
    """
    s = _SLUG_BAD.sub("_", str(name))
    s = re.sub(r"\.{2,}", "_", s)
    s = re.sub(r"_+", "_", s).strip("._-")
    return s or "dataset"


def unique_slugs(names: list[str]) -> dict[str, str]:
    """:func:`slug` of each name, with ``-2``, ``-3``... added where two would collide."""
    out: dict[str, str] = {}
    used: set[str] = set()
    for n in names:
        s = base = slug(n)
        i = 2
        while s.lower() in used:
            s, i = f"{base}-{i}", i + 1
        used.add(s.lower())
        out[n] = s
    return out


def split_list(s: str) -> list[str]:
    """``"A, B,,C"`` -> ``["A", "B", "C"]``: a comma-separated option value."""
    return [c.strip() for c in s.split(",") if c.strip()]


def repeated(items: Iterable[Any]) -> list[Any]:
    """The items that come more than once, each once, in the order they first repeat.

    >>> repeated(["a", "b", "a", "c", "b", "a"])
    ['a', 'b']
    """
    seen: set[Any] = set()
    out: list[Any] = []
    for x in items:
        if x in seen and x not in out:
            out.append(x)
        seen.add(x)
    return out


def name_list(value: str | Sequence[str] | None, what: str, *, kind: str = "column"
              ) -> list[str] | None:
    """The names of a comma-separated list option (``--keys A,B``; a repeatable option's
    values together, ``--metric A --metric B,C``): None when it is not given.

    Refused (:class:`~sdcdist.errors.SdcInputError`): a value that names nothing
    (``--metrics ''``, ``--keys ' , '``) and a name given twice (``--keys r,r``); ``kind``
    says what the names are (``"metric"``), for the message.

    >>> name_list(" A, B", "--keys")
    ['A', 'B']
    >>> name_list(("DLD", "ID1,RR"), "--metric", kind="metric")
    ['DLD', 'ID1', 'RR']
    >>> name_list(None, "--keys") is None
    True
    """
    if value is None:
        return None
    items = [value] if isinstance(value, str) else list(value)
    if not items:                   # a repeatable option not given
        return None
    names = [n for item in items for n in split_list(str(item))]
    if not names:
        raise empty_error(what, f"give {kind} names (comma-separated), or leave {what} out")
    dup = repeated(names)
    if dup:
        raise SdcInputError(f"{what} names {dup} more than once; list each {kind} once")
    return names


def label(value: Any, what: str, *, max_bytes: int = MAX_LABEL_BYTES) -> str:
    """``value`` checked as a name given as free text (a dataset's, an audit's): a string
    that is not blank, of at most ``max_bytes`` bytes (UTF-8), without a control
    character. Refused (:class:`~sdcdist.errors.SdcInputError`, naming ``what``) otherwise;
    the message never repeats a long or unprintable value.

    >>> label("census 2024", "'name'")
    'census 2024'
    >>> label(None, "'name'")
    Traceback (most recent call last):
    ...
    sdcdist.errors.SdcInputError: 'name' must be a non-empty text of at most 255 bytes without control characters. Got None instead.
    """
    allowed = f"a non-empty text of at most {max_bytes} bytes without control characters"
    if not isinstance(value, str):
        raise value_error(what, allowed, got_text=repr(value)
                          if value is None or isinstance(value, (bool, int, float))
                          else f"a {type(value).__name__}")
    if not value.strip():
        raise value_error(what, allowed, got_text="an empty text" if not value
                          else "a blank text")
    size = len(value.encode("utf-8", "surrogatepass"))
    if size > max_bytes:
        raise value_error(what, allowed, got_text=f"{size:,} bytes")
    if CONTROL.search(value):
        raise value_error(what, allowed, got_text="a text with a control character "
                          "(such as a NUL byte or a line break)")
    return value


def raised_where(exc: BaseException) -> str:
    """``file:line`` where ``exc`` was raised, and the innermost sdcdist frame if elsewhere."""
    import traceback
    frames = traceback.extract_tb(exc.__traceback__)
    if not frames:
        return "?"
    pkg = os.path.dirname(os.path.abspath(__file__))   # .../sdcdist
    ours = [f for f in frames if os.path.abspath(f.filename).startswith(pkg + os.sep)]
    last = frames[-1]
    where = f"{os.path.basename(last.filename)}:{last.lineno}"
    if ours and ours[-1] is not last:
        where += f", called from {os.path.relpath(ours[-1].filename, os.path.dirname(pkg))}" \
                 f":{ours[-1].lineno}"
    return where
