"""Text helpers shared by the command line and the service (below both).

- :func:`redact`: URL user-info hidden in any message;
- :func:`slug`, :func:`unique_slugs`: names made safe for file names;
- :func:`split_list`: a comma-separated option or form value as a list;
- :func:`raised_where`: ``file:line`` where an exception was raised, for failure logs.

Standard library only: the command line reads it at start-up.
"""

from __future__ import annotations

import os
import re

__all__ = ["redact", "slug", "unique_slugs", "split_list", "raised_where"]

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
