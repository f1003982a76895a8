"""The service against an attacker and against failures: in-process, fast.

Root escapes (local://, simplecache::, http://), memory per request (wide CSV, gzip
bomb, a cheap spec), cross-site requests and foreign Host names, a full disk, a lost
cluster, an audit without workers, malformed requests, event ids, file modes, the tokens
file's mode and wrong-token rate limits.
"""

from __future__ import annotations

import gc
import gzip
import io
import json
import os
import re
import socket
import subprocess
import threading
import time
from pathlib import Path

import numpy as np
import pytest
from fastapi.testclient import TestClient

from sdcdist.errors import SdcInputError
from sdcdist.service.app import ServiceConfig, create_app
from sdcdist.service.auth import Tokens, hash_token
from sdcdist.service.jobs import JobRunner
from sdcdist.service.limits import CHECK_BYTES, Limits
from sdcdist.service.security import loopback_hosts
from sdcdist.service.store import Store

BASE = "http://127.0.0.1:8000"
SPEC = {"name": "s", "seed": 1, "methods": [{"name": "noise", "params": [0.1]}],
        "metrics": ["IL1s"]}


def _csv(rows: int = 60, cols: int = 3, seed: int = 0) -> bytes:
    rng = np.random.default_rng(seed)
    head = ",".join(f"V{j}" for j in range(cols))
    body = "\n".join(",".join(str(int(x)) for x in r)
                     for r in rng.integers(1, 90, size=(rows, cols)))
    return (head + "\n" + body + "\n").encode()


def _tokens(tmp_path: Path) -> tuple[Tokens, dict[str, str]]:
    toks = {"alice": "alice-token-" + "a" * 30, "bob": "bob-token-" + "b" * 30}
    f = tmp_path / "tokens.txt"
    f.write_text("".join(f"{w} {hash_token(t)}\n" for w, t in toks.items()))
    os.chmod(f, 0o600)
    return Tokens.load(f), toks


def _app(tmp_path: Path, *, tokens: Tokens | None = None, hosts: tuple[str, ...] = (),
         runner_client: object = "none", limits: Limits = Limits()):
    store = Store(tmp_path / "root")
    runner = None
    if runner_client != "none":
        runner = JobRunner(store, runner_client, max_running=2)
    app = create_app(ServiceConfig(root=store.root, tokens=tokens, hosts=hosts,
                                   limits=limits), runner, store)
    return app, store, runner


@pytest.fixture
def two(tmp_path):
    """A service with principals alice and bob; alice has uploaded a dataset."""
    tokens, toks = _tokens(tmp_path)
    app, store, _ = _app(tmp_path, tokens=tokens)
    c = TestClient(app, base_url=BASE)
    h = {w: {"Authorization": f"Bearer {t}"} for w, t in toks.items()}
    r = c.post("/v1/datasets", files={"file": ("people.csv", _csv())}, headers=h["alice"])
    assert r.status_code == 201, r.text
    return c, store, h, r.json()["id"]


# -- 1. no way out of the principal's data ------------------------------------------------
def test_a_spec_cannot_name_another_principals_store_by_a_url(two, tmp_path):
    c, store, h, alice_ds = two
    outside = tmp_path / "outside.zarr"
    import shutil
    shutil.copytree(store.dataset_path(alice_ds), outside)
    cases = {
        f"local://{store.root}/datasets/{alice_ds}.zarr": "'local'",
        f"simplecache::file://{outside}": "'simplecache' in a chain",
        f"file://{store.root}/datasets/{alice_ds}.zarr": "another principal",
        f"datasets/{alice_ds}.zarr": "another principal",
        f"files/alice/{alice_ds}.zarr": "another principal",
        "memory://x.zarr": "'memory'",
    }
    for path, word in cases.items():
        r = c.post("/v1/audits", json={**SPEC, "dataset": {"path": path}},
                   headers=h["bob"])
        assert r.status_code == 422, (path, r.text)
        assert word in r.json()["detail"], (path, r.json())
    assert store.audits("bob") == []
    # a file the operator placed in bob's own area is his to name
    area = store.root / "files" / "bob"
    area.mkdir(parents=True)
    (area / "mine.csv").write_bytes(_csv(seed=3))
    r = c.post("/v1/audits", json={**SPEC, "dataset": {"path": "files/bob/mine.csv"}},
               headers=h["bob"])
    assert r.status_code == 202, r.text


