"""The command line's everyday paths: one vocabulary of flags, outputs checked before any
work, defaults that apply to the file at hand, a demo that runs twice, tamper-evident
cubes, cube variables that select methods, and spec mistakes found before a cluster."""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
import zarr

from sdcdist.cube import create_cube, open_cube, write_cell

ROOT = Path(__file__).resolve().parents[1]
COMPUTING = ("measure", "risk", "link", "mask", "audit", "calibrate")


@pytest.fixture
def mixed(tmp_path, rng):
    """60 records: two numeric columns and a text column."""
    p = tmp_path / "mixed.csv"
    pd.DataFrame({"a": rng.lognormal(3, 1, 60), "b": rng.lognormal(2, 1, 60),
                  "region": rng.choice(["north", "south", "east"], 60)}).to_csv(p, index=False)
    return p


@pytest.fixture
def num(tmp_path, rng):
    p = tmp_path / "num.csv"
    pd.DataFrame(rng.lognormal(3, 1, (40, 3)), columns=list("ABC")).to_csv(p, index=False)
    return p


def _cube(path):
    create_cube(str(path), methods=["noise", "rankswap"], param_names=["p", "p"],
                params=[10.0, 15.0], metrics=["DLD", "IL1s"], metric_kinds=["risk", "loss"],
                ascending=[True, True], replicates=2, keysets=[("x",)], attrs={"spec": {}})
    for m in range(2):
        for p in range(2):
            for r in range(2):
                write_cell(str(path), m, p, r, values=np.array([10.0 * m + p + r, 1.0 + m]),
                           keyset_values=np.full((2, 1), np.nan),
                           excluded=np.zeros(2, np.int32), flags=np.zeros(2, np.int8))
    return path


def _user_error(res, *words):
    assert res.exit_code == 2, res.output
    assert "unexpected failure" not in res.output
    for w in words:
        assert w in res.output, res.output


# --------------------------------------------------------------------------- item 12

def test_demo_passes_overwrite_to_every_output():
    """`make demo` twice: every command of the recipe that writes a file replaces it."""
    text = (ROOT / "Makefile").read_text()
    recipe = re.search(r"^demo:.*?\n((?:\t.*\n)+)", text, re.M).group(1)
    lines = [ln for ln in recipe.splitlines() if "sdcdist " in ln]
    assert len(lines) == 3
    for ln in lines:
        assert "--overwrite" in ln, ln
        assert " -o " not in ln, ln


# --------------------------------------------------------------------------- item 13

def _commands():
    from sdcdist.cli import main
    return main.commands


def test_every_computing_command_takes_option_and_json():
    cmds = _commands()
    for name in COMPUTING:
        opts = {o: p for p in cmds[name].params for o in getattr(p, "opts", [])}
        assert "--option" in opts and "-o" in opts["--option"].opts, name
        assert opts["--option"].multiple, name
        assert "--json" in opts, name


def test_short_flags_mean_one_thing_and_out_has_none():
    meaning: dict[str, set[str]] = {}
    for name, cmd in _commands().items():
        for p in cmd.params:
            opts = list(getattr(p, "opts", [])) + list(getattr(p, "secondary_opts", []))
            if "--out" in opts:
                assert opts == ["--out"], (name, opts)
            longs = [o for o in opts if o.startswith("--")]
            for o in opts:
                if o.startswith("-") and not o.startswith("--") and o not in ("-h",):
                    meaning.setdefault(o, set()).update(longs)
    assert meaning["-o"] == {"--option"}
    assert meaning["-m"] == {"--method"}
    for flag, longs in meaning.items():
        assert len(longs) == 1, (flag, longs)


def _option_commands():
    """Every command (groups walked) that takes ``--option``, by click introspection."""
    import click

    from sdcdist.cli import main

    def walk(cmd, name):
        if isinstance(cmd, click.Group):
            for n, c in cmd.commands.items():
                yield from walk(c, n)
        else:
            yield name, cmd
    return {name: cmd for name, cmd in walk(main, "sdcdist")
            if any("--option" in getattr(p, "opts", ()) for p in cmd.params)}


def test_the_computing_commands_are_those_that_take_options():
    cmds = _option_commands()
    assert set(cmds) == set(COMPUTING)
    for name, cmd in cmds.items():
        (opt,) = [p for p in cmd.params if "--option" in getattr(p, "opts", ())]
        assert opt.opts == ["-o", "--option"] or sorted(opt.opts) == ["--option", "-o"], name
        assert opt.multiple and not opt.is_flag, name


