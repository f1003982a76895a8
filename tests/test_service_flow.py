"""The routes behind the page's guided flow, in-process (FastAPI's test client): what
applies to a dataset (``/v1/datasets/{id}/applicable``, the registries' decision), the
presets (``/v1/presets``), the comparison of original and release (``/compare``) and the
release report (``/release-report``), and the one count of a cancelled audit."""

from __future__ import annotations

import json
import re
import warnings

import numpy as np
import pytest

from sdcdist.audit import parse_spec, plan_cells, run_audit
from sdcdist.data import Microdata, write_microdata
from sdcdist.service.app import ServiceConfig, create_app
from sdcdist.service.store import Store

with warnings.catch_warnings():
    warnings.simplefilter("ignore")
    from fastapi.testclient import TestClient


@pytest.fixture
def svc(tmp_path):
    store = Store(tmp_path / "root")
    app = create_app(ServiceConfig(root=tmp_path / "root"), store=store)
    with TestClient(app) as c:
        c.store = store
        csrf = c.get("/v1/csrf")
        if csrf.status_code == 200:
            c.headers["X-Sdcdist-Csrf"] = csrf.json()["token"]
        yield c


def _people(n: int = 60, seed: int = 2) -> Microdata:
    rng = np.random.default_rng(seed)
    X = np.column_stack([rng.normal(50, 10, n).round(1), rng.gamma(2, 3, n).round(3),
                         rng.integers(0, 3, n).astype(float),
                         rng.integers(0, 4, n).astype(float)])
    return Microdata(X, ("AGE", "INC", "REGION", "SEX"),
                     categories={"REGION": ["north", "south", "east"],
                                 "SEX": ["a", "b", "c", "d"]})


def _upload(c, tmp_path, md: Microdata, name: str, **form) -> str:
    path = tmp_path / f"{name}.csv"
    write_microdata(md, path)
    with path.open("rb") as f:
        r = c.post("/v1/datasets", files={"file": (path.name, f)}, data=form)
    assert r.status_code == 201, r.text
    return r.json()["id"]


def test_applicable_is_the_registries_decision(svc, tmp_path):
    from sdcdist.data import load_microdata
    from sdcdist.masking import REGISTRY as METHODS
    from sdcdist.metrics import REGISTRY as METRICS
    from sdcdist.metrics import applicable
    from sdcdist.metrics.inputs import Inputs
    rng = np.random.default_rng(0)
    numeric = _upload(svc, tmp_path, Microdata(rng.normal(size=(40, 3)), ("a", "b", "c")),
                      "num")
    mixed = _upload(svc, tmp_path, _people(), "people", categorical="REGION,SEX",
                    confidential="INC")
    r = svc.get(f"/v1/datasets/{numeric}/applicable").json()
    assert set(r["methods"]) == set(METHODS) and set(r["metrics"]) == set(METRICS)
    # all-numeric: the categorical methods and the frequency risks do not apply, and say why
    assert "categorical" in r["methods"]["pram"] and r["methods"]["noise"] is None
    assert r["methods"]["micmul"] is None and r["methods"]["ipso_a"]      # no roles
    md = load_microdata(str(svc.store.dataset_path(numeric)))
    inputs = Inputs.from_microdata(md, shape_original=md.values.shape,
                                   shape_masked=md.values.shape)
    for name in METRICS:
        why = applicable(name, inputs)
        if why is not None:
            assert r["metrics"][name] == str(why), name
    assert r["metrics"]["kviol3"] and r["metrics"]["HR_mean"]
    assert r["metrics"]["DLD"] is None and r["metrics"]["Score2"] is None
    # with categorical keys: the reasons follow the keys given, as applicable() decides
    md2 = load_microdata(str(svc.store.dataset_path(mixed)))
    for keys in (("REGION", "SEX"), ("AGE", "INC")):
        got = svc.get(f"/v1/datasets/{mixed}/applicable",
                      params={"keys": ",".join(keys)}).json()
        assert got["keys"] == list(keys)
        inputs = Inputs.from_microdata(md2, confidential=["INC"], keys=keys,
                                       shape_original=md2.values.shape,
                                       shape_masked=md2.values.shape)
        for name, m in METRICS.items():
            why = applicable(name, inputs)
            assert got["metrics"][name] == (None if why is None else str(why)) or \
                (why is None and m.requires), (keys, name)
        if keys == ("REGION", "SEX"):
            r2 = got
        else:
            r3 = got
    assert r2["methods"]["pram"] is None and r2["metrics"]["kviol3"] is None
    assert r2["metrics"]["ldiv_distinct"] is None            # INC is confidential
    assert r3["metrics"]["DLD"] is None
    assert [n for n in METRICS if (r2["metrics"][n] is None) != (r3["metrics"][n] is None)]
    # a score does not apply when a part does not (and says which)
    for name, m in METRICS.items():
        if m.requires and r["metrics"][name] is None:
            assert all(r["metrics"][p] is None for p in m.requires), name
    # bad input: 422 naming the column, 404 for another's or no dataset
    bad = svc.get(f"/v1/datasets/{mixed}/applicable", params={"keys": "AGE,NOPE"})
    assert bad.status_code == 422 and "NOPE" in bad.json()["detail"]
    assert svc.get("/v1/datasets/ds_0000000000000000/applicable").status_code == 404
    # no record value in any reason
    values = {f"{v:g}" for v in _people().values[:, :2].ravel()} - {str(i) for i in range(10)}
    text = json.dumps([r, r2, r3])
    assert not [v for v in values if re.search(rf"(?<![\w.]){re.escape(v)}(?![\w.])", text)]