def test_an_http_path_makes_no_request(two):
    """SSRF: the service refuses http:// before it opens any connection."""
    c, store, h, _ = two
    hits = []
    srv = socket.socket()
    srv.bind(("127.0.0.1", 0))
    srv.listen(8)
    srv.settimeout(0.2)
    port = srv.getsockname()[1]
    stop = threading.Event()

    def accept() -> None:
        while not stop.is_set():
            try:
                conn, _ = srv.accept()
            except OSError:
                continue
            hits.append(1)
            conn.close()
    t = threading.Thread(target=accept, daemon=True)
    t.start()
    try:
        for path in (f"http://127.0.0.1:{port}/x.csv", f"https://127.0.0.1:{port}/x.zarr",
                     f"blockcache::http://127.0.0.1:{port}/x.zarr"):
            r = c.post("/v1/audits", json={**SPEC, "dataset": {"path": path}},
                       headers=h["bob"])
            assert r.status_code == 422 and "refused" in r.json()["detail"], r.text
        time.sleep(0.3)
    finally:
        stop.set()
        t.join(2)
        srv.close()
    assert hits == []


# -- 2. memory per request ------------------------------------------------------------------
def _status_kib(field: str) -> int:
    return int(re.search(rf"^{field}:\s+(\d+) kB", Path("/proc/self/status").read_text(),
                         re.M).group(1))


def _peak_growth(fn) -> tuple[object, int]:
    """(fn(), growth of this process's peak RSS over its RSS before, in bytes)."""
    gc.collect()
    try:
        Path("/proc/self/clear_refs").write_text("5")     # reset the peak (VmHWM)
    except OSError:
        pytest.skip("this system cannot reset the peak RSS (/proc/self/clear_refs)")
    before = _status_kib("VmRSS")
    out = fn()
    return out, (_status_kib("VmHWM") - before) * 1024


@pytest.fixture
def local(tmp_path):
    app, store, _ = _app(tmp_path)
    c = TestClient(app, base_url=BASE)
    c.headers["X-Sdcdist-Csrf"] = app.state.csrf
    # warm up: the libraries an upload and a submission load
    r = c.post("/v1/datasets", files={"file": ("warm.csv", _csv())})
    assert r.status_code == 201, r.text
    r = c.post("/v1/audits", json={**SPEC, "dataset": {"id": r.json()["id"]}})
    assert r.status_code == 202, r.text
    return c, store


BOUND = 48 * 2**20          # a refused request: well under the submission bound


def test_wide_csv_is_refused_while_streaming(local):
    c, store = local
    for cols in (2000, 100_000):
        head = ",".join(f"c{j}" for j in range(cols))
        data = (head + "\n" + "\n".join(",".join(str((i * 7 + j) % 10) for j in range(cols))
                                        for i in range(9)) + "\n").encode()
        r, grew = _peak_growth(lambda: c.post("/v1/datasets",
                                              files={"file": ("wide.csv", data)}))
        assert r.status_code == 413, r.text
        detail = r.json()["detail"]
        assert "columns" in detail and "--max-columns" in detail, detail
        assert cols > 2000 or "2,000 columns" in detail
        assert grew < BOUND, (cols, grew / 2**20)
    assert store.datasets("local")[-1]["name"] == "warm"


def test_a_wide_file_within_the_limit_is_ingested_in_small_chunks(local):
    c, store = local
    cols = 900
    data = _csv(rows=10, cols=cols)
    r, grew = _peak_growth(lambda: c.post("/v1/datasets", files={"file": ("w.csv", data)}))
    assert r.status_code == 201, r.text
    assert grew < 96 * 2**20, grew / 2**20         # a 65,536-row chunk would be 450 MiB


