"""The audit service (``sdcdist serve``) as a real uvicorn process on 127.0.0.1, over HTTP.

One service with three principals serves most tests (module fixture); the kill
and restart test runs its own. Every response body and the service's log are
kept, and the last test searches them for values planted in the uploaded data.
"""

from __future__ import annotations

import hashlib
import json
import re
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import httpx
import numpy as np
import pytest
import yaml

from _service import ROOT, Server, hash_token, wait_done
from sdcdist.audit import parse_spec, run_audit
from sdcdist.cube import open_cube
from sdcdist.data import Microdata, write_microdata
from sdcdist.data.synth import generate

pytestmark = pytest.mark.slow

PLANTED = 86421.97531
#: the planted value in the spellings a leak would take
SPELLINGS = re.compile(r"86[,._ ]?421[.,]?97|8\.642197", re.IGNORECASE)
BODIES: list[str] = []          # every response body of the module's clients
_lock = threading.Lock()


def _keep(r: httpx.Response) -> None:
    r.read()
    ctype = r.headers.get("content-type", "")
    text = r.content.decode("latin-1") if "zip" not in ctype else ""
    with _lock:
        BODIES.append(text)


def _client(url: str, token: str | None = None) -> httpx.Client:
    return httpx.Client(base_url=url, timeout=120,
                        headers={"Authorization": f"Bearer {token}"} if token else {},
                        event_hooks={"response": [_keep]})


@pytest.fixture(scope="module")
def svc(tmp_path_factory):
    base = tmp_path_factory.mktemp("service")
    lines, tokens = [], {}
    for who in ("alice", "bob", "carol"):
        tokens[who], line = hash_token(who)
        lines.append(line)
    tokfile = base / "tokens.txt"
    tokfile.write_text("# principals of the test service\n" + "\n".join(lines) + "\n")
    server = Server(base / "root", base / "service.log", "--tokens", str(tokfile),
                    "--max-upload", "1", "--max-audits", "12", "--max-running", "4").start()
    clients = {who: _client(server.url, t) for who, t in tokens.items()}
    clients[None] = _client(server.url)
    server.tokens, server.tokfile, server.http = tokens, tokfile, clients
    yield server
    for c in clients.values():
        c.close()
    server.stop()


def _planted_csv(path: Path, rows: int = 300) -> Path:
    md = generate(rows, columns=4, seed=3)
    X = md.values.copy()
    X[17, 1] = PLANTED
    write_microdata(Microdata(X, md.columns), path)
    return path


def _demo_spec(dataset: dict) -> dict:
    doc = yaml.safe_load((ROOT / "examples" / "demo.yaml").read_text())
    doc["dataset"] = dataset
    return doc


def _state(svc: Server, who: str) -> tuple[list, list, list, list]:
    """What a refused request must not change: the principal's datasets and audits, and
    the dataset and audit folders of the root."""
    http = svc.http[who]
    return ([d["id"] for d in http.get("/v1/datasets").json()],
            [a["id"] for a in http.get("/v1/audits").json()],
            sorted(p.name for p in (svc.root / "datasets").iterdir()),
            sorted(p.name for p in (svc.root / "audits").iterdir()))


# ---------------------------------------------------------------------------