def test_describe_is_sdcdist_describe(svc, tmp_path):
    from sdcdist.data import load_microdata
    from sdcdist.describe import describe
    ds = _upload(svc, tmp_path, _people(), "people", categorical="REGION,SEX")
    md = load_microdata(str(svc.store.dataset_path(ds)))
    got = svc.get(f"/v1/datasets/{ds}/describe", params={"keys": "REGION,SEX",
                                                         "top": 3}).json()
    want = describe(md, keys=["REGION", "SEX"], top=3)
    assert got["risk"]["kviol"] == want["risk"]["kviol"]
    assert got["risk"]["riskiest"] == want["risk"]["riskiest"]
    assert got["summaries"][0]["mean"] == pytest.approx(want["summaries"][0]["mean"])
    assert svc.get(f"/v1/datasets/{ds}/describe").json()["risk"]["keys"] == ["REGION", "SEX"]
    bad = svc.get(f"/v1/datasets/{ds}/describe", params={"keys": "NOPE"})
    assert bad.status_code == 422 and "NOPE" in bad.json()["detail"]


def test_presets_come_from_the_registries(svc):
    from sdcdist.masking import REGISTRY as METHODS
    from sdcdist.metrics import REGISTRY as METRICS
    got = {p["name"]: p for p in svc.get("/v1/presets").json()}
    assert list(got) == ["numeric", "categorical", "mixed", "synthetic"]
    want_acts = {"numeric": {"numeric"}, "categorical": {"categorical"},
                 "mixed": {"numeric", "categorical"}, "synthetic": {"mixed"}}
    for name, p in got.items():
        assert 1 <= len(p["methods"]) <= 4 and 1 <= len(p["metrics"]) <= 8, name
        assert {METHODS[m].acts_on for m in p["methods"]} <= want_acts[name]
        for m, vals in p["methods"].items():
            for v in vals:
                METHODS[m].check_param(v)                     # valid starting values
        assert all(m in METRICS and not METRICS[m].by_name for m in p["metrics"])
    assert got["numeric"]["metrics"] == [n for n, m in METRICS.items() if m.preferred]
    assert all(METRICS[m].categorical for m in got["categorical"]["metrics"])


@pytest.fixture(scope="module")
def audited(tmp_path_factory):
    """A finished audit in a service's store: two methods, rules on DLD and IL1s."""
    d = tmp_path_factory.mktemp("flow")
    root = d / "root"
    store = Store(root)
    write_microdata(_people(80, 5), root / "data.csv")
    doc = {"name": "flow", "seed": 3, "replicates": 2,
           "require": ["DLD <= 60"],
           "dataset": {"name": "people", "path": "data.csv", "keys": ["AGE", "INC"]},
           "methods": [{"name": "noise", "params": [0.1, 1.0]},
                       {"name": "micmul", "params": [3]}],
           "metrics": ["IL1s", "DLD", "IL_S2"]}
    spec = parse_spec(doc, base_dir=root)
    aid = "au_0000000000000001"
    store.add_audit(aid, "local", name="flow", spec=spec.raw,
                    cells_total=len(plan_cells(spec)))
    store.audit_dir(aid).mkdir(parents=True, exist_ok=True)
    run_audit(spec, store.cube_path(aid))
    store.finish(aid, "done")
    return root, aid


