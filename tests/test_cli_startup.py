"""The command line starts fast: `sdcdist --help` loads no numerical library, every
command's --help works, and a second call reuses numba's on-disk cache.

Nothing here measures time: the checks are on which modules a run imports and on
what numba's cache reports.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest
from click.testing import CliRunner

import sdcdist
from sdcdist.cli import main

#: what `sdcdist --help` must not import (each takes 0.1-0.5 s to import)
HEAVY = ("dask", "distributed", "numba", "scipy", "xarray", "zarr", "pandas")

COMMANDS = {"ingest", "synth", "mask", "methods", "metrics", "measure", "risk", "link",
            "audit", "calibrate", "report", "query", "plot", "certs"}


def _env(**extra: str) -> dict[str, str]:
    """The environment of a subprocess that imports this very sdcdist tree."""
    root = str(Path(sdcdist.__file__).resolve().parents[1])
    path = os.pathsep.join(p for p in (root, os.environ.get("PYTHONPATH")) if p)
    return {**os.environ, "PYTHONPATH": path, **extra}


def _cli(*args: str, importtime: bool = False, env: dict | None = None,
         cwd: Path | None = None) -> subprocess.CompletedProcess:
    pre = ["-X", "importtime"] if importtime else []
    return subprocess.run([sys.executable, *pre, "-m", "sdcdist.cli", *args],
                          capture_output=True, text=True, timeout=300, env=env or _env(),
                          cwd=cwd)


def _imported(stderr: str) -> set[str]:
    """Modules named in `-X importtime` lines, and their top-level packages."""
    out = set()
    for line in stderr.splitlines():
        if line.startswith("import time:") and line.count("|") == 2:
            name = line.rsplit("|", 1)[1].strip()
            if name != "imported package":
                out |= {name, name.split(".")[0]}
    return out


def test_help_imports_no_numerical_library():
    r = _cli("--help", importtime=True)
    assert r.returncode == 0, r.stderr
    assert "Usage:" in r.stdout and "audit" in r.stdout
    mods = _imported(r.stderr)
    assert "click" in mods and "sdcdist" in mods       # the parse saw real lines
    assert not mods & set(HEAVY), sorted(mods & set(HEAVY))


def test_importing_the_facade_and_the_cli_is_cheap():
    code = ("import sys, json, sdcdist, sdcdist.cli; "
            f"print(json.dumps(sorted(m for m in {HEAVY!r} if m in sys.modules)))")
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                       timeout=120, env=_env())
    assert r.returncode == 0, r.stderr
    assert json.loads(r.stdout) == []


def test_facade_names_still_work():
    import sdcdist.data
    import sdcdist.masking
    import sdcdist.metrics
    for name in sdcdist.__all__:
        assert getattr(sdcdist, name) is not None, name
    assert sdcdist.MASKING_METHODS is sdcdist.masking.REGISTRY
    assert sdcdist.METRICS is sdcdist.metrics.REGISTRY
    assert sdcdist.Microdata is sdcdist.data.Microdata
    with pytest.raises(AttributeError):
        sdcdist.no_such_name  # noqa: B018


def test_methods_lists_without_dask_or_scipy_stats():
    r = _cli("methods", importtime=True)
    assert r.returncode == 0, r.stderr
    assert "rankswap" in r.stdout and "distr" in r.stdout
    mods = _imported(r.stderr)
    # numba itself imports the bare scipy package (a few ms), not scipy.stats (~0.5 s)
    heavy = {"dask", "distributed", "scipy.stats", "scipy.optimize", "xarray", "zarr", "pandas"}
    assert "numba" in mods and not mods & heavy, sorted(mods & heavy)


def test_every_command_has_help():
    assert COMMANDS <= set(main.commands), sorted(COMMANDS - set(main.commands))
    runner = CliRunner()
    for name in sorted(main.commands):
        r = runner.invoke(main, [name, "--help"], catch_exceptions=False)
        assert r.exit_code == 0, (name, r.output)
        assert r.output.startswith("Usage:") and f" {name} " in r.output.splitlines()[0]


def test_python_dash_m_runs_the_cli():
    r = _cli("methods")
    assert r.returncode == 0 and "micmul" in r.stdout
    r = _cli("mask", "nothing.csv", "-m", "no_such_method", "--out", "x.csv")
    assert r.returncode == 2 and r.stderr.startswith("Error: ")


def test_cluster_options_and_the_one_cluster_helper():
    from sdcdist.cli._common import ClusterOptions, cluster
    with cluster(ClusterOptions(local=True)) as client:
        assert client is None
    local = {p.name for p in main.commands["measure"].params}
    remote = {p.name for p in main.commands["audit"].params}
    assert {"scheduler", "workers", "tls_ca", "tls_cert", "tls_key"} <= local & remote
    assert "local" in local and "local" not in remote


def test_workers_the_cli_starts_run_without_the_profiler():
    """The command line's LocalCluster hands WORKER_CONFIG to its workers (no statistical
    profiler: sampling the threads' frames can crash CPython 3.11), in a process whose Dask
    config is the default one (the tests' conftest sets it for its own clusters)."""
    script = ("import dask, distributed, json\n"
              "from sdcdist.cli._common import ClusterOptions, cluster\n"
              "assert dask.config.get('distributed.worker.profile.enabled')\n"
              "import signal\n"
              "with cluster(ClusterOptions(workers=1), quiet=True) as c:\n"
              "    print(json.dumps(list(c.run(lambda dask_worker: sorted("
              "dask_worker.periodic_callbacks)).values())))\n"
              "    print(json.dumps(list(c.run(lambda: signal.getsignal(signal.SIGINT) "
              "is signal.SIG_IGN).values())))\n"
              "assert dask.config.get('distributed.worker.profile.enabled')\n")
    env = {k: v for k, v in os.environ.items() if not k.startswith("DASK_")}
    r = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True,
                       timeout=120, env=env)
    assert r.returncode == 0, r.stderr
    (callbacks,) = json.loads(r.stdout.strip().splitlines()[-2])
    assert "heartbeat" in callbacks and "profile" not in callbacks, callbacks
    # Ctrl-C is the command's: its workers ignore SIGINT (parallel.preload)
    assert json.loads(r.stdout.strip().splitlines()[-1]) == [True]


