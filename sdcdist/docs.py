"""Write the reference tables of ``docs/catalog.md`` from the registries.

``python -m sdcdist.docs docs/catalog.md`` replaces the text between the
``<!-- methods -->`` / ``<!-- metrics -->`` / ``<!-- options -->`` markers and
their ``<!-- end -->`` with tables built from :data:`sdcdist.masking.REGISTRY`,
:data:`sdcdist.metrics.REGISTRY` and :data:`sdcdist.options.OPTIONS`, so the
docs never list a method or an option twice by hand.
"""

from __future__ import annotations

import re
import sys
from pathlib import Path

__all__ = ["methods_table", "metrics_table", "options_table", "render"]


def _md(text: str) -> str:
    return text.replace("|", "\\|")


def methods_table() -> str:
    from .masking import REGISTRY
    rows = ["| method | parameter | valid range | description | reference |",
            "|---|---|---|---|---|"]
    for name, m in REGISTRY.items():
        allowed = "-" if m.kind == "none" else m.allowed_text()
        rows.append(f"| `{name}` | {m.param} | {allowed} | {_md(m.description)} | "
                    f"{m.reference} |")
    return "\n".join(rows)


def metrics_table() -> str:
    from .metrics import REGISTRY
    rows = ["| metric | kind | unit | per key set | rank 1 = | description | reference |",
            "|---|---|---|---|---|---|---|"]
    for name, m in REGISTRY.items():
        best = "smallest" if m.ascending else "largest"
        ks = "" if not m.keysets else "yes" if m.keyset_default == "prefixes" else \
            "named ones; else all key columns"
        rows.append(f"| `{name}` | {m.kind} | {_md(m.unit)} | {ks} | {best} | "
                    f"{_md(m.description)} | {m.reference} |")
    return "\n".join(rows)


def options_table() -> str:
    """Every declared option: default, valid values, who reads it, description."""
    from .masking import REGISTRY as METHODS
    from .metrics import REGISTRY as METRICS
    from .options import OPTIONS, default_text
    rows = ["| option | default | valid values | used by | description |",
            "|---|---|---|---|---|"]
    for name, o in OPTIONS.items():
        if o.scope == "audit":
            users = "the audit's cell executor"
        else:
            reg = METRICS if o.scope == "metric" else METHODS
            users = ", ".join(n for n, x in reg.items() if name in x.options)
        rows.append(f"| `{name}` | `{_md(default_text(o))}` | {_md(o.allowed)} | {users} | "
                    f"{_md(o.description)} |")
    return "\n".join(rows)


def render(text: str) -> str:
    """``text`` with the marked sections replaced by the current tables."""
    for marker, table in (("methods", methods_table()), ("metrics", metrics_table()),
                          ("options", options_table())):
        text = re.sub(rf"(<!-- {marker} -->\n).*?(<!-- end -->)",
                      lambda m, t=table: m.group(1) + t + "\n" + m.group(2), text,
                      flags=re.S)
    return text


if __name__ == "__main__":  # pragma: no cover
    path = Path(sys.argv[1] if len(sys.argv) > 1 else "docs/catalog.md")
    path.write_text(render(path.read_text()))
