"""The command line: exit codes, messages, the ingest -> audit -> report -> plot path."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest
import yaml
from click.testing import CliRunner

from sdcdist.cli import main


def test_help_explains_commands(run):
    out = run("--help").output
    for cmd in ("ingest", "synth", "audit", "report", "plot", "methods", "metrics", "risk",
                "measure", "query", "calibrate"):
        assert cmd in out
    assert "--scheduler" in run("audit", "--help").output


def test_registries_are_listed(run):
    assert "rankswap" in run("methods").output
    assert "DLD" in run("metrics").output


def test_user_errors_exit_2_without_traceback(run, tmp_path):
    bad = tmp_path / "bad.csv"
    bad.write_text("A,B\n1,2\n,3\n4,5\n")
    res = run("ingest", bad, tmp_path / "x.zarr")
    assert res.exit_code == 2
    assert res.output.startswith("Error: Column 'A' of ")
    assert "has 1 missing values" in res.output
    assert "Traceback" not in res.output
    assert not (tmp_path / "x.zarr").exists()
    spec = tmp_path / "s.yaml"
    spec.write_text("dataset: {synthetic: {rows: 50}}\nmethods: [{name: swap, params: [1]}]\n"
                    "metrics: [DLD]\n")
    res = run("audit", spec, "--out", tmp_path / "c.zarr", "--workers", "1")
    assert res.exit_code == 2 and "Unknown masking method 'swap'" in res.output
    res = run("report", tmp_path / "nothing.zarr", "--by", "DLD")
    assert res.exit_code == 2 and "Cannot open" in res.output


def test_ingest_synth_audit_report_plot(run, tmp_path, rng):
    src = tmp_path / "people.csv"
    pd.DataFrame(rng.lognormal(8, 1, size=(200, 4)), columns=list("ABCD")).to_csv(
        src, index=False)
    res = run("ingest", src, tmp_path / "p.zarr", "--keys", "A,B,C", "--chunk-rows", "64")
    assert res.exit_code == 0 and "200 records x 4 variables" in res.output
    res = run("synth", "--rows", "1000", "--columns", "5", "--out", tmp_path / "s.zarr",
              "--chunk-rows", "300")
    assert res.exit_code == 0
    spec = tmp_path / "spec.yaml"
    spec.write_text(yaml.safe_dump({
        "seed": 1, "dataset": {"name": "people", "path": "p.zarr"},
        "methods": [{"name": "noise", "params": [0.05, 0.2]},
                    {"name": "rankswap", "params": [2, 10]}],
        "replicates": 2, "metrics": ["IL1s", "DLD", "ID1"]}))
    res = run("audit", spec, "--out", tmp_path / "c.zarr", "--workers", "1")
    assert res.exit_code == 0, res.output
    assert "computed 8 of 8 cells" in res.output
    res = run("report", tmp_path / "c.zarr", "--by", "DLD", "--csv", tmp_path / "t.csv")
    assert res.exit_code == 0
    lines = res.stdout.strip().splitlines()
    assert "DLD rank" in lines[0] and len(lines) == 5
    table = pd.read_csv(tmp_path / "t.csv")
    assert list(table["DLD rank"]) == sorted(table["DLD rank"])
    res = run("plot", tmp_path / "c.zarr", "--risk", "DLD", "--loss", "IL1s", "--out",
              tmp_path / "t.png")
    assert res.exit_code == 0 and (tmp_path / "t.png").stat().st_size > 10_000
    res = run("plot", tmp_path / "c.zarr", "--risk", "PLD", "--loss", "IL1s", "--out",
              tmp_path / "t2.png")
    assert res.exit_code == 2 and "Unknown metric 'PLD'" in res.output
    assert "note:" not in run("report", tmp_path / "c.zarr", "--by", "DLD").output
    # an audit that did not finish (two cells written but not marked done, as a kill
    # between the two leaves them): the readers say how much of the plan the cube holds
    import zarr
    done = zarr.open_group(str(tmp_path / "c.zarr"), mode="r+")["done"]
    d = done[...]
    d[0, 1, :, 1] = 0                     # rankswap's replicate 2 (its two values)
    done[...] = d
    for args in (["report", tmp_path / "c.zarr", "--by", "DLD"], ["query", tmp_path / "c.zarr"],
                 ["plot", tmp_path / "c.zarr", "--risk", "DLD", "--loss", "IL1s", "--out",
                  tmp_path / "t3.png"]):
        res = run(*args)
        assert res.exit_code == 0, res.output
        assert "holds 6 of the 8 cells its audit planned" in res.stderr, res.stderr
        assert "Rerun the same `sdcdist audit` command" in res.stderr


def test_risk_command(run, tmp_path, rng):
    from sdcdist.metrics import measure
    X = rng.standard_normal((80, 3))
    ids = np.arange(80) + 500
    keep = rng.permutation(80)[:60]
    Y = X[keep] + 0.3 * rng.standard_normal((60, 3))
    pd.DataFrame(np.c_[ids, X], columns=["pid", "A", "B", "C"]).to_csv(tmp_path / "o.csv",
                                                                       index=False)
    pd.DataFrame(np.c_[ids[keep], Y], columns=["pid", "A", "B", "C"]).to_csv(
        tmp_path / "m.csv", index=False)
    res = run("risk", tmp_path / "o.csv", tmp_path / "m.csv", "--id", "pid", "--keys", "A,B",
              "--metric", "DLD,DRL2", "--local")
    assert res.exit_code == 0, res.output
    ref = measure(X, Y, ["DLD"], columns=["A", "B", "C"], keysets=[["A"], ["A", "B"]],
                  truth=keep)["DLD"]
    line = next(s for s in res.output.splitlines() if s.startswith("DLD "))
    assert float(line.split()[1]) == pytest.approx(ref.value, rel=1e-5)
    assert "A,B" in res.output and "DRL2" in res.output
    # without shared attributes: CRL on the options that name each file's columns
    pd.DataFrame(Y[:, 1:], columns=["B2", "C2"]).to_csv(tmp_path / "r.csv", index=False)
    res = run("risk", tmp_path / "o.csv", tmp_path / "r.csv", "--metric", "CRL", "--local",
              "-o", "crl_external=[A]", "-o", "crl_released=[B2,C2]")
    assert res.exit_code == 0 and "CRL" in res.output
    res = run("risk", tmp_path / "o.csv", tmp_path / "r.csv", "--metric", "DLD", "--local")
    assert res.exit_code == 2 and "share no key columns" in res.output
    res = run("risk", tmp_path / "o.csv", tmp_path / "m.csv", "--metric", "IL1s", "--local")
    assert res.exit_code == 2 and "loss metric" in res.output


def test_risk_and_measure_say_why_a_figure_is_undefined(run, tmp_path, rng):
    """cl_c and dcr_baseline printed nan without a word: a note on stderr now says why
    (and the JSON carries it as "undefined"); a figure with a value gets none."""
    import itertools
    import json
    n = 120
    a, b, conf = rng.integers(0, 3, n), rng.integers(0, 2, n), rng.integers(0, 4, n)
    conf[a == 0] = 1                      # the classes of a = 0 hold one value: l = 1
    pd.DataFrame({"a": a, "b": b, "conf": conf}).to_csv(tmp_path / "c.csv", index=False)
    args = ("risk", tmp_path / "c.csv", tmp_path / "c.csv", "--local", "--keys", "a,b",
            "--categorical", "a,b,conf", "--confidential", "conf")
    res = run(*args, "--metric", "cl_c,ldiv_distinct")
    assert res.exit_code == 0, res.output
    assert ("note: cl_c is undefined (NaN) on these files: on every confidential column some "
            "key class holds a single value (l = 1)") in res.stderr
    assert "ldiv_distinct is undefined" not in res.stderr
    got = json.loads(run(*args, "--metric", "cl_c,ldiv_distinct", "--json").stdout)["metrics"]
    assert got["cl_c"]["value"] is None and "(l = 1)" in got["cl_c"]["undefined"]
    assert got["ldiv_distinct"]["value"] == 1 and "undefined" not in got["ldiv_distinct"]
    conf[a == 0] = np.arange(np.count_nonzero(a == 0)) % 2      # now every class has two
    pd.DataFrame({"a": a, "b": b, "conf": conf}).to_csv(tmp_path / "c.csv", index=False)
    res = run(*args, "--metric", "cl_c")
    assert res.exit_code == 0 and "undefined" not in res.stderr
    # every random baseline record repeats a training record: DCR baseline divides by 0
    pd.DataFrame(list(itertools.product([0, 1], [0, 1], [0, 1])) * 20,
                 columns=["a", "b", "c"]).to_csv(tmp_path / "f.csv", index=False)
    res = run("risk", tmp_path / "f.csv", tmp_path / "f.csv", "--local", "--categorical",
              "a,b,c", "--keys", "a,b", "--metric", "dcr_baseline")
    assert res.exit_code == 0, res.output
    assert ("note: dcr_baseline is undefined (NaN) on these files: the random baseline's "
            "median distance to the training file is 0") in res.stderr


def test_undefined_note_points_to_the_definition_without_a_reason():
    from sdcdist.metrics import MetricResult
    from sdcdist.metrics.measure import undefined_note, undefined_reason
    assert undefined_note("X_MV", MetricResult(0.5)) is None
    assert undefined_note("X_MV", MetricResult(float("nan"))) == (
        "note: X_MV is undefined (NaN) on these files: its definition gives no value here "
        "(sdcdist metrics X_MV)")
    assert undefined_reason("X_MV", MetricResult(float("nan"), info={"undefined": "why"})) \
        == "why"


def test_metrics_and_methods_show_declared_options():
    from sdcdist.metrics import get_metric
    from sdcdist.metrics import options_of as for_metric
    runner = CliRunner()
    res = runner.invoke(main, ["metrics", "PLD", "GDBRL"])
    assert res.exit_code == 0, res.output
    for o in for_metric("PLD") + for_metric("GDBRL"):
        assert f"option  {o.name} (default" in res.output
    assert get_metric("GDBRL").options and "gdbrl_dense_max" in res.output
    res = runner.invoke(main, ["methods", "ipso_b"])
    assert res.exit_code == 0 and "option     roles" in res.output
    res = runner.invoke(main, ["metrics", "NOPE"])
    assert res.exit_code == 2 and "Valid metrics" in res.output


def test_risk_option_values_are_checked_by_the_registry(tmp_path):
    runner = CliRunner()
    a = tmp_path / "a.csv"
    pd.DataFrame(np.random.default_rng(0).normal(size=(30, 3)), columns=list("ABC")).to_csv(
        a, index=False)
    for item, msg in (("gdbrl_dense_max=-1", "gdbrl_dense_max"), ("nope=1", "nope"),
                      ("prl_t=&x 1", "anchors")):
        res = runner.invoke(main, ["risk", str(a), str(a), "--metric", "DLD", "--local", "-o", item])
        assert res.exit_code == 2, (item, res.output)
        assert msg in res.output
    res = runner.invoke(main, ["risk", str(a), str(a), "--metric", "DLD", "--local", "--id", "Z"])
    assert res.exit_code == 2 and "Unknown identifier column 'Z'" in res.output


def test_link_reads_keys_declared_categorical_as_categories(run, tmp_path, rng):
    """``link --categorical`` reaches the reader: an integer-coded key with a missing value
    is read as categories (as ``risk`` and ``measure`` read it), not refused as a numeric
    column with a gap; the pairs equal those of the same codes written as text."""
    import pyarrow.parquet as pq
    n = 80
    codes = rng.integers(1, 5, n).astype(object)
    codes[5] = ""
    y = np.round(rng.normal(50, 10, n), 1)
    text = ["c" + str(c) if c != "" else "" for c in codes]
    for name, shift in (("a", 0.0), ("b", 1.0)):
        yy = y + shift * rng.normal(size=n).round(1)
        pd.DataFrame({"x": codes, "y": yy}).to_csv(tmp_path / f"{name}.csv", index=False)
        pd.DataFrame({"x": text, "y": yy}).to_csv(tmp_path / f"{name}_text.csv", index=False)
    res = run("link", tmp_path / "a.csv", tmp_path / "b.csv", "--keys", "x,y",
              "--categorical", "x", "--out", tmp_path / "p.parquet")
    assert res.exit_code == 0, res.output
    res = run("link", tmp_path / "a_text.csv", tmp_path / "b_text.csv", "--keys", "x,y",
              "--out", tmp_path / "t.parquet")
    assert res.exit_code == 0, res.output
    got, want = (pq.read_table(tmp_path / f).to_pandas() for f in ("p.parquet", "t.parquet"))
    assert len(got) > 0 and got.equals(want)
    res = run("link", tmp_path / "a.csv", tmp_path / "b.csv", "--keys", "x,y",
              "--categorical", "nosuch", "--out", tmp_path / "q.parquet")
    assert res.exit_code == 2 and "nosuch" in res.output
    assert not (tmp_path / "q.parquet").exists()


@pytest.mark.parametrize("command", ["audit", "measure", "risk", "link"])
def test_the_option_examples_of_each_help_are_accepted(command):
    """Every ``-o`` example a command's help gives is an option that command takes (``link``
    takes the PRL options only: its help gave ``chunk_rows=4096``, which it refuses)."""
    import re

    from sdcdist.cli.link import prl_settings
    from sdcdist.options import OPTIONS, read_items
    cmd = main.commands[command]
    if isinstance(cmd, type(main)):                     # a group: its first command
        cmd = next(iter(cmd.commands.values()))
    opt = next(p for p in cmd.params if p.name == "option_items")
    examples = re.search(r"e\.g\. (.*) \(repeatable", " ".join(opt.help.split())).group(1)
    items = tuple(examples.split(" or "))
    assert len(items) == 2
    if command == "link":
        prl_settings({}, items, None)                   # refused: SdcInputError
    else:
        assert set(read_items(items)) <= set(OPTIONS)


def test_no_help_shows_a_doubled_percent_sign(run):
    """click prints help texts as written (no %-formatting): ``1 %%`` would show as is."""
    for name in main.commands:
        res = run(name, "--help")
        assert res.exit_code == 0 and "%%" not in res.output, name
        sub = main.commands[name]
        for child in getattr(sub, "commands", {}):
            res = run(name, child, "--help")
            assert res.exit_code == 0 and "%%" not in res.output, (name, child)