def test_demo_round_trip_equals_the_command_line(svc, run, client, tmp_path):
    """Upload the demo's data, submit the demo spec, wait: /cube holds, bit for bit, the
    values `sdcdist audit examples/demo.yaml` writes."""
    md = generate(5000, columns=8, seed=7)             # the demo's synthetic file
    csv = tmp_path / "incomes.csv"
    write_microdata(md, csv)
    alice = svc.http["alice"]
    r = alice.post("/v1/datasets", files={"file": ("incomes.csv", csv.read_bytes())})
    assert r.status_code == 201, r.text
    ds = r.json()
    assert ds["rows"] == 5000 and ds["columns"] == list(md.columns)
    assert ds["sha256"] == hashlib.sha256(csv.read_bytes()).hexdigest()
    assert alice.get(f"/v1/datasets/{ds['id']}").json()["columns"] == list(md.columns)
    r = alice.post("/v1/audits", content=yaml.safe_dump(
        _demo_spec({"id": ds["id"], "name": "incomes"})),
        headers={"Content-Type": "application/yaml"})
    assert r.status_code == 202, r.text
    audit = r.json()["id"]
    ref = tmp_path / "cli.zarr"
    res = run("audit", ROOT / "examples" / "demo.yaml", "--out", ref, "--scheduler",
              client.scheduler.address)
    assert res.exit_code == 0, res.output
    a = wait_done(alice, audit)
    assert a["status"] == "done" and a["cells_done"] == a["cells_total"] == 16, a
    recs = alice.get(f"/v1/audits/{audit}/cube").json()["records"]
    cube = open_cube(str(ref))
    done = cube["done"].values
    assert len(recs) == int(done.sum()) * cube.sizes["metric"]
    for rec in recs:
        want = float(cube.sel(method=rec["method"], param=rec["param"],
                              metric=rec["metric"], replicate=rec["replicate"])["value"].values)
        assert (rec["value"] is None and np.isnan(want)) or rec["value"] == want, rec
    # filters
    some = alice.get(f"/v1/audits/{audit}/cube",
                     params={"method": "noise", "metric": ["DLD", "IL1s"],
                             "param": 0.1}).json()["records"]
    assert len(some) == 2 * 2 and {r["metric"] for r in some} == {"DLD", "IL1s"}
    assert alice.get(f"/v1/audits/{audit}/cube", params={"metric": "XX"}).status_code == 422
    # query, report, plot as the command line
    q = alice.get(f"/v1/audits/{audit}/query",
                  params={"where": "DLD < 5", "sort": "IL1s", "top": 3}).json()["rows"]
    assert 0 < len(q) <= 3 and all(r["DLD"] < 5 for r in q)
    assert [r["IL1s"] for r in q] == sorted(r["IL1s"] for r in q)
    csv_table = alice.get(f"/v1/audits/{audit}/report", params={"by": "Score2"}).text
    assert csv_table.splitlines()[0].startswith("method,param,param_name")
    md_table = alice.get(f"/v1/audits/{audit}/report",
                         params={"by": "Score2", "format": "md"}).text
    assert md_table.startswith("| cell |")
    html = alice.get(f"/v1/audits/{audit}/report", params={"by": "Score2", "format": "html"})
    assert "<table" in html.text and html.headers["content-type"].startswith("text/html")
    for kind, extra in (("tradeoff", {}), ("curves", {"metric": "DLD"}), ("ranks", {})):
        png = alice.get(f"/v1/audits/{audit}/plot", params={"kind": kind, **extra})
        assert png.status_code == 200 and png.content[:8] == b"\x89PNG\r\n\x1a\n", kind
    # the events: one per cell, then the final status
    with alice.stream("GET", f"/v1/audits/{audit}/events") as s:
        text = "".join(s.iter_text())
    assert text.count("event: cell") == 16 and "event: status" in text
    # the remote cube, as a local one
    import sdcdist
    with sdcdist.connect(svc.url, token=svc.tokens["alice"]) as remote:
        got = remote.audit(audit).cube()
        assert np.array_equal(got["value"].values, cube["value"].values, equal_nan=True)
        assert float(got.sel(method="rankswap", param=5, metric="DLD")["value"].mean()) \
            == float(cube.sel(method="rankswap", param=5, metric="DLD")["value"].mean())


def test_catalogue_and_openapi(svc):
    alice = svc.http["alice"]
    methods = {m["name"] for m in alice.get("/v1/methods").json()}
    metrics = {m["name"] for m in alice.get("/v1/metrics").json()}
    assert {"noise", "rankswap", "micmul"} <= methods and {"DLD", "IL1s"} <= metrics
    doc = alice.get("/openapi.json").json()
    for path in ("/v1/datasets", "/v1/audits", "/v1/audits/{audit_id}/events",
                 "/v1/audits/{audit_id}/cube", "/v1/audits/{audit_id}/query",
                 "/v1/audits/{audit_id}/report", "/v1/audits/{audit_id}/plot",
                 "/v1/audits/{audit_id}/cube.zarr.zip", "/v1/audits/{audit_id}/release",
                 "/v1/methods", "/v1/metrics"):
        assert path in doc["paths"], path
    assert alice.get("/docs").status_code == 200


