"""YAML written by users (specs, ``risk -o KEY=VALUE`` values), read safely.

:class:`SpecLoader` is PyYAML's ``SafeLoader`` (no Python objects) with five
changes:

- **no anchors or aliases** (``&name``, ``*name``, ``<<: *name``). An alias
  can refer to itself, and nested aliases make a spec of a few hundred bytes
  expand to 10^9 nodes ("billion laughs"); a spec is short enough to write
  out in full.
- **bounded nesting**: at most :data:`sdcdist.limits.MAX_YAML_DEPTH` levels of
  lists and mappings (deeper input would exhaust Python's recursion limit).
- **YAML 1.2 numbers**: ``5e-2``, ``1e3`` and ``1.5e3`` are floats (YAML 1.1,
  which PyYAML follows, reads them as strings); dates stay strings
  (YAML 1.2 has no timestamp type).
- **no duplicate keys**: a key given twice in one mapping is refused instead
  of the last one silently winning.
- **the core schema only**: null, booleans, integers, floats, strings, lists and
  mappings. Any other tag (``!!binary``, ``!!timestamp``, ``!!set``, ``!!omap``,
  ``!!pairs``, ``!!python/...``, a local ``!tag``) is refused, and ``<<`` is an
  ordinary key (no merge).

Every problem is an :class:`SdcInputError` naming the input and the line.

>>> load_yaml("params: [5e-2, 1e3, .5]", what="the spec")
{'params': [0.05, 1000.0, 0.5]}
>>> load_yaml("a: &x [1]\\nb: *x", what="spec file 'a.yaml'")
Traceback (most recent call last):
...
sdcdist.errors.SdcInputError: spec file 'a.yaml' uses a YAML anchor (&x) at line 1; specs and options may not use YAML anchors (&name) or aliases (*name): write the values out in full.
"""

from __future__ import annotations

import re
from typing import Any

import yaml

from .errors import SdcInputError
from .limits import MAX_YAML_DEPTH

__all__ = ["SpecLoader", "load_yaml", "parse_option_value", "CORE_TAGS"]

_FLOAT = "tag:yaml.org,2002:float"
_TIMESTAMP = "tag:yaml.org,2002:timestamp"
# YAML 1.2 core schema floats without a '.' that YAML 1.1 misses: 5e-2, 1e3, 1.5e3, -2E+4
_NO_ALIAS = ("specs and options may not use YAML anchors (&name) or aliases (*name): "
             "write the values out in full")
_MERGE = "tag:yaml.org,2002:merge"
#: the tags of YAML 1.2's core schema: the only ones a spec may hold, given or implied
CORE_TAGS = frozenset(f"tag:yaml.org,2002:{t}"
                      for t in ("null", "bool", "int", "float", "str", "seq", "map"))
_FLOAT12 = re.compile(r"^[-+]?(?:[0-9]+(?:\.[0-9]*)?|\.[0-9]+)[eE][-+]?[0-9]+$")


class _Refused(yaml.YAMLError):
    """A construct a spec may not use; ``why`` completes the sentence."""

    def __init__(self, why: str, mark: Any, fix: str) -> None:
        super().__init__(why)
        self.why = why
        self.problem_mark = mark
        self.fix = fix


