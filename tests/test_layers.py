"""No import cycle in ``sdcdist`` and no import from a layer to a layer above it.

The layer order is written once, in the table of ``docs/design.md`` ("Layers"),
which this test reads: each row is a layer (lowest first) and lists module and
package names; a name covers everything under it and the longest matching name
places a module. Every module of the package is parsed with :mod:`ast` and every
``import`` / ``from ... import`` in it counts, at any depth (inside functions, under
``if TYPE_CHECKING``). The test fails on

- a module the table does not place;
- a cycle of imports (the strongly connected components of the graph, with the
  ``file:line`` of each import in them);
- an import from a module to a module of a higher layer (``file:line``).

It also reads the file tables of ``docs/design.md`` ("Files", between ``<!-- files``
and ``<!-- /files -->``: one row per file, its path under ``sdcdist/`` in backquotes
and its one job) and fails on a file of the package without a row and on a row
without a file.

The cases at the end build small packages in ``tmp_path`` to show that the scan
catches a cycle and an upward import, including imports inside functions.
"""

from __future__ import annotations

import ast
import re
from collections.abc import Sequence
from pathlib import Path

import pytest

import sdcdist

PACKAGE = Path(sdcdist.__file__).parent
DESIGN = PACKAGE.parent / "docs" / "design.md"

Graph = dict[str, dict[str, tuple[str, int]]]   # module -> imported module -> (file, line)


# ---------------------------------------------------------------------------
# the layer table

def read_layers(text: str) -> dict[str, int]:
    """``{dotted name: layer number}`` from the table between ``<!-- layers`` and
    ``<!-- /layers -->`` (columns: layer, what, names in backquotes)."""
    m = re.search(r"<!-- layers.*?-->(.*?)<!-- /layers -->", text, re.S)
    assert m, "docs/design.md has no layer table (<!-- layers ... --> ... <!-- /layers -->)"
    out: dict[str, int] = {}
    for line in m.group(1).splitlines():
        cells = [c.strip() for c in line.strip().strip("|").split("|")]
        if len(cells) < 3 or not cells[0].isdigit():
            continue
        for name in re.findall(r"`([A-Za-z_][\w.]*)`", cells[2]):
            assert name not in out, f"{name} is placed twice in the layer table"
            out[name] = int(cells[0])
    assert out, "the layer table lists no module"
    return out


def layer_of(module: str, layers: dict[str, int]) -> int | None:
    """The layer of ``module``: that of the longest table name equal to it or above it.

    ``pkg.__init__`` places the package's own ``__init__`` and nothing under it (the
    facade ``sdcdist`` does not place every module of the package).
    """
    if module + ".__init__" in layers:
        return layers[module + ".__init__"]
    parts = module.split(".")
    for i in range(len(parts), 0, -1):
        name = ".".join(parts[:i])
        if name in layers:
            return layers[name]
    return None


# ---------------------------------------------------------------------------
# the import graph

def _module_name(path: Path, root: Path) -> str:
    parts = list(path.relative_to(root).with_suffix("").parts)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


def import_graph(package: Path) -> tuple[Graph, dict[str, Path]]:
    """Every import between modules of ``package`` (a folder), at any depth of each file.

    An imported name resolves to the innermost module of the package that holds it:
    ``from ..metrics.risk import frequency`` to ``pkg.metrics.risk.frequency``, ``from ..metrics
    import get_metric`` to ``pkg.metrics`` (its ``__init__``).
    """
    root = package.parent
    top = package.name
    files = {_module_name(p, root): p for p in sorted(package.rglob("*.py"))}

    def resolve(name: str) -> str | None:
        parts = name.split(".")
        while parts:
            if ".".join(parts) in files:
                return ".".join(parts)
            parts.pop()
        return None

    graph: Graph = {m: {} for m in files}
    for mod, path in files.items():
        rel = str(path.relative_to(root))
        tree = ast.parse(path.read_text(encoding="utf-8"), filename=rel)
        here = mod.split(".") if path.name == "__init__.py" else mod.split(".")[:-1]
        for node in ast.walk(tree):
            if isinstance(node, ast.Import):
                targets = [a.name for a in node.names]
            elif isinstance(node, ast.ImportFrom):
                if node.level:
                    base = here[:len(here) - (node.level - 1)]
                    src = ".".join(base + ([node.module] if node.module else []))
                else:
                    src = node.module or ""
                targets = [f"{src}.{a.name}" if f"{src}.{a.name}" in files else src
                           for a in node.names]
            else:
                continue
            for t in targets:
                if t != top and not t.startswith(top + "."):
                    continue
                r = resolve(t)
                if r is not None and r != mod:
                    graph[mod].setdefault(r, (rel, node.lineno))
    return graph, files


