"""The service's answers about data and results, in-process (FastAPI's test client):
roles on upload, the default risk-utility ranking, metric explanations, the cache of
results (and that it follows the audit's writes), cancel reasons, the offline /docs and
the OpenAPI document."""

from __future__ import annotations

import re
import warnings

import numpy as np
import pandas as pd
import pytest

from sdcdist.audit import parse_spec, run_audit
from sdcdist.data import Microdata, write_microdata
from sdcdist.data.synth import generate
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
        c.store, c.app = store, app
        csrf = c.get("/v1/csrf")            # a service that asks for a same-origin token
        if csrf.status_code == 200:
            c.headers["X-Sdcdist-Csrf"] = csrf.json()["token"]
        yield c


def _audit(c, doc: dict, *, stop_after: int | None = None) -> str:
    """An audit of the store computed here (as the runner does); ``stop_after`` cells
    and it stops, as a cancel would."""
    spec = parse_spec(doc, base_dir=c.store.root)
    from sdcdist.audit import plan_cells
    audit_id = f"au_{len(c.store.audits('local')):016d}"
    c.store.add_audit(audit_id, "local", name=spec.name, spec=spec.raw,
                      cells_total=len(plan_cells(spec)))
    _run(c, audit_id, spec, stop_after)
    return audit_id


class _Stop(Exception):
    pass


def _run(c, audit_id: str, spec, stop_after: int | None) -> None:
    run = c.store.start_run(audit_id, cells_done=c.store.audit(audit_id)["cells_done"])
    n = [0]

    def on_cell(cell):
        c.store.add_cell(audit_id, run, dataset=cell.dataset, method=cell.method,
                         param=cell.param, replicate=cell.replicate)
        n[0] += 1
        if stop_after is not None and n[0] >= stop_after:
            raise _Stop()
    c.store.audit_dir(audit_id).mkdir(parents=True, exist_ok=True)
    try:
        run_audit(spec, str(c.store.cube_path(audit_id)), on_cell=on_cell)
    except _Stop:
        c.store._exec("UPDATE audits SET status='queued' WHERE id=?", (audit_id,))
        return
    c.store.finish(audit_id, "done")


SYN = {"synthetic": {"rows": 200, "columns": 4, "seed": 3}}


def test_upload_takes_categorical_and_weight_and_lists_each_column(svc, tmp_path):
    md = generate(60, columns=3, seed=1)
    X = np.column_stack([md.values, np.arange(60) % 3, 1.0 + np.arange(60) % 5])
    csv = tmp_path / "p.csv"
    write_microdata(Microdata(X, [*md.columns, "REGION", "W"]), csv)
    with csv.open("rb") as f:
        r = svc.post("/v1/datasets", files={"file": ("p.csv", f)},
                     data={"keys": md.columns[0], "categorical": "REGION", "weight": "W",
                           "confidential": md.columns[2]})
    assert r.status_code == 201, r.text
    d = r.json()
    assert d["roles"] == {"key": [md.columns[0]], "confidential": [md.columns[2]],
                          "weight": ["W"]}
    schema = {c["name"]: c for c in d["schema"]}
    assert schema["REGION"] == {"name": "REGION", "type": "categorical", "categories": 3,
                                "roles": []}
    assert schema["W"]["type"] == "numeric" and schema["W"]["roles"] == ["weight"]
    assert schema[md.columns[0]]["roles"] == ["key"]
    assert [c["name"] for c in d["schema"]] == d["columns"]
    # the same schema when listed and read back
    assert svc.get("/v1/datasets").json()[0]["schema"] == d["schema"]
    assert svc.get(f"/v1/datasets/{d['id']}").json()["schema"] == d["schema"]
    # a weight that is not a column is refused, naming it
    with csv.open("rb") as f:
        r = svc.post("/v1/datasets", files={"file": ("p.csv", f)}, data={"weight": "NOPE"})
    assert r.status_code == 422 and "NOPE" in r.json()["detail"]


