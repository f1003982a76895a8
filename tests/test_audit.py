"""Audits: spec validation, seeded plans, bit-identical cubes, resuming after a kill,
several datasets in one cube."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time

import numpy as np
import pytest
import yaml

from sdcdist import SdcInputError
from sdcdist.audit import load_dataset, load_spec, parse_spec, plan_cells, run_audit
from sdcdist.cube import cell_table, dataset_names, done_cells, open_cube, select_dataset
from sdcdist.data import ingest, load_microdata, reference_file

BASE = {
    "name": "t", "seed": 7,
    "dataset": {"name": "toy", "synthetic": {"rows": 300, "columns": 4, "seed": 1}},
    "methods": [{"name": "noise", "params": [0.1, 0.2]}, {"name": "rankswap", "params": [5]}],
    "replicates": 2, "metrics": ["IL1s", "DLD", "ID1"],
}


def _spec(**changes):
    doc = {**BASE, **changes}
    return parse_spec(doc)


@pytest.mark.parametrize("change, match", [
    ({"methods": [{"name": "rank_swap", "params": [5]}]},
     r"Unknown masking method 'rank_swap'. Valid masking methods: .*rankswap"),
    ({"metrics": ["DLD", "IL2s"]}, r"Unknown metric 'IL2s'. Valid metrics: .*IL1s"),
    ({"methods": [{"name": "noise", "params": [5]}]},
     r"The 'p' parameter of noise must be a fraction in \[0.001, 1\]. Got 5 instead."),
    ({"methods": [{"name": "noise"}]}, r"needs 'params'"),
    ({"replicates": 0}, r"'replicates' must be an integer in \[1, 1000\]"),
    ({"colour": "blue"}, r"Unknown key\(s\) \['colour'\] in the spec"),
    ({"keysets": [["V1", []]]}, r"key set 1 must be a list of column names"),
    ({"keysets": [[]]}, r"empty key set"),
    ({"options": {"chunkrows": 5}}, r"Unknown option 'chunkrows'. Valid options: .*chunk_rows"),
])
def test_spec_errors(change, match):
    with pytest.raises(SdcInputError, match=match):
        _spec(**change)


def test_unknown_columns_are_refused(tmp_path):
    spec = _spec(keysets=[["WAGES", "SALARY"]])
    with pytest.raises(SdcInputError, match=r"Unknown key set column 'SALARY'. Valid columns"):
        run_audit(spec, str(tmp_path / "c.zarr"))
    assert not (tmp_path / "c.zarr").exists()
    with pytest.raises(SdcInputError, match="spec file .* does not exist"):
        load_spec(tmp_path / "none.yaml")


def test_plan_seeds_are_stable_and_distinct():
    cells = plan_cells(_spec())
    assert len(cells) == 2 * 2 + 1 * 2
    keys = {c.spawn_key for c in cells}
    assert len(keys) == len(cells)
    # reordering the methods does not change any cell's seed
    again = plan_cells(_spec(methods=list(reversed(BASE["methods"]))))
    assert {(c.method, c.param, c.replicate, c.spawn_key) for c in cells} == \
        {(c.method, c.param, c.replicate, c.spawn_key) for c in again}


def _values(path):
    cube = open_cube(path)
    return {k: cube[k].values for k in ("value", "keyset_value", "excluded", "flag", "done")}


def _same_bits(a, b):
    for k in a:
        assert a[k].dtype == b[k].dtype and a[k].shape == b[k].shape, k
        assert a[k].tobytes() == b[k].tobytes(), k


@pytest.fixture(scope="module")
def census_stores(tmp_path_factory):
    d = tmp_path_factory.mktemp("census")
    a, b = str(d / "c100.zarr"), str(d / "c1000.zarr")
    ingest(reference_file("census"), a, chunk_rows=100)
    ingest(reference_file("census"), b, chunk_rows=1000)
    return a, b


def test_cube_is_bit_identical_across_workers_chunks_and_modes(tmp_path, census_stores,
                                                               client):
    from distributed import Client, LocalCluster

    def spec(store, **opts):
        return parse_spec({**BASE, "dataset": {"name": "census", "path": store},
                           "methods": [{"name": "noise", "params": [0.1]},
                                       {"name": "rankswap", "params": [5, 15]}],
                           "options": opts})
    ref = tmp_path / "ref.zarr"
    res = run_audit(spec(census_stores[0]), str(ref), client=client)
    assert res.computed == res.total == 6 and res.mode == "task"
    base = _values(ref)
    assert np.isfinite(base["value"].transpose(0, 1, 3, 2)[base["done"].astype(bool)]).all()
    with LocalCluster(n_workers=1, threads_per_worker=1, processes=False,
                      dashboard_address=":0") as one, Client(one) as c1:
        run_audit(spec(census_stores[0]), str(tmp_path / "w1.zarr"), client=c1)
        _same_bits(base, _values(tmp_path / "w1.zarr"))
    run_audit(spec(census_stores[1]), str(tmp_path / "chunk.zarr"), client=client)
    _same_bits(base, _values(tmp_path / "chunk.zarr"))
    run_audit(spec(census_stores[0], cell_mode="distributed", block_rows=[97, 250]),
              str(tmp_path / "dist.zarr"), client=client)
    _same_bits(base, _values(tmp_path / "dist.zarr"))
    run_audit(spec(census_stores[1], cell_mode="distributed"), str(tmp_path / "local.zarr"))
    _same_bits(base, _values(tmp_path / "local.zarr"))


def test_cube_contents_and_resume_rules(tmp_path):
    spec = _spec()
    out = str(tmp_path / "c.zarr")
    res = run_audit(spec, out)
    cube = open_cube(out)
    assert cube["value"].dims == ("method", "param", "metric", "replicate")
    assert list(cube["metric"].values) == ["IL1s", "DLD", "ID1"]
    assert list(cube["param_name"].values) == ["p", "p"]
    # a method's missing parameter values are NaN; every done cell is filled
    v = cube.sel(method="rankswap", param=0.1, metric="DLD")["value"].values
    assert np.isnan(v).all()
    dld = cube.sel(method="noise", param=0.2, metric="DLD").mean("replicate")["value"]
    assert 0 <= float(dld) <= 100
    assert int(cube["done"].sum()) == res.total
    one = cube.sel(method="noise", param=0.1, metric="DLD", replicate=0)
    assert float(one["keyset_value"].mean()) == pytest.approx(float(one["value"]))
    assert '"conventions"' not in cube.attrs["spec"] and "DRL1" in cube.attrs["conventions"]
    again = run_audit(spec, out)
    assert again.computed == 0 and again.skipped == res.total
    with pytest.raises(SdcInputError, match="different spec \\(differences in: replicates\\)"):
        run_audit(_spec(replicates=3), out)
    assert run_audit(_spec(replicates=3), out, overwrite=True).computed == 9


def test_rank_metrics_key_sets_in_the_cube(tmp_path, client):
    from sdcdist.audit.run import mask_cell, resolve_keysets
    from sdcdist.metrics import measure
    from sdcdist.metrics.keysets import KeySets
    ds = {"name": "toy", "synthetic": {"rows": 200, "columns": 9, "seed": 3}}
    base = {"dataset": ds, "metrics": ["RR", "PDL", "DLD"], "replicates": 1,
            "methods": [{"name": "noise", "params": [0.1]}]}
    spec = _spec(**base)
    md = load_dataset(spec)
    assert isinstance(resolve_keysets(spec, md), KeySets)
    cube = open_cube(run_audit(spec, str(tmp_path / "d.zarr"), client=client).cube)
    cell = plan_cells(spec)[0]
    Xm = mask_cell(md.values, cell.method, cell.param, cell.entropy, cell.spawn_key, {})
    want = measure(md.values, Xm, ["RR", "PDL"], columns=md.columns, seed=cell.seed)
    one = cube.sel(method="noise", param=0.1, replicate=0)
    for name in ("RR", "PDL"):
        # all 9 columns as one key set; no per-key-set detail under the prefixes' labels
        assert float(one.sel(metric=name)["value"]) == want[name].value
        assert np.isnan(one.sel(metric=name)["keyset_value"].values).all()
    assert np.isfinite(one.sel(metric="DLD")["keyset_value"].values).all()
    assert "keysets_all" in cube.attrs["conventions"]
    # named key sets: every metric uses them, one value per key set
    named = _spec(**base, keysets=[["WAGES", "BUSINC"], ["INTINC", "DIVINC", "PENSION"]])
    cube = open_cube(run_audit(named, str(tmp_path / "n.zarr")).cube)
    one = cube.sel(method="noise", param=0.1, replicate=0)
    for name in ("RR", "PDL", "DLD"):
        kv = one.sel(metric=name)["keyset_value"].values
        assert np.isfinite(kv).all() and kv.shape == (2,)
        assert float(one.sel(metric=name)["value"]) == pytest.approx(kv.mean())


@pytest.mark.slow
def test_killed_audit_resumes_without_recomputing(tmp_path):
    doc = {**BASE, "dataset": {"name": "big", "synthetic": {"rows": 1000, "columns": 5,
                                                            "seed": 2}},
           "methods": [{"name": "rankswap", "params": list(range(1, 16))}],
           "replicates": 2, "metrics": ["IL1s", "DLD", "ID1"]}
    spec_path = tmp_path / "spec.yaml"
    spec_path.write_text(yaml.safe_dump(doc))
    out = tmp_path / "killed.zarr"
    proc = subprocess.Popen([sys.executable, "-m", "sdcdist.cli", "audit", str(spec_path),
                             "--out", str(out), "--workers", "1", "--no-progress"],
                            start_new_session=True, stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE)
    deadline = time.time() + 240
    done_at_kill = 0
    try:
        while time.time() < deadline:
            if (out / "done").exists():
                try:
                    done_at_kill = int(done_cells(str(out)).sum())
                except Exception:
                    done_at_kill = 0
                if done_at_kill >= 3:
                    break
            if proc.poll() is not None:
                break
            time.sleep(0.1)
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)
        proc.wait()
    assert proc.returncode == -signal.SIGKILL, proc.stderr.read().decode()[-2000:]
    done_after = int(done_cells(str(out)).sum())
    assert 3 <= done_after < 30
    res = run_audit(load_spec(spec_path), str(out))
    assert res.computed == 30 - done_after and res.skipped == done_after
    run_audit(load_spec(spec_path), str(tmp_path / "whole.zarr"))
    _same_bits(_values(out), _values(tmp_path / "whole.zarr"))


# ---------------------------------------------------------------------------
# several datasets in one audit

DS_METHODS = [{"name": "noise", "params": [0.05, 0.2]}, {"name": "rankswap", "params": [5, 15]}]


def _ds_spec(datasets=None, **extra):
    doc = {"name": "t", "seed": 11, "methods": DS_METHODS, "replicates": 2,
           "metrics": ["IL1s", "DLD", "ID1"], "keysets": "prefixes",
           "options": {"block_rows": [64, 64]}}
    if datasets is None:
        doc["dataset"] = {"name": "one", "synthetic": {"rows": 150, "columns": 3, "seed": 2}}
    else:
        doc["datasets"] = datasets
    doc.update(extra)
    return parse_spec(doc)


TWO_DATASETS = [{"name": "small", "synthetic": {"rows": 150, "columns": 3, "seed": 2}},
       {"name": "wide", "synthetic": {"rows": 120, "columns": 5, "seed": 3}}]


def test_single_dataset_cube_keeps_its_dims(tmp_path):
    res = run_audit(_ds_spec(), tmp_path / "c.zarr")
    assert res.computed == res.total == 8
    cube = open_cube(tmp_path / "c.zarr")
    assert cube["value"].dims == ("method", "param", "metric", "replicate")
    assert dataset_names(cube) == ["one"]
    v = cube.sel(method="rankswap", param=15, metric="DLD")["value"].mean("replicate")
    assert v.ndim == 0 and np.isfinite(float(v))
    raw = open_cube(tmp_path / "c.zarr", squeeze=False)
    assert raw["value"].dims[0] == "dataset" and raw.sizes["dataset"] == 1


def test_several_datasets_bit_identical_across_modes_and_resumable(tmp_path, client):
    spec = _ds_spec(TWO_DATASETS)
    assert [c.dataset for c in plan_cells(spec)].count("wide") == 8
    a = run_audit(spec, tmp_path / "a.zarr")
    b = run_audit(spec, tmp_path / "b.zarr", client=client)
    d = run_audit(_ds_spec(TWO_DATASETS, options={"block_rows": [64, 64],
                                                  "cell_mode": "distributed"}),
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
    solo = run_audit(_ds_spec([TWO_DATASETS[1]]), tmp_path / "solo.zarr")
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
    spec = _ds_spec([{"reference": "census", "columns": ["AFNLWGT", "AGI", "EMCONTRB"]}])
    assert spec.dataset.name == "census" and spec.raw["datasets"][0]["reference"] == "census"
    md = load_dataset(spec)
    want = load_microdata(reference_file("census"), columns=["AFNLWGT", "AGI", "EMCONTRB"])
    np.testing.assert_array_equal(md.values, want.values)
    assert md.sha256 == want.sha256
    # the household survey extract: numeric codes; its constant weight column left out
    cols = ["urbrur", "water", "sex", "age", "income"]
    hh = load_dataset(_ds_spec([{"reference": "household", "columns": cols}]))
    assert hh.values.shape == (4580, 5) and hh.columns == tuple(cols)


@pytest.mark.parametrize("doc, says", [
    ({"datasets": [TWO_DATASETS[0], TWO_DATASETS[0]]}, "used twice"),
    ({"datasets": []}, "non-empty list"),
    ({"datasets": TWO_DATASETS, "dataset": TWO_DATASETS[0]}, "exactly one of 'dataset'"),
    ({"datasets": [{"name": "x", "reference": "adult"}]}, "Valid references: census"),
    ({"datasets": [{"name": "x", "reference": "census", "path": "a.csv"}]}, "exactly one of"),
])
def test_dataset_spec_errors(doc, says):
    base = {"name": "t", "methods": DS_METHODS, "metrics": ["DLD"]}
    with pytest.raises(SdcInputError, match=says):
        parse_spec({**base, **doc})


def test_changed_datasets_refuse_resume(tmp_path):
    run_audit(_ds_spec([TWO_DATASETS[0]]), tmp_path / "c.zarr")
    with pytest.raises(SdcInputError, match="different spec"):
        run_audit(_ds_spec(TWO_DATASETS), tmp_path / "c.zarr")


# --------------------------------------------------------------------------- roles and leaks

def _people(tmp_path):
    rows = ["city,sex,income"] + [f"{c},{s},{i}" for i, (c, s) in enumerate(
        [("Lyon", "f"), ("Nice", "m"), ("Lyon", "m"), ("Paris", "f")] * 5)]
    (tmp_path / "p.csv").write_text("\n".join(rows) + "\n")
    return tmp_path / "p.csv"


def test_a_spec_without_the_confidential_role_its_metrics_need_is_refused_before_a_cluster(
        tmp_path):
    from sdcdist.audit.run import load_data
    _people(tmp_path)
    doc = {"name": "t", "dataset": {"path": "p.csv"}, "methods": [{"name": "pram",
                                                                   "params": [0.1]}],
           "metrics": ["ldiv_distinct"]}
    spec = parse_spec(doc, base_dir=tmp_path)
    with pytest.raises(SdcInputError, match="names none: give it a 'confidential' role"):
        load_data(spec)
    doc["dataset"]["roles"] = {"confidential": ["income"]}
    assert load_data(parse_spec(doc, base_dir=tmp_path))


def test_recode_labels_are_not_stored_in_the_cube(tmp_path):
    _people(tmp_path)
    doc = {"name": "t", "dataset": {"path": "p.csv", "categorical": ["city"]},
           "methods": [{"name": "recode", "params": [0],
                        "options": {"mapping": {"city": {"Nice": "South", "Lyon": "South"}}}}],
           "metrics": ["uniques"]}
    out = tmp_path / "c.zarr"
    run_audit(parse_spec(doc, base_dir=tmp_path), out)
    text = "".join(p.read_text(errors="ignore") for p in out.rglob("zarr.json"))
    assert "Nice" not in text and "South" not in text and "Lyon" not in text
    cube = open_cube(out)
    assert "sha256" in cube.attrs["spec"]
    run_audit(parse_spec(doc, base_dir=tmp_path), out)        # resumes: the same spec


def test_a_failed_overwrite_keeps_the_old_cube(tmp_path):
    """--overwrite of a cube with finished cells by a run whose first cell fails (noise on
    values too large for float64): the error is raised and the old cube is back, whole
    (it was deleted before the new run started); a run that succeeds replaces it."""
    rng = np.random.default_rng(0)
    ok, huge = tmp_path / "ok.csv", tmp_path / "huge.csv"
    np.savetxt(ok, rng.normal(size=(60, 2)), delimiter=",", header="A,B", comments="")
    np.savetxt(huge, rng.normal(size=(60, 2)) * [1e300, 1.0], delimiter=",", header="A,B",
               comments="")
    spec = {"name": "ow", "seed": 1, "dataset": {"name": "d", "path": str(ok)},
            "methods": [{"name": "noise", "params": [0.1]}], "metrics": ["IL1s"]}
    out = str(tmp_path / "c.zarr")
    run_audit(parse_spec(spec), out)
    before = sorted(p.relative_to(out).as_posix() for p in (tmp_path / "c.zarr").rglob("*"))
    value = cell_table(open_cube(out))["IL1s"].tolist()
    bad = {**spec, "dataset": {"name": "d", "path": str(huge)}}
    with pytest.raises(SdcInputError, match="too large in magnitude"):
        run_audit(parse_spec(bad), out, overwrite=True)
    after = sorted(p.relative_to(out).as_posix() for p in (tmp_path / "c.zarr").rglob("*"))
    assert after == before and cell_table(open_cube(out))["IL1s"].tolist() == value
    assert sorted(os.listdir(tmp_path)) == ["c.zarr", "huge.csv", "ok.csv"]
    run_audit(parse_spec({**spec, "methods": [{"name": "noise", "params": [0.2]}]}), out,
              overwrite=True)
    assert cell_table(open_cube(out)).index.get_level_values("param").tolist() == [0.2]
    assert sorted(os.listdir(tmp_path)) == ["c.zarr", "huge.csv", "ok.csv"]