@pytest.mark.parametrize("name", COMPUTING)
def test_every_command_checks_options_against_the_registry(run, num, tmp_path, name):
    """``-o KEY=VALUE`` is read by one parser and checked by the option registry in every
    command that takes it: an unknown key names the valid ones, a bad value the bounds, and
    ``-o FILE`` (the old ``--out``) names ``--out``. Nothing is computed or written."""
    spec = tmp_path / "s.yaml"
    spec.write_text(f"dataset: {{path: {num}}}\nmethods: [{{name: noise, params: [0.1]}}]\n"
                    "metrics: [IL1s]\n")
    out = tmp_path / {"link": "out.parquet", "mask": "out.csv"}.get(name, "out.zarr")
    args = {"measure": [num, num, "--local"],
            "risk": [num, num, "--metric", "DLD", "--local"],
            "link": [num, num, "--keys", "A", "--out", out, "--local"],
            "mask": [num, "--method", "micz", "-p", "3", "--out", out],
            "audit": [spec, "--out", out],
            "calibrate": [spec, "--risk", "DLD", "--target", "5", "--out", out]}[name]
    # mask takes the method's own options (its registry entry), link the PRL options, the
    # others computation options
    key, bad = {"mask": ("leftover", "leftover=sideways"),
                "link": ("prl_top_c", "prl_top_c=0")}.get(name, ("chunk_rows", "chunk_rows=0"))
    res = run(name, *args, "-o", "no_such_option=1")
    _user_error(res, "'no_such_option'", key)
    _user_error(run(name, *args, "--option", bad), key)
    _user_error(run(name, *args, "-o", tmp_path / "file.csv"), "--out FILE")
    assert not out.exists()


def test_old_spellings_name_the_new_one(run, num, tmp_path):
    cube = _cube(tmp_path / "c.zarr")
    _user_error(run("risk", num, num, "-m", "DLD", "--local"), "--metric")
    _user_error(run("measure", num, num, "-m", "IL1s", "--local"), "--metric")
    _user_error(run("plot", cube, "--kind", "ranks", "-o", tmp_path / "p.png"), "--out")
    res = run("mask", num, "-m", "noise", "-p", "0.1", "-o", tmp_path / "m.csv")
    _user_error(res, "--out FILE")
    assert not (tmp_path / "m.csv").exists()
    res = run("link", num, num, "--keys", "A", "-o", tmp_path / "l.parquet", "--local")
    assert res.exit_code == 2 and "--out" in res.output


def test_one_option_parser_refuses_a_repeated_key(run, mixed, tmp_path):
    out = tmp_path / "m.csv"
    for cmd in (["mask", mixed, "--method", "pram", "-p", "0.8", "--out", out],
                ["risk", mixed, mixed, "--metric", "DLD", "--local"],
                ["measure", mixed, mixed, "--metric", "IL1s", "--local"]):
        key = "variables=[region]" if cmd[0] == "mask" else "chunk_rows=16"
        _user_error(run(*cmd, "-o", key, "--option", key), "given twice")
    assert not out.exists()
    # and checks values against the registry in every command
    _user_error(run("measure", mixed, mixed, "-o", "chunk_rows=0", "--local"), "chunk_rows")
    _user_error(run("link", mixed, mixed, "--keys", "a", "--out", tmp_path / "l.parquet",
                    "-o", "prl_top_c=0", "--local"), "prl_top_c")


def test_json_and_options_reach_the_computation(run, num, tmp_path):
    import json
    res = run("risk", num, num, "--metric", "DLD", "--keys", "A,B", "--json", "--local",
              "-o", "dld=dmt")
    assert res.exit_code == 0, res.output
    doc = json.loads(res.stdout)
    assert doc["metrics"]["DLD"]["value"] == 100.0
    assert set(doc["metrics"]["DLD"]["per_keyset"]) == {"A", "A,B"}
    res = run("mask", num, "--method", "noise", "-p", "0.1", "--out", tmp_path / "m.csv",
              "--json")
    assert res.exit_code == 0 and json.loads(res.stdout)["method"] == "noise"
    res = run("link", num, tmp_path / "m.csv", "--keys", "A,B", "--out", tmp_path / "l.parquet",
              "-o", "prl_em={max_iter: 3}", "--json", "--local")
    assert res.exit_code == 0, res.output
    doc = json.loads(res.stdout)
    assert doc["em_iterations"] <= 3 and doc["pairs"] >= 1
    _user_error(run("link", num, num, "--keys", "A", "--out", tmp_path / "k.parquet",
                    "--top-c", "5", "-o", "prl_top_c=6", "--local"), "set the same thing")