def test_upload_takes_the_household_role_and_refuses_it_as_a_key(svc, tmp_path):
    """The household id column is a role of the upload, as ``ingest --household``: it shows
    in the roles and the schema, the OpenAPI form declares it, and it is refused as a key
    (or the weight), as the CLI refuses it."""
    md = generate(60, columns=2, seed=1)
    X = np.column_stack([md.values, np.arange(60) % 3, np.arange(60) // 2,
                         1.0 + np.arange(60) % 5])
    csv = tmp_path / "h.csv"
    write_microdata(Microdata(X, [*md.columns, "REGION", "HID", "W"]), csv)
    with csv.open("rb") as f:
        r = svc.post("/v1/datasets", files={"file": ("h.csv", f)},
                     data={"keys": "REGION", "categorical": "REGION", "weight": "W",
                           "household": "HID"})
    assert r.status_code == 201, r.text
    d = r.json()
    assert d["roles"] == {"key": ["REGION"], "weight": ["W"], "household": ["HID"]}
    assert {c["name"]: c["roles"] for c in d["schema"]}["HID"] == ["household"]
    form = svc.get("/openapi.json").json()["components"]["schemas"]
    body = next(v for k, v in form.items() if k.startswith("Body_upload"))
    assert "household" in body["properties"]
    for data, why in (({"keys": "REGION,HID", "household": "HID"}, "never a linkage key"),
                      ({"weight": "W", "household": "W"}, "not a sampling weight"),
                      ({"household": "NOPE"}, "NOPE")):
        with csv.open("rb") as f:
            r = svc.post("/v1/datasets", files={"file": ("h.csv", f)}, data=data)
        assert r.status_code == 422 and why in r.json()["detail"], (data, r.text)
    assert len(svc.get("/v1/datasets").json()) == 1          # nothing half-written


def test_a_text_column_shows_as_categorical_in_the_upload_answer(svc, tmp_path):
    csv = tmp_path / "t.csv"
    rows = "\n".join(f"{i * 1.5},{(i * 7) % 11 + 0.5},{'abc'[i % 3]}" for i in range(30))
    csv.write_text("A,B,C\n" + rows + "\n")
    with csv.open("rb") as f:
        d = svc.post("/v1/datasets", files={"file": ("t.csv", f)}).json()
    assert [(c["name"], c["type"]) for c in d["schema"]] == [
        ("A", "numeric"), ("B", "numeric"), ("C", "categorical")]
    assert "'a'" not in str(d) and "abc" not in str(d)       # categories are values: counts


def test_default_ranking_is_score2_with_its_parts_explained(svc):
    au = _audit(svc, {"name": "s2", "seed": 1, "dataset": SYN,
                      "methods": [{"name": "noise", "params": [0.01, 0.2]},
                                  {"name": "micmul", "params": [3, 6]}],
                      "metrics": ["IL1s", "Score2"]})
    rep = svc.get(f"/v1/audits/{au}/report", params={"format": "json"}).json()
    assert rep["by"] == "Score2" and rep["default"] is True
    assert (rep["risk"], rep["loss"]) == ("DLD", "IL_S2")
    assert "50 % of its weight on disclosure risk" in rep["why"]
    scores = [r["Score2"] for r in rep["rows"]]
    assert scores == sorted(scores)
    units = {m["name"]: (m["unit"], m["lower_is_better"]) for m in rep["metrics"]}
    assert units["DLD"] == ("% of records", True) and units["ID1"] == ("% of values", True)
    assert set(units) == {"IL_S2", "DLD", "ID1", "ID2", "Score2"}
    assert all(m["description"] for m in rep["metrics"])
    # asking for a loss still works, but is never the default
    rep = svc.get(f"/v1/audits/{au}/report", params={"format": "json", "by": "IL1s"}).json()
    assert rep["by"] == "IL1s" and rep["default"] is False
    # the page's plot: the ranking's measures, a PNG
    png = svc.get(f"/v1/audits/{au}/plot")
    assert png.status_code == 200 and png.content[:4] == b"\x89PNG"


