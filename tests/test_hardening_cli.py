"""Hardening of the command line: every path and URL argument checked before any work,
credentials never echoed, output mistakes exit 2, bounded numbers, strict options,
safe file names, ``sdcdist verify``, a closed pipe."""

from __future__ import annotations

import contextlib
import gzip
import os
import subprocess
import sys

import numpy as np
import pandas as pd
import pytest

from sdcdist.cli._common import table_paths
from sdcdist.errors import SdcInputError
from sdcdist.text import redact, slug, unique_slugs
from sdcdist.cube import create_cube, write_cell
from sdcdist.limits import MAX_ROWS, MAX_TOP_C

SECRET = "SECRETpw42"


@pytest.fixture
def csv(tmp_path, rng):
    p = tmp_path / "a.csv"
    pd.DataFrame(rng.lognormal(5, 1, size=(60, 3)), columns=list("ABC")).to_csv(p, index=False)
    return p


def _cube(path, datasets=("data",)):
    create_cube(str(path), methods=["a", "b"], param_names=["p", "k"], params=[1.0, 2.0],
                metrics=["L", "RR"], metric_kinds=["loss", "risk"], ascending=[True, False],
                replicates=1, keysets=[("x",)], attrs={"spec": {}}, datasets=datasets)
    for d in range(len(datasets)):
        for m in range(2):
            write_cell(str(path), m, 0, 0, values=np.array([1.0 + m, 2.0 - m]),
                       keyset_values=np.full((2, 1), np.nan), excluded=np.zeros(2, np.int32),
                       flags=np.zeros(2, np.int8), d=d)
    return path


@pytest.fixture
def cube(tmp_path):
    return _cube(tmp_path / "c.zarr")


@pytest.fixture
def spec(tmp_path):
    s = tmp_path / "s.yaml"
    s.write_text("dataset: {synthetic: {rows: 60, columns: 3}}\n"
                 "methods: [{name: noise, params: [0.1, 0.5]}]\nmetrics: [DLD, IL1s]\n")
    return s


def _user_error(res, *words):
    assert res.exit_code == 2, res.output
    assert "unexpected failure" not in res.output
    assert SECRET not in res.output
    for w in words:
        assert w in res.output, res.output


# --------------------------------------------------------------------------- item 4

def test_redact_hides_userinfo():
    assert redact(f"x 's3://u:{SECRET}@b/k' y") == "x 's3://***@b/k' y"
    assert redact("s3://bucket/k and /a@b") == "s3://bucket/k and /a@b"


@pytest.mark.parametrize("args", [
    ["calibrate", "{spec}", "--risk", "DLD", "--target", "5", "--out",
     f"s3://u:{SECRET}@bucket/c.zarr"],
    ["calibrate", "{spec}", "--risk", "DLD", "--target", "5", "--csv",
     f"s3://u:{SECRET}@bucket/t.csv"],
    ["audit", "{spec}", "--out", f"gs://u:{SECRET}@bucket/c.zarr"],
    ["report", f"s3://user:{SECRET}@bucket/c.zarr", "--by", "L"],
    ["query", f"s3://user:{SECRET}@bucket/c.zarr"],
    ["plot", "{cube}", "--kind", "ranks", "--out", f"s3://u:{SECRET}@b/p.png"],
    ["ingest", "{csv}", f"s3://user:{SECRET}@bucket/x.zarr"],
    ["ingest", f"s3://user:{SECRET}@bucket/a.csv", "{tmp}/x.zarr"],
    ["mask", "{csv}", "-m", "noise", "-p", "0.1", "--out", f"s3://u:{SECRET}@b/m.csv"],
    ["synth", "--rows", "10", "--out", f"s3://u:{SECRET}@b/s.zarr"],
    ["link", "{csv}", "{csv}", "--keys", "A", "--out", f"s3://u:{SECRET}@b/l.parquet"],
    ["measure", f"s3://u:{SECRET}@b/a.zarr", "{csv}"],
    ["risk", "{csv}", f"s3://u:{SECRET}@b/a.csv"],
    ["verify", f"s3://u:{SECRET}@b/a.zarr"],
])
def test_credentials_in_any_url_are_refused_before_work_and_never_echoed(
        run, tmp_path, spec, cube, csv, args):
    fill = {"spec": spec, "cube": cube, "csv": csv, "tmp": tmp_path}
    res = run(*[a.format(**fill) for a in args])
    _user_error(res, "credentials")
    assert "calibrat" not in res.output.lower().replace("calibrate", "")  # nothing ran
    assert not list(tmp_path.glob("*.zarr.tmp*"))