def test_gzip_bomb_is_refused_while_decompressing(local):
    c, store = local
    member = gzip.compress(b"1,2\n" * 2**18, compresslevel=9)     # 1 MiB, 262,144 rows
    bomb = gzip.compress(b"a,b\n" + b"".join(b"%d,%d\n" % (i, 7 * i % 11) for i in range(50))
                         ) + member * 48                  # 12.6 million rows
    assert len(bomb) < 200_000
    r, grew = _peak_growth(lambda: c.post("/v1/datasets",
                                          files={"file": ("bomb.csv.gz", bomb)}))
    assert r.status_code == 413, r.text
    assert "10,000,000" in r.json()["detail"] and "--max-rows" in r.json()["detail"]
    assert grew < BOUND, grew / 2**20
    # the decompressed bytes are limited too
    tiny = Limits(max_inflated=8 * 2**20)
    from sdcdist.service.limits import scan_upload
    p = store.root / "bomb.csv.gz"
    p.write_bytes(bomb)
    with pytest.raises(Exception) as e:
        scan_upload(p, tiny)
    assert e.value.status_code == 413 and "--max-inflated" in e.value.detail


def test_a_cheap_spec_costs_bounded_memory_at_submission(local):
    """295 bytes asking for 3 million synthetic records: checked by its schema, not
    generated at submission."""
    c, store = local
    spec = {**SPEC, "dataset": {"synthetic": {"rows": 3_000_000, "columns": 13}},
            "keysets": [["AGE", "HOURS"]]}
    r, grew = _peak_growth(lambda: c.post("/v1/audits", json=spec))
    assert r.status_code == 202, r.text
    assert grew < CHECK_BYTES, grew / 2**20
    # schema errors are still caught at submission
    bad = {**spec, "keysets": [["AGE", "NOPE"]]}
    r = c.post("/v1/audits", json=bad)
    assert r.status_code == 422 and "NOPE" in r.json()["detail"], r.text
    r = c.post("/v1/audits", json={**spec, "metrics": ["IL1s", "tvd"]})
    assert r.status_code == 422 and "categorical" in r.json()["detail"], r.text
    r = c.post("/v1/audits", json={**spec, "dataset": {**spec["dataset"],
                                                       "categorical": ["AGE"]}})
    assert r.status_code == 422 and "numeric columns only" in r.json()["detail"], r.text
    # past the data limit: refused before anything is made
    r = c.post("/v1/audits", json={**SPEC, "dataset": {"synthetic": {"rows": 5 * 10**7,
                                                                      "columns": 13}}})
    assert r.status_code == 413 and "--max-rows" in r.json()["detail"], r.text


# -- 3. no cross-site requests -------------------------------------------------------------
def test_cross_origin_and_foreign_host_are_refused(tmp_path):
    app, store, _ = _app(tmp_path, hosts=loopback_hosts("127.0.0.1", 8000))
    c = TestClient(app, base_url=BASE)
    evil = {"Origin": "http://evil.example"}
    # a foreign page's form posts: text/plain spec, multipart upload
    r = c.post("/v1/audits", content=b"name: x\n", headers={**evil,
                                                             "Content-Type": "text/plain"})
    assert r.status_code == 403, r.text
    r = c.post("/v1/datasets", files={"file": ("p.csv", _csv())}, headers=evil)
    assert r.status_code == 403, r.text
    r = c.post("/v1/datasets", files={"file": ("p.csv", _csv())},
               headers={"Sec-Fetch-Site": "cross-site"})
    assert r.status_code == 403, r.text
    # the same without Origin (an old browser): no CSRF token, refused
    r = c.post("/v1/datasets", files={"file": ("p.csv", _csv())})
    assert r.status_code == 403 and "X-Sdcdist-Csrf" in r.json()["detail"], r.text
    r = c.post("/v1/audits", content=b"name: x\n", headers={"Content-Type": "text/plain"})
    assert r.status_code == 403, r.text
    assert store.datasets("local") == [] and store.audits("local") == []
    # the page carries the token; with it (and same-origin headers) the upload works
    page = c.get("/")
    token = re.search(r'name="sdcdist-csrf" content="([^"]+)"', page.text).group(1)
    assert token == c.get("/v1/csrf").json()["token"]
    r = c.post("/v1/datasets", files={"file": ("p.csv", _csv())},
               headers={"X-Sdcdist-Csrf": token, "Origin": BASE,
                        "Sec-Fetch-Site": "same-origin"})
    assert r.status_code == 201, r.text
    # JSON needs a preflight a foreign page cannot pass: accepted without the token
    r = c.post("/v1/audits", json={**SPEC, "dataset": {"id": r.json()["id"]}})
    assert r.status_code == 202, r.text
    # DNS rebinding: a foreign Host gets nothing
    r = c.get("/v1/datasets", headers={"Host": "evil.example:8000"})
    assert r.status_code == 421 and "ds_" not in r.text
    assert c.get("/v1/datasets", headers={"Host": "localhost:8000"}).status_code == 200
    # headers of every answer
    r = c.get("/v1/audits")
    assert r.headers["cache-control"] == "no-store"
    assert r.headers["x-frame-options"] == "DENY"
    assert "frame-ancestors 'none'" in r.headers["content-security-policy"]
    assert page.headers["cache-control"] == "no-store"
    assert "default-src 'self'" in page.headers["content-security-policy"]


