"""The service's upload and submission inputs, checked as the command line checks them:
the row and column limits on reference datasets, name lists (keys, roles, columns), the
names of datasets and audits, and the fields of an upload's form. In-process, fast."""

from __future__ import annotations

import numpy as np
import pytest
from fastapi.testclient import TestClient

from sdcdist.service.app import ServiceConfig, create_app
from sdcdist.service.limits import Limits
from sdcdist.service.store import Store

BASE = "http://127.0.0.1:8000"
SPEC = {"name": "t", "seed": 1, "methods": [{"name": "noise", "params": [0.1]}],
        "replicates": 1, "metrics": ["IL1s"]}


def _csv(rows: int = 60, cols: int = 3) -> bytes:
    rng = np.random.default_rng(0)
    head = ",".join(f"V{j}" for j in range(cols))
    body = "\n".join(",".join(str(int(x)) for x in r)
                     for r in rng.integers(1, 90, size=(rows, cols)))
    return (head + "\n" + body + "\n").encode()


def _client(tmp_path, limits: Limits = Limits()) -> tuple[TestClient, Store]:
    store = Store(tmp_path / "root")
    app = create_app(ServiceConfig(root=store.root, limits=limits), None, store)
    c = TestClient(app, base_url=BASE)
    c.headers["X-Sdcdist-Csrf"] = app.state.csrf
    return c, store


@pytest.fixture
def svc(tmp_path):
    c, store = _client(tmp_path)
    r = c.post("/v1/datasets", files={"file": ("people.csv", _csv())})
    assert r.status_code == 201, r.text
    return c, store, r.json()["id"]


def test_reference_datasets_are_held_to_the_row_and_column_limits(tmp_path):
    c, store = _client(tmp_path, Limits(max_rows=300))
    for ref in ("census", "tarragona"):            # 1,080 and 834 records
        r = c.post("/v1/audits", json={**SPEC, "dataset": {"reference": ref}})
        assert r.status_code == 413, r.text
        detail = r.json()["detail"]
        assert f"dataset {ref!r} has more than 300 records" in detail, detail
        assert "at most 300 (sdcdist serve --max-rows)" in detail, detail
    # the synthetic case says the same
    r = c.post("/v1/audits", json={**SPEC, "dataset": {"synthetic": {"rows": 1000,
                                                                      "columns": 5}}})
    assert r.status_code == 413 and "has 1,000 records" in r.json()["detail"], r.text
    c, store = _client(tmp_path / "b", Limits(max_columns=5))
    r = c.post("/v1/audits", json={**SPEC, "dataset": {"reference": "census"}})
    assert r.status_code == 413 and "--max-columns" in r.json()["detail"], r.text
    assert store.audits("local") == []
    # within the limits: accepted
    c, store = _client(tmp_path / "c", Limits(max_rows=1080))
    r = c.post("/v1/audits", json={**SPEC, "dataset": {"reference": "census"}})
    assert r.status_code == 202, r.text


@pytest.mark.parametrize("field", ["keys", "confidential", "categorical", "columns"])
def test_upload_name_lists_are_refused_empty_or_repeated(svc, field):
    c, store, _ = svc
    before = len(store.datasets("local"))
    r = c.post("/v1/datasets", files={"file": ("p.csv", _csv())}, data={field: "V1,V1"})
    assert r.status_code == 422, r.text
    assert r.json()["detail"] == (f"the {field!r} field names ['V1'] more than once; "
                                  "list each column once"), r.text
    r = c.post("/v1/datasets", files={"file": ("p.csv", _csv())}, data={field: ",,,"})
    assert r.status_code == 422, r.text
    assert r.json()["detail"].startswith(f"the {field!r} field is empty; give column names")
    assert len(store.datasets("local")) == before
    # a list in order is accepted as before
    r = c.post("/v1/datasets", files={"file": ("p.csv", _csv())}, data={field: " V0, V1"})
    assert r.status_code == 201, r.text


@pytest.mark.parametrize("field,fix", [("weight", "give the sampling-weight column"),
                                       ("household", "give the household id column"),
                                       ("keys", "give column names")])
