"""How files are read: exact numbers, verbatim labels, missing markers, typo detection."""

from __future__ import annotations

import csv
import warnings

import numpy as np
import pandas as pd
import pytest

from sdcdist import SdcInputError, ingest, load_microdata
from sdcdist.data import parse
from sdcdist.data.refdata import reference_file


def _write(tmp_path, text, name="t.csv"):
    p = tmp_path / name
    p.write_text(text)
    return p


# -- item 1: a typo does not turn a numeric column categorical ----------------------------

def test_a_typo_in_a_numeric_column_is_refused_with_the_record_numbers(tmp_path):
    src = _write(tmp_path, "a,b\n1.5,2\n2.5,3\n3.5,4\n4.x,5\n")
    with pytest.raises(SdcInputError, match=r"Column 'a' of 't.csv' has 1 non-numeric \(of 4\) "
                                            r"values \(records 4\); the column looks numeric"
                                            r".*--categorical a") as e:
        ingest(src, str(tmp_path / "t.zarr"))
    assert "4.x" not in str(e.value)
    assert not (tmp_path / "t.zarr").exists()
    with pytest.raises(SdcInputError, match="Column 'a'.*records 4"):
        load_microdata(src)
    # declared categorical, it is one
    md = load_microdata(src, categorical=["a"])
    assert md.categories == {"a": ["1.5", "2.5", "3.5", "4.x"]}
    # mostly text with a number among the labels: categorical
    md = load_microdata(_write(tmp_path, "a,b\nx,2\ny,3\n7,4\nx,5\n", "u.csv"))
    assert md.categories == {"a": ["7", "x", "y"]}


def test_record_numbers_count_across_chunks(tmp_path):
    rows = "\n".join(f"{i}.5,{i}" for i in range(10))
    src = _write(tmp_path, "a,b\n" + rows + "\n1O.5,3\n" + rows + "\n")
    with pytest.raises(SdcInputError, match=r"records 11\)"):
        ingest(src, str(tmp_path / "t.zarr"), chunk_rows=3)


# -- item 2: labels verbatim; only empty cells (and named markers) are missing ------------

def test_labels_are_kept_verbatim_and_na_words_are_labels(tmp_path):
    src = _write(tmp_path, "c,x\n A,1\nA,2\nNA,3\nNone,4\nnull,5\nN/A,6\nB,7\n")
    md = load_microdata(src)
    assert md.categories["c"] == [" A", "A", "B", "N/A", "NA", "None", "null"]
    assert not np.isnan(md.values).any()
    ingest(src, str(tmp_path / "c.zarr"))
    assert load_microdata(str(tmp_path / "c.zarr")).categories == md.categories
    # the user names the markers: those cells are missing (legal in a categorical column)
    md = load_microdata(src, na_values=["NA", "N/A"])
    assert md.categories["c"] == [" A", "A", "B", "None", "null"]
    assert np.isnan(md.values[:, 0]).sum() == 2
    # a marker in a numeric column makes a missing number, which is refused
    with pytest.raises(SdcInputError, match=r"Column 'x' of 't.csv' has 1 missing values \(records 7\)"):
        load_microdata(src, na_values="7")


def test_empty_cells_are_the_only_missing_ones_and_markers_apply_to_parquet(tmp_path):
    df = pd.DataFrame({"c": ["NA", "", "b", None, "b"], "x": [1.0, 2, 3, 4, -99]})
    df.to_parquet(tmp_path / "p.parquet")
    md = load_microdata(tmp_path / "p.parquet")
    assert md.categories["c"] == ["NA", "b"]
    assert np.isnan(md.values[:, 0]).tolist() == [False, True, False, True, False]
    with pytest.raises(SdcInputError, match=r"Column 'x' of 'p.parquet' has 1 missing values \(records 5\)"):
        load_microdata(tmp_path / "p.parquet", na_values=["NA", "-99"])
    md = load_microdata(tmp_path / "p.parquet", columns=["c"], na_values=["NA"])
    assert md.categories["c"] == ["b"] and np.isnan(md.values[:, 0]).sum() == 3


def test_missing_markers_are_checked():
    assert parse.missing_markers(" NA ,-99") == frozenset({"NA", "-99"})
    with pytest.raises(SdcInputError, match="marker \\(na_values\\) is empty"):
        parse.missing_markers(["NA", " "])


# -- item 17: exact float parsing without pandas' deprecated float_precision --------------

def _cells(path):
    with open(path, newline="") as f:
        r = csv.reader(f)
        header = next(r)
        return header, [row for row in r]


@pytest.mark.parametrize("name", ["census", "tarragona", "household"])
def test_parsed_floats_equal_python_float_on_reference_files(name):
    path = reference_file(name)
    with warnings.catch_warnings():
        warnings.simplefilter("error")        # no deprecation warning from the reader
        md = load_microdata(path)
    header, rows = _cells(path)
    want = np.array([[float(c) for c in row] for row in rows])
    assert list(md.columns) == header
    assert md.values.tobytes() == want.tobytes()


def test_hard_to_round_decimals_read_back_bit_for_bit(tmp_path):
    rng = np.random.default_rng(3)
    x = np.concatenate([rng.standard_normal(500) * 10.0 ** rng.integers(-300, 290, 500),
                        [0.1, 2.2250738585072011e-308, 5e-324, 1.7976931348623157e308]])
    text = [repr(float(v)) for v in x] + ["0.1000000000000000055511151231257827",
                                   "9007199254740993", "1.00000000000000011102230246251565"]
    src = _write(tmp_path, "v,w\n" + "\n".join(f"{t},{i}" for i, t in enumerate(text)) + "\n")
    md = load_microdata(src)
    assert md.values[:, 0].tobytes() == np.array([float(t) for t in text]).tobytes()


# --------------------------------------------------------------------------- the typo doors

def test_a_parquet_text_column_with_one_typo_among_numbers_is_refused(tmp_path):
    vals = [str(i) for i in range(600)]
    vals[17] = "1O"
    pd.DataFrame({"A": vals, "B": np.arange(600.0)}).to_parquet(tmp_path / "t.parquet")
    with pytest.raises(SdcInputError, match=r"Column 'A' .* \(records 18.* looks numeric"):
        load_microdata(tmp_path / "t.parquet")
    # a text column of labels stays categorical; a declared one is taken as is
    pd.DataFrame({"A": ["a", "b", "c"] * 3, "B": np.arange(9.0)}).to_parquet(tmp_path / "o.parquet")
    assert list(load_microdata(tmp_path / "o.parquet").categories) == ["A"]
    md = load_microdata(tmp_path / "t.parquet", categorical=["A"])
    assert len(md.categories["A"]) == 600


@pytest.mark.parametrize("cell", ["1_000", "nan", "NaN", "-nan"])
def test_underscores_and_nan_text_are_not_numbers(tmp_path, cell):
    rows = "\n".join(f"{i},{i}" for i in range(20))
    path = _write(tmp_path, f"A,B\n{rows}\n{cell},3\n")
    with pytest.raises(SdcInputError, match=r"Column 'A' .* \(records 21.* looks numeric"):
        load_microdata(path)
    assert parse.parse_numbers(np.array(["1", cell], dtype=object),
                               np.zeros(2, dtype=bool))[1].tolist() == [False, True]
    if "nan" in cell.lower():      # named as a marker, it is missing (refused as such here)
        with pytest.raises(SdcInputError, match="missing values"):
            load_microdata(path, na_values=cell)
