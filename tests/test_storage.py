"""fsspec URLs for datasets and cubes; credentials never accepted from a spec."""

from __future__ import annotations

import importlib.util
import uuid

import numpy as np
import pytest
import yaml
from click.testing import CliRunner

from sdcdist.audit import parse_spec, run_audit
from sdcdist.cli import main
from sdcdist.cube import open_cube
from sdcdist.data import from_array, load_microdata, write_microdata
from sdcdist.errors import SdcInputError
from sdcdist.storage import check_url

SECRET = "wJalrXUtnFEMI-K7MDENG-bPxRfiCYEXAMPLEKEY"


def _doc(path: str) -> dict:
    return {"name": "t", "seed": 1, "dataset": {"name": "d", "path": path},
            "methods": [{"name": "noise", "params": [0.1, 0.2]}], "metrics": ["IL1s", "DLD"]}


@pytest.mark.parametrize("scheme", ["memory", "file"])
def test_dataset_and_cube_by_url_match_local_paths(tmp_path, small, scheme):
    md = from_array(small)
    local = tmp_path / "d.zarr"
    write_microdata(md, local)
    if scheme == "memory":
        base = f"memory://sdcdist-{uuid.uuid4().hex[:8]}"
        data_url, cube_url = f"{base}/d.zarr", f"{base}/c.zarr"
        write_microdata(md, data_url)
    else:
        data_url, cube_url = local.as_uri(), (tmp_path / "u.zarr").as_uri()
    np.testing.assert_array_equal(load_microdata(data_url).values, small)
    run_audit(parse_spec(_doc(data_url)), cube_url)
    run_audit(parse_spec(_doc(str(local))), tmp_path / "ref.zarr")
    by_url, ref = open_cube(cube_url), open_cube(tmp_path / "ref.zarr")
    np.testing.assert_array_equal(by_url["value"].values, ref["value"].values)
    assert int(by_url["done"].sum()) == 2
    res = run_audit(parse_spec(_doc(data_url)), cube_url)  # resumes from the URL
    assert res.computed == 0 and res.skipped == 2


@pytest.mark.parametrize("where", [
    {"dataset": {"storage_options": {"aws_secret_access_key": SECRET}}},
    {"dataset": {"token": SECRET}},
    {"options": {"password": SECRET}},
    {"methods": [{"name": "noise", "params": [0.1], "options": {"api_key": SECRET}}]},
])
def test_credential_like_keys_are_refused_without_echoing_them(where, tmp_path):
    doc = _doc(str(tmp_path / "x.zarr"))
    for k, v in where.items():
        doc[k] = {**doc.get(k, {}), **v} if isinstance(v, dict) else v
    with pytest.raises(SdcInputError, match="credential-like key") as ei:
        parse_spec(doc)
    assert SECRET not in str(ei.value) and "environment" in str(ei.value)


def test_urls_with_credentials_are_refused(tmp_path):
    with pytest.raises(SdcInputError, match="credentials in its URL") as ei:
        parse_spec(_doc(f"s3://AKIAEXAMPLE:{SECRET}@bucket/d.zarr"))
    assert SECRET not in str(ei.value)
    spec = tmp_path / "s.yaml"
    spec.write_text(yaml.safe_dump(_doc(str(tmp_path / "d.zarr"))))
    r = CliRunner().invoke(main, ["audit", str(spec), "--out",
                                  f"s3://u:{SECRET}@bucket/c.zarr"])
    assert r.exit_code == 2 and SECRET not in r.output and "credentials" in r.output


def test_roles_named_key_are_not_credentials(tmp_path):
    doc = _doc(str(tmp_path / "d.zarr"))
    doc["dataset"]["roles"] = {"key": ["V1"]}
    parse_spec(doc)  # 'key' the role is fine; only secret-looking names are refused


@pytest.mark.skipif(importlib.util.find_spec("s3fs") is not None, reason="s3fs is installed")
def test_cloud_scheme_without_its_library_names_the_extra():
    with pytest.raises(SdcInputError, match=r"sdcdist\[cloud\]"):
        check_url("s3://bucket/d.zarr", what="the dataset")
