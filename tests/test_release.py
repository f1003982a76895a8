"""The release: a cell's masked file regenerated from the cube, equal byte for byte to
`sdcdist mask` with the cell's seed, checked against the fingerprint the audit recorded,
refused (exit 2 / 422, nothing written) for cells not in the cube, tampered cubes, other
data or a file that does not match; the chunked writer."""

from __future__ import annotations

import json
import warnings

import numpy as np
import pytest

from sdcdist import integrity
from sdcdist.audit import parse_spec, run_audit
from sdcdist.cube import masked_fingerprint, open_group, release_fingerprint
from sdcdist.data import Microdata, write_microdata
from sdcdist.data.io import write_table_file


def _data(path, n=150, seed=5):
    rng = np.random.default_rng(seed)
    X = np.column_stack([rng.normal(50, 10, n).round(1), rng.gamma(2, 3, n),
                         rng.integers(0, 3, n).astype(float)])
    X[4, 2] = np.nan                               # a missing category
    write_microdata(Microdata(X, ("AGE", "INC", "REGION"),
                              categories={"REGION": ["north", "south", "east"]}), path)
    return X


SPEC = {"name": "rel", "seed": 11, "replicates": 2,
        "methods": [{"name": "noise", "params": [0.1, 0.5]},
                    {"name": "micmul", "params": [3]}],
        "metrics": ["IL1s"]}


@pytest.fixture(scope="module")
def audited(tmp_path_factory):
    d = tmp_path_factory.mktemp("rel")
    _data(d / "data.csv")
    spec = parse_spec({**SPEC, "dataset": {"name": "people", "path": "data.csv"}}, base_dir=d)
    (d / "spec.yaml").write_text(json.dumps({**SPEC, "dataset": {"name": "people",
                                                                  "path": "data.csv"}}))
    run_audit(spec, d / "cube.zarr")
    return d


def test_audit_records_fingerprints_and_verifies(audited, run):
    g = open_group(str(audited / "cube.zarr"), "r")
    fps = np.asarray(g[integrity.RELEASE_FINGERPRINTS][...])
    done = np.asarray(g["done"][...])
    assert (fps.any(axis=-1) == (done == 1)).all()       # every done cell, nothing else
    assert len({bytes(f) for f in fps[done == 1]}) == int((done == 1).sum())
    r = run("verify", audited / "cube.zarr")
    assert r.exit_code == 0, r.output


@pytest.mark.parametrize("ext", ["csv", "parquet"])
def test_release_equals_mask_byte_for_byte(audited, run, tmp_path, monkeypatch, ext):
    monkeypatch.chdir(audited)
    out = tmp_path / f"release.{ext}"
    r = run("release", "cube.zarr", "--method", "noise", "--param", "0.5", "--replicate", "1",
            "--out", out, "--json")
    assert r.exit_code == 0, r.output
    info = json.loads(r.output)
    masked = tmp_path / f"mask.{ext}"
    r = run("mask", "data.csv", "--method", "noise", "--param", "0.5", "--seed", info["seed"],
            "--spawn-key", ",".join(map(str, info["spawn_key"])), "--out", masked)
    assert r.exit_code == 0, r.output
    assert out.read_bytes() == masked.read_bytes()
    if ext == "csv":
        text = out.read_text().splitlines()
        assert text[0] == "AGE,INC,REGION" and text[5].endswith(",")   # missing category
        assert {t.rsplit(",", 1)[1] for t in text[1:]} <= {"north", "south", "east", ""}
        # another replicate is another file
        other = tmp_path / "r0.csv"
        assert run("release", "cube.zarr", "-m", "noise", "-p", "0.5", "-r", "0",
                   "--out", other).exit_code == 0
        assert other.read_bytes() != out.read_bytes()
        # a deterministic method with an integer parameter
        a, b = tmp_path / "mic.csv", tmp_path / "mic_mask.csv"
        r = run("release", "cube.zarr", "-m", "micmul", "-p", "3", "--out", a, "--json")
        info = json.loads(r.output)
        assert run("mask", "data.csv", "-m", "micmul", "-p", "3", "--seed", info["seed"],
                   "--spawn-key", ",".join(map(str, info["spawn_key"])),
                   "--out", b).exit_code == 0
        assert a.read_bytes() == b.read_bytes()
        # and the recorded fingerprint is that of the released values
        from sdcdist.data import load_microdata
        back = load_microdata(out).values           # categories coded as the audit's
        g = open_group(str(audited / "cube.zarr"), "r")
        m = [str(x) for x in g["method"][:]].index("noise")
        p = [float(x) for x in g["param"][:]].index(0.5)
        assert masked_fingerprint(back) == release_fingerprint(g, 0, m, p, 1)