def test_a_blank_field_of_an_upload_is_refused(svc, field, fix):
    """A text field given blank is refused (it was read as absent: a dataset stored
    without the weight or household role asked for), as --weight '' is on the command
    line; nothing is stored. The page leaves an empty field out of its form."""
    c, store, _ = svc
    before = len(store.datasets("local"))
    for blank in ("", "   "):
        r = c.post("/v1/datasets", files={"file": ("p.csv", _csv())}, data={field: blank})
        assert r.status_code == 422, r.text
        assert r.json()["detail"] == (f"The {field!r} field is empty; {fix}, or leave the "
                                      "field out."), r.text
    assert len(store.datasets("local")) == before
    r = c.post("/v1/datasets", files={"file": ("p.csv", _csv())}, data={field: " V2 "})
    assert r.status_code == 201, r.text


@pytest.mark.parametrize("route", ["describe", "applicable"])
def test_dataset_key_parameters_are_refused_empty_or_repeated(svc, route):
    c, _, ds = svc
    r = c.get(f"/v1/datasets/{ds}/{route}", params={"keys": "V1,V1"})
    assert r.status_code == 422, r.text
    assert "the 'keys' parameter names ['V1'] more than once" in r.json()["detail"]
    r = c.get(f"/v1/datasets/{ds}/{route}", params={"keys": ",,,"})
    assert r.status_code == 422 and "the 'keys' parameter is empty" in r.json()["detail"]
    r = c.get(f"/v1/datasets/{ds}/{route}", params={"keys": "V0,V1"})
    assert r.status_code == 200, r.text


@pytest.mark.parametrize("name,got", [("x" * 10_000, "10,000 bytes"),
                                      ("a\x00b", "control character"),
                                      ("line\nbreak", "control character"),
                                      ("   ", "a blank text"), ("", "an empty text")])
def test_an_upload_name_is_bounded_and_printable(svc, name, got):
    c, store, _ = svc
    before = store.datasets("local")
    r = c.post("/v1/datasets", files={"file": ("p.csv", _csv())}, data={"name": name})
    assert r.status_code == 422, r.text
    detail = r.json()["detail"]
    assert "'name' field must be a non-empty text of at most 255 bytes" in detail, detail
    assert got in detail and len(detail) < 300, detail
    assert store.datasets("local") == before
    r = c.post("/v1/datasets", files={"file": ("p.csv", _csv())}, data={"name": "é" * 127})
    assert r.status_code == 201 and r.json()["name"] == "é" * 127, r.text


@pytest.mark.parametrize("name,got", [(None, "Got None"), ("", "an empty text"),
                                      ("x" * 256, "256 bytes"), ("a\x00", "control")])
def test_an_audit_name_is_bounded_and_printable(svc, name, got):
    c, store, ds = svc
    r = c.post("/v1/audits", json={**SPEC, "name": name, "dataset": {"id": ds}})
    assert r.status_code == 422, r.text
    detail = r.json()["detail"]
    assert detail.startswith("The spec's 'name' must be a non-empty text"), detail
    assert got in detail, detail
    assert store.audits("local") == []
    r = c.post("/v1/audits", json={**SPEC, "name": 2024, "dataset": {"id": ds}})
    assert r.status_code == 202, r.text
    assert store.audits("local")[0]["name"] == "2024"


def test_upload_form_fields_are_known_and_given_once(svc):
    c, store, _ = svc
    before = store.datasets("local")
    r = c.post("/v1/datasets", files={"file": ("p.csv", _csv())}, data={"bogus": "1"})
    assert r.status_code == 422, r.text
    detail = r.json()["detail"]
    assert "unknown field(s) ['bogus']" in detail, detail
    assert "file, name, keys, confidential, columns, categorical, weight, household" \
        in detail, detail
    r = c.post("/v1/datasets", files=[("file", ("a.csv", _csv())),
                                      ("file", ("b.csv", _csv(cols=4)))])
    assert r.status_code == 422 and "['file'] more than once" in r.json()["detail"], r.text
    r = c.post("/v1/datasets", files=[("file", ("a.csv", _csv()))],
               data={"keys": ["V0", "V1"]})
    assert r.status_code == 422 and "['keys'] more than once" in r.json()["detail"], r.text
    assert store.datasets("local") == before