def test_auth(svc, tmp_path):
    """401 without (or with a wrong) token, 404 across principals; the token file holds
    hashes, not tokens."""
    anon, alice, bob = svc.http[None], svc.http["alice"], svc.http["bob"]
    for path in ("/v1/datasets", "/v1/audits", "/v1/methods"):
        assert anon.get(path).status_code == 401
    bad = _client(svc.url, "not-a-token")
    assert bad.get("/v1/datasets").status_code == 401
    bad.close()
    assert anon.post("/v1/audits", content="{}").status_code == 401
    ds = alice.post("/v1/datasets", files={"file": ("mine.csv", _planted_csv(
        tmp_path / "mine.csv").read_bytes())}).json()
    spec = {"name": "owned", "seed": 1, "dataset": {"id": ds["id"]},
            "methods": [{"name": "noise", "params": [0.1]}], "metrics": ["IL1s"]}
    audit = alice.post("/v1/audits", json=spec).json()["id"]
    for path in (f"/v1/datasets/{ds['id']}", f"/v1/audits/{audit}",
                 f"/v1/audits/{audit}/cube", f"/v1/audits/{audit}/query",
                 f"/v1/audits/{audit}/cube.zarr.zip", f"/v1/audits/{audit}/events",
                 f"/v1/audits/{audit}/release?method=noise&param=0.1"):
        assert bob.get(path).status_code == 404, path
        assert anon.get(path).status_code == 401, path
    assert bob.delete(f"/v1/audits/{audit}").status_code == 404
    assert bob.delete(f"/v1/datasets/{ds['id']}").status_code == 404
    assert ds["id"] not in [d["id"] for d in bob.get("/v1/datasets").json()]
    assert audit not in [a["id"] for a in bob.get("/v1/audits").json()]
    # bob cannot name alice's dataset in a spec, by id or by its path in the root
    r = bob.post("/v1/audits", json=spec)
    assert r.status_code == 422 and "not one of your uploads" in r.json()["detail"]
    r = bob.post("/v1/audits", json={**spec, "dataset": {"path": f"datasets/{ds['id']}.zarr"}})
    assert r.status_code == 422, r.text
    assert wait_done(alice, audit)["status"] == "done"
    # hashes, not tokens, in the file
    text = svc.tokfile.read_text()
    for who, token in svc.tokens.items():
        assert token not in text
        assert f"{who} sha256:{hashlib.sha256(token.encode()).hexdigest()}" in text


def test_token_file_forms(tmp_path):
    from sdcdist.errors import SdcInputError
    from sdcdist.service.auth import Tokens, hash_token as hashed
    f = tmp_path / "t.txt"
    f.write_text(f"ann {hashed('chosen words', method='scrypt')}\nben {hashed('x' * 40)}\n")
    t = Tokens.load(f)
    assert t.principal("chosen words") == "ann" and t.principal("x" * 40) == "ben"
    assert t.principal("chosen word") is None and t.principal("") is None
    assert "chosen words" not in f.read_text()
    f.write_text("ann plain-token\n")
    with pytest.raises(SdcInputError, match="Line 1 of --tokens"):
        Tokens.load(f)


def test_serve_refuses_an_open_non_loopback_bind(run, tmp_path):
    r = run("serve", "--root", tmp_path / "r", "--host", "0.0.0.0")
    assert r.exit_code == 2 and "--tokens" in r.output
    assert not (tmp_path / "r").exists()


def test_serve_on_port_0_names_the_port_it_answers_on_and_ctrl_c_ends_it(tmp_path):
    """--port 0 printed "service on http://127.0.0.1:0/"; the line names the port the
    system picked now. A terminal's Ctrl-C (SIGINT to the group) ends the service and its
    local cluster with one line and exit 130, no worker traceback."""
    import sys

    from _service import env
    from _signals import interrupt, kill, start
    p = start([sys.executable, "-m", "sdcdist.cli", "serve", "--root", str(tmp_path / "r"),
               "--port", "0", "--workers", "1"], env=env())
    try:
        port = None
        for _ in range(20):
            m = re.search(r"sdcdist service on http://127\.0\.0\.1:(\d+)/", p.stderr.readline())
            if m:
                port = int(m.group(1))
                break
        assert port, "no 'service on' line"
        t0 = time.monotonic()
        while True:
            try:
                assert httpx.get(f"http://127.0.0.1:{port}/v1/health", timeout=2).status_code \
                    == 200
                break
            except httpx.HTTPError:
                assert time.monotonic() - t0 < 60
                time.sleep(0.3)
        err = interrupt(p, timeout=60)
    finally:
        kill(p)
    assert p.returncode == 130, err
    assert "Traceback" not in err and err.strip().endswith("rerun the same command to resume.")