def _refused(run, args, out, code=2):
    r = run("release", *args, "--out", out)
    assert r.exit_code == code, r.output
    assert not out.exists() and not list(out.parent.glob(f".{out.name}.tmp*"))
    return r.output


def test_bad_releases_write_nothing(audited, run, tmp_path, monkeypatch):
    monkeypatch.chdir(audited)
    out = tmp_path / "x.csv"
    assert "has no method 'rankswap'" in _refused(run, ["cube.zarr", "-m", "rankswap", "-p",
                                                        "3"], out)
    assert "no param value 0.3" in _refused(run, ["cube.zarr", "-m", "noise", "-p", "0.3"], out)
    # micmul is deterministic: replicate 1 was never run; the grid's 0.1 is not micmul's
    msg = _refused(run, ["cube.zarr", "-m", "micmul", "-p", "3", "-r", "1"], out)
    assert "not a finished cell" in msg and "micmul 3 replicate 0" in msg
    assert "not a finished cell" in _refused(run, ["cube.zarr", "-m", "micmul", "-p",
                                                   "0.1"], out)
    assert "not a finished cell" in _refused(run, ["cube.zarr", "-m", "noise", "-p",
                                                   "0.1", "-r", "2"], out)
    assert ".csv or .parquet" in _refused(run, ["cube.zarr", "-m", "noise", "-p", "0.1"],
                                          tmp_path / "x.zarr")
    # other data under the spec's path
    spec = audited / "other.yaml"
    _data(audited / "other.csv", seed=6)
    doc = {**SPEC, "dataset": {"name": "people", "path": "other.csv"}}
    spec.write_text(json.dumps(doc))
    assert "not the one that made the cube" in _refused(
        run, ["cube.zarr", "-m", "noise", "-p", "0.1", "--spec", spec], out)


def test_tampered_and_mismatching_fingerprints(audited, run, tmp_path, monkeypatch):
    import shutil
    cube = tmp_path / "cube.zarr"
    shutil.copytree(audited / "cube.zarr", cube)
    monkeypatch.chdir(audited)
    g = open_group(str(cube))
    m = [str(x) for x in g["method"][:]].index("noise")
    p = [float(x) for x in g["param"][:]].index(0.1)
    fp = g[integrity.RELEASE_FINGERPRINTS]
    fp[0, m, p, 0] = np.asarray(fp[0, m, p, 0]) ^ np.uint8(1)
    out = tmp_path / "x.csv"
    # a changed fingerprint breaks the cell's digest: a tampered cube (as verify says)
    assert "fingerprint mismatch" in _refused(run, [cube, "-m", "noise", "-p", "0.1"], out,
                                              code=1)
    assert run("verify", cube).exit_code == 1
    # re-signed (as if another machine had computed other numbers): the regenerated file
    # does not match and nothing is written
    dig = g[integrity.CELL_DIGESTS]
    dig[0, m, p, 0] = np.frombuffer(integrity.cell_sha256(g, (0, m, p, 0)), np.uint8)
    msg = _refused(run, [cube, "-m", "noise", "-p", "0.1"], out)
    assert "is not the one the audit measured" in msg
    # the other cells still release
    assert run("release", cube, "-m", "noise", "-p", "0.1", "-r", "1", "--out",
               out).exit_code == 0


def test_chunked_writer_same_bytes(tmp_path):
    rng = np.random.default_rng(0)
    X = np.column_stack([rng.normal(size=1000), rng.integers(0, 4, 1000).astype(float)])
    X[::7, 1] = np.nan
    cats = {"C": ["a", "b", "c", "d"]}
    write_table_file(X, ("x", "C"), cats, tmp_path / "one.csv", chunk_rows=10_000)
    write_table_file(X, ("x", "C"), cats, tmp_path / "many.csv", chunk_rows=37)
    assert (tmp_path / "one.csv").read_bytes() == (tmp_path / "many.csv").read_bytes()
    import pandas as pd
    old = pd.DataFrame(X, columns=["x", "C"])
    old["C"] = pd.Categorical.from_codes(np.where(np.isnan(X[:, 1]), -1, X[:, 1])
                                         .astype(int), categories=cats["C"])
    old.to_csv(tmp_path / "whole.csv", index=False, float_format="%.17g")
    assert (tmp_path / "whole.csv").read_bytes() == (tmp_path / "one.csv").read_bytes()
    write_table_file(X, ("x", "C"), cats, tmp_path / "many.parquet", chunk_rows=37)
    back = pd.read_parquet(tmp_path / "many.parquet")
    pd.testing.assert_frame_equal(back, old)