def test_library_messages_about_urls_are_redacted(run, tmp_path):
    # a URL the argument check lets through (no user-info in the URL itself) but whose
    # message would echo an embedded user-info elsewhere in the text
    res = run("report", f"memory://x/y@z/s3://u:{SECRET}@b/c.zarr", "--by", "L")
    assert res.exit_code == 2 and SECRET not in res.output


def test_s3_without_s3fs_names_the_extra_in_every_command(run, csv, tmp_path):
    pytest.importorskip("zarr")
    import importlib.util
    if importlib.util.find_spec("s3fs") is not None:
        pytest.skip("s3fs is installed")
    for args in (["report", "s3://bucket/c.zarr", "--by", "L"],
                 ["ingest", csv, "s3://bucket/x.zarr"],
                 ["mask", "s3://bucket/x.zarr", "-m", "noise", "-p", "1", "--out", "m.csv"],
                 ["measure", "s3://bucket/x.zarr", csv],
                 ["verify", "s3://bucket/x.zarr"]):
        _user_error(run(*args), "sdcdist[cloud]")


# --------------------------------------------------------------------------- item 7

def test_missing_output_folders_are_created(run, csv, tmp_path, cube):
    out = tmp_path / "new" / "deeper" / "m.csv"
    res = run("mask", csv, "-m", "noise", "-p", "0.1", "--out", out)
    assert res.exit_code == 0, res.output
    assert out.exists()
    res = run("report", cube, "--by", "L", "--csv", tmp_path / "t" / "r.csv")
    assert res.exit_code == 0 and (tmp_path / "t" / "r.csv").exists()
    res = run("plot", cube, "--kind", "ranks", "--out", tmp_path / "p" / "q" / "x.png")
    assert res.exit_code == 0 and (tmp_path / "p" / "q" / "x.png").exists()


def test_file_in_place_of_a_folder_is_refused_before_printing(run, csv, cube, tmp_path):
    afile = tmp_path / "afile"
    afile.write_text("x")
    for args in (["mask", csv, "-m", "noise", "-p", "0.1", "--out", afile / "m.csv"],
                 ["link", csv, csv, "--keys", "A", "--out", afile / "l.parquet"],
                 ["plot", cube, "--kind", "ranks", "--out", afile / "p.png"],
                 ["synth", "--rows", "10", "--out", afile / "s.zarr"],
                 ["certs", "--out", afile],
                 ["certs", "--out", afile / "sub"]):
        _user_error(run(*args), "is a file")
    for cmd in (["report", cube, "--by", "L"], ["query", cube]):
        res = run(*cmd, "--csv", afile / "r.csv")
        _user_error(res, "is a file")
        assert "rank" not in res.output and "RR" not in res.output   # nothing printed


def test_folder_in_place_of_a_file_is_refused(run, csv, cube, tmp_path, spec):
    d = tmp_path / "adir"
    d.mkdir()
    for args in (["mask", csv, "-m", "noise", "-p", "0.1", "--out", d / ".." / "adir"],
                 ["plot", cube, "--kind", "ranks", "--out", d],
                 ["report", cube, "--by", "L", "--html", d],
                 ["query", cube, "--markdown", d],
                 ["synth", "--rows", "10", "--out", tmp_path / "adir.csv"],
                 ["calibrate", spec, "--risk", "DLD", "--target", "5", "--csv", d]):
        if str(args[-1]).endswith("adir.csv"):
            (tmp_path / "adir.csv").mkdir()
        _user_error(run(*args), "folder")
    _user_error(run("audit", spec, "--out", csv), "is a file")