def test_list_options_refuse_empty_and_repeated_names(run, mixed, num, tmp_path):
    _user_error(run("risk", mixed, mixed, "--keys", "a,a", "--local"), "more than once")
    _user_error(run("ingest", mixed, tmp_path / "x.zarr", "--categorical", ""),
                "--categorical is empty")
    assert not (tmp_path / "x.zarr").exists()
    _user_error(run("measure", num, num, "--keyset", "A,A", "--local"), "more than once")


def test_pipeline_step_options_must_be_a_mapping(run, mixed, tmp_path):
    res = run("mask", mixed, "--method", "recode+suppress", "-p", "3",
              "-o", "recode=5", "--out", tmp_path / "m.csv")
    _user_error(res, "must be a mapping")


def test_blocking_without_a_shared_value_is_a_clear_refusal(run, tmp_path):
    pd.DataFrame({"x": [1.5, 2.5, 3.5, 4.5], "c": [1, 2, 1, 2]}).to_csv(tmp_path / "a.csv",
                                                                      index=False)
    pd.DataFrame({"x": [1.6, 2.4, 3.3, 4.1], "c": [5, 6, 5, 6]}).to_csv(tmp_path / "b.csv",
                                                                      index=False)
    res = run("link", tmp_path / "a.csv", tmp_path / "b.csv", "--keys", "x,c", "--block-on",
              "c", "--out", tmp_path / "l.parquet", "--local")
    _user_error(res, "no pair of records to compare")


def test_values_near_the_float_limit_are_refused_by_column(run, tmp_path):
    p = tmp_path / "big.csv"
    p.write_text("a,b\n1e308,2\n-1e308,3\n1.7e308,4\n5,5\n")
    _user_error(run("measure", p, p, "--local"), "['a']", "rescale")


# --------------------------------------------------------------------------- item 4

def test_risk_defaults_leave_out_what_does_not_apply_to_categorical_keys(run, mixed):
    res = run("risk", mixed, mixed, "--local")
    assert res.exit_code == 0, res.output
    assert "skipping RR, GDBRL" in res.output and "region" in res.output
    names = {ln.split()[0] for ln in res.stdout.splitlines() if ln and not ln[0].isspace()}
    assert "RR" not in names and {"DLD", "uniques"} <= names
    # asked for by name it is refused with the reason, not left out
    _user_error(run("risk", mixed, mixed, "--metric", "RR", "--local"), "categorical")


# --------------------------------------------------------------------------- item 14

def test_unwritable_outputs_exit_2_before_any_work(run, num, tmp_path):
    cube = _cube(tmp_path / "c.zarr")
    spec = tmp_path / "s.yaml"
    spec.write_text("dataset: {synthetic: {rows: 60, columns: 3}}\n"
                    "methods: [{name: noise, params: [0.1, 0.5]}]\nmetrics: [DLD, IL1s]\n")
    bad = "/proc/sdcdist-test"
    cases = [["ingest", num, f"{bad}/x.zarr"],
             ["mask", num, "-m", "noise", "-p", "0.1", "--out", f"{bad}/m.csv"],
             ["mask", num, "-m", "noise", "-p", "0.1", "--out", "/proc/m.csv"],
             ["link", num, num, "--keys", "A", "--out", "/proc/l.parquet", "--local"],
             ["audit", spec, "--out", "/proc/c.zarr"],
             ["report", cube, "--by", "DLD", "--csv", "/proc/r.csv"],
             ["query", cube, "--csv", "/proc/q.csv"],
             ["calibrate", spec, "--risk", "DLD", "--target", "50", "--csv", "/proc/c.csv"],
             ["calibrate", spec, "--risk", "DLD", "--target", "50", "--out", "/proc/c.zarr"],
             ["plot", cube, "--kind", "ranks", "--out", "/proc/p.png"],
             ["certs", "--out", f"{bad}/certs"],
             ["certs", "--out", "/proc/certs"]]
    for args in cases:
        res = run(*args)
        _user_error(res, "cannot ")
        assert "== dataset" not in res.output and "DLD" not in res.stdout, args


# --------------------------------------------------------------------------- item 6