class SpecLoader(yaml.SafeLoader):
    """``SafeLoader`` without anchors, aliases or duplicate keys, with bounded nesting and
    YAML 1.2 floats."""

    _depth = 0

    def compose_node(self, parent: Any, index: Any) -> Any:
        event = self.peek_event()
        if isinstance(event, yaml.AliasEvent):
            raise _Refused(f"uses a YAML alias (*{event.anchor})", event.start_mark, _NO_ALIAS)
        if getattr(event, "anchor", None) is not None:
            raise _Refused(f"uses a YAML anchor (&{event.anchor})", event.start_mark, _NO_ALIAS)
        if self._depth >= MAX_YAML_DEPTH:
            raise _Refused(f"nests lists or mappings more than {MAX_YAML_DEPTH} levels deep",
                           event.start_mark, "a spec needs only a few levels")
        self._depth += 1
        try:
            return super().compose_node(parent, index)
        finally:
            self._depth -= 1

    def construct_object(self, node: Any, deep: bool = False) -> Any:
        if node.tag not in CORE_TAGS:
            tag = node.tag
            if tag.startswith("tag:yaml.org,2002:"):
                tag = "!!" + tag[len("tag:yaml.org,2002:"):]
            raise _Refused(f"uses the YAML tag {tag[:40]!r}", node.start_mark,
                           "a spec holds only numbers, strings, booleans, null, lists and "
                           "mappings (YAML's core schema): remove the tag")
        return super().construct_object(node, deep=deep)

    def construct_mapping(self, node: Any, deep: bool = False) -> Any:
        if isinstance(node, yaml.MappingNode):
            seen: set[Any] = set()
            for key_node, _ in node.value:
                if isinstance(key_node, yaml.ScalarNode):
                    key = self.construct_object(key_node)
                    if key in seen:
                        raise _Refused(f"gives the key {key!r} twice in one mapping",
                                       key_node.start_mark, "give each key once")
                    seen.add(key)
        return super().construct_mapping(node, deep=deep)


SpecLoader.yaml_implicit_resolvers = {
    first: [(tag, rx) for tag, rx in resolvers if tag not in (_TIMESTAMP, _MERGE)]
    for first, resolvers in yaml.SafeLoader.yaml_implicit_resolvers.items()}
SpecLoader.add_implicit_resolver(_FLOAT, _FLOAT12, list("-+0123456789."))


def load_yaml(text: str, *, what: str) -> Any:
    """Parse one YAML document with :class:`SpecLoader`.

    Parameters
    ----------
    text : str
        The YAML text.
    what : str
        The input, as the message should name it (``"spec file 'a.yaml'"``).

    Raises
    ------
    SdcInputError
        For a syntax error, an anchor or alias, too deep nesting, a duplicate
        key, a tag beyond the core schema (``!!binary``, ``!!timestamp``, ...), or a
        value its tag cannot represent (``!!int abc``).
    """
    try:
        return yaml.load(text, Loader=SpecLoader)  # noqa: S506 - SpecLoader is a SafeLoader
    except _Refused as exc:
        line = f" at line {exc.problem_mark.line + 1}" if exc.problem_mark is not None else ""
        raise SdcInputError(f"{what} {exc.why}{line}; {exc.fix}.") from None
    except yaml.reader.ReaderError as exc:
        raise SdcInputError(f"{what} contains a character YAML does not allow (code point "
                            f"U+{exc.character:04X}, character {exc.position + 1}); remove "
                            "it") from None
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        line = f" at line {mark.line + 1}" if mark is not None else ""
        problem = getattr(exc, "problem", None) or ""
        context = getattr(exc, "context", None) or ""
        if problem.startswith("but ") and context:
            problem = f"{context} {problem}"
        why = f" ({problem})" if problem else ""
        raise SdcInputError(f"{what} is not valid YAML{line}{why}; fix the syntax") from None
    except (ValueError, OverflowError, TypeError):
        # e.g. an explicit '!!timestamp 2024-13-45' or '!!int' on a non-number
        raise SdcInputError(f"{what} has a value YAML cannot convert (an explicit '!!' tag "
                            "on a value of another type?); fix the value") from None


def parse_option_value(key: str, text: str) -> Any:
    """The value of a ``KEY=VALUE`` command-line option, read as YAML (``[V4,V12]``,
    ``0.05``, ``true``), with the same rules as a spec.

    Raises
    ------
    SdcInputError
        Naming the option if the value is not valid YAML.

    Examples
    --------
    >>> parse_option_value("crl_external", "[V4, V12]")
    ['V4', 'V12']
    >>> parse_option_value("p", "5e-2")
    0.05
    """
    return load_yaml(text, what=f"the value of option {key!r}")
