"""The command line: `sdcdist measure`."""

from __future__ import annotations

import json

import numpy as np
import pandas as pd
import pytest
from click.testing import CliRunner

from sdcdist.cli import main
from sdcdist.data import from_array, write_microdata
from sdcdist.metrics import measure


@pytest.fixture
def files(tmp_path, small, rng):
    Y = small * np.exp(0.1 * rng.standard_normal(small.shape))
    cols = ["a", "b", "c", "d"]
    pd.DataFrame(small, columns=cols).to_csv(tmp_path / "x.csv", index=False)
    pd.DataFrame(Y, columns=cols).to_csv(tmp_path / "y.csv", index=False)
    write_microdata(from_array(Y, cols), str(tmp_path / "y.zarr"))
    pd.DataFrame(Y, columns=["a", "b", "c", "e"]).to_csv(tmp_path / "e.csv", index=False)
    return tmp_path, small, Y


def test_measure_json_matches_library(files):
    tmp, X, Y = files
    r = CliRunner().invoke(main, ["measure", str(tmp / "x.csv"), str(tmp / "y.zarr"), "--local",
                                  "--metric", "IL1s,X_MV", "--metric", "brMAE", "--json"])
    assert r.exit_code == 0, r.output
    got = json.loads(r.output)
    ref = measure(X, Y, ["IL1s", "X_MV", "brMAE"], columns=list("abcd"))
    assert set(got) == {"IL1s", "X_MV", "brMAE"}
    for k, v in ref.items():
        assert got[k]["value"] == pytest.approx(v.value, rel=1e-12)
        assert got[k]["excluded"] == v.excluded


def test_measure_table_default_catalogue(files):
    tmp, X, Y = files
    r = CliRunner().invoke(main, ["measure", str(tmp / "x.csv"), str(tmp / "y.csv"), "--local"])
    assert r.exit_code == 0, r.output
    lines = r.output.strip().splitlines()
    assert lines[0].split() == ["metric", "kind", "value", "excluded", "flag"]
    names = [ln.split()[0] for ln in lines[1:]]
    assert {"X_MSE", "R_MV", "IL", "s2", "brMSE", "PS", "PS2", "EMD", "EMD1"} <= set(names)
    assert "DLD" not in names


def test_measure_default_on_one_numeric_column_leaves_correlations_out(files):
    """One numeric column: the default set leaves the correlation metrics and the composites
    built on them out with a note (it refused the whole run); named, R_MAE is refused."""
    tmp, X, Y = files
    pd.DataFrame(X[:, :1], columns=["a"]).to_csv(tmp / "x1.csv", index=False)
    pd.DataFrame(Y[:, :1], columns=["a"]).to_csv(tmp / "y1.csv", index=False)
    r = CliRunner().invoke(main, ["measure", str(tmp / "x1.csv"), str(tmp / "y1.csv"), "--local",
                                  "--json"])
    assert r.exit_code == 0, r.output
    assert "1 numeric column(s): skipping R_MSE, R_MAE, R_MV, IL," in r.output
    got = json.loads(r.output[r.output.index("{"):])
    assert {"X_MSE", "S_MV", "IL1s", "EMD"} <= set(got)
    assert not {"R_MSE", "R_MAE", "R_MV", "IL", "IL_S2"} & set(got)
    ref = measure(X[:, :1], Y[:, :1], ["X_MV", "IL1s"], columns=["a"])
    assert got["X_MV"]["value"] == ref["X_MV"].value and got["IL1s"]["value"] == ref["IL1s"].value
    r = CliRunner().invoke(main, ["measure", str(tmp / "x1.csv"), str(tmp / "y1.csv"), "--local",
                                  "--metric", "R_MAE"])
    assert r.exit_code == 2 and "at least 2 columns" in r.output


@pytest.mark.parametrize("args,msg", [
    (["x.csv", "e.csv"], "columns"),
    (["x.csv", "y.csv", "--metric", "NOPE"], "Unknown metric 'NOPE'"),
    (["x.csv", "missing.csv"], "does not exist"),
])
def test_measure_user_errors(files, args, msg):
    tmp, _, _ = files
    argv = ["measure", *[str(tmp / a) if a.endswith(".csv") else a for a in args], "--local"]
    r = CliRunner().invoke(main, argv)
    assert r.exit_code == 2 and msg in r.output
