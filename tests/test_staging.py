"""What ``--overwrite`` may replace (:func:`sdcdist.data.staging.check_replaceable`): an
earlier output of the same kind that sdcdist wrote, never the working directory or a
folder holding it, never a path that is or holds an input of the command, never a
folder that is not such an output; refused before any work, nothing written or lost."""

from __future__ import annotations

import os

import numpy as np
import pandas as pd
import pytest

from sdcdist.data import ingest, load_microdata
from sdcdist.data.staging import STORE_KINDS, check_replaceable, stored_kind
from sdcdist.errors import SdcInputError


@pytest.fixture
def work(tmp_path, monkeypatch, rng):
    """A working directory holding ``c.csv`` (60 records, 3 numeric columns)."""
    monkeypatch.chdir(tmp_path)
    pd.DataFrame(rng.lognormal(5, 1, size=(60, 3)), columns=list("ABC")).to_csv(
        tmp_path / "c.csv", index=False)
    return tmp_path


def _tree(root):
    """Every path under ``root`` with its bytes (files) or None (folders)."""
    out = {}
    for folder, dirs, files in os.walk(root):
        for d in dirs:
            out[os.path.relpath(os.path.join(folder, d), root)] = None
        for f in files:
            p = os.path.join(folder, f)
            with open(p, "rb") as fh:
                out[os.path.relpath(p, root)] = fh.read()
    return out


def _refused(res, *words):
    assert res.exit_code == 2, res.output
    assert "unexpected failure" not in res.output
    for w in words:
        assert w in res.output, res.output


def _spec(folder, data="c.csv"):
    s = folder / "s.yaml"
    s.write_text(f"dataset: {{path: {data}}}\n"
                 "methods: [{name: noise, params: [0.1, 0.5]}]\nmetrics: [IL1s, DLD]\n")
    return s


MASK = ("mask", "c.csv", "-m", "noise", "-p", "0.1")


# --------------------------------------------------------------------------- an input inside

@pytest.mark.parametrize("args", [
    ["mask", "sub/c.csv", *MASK[2:], "--out", "sub", "--overwrite"],
    ["ingest", "sub/c.csv", "sub", "--overwrite"],
    ["ingest", "sub/deep/c.csv", "sub", "--overwrite"],
    ["mask", "sub/deep/c.csv", *MASK[2:], "--out", "sub", "--overwrite"],
])
def test_a_folder_holding_an_input_is_never_replaced(run, work, args):
    (work / "sub" / "deep").mkdir(parents=True)
    for d in ("sub", "sub/deep"):
        (work / d / "c.csv").write_bytes((work / "c.csv").read_bytes())
    before = _tree(work)
    res = run(*args)
    _refused(res, "'sub'", "holds the input", "choose another output path")
    assert _tree(work) == before                        # nothing lost, nothing left behind


def test_an_input_is_never_the_output(run, work):
    assert run("ingest", "c.csv", "d.zarr").exit_code == 0
    before = _tree(work)
    _refused(run(*MASK, "--out", "c.csv", "--overwrite"), "'c.csv' is the input")
    _refused(run("mask", "d.zarr", *MASK[2:], "--out", "d.zarr", "--overwrite"),
             "'d.zarr' is the input")
    (work / "m.parquet").write_bytes(b"PAR1")
    _refused(run("link", "c.csv", "m.parquet", "--keys", "A", "--out", "m.parquet",
                 "--overwrite"), "'m.parquet' is the input")
    assert _tree(work) == {**before, "m.parquet": b"PAR1"}


def test_a_release_never_replaces_the_data_it_is_made_from(work):
    from sdcdist.audit import run_audit
    from sdcdist.release import release
    run_audit(str(_spec(work)), str(work / "cube.zarr"))
    data = (work / "c.csv").read_bytes()
    with pytest.raises(SdcInputError, match="'c.csv' is the input"):
        release(str(work / "cube.zarr"), "c.csv", method="noise", param=0.1,
                overwrite=True)
    assert (work / "c.csv").read_bytes() == data


# --------------------------------------------------------------------------- the working dir