def test_bearer_mode_needs_no_csrf_token(two):
    """With tokens a forged request has no bearer token; a browser's cross-site request
    is still refused (Sec-Fetch-Site), a proxy's rewritten Host is not."""
    c, store, h, ds = two
    r = c.post("/v1/datasets", files={"file": ("q.csv", _csv())},
               headers={**h["bob"], "Origin": "https://sdc.example.org"})
    assert r.status_code == 201, r.text
    r = c.post("/v1/datasets", files={"file": ("q.csv", _csv())},
               headers={**h["bob"], "Sec-Fetch-Site": "cross-site"})
    assert r.status_code == 403


@pytest.mark.slow
def test_local_cluster_dashboard_listens_on_loopback_only():
    from sdcdist.cli._common import ClusterOptions, cluster
    with cluster(ClusterOptions(workers=1), quiet=True) as client:
        http = client.cluster.scheduler.http_server
        bound = [s.getsockname()[0] for s in http._sockets.values()]
    assert bound and all(a in ("127.0.0.1", "::1") for a in bound), bound


# -- 4. failures that must say what happened --------------------------------------------------
def _wait(fn, timeout: float = 60.0):
    t0 = time.monotonic()
    while time.monotonic() - t0 < timeout:
        got = fn()
        if got:
            return got
        time.sleep(0.05)
    raise AssertionError("timed out")


def _mount_tmpfs(where: Path, size: str) -> bool:
    where.mkdir(parents=True, exist_ok=True)
    try:
        r = subprocess.run(["mount", "-t", "tmpfs", "-o", f"size={size}", "tmpfs",
                            str(where)], capture_output=True, timeout=10)
    except (OSError, subprocess.SubprocessError):
        return False
    return r.returncode == 0


def test_full_disk_fails_the_audit_and_the_runner_lives_on(tmp_path, monkeypatch):
    import sdcdist.audit as audit_mod
    disk = tmp_path / "disk"
    mounted = _mount_tmpfs(disk, "4m")
    try:
        app, store, runner = _app(disk, runner_client=None)
        c = TestClient(app, base_url=BASE, raise_server_exceptions=False)
        filler = disk / "filler"
        doc = {**SPEC, "dataset": {"synthetic": {"rows": 200, "columns": 3}}}
        assert store.add_audit("au_full", "local", name="s", spec=doc, cells_total=1)
        if mounted:
            with open(filler, "wb") as f:       # fill the disk
                try:
                    while True:
                        f.write(b"\0" * 65536)
                        f.flush()
                except OSError:
                    pass
        else:                                   # a simulated full disk
            import errno
            import sqlite3
            real = Store._exec
            state = {"full": True}

            def exec_(self, sql, args=()):
                if state["full"] and sql.startswith("UPDATE audits SET status=?"):
                    raise sqlite3.OperationalError("database or disk is full")
                return real(self, sql, args)
            monkeypatch.setattr(Store, "_exec", exec_)

            def run_audit(*a, **k):
                raise OSError(errno.ENOSPC, "No space left on device")
            monkeypatch.setattr(audit_mod, "run_audit", run_audit)
        runner.start()
        a = _wait(lambda: (x := c.get("/v1/audits/au_full").json())["note"] and x)
        assert "disk" in a["note"] and "full" in a["note"], a
        if mounted:         # a submission while the disk is full: a clear 507, no hang
            r = c.post("/v1/audits", json=doc)
            assert r.status_code == 507 and "disk" in r.json()["detail"], r.text
        # free the space: the failure is recorded, the runner goes on with new work
        if mounted:
            filler.unlink()
        else:
            state["full"] = False
            monkeypatch.undo()
        a = _wait(lambda: (x := c.get("/v1/audits/au_full").json())["status"] == "failed"
                  and x)
        assert "disk" in a["error"] and "resume" in a["error"], a
        r = c.post("/v1/audits", json=doc)
        assert r.status_code == 202, r.text
        b = _wait(lambda: (x := c.get(f"/v1/audits/{r.json()['id']}").json())["status"]
                  in ("done", "failed") and x)
        assert b["status"] == "done", b
        runner.shutdown()
    finally:
        if mounted:
            subprocess.run(["umount", "-l", str(disk)], capture_output=True, timeout=10)