@pytest.mark.skipif(os.geteuid() == 0, reason="root may write anywhere")
def test_unwritable_folder_is_refused(run, csv, tmp_path):
    ro = tmp_path / "ro"
    ro.mkdir()
    ro.chmod(0o500)
    try:
        _user_error(run("mask", csv, "-m", "noise", "-p", "0.1", "--out", ro / "m.csv"),
                    "permission denied")
    finally:
        ro.chmod(0o700)


def test_unwritable_folder_check_as_root_too(monkeypatch, tmp_path):
    from sdcdist.cli._paths import check_output
    from sdcdist.errors import SdcInputError
    monkeypatch.setattr(os, "access", lambda *a, **k: False)
    with pytest.raises(SdcInputError, match="permission denied"):
        check_output(str(tmp_path / "x.csv"), what="--out")


# --------------------------------------------------------------------------- item 5

def test_verify_command(run, tmp_path, csv):
    store = tmp_path / "a.zarr"
    assert run("ingest", csv, store).exit_code == 0
    res = run("verify", store, "--source", csv)
    assert res.exit_code == 0 and "OK" in res.output and "source" in res.output
    chunk = next(p for p in (store / "values").rglob("*") if p.is_file()
                 and p.parent.name != "values")
    chunk.unlink()
    res = run("verify", store)
    assert res.exit_code == 1
    assert "corrupt: chunk(s)" in res.output and "missing" in res.output
    res = run("verify", csv)
    _user_error(res, "not a Zarr store")


# --------------------------------------------------------------------------- item 8

@pytest.mark.parametrize("args", [
    ["ingest", "{csv}", "{tmp}/x.zarr", "--chunk-rows", str(10**20)],
    ["synth", "--rows", "10", "--out", "{tmp}/s.zarr", "--chunk-rows", str(10**20)],
    ["measure", "{csv}", "{csv}", "--chunk-rows", str(10**20)],
    ["link", "{csv}", "{csv}", "--keys", "A", "--out", "{tmp}/l.parquet", "--top-c",
     str(MAX_TOP_C + 1)],
    ["link", "{csv}", "{csv}", "--keys", "A", "--out", "{tmp}/l.parquet", "--top-c", "1e9"],
    ["synth", "--rows", str(MAX_ROWS + 1), "--out", "{tmp}/s.zarr"],
])
def test_numbers_are_bounded(run, tmp_path, csv, args):
    res = run(*[a.format(csv=csv, tmp=tmp_path) for a in args])
    _user_error(res)
    assert not (tmp_path / "x.zarr").exists() and not (tmp_path / "s.zarr").exists()


def test_synth_in_memory_output_is_bounded(run, tmp_path):
    _user_error(run("synth", "--rows", str(MAX_ROWS), "--out", tmp_path / "s.csv"),
                "Zarr store instead")
    assert not (tmp_path / "s.csv").exists()


@pytest.mark.parametrize("address,words", [
    ("not a url", ["--scheduler must be an address"]),
    ("http//x:1", ["--scheduler must be an address"]),
    ("ftp://host:8786", ["--scheduler must be an address"]),
    (f"tcp://user:{SECRET}@host:8786", ["credentials"]),
    ("tls://127.0.0.1:1", ["no certificates"]),
])
def test_bad_scheduler_addresses_exit_2_before_reading(run, csv, tmp_path, address, words):
    res = run("risk", csv, csv, "--metric", "DLD", "--scheduler", address)
    _user_error(res, *words)
    res = run("link", csv, csv, "--keys", "A", "--out", tmp_path / "l.parquet",
              "--scheduler", address)
    _user_error(res, *words)