def test_worker_preload_ignores_sigint_only_in_the_main_thread():
    import signal
    import threading

    from sdcdist.parallel.preload import dask_setup
    before = signal.getsignal(signal.SIGINT)
    try:
        t = threading.Thread(target=dask_setup)          # not the main thread: no change
        t.start()
        t.join()
        assert signal.getsignal(signal.SIGINT) is before
        dask_setup()
        assert signal.getsignal(signal.SIGINT) is signal.SIG_IGN
    finally:
        signal.signal(signal.SIGINT, before)


def test_ctrl_c_ends_a_command_with_one_line_and_exit_130(run, monkeypatch, tmp_path):
    """Ctrl-C printed click's "Aborted!" (exit 1) and, from the workers of a LocalCluster,
    pages of KeyboardInterrupt tracebacks: one line and the shells' 130 now."""
    import logging

    import sdcdist.metrics as metrics_module

    def interrupted(*a, **k):
        raise KeyboardInterrupt
    monkeypatch.setattr(metrics_module, "measure", interrupted)
    # the interrupt path silences asyncio's logger and unraisable reports for the rest of
    # its process (the command ends there); this test's process goes on, and conftest's
    # check of futures never retrieved reads that logger: both are restored after the test
    monkeypatch.setattr(logging.getLogger("asyncio"), "disabled", False)
    monkeypatch.setattr(sys, "unraisablehook", sys.unraisablehook)
    (tmp_path / "x.csv").write_text("a,b\n1,2\n3,4\n5,7\n")
    res = run("risk", tmp_path / "x.csv", tmp_path / "x.csv", "--local", "--metric", "DLD")
    assert res.exit_code == 130
    assert res.stderr.strip() == ("Interrupted. An audit keeps the cells it has written: "
                                  "rerun the same command to resume.")


def test_ctrl_c_says_nothing_of_the_coroutines_it_cut_short(tmp_path):
    """A zarr write cut short by Ctrl-C leaves a coroutine that was never awaited; when it
    is collected at exit Python warned of it ("coroutine 'concurrent_map.<locals>.run' was
    never awaited") below the one line."""
    (tmp_path / "x.csv").write_text("a,b\n1,2\n3,4\n5,7\n")
    script = textwrap.dedent("""
        import sys
        import sdcdist.metrics as metrics_module
        async def run():
            pass
        def interrupted(*a, **k):
            pending = run()             # as zarr's concurrent_map leaves it
            raise KeyboardInterrupt
        metrics_module.measure = interrupted
        from sdcdist.cli import main
        main(["risk", "x.csv", "x.csv", "--local", "--metric", "DLD"])
    """)
    res = subprocess.run([sys.executable, "-c", script], cwd=tmp_path, env=_env(),
                         capture_output=True, text=True, timeout=120)
    assert res.returncode == 130, res.stderr
    assert res.stderr.strip() == ("Interrupted. An audit keeps the cells it has written: "
                                  "rerun the same command to resume.")


