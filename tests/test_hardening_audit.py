"""Hardening (issue 14) of the audit commands: data-dependent spec errors are refused
before a cluster starts or a cube is created, a failed run leaves no empty cube, and a
calibration cube given to the wrong command says which one reads it."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
from click.testing import CliRunner

import sdcdist.audit.run as runmod
import sdcdist.cli.audit as cliaudit
from sdcdist.audit import parse_spec, run_audit
from sdcdist.audit.calibrate import calibrate
from sdcdist.cli import main
from sdcdist.cube import done_cells, open_cube
from sdcdist.errors import SdcInputError
from sdcdist.masking import check_data


def _spec_text(methods: str, rows: int = 20, metrics: str = "[IL1s]") -> str:
    return (f"name: t\nseed: 3\ndataset: {{synthetic: {{rows: {rows}, columns: 3, seed: 1}}}}\n"
            f"methods:\n{methods}\nreplicates: 1\nmetrics: {metrics}\n")


def _write(tmp_path: Path, text: str, name: str = "s.yaml") -> Path:
    p = tmp_path / name
    p.write_text(text)
    return p


@pytest.fixture
def no_cluster(monkeypatch):
    """Fail the test if the command starts a cluster."""
    def refuse(*a, **k):
        raise AssertionError("a cluster was started before the data was checked")
    monkeypatch.setattr(cliaudit, "cluster", refuse)


# -- n-dependent ranges, before any cluster --------------------------------------------------

def test_k_above_half_n_is_refused_before_the_cluster_and_the_cube(tmp_path, no_cluster):
    spec = _write(tmp_path, _spec_text("  - {name: micmul, params: [3, 15]}"))
    res = CliRunner().invoke(main, ["audit", str(spec), "--out", str(tmp_path / "c.zarr")])
    assert res.exit_code == 2, res.output
    assert "The 'k' parameter of micmul must be an integer in [2, n/2]" in res.output
    assert "n = 20" in res.output and "Got 15 instead" in res.output
    assert "Dask dashboard" not in res.output
    assert not (tmp_path / "c.zarr").exists()


def test_calibrate_checks_the_data_before_the_cluster(tmp_path, no_cluster):
    spec = _write(tmp_path, _spec_text("  - {name: micmul, params: [3, 15]}",
                                       metrics="[IL1s, DLD]"))
    res = CliRunner().invoke(main, ["calibrate", str(spec), "--risk", "DLD", "--target",
                                    "0.5", "--out", str(tmp_path / "cal.zarr")])
    assert res.exit_code == 2, res.output
    assert "n = 20" in res.output and not (tmp_path / "cal.zarr").exists()


def test_calibrate_refuses_an_existing_out_before_the_cluster(tmp_path, no_cluster):
    spec = _write(tmp_path, _spec_text("  - {name: micmul, params: [3, 5]}",
                                       metrics="[IL1s, DLD]"))
    (tmp_path / "cal.zarr").mkdir()
    res = CliRunner().invoke(main, ["calibrate", str(spec), "--risk", "DLD", "--target",
                                    "0.5", "--out", str(tmp_path / "cal.zarr")])
    assert res.exit_code == 2 and "--overwrite" in res.output


def test_check_data_covers_the_data_dependent_ranges():
    X = np.arange(40, dtype=float).reshape(20, 2)
    check_data("micmul", X, [2, 10])
    for name in ("micmul", "micz", "micir", "mic3mul"):
        with pytest.raises(SdcInputError, match=r"n = 20 records here, so at most 10"):
            check_data(name, X, [11])
    with pytest.raises(SdcInputError, match="needs at least 2 records"):
        check_data("noise", X[:1], [0.1])
    const = X.copy()
    const[:, 1] = 7.0
    for name in ("jpeg", "distr"):
        with pytest.raises(SdcInputError, match="constant columns"):
            check_data(name, const, [50] if name == "jpeg" else [0])
    with pytest.raises(SdcInputError, match="given to ipso_a must have at least 3 records"):
        check_data("ipso_a", X[:2], [0], {"roles": {"confidential": [0], "quasi": [1]}})
    with pytest.raises(SdcInputError, match="roles"):
        check_data("ipso_a", X, [0], {})


def test_run_audit_checks_k_before_creating_the_cube(tmp_path):
    spec = parse_spec({"dataset": {"synthetic": {"rows": 20, "columns": 3}},
                       "methods": [{"name": "micz", "params": [3, 12]}], "metrics": ["IL1s"]})
    with pytest.raises(SdcInputError, match="n = 20"):
        run_audit(spec, tmp_path / "c.zarr")
    assert not (tmp_path / "c.zarr").exists()


# -- a failed run leaves no empty cube ---------------------------------------------------

def _small_spec(**kw):
    doc = {"seed": 1, "dataset": {"synthetic": {"rows": 30, "columns": 3}},
           "methods": [{"name": "noise", "params": [0.1, 0.2]}], "metrics": ["IL1s"], **kw}
    return parse_spec(doc)


def test_a_run_that_fails_before_its_first_cell_removes_the_cube_it_created(tmp_path,
                                                                            monkeypatch):
    def broken(*a, **k):
        raise RuntimeError("worker failure")
    monkeypatch.setattr(runmod, "run_cells", broken)
    out = tmp_path / "c.zarr"
    with pytest.raises(RuntimeError):
        run_audit(_small_spec(), out)
    assert not out.exists()
    monkeypatch.undo()
    # the corrected rerun (here: another spec) is not refused as "a different spec"
    res = run_audit(_small_spec(replicates=2), out)
    assert res.computed == res.total == 4


def test_a_cube_with_finished_cells_is_never_removed(tmp_path, monkeypatch):
    real = runmod.run_cells

    def one_then_fail(executor, cells, *a, on_done, **k):
        real(executor, cells[:1], *a, on_done=on_done, **k)
        raise RuntimeError("worker failure")
    monkeypatch.setattr(runmod, "run_cells", one_then_fail)
    out = tmp_path / "c.zarr"
    with pytest.raises(RuntimeError):
        run_audit(_small_spec(), out)
    assert done_cells(str(out)).sum() == 1

    def fail(*a, **k):
        raise RuntimeError("worker failure")
    monkeypatch.setattr(runmod, "run_cells", fail)
    with pytest.raises(RuntimeError):
        run_audit(_small_spec(), out)         # a resume that fails keeps the earlier cell
    assert done_cells(str(out)).sum() == 1
    with pytest.raises(SdcInputError, match="different spec"):
        run_audit(_small_spec(replicates=2), out)   # cells done: a new spec is refused
    monkeypatch.undo()
    res = run_audit(_small_spec(), out)
    assert (res.computed, res.skipped) == (1, 1)


def test_an_empty_cube_of_another_spec_is_replaced(tmp_path):
    out = tmp_path / "c.zarr"
    spec = _small_spec()
    runmod._prepare_cube(spec, str(out), runmod.load_data(spec), False)  # as a crashed run
    assert done_cells(str(out)).sum() == 0
    res = run_audit(_small_spec(replicates=2), out)
    assert res.computed == 4 and open_cube(str(out)).sizes["replicate"] == 2


def test_calibrate_overwrite_keeps_the_old_cube_when_the_data_is_refused(tmp_path):
    import zarr
    out = tmp_path / "cal.zarr"
    zarr.open_group(str(out), mode="w").attrs.update(calibration="{}", spec_sha256="x")
    (out / "keep").write_text("x")                   # an earlier calibration cube
    spec = parse_spec({"dataset": {"synthetic": {"rows": 20, "columns": 3}},
                       "methods": [{"name": "micmul", "params": [3, 15]}],
                       "metrics": ["IL1s", "DLD"]})
    with pytest.raises(SdcInputError, match="n = 20"):
        calibrate(spec, metric="DLD", target=0.5, out=out, overwrite=True)
    assert (out / "keep").exists()


# -- a calibration cube given to a command that reads audit cubes -------------------------

@pytest.mark.parametrize("args", [["report", "--by", "IL1s"], ["query", "--sort", "IL1s"],
                                  ["plot", "--kind", "tradeoff", "--risk", "DLD", "--loss",
                                   "IL1s", "--out", "x.png"],
                                  ["plot", "--kind", "ranks", "--out", "x.png"]])
def test_a_calibration_cube_says_which_command_reads_it(tmp_path, args):
    import zarr
    cal = tmp_path / "cal.zarr"
    g = zarr.open_group(str(cal), mode="w")
    g.create_array("calibrated_param", shape=(1, 1), dtype="f8")
    res = CliRunner().invoke(main, [args[0], str(cal), *args[1:]])
    assert res.exit_code == 2, res.output
    assert "is a calibration cube" in res.output and "plot --kind curves" in res.output
    assert "not an sdcdist cube" not in res.output


# -- what used to fail on the workers is refused when the spec is parsed -------------------

@pytest.mark.parametrize("change, culprit", [
    ({"options": {"chunk_rows": "abc"}}, "'chunk_rows' option"),
    ({"options": {"chunk_rows": 0}}, "'chunk_rows' option"),
    ({"options": {"block_memory": -1}}, "'block_memory' option"),
    ({"options": [1, 2]}, "'options' must be a mapping"),
    ({"methods": [{"name": "noise", "params": [0.1], "options": {"bogus": 1}}]},
     "Unknown noise option 'bogus'"),
    ({"methods": [{"name": "noise", "params": [0.1], "options": [1]}]},
     "options of noise must be a mapping"),
])
def test_spec_errors_are_refused_at_parse_time(change, culprit):
    doc = {"dataset": {"synthetic": {"rows": 30}}, "methods": [{"name": "noise",
                                                                "params": [0.1]}],
           "metrics": ["IL1s"], **change}
    with pytest.raises(SdcInputError) as e:
        parse_spec(doc)
    assert culprit in str(e.value)