def test_bad_uploads_are_refused_and_leave_nothing(svc, tmp_path):
    alice = svc.http["alice"]
    before = _state(svc, "alice")
    X = generate(50, columns=3, seed=1).values
    header = "A,B,C"

    def csv(rows: list[str]) -> bytes:
        return (header + "\n" + "\n".join(rows) + "\n").encode()
    rows = [",".join(f"{v:.4f}" for v in r) for r in X]
    nan_rows = rows.copy()
    nan_rows[5] = f"{PLANTED},,1.5"
    cases = {
        "nan.csv": (csv(nan_rows), "missing"),
        "one.csv": (csv([f"{PLANTED},1,2"]), "record"),
        "data.xlsx": (csv(rows), "format"),
    }
    for name, (body, word) in cases.items():
        r = alice.post("/v1/datasets", files={"file": (name, body)})
        assert r.status_code == 422, (name, r.text)
        assert word in r.json()["detail"], (name, r.json())
    big = csv(rows * 1200)                  # > 1 MiB (the service's --max-upload)
    assert len(big) > 2**20
    r = alice.post("/v1/datasets", files={"file": ("big.csv", big)})
    assert r.status_code == 413, r.text
    # the same without a Content-Length (chunked): refused while it is read
    head = (b'--xyz\r\nContent-Disposition: form-data; name="file"; filename="big.csv"\r\n'
            b"Content-Type: text/csv\r\n\r\n")
    body = head + big + b"\r\n--xyz--\r\n"
    r = alice.post("/v1/datasets", content=(body[i:i + 65536]
                                            for i in range(0, len(body), 65536)),
                   headers={"Content-Type": "multipart/form-data; boundary=xyz"})
    assert r.status_code == 413 and "larger" in r.json()["detail"], r.text
    assert _state(svc, "alice") == before
    assert not list((svc.root / "tmp").iterdir())


def test_text_column_upload_follows_ingest(svc, tmp_path):
    """A text column: the service answers as `sdcdist ingest` does with the same file."""
    from sdcdist.data import ingest
    from sdcdist.errors import SdcInputError
    X = generate(40, columns=2, seed=2).values
    body = "A,B,REGION\n" + "\n".join(f"{a:.3f},{b:.3f},{'PLANTEDZEBRA' if i == 3 else 'north'}"
                                      for i, (a, b) in enumerate(X)) + "\n"
    src = tmp_path / "text.csv"
    src.write_text(body)
    try:
        ingest(src, tmp_path / "text.zarr")
        refused = None
    except SdcInputError as exc:
        refused = str(exc)
    alice = svc.http["alice"]
    before = _state(svc, "alice")
    r = alice.post("/v1/datasets", files={"file": ("text.csv", body.encode())})
    if refused is not None:
        assert r.status_code == 422 and "REGION" in r.json()["detail"]
        assert _state(svc, "alice") == before
    else:
        assert r.status_code == 201 and "REGION" in r.json()["columns"]
    assert "PLANTEDZEBRA" not in r.text


