"""Every command, run as a user runs it with ``--log-format json``, on data holding a
planted distinctive value (issue 14): no output other than the data files themselves
may carry the value, in any spelling, and every stderr line is one JSON object.

Outputs searched: stdout, stderr (the command's own lines, the log lines, the lines of
the LocalCluster's worker processes), the tables of ``report``/``query``/``calibrate``
(CSV, HTML, Markdown), every ``zarr.json`` (attributes and metadata) of every store and
cube, the cubes' chunks, the plots (PNG text chunks included: the whole file is
searched), the link pairs and the certificates. Error paths are run too: bad inputs
whose messages name the file but never a value.
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from sdcdist.cli import main

pytestmark = pytest.mark.slow

ROOT = Path(__file__).resolve().parents[1]
PLANTED = 7919.123456
#: the planted value in any spelling: 7919.123456, 7919.12, 7,919.1, 7.919123456e+03, ...
SPELLINGS = re.compile(rb"7[,._ ]?919[,._ ]?1(?:2|\b|e)", re.IGNORECASE)

#: the commands this test runs; a new command must be added here (and run below)
COVERED = {"ingest", "synth", "mask", "methods", "metrics", "measure", "risk", "link",
           "audit", "calibrate", "report", "query", "plot", "certs", "verify",
           "release", "describe", "serve"}   # serve: its responses and log are searched by tests/test_service.py


def _data(rng: np.random.Generator) -> np.ndarray:
    z = rng.standard_normal((60, 4)) @ np.array([[1, .5, .2, 0], [0, 1, .3, .1],
                                                  [0, 0, 1, .4], [0, 0, 0, 1.]])
    X = np.round(np.exp(z) * np.array([1000, 500, 100, 10]), 2)
    X[17, 1] = PLANTED
    return X


def _csv(path: Path, header: str, rows: list[str]) -> Path:
    path.write_text(header + "\n" + "\n".join(rows) + "\n")
    return path


#: commands that start a LocalCluster run as their own process, so that the lines of its
#: worker processes are searched too; the others run in this process (click's runner,
#: stdout and stderr apart), as the same code with the same streams, without a new
#: interpreter importing everything for each of them
IN_A_PROCESS = {"link", "audit", "calibrate"}


def _run(args: list[str], cwd: Path) -> subprocess.CompletedProcess:
    if args[0] not in IN_A_PROCESS:
        return _invoke(args, cwd)
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    for k in ("SDCDIST_LOG_FORMAT", "DASK_SCHEDULER_ADDRESS"):
        env.pop(k, None)
    return subprocess.run([sys.executable, "-m", "sdcdist.cli", "--log-format", "json",
                           *args], capture_output=True, cwd=cwd, env=env, timeout=300)


def _invoke(args: list[str], cwd: Path) -> subprocess.CompletedProcess:
    """``sdcdist --log-format json ARGS`` in this process, in ``cwd``."""
    import logging
    import warnings

    from click.testing import CliRunner
    runner = CliRunner(env={"SDCDIST_LOG_FORMAT": None, "DASK_SCHEDULER_ADDRESS": None})
    here = os.getcwd()
    loggers = {n: logging.getLogger(n) for n in ("sdcdist", "distributed", "py.warnings")}
    saved = {n: (lg.handlers[:], lg.level, lg.propagate) for n, lg in loggers.items()}
    os.chdir(cwd)
    try:
        with warnings.catch_warnings():
            r = runner.invoke(main, ["--log-format", "json", *args], catch_exceptions=False)
    finally:
        os.chdir(here)
        logging.captureWarnings(False)
        for n, (handlers, level, propagate) in saved.items():   # the JSON handlers wrote
            lg = loggers[n]                                     # to the runner's streams
            lg.handlers[:] = handlers
            lg.setLevel(level)
            lg.propagate = propagate
    return subprocess.CompletedProcess(args, r.exit_code, r.stdout_bytes, r.stderr_bytes)


def _check_stderr(name: str, err: bytes) -> None:
    for line in err.decode().splitlines():
        try:
            rec = json.loads(line)
        except ValueError:
            raise AssertionError(f"{name}: a stderr line is not JSON: {line[:200]!r}") from None
        assert isinstance(rec, dict), f"{name}: {line[:200]!r}"


def _scanned_files(root: Path, inputs: set[Path], data_files: set[Path]) -> list[Path]:
    """Every file the commands wrote, except the records themselves: the inputs, the
    masked/synthetic files and the chunks of data stores (their zarr.json are kept)."""
    out = []
    for p in sorted(root.rglob("*")):
        if not p.is_file() or p in inputs or p in data_files:
            continue
        store = next((q for q in p.parents if q.suffix == ".zarr"), None)
        if store is not None and store.name in ("store.zarr", "syn.zarr", "masked.zarr") \
                and p.name != "zarr.json":
            continue            # a chunk of records: holding the value is its purpose
        out.append(p)
    return out


def test_no_output_carries_a_planted_value(tmp_path):
    cmds = set(main.commands)
    assert cmds <= COVERED, f"commands not covered by this test: {sorted(cmds - COVERED)}"
    X = _data(np.random.default_rng(11))
    header = "INCOME,WAGES,TAX,HOURS"
    rows = [",".join(f"{v:.6f}" if v == PLANTED else f"{v:.2f}" for v in r) for r in X]
    orig = _csv(tmp_path / "orig.csv", header, rows)
    # bad inputs, each holding the value in another spelling
    bad_row = _csv(tmp_path / "bad_row.csv", header,
                   rows[:5] + ["12.5,7,919.12,3.5,1.0"] + rows[6:])
    no_header = _csv(tmp_path / "no_header.csv", "7919.12,1.5,2.5,3.5", rows[1:])
    semi = _csv(tmp_path / "semi.csv", header.replace(",", ";"),
                [r.replace(",", ";") for r in rows])
    text_cell = _csv(tmp_path / "text_cell.csv", header,
                     rows[:3] + ["1.5,'7919.12',2.5,3.5"] + rows[4:])
    spec = tmp_path / "spec.yaml"
    spec.write_text("name: planted\nseed: 5\ndataset: {name: people, path: orig.csv}\n"
                    "methods:\n  - {name: noise, params: [0.05, 0.5]}\n"
                    "  - {name: micmul, params: [2, 10]}\n"
                    "replicates: 2\nmetrics: [IL1s, DLD, ID1]\n")
    bad_spec = tmp_path / "bad_spec.yaml"
    bad_spec.write_text(spec.read_text().replace("[2, 10]", "[2, 40]"))

    ok: list[tuple[str, list[str]]] = [
        ("ingest", ["ingest", "orig.csv", "store.zarr", "--keys", "INCOME,WAGES"]),
        ("synth", ["synth", "--rows", "50", "--columns", "3", "--out", "syn.zarr"]),
        ("mask", ["mask", "store.zarr", "-m", "noise", "-p", "0.1", "--out", "masked.csv"]),
        ("mask", ["mask", "orig.csv", "-m", "micmul", "-p", "3", "--out", "masked.zarr"]),
        ("methods", ["methods"]),
        ("metrics", ["metrics"]),
        ("measure", ["measure", "orig.csv", "masked.csv", "--local"]),
        ("measure", ["measure", "orig.csv", "masked.csv", "--local", "--json", "--metric",
                     "IL1s,ID1"]),
        ("risk", ["risk", "orig.csv", "masked.csv", "--keys", "INCOME,WAGES", "--local"]),
        ("link", ["link", "orig.csv", "masked.csv", "--keys", "INCOME,WAGES,TAX",
                  "--out", "pairs.parquet", "--workers", "1"]),
        ("audit", ["audit", "spec.yaml", "--out", "cube.zarr", "--workers", "1"]),
        ("calibrate", ["calibrate", "spec.yaml", "--risk", "DLD", "--target", "0.3",
                       "--out", "cal.zarr", "--csv", "cal.csv", "--markdown", "cal.md",
                       "--workers", "1"]),
        ("report", ["report", "cube.zarr", "--by", "IL1s", "--csv", "r.csv", "--html",
                    "r.html", "--markdown", "r.md"]),
        ("query", ["query", "cube.zarr", "--where", "DLD >= 0", "--sort", "IL1s",
                   "--csv", "q.csv"]),
        ("plot", ["plot", "cube.zarr", "--risk", "DLD", "--loss", "IL1s", "--out", "t.png"]),
        ("plot", ["plot", "cube.zarr", "--kind", "ranks", "--out", "r.svg"]),
        ("plot", ["plot", "cal.zarr", "--kind", "curves", "--metric", "DLD", "--out", "c.png"]),
        ("certs", ["certs", "--out", "certs"]),
        ("release", ["release", "cube.zarr", "-m", "noise", "-p", "0.5", "--out", "rel.csv"]),
        # the release report (external: no record-level content)
        ("report", ["report", "cube.zarr", "--chosen", "noise:0.5:1", "--variant",
                    "external", "--html", "rr.html"]),
        # record-level key combinations are printed by design: the key is not WAGES
        ("describe", ["describe", "orig.csv", "--keys", "HOURS", "--top", "3"]),
        ("describe", ["describe", "orig.csv", "--json"]),
        ("serve", ["serve", "--hash-token", "planted"]),   # the service: test_service.py
    ]
    if "verify" in cmds:
        ok += [("verify", ["verify", "store.zarr"]), ("verify", ["verify", "cube.zarr"])]
    bad: list[tuple[str, list[str], str]] = [
        ("ingest", ["ingest", "bad_row.csv", "bad1.zarr"], "bad_row.csv"),
        ("ingest", ["ingest", "no_header.csv", "bad2.zarr"], "no_header.csv"),
        ("ingest", ["ingest", "semi.csv", "bad3.zarr"], "semi.csv"),
        ("measure", ["measure", "text_cell.csv", "masked.csv", "--local"], "text_cell.csv"),
        ("mask", ["mask", "orig.csv", "-m", "micmul", "-p", "45", "--out", "bad.csv"], ""),
        ("risk", ["risk", "orig.csv", "masked.csv", "--keys", "INCOME,NOPE", "--local"], ""),
        ("audit", ["audit", "bad_spec.yaml", "--out", "bad.zarr", "--workers", "1"], ""),
        ("report", ["report", "bad_row.csv", "--by", "IL1s"], "bad_row.csv"),
        ("report", ["report", "cube.zarr", "--chosen", "noise:0.7", "--html", "bad.html"],
         "noise"),
        ("describe", ["describe", "bad_row.csv"], "bad_row.csv"),
        ("serve", ["serve", "--root", "bad_row.csv"], "bad_row.csv"),
    ]
    ran = set()
    for name, args in ok:
        p = _run(args, tmp_path)
        assert p.returncode == 0, f"{args}: {p.stderr.decode()[-2000:]}"
        _check_stderr(name, p.stderr)
        for stream in (p.stdout, p.stderr):
            assert not SPELLINGS.search(stream), f"{args} printed the planted value"
        ran.add(name)
        if name == "audit":    # the documented progress lines, with the default LocalCluster
            events = [json.loads(ln)["event"] for ln in p.stderr.decode().splitlines()]
            assert events.count("cell written") == 6 and "connected" in events
    for name, args, mentions in bad:
        p = _run(args, tmp_path)
        assert p.returncode == 2, f"{args}: {p.returncode} {p.stderr.decode()[-2000:]}"
        _check_stderr(name, p.stderr)
        err = p.stderr.decode()
        assert any(json.loads(ln)["event"].startswith("Error: ") for ln in err.splitlines())
        assert mentions in err, f"{args}: the message does not name {mentions}"
        for stream in (p.stdout, p.stderr):
            assert not SPELLINGS.search(stream), f"{args} echoed the planted value: {err}"
        ran.add(name)
    assert ran == cmds, f"commands registered but not run: {sorted(cmds - ran)}"
    assert not (tmp_path / "bad.zarr").exists()      # a refused audit leaves no cube

    inputs = {orig, bad_row, no_header, semi, text_cell, spec, bad_spec}
    data_files = {tmp_path / "masked.csv", tmp_path / "rel.csv"}
    scanned = _scanned_files(tmp_path, inputs, data_files)
    names = {p.name for p in scanned}
    assert {"r.csv", "r.html", "rr.html", "r.md", "q.csv", "cal.csv", "cal.md", "t.png", "r.svg",
            "c.png", "pairs.parquet", "zarr.json"} <= names
    # every store's and cube's metadata is searched, the cubes' chunks too
    for store in ("store.zarr", "syn.zarr", "masked.zarr", "cube.zarr", "cal.zarr"):
        assert tmp_path / store / "zarr.json" in scanned
    assert any("cube.zarr" in str(p) and p.name != "zarr.json" for p in scanned)
    for p in scanned:
        m = SPELLINGS.search(p.read_bytes())
        assert m is None, f"{p.relative_to(tmp_path)} carries the planted value: {m.group()!r}"