def test_truncated_gzip_exits_2_in_every_reading_command(run, tmp_path, csv):
    gz = tmp_path / "t.csv.gz"
    data = gzip.compress(csv.read_bytes())
    gz.write_bytes(data[: len(data) // 2])
    for args in (["ingest", gz, tmp_path / "x.zarr"],
                 ["mask", gz, "-m", "noise", "-p", "0.1", "--out", tmp_path / "m.csv"],
                 ["measure", csv, gz, "--local"],
                 ["risk", csv, gz, "--metric", "DLD", "--local"],
                 ["link", gz, csv, "--keys", "A", "--out", tmp_path / "l.parquet"]):
        _user_error(run(*args), "truncated")


def test_closed_pipe_exits_quietly(csv):
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(sys.path)}
    proc = subprocess.Popen([sys.executable, "-m", "sdcdist.cli", "metrics"],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, env=env)
    proc.stdout.close()          # the reader is gone before anything was written
    err = proc.stderr.read().decode()
    assert proc.wait(timeout=60) == 0
    assert "Traceback" not in err and "Error" not in err and "BrokenPipe" not in err


# --------------------------------------------------------------------------- items 9, 12

def test_empty_metric_list_is_refused(run, csv):
    _user_error(run("risk", csv, csv, "--metric", "", "--local"), "--metric is empty")
    _user_error(run("measure", csv, csv, "--metric", " , ", "--local"), "--metric is empty")


def test_repeated_single_value_option_is_refused(run, csv, tmp_path):
    res = run("risk", csv, csv, "--keys", "A", "--keys", "B", "--local")
    assert res.exit_code == 2 and "--keys was given more than once" in res.output
    res = run("mask", csv, "-mnoise", "--method", "noise", "-p", "1", "--out", tmp_path / "m.csv")
    assert res.exit_code == 2 and "--method was given more than once" in res.output
    res = run("ingest", csv, tmp_path / "x.zarr", "--keys=A", "--keys=B")
    assert res.exit_code == 2 and not (tmp_path / "x.zarr").exists()
    # repeatable options stay repeatable, and a value that looks like an option is a value
    res = run("risk", csv, csv, "--metric", "DLD", "--metric", "ID", "--keys", "A,B", "--local")
    assert res.exit_code in (0, 2) and "more than once" not in res.output


def test_tables_and_plots_are_not_overwritten_without_overwrite(run, cube, tmp_path):
    t = tmp_path / "r.csv"
    assert run("report", cube, "--by", "L", "--csv", t).exit_code == 0
    before = t.read_text()
    t.write_text("mine")
    res = run("report", cube, "--by", "L", "--csv", t)
    _user_error(res, "already exists", "--overwrite")
    assert t.read_text() == "mine" and "RR" not in res.output
    _user_error(run("query", cube, "--csv", t), "already exists")
    assert run("report", cube, "--by", "L", "--csv", t, "--overwrite").exit_code == 0
    assert t.read_text() == before
    png = tmp_path / "p.png"
    png.write_text("mine")
    _user_error(run("plot", cube, "--kind", "ranks", "--out", png), "already exists")
    assert png.read_text() == "mine"
    assert run("plot", cube, "--kind", "ranks", "--out", png, "--overwrite").exit_code == 0


@pytest.mark.parametrize("host", ["bad host!!", "-x.example", "a..b", "x" * 64 + ".com", ""])
def test_certs_refuses_bad_host_names(run, tmp_path, host):
    _user_error(run("certs", "--out", tmp_path / "c", "--host", host), "--host")
    assert not (tmp_path / "c").exists()


@pytest.mark.parametrize("days", ["3651", "10000000", "99999999999999999999", "0"])
def test_certs_days_has_a_stated_bound(run, tmp_path, days):
    """--days is a count with a bound (ten years), checked before any file is written
    (a validity past the year 9999 raised 'unexpected failure')."""
    _user_error(run("certs", "--out", tmp_path / "c", "--days", days), "--days", "3650")
    assert not (tmp_path / "c").exists()
    from sdcdist.certs import make_certs
    with pytest.raises(SdcInputError, match=r"\[1, 3650\]"):
        make_certs(tmp_path / "d", days=int(days))
    assert not (tmp_path / "d").exists()


def test_certs_accepts_names_and_ips(run, tmp_path):
    pytest.importorskip("cryptography")
    res = run("certs", "--out", tmp_path / "c", "--host", "node-1.example.org",
              "--host", "10.0.0.1", "--host", "::1")
    assert res.exit_code == 0, res.output


# --------------------------------------------------------------------------- item 13

def test_slugs_are_safe_and_unique():
    assert slug("sub/../../x") == "sub_x"
    assert slug("..") == "dataset" and slug("a b/c") == "a_b_c"
    s = unique_slugs(["a/b", "a b", "A_B", "c"])
    assert len(set(v.lower() for v in s.values())) == 4
    for v in s.values():
        assert "/" not in v and ".." not in v


def test_multi_dataset_report_files_stay_in_their_folder(run, tmp_path):
    c = _cube(tmp_path / "m.zarr", datasets=("sub/../../x", "plain"))
    out = tmp_path / "out"
    res = run("report", c, "--by", "L", "--csv", out / "r.csv")
    assert res.exit_code == 0, res.output
    written = sorted(p.name for p in out.iterdir())
    assert written == ["r-plain.csv", "r-sub_x.csv"]
    assert not (tmp_path / "x.csv").exists() and not list(tmp_path.glob("*x*.csv"))
    planned = table_paths({"csv": str(out / "r.csv")}, ["../up", "../up"[::-1]])
    for paths in planned.values():
        assert os.path.dirname(paths["csv"]) == str(out)


def test_dense_assignment_sizes_are_bounded(run, tmp_path):
    """A dense n x n assignment beyond 8 GiB of weights is refused up front (issue 14, 9)."""
    from sdcdist.audit import parse_spec
    from sdcdist.errors import SdcInputError
    from sdcdist.limits import MAX_DENSE
    for opt in ("prl_dense_limit", "gdbrl_dense_max"):
        with pytest.raises(SdcInputError, match=rf"The '{opt}' option must be an integer in "
                                                rf"\[1, {MAX_DENSE}\]"):
            parse_spec({"dataset": {"synthetic": {"rows": 50}}, "methods": ["distr"],
                        "metrics": ["DLD"], "options": {opt: 10**9}})
    a = tmp_path / "a.csv"
    pd.DataFrame(np.random.default_rng(0).normal(size=(20, 2)), columns=["x", "y"]).to_csv(
        a, index=False)
    res = run("link", a, a, "--keys", "x,y", "--out", tmp_path / "p.parquet", "--local",
              "--dense-limit", 10**9)
    assert res.exit_code == 2 and "--dense-limit" in res.output


@pytest.mark.parametrize("command", ["measure", "audit"])
def test_a_scheduler_that_accepts_and_never_answers_is_a_clear_error(run, tmp_path,
                                                                     monkeypatch, command):
    """A --scheduler port that accepts connections and stays silent (another service, a
    stuck process): the command gives up after its timeout with exit 2 naming the address
    and the fix (Dask's Client alone would wait for its handshake for ever)."""
    import socket
    import threading

    from sdcdist.cli import _common
    monkeypatch.setattr(_common, "SCHEDULER_TIMEOUT", 1.0, raising=False)
    srv = socket.socket()
    srv.bind(("127.0.0.1", 0))
    srv.listen(8)
    srv.settimeout(0.2)
    held: list[socket.socket] = []
    stop = threading.Event()

    def accept() -> None:          # accepts every connection, never writes a byte
        while not stop.is_set():
            with contextlib.suppress(OSError):
                held.append(srv.accept()[0])

    address = f"tcp://127.0.0.1:{srv.getsockname()[1]}"
    (tmp_path / "a.csv").write_text("x,y\n1,2\n3,4\n5,7\n8,1\n")
    (tmp_path / "s.yaml").write_text("name: t\ndataset: {synthetic: {rows: 40, columns: 3}}\n"
                                     "methods: [{name: noise, params: [0.1]}]\n"
                                     "metrics: [IL1s]\n")
    args = (["measure", tmp_path / "a.csv", tmp_path / "a.csv", "--metric", "IL1s"]
            if command == "measure" else ["audit", tmp_path / "s.yaml", "--out",
                                          tmp_path / "c.zarr"])
    result: list = []
    listener = threading.Thread(target=accept, daemon=True)
    command = threading.Thread(target=lambda: result.append(run(
        *args, "--scheduler", address)), daemon=True)
    listener.start()
    try:
        command.start()
        command.join(60)            # bounded: before the fix the command never returned
    finally:
        stop.set()
        listener.join(5)
        for c in held:
            c.close()
        srv.close()
    assert result, "the command still waits for a scheduler that never answers"
    res = result[0]
    assert res.exit_code == 2, res.output
    assert held                     # the listener did accept the connection
    assert f"cannot reach the Dask scheduler at {address!r}" in res.output
    assert "did not answer within 2 s" in res.output and "check the address" in res.output


# --------------------------------------------------------------------------- input rules

@pytest.fixture
def no_cluster(monkeypatch):
    """A command that would start a local cluster fails instead (exit 1, not 2)."""
    import distributed

    def refuse(*args, **kwargs):
        raise AssertionError("a cluster was started")
    monkeypatch.setattr(distributed, "LocalCluster", refuse)


@pytest.mark.parametrize("value", ["nan", "inf", "-inf", "NaN"])
def test_number_options_must_be_finite(run, cube, spec, tmp_path, value, no_cluster):
    png = tmp_path / "p.png"
    _user_error(run("plot", cube, "--kind", "curves", "--metric", "RR", "--target", value,
                    "--out", png), "--target must be a finite number")
    assert not png.exists()
    _user_error(run("calibrate", spec, "--risk", "DLD", "--target", "1", "--tol", value,
                    "--workers", "1"), "--tol must be a finite number")
    _user_error(run("calibrate", spec, "--risk", "DLD", "--target", value, "--workers", "1"),
                "--target must be a finite number")
    assert run("plot", cube, "--kind", "curves", "--metric", "RR", "--target", "1.5",
               "--out", png).exit_code == 0


def test_a_curves_plot_refuses_a_target_that_is_no_number(cube, tmp_path):
    from sdcdist.cube import open_cube
    from sdcdist.errors import SdcInputError
    from sdcdist.report import plot_risk_curves
    with pytest.raises(SdcInputError, match="'target' of a curves plot must be a finite"):
        plot_risk_curves(open_cube(str(cube)), metric="RR", out=str(tmp_path / "p.png"),
                         target=float("nan"))
    assert not (tmp_path / "p.png").exists()


@pytest.mark.parametrize("args, says", [
    (["report", "{cube}", "--by", "L", "--metrics", ""], "--metrics is empty"),
    (["report", "{cube}", "--by", "L", "--metrics", " , "], "--metrics is empty"),
    (["query", "{cube}", "--metrics", ""], "--metrics is empty"),
    (["query", "{cube}", "--metrics", ","], "--metrics is empty"),
    (["plot", "{cube}", "--kind", "ranks", "--metrics", "", "--out", "{tmp}/r.png"],
     "--metrics is empty"),
    (["mask", "{csv}", "-m", "noise", "-p", "0.1", "--spawn-key", "", "--out", "{tmp}/m.csv"],
     "--spawn-key is empty"),
    (["risk", "{csv}", "{csv}", "--keys", "A", "--weight", "", "--local"], "--weight is empty"),
    (["risk", "{csv}", "{csv}", "--keys", "A", "--metric", "DLD", "--metric", " ", "--local"],
     "--metric is empty"),
])
def test_options_given_empty_are_refused(run, cube, csv, tmp_path, args, says):
    fill = {"{cube}": str(cube), "{csv}": str(csv)}
    res = run(*[fill.get(a, a.replace("{tmp}", str(tmp_path))) for a in args])
    _user_error(res, says)
    assert not list(tmp_path.glob("*.png")) and not (tmp_path / "m.csv").exists()


@pytest.mark.parametrize("args, says", [
    (["risk", "{csv}", "{csv}", "--keys", "A", "--metric", "DLD,DLD", "--local"],
     "--metric names ['DLD'] more than once"),
    (["risk", "{csv}", "{csv}", "--keys", "A", "--metric", "DLD", "--metric", "DLD",
      "--local"], "--metric names ['DLD'] more than once"),
    (["measure", "{csv}", "{csv}", "--metric", "IL1s,IL1s", "--local"],
     "--metric names ['IL1s'] more than once"),
    (["risk", "{csv}", "{csv}", "--metric", "DLD", "--keyset", "A", "--keyset", "A",
      "--local"], "key sets 1 and 2 ([A] and [A]) have the same columns"),
    (["risk", "{csv}", "{csv}", "--metric", "DLD", "--keyset", "A,B", "--keyset", "B,A",
      "--local"], "key sets 1 and 2 ([A, B] and [B, A]) have the same columns"),
    (["report", "{cube}", "--by", "L", "--metrics", "L,RR,L"],
     "--metrics names ['L'] more than once"),
    (["query", "{cube}", "--metrics", "RR,RR"], "--metrics names ['RR'] more than once"),
    (["plot", "{cube}", "--kind", "ranks", "--metrics", "L,L", "--out", "{tmp}/r.png"],
     "--metrics names ['L'] more than once"),
])
def test_names_given_twice_are_refused(run, cube, csv, tmp_path, args, says):
    fill = {"{cube}": str(cube), "{csv}": str(csv)}
    res = run(*[fill.get(a, a.replace("{tmp}", str(tmp_path))) for a in args])
    _user_error(res, says)
    assert "RR " not in res.output and not list(tmp_path.glob("*.png"))


@pytest.mark.parametrize("args", [
    ["report", "{cube}", "--by", "L", "--markdown", "{tmp}/t.md", "--csv", "{tmp}/t.md"],
    ["report", "{cube}", "--by", "L", "--csv", "{tmp}/t.csv", "--html", "{tmp}/./t.csv"],
    ["query", "{cube}", "--html", "{tmp}/sub/t.html", "--csv", "{tmp}/sub/../sub/t.html"],
    ["calibrate", "{spec}", "--risk", "DLD", "--target", "1", "--out", "{tmp}/t.zarr",
     "--csv", "{tmp}/t.zarr"],
])
def test_two_outputs_of_one_command_at_one_path_are_refused(run, cube, spec, tmp_path, args,
                                                            no_cluster):
    fill = {"{cube}": str(cube), "{spec}": str(spec)}
    res = run(*[fill.get(a, a.replace("{tmp}", str(tmp_path))) for a in args])
    _user_error(res, "both name", "give each output its own path")
    assert not list(tmp_path.glob("t.*")) and not (tmp_path / "sub").exists()
    assert "RR" not in res.output                 # refused before the table is printed


@pytest.mark.parametrize("address", ["notaurl", "tcp://127.0.0.1", "localhost", "tls://h/"])
def test_scheduler_without_a_port_is_refused(run, tmp_path, monkeypatch, address):
    """An address without a port (Dask has no default) is refused naming --scheduler, on
    the command line and from DASK_SCHEDULER_ADDRESS; the client raised 'missing port
    number' as an unexpected failure."""
    p = tmp_path / "x.csv"
    p.write_text("a,b\n1,2\n3,5\n4,4\n")
    _user_error(run("risk", p, p, "--metric", "DLD", "--scheduler", address),
                "--scheduler", "with a port")
    monkeypatch.setenv("DASK_SCHEDULER_ADDRESS", address)
    _user_error(run("risk", p, p, "--metric", "DLD"), "--scheduler", "with a port")