@pytest.fixture
def done(audited):
    root, aid = audited
    app = create_app(ServiceConfig(root=root), store=Store(root))
    with TestClient(app) as c:
        csrf = c.get("/v1/csrf")
        if csrf.status_code == 200:
            c.headers["X-Sdcdist-Csrf"] = csrf.json()["token"]
        c.root = root
        yield c, aid


@pytest.mark.slow
def test_compare_is_the_reports_figures(done):
    from sdcdist.cube import open_cube
    from sdcdist.data import load_microdata
    from sdcdist.releasereport import association_matrix
    c, aid = done
    r = c.get(f"/v1/audits/{aid}/compare", params={"method": "noise", "param": 1.0,
                                                   "replicate": 1})
    assert r.status_code == 200, r.text
    j = r.json()
    assert [x["variable"] for x in j["distributions"]] == ["AGE", "INC", "REGION", "SEX"]
    assert all(x["png"].startswith("iVBOR") for x in j["distributions"])
    from sdcdist.service.store import Store
    cube = open_cube(str(Store(c.root).cube_path(aid)))
    dld = cube["value"].sel(method="noise", param=1.0, metric="DLD").values
    fam = {x["metric"]: x for f in j["risk"] for x in f["metrics"]}
    assert fam["DLD"]["chosen"] == pytest.approx(float(dld[1]))
    assert fam["DLD"]["chosen_mean"] == pytest.approx(float(np.mean(dld)))
    # the association difference is the release's minus the original's
    from sdcdist.release import release as run_release
    out = c.root / "rel.csv"
    spec = parse_spec(json.loads(Store(c.root).audit(aid)["spec"]), base_dir=c.root)
    run_release(str(Store(c.root).cube_path(aid)), str(out), method="noise", param=1.0,
                replicate=1, spec=spec)
    orig = load_microdata(str(c.root / "data.csv"))
    rel = load_microdata(str(out))
    cat = [n in orig.categorical for n in orig.columns]
    want = association_matrix(rel.values, cat) - association_matrix(orig.values, cat)
    got = np.array([[np.nan if v is None else v for v in row]
                    for row in j["association"]["difference"]])
    np.testing.assert_allclose(got, want, atol=1e-9)
    # aggregates only: no record value in the answer
    text = json.dumps({k: v for k, v in j.items() if k not in ("distributions",
                                                              "association")})
    for v in orig.values[:5, 1]:
        assert f"{v:.6g}" not in text
    # a cell not in the cube: 422 naming it, nothing cached as an answer
    bad = c.get(f"/v1/audits/{aid}/compare", params={"method": "noise", "param": 0.7})
    assert bad.status_code == 422 and "not in the cube" in bad.json()["detail"]


@pytest.mark.slow
def test_release_report_route(done):
    c, aid = done
    q = {"method": "micmul", "param": 3, "replicate": 0}
    r = c.get(f"/v1/audits/{aid}/release-report", params={**q, "variant": "external",
                                                          "require": "IL1s <= 100"})
    assert r.status_code == 200, r.text
    assert r.headers["content-type"].startswith("text/html")
    assert "attachment" in r.headers["content-disposition"]
    text = r.text
    assert not re.search(r"https?://|<script|<link|@import|url\(", text, re.I)
    assert "no record-level content" in text and "highest individual risk" not in text
    assert "DLD &lt;= 60" in text and "IL1s &lt;= 100" in text
    for params, what in (({**q, "variant": "public"}, "variant"),
                         ({"method": "micmul", "param": 4}, "not in the cube"),
                         ({**q, "require": "DLD =< 5"}, "cannot read the rule"),
                         ({**q, "require": "kviol3 <= 1"}, "did not measure")):
        bad = c.get(f"/v1/audits/{aid}/release-report", params=params)
        assert bad.status_code == 422 and what in bad.json()["detail"], (params, bad.text)


def test_cancel_reason_has_no_second_count():
    from sdcdist.service.routes.audits import cancel_reason
    a = {"status": "running", "cells_done": 23}
    assert not re.search(r"\d+ cells", cancel_reason(a, "ann"))