@pytest.mark.parametrize("out", [".", "..", "./", "../here"])
@pytest.mark.parametrize("command", ["mask", "ingest", "synth", "audit", "calibrate"])
def test_the_working_directory_and_its_ancestors_are_refused(run, work, out, command):
    here = work / "here"
    here.mkdir()
    (here / "c.csv").write_bytes((work / "c.csv").read_bytes())
    spec = _spec(here)
    os.chdir(here)
    before = _tree(work)
    args = {"mask": [*MASK, "--out", out],
            "ingest": ["ingest", "c.csv", out],
            "synth": ["synth", "--rows", "10", "--out", out],
            "audit": ["audit", spec, "--out", out],
            "calibrate": ["calibrate", spec, "--risk", "DLD", "--target", "0.5", "--out",
                          out]}[command]
    res = run(*args, "--overwrite")
    _refused(res, "working directory", "choose another output path")
    assert _tree(work) == before                        # no staging folder beside it
    if command == "audit":                              # resuming is no way round it
        _refused(run(*args), "working directory")
        assert _tree(work) == before


# --------------------------------------------------------------------------- other folders

@pytest.mark.parametrize("args", [
    [*MASK, "--out", "precious"],
    ["ingest", "c.csv", "precious"],
    ["synth", "--rows", "10", "--out", "precious"],
    ["audit", "s.yaml", "--out", "precious"],
    ["calibrate", "s.yaml", "--risk", "DLD", "--target", "0.5", "--out", "precious"],
])
@pytest.mark.parametrize("content", [{"notes.txt": b"x"}, {}, {"zarr.json": b"{}"}])
def test_a_folder_sdcdist_did_not_write_is_kept(run, work, args, content):
    _spec(work)
    (work / "precious").mkdir()
    for name, data in content.items():
        (work / "precious" / name).write_bytes(data)
    before = _tree(work)
    res = run(*args, "--overwrite")
    _refused(res, "'precious'", "sdcdist did not write", "--overwrite replaces only",
             "remove 'precious' yourself")
    assert _tree(work) == before


def test_a_store_of_another_kind_is_kept(run, work):
    from sdcdist.audit import run_audit
    run_audit(str(_spec(work)), str(work / "cube.zarr"))
    assert run("ingest", "c.csv", "d.zarr").exit_code == 0
    before = _tree(work)
    _refused(run(*MASK, "--out", "cube.zarr", "--overwrite"),
             "holds an audit cube", "dataset store")
    _refused(run("audit", "s.yaml", "--out", "d.zarr", "--overwrite"),
             "holds a dataset store", "audit cube")
    _refused(run("calibrate", "s.yaml", "--risk", "DLD", "--target", "0.5", "--out",
                 "cube.zarr", "--overwrite"), "holds an audit cube", "calibration cube")
    assert _tree(work) == before


def test_the_library_writers_apply_the_same_rule(work):
    from sdcdist.audit import load_spec, run_audit
    from sdcdist.audit.calibrate import calibrate
    from sdcdist.data import write_microdata
    (work / "sub").mkdir()
    (work / "sub" / "c.csv").write_bytes((work / "c.csv").read_bytes())
    (work / "precious").mkdir()
    (work / "precious" / "notes.txt").write_text("x")
    before = _tree(work)
    with pytest.raises(SdcInputError, match="holds the input"):
        ingest(work / "sub" / "c.csv", work / "sub", overwrite=True)
    md = load_microdata("c.csv")
    for out in (".", "precious"):
        with pytest.raises(SdcInputError, match="working directory|did not write"):
            write_microdata(md, out, overwrite=True)
    spec = load_spec(_spec(work / "sub"))
    with pytest.raises(SdcInputError, match="did not write"):
        run_audit(spec, "precious", overwrite=True)
    with pytest.raises(SdcInputError, match="holds the input"):
        calibrate(spec, metric="DLD", target=0.5, out=str(work / "sub"), overwrite=True)
    (work / "sub" / "s.yaml").unlink()
    assert _tree(work) == before


# --------------------------------------------------------------------------- earlier outputs