def test_without_a_score_the_default_is_the_balanced_rank_never_the_loss(svc):
    # the page's old default spec ranked by IL1s: noise p=0.01 came first, re-identifying
    # most records
    au = _audit(svc, {"name": "old", "seed": 1, "dataset": SYN,
                      "methods": [{"name": "noise", "params": [0.01, 0.1, 0.3]},
                                  {"name": "micmul", "params": [3, 8]}],
                      "metrics": ["IL1s", "DLD"]})
    rep = svc.get(f"/v1/audits/{au}/report", params={"format": "json"}).json()
    assert rep["by"] == "balanced" and rep["warning"] is None
    t = pd.DataFrame(rep["rows"])
    mean_rank = (t["IL1s rank"] + t["DLD rank"]) / 2
    assert np.allclose(t["balanced"], mean_rank)
    assert list(t["balanced rank"]) == sorted(t["balanced rank"])
    least_loss = t.loc[t["IL1s"].idxmin()]
    assert (least_loss["method"], least_loss["param"]) == ("noise", 0.01)
    assert least_loss["DLD rank"] == len(t)           # the riskiest: not the winner
    assert (t.iloc[0]["method"], t.iloc[0]["param"]) != ("noise", 0.01)
    csv = svc.get(f"/v1/audits/{au}/report").text
    assert csv.splitlines()[0].startswith("method,param,param_name,replicates,IL1s,DLD,"
                                          "balanced")
    # a cube with loss metrics only says that its ranking weighs one side
    au2 = _audit(svc, {"name": "loss-only", "seed": 1, "dataset": SYN,
                       "methods": [{"name": "noise", "params": [0.1]}],
                       "metrics": ["IL1s"]})
    rep = svc.get(f"/v1/audits/{au2}/report", params={"format": "json"}).json()
    assert rep["by"] == "balanced" and "no disclosure risk" in rep["warning"]


def test_results_are_cached_per_audit_state_and_follow_its_writes(svc):
    doc = {"name": "grow", "seed": 2, "dataset": SYN,
           "methods": [{"name": "noise", "params": [0.05, 0.1, 0.2]},
                       {"name": "micmul", "params": [3, 5]}],
           "metrics": ["Score2"]}
    au = _audit(svc, doc, stop_after=2)
    cache = svc.app.state.results
    q = f"/v1/audits/{au}/query"
    first = svc.get(q).json()["rows"]
    assert len(first) == 2
    misses = cache.misses
    for path in (q, q, f"/v1/audits/{au}/report?format=json", f"/v1/audits/{au}/plot"):
        assert svc.get(path).status_code == 200
    assert cache.misses == misses + 2 and cache.hits >= 2     # query once, report, plot
    # the audit writes the rest of its cells: the next answer has them
    _run(svc, au, parse_spec(doc, base_dir=svc.store.root), None)
    rows = svc.get(q).json()["rows"]
    assert len(rows) == 5 and rows != first
    assert len(svc.get(f"/v1/audits/{au}/report?format=json").json()["rows"]) == 5
    # the cached answer is the computed one
    assert svc.get(q).json()["rows"] == rows


def test_two_datasets_summary_and_a_dataset_per_table(svc):
    au = _audit(svc, {"name": "two", "seed": 1,
                      "datasets": [{"name": "a", **SYN},
                                   {"name": "b", "synthetic": {"rows": 150, "columns": 4,
                                                               "seed": 8}}],
                      "methods": [{"name": "micmul", "params": [3, 4]}],
                      "metrics": ["DLD", "IL1s"]})
    s = svc.get(f"/v1/audits/{au}/summary").json()
    assert s["datasets"] == ["a", "b"] and s["ranking"]["by"] == "balanced"
    assert {m["name"]: m["unit"] for m in s["metrics"]}["DLD"] == "% of records"
    r = svc.get(f"/v1/audits/{au}/report", params={"format": "json"})
    assert r.status_code == 422 and "choose one" in r.json()["detail"]
    a = svc.get(f"/v1/audits/{au}/report", params={"format": "json", "dataset": "a"}).json()
    b = svc.get(f"/v1/audits/{au}/report", params={"format": "json", "dataset": "b"}).json()
    assert len(a["rows"]) == len(b["rows"]) == 2 and a["rows"] != b["rows"]
    assert svc.get(f"/v1/audits/{au}/plot", params={"dataset": "b"}).status_code == 200