class _LostClient:
    status = "running"

    def scheduler_info(self):
        return {"workers": {"w1": {}}}


def test_lost_cluster_says_so_and_the_audit_resumes(tmp_path, monkeypatch):
    import sdcdist.audit as audit_mod
    from distributed.client import FutureCancelledError
    real = audit_mod.run_audit
    app, store, runner = _app(tmp_path, runner_client=_LostClient())
    c = TestClient(app, base_url=BASE)
    calls = []

    def lost(spec, out, **kw):
        calls.append(1)
        raise FutureCancelledError("x", "lost")
    monkeypatch.setattr(audit_mod, "run_audit", lost)
    doc = {**SPEC, "dataset": {"synthetic": {"rows": 200, "columns": 3}}}
    c.headers["X-Sdcdist-Csrf"] = app.state.csrf
    audit = c.post("/v1/audits", json=doc).json()["id"]
    runner.start()
    a = _wait(lambda: (x := c.get(f"/v1/audits/{audit}").json())["status"] == "failed"
              and x)
    assert "cluster was lost" in a["error"] and f"/v1/audits/{audit}/resume" in a["error"]
    assert "FutureCancelledError" in a["error"]
    # resumable: back in the queue, then done once the cluster works again
    monkeypatch.setattr(audit_mod, "run_audit",
                        lambda spec, out, **kw: real(spec, out, **{**kw, "client": None}))
    r = c.post(f"/v1/audits/{audit}/resume")
    assert r.status_code == 202 and r.json()["status"] == "queued", r.text
    a = _wait(lambda: (x := c.get(f"/v1/audits/{audit}").json())["status"] == "done" and x)
    assert a["runs"] == 2 and a["error"] is None
    assert c.post(f"/v1/audits/{audit}/resume").status_code == 409
    runner.shutdown()


def test_an_audit_without_workers_says_why_it_waits(tmp_path):
    class NoWorkers:
        status = "running"

        def scheduler_info(self):
            return {"workers": {}}
    app, store, runner = _app(tmp_path, runner_client=NoWorkers())
    c = TestClient(app, base_url=BASE)
    store.add_audit("au_wait", "local", name="s", spec=SPEC, cells_total=1)
    a = c.get("/v1/audits/au_wait").json()
    assert a["status"] == "queued" and "no workers" in a["note"]
    assert "no workers" in c.get("/v1/audits").json()[0]["note"]


def test_malformed_requests_are_422_not_500(two):
    c, store, h, ds = two
    bob = h["bob"]
    for path in ("files/bob/a\x00b.csv", "files/bob/" + "x" * 5000 + ".csv",
                 "files/bob/" + "y" * 300 + ".csv"):
        r = c.post("/v1/audits", json={**SPEC, "dataset": {"path": path}}, headers=bob)
        assert r.status_code == 422, (len(path), r.text)
    r = c.post("/v1/datasets", files={"file": ("z" * 300 + ".csv", _csv())}, headers=bob)
    assert r.status_code == 422 and "255" in r.json()["detail"], r.text
    r = c.post("/v1/audits", content=b"[" * 100_000 + b"]" * 100_000,
               headers={**bob, "Content-Type": "application/json"})
    assert r.status_code == 422 and "nested" in r.json()["detail"], r.text
    assert store.audits("bob") == [] and store.datasets("bob") == []