@pytest.mark.slow
def test_ctrl_c_on_an_audit_leaves_no_worker_traceback(tmp_path):
    """A terminal's Ctrl-C reaches every process of the group, the workers too."""
    import time

    from _signals import interrupt, kill, start
    spec = (Path(__file__).parents[1] / "examples" / "household.yaml").read_text()
    (tmp_path / "h.yaml").write_text(spec.replace("replicates: 2", "replicates: 40"))
    p = start([sys.executable, "-m", "sdcdist", "audit", str(tmp_path / "h.yaml"), "--out",
               str(tmp_path / "h.zarr"), "--workers", "2"])
    try:
        line = p.stderr.readline()                     # the cluster is up
        assert "Dask dashboard" in line, line
        time.sleep(4)
        err = interrupt(p)
    finally:
        kill(p)
    assert p.returncode == 130, err
    assert "Traceback" not in err and "KeyboardInterrupt" not in err, err
    assert err.strip().endswith("Interrupted. An audit keeps the cells it has written: "
                                "rerun the same command to resume.")


def test_image_turns_the_profiler_off():
    from sdcdist.parallel import WORKER_CONFIG, worker_config_env
    assert worker_config_env() == {"DASK_DISTRIBUTED__WORKER__PROFILE__ENABLED": "False"}
    docker = (Path(__file__).parents[1] / "deploy" / "Dockerfile").read_text()
    for k, v in worker_config_env().items():
        assert f"{k}={v}" in docker, k
    import dask.config                # what Dask reads from the variable: the setting itself
    assert dask.config.collect_env(worker_config_env()) == \
        {"distributed": {"worker": {"profile": {"enabled": False}}}}
    assert WORKER_CONFIG == {"distributed.worker.profile.enabled": False}


#: runs the CLI in-process, then prints each sdcdist numba kernel's cache hits and misses
#: (a miss is a compilation: numba counts one for every signature it compiles)
_COUNT_COMPILES = """
import json, sys
from numba.core.dispatcher import Dispatcher
from sdcdist.cli import main
try:
    main(sys.argv[1:], prog_name="sdcdist")
except SystemExit as exc:
    assert not exc.code, exc.code
out = {f"{m}.{a}": [sum(o.stats.cache_hits.values()), sum(o.stats.cache_misses.values())]
       for m, mod in list(sys.modules.items()) if m.startswith("sdcdist")
       for a, o in vars(mod).items() if isinstance(o, Dispatcher)}
print(json.dumps(out))
"""


@pytest.mark.slow
def test_second_call_compiles_no_numba_kernel(tmp_path):
    """A second CLI call loads every numba kernel it runs from the on-disk cache.

    numba's default cache place is used (``__pycache__`` beside the kernels,
    usually filled by other tests already); the first call fills what is missing.
    A kernel without ``cache=True``, or one whose signature changes from call to
    call, is compiled again and counted as a miss.
    """
    data = tmp_path / "d.csv"
    r = _cli("synth", "--rows", "300", "--columns", "4", "--out", str(data))
    assert r.returncode == 0, r.stderr
    masked = str(tmp_path / "m.csv")
    for args in (("mask", str(data), "-m", "micmul", "-p", "3", "--out", masked, "--overwrite"),
                 ("mask", str(data), "-m", "rankswap", "-p", "5", "--out", masked, "--overwrite"),
                 ("measure", str(data), masked, "--local", "--metric", "IL1s")):
        runs = [subprocess.run([sys.executable, "-c", _COUNT_COMPILES, *args],
                               capture_output=True, text=True, timeout=300, env=_env())
                for _ in range(2)]
        for run in runs:
            assert run.returncode == 0, run.stderr
        counts = json.loads(runs[1].stdout.splitlines()[-1])
        compiled = {k: v for k, v in counts.items() if v[1]}
        assert not compiled, (args[0], args[3], compiled)
        assert sum(hits for hits, _ in counts.values()) > 0, (args[0], args[3], counts)
