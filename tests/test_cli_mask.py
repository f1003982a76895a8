"""`sdcdist mask`: one method on a file, written by extension, same as the library call."""

from __future__ import annotations

import re

import numpy as np
import pandas as pd
import pytest
from click.testing import CliRunner

from sdcdist.cli import main
from sdcdist.data import from_array, load_microdata, write_microdata
from sdcdist.masking import REGISTRY


@pytest.fixture
def data_csv(tmp_path, small):
    """The input file (Parquet: it round-trips floats exactly)."""
    path = tmp_path / "in.parquet"
    write_microdata(from_array(small, ["A", "B", "C", "D"]), path)
    return path


def _read(path):
    if str(path).endswith(".csv"):   # every cell through float(): exact, as sdcdist reads
        return pd.read_csv(path, dtype=str).map(float).to_numpy(dtype=float)
    return load_microdata(path).values


def _run(*args):
    return CliRunner().invoke(main, [str(a) for a in args], catch_exceptions=False)


@pytest.mark.parametrize("ext", ["csv", "parquet", "zarr"])
def test_mask_writes_what_the_library_gives(tmp_path, data_csv, ext):
    out = tmp_path / f"out.{ext}"
    r = _run("mask", data_csv, "--method", "rankswap", "--param", 10, "--seed", 4, "--out", out)
    assert r.exit_code == 0, r.output
    X = load_microdata(data_csv).values
    want = REGISTRY["rankswap"](X, 10, rng=np.random.default_rng(4))
    assert load_microdata(out).columns == ("A", "B", "C", "D")
    assert np.array_equal(_read(out), want)


def test_mask_zarr_records_method_and_families(tmp_path, data_csv):
    import zarr
    out = tmp_path / "out.zarr"
    assert _run("mask", data_csv, "-m", "distr", "--out", out).exit_code == 0
    attrs = dict(zarr.open_group(str(out), mode="r").attrs)["masking"]
    assert attrs["method"] == "distr" and attrs["seed"] == 0
    assert set(attrs["family"]) == {"A", "B", "C", "D"}


def test_mask_ipso_roles_from_options_and_from_dataset(tmp_path, data_csv, small):
    out1 = tmp_path / "o1.csv"
    r = _run("mask", data_csv, "-m", "ipso_c", "--confidential", "A,B", "--keys", "C,D",
             "--out", out1)
    assert r.exit_code == 0, r.output
    want = REGISTRY["ipso_c"](small, 0, rng=np.random.default_rng(0),
                              roles={"confidential": [0, 1], "quasi": [2, 3]})
    assert np.array_equal(_read(out1), want)
    store = tmp_path / "in.zarr"
    write_microdata(from_array(small, ["A", "B", "C", "D"],
                               roles={"key": ["C", "D"], "confidential": ["A", "B"]}), store)
    out2 = tmp_path / "o2.csv"
    assert _run("mask", store, "-m", "ipso_c", "--out", out2).exit_code == 0
    assert np.array_equal(_read(out2), _read(out1))


@pytest.mark.parametrize("args,match", [
    (["-m", "micmul"], "micmul needs --param: its 'k' parameter must be an integer"),
    (["-m", "micmul", "-p", "1"], r"The 'k' parameter of micmul must be an integer in \[2, n/2\]"
                                  r".*Got 1 instead"),
    (["-m", "jpeg", "-p", "101"], "The 'q' parameter of jpeg"),
    (["-m", "ipso_a"], "ipso_a needs the roles of the columns: pass --confidential and --keys"),
    (["-m", "ipso_a", "--keys", "C,Z", "--confidential", "A"], "Unknown role column 'Z'"),
    (["-m", "mic_mul", "-p", "3"], "Valid masking methods: .*micmul"),
])
def test_mask_user_errors_exit_2(tmp_path, data_csv, args, match):
    r = CliRunner().invoke(main, ["mask", str(data_csv), *args, "--out", str(tmp_path / "o.csv")])
    assert r.exit_code == 2
    assert re.search(match, r.output), r.output
    assert not (tmp_path / "o.csv").exists()