def test_event_ids_count_within_each_audit(two):
    c, store, h, ds = two
    for who, audit, n in (("alice", "au_a", 5), ("bob", "au_b", 2)):
        store.add_audit(audit, who, name="s", spec=SPEC, cells_total=n)
        store.start_run(audit, cells_done=0)
    for i in range(5):          # interleaved: the global sequence would show alice's work
        store.add_cell("au_a", 1, dataset="d", method="noise", param=0.1, replicate=i)
        if i < 2:
            store.add_cell("au_b", 1, dataset="d", method="noise", param=0.1, replicate=i)
    store.finish("au_b", "done")
    text = c.get("/v1/audits/au_b/events", headers=h["bob"]).text
    assert re.findall(r"^id: (\d+)$", text, re.M) == ["1", "2"]
    text = c.get("/v1/audits/au_b/events", headers={**h["bob"], "Last-Event-ID": "1"}).text
    assert re.findall(r"^id: (\d+)$", text, re.M) == ["2"]
    for bad in (str(2**63), "9" * 40, "-1", "abc"):
        r = c.get("/v1/audits/au_b/events", headers={**h["bob"], "Last-Event-ID": bad})
        assert r.status_code == 422, (bad, r.text)


# -- 5. files and tokens ----------------------------------------------------------------------
def test_uploads_are_private_to_the_service_user(two):
    c, store, h, ds = two
    assert os.stat(store.root).st_mode & 0o777 == 0o700
    for sub in ("datasets", "audits", "tmp", "files"):
        assert os.stat(store.root / sub).st_mode & 0o077 == 0, sub
    assert os.stat(store.root / "state.sqlite").st_mode & 0o077 == 0
    found = 0
    for dirpath, dirs, files in os.walk(store.dataset_path(ds)):
        assert os.stat(dirpath).st_mode & 0o077 == 0, dirpath
        for f in files:
            assert os.stat(os.path.join(dirpath, f)).st_mode & 0o077 == 0, f
            found += 1
    assert found


def test_a_writable_tokens_file_is_refused(tmp_path):
    f = tmp_path / "tokens.txt"
    f.write_text(f"alice {hash_token('t' * 40)}\n")
    for mode in (0o666, 0o620):
        os.chmod(f, mode)
        with pytest.raises(SdcInputError, match="chmod go-w"):
            Tokens.load(f)
    os.chmod(f, 0o644)
    assert Tokens.load(f).principals == ["alice"]


def test_wrong_tokens_are_rate_limited_per_address(two):
    c, store, h, ds = two
    codes = [c.get("/v1/datasets", headers={"Authorization": f"Bearer wrong{i}"})
             .status_code for i in range(12)]
    assert codes[:10] == [401] * 10 and codes[10:] == [429, 429], codes
    r = c.get("/v1/datasets", headers={"Authorization": "Bearer wrong"})
    assert r.status_code == 429 and int(r.headers["retry-after"]) > 0
    # another address is not blocked
    other = TestClient(c.app, base_url=BASE, client=("10.0.0.9", 5000))
    assert other.get("/v1/datasets", headers=h["bob"]).status_code == 200


def test_parse_helpers():
    from sdcdist.service.security import check_json_depth, parse_last_event_id
    check_json_depth('{"a": "[[[[[[[["}', 3)
    with pytest.raises(SdcInputError):
        check_json_depth("[[[[", 3)
    assert parse_last_event_id(None) == 0 and parse_last_event_id(" 7 ") == 7
    _ = io, json


def test_operator_allowed_url_prefixes():
    """--allow-url: object-store prefixes, per principal; never chains, local or web."""
    from sdcdist.service.security import allowed_url, check_allow_url
    pre = ("s3://bkt/{principal}/",)
    assert allowed_url("s3://bkt/alice/x.zarr", pre, "alice")
    for url in ("s3://bkt/bob/x.zarr", "s3://bkt/alice/../bob/x.zarr",
                "simplecache::s3://bkt/alice/x.zarr", "s3://bkt/alice/x.csv",
                "s3://bkt/alicex/y.zarr", "s3://bkt/alice/x.zarr?v=1", "gs://bkt/alice/x.zarr"):
        assert not allowed_url(url, pre, "alice"), url
    assert check_allow_url("s3://bkt/{principal}/")
    for bad in ("http://host/", "file:///srv/", "local:///srv/", "s3://",
                "simplecache::s3://b/"):
        with pytest.raises(SdcInputError, match="--allow-url"):
            check_allow_url(bad)
