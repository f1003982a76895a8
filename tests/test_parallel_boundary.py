"""Only ``sdcdist.parallel`` (and the CLI) spread work: no module elsewhere calls a client.

Every module under ``sdcdist/`` except ``parallel/`` and the CLI (``cli.py`` or
``cli/``) is parsed; a call of ``.submit(``, ``.gather(`` or ``.scatter(`` on any
receiver, or of ``.map(`` on a client or a runner, fails the test with its
file and line. Those modules use the vocabulary of :class:`sdcdist.parallel.Runner`
(``task``, ``result``, ``call``, ``share``) and the drivers of ``sdcdist.parallel``.
"""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

import sdcdist

PACKAGE = Path(sdcdist.__file__).parent
FORBIDDEN = {"submit", "gather", "scatter"}
#: ``.map(`` is forbidden on clients and runners (``Series.map`` and friends are fine)
MAP_RECEIVERS = ("client", "runner")
#: matplotlib draws scatter plots: ``ax.scatter(...)`` schedules nothing
PLOT_RECEIVERS = {"ax", "axes", "plt"}
#: ``asyncio.gather`` awaits the store's coroutines in this process: no cluster involved
LOCAL_RECEIVERS = {"asyncio"}


def _receiver(node: ast.expr) -> str:
    """The last name of a call's receiver: ``ctx.runner`` -> ``runner``, ``f()`` -> ``""``."""
    if isinstance(node, ast.Name):
        return node.id
    if isinstance(node, ast.Attribute):
        return node.attr
    return ""


def boundary_violations(source: str, filename: str = "<string>") -> list[str]:
    """``file:line: call`` for every call that spreads work outside ``sdcdist.parallel``."""
    out = []
    for node in ast.walk(ast.parse(source, filename=filename)):
        if not (isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute)):
            continue
        name, recv = node.func.attr, _receiver(node.func.value)
        if name == "scatter" and recv in PLOT_RECEIVERS or recv in LOCAL_RECEIVERS:
            continue
        if name in FORBIDDEN or (name == "map" and (recv.lower().endswith(MAP_RECEIVERS)
                                                     or recv == "r")):
            out.append((node.lineno, f"{filename}:{node.lineno}: {recv or '...'}.{name}(...)"))
    return [text for _, text in sorted(out)]


def _scanned_modules() -> list[Path]:
    out = []
    for path in sorted(PACKAGE.rglob("*.py")):
        rel = path.relative_to(PACKAGE)
        if rel.parts[0] in ("parallel", "cli") or rel.name == "cli.py" and len(rel.parts) == 1:
            continue
        out.append(path)
    return out


def test_no_module_outside_parallel_spreads_work():
    modules = _scanned_modules()
    assert len(modules) > 30                      # the scan really covers the package
    names = {p.relative_to(PACKAGE).as_posix() for p in modules}
    assert {"metrics/risk/linkage.py", "metrics/loss/ranks.py", "linkage/distance_drivers.py",
            "audit/run.py", "audit/calibrate.py"} <= names
    assert not any(n.startswith(("parallel/", "cli/")) or n == "cli.py" for n in names)
    bad = [v for p in modules
           for v in boundary_violations(p.read_text(), str(p.relative_to(PACKAGE.parent)))]
    assert not bad, "work spread outside sdcdist.parallel:\n" + "\n".join(bad)


@pytest.mark.parametrize("source", [
    "client.submit(f)",
    "def g(client):\n    fut = client.submit(f, 1, pure=False)\n    return fut",
    "self.client.gather(futs)",
    "ctx.runner.scatter(x)",
    "X = client.scatter(v, broadcast=True)",
    "runner.map(f, xs)",
    "r.submit(f)",
    "get_client().submit(f)",
    "futs = self._client.map(f, xs)",
])
def test_the_scan_catches_cluster_calls(source):
    found = boundary_violations(source, "mod.py")
    assert len(found) == 1
    line = next(i for i, t in enumerate(source.splitlines(), 1)
                if any(f".{k}(" in t for k in (*FORBIDDEN, "map")))
    assert found[0].startswith(f"mod.py:{line}: ")


@pytest.mark.parametrize("source", [
    "runner.task(f, x)",
    "runner.call(f, x)",
    "ctx.runner.share(x)",
    "runner.result([a, b])",
    "df['a'].map(str)",
    "ax.scatter(x, y)",
    "await asyncio.gather(*coros)",
    "submit = 1",
])
def test_the_scan_lets_the_vocabulary_through(source):
    assert boundary_violations(source) == []
