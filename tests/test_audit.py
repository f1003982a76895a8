"""Audits over several datasets: the cube's dataset dimension, resume, bit-identity."""

from __future__ import annotations

import numpy as np
import pytest

from sdcdist.audit import load_dataset, parse_spec, plan_cells, run_audit
from sdcdist.cube import cell_table, dataset_names, open_cube, select_dataset
from sdcdist.data import load_microdata, reference_file
from sdcdist.errors import SdcInputError

METHODS = [{"name": "noise", "params": [0.05, 0.2]}, {"name": "rankswap", "params": [5, 15]}]


def _spec(datasets=None, **extra):
    doc = {"name": "t", "seed": 11, "methods": METHODS, "replicates": 2,
           "metrics": ["IL1s", "DLD", "ID1"], "keysets": "prefixes",
           "options": {"block_rows": [64, 64]}}
    if datasets is None:
        doc["dataset"] = {"name": "one", "synthetic": {"rows": 150, "columns": 3, "seed": 2}}
    else:
        doc["datasets"] = datasets
    doc.update(extra)
    return parse_spec(doc)


TWO = [{"name": "small", "synthetic": {"rows": 150, "columns": 3, "seed": 2}},
       {"name": "wide", "synthetic": {"rows": 120, "columns": 5, "seed": 3}}]


def test_single_dataset_cube_keeps_its_dims(tmp_path):
    res = run_audit(_spec(), tmp_path / "c.zarr")
    assert res.computed == res.total == 8
    cube = open_cube(tmp_path / "c.zarr")
    assert cube["value"].dims == ("method", "param", "metric", "replicate")
    assert dataset_names(cube) == ["one"]
    v = cube.sel(method="rankswap", param=15, metric="DLD")["value"].mean("replicate")
    assert v.ndim == 0 and np.isfinite(float(v))
    raw = open_cube(tmp_path / "c.zarr", squeeze=False)
    assert raw["value"].dims[0] == "dataset" and raw.sizes["dataset"] == 1


def test_several_datasets_bit_identical_across_modes_and_resumable(tmp_path, client):
    spec = _spec(TWO)
    assert [c.dataset for c in plan_cells(spec)].count("wide") == 8
    a = run_audit(spec, tmp_path / "a.zarr")
    b = run_audit(spec, tmp_path / "b.zarr", client=client)
    d = run_audit(_spec(TWO, options={"block_rows": [64, 64], "cell_mode": "distributed"}),
                  tmp_path / "d.zarr", client=client)
    assert (a.computed, b.computed, d.computed, d.mode) == (16, 16, 16, "distributed")
    ca, cb, cd = (open_cube(tmp_path / f"{k}.zarr") for k in "abd")
    assert ca["value"].dims == ("dataset", "method", "param", "metric", "replicate")
    assert dataset_names(ca) == ["small", "wide"]
    np.testing.assert_array_equal(ca["value"].values, cb["value"].values)
    np.testing.assert_array_equal(ca["value"].values, cd["value"].values)
    done = ca["done"].values.astype(bool)
    assert done.sum() == 16 and np.isfinite(ca["value"].values.transpose(0, 1, 2, 4, 3)[done]).all()
    # each dataset is its own audit: the same cells as a single-dataset spec of it
    solo = run_audit(_spec([TWO[1]]), tmp_path / "solo.zarr")
    assert solo.computed == 8
    np.testing.assert_array_equal(open_cube(tmp_path / "solo.zarr")["value"].values,
                                  ca.sel(dataset="wide")["value"].values)
    # key sets per dataset: 3 and 5 prefixes
    cols = ca["keyset_columns"].values
    assert [sum(bool(c) for c in row) for row in cols] == [3, 5]
    # the query helpers want one dataset
    with pytest.raises(SdcInputError, match="choose one"):
        cell_table(ca)
    assert len(cell_table(ca, dataset="wide")) == 4
    assert select_dataset(ca, "small")["value"].dims[0] == "method"
    # resume: drop two cells' done flags, only they are recomputed, same values
    import zarr
    g = zarr.open_group(str(tmp_path / "a.zarr"), mode="r+")
    g["done"][1, 0, 1, 1] = 0
    g["done"][0, 1, 2, 0] = 0
    g["value"][1, 0, 1, :, 1] = np.nan
    again = run_audit(spec, tmp_path / "a.zarr", client=client)
    assert (again.computed, again.skipped) == (2, 14)
    np.testing.assert_array_equal(open_cube(tmp_path / "a.zarr")["value"].values,
                                  cb["value"].values)


def test_reference_dataset_form(tmp_path):
    spec = _spec([{"reference": "census", "columns": ["AFNLWGT", "AGI", "EMCONTRB"]}])
    assert spec.dataset.name == "census" and spec.raw["datasets"][0]["reference"] == "census"
    md = load_dataset(spec)
    want = load_microdata(reference_file("census"), columns=["AFNLWGT", "AGI", "EMCONTRB"])
    np.testing.assert_array_equal(md.values, want.values)
    assert md.sha256 == want.sha256


@pytest.mark.parametrize("doc, says", [
    ({"datasets": [TWO[0], TWO[0]]}, "used twice"),
    ({"datasets": []}, "non-empty list"),
    ({"datasets": TWO, "dataset": TWO[0]}, "exactly one of 'dataset'"),
    ({"datasets": [{"name": "x", "reference": "adult"}]}, "Valid references: census"),
    ({"datasets": [{"name": "x", "reference": "census", "path": "a.csv"}]}, "exactly one of"),
])
def test_dataset_spec_errors(doc, says):
    base = {"name": "t", "methods": METHODS, "metrics": ["DLD"]}
    with pytest.raises(SdcInputError, match=says):
        parse_spec({**base, **doc})


def test_changed_datasets_refuse_resume(tmp_path):
    run_audit(_spec([TWO[0]]), tmp_path / "c.zarr")
    with pytest.raises(SdcInputError, match="different spec"):
        run_audit(_spec(TWO), tmp_path / "c.zarr")
