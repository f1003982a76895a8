"""Data layer: ingest / open / load round trips, validation errors, synthetic files."""

from __future__ import annotations

import os
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from sdcdist import SdcInputError
from sdcdist.data import (from_array, ingest, load_microdata, open_microdata, synth,
                          write_microdata)


def _frame(rng, n=50):
    return pd.DataFrame({"AGE": rng.integers(16, 90, n), "INCOME": rng.lognormal(10, 1, n),
                         "TAX": rng.normal(1000, 300, n).round(2)})


def _nothing_left(folder: Path, keep: set[str]) -> bool:
    return {p.name for p in folder.iterdir()} == keep


@pytest.mark.parametrize("fmt", ["csv", "parquet"])
def test_ingest_then_open_gives_back_the_numbers(tmp_path, rng, fmt):
    df = _frame(rng, 103)
    src = tmp_path / f"in.{fmt}"
    df.to_csv(src, index=False, float_format="%.17g") if fmt == "csv" else df.to_parquet(src)
    before = src.read_bytes()
    store = str(tmp_path / "d.zarr")
    ingest(src, store, chunk_rows=10, roles={"key": ["AGE", "INCOME"]})
    assert src.read_bytes() == before                       # source untouched
    da = open_microdata(store)
    assert da.dims == ("record", "variable")
    assert list(da["variable"].values) == ["AGE", "INCOME", "TAX"]
    assert da.chunks[0][0] == 10                            # chunked along records
    np.testing.assert_array_equal(da.values, df.to_numpy(dtype=float))
    assert da.attrs["roles"] == {"key": ["AGE", "INCOME"]}
    assert len(da.attrs["sha256"]) == 64
    md = load_microdata(store)
    np.testing.assert_array_equal(md.values, df.to_numpy(dtype=float))


def test_columns_selects_a_numeric_subset(tmp_path, rng):
    df = _frame(rng)
    df["REGION"] = "north"                    # a text column is categorical; this one constant
    src = tmp_path / "in.csv"
    df.to_csv(src, index=False)
    with pytest.raises(SdcInputError, match=r"\['REGION'\] are constant.*--columns") as e:
        ingest(src, str(tmp_path / "d.zarr"), allow_constant=False)
    assert "north" not in str(e.value)
    assert _nothing_left(tmp_path, {"in.csv"})
    ingest(src, str(tmp_path / "d.zarr"), columns=["AGE", "TAX"])
    assert list(open_microdata(str(tmp_path / "d.zarr"))["variable"].values) == ["AGE", "TAX"]


@pytest.mark.parametrize("content, match", [
    ("AGE,INCOME\n30,1000\n,2000\n40,\n50,3000\n",
     r"Column 'AGE' of .*has 1 missing values \(records 2\).*impute or drop"),
    ("AGE,INCOME\n30,1000\n31,inf\n40,10\n50,3000\n",
     r"Column 'INCOME' of .*has 1 infinite values \(records 2\)"),
    ("AGE,INCOME\n30,7\n31,8\n", r"must have at least 3 records\. Got 2 instead"),
    ("AGE,AGE\n30,7\n31,8\n32,9\n", r"must be unique\. Got duplicates \['AGE'\]"),
    ("", r"\(it is empty\); it needs a header row"),
    ("AGE,INCOME\n", r"must have at least 3 records\. Got 0 instead"),
])
def test_bad_input_gets_its_own_error_and_leaves_nothing(tmp_path, content, match):
    src = tmp_path / "in.csv"
    src.write_text(content)
    with pytest.raises(SdcInputError, match=match):
        ingest(src, str(tmp_path / "d.zarr"))
    assert _nothing_left(tmp_path, {"in.csv"})


def test_error_messages_never_show_values(tmp_path):
    src = tmp_path / "in.csv"
    src.write_text("AGE,INCOME\n30,98765.4321\n31,\n40,12345.678\n")
    with pytest.raises(SdcInputError) as err:
        ingest(src, str(tmp_path / "d.zarr"))
    assert "98765" not in str(err.value) and "12345" not in str(err.value)


def test_unreadable_and_missing_files(tmp_path):
    with pytest.raises(SdcInputError, match="does not exist"):
        ingest(tmp_path / "nope.csv", str(tmp_path / "d.zarr"))
    bad = tmp_path / "broken.parquet"
    bad.write_bytes(b"this is not parquet")
    with pytest.raises(SdcInputError, match="Cannot open 'broken.parquet' as a Parquet file"):
        ingest(bad, str(tmp_path / "d.zarr"))
    with pytest.raises(SdcInputError, match="The data file '.*x.xlsx' does not exist"):
        ingest(tmp_path / "x.xlsx", str(tmp_path / "d.zarr"))
    (tmp_path / "x.xlsx").write_bytes(b"PK")
    with pytest.raises(SdcInputError, match="Cannot open .* as a data file \\(unknown format\\)"):
        ingest(tmp_path / "x.xlsx", str(tmp_path / "d.zarr"))


def test_existing_store_needs_overwrite(tmp_path, rng):
    src = tmp_path / "in.csv"
    _frame(rng).to_csv(src, index=False)
    store = str(tmp_path / "d.zarr")
    ingest(src, store)
    first = load_microdata(store).values
    _frame(rng).to_csv(src, index=False)
    with pytest.raises(SdcInputError, match="already exists; pass --overwrite"):
        ingest(src, store)
    np.testing.assert_array_equal(load_microdata(store).values, first)   # nothing lost
    src.write_text("AGE,INCOME\n1,\n2,3\n3,4\n")                          # a bad new source
    with pytest.raises(SdcInputError):
        ingest(src, store, overwrite=True)
    np.testing.assert_array_equal(load_microdata(store).values, first)   # old store intact
    _frame(rng).to_csv(src, index=False)
    ingest(src, store, overwrite=True)
    assert not np.array_equal(load_microdata(store).values, first)
    assert sorted(os.listdir(tmp_path)) == ["d.zarr", "in.csv"]