def cycles(graph: Graph) -> list[list[str]]:
    """The strongly connected components of more than one module (Tarjan, iterative)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on: set[str] = set()
    out: list[list[str]] = []
    counter = 0
    for start in graph:
        if start in index:
            continue
        work = [(start, iter(graph[start]))]
        index[start] = low[start] = counter
        counter += 1
        stack.append(start)
        on.add(start)
        while work:
            v, it = work[-1]
            for w in it:
                if w not in index:
                    index[w] = low[w] = counter
                    counter += 1
                    stack.append(w)
                    on.add(w)
                    work.append((w, iter(graph[w])))
                    break
                if w in on:
                    low[v] = min(low[v], index[w])
            else:
                work.pop()
                if work:
                    low[work[-1][0]] = min(low[work[-1][0]], low[v])
                if low[v] == index[v]:
                    comp = []
                    while True:
                        w = stack.pop()
                        on.discard(w)
                        comp.append(w)
                        if w == v:
                            break
                    if len(comp) > 1:
                        out.append(sorted(comp))
    return out


def cycle_report(graph: Graph, comp: list[str]) -> str:
    inside = set(comp)
    lines = [f"{file}:{line}: {m} -> {t}" for m in comp
             for t, (file, line) in sorted(graph[m].items()) if t in inside]
    return f"a cycle of {len(comp)} modules:\n  " + "\n  ".join(lines)


def upward_imports(graph: Graph, layers: dict[str, int]) -> list[str]:
    """``file:line: a (layer i) -> b (layer j)`` for every import with j > i."""
    out = []
    for m, targets in graph.items():
        lm = layer_of(m, layers)
        for t, (file, line) in targets.items():
            lt = layer_of(t, layers)
            if lm is not None and lt is not None and lt > lm:
                out.append(f"{file}:{line}: {m} (layer {lm}) -> {t} (layer {lt})")
    return sorted(out)


def unplaced(files: dict[str, Path], layers: dict[str, int]) -> list[str]:
    return sorted(m for m in files if layer_of(m, layers) is None)


# ---------------------------------------------------------------------------
# the file tables

def read_file_table(text: str) -> dict[str, str]:
    """``{path under the package: its one job}`` from the tables between ``<!-- files`` and
    ``<!-- /files -->`` (first column a path in backquotes, second its job)."""
    m = re.search(r"<!-- files.*?-->(.*?)<!-- /files -->", text, re.S)
    assert m, "docs/design.md has no file table (<!-- files ... --> ... <!-- /files -->)"
    out: dict[str, str] = {}
    for line in m.group(1).splitlines():
        cells = [c.strip() for c in line.strip().strip("|").split("|")]
        name = re.fullmatch(r"`([\w./]+\.py)`", cells[0]) if len(cells) >= 2 else None
        if not name:
            continue
        assert name.group(1) not in out, f"{name.group(1)} has two rows in the file table"
        assert cells[1], f"the row of {name.group(1)} says no job"
        out[name.group(1)] = cells[1]
    assert out, "the file table lists no file"
    return out


def file_table_mismatch(package: Path, table: dict[str, str]) -> tuple[list[str], list[str]]:
    """(files of ``package`` without a row, rows without a file), paths under ``package``."""
    files = {p.relative_to(package).as_posix() for p in package.rglob("*.py")}
    return sorted(files - set(table)), sorted(set(table) - files)

# ---------------------------------------------------------------------------
# the package

@pytest.fixture(scope="module")
def package_graph():
    return import_graph(PACKAGE)


@pytest.fixture(scope="module")
def layers():
    return read_layers(DESIGN.read_text(encoding="utf-8"))


def test_the_scan_covers_the_package(package_graph, layers):
    graph, files = package_graph
    assert len(files) > 80
    assert layer_of("sdcdist", layers) == layers["sdcdist.__init__"]
    assert layer_of("sdcdist.new_module", layers) is None
    assert {"sdcdist", "sdcdist.errors", "sdcdist.options", "sdcdist.metrics.risk.frequency",
            "sdcdist.service.app", "sdcdist.cli._common"} <= set(files)
    # imports inside functions are seen: cli/catalog.py reads the registries in its commands
    assert "sdcdist.metrics" in graph["sdcdist.cli.catalog"]
    assert layer_of("sdcdist.linkage.prl.settings", layers) == layers["sdcdist.linkage"]
    assert layers["sdcdist.errors"] < layers["sdcdist.parallel"] < layers["sdcdist.metrics"] \
        < layers["sdcdist.audit"] < layers["sdcdist.cli"]


def test_every_module_has_a_layer(package_graph, layers):
    _, files = package_graph
    missing = unplaced(files, layers)
    assert not missing, ("modules the layer table of docs/design.md does not place: "
                         f"{missing}")
    stale = sorted(n for n in layers if not any(m == n.removesuffix(".__init__")
                                                 or m.startswith(n + ".") for m in files))
    assert not stale, f"the layer table names modules that do not exist: {stale}"


def test_every_file_has_one_row_in_the_file_table():
    missing, stale = file_table_mismatch(PACKAGE, read_file_table(DESIGN.read_text(
        encoding="utf-8")))
    assert not missing, ("files without a row in the file table of docs/design.md "
                         f"(\"Files\"): {missing}")
    assert not stale, f"rows of the file table of docs/design.md without a file: {stale}"


def test_no_import_cycle(package_graph):
    graph, _ = package_graph
    found = cycles(graph)
    assert not found, "\n".join(cycle_report(graph, c) for c in found)


def test_no_import_runs_up_a_layer(package_graph, layers):
    graph, _ = package_graph
    bad = upward_imports(graph, layers)
    assert not bad, "imports from a layer to a layer above it:\n" + "\n".join(bad)


# ---------------------------------------------------------------------------
# the scan itself, on small packages

TABLE = """
<!-- layers: test -->
| layer | what | modules and packages |
|---|---|---|
| 1 | base | `pkg.base`, `pkg.kernels` |
| 2 | middle | `pkg.mid` |
| 3 | top | `pkg.top`, `pkg.__init__` |
<!-- /layers -->
"""


def _package(tmp_path: Path, files: dict[str, str]) -> Path:
    pkg = tmp_path / "pkg"
    for name, text in {"__init__.py": "", "base.py": "X = 1\n", "kernels/__init__.py": "",
                       "mid/__init__.py": "", "mid/a.py": "from ..base import X\n",
                       "top.py": "from .mid import a\n", **files}.items():
        path = pkg / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text)
    return pkg


def test_a_clean_package_passes(tmp_path):
    graph, files = import_graph(_package(tmp_path, {}))
    layers = read_layers(TABLE)
    assert graph["pkg.mid.a"] == {"pkg.base": ("pkg/mid/a.py", 1)}
    assert cycles(graph) == [] and upward_imports(graph, layers) == []
    assert unplaced(files, layers) == []


@pytest.mark.parametrize("files, expect", [
    # two modules importing each other, one inside a function
    ({"mid/b.py": "def f():\n    from . import c\n", "mid/c.py": "from .b import f\n"},
     ["pkg.mid.b", "pkg.mid.c"]),
    # a longer circle through a package's __init__ and an absolute import
    ({"mid/__init__.py": "from .a import X\n",
      "mid/a.py": "import pkg.kernels.k\nX = 1\n",
      "kernels/k.py": "def g():\n    from pkg.mid import X\n    return X\n"},
     ["pkg.kernels.k", "pkg.mid", "pkg.mid.a"]),
])
def test_the_scan_catches_a_cycle(tmp_path, files, expect):
    graph, _ = import_graph(_package(tmp_path, files))
    found = cycles(graph)
    assert found == [expect]
    assert "a cycle of" in cycle_report(graph, found[0])


@pytest.mark.parametrize("files, expect", [
    ({"base.py": "X = 1\n\n\ndef f():\n    from .mid import b\n    return b\n",
      "mid/b.py": "Y = 2\n"},
     "pkg/base.py:5: pkg.base (layer 1) -> pkg.mid.b (layer 2)"),
    ({"kernels/fast.py": "import numpy\n\nfrom pkg import top\n"},
     "pkg/kernels/fast.py:3: pkg.kernels.fast (layer 1) -> pkg.top (layer 3)"),
    ({"mid/b.py": "from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n"
                  "    from ..top import thing\n"},
     "pkg/mid/b.py:3: pkg.mid.b (layer 2) -> pkg.top (layer 3)"),
])
def test_the_scan_catches_an_upward_import(tmp_path, files, expect):
    graph, _ = import_graph(_package(tmp_path, files))
    assert upward_imports(graph, read_layers(TABLE)) == [expect]
    assert cycles(graph) == []


def test_a_new_module_falls_in_its_package_layer(tmp_path):
    """A module added under a listed package is placed without editing the table;
    a new top-level module must be placed."""
    graph, files = import_graph(_package(tmp_path, {
        "mid/deep/new.py": "from ...base import X\n", "orphan.py": ""}))
    layers = read_layers(TABLE)
    assert layer_of("pkg.mid.deep.new", layers) == 2
    assert layer_of("pkg", layers) == 3
    assert unplaced(files, layers) == ["pkg.orphan"]


def private_reaches(package: Path) -> list[str]:
    """``file:line: module.name`` for each private name (``_x``, not dunder) one module of
    ``package`` takes from another: ``from .m import _x`` or ``m._x`` on an imported module."""
    root = package.parent
    top = package.name
    found = []
    for path in sorted(package.rglob("*.py")):
        rel = path.relative_to(root).as_posix()
        tree = ast.parse(path.read_text(encoding="utf-8"), filename=rel)
        modules: set[str] = set()          # names bound to modules of the package
        for node in ast.walk(tree):
            if isinstance(node, ast.ImportFrom):
                inside = node.level > 0 or (node.module or "").split(".")[0] == top
                if not inside:
                    continue
                for a in node.names:
                    if a.name.startswith("_") and not a.name.startswith("__"):
                        found.append(f"{rel}:{node.lineno}: {node.module or '.'}.{a.name}")
                    modules.add(a.asname or a.name)
            elif isinstance(node, ast.Import):
                for a in node.names:
                    if a.name.split(".")[0] == top:
                        modules.add(a.asname or a.name.split(".")[0])
        for node in ast.walk(tree):
            if isinstance(node, ast.Attribute) and isinstance(node.value, ast.Name) \
                    and node.value.id in modules and node.attr.startswith("_") \
                    and not node.attr.startswith("__"):
                found.append(f"{rel}:{node.lineno}: {node.value.id}.{node.attr}")
    return found


def test_no_module_reaches_into_another_modules_private_names():
    found = private_reaches(PACKAGE)
    assert not found, "private names used across modules:\n" + "\n".join(found)


@pytest.mark.parametrize("files, expect", [
    ({"mid/b.py": "from .a import _hidden\n", "mid/a.py": "_hidden = 1\n"},
     ["pkg/mid/b.py:1: a._hidden"]),
    ({"top.py": "from .mid import a\n\nY = a._hidden\n", "mid/a.py": "_hidden = 1\n"},
     ["pkg/top.py:3: a._hidden"]),
    ({"top.py": "from .mid import a\n\nY = a.__name__\n"}, []),
])
def test_the_private_name_scan_catches_reaches(tmp_path, files, expect):
    assert private_reaches(_package(tmp_path, files)) == expect


FILES = """
<!-- files: test -->
| file | one job |
|---|---|
| `__init__.py` | the facade |
| `base.py` | the base |
| `mid/a.py` | the a |
<!-- /files -->
"""


def test_the_file_table_check_catches_a_missing_and_a_stale_row(tmp_path):
    pkg = tmp_path / "pkg"
    for name in ("__init__.py", "base.py", "mid/a.py"):
        (pkg / name).parent.mkdir(parents=True, exist_ok=True)
        (pkg / name).write_text("")
    table = read_file_table(FILES)
    assert table["mid/a.py"] == "the a"
    assert file_table_mismatch(pkg, table) == ([], [])
    (pkg / "mid" / "b.py").write_text("")          # a new file without a row
    (pkg / "base.py").unlink()                      # a row whose file is gone
    assert file_table_mismatch(pkg, table) == (["mid/b.py"], ["base.py"])
    with pytest.raises(AssertionError, match="two rows"):
        read_file_table(FILES.replace("<!-- /files -->", "| `base.py` | again |\n<!-- /files -->"))


# ---------------------------------------------------------------------------
# registry names: no layer above the registries keeps lists of their names

def named_entries(package: Path, names: set[str], under: Sequence[str]) -> list[str]:
    """``file:line: 'name'`` for each string literal (not a docstring) equal to one of
    ``names`` in the modules of ``package`` whose dotted name starts with one of
    ``under``: a list of metric names, a test of a method's name."""
    root = package.parent
    found = []
    for path in sorted(package.rglob("*.py")):
        rel = path.relative_to(root).as_posix()
        module = _module_name(path, root)
        if not any(module == u.removesuffix(".__init__") if u.endswith(".__init__")
                   else module == u or module.startswith(u + ".") for u in under):
            continue
        tree = ast.parse(path.read_text(encoding="utf-8"), filename=rel)
        docs = {id(n.value) for n in ast.walk(tree) if isinstance(n, ast.Expr)
                and isinstance(n.value, ast.Constant)}
        for node in ast.walk(tree):
            if isinstance(node, ast.Constant) and isinstance(node.value, str) \
                    and node.value in names and id(node) not in docs:
                found.append(f"{rel}:{node.lineno}: {node.value!r}")
            if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) \
                    and node.func.attr in ("startswith", "endswith") and node.args \
                    and isinstance(node.args[0], ast.Constant) \
                    and any(str(node.args[0].value) and n.startswith(str(node.args[0].value))
                            for n in names if node.func.attr == "startswith"):
                found.append(f"{rel}:{node.lineno}: .startswith({node.args[0].value!r})")
    return found