def test_a_cancelled_audit_says_why(svc):
    r = svc.post("/v1/audits", json={"name": "c", "dataset": SYN,
                                     "methods": [{"name": "noise", "params": [0.1]}],
                                     "metrics": ["DLD"]})
    assert r.status_code == 202
    a = svc.delete(f"/v1/audits/{r.json()['id']}").json()
    assert a["status"] == "cancelled"
    assert re.match(r"cancelled by local at \d{4}-\d\d-\d\d \d\d:\d\d:\d\dZ, before it "
                    r"started; nothing was computed", a["error"])


def test_every_metric_has_a_unit_and_the_catalogue_shows_it(svc):
    from sdcdist.metrics import REGISTRY
    assert [n for n, m in REGISTRY.items() if not m.unit] == []
    got = {m["name"]: m for m in svc.get("/v1/metrics").json()}
    assert got["RR"]["lower_is_better"] is False and got["DLD"]["unit"] == "% of records"
    noise = next(m for m in svc.get("/v1/methods").json() if m["name"] == "noise")
    assert (noise["low"], noise["high"]) == (0.001, 1.0)
    micmul = next(m for m in svc.get("/v1/methods").json() if m["name"] == "micmul")
    assert micmul["low"] == 2 and micmul["high"] is None          # n/2: no fixed bound


def test_openapi_declares_bearer_and_the_error_answers(svc):
    doc = svc.get("/openapi.json").json()
    assert doc["components"]["securitySchemes"]["bearer"] == {
        **doc["components"]["securitySchemes"]["bearer"], "type": "http", "scheme": "bearer"}
    codes = {c for ops in doc["paths"].values() for op in ops.values()
             for c in op["responses"]}
    assert {"401", "404", "409", "413", "422", "429"} <= codes
    sub = doc["paths"]["/v1/audits"]["post"]
    assert sub["security"] == [{"bearer": []}]
    assert {"401", "413", "422", "429"} <= set(sub["responses"])
    assert {"404", "409"} <= set(doc["paths"]["/v1/audits/{audit_id}/query"]["get"]
                                 ["responses"])
    assert "409" in doc["paths"]["/v1/datasets/{dataset_id}"]["delete"]["responses"]
    assert "security" not in doc["paths"]["/v1/health"]["get"]
    err = doc["paths"]["/v1/audits/{audit_id}"]["get"]["responses"]["404"]
    assert err["content"]["application/json"]["schema"] == {
        "$ref": "#/components/schemas/Error"}


def test_docs_page_works_offline(svc):
    r = svc.get("/docs")
    assert r.status_code == 200 and r.headers["content-type"].startswith("text/html")
    page = r.text
    # nothing fetched from elsewhere: no script, no external stylesheet, font or image
    assert "<script" not in page.lower()
    assert not re.search(r"""(src|href)\s*=\s*["']?(https?:)?//""", page, re.IGNORECASE)
    assert "cdn" not in page.lower()
    for path in ("/v1/datasets", "/v1/audits/{audit_id}/report", "/v1/audits/{audit_id}/plot",
                 "/v1/audits/{audit_id}/summary"):
        assert f"<code>{path}</code>" in page
    assert "Bearer" in page and "413" in page
    assert svc.get("/redoc").status_code == 404


def test_the_page_shows_an_audits_note_and_offers_resume():
    """An audit waiting without workers, or one that failed (full disk, lost cluster), is not
    shown as a bare status: the page prints the service's note and a resume button."""
    from sdcdist.service.web import PAGE
    assert "a.note" in PAGE and '"warn msg"' in PAGE
    assert re.search(r'"/resume", \{method: "POST"\}', PAGE)
    assert re.search(r'status === "failed" \|\| a\.status === "cancelled"\) \? "" : "none"', PAGE)


def test_resume_counts_against_max_audits(tmp_path):
    store = Store(tmp_path / "root")
    app = create_app(ServiceConfig(root=tmp_path / "root", max_audits=1), store=store)
    with TestClient(app) as c:
        csrf = c.get("/v1/csrf")
        if csrf.status_code == 200:
            c.headers["X-Sdcdist-Csrf"] = csrf.json()["token"]
        for a in ("au_a", "au_b"):
            assert store.add_audit(a, "local", name=a, spec={}, cells_total=1, limit=1)
            store.finish(a, "failed", "stopped")
        r = c.post("/v1/audits/au_a/resume")
        assert r.status_code == 202, r.text          # 0 active: resumed, now 1 active
        r = c.post("/v1/audits/au_b/resume")
        assert r.status_code == 429 and "at once" in r.json()["detail"], r.text
        assert store.audit("au_b")["status"] == "failed"
        store.finish("au_a", "cancelled", "by you")
        assert c.post("/v1/audits/au_b/resume").status_code == 202
        assert c.post("/v1/audits/au_b/resume").status_code == 409   # active already