def test_from_array_validates():
    with pytest.raises(SdcInputError, match="missing values"):
        from_array(np.array([[1.0, np.nan], [2, 3], [4, 5]]))
    md = from_array(np.arange(12.0).reshape(4, 3), ["a", "b", "c"])
    assert md.columns == ("a", "b", "c") and md.sha256


def test_write_microdata_formats(tmp_path, rng):
    md = from_array(rng.normal(size=(20, 3)), ["x", "y", "z"])
    for name in ("m.zarr", "m.csv", "m.parquet"):
        write_microdata(md, tmp_path / name)
        np.testing.assert_array_equal(load_microdata(tmp_path / name).values, md.values)
    with pytest.raises(SdcInputError, match="already exists"):
        write_microdata(md, tmp_path / "m.csv")


def test_synthetic_is_realistic_and_chunking_free(tmp_path):
    md = synth.generate(20_000, columns=13, seed=3)
    v = md.values
    assert v.shape == (20_000, 13)
    zeros = (v == 0).mean(axis=0)
    assert (zeros[:11] > 0.05).all()                                    # a share of zeros
    assert (v >= 0).all()
    skew = ((v - v.mean(0)) ** 3).mean(0) / v.std(0) ** 3
    assert (skew[:11] > 2).all()                                        # skewed incomes
    assert v[:, 0].max() > 20 * np.percentile(v[:, 0], 99)              # extreme outliers
    from scipy.stats import spearmanr
    assert spearmanr(v[:, 0], v[:, 5]).statistic > 0.5                  # correlated
    # the same file whatever the chunking; slices can be generated alone
    a = synth.write_synthetic(str(tmp_path / "a.zarr"), 20_000, columns=13, seed=3,
                              chunk_rows=777)
    b = synth.write_synthetic(str(tmp_path / "b.zarr"), 20_000, columns=13, seed=3,
                              chunk_rows=20_000)
    np.testing.assert_array_equal(load_microdata(a).values, v)
    np.testing.assert_array_equal(load_microdata(b).values, v)
    assert not np.array_equal(synth.generate(100, seed=4).values, synth.generate(100).values)
    with pytest.raises(SdcInputError, match="The 'rows' parameter of synth"):
        synth.generate(2)


def test_reference_files(census, tarragona):
    assert census.values.shape == (1080, 13)
    assert tarragona.values.shape == (834, 13)


#: SHA-256 of the reference files shipped in sdcdist/data/reference (the README there gives
#: their provenance); a changed file changes every example cube.
SHIPPED_SHA256 = {
    "census": "40fb91564d4379274610e941161fd38729adb471bddb9c71d7c01ef142fd0f5b",
    "tarragona": "d5f719a134a3476b2157d9675d1a2b211dbc06ad6109685ad1e4b7847cfa45a4",
    "household": "2d28251253250606412b0669b80bcd6e0038081e2d3c4de9611a744333f9fe3d",
    "free1": "24f83522093196022947e4dec7f8bdcedcee9def7506ab84c49b9c840ca07373",
}


def test_reference_files_are_shipped_in_the_package(monkeypatch):
    import hashlib

    import sdcdist.data
    from sdcdist.data.refdata import REFERENCE_FILES, reference_dir, reference_file
    monkeypatch.delenv("SDCDIST_REFDATA", raising=False)
    package = Path(sdcdist.data.__file__).resolve().parent / "reference"
    assert reference_dir().resolve() == package
    assert set(REFERENCE_FILES) == set(SHIPPED_SHA256)
    for name, sha in SHIPPED_SHA256.items():
        path = reference_file(name)
        assert path.resolve().parent == package
        assert hashlib.sha256(path.read_bytes()).hexdigest() == sha, name
    readme = (package / "README.md").read_text()
    for f in REFERENCE_FILES.values():
        assert f"`{f}`" in readme


def test_reference_folder_override(monkeypatch, tmp_path):
    import shutil

    from sdcdist.data.refdata import reference_file
    monkeypatch.delenv("SDCDIST_REFDATA", raising=False)
    shutil.copy(reference_file("census"), tmp_path / "census.csv")
    monkeypatch.setenv("SDCDIST_REFDATA", str(tmp_path))
    assert reference_file("census") == tmp_path / "census.csv"
    with pytest.raises(SdcInputError, match="reference file '.*tarragona.csv' does not exist; set SDCDIST_REFDATA"):
        reference_file("tarragona")
    with pytest.raises(SdcInputError, match="Unknown reference file 'adult'.*census, free1, household"):
        reference_file("adult")


def test_household_reference_file(monkeypatch):
    from sdcdist.data.refdata import reference_file
    monkeypatch.delenv("SDCDIST_REFDATA", raising=False)
    # all columns numeric (categorical codes as integers), but sampling_weight is constant
    with pytest.raises(SdcInputError, match="'sampling_weight'.*constant"):
        load_microdata(reference_file("household"), allow_constant=False)
    cols = ["urbrur", "water", "sex", "age", "expend", "income", "savings"]
    md = load_microdata(reference_file("household"), columns=cols)
    assert md.values.shape == (4580, 7) and md.columns == tuple(cols)
    assert set(np.unique(md.values[:, 2])) == {1.0, 2.0}  # sex codes