def _above(layers: dict[str, int], layer: int) -> list[str]:
    return sorted(n for n, k in layers.items() if k > layer)


def test_no_module_above_the_metrics_names_a_metric(layers):
    """What a metric needs and which metrics apply live in the registry (``needs``,
    ``scaled``, ``weights``, ``guard``, :func:`sdcdist.metrics.applicable`): the layers
    above it keep no list of metric names."""
    from sdcdist.metrics import REGISTRY
    above = _above(layers, layers["sdcdist.metrics"])
    found = named_entries(PACKAGE, set(REGISTRY), above)
    assert not found, "metric names above sdcdist.metrics:\n" + "\n".join(found)


def test_the_masking_checks_name_no_method():
    """A masking method declares its data checks when it registers (``data_check``)."""
    from sdcdist.masking import REGISTRY
    found = named_entries(PACKAGE, set(REGISTRY), ["sdcdist.masking._checks"])
    assert not found, "method names in masking/_checks.py:\n" + "\n".join(found)


@pytest.mark.parametrize("src, expect", [
    ('X = ["PLD", "DLD"]\n', ["pkg/top/m.py:1: 'PLD'", "pkg/top/m.py:1: 'DLD'"]),
    ('def f(n):\n    return n.startswith("modrisk_")\n',
     ["pkg/top/m.py:2: .startswith('modrisk_')"]),
    ('"""PLD in a docstring."""\nX = "plain"\n', []),
])
def test_the_name_scan_catches_lists(tmp_path, src, expect):
    pkg = _package(tmp_path, {"top/m.py": src})
    names = {"PLD", "DLD", "modrisk_tau1"}
    assert named_entries(pkg, names, ["pkg.top"]) == expect
