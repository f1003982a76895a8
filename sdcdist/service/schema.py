"""What an uploaded dataset's columns are: type (numeric or categorical) and roles.

An upload's answer lists every column with its type and its roles, so a column
that was read as categorical by accident (a code column, a number written with
a thousands separator) shows before any audit is run. Categorical columns show
how many categories they have, never the categories themselves (they are
values of the file).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

__all__ = ["column_schema", "ROLES"]

#: the roles a column may have, as ``sdcdist ingest`` takes them
ROLES = ("key", "confidential", "weight", "household")


def column_schema(attrs: Mapping[str, Any]) -> list[dict[str, Any]]:
    """``[{name, type, categories, roles}]`` for each column of a stored dataset, from its
    attributes (``columns``, ``roles``, ``categories``)."""
    cats = attrs.get("categories") or {}
    roles = attrs.get("roles") or {}
    out = []
    for name in attrs.get("columns") or []:
        c = cats.get(name)
        out.append({"name": str(name), "type": "categorical" if c is not None else "numeric",
                    "categories": len(c) if c is not None else None,
                    "roles": [r for r in ROLES if name in (roles.get(r) or [])]})
    return out
