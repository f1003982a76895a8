"""Ranking tables (text, CSV, Markdown, HTML), the Pareto front, plots, and the
report/query/plot/calibrate commands."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest
from click.testing import CliRunner

from sdcdist import SdcInputError
from sdcdist.cube import create_cube, open_cube, write_cell
from sdcdist.audit import parse_spec, run_audit
from sdcdist.cli import main
from sdcdist.cube import example_cube
from sdcdist.report import (markdown_table, plot_rank_heatmap, plot_risk_curves,
                            plot_tradeoff, ranking_table, write_table)


@pytest.fixture
def cube(tmp_path):
    path = str(tmp_path / "c.zarr")
    create_cube(path, methods=["a", "b"], param_names=["p", "k"], params=[1.0, 2.0],
                metrics=["L", "RR"], metric_kinds=["loss", "risk"], ascending=[True, False],
                replicates=2, keysets=[("x",)], attrs={"spec": {}})
    vals = {(0, 0): [(1.0, 5.0), (3.0, 7.0)], (0, 1): [(2.0, 6.0), (2.0, 6.0)],
            (1, 0): [(2.0, 1.0), (2.0, 1.0)]}
    for (m, p), reps in vals.items():
        for r, v in enumerate(reps):
            write_cell(path, m, p, r, values=np.array(v), keyset_values=np.full((2, 1), np.nan),
                       excluded=np.zeros(2, np.int32), flags=np.zeros(2, np.int8))
    return open_cube(path)


def test_ranking_table_means_ties_and_direction(cube):
    t = ranking_table(cube, by="L")
    # means over replicates: a/1 -> (2, 6), a/2 -> (2, 6), b/1 -> (2, 1); b/2 never ran
    assert len(t) == 3
    assert (t["L"] == 2.0).all() and (t["L rank"] == 2.0).all()       # 3-way tie: average
    # RR: lower = riskier, so rank 1 is the largest value
    assert t.loc[("a", 1.0), "RR rank"] == 1.5 and t.loc[("b", 1.0), "RR rank"] == 3.0
    with pytest.raises(SdcInputError, match="Unknown metric 'DLD'. Valid metrics: L, RR"):
        ranking_table(cube, by="DLD")


def test_a_cube_is_read_here_not_through_an_active_cluster(cube, client):
    # with a distributed Client active, Dask-backed arrays would send the cluster a task per
    # chunk (one per cell) for every table; a cube's arrays are read in this process
    from distributed import get_task_stream
    from sdcdist.cube import cell_table
    assert cube["value"].chunks is None
    with get_task_stream(client) as ts:
        t = cell_table(cube)
        ranking_table(cube, by="RR")
    assert not ts.data
    assert t.loc[("a", 1.0), "L"] == 2.0 and t.loc[("a", 1.0), "replicates"] == 2


def test_sel_by_method_label(cube):
    v = cube.sel(method="a", param=1.0, metric="L").mean("replicate")["value"]
    assert float(v) == 2.0
    assert cube.sel(method="b").sizes["param"] == 2


@pytest.fixture(scope="module")
def cube_path(tmp_path_factory):
    out = tmp_path_factory.mktemp("cube") / "c.zarr"
    spec = parse_spec({"name": "r", "seed": 1,
                       "dataset": {"name": "s", "synthetic": {"rows": 120, "columns": 3,
                                                              "seed": 4}},
                       "methods": [{"name": "noise", "params": [0.02, 0.1, 0.2]},
                                   {"name": "rankswap", "params": [2, 10]}],
                       "replicates": 2, "metrics": ["IL1s", "DLD", "ID1"]})
    run_audit(spec, out)
    return str(out)


def test_table_formats(tmp_path):
    t = ranking_table(example_cube(), by="DLD", metrics=["IL1s"])
    assert list(t.columns) == ["param_name", "replicates", "IL1s", "DLD", "IL1s rank",
                               "DLD rank"]
    md = markdown_table(t)
    assert md.splitlines()[0] == "| cell | IL1s | DLD | IL1s rank | DLD rank |"
    assert md.splitlines()[2].startswith("| noise p=0.2 | 0.40 | 2.00 | 4 | 1.5 |")
    for ext in ("csv", "md", "html"):
        write_table(t, tmp_path / f"t.{ext}", title="x")
    back = pd.read_csv(tmp_path / "t.csv", index_col=[0, 1])
    pd.testing.assert_frame_equal(back, t, check_dtype=False)
    assert "<table" in (tmp_path / "t.html").read_text()
    with pytest.raises(SdcInputError, match=r"table file must be one of \.csv, \.md, \.html\. Got '\.xlsx'"):
        write_table(t, tmp_path / "t.xlsx")


def test_plots_png_and_svg(tmp_path, cube_path):
    cube = open_cube(cube_path)
    for ext in ("png", "svg"):
        for f, kw in ((plot_tradeoff, {"risk": "DLD", "loss": "ID1"}),
                      (plot_risk_curves, {"metric": "DLD", "target": 20}),
                      (plot_rank_heatmap, {"by": "DLD"})):
            out = tmp_path / f"{f.__name__}.{ext}"
            f(cube, out=str(out), **kw)
            head = out.read_bytes()[:200]
            assert head.startswith(b"\x89PNG") if ext == "png" else b"<svg" in head or \
                b"<?xml" in head
    with pytest.raises(SdcInputError, match=r"plot file must be one of \.png, \.svg"):
        plot_tradeoff(cube, risk="DLD", loss="IL1s", out=str(tmp_path / "x.jpg"))
    with pytest.raises(SdcInputError, match="Unknown method 'micmul9'. Valid methods: "):
        plot_risk_curves(cube, metric="DLD", methods=["micmul9"], out=str(tmp_path / "x.png"))


def test_cli_report_query_plot(tmp_path, cube_path):
    r = CliRunner()
    res = r.invoke(main, ["report", cube_path, "--by", "DLD", "--metrics", "IL1s,ID1",
                          "--csv", str(tmp_path / "t.csv"), "--markdown",
                          str(tmp_path / "t.md"), "--html", str(tmp_path / "t.html")])
    assert res.exit_code == 0, res.output
    lines = res.stdout.splitlines()
    assert lines[0].split() == ["cell", "IL1s", "ID1", "DLD", "IL1s", "rank", "ID1", "rank",
                                "DLD", "rank"]
    assert len(lines) == 6 and all((tmp_path / f"t.{e}").exists() for e in ("csv", "md", "html"))
    res = r.invoke(main, ["report", cube_path, "--by", "Score"])
    assert res.exit_code == 2 and "Score" in res.stderr
    res = r.invoke(main, ["query", cube_path, "--where", "DLD < 50 and IL1s > 0",
                          "--sort", "IL1s", "--top", "2"])
    assert res.exit_code == 0, res.output
    assert len(res.stdout.splitlines()) == 3
    res = r.invoke(main, ["query", cube_path, "--where", "DLD < 5 or __import__('os')"])
    assert res.exit_code == 2
    assert "cannot read the filter" in res.stderr and "Traceback" not in res.output
    for kind, extra in (("tradeoff", ["--risk", "DLD", "--loss", "IL1s"]),
                        ("curves", ["--metric", "DLD"]), ("ranks", ["--by", "DLD"])):
        res = r.invoke(main, ["plot", cube_path, "--kind", kind, *extra, "--out",
                              str(tmp_path / f"{kind}.svg")])
        assert res.exit_code == 0, res.output
    res = r.invoke(main, ["plot", cube_path, "--kind", "curves", "--out", str(tmp_path / "a.png")])
    assert res.exit_code == 2 and "needs --metric" in res.stderr


def test_cli_calibrate_argument_errors(tmp_path):
    spec = tmp_path / "s.yaml"
    spec.write_text("dataset: {synthetic: {rows: 50, columns: 3}}\n"
                    "methods: [{name: noise, params: [0.01, 0.2]}]\nmetrics: [IL1s]\n")
    r = CliRunner()
    res = r.invoke(main, ["calibrate", str(spec), "--target", "3"])
    assert res.exit_code == 2 and "exactly one of --risk" in res.stderr
    res = r.invoke(main, ["calibrate", str(spec), "--risk", "IL1s", "--target", "3",
                          "--workers", "1"])
    assert res.exit_code == 2 and "--risk needs a risk metric" in res.stderr