def test_bad_specs_are_refused_and_store_nothing(svc, tmp_path):
    alice = svc.http["alice"]
    outside = tmp_path / "outside.csv"
    _planted_csv(outside)
    base = {"name": "bad", "seed": 1, "dataset": {"synthetic": {"rows": 100, "columns": 3}},
            "methods": [{"name": "noise", "params": [0.1]}], "metrics": ["IL1s"]}
    before = _state(svc, "alice")
    cases = [
        ({**base, "methods": [{"name": "nosie", "params": [0.1]}]}, "Valid"),
        ({**base, "dataset": {"path": str(outside)}}, "outside"),
        ({**base, "dataset": {"path": "../" * 8 + "etc/passwd.csv"}}, "outside"),
        ({**base, "dataset": {"path": "file://" + str(outside)}}, "outside"),
        ({**base, "dataset": {"path": "s3://user:hunter2pw@bucket/x.zarr"}}, "credentials"),
        ({**base, "dataset": {"path": "state.sqlite"}}, "own files"),
        ({**base, "dataset": {"id": "ds_0000000000000000"}}, "not one of your uploads"),
        ({**base, "metrics": ["IL1s", "nope"]}, "Valid"),
    ]
    for doc, word in cases:
        r = alice.post("/v1/audits", json=doc)
        assert r.status_code == 422, (doc, r.text)
        detail = r.json()["detail"]
        assert word in detail and "hunter2pw" not in detail, detail
    r = alice.post("/v1/audits", content="methods: [a, b\n",
                   headers={"Content-Type": "application/yaml"})
    assert r.status_code == 422 and r.json()["detail"]
    r = alice.post("/v1/audits", content="name: x\n" + "# pad\n" * 200_000,
                   headers={"Content-Type": "application/yaml"})
    assert r.status_code == 413
    r = alice.post("/v1/audits", content=(b"# pad\n" * 10_000 for _ in range(40)),
                   headers={"Content-Type": "application/yaml"})
    assert r.status_code == 413
    assert _state(svc, "alice") == before


def test_unparsable_query_is_422(svc):
    alice = svc.http["alice"]
    spec = {"name": "q", "seed": 2, "dataset": {"synthetic": {"rows": 100, "columns": 3}},
            "methods": [{"name": "noise", "params": [0.1]}], "metrics": ["IL1s", "DLD"]}
    audit = alice.post("/v1/audits", json=spec).json()["id"]
    assert wait_done(alice, audit)["status"] == "done"
    for where in ("DLD <", "DLD < 5; import os", "__import__('os')", "XX < 3"):
        r = alice.get(f"/v1/audits/{audit}/query", params={"where": where})
        assert r.status_code == 422 and "filter" in r.json()["detail"] or "XX" in r.text, r.text
    assert alice.get(f"/v1/audits/{audit}/query", params={"top": "x"}).status_code == 422
    assert alice.get(f"/v1/audits/{audit}/report",
                     params={"format": "pdf"}).status_code == 422


def test_cancel(svc):
    bob = svc.http["bob"]
    spec = {"name": "long", "seed": 3, "dataset": {"synthetic": {"rows": 2000, "columns": 4}},
            "methods": [{"name": "rankswap", "params": list(range(1, 41))}],
            "replicates": 2, "metrics": ["IL1s", "DLD"]}
    audit = bob.post("/v1/audits", json=spec).json()["id"]
    r = bob.delete(f"/v1/audits/{audit}")
    assert r.status_code == 200 and r.json()["status"] == "cancelled"
    time.sleep(1.0)
    a = bob.get(f"/v1/audits/{audit}").json()
    assert a["status"] == "cancelled" and a["cells_done"] < a["cells_total"]


def test_30_concurrent_submissions_from_3_principals(svc):
    """All finish, each in its principal's list, each with the values of its own spec."""
    def spec(who: str, i: int) -> dict:
        return {"name": f"{who}-{i}", "seed": 100 + i + 1000 * ord(who[0]),
                "dataset": {"name": "tiny", "synthetic": {"rows": 120, "columns": 3,
                                                            "seed": i}},
                "methods": [{"name": "noise", "params": [0.1]}], "metrics": ["IL1s"]}
    jobs = [(who, i) for i in range(10) for who in ("alice", "bob", "carol")]
    with ThreadPoolExecutor(30) as pool:
        ids = list(pool.map(lambda j: (j, svc.http[j[0]].post("/v1/audits",
                                                              json=spec(*j))), jobs))
    for (who, i), r in ids:
        assert r.status_code == 202, r.text
    got = {}
    for (who, i), r in ids:
        a = wait_done(svc.http[who], r.json()["id"])
        assert a["status"] == "done" and a["name"] == f"{who}-{i}", a
        got[who, i] = svc.http[who].get(f"/v1/audits/{a['id']}/cube").json()["records"]
    for who in ("alice", "bob", "carol"):
        names = [a["name"] for a in svc.http[who].get("/v1/audits").json()]
        assert sorted(n for n in names if n.startswith(who + "-")) == \
            sorted(f"{who}-{i}" for i in range(10))
        assert not [n for n in names if "-" in n and n.split("-")[0] in
                    {"alice", "bob", "carol"} - {who}]
    for (who, i), recs in got.items():       # each cube is its own spec's, computed here
        res = run_audit(parse_spec(spec(who, i)), svc.root.parent / f"ref-{who}-{i}.zarr")
        want = open_cube(res.cube)["value"].values.ravel()
        assert [r["value"] for r in recs] == [float(v) for v in want], (who, i)