def test_metric_lists_and_targets_follow_the_command_line_rules(svc):
    """An empty metric list or a metric named twice is 422, as on the command line, and so
    is a curves plot's target that is not a finite number."""
    au = _audit(svc, {"name": "m", "seed": 1, "dataset": SYN,
                      "methods": [{"name": "noise", "params": [0.1]}],
                      "metrics": ["IL1s", "DLD"]})
    for path, extra in (("report", {"by": "DLD"}), ("query", {}),
                        ("plot", {"kind": "ranks"})):
        for metrics, says in ((" , ", "metrics is empty"),
                              ("DLD,DLD", "metrics names ['DLD'] more than once")):
            r = svc.get(f"/v1/audits/{au}/{path}", params={**extra, "metrics": metrics})
            assert r.status_code == 422 and says in r.json()["detail"], (path, r.text)
        assert svc.get(f"/v1/audits/{au}/{path}",
                       params={**extra, "metrics": "DLD"}).status_code == 200
    for target in ("nan", "inf"):
        r = svc.get(f"/v1/audits/{au}/plot", params={"kind": "curves", "metric": "DLD",
                                                     "target": target})
        assert r.status_code == 422 and "target must be a finite number" in r.text, r.text


def test_report_names_an_unknown_metric_in_every_ranking_mode(svc):
    """`metrics` is checked against the cube before the table is ranked, whatever `by`
    says: a name the cube lacks is 422 naming it, never dropped."""
    au = _audit(svc, {"name": "m", "seed": 1, "dataset": SYN,
                      "methods": [{"name": "noise", "params": [0.1]}],
                      "metrics": ["IL1s", "DLD"]})
    says = "Unknown metric 'nope'. Valid metrics: DLD, IL1s."
    for extra in ({}, {"by": "balanced"}, {"by": "DLD"}):
        for metrics in ("nope", "DLD,nope"):
            for fmt in ("csv", "json"):
                r = svc.get(f"/v1/audits/{au}/report",
                            params={**extra, "metrics": metrics, "format": fmt})
                assert r.status_code == 422 and r.json()["detail"] == says, (extra, r.text)
    assert svc.get(f"/v1/audits/{au}/report",
                   params={"by": "balanced", "metrics": "DLD,IL1s"}).status_code == 200


def test_cube_filters_refuse_a_name_twice_and_an_empty_filter(svc):
    """The /cube filters follow the one rule of name lists: a name (or a param value)
    given twice, in one value or repeated, is 422 naming it, so the answer stays
    bounded; a filter that names nothing is 422."""
    au = _audit(svc, {"name": "m", "seed": 1, "dataset": SYN,
                      "methods": [{"name": "noise", "params": [0.1, 0.2]}],
                      "metrics": ["IL1s", "DLD"]})
    url = f"/v1/audits/{au}/cube"
    ok = svc.get(url, params=[("metric", "DLD"), ("param", "0.1")])
    assert ok.status_code == 200 and len(ok.json()["records"]) == 1, ok.text
    for query, says in (([("metric", "DLD")] * 3, "metric names ['DLD'] more than once"),
                        ([("metric", "DLD,IL1s"), ("metric", "IL1s")],
                         "metric names ['IL1s'] more than once"),
                        ([("method", "noise,noise")], "method names ['noise'] more than once"),
                        ([("dataset", "data")] * 2,
                         "dataset names ['data'] more than once"),
                        ([("param", "0.1"), ("param", "0.10")],
                         "param gives 0.1 more than once"),
                        ([("method", "")], "method is empty"),
                        ([("metric", ",,,")], "metric is empty"),
                        ([("dataset", " ")], "dataset is empty")):
        r = svc.get(url, params=query)
        assert r.status_code == 422 and says in r.json()["detail"], (query, r.text)