def test_service_release(audited, tmp_path):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        from fastapi.testclient import TestClient
    from sdcdist.service.app import ServiceConfig, create_app
    from sdcdist.service.store import Store
    import shutil
    root = tmp_path / "root"
    store = Store(root)
    shutil.copy(audited / "data.csv", root / "data.csv")
    # the audit's own spec (the service reads its data paths under its root)
    spec = parse_spec({**SPEC, "dataset": {"name": "people", "path": "data.csv"}},
                      base_dir=root)
    app = create_app(ServiceConfig(root=root), store=store)
    with TestClient(app) as c:
        csrf = c.get("/v1/csrf")
        if csrf.status_code == 200:
            c.headers["X-Sdcdist-Csrf"] = csrf.json()["token"]
        aid = "au_0000000000000001"
        store.add_audit(aid, "local", name="rel", spec=spec.raw, cells_total=5)
        store.audit_dir(aid).mkdir(parents=True, exist_ok=True)
        shutil.copytree(audited / "cube.zarr", store.cube_path(aid))
        store.finish(aid, "done")
        r = c.get(f"/v1/audits/{aid}/release", params={"method": "noise", "param": 0.5,
                                                      "replicate": 1})
        assert r.status_code == 200, r.text
        cli = tmp_path / "cli.csv"
        from sdcdist.release import release
        rel = release(str(audited / "cube.zarr"), str(cli), method="noise", param=0.5,
                      replicate=1, spec=parse_spec(
                          {**SPEC, "dataset": {"name": "people", "path": "data.csv"}},
                          base_dir=audited))
        assert r.content == cli.read_bytes()
        assert r.headers["x-sdcdist-fingerprint"] == rel.fingerprint
        for q in ({"method": "rankswap", "param": 3}, {"method": "noise", "param": 0.5,
                                                     "replicate": 5},
                  {"method": "noise", "param": 0.5, "format": "zarr"}):
            r = c.get(f"/v1/audits/{aid}/release", params=q)
            assert r.status_code == 422, r.text
        assert not [f for f in (root / "tmp").glob("*") if "release" in f.name]
        # the report with rules: acceptability and the recommendation
        r = c.get(f"/v1/audits/{aid}/report", params={"by": "IL1s", "format": "json",
                                                     "require": ["IL1s <= 1e9"]})
        assert r.status_code == 200, r.text
        body = r.json()
        assert body["recommendation"]["rules"] == ["IL1s <= 1e+09"]
        assert all(row["acceptable"] == "yes" for row in body["rows"])
        assert body["recommendation"]["recommended"]["method"] == body["rows"][0]["method"]
        for bad in ("DLD <= 5", "IL1s =< 3"):
            r = c.get(f"/v1/audits/{aid}/report", params={"by": "IL1s", "require": [bad]})
            assert r.status_code == 422, r.text
        r = c.get("/v1/audits/au_0000000000000002/release",
                  params={"method": "noise", "param": 0.5})
        assert r.status_code == 404
        # a tampered fingerprint: 422 (the cube does not verify); re-signed: 422 (the file
        # does not match); nothing left behind
        g = open_group(str(store.cube_path(aid)))
        fp = g[integrity.RELEASE_FINGERPRINTS]
        fp[0, 0, 0, 0] = np.asarray(fp[0, 0, 0, 0]) ^ np.uint8(1)
        q = {"method": "noise", "param": 0.1}
        r = c.get(f"/v1/audits/{aid}/release", params=q)
        assert r.status_code == 422 and "fingerprint mismatch" in r.text, r.text
        g[integrity.CELL_DIGESTS][0, 0, 0, 0] = np.frombuffer(
            integrity.cell_sha256(g, (0, 0, 0, 0)), np.uint8)
        r = c.get(f"/v1/audits/{aid}/release", params=q)
        assert r.status_code == 422 and "not the one the audit measured" in r.text, r.text
        assert not [f for f in (root / "tmp").glob("*") if "release" in f.name]


def test_spread_cells_record_the_same_fingerprints(audited, client, tmp_path):
    """A cell whose tasks spread over a cluster records the fingerprint a whole-cell task
    records (the same masked file)."""
    doc = {**SPEC, "dataset": {"name": "people", "path": "data.csv"},
           "options": {"cell_mode": "distributed"}}
    run_audit(parse_spec(doc, base_dir=audited), tmp_path / "spread.zarr", client=client)
    a = np.asarray(open_group(str(audited / "cube.zarr"), "r")
                   [integrity.RELEASE_FINGERPRINTS][...])
    b = np.asarray(open_group(str(tmp_path / "spread.zarr"), "r")
                   [integrity.RELEASE_FINGERPRINTS][...])
    assert a.any() and (a == b).all()