def test_python_client(svc, tmp_path):
    """sdcdist.connect: upload, submit (the spec's dataset replaced by the upload), wait,
    query, cube; the service's refusals as Python exceptions."""
    import sdcdist
    from sdcdist.errors import SdcInputError
    spec = tmp_path / "spec.yaml"
    spec.write_text("name: client\nseed: 4\ndataset: {name: people, reference: census}\n"
                    "methods: [{name: micmul, params: [3, 4]}]\nmetrics: [IL1s, DLD]\n")
    with sdcdist.connect(svc.url, token=svc.tokens["carol"]) as c:
        ds = c.upload(_planted_csv(tmp_path / "people.csv"), keys=["WAGES", "BUSINC"])
        assert ds["roles"] == {"key": ["WAGES", "BUSINC"]}
        audit = c.submit(spec, dataset=ds)
        final = audit.wait(progress=False, timeout=240)
        assert final["status"] == "done" and final["cells_done"] == 2
        t = audit.query("DLD >= 0", sort="IL1s")
        assert list(t.index.get_level_values("method")) == ["micmul", "micmul"]
        cube = audit.cube(cache=tmp_path / "cache")
        local = open_cube(str(svc.root / "audits" / audit.id / "cube.zarr"))
        assert np.array_equal(cube["value"].values, local["value"].values, equal_nan=True)
        assert cube.attrs["spec_sha256"] == local.attrs["spec_sha256"]
        assert "IL1s" in audit.report(by="IL1s", format="md")
        # no score measured: the default ranking balances the risk and the loss ranks
        assert "balanced" in audit.report().splitlines()[0]
        assert audit.summary()["ranking"]["by"] == "balanced"
        # roles on upload: categorical and weight, each column's type in the answer
        md = generate(50, columns=2, seed=5)
        write_microdata(Microdata(np.column_stack([md.values, np.arange(50) % 3,
                                                   1 + np.arange(50) % 4]),
                                  [*md.columns, "REGION", "W"]), tmp_path / "typed.csv")
        ds2 = c.upload(tmp_path / "typed.csv", keys="WAGES", categorical=["REGION"],
                       weight="W")
        assert ds2["roles"] == {"key": ["WAGES"], "weight": ["W"]}
        types = {col["name"]: col["type"] for col in ds2["schema"]}
        assert types["REGION"] == "categorical" and types["WAGES"] == "numeric"
        with pytest.raises(SdcInputError, match="nosie"):
            c.submit({"name": "x", "dataset": {"id": ds["id"]},
                      "methods": [{"name": "nosie", "params": [1]}], "metrics": ["IL1s"]})
    with sdcdist.connect(svc.url, token=svc.tokens["bob"]) as other:
        with pytest.raises(LookupError):
            other.audit(audit.id).status()
    with sdcdist.connect(svc.url, token="wrong") as bad, pytest.raises(PermissionError):
        bad.datasets()


def test_no_response_or_log_line_holds_a_planted_value(svc):
    """Runs last: every body this module received, and the service's log."""
    assert BODIES, "no response was recorded"
    for text in BODIES:
        assert not SPELLINGS.search(text), text[:300]
        assert "PLANTEDZEBRA" not in text
    log = svc.log.read_text(errors="replace")
    assert "audit finished" in log and "dataset uploaded" in log   # the log is the real one
    assert not SPELLINGS.search(log) and "PLANTEDZEBRA" not in log
    for token in svc.tokens.values():
        assert token not in log