def test_an_earlier_output_of_the_same_command_is_still_replaced(run, work):
    for out in ("m.zarr", "m.csv"):
        assert run(*MASK, "--out", out).exit_code == 0
        first = load_microdata(out).values
        res = run(*MASK[:2], "-m", "noise", "-p", "0.5", "--out", out, "--overwrite")
        assert res.exit_code == 0, res.output
        assert not np.allclose(load_microdata(out).values, first)
    assert run("ingest", "c.csv", "d.zarr").exit_code == 0
    assert run("ingest", "m.csv", "d.zarr", "--overwrite").exit_code == 0
    assert np.array_equal(load_microdata("d.zarr").values, load_microdata("m.csv").values)
    assert run("synth", "--rows", "10", "--out", "d.zarr", "--overwrite").exit_code == 0
    assert load_microdata("d.zarr").values.shape[0] == 10
    assert sorted(p.name for p in work.iterdir()) == ["c.csv", "d.zarr", "m.csv", "m.zarr"]


def test_an_earlier_calibration_cube_is_still_replaced(work):
    from sdcdist.audit import load_spec
    from sdcdist.audit.calibrate import calibrate, open_calibration
    spec = load_spec(_spec(work))
    calibrate(spec, metric="DLD", target=0.5, out="cal.zarr")
    assert stored_kind("cal.zarr") == "calibration"
    (work / "cal.zarr" / "stale").write_text("x")
    calibrate(spec, metric="DLD", target=0.4, out="cal.zarr", overwrite=True)
    assert not (work / "cal.zarr" / "stale").exists()
    assert open_calibration("cal.zarr") is not None


def test_stored_kind_tells_the_stores_apart(run, work):
    from sdcdist.audit import run_audit
    assert run("ingest", "c.csv", "d.zarr").exit_code == 0
    assert run("synth", "--rows", "10", "--out", "s.zarr").exit_code == 0
    run_audit(str(_spec(work)), str(work / "cube.zarr"))
    assert [stored_kind(p) for p in ("d.zarr", "s.zarr", "cube.zarr", "c.csv", ".")] == \
        ["store", "store", "cube", None, None]
    assert set(STORE_KINDS) == {"store", "cube", "calibration"}
    # a path that does not exist, a URL or a folder written into is not checked
    for path, kind in (("new.zarr", "store"), ("s3://b/x.zarr", "store"), (".", "dir")):
        check_replaceable(path, kind=kind, inputs=["c.csv"])


# --------------------------------------------------------------------------- inside a store

def test_an_output_inside_a_store_is_refused(run, work):
    """A table, a release or a store written into an sdcdist store (``--csv cube.zarr/x.csv``)
    would change it and fail its integrity check: refused before any work, with or without
    --overwrite, naming the store; a path beside it is written."""
    from sdcdist.audit import run_audit
    run_audit(str(_spec(work)), str(work / "cube.zarr"))
    assert run("ingest", "c.csv", "d.zarr").exit_code == 0
    before = _tree(work)
    for args in (["report", "cube.zarr", "--by", "DLD", "--csv", "cube.zarr/x.csv"],
                 ["report", "cube.zarr", "--by", "DLD", "--markdown", "cube.zarr/deep/er/x.md",
                  "--overwrite"],
                 [*MASK, "--out", "d.zarr/m.csv"],
                 ["ingest", "c.csv", "cube.zarr/inner.zarr"],
                 ["audit", "s.yaml", "--out", "d.zarr/cube.zarr"]):
        _refused(run(*args), "is inside", "give a path outside it")
    assert "'cube.zarr', an audit cube" in run(
        "report", "cube.zarr", "--by", "DLD", "--csv", "cube.zarr/x.csv").output
    # the library's writers refuse it too, before any work
    from sdcdist.audit import calibrate
    from sdcdist.errors import SdcInputError
    for write in (lambda: run_audit(str(_spec(work)), str(work / "d.zarr" / "cube.zarr")),
                  lambda: run_audit(str(_spec(work)), str(work / "cube.zarr" / "a" / "b.zarr")),
                  lambda: calibrate(str(_spec(work)), metric="DLD", target=0.3,
                                    out=str(work / "cube.zarr" / "cal.zarr"))):
        with pytest.raises(SdcInputError, match="is inside .*give a path outside it"):
            write()
    assert _tree(work) == before
    assert run("report", "cube.zarr", "--by", "DLD", "--csv", "x.csv").exit_code == 0
    assert run("verify", "cube.zarr").exit_code == 0