def _tampered(base, tmp_path, name, how):
    q = tmp_path / f"t_{name}.zarr"
    shutil.copytree(base, q)
    how(q)
    return q


def _flip_byte(path):
    b = bytearray(path.read_bytes())
    b[len(b) // 2] ^= 0xFF
    path.write_bytes(b)


def test_verify_finds_every_tampering_of_a_cube(run, tmp_path):
    base = _cube(tmp_path / "base.zarr")
    res = run("verify", base)
    assert res.exit_code == 0 and "cell fingerprints: match" in res.output, res.output

    def setv(arr, key, v):
        return lambda q: zarr.open_group(str(q), mode="r+")[arr].__setitem__(key, v)
    cases = {
        "value": (setv("value", (0, 0, 0, 0, 0), 99.0), "fingerprint mismatch"),
        "ascending": (setv("ascending", 0, 0), "'ascending'"),
        "label": (setv("metric", 0, "DLX"), "'metric'"),
        "param": (setv("param", 1, 16.0), "'param'"),
        "done": (setv("done", (0, 0, 0, 0), 0), None),       # a reset mark: recomputed
        "excluded": (setv("excluded", (0, 1, 1, 0, 1), 5), "fingerprint mismatch"),
        "done-chunk": (lambda q: _flip_byte(q / "done" / "c" / "0" / "0" / "0" / "0"),
                       "CRC-32C"),
        "root": (lambda q: (q / "zarr.json").write_text((q / "zarr.json").read_text()[:40]),
                 "zarr.json"),
    }
    for name, (how, word) in cases.items():
        q = _tampered(base, tmp_path, name, how)
        res = run("verify", q)
        if word is None:
            assert res.exit_code == 0, (name, res.output)
            continue
        assert res.exit_code == 1, (name, res.output)
        assert word in res.output, (name, res.output)


def test_a_done_mark_without_its_cell_is_damage(run, tmp_path):
    create_cube(str(tmp_path / "c.zarr"), methods=["a"], param_names=["p"], params=[1.0, 2.0],
                metrics=["L"], metric_kinds=["loss"], ascending=[True], replicates=1,
                keysets=[("x",)], attrs={"spec": {}})
    write_cell(str(tmp_path / "c.zarr"), 0, 0, 0, values=np.array([1.0]),
               keyset_values=np.full((1, 1), np.nan), excluded=np.zeros(1, np.int32),
               flags=np.zeros(1, np.int8))
    g = zarr.open_group(str(tmp_path / "c.zarr"), mode="r+")
    for name, fill in (("value", 7.0), ("keyset_value", np.nan), ("excluded", 0), ("flag", 0)):
        g[name].with_config({"write_empty_chunks": True})[0, 0, 1, ...] = fill
    g["done"][0, 0, 1, 0] = 1
    res = run("verify", tmp_path / "c.zarr")
    assert res.exit_code == 1 and "marked done but were never written" in res.output


# --------------------------------------------------------------------------- item 16

def test_cube_variables_select_methods_like_the_cube(tmp_path):
    cube = open_cube(str(_cube(tmp_path / "c.zarr")))
    want = float(cube.sel(method="rankswap", param=10, metric="DLD").mean("replicate")["value"])
    assert want == 10.5
    assert float(cube["value"].sel(method="rankswap", param=10, metric="DLD")
                 .mean("replicate")) == want
    assert float(cube.value.sel(method="rankswap", param=10, metric="DLD").mean("replicate")) \
        == want
    assert float(cube["value"].mean("replicate").sel(method="rankswap", param=10,
                                                     metric="DLD")) == want
    assert float(cube["value"].loc[{"method": "rankswap", "param": 10, "metric": "DLD"}]
                 .mean("replicate")) == want
    # xarray's own fill methods keep their meaning on other dimensions
    assert float(cube["value"].sel({"method": "rankswap", "metric": "DLD"})
                 .sel(param=10.4, method="nearest").mean("replicate")) == want
    import xarray as xr
    plain = xr.open_zarr(str(tmp_path / "c.zarr"), consolidated=False)
    assert float(plain["value"].sel({"method": "rankswap", "param": 10, "metric": "DLD",
                                     "dataset": "data"}).mean("replicate")) == want


_SNIPPET = re.compile(r"(cube(?:\.\w+|\[\"\w+\"\])*\.sel\((?:[^()]|\([^()]*\))*\)"
                      r"(?:\.\w+\((?:[^()]|\([^()]*\))*\)|\[\"\w+\"\])*)")


def test_every_documented_cube_snippet_works(tmp_path):
    """Every `cube....sel(...)` expression of README.md and docs/ evaluates on a cube (and
    on its `value` variable where the snippet takes one)."""
    cube = open_cube(str(_cube(tmp_path / "c.zarr")))
    texts = [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]
    found = 0
    for path in texts:
        for expr in _SNIPPET.findall(path.read_text()):
            if "..." in expr or "dataset=" in expr:
                continue
            expr = expr.replace("param=10,", "param=10.0,").replace("param=15,", "param=15.0,")
            out = eval(expr, {"cube": cube, "value": cube["value"]})   # noqa: S307
            assert np.size(getattr(out, "values", out)) >= 1, (path.name, expr)
            found += 1
    assert found >= 3
    readme = (ROOT / "README.md").read_text()
    assert 'value.sel(method="rankswap"' in readme and '.sel({"method": "rankswap"})' in readme


# --------------------------------------------------------------------------- item 15

def test_confidential_role_advice_names_the_flags(run, mixed, tmp_path):
    res = run("mask", mixed, "-m", "ipso_a", "--confidential", "region", "--keys", "a",
              "--out", tmp_path / "m.csv")
    _user_error(res, "--confidential")
    assert "roles=" not in res.output and "columns=[" not in res.output


@pytest.mark.parametrize("methods,extra,word", [
    ("[{name: recode, params: [5], options: {variables: [region]}}]", "", "not numbers"),
    ("[{name: recode, params: [0], options: {variables: [region], mapping: {region: "
     "{west: w}}}}]", "", "does not have"),
    ("[{name: noise, params: [0.1]}]", "options: {prl_blocking: nope}\n", "prl_blocking"),
    ("[{name: noise, params: [0.1]}]", "keysets: [[a, b]]\n", "none of the key columns"),
])
def test_data_dependent_spec_errors_come_before_the_cluster(run, mixed, tmp_path, methods,
                                                           extra, word):
    metrics = "[uniques]" if "keysets" in extra else "[PLD]" if "prl" in extra else "[DLD]"
    spec = tmp_path / "s.yaml"
    spec.write_text(f"dataset: {{path: {mixed.name}}}\nmethods: {methods}\n"
                    f"metrics: {metrics}\n{extra}")
    res = run("audit", spec, "--out", tmp_path / "c.zarr", "--scheduler", "tcp://127.0.0.1:9")
    _user_error(res, word)
    assert "Compute Failed" not in res.output and not (tmp_path / "c.zarr").exists()


def _cli(*args, cwd):
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    env.pop("SDCDIST_LOG_FORMAT", None)
    return subprocess.run([sys.executable, "-m", "sdcdist.cli", *map(str, args)],
                          capture_output=True, text=True, timeout=300, env=env, cwd=cwd)


@pytest.mark.slow
def test_no_raw_warning_before_a_clean_error(tmp_path):
    p = tmp_path / "big.csv"
    p.write_text("a,b\n1e308,2\n-1e308,3\n1.7e308,4\n5,5\n")
    r = _cli("measure", p, p, "--local", cwd=tmp_path)
    assert r.returncode == 2, r.stderr
    assert r.stderr.startswith("Error:") or all(
        ln.startswith(("Error:", "warning:")) for ln in r.stderr.splitlines()), r.stderr
    assert "site-packages" not in r.stderr and ".py:" not in r.stderr


def test_cluster_helper_starts_the_resource_tracker_quiet(tmp_path):
    """The tracker of multiprocessing runs as an interpreter of its own, started with this
    one's -W options: its "leaked semaphore" warning at shutdown, written straight to
    stderr, must not come out (it breaks JSON-mode stderr)."""
    from multiprocessing import util

    from sdcdist.cli._common import _TRACKER_FILTER, _quiet_resource_tracker
    _quiet_resource_tracker()
    flags = util._args_from_interpreter_flags()     # what the tracker is started with
    assert f"-W{_TRACKER_FILTER}" in flags or _TRACKER_FILTER in flags
    code = ("import warnings; warnings.warn_explicit('resource_tracker: There appear to be 1 "
            "leaked semaphore objects to clean up at shutdown', UserWarning, "
            "'resource_tracker.py', 1, module='multiprocessing.resource_tracker')")
    r = subprocess.run([sys.executable, *flags, "-c", code], capture_output=True, text=True,
                       timeout=60)
    assert r.returncode == 0 and r.stderr == ""
