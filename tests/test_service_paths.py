"""The service's second look: every spec field that names data is resolved and checked, the
wrong-token limiter, and spec parsing (duplicate JSON keys, YAML tags). In-process, fast.

The fields are read from the spec's schema (:data:`sdcdist.audit.spec.DATA_FIELDS`), so a
field added later is tested here without an edit.
"""

from __future__ import annotations

import asyncio
import json
import socket
import threading
import time
from dataclasses import fields
from pathlib import Path

import httpx
import pytest
import uvicorn
from fastapi.testclient import TestClient

from sdcdist.audit.spec import _SOURCES, DATA_FIELDS, DatasetSpec, parse_spec
from sdcdist.errors import SdcInputError
from sdcdist.service.security import FailureLimiter, client_key

from test_service_security import BASE, SPEC, _app, _csv, _tokens, two  # noqa: F401

HOLDOUT_SPEC = {**SPEC, "metrics": ["IL1s", "dcr_holdout_median"]}
SECRET_COLUMN = "ZZSECRETCOLUMN"


# -- the schema says which fields name data -------------------------------------------------
def test_data_fields_are_read_from_the_schema():
    declared = {f.name: f.metadata.get("names_data") for f in fields(DatasetSpec)}
    assert None not in declared.values(), declared         # every field says
    assert DATA_FIELDS == {k for k, v in declared.items() if v}
    assert {"path", "holdout"} <= DATA_FIELDS


# -- every field that names data, every way out ------------------------------------------------
class _Listener:
    """A loopback TCP listener thread that counts the connections it gets."""

    def __init__(self) -> None:
        self.hits = 0
        self.sock = socket.socket()
        self.sock.bind(("127.0.0.1", 0))
        self.sock.listen(16)
        self.sock.settimeout(0.1)
        self.port = self.sock.getsockname()[1]
        self.stop = threading.Event()
        self.thread = threading.Thread(target=self._run, daemon=True)
        self.thread.start()

    def _run(self) -> None:
        while not self.stop.is_set():
            try:
                conn, _ = self.sock.accept()
            except OSError:
                continue
            self.hits += 1
            conn.close()

    def close(self) -> None:
        self.stop.set()
        self.thread.join(2)
        self.sock.close()


def _dataset_with(field: str, value: object, own_id: str) -> dict:
    """A dataset mapping that names ``value`` in ``field`` (beside bob's own upload, unless
    the field is itself the source)."""
    return {field: value} if field in _SOURCES else {"id": own_id, field: value}


def test_every_data_field_is_checked(two, tmp_path):
    c, store, h, alice_ds = two
    bob = h["bob"]
    r = c.post("/v1/datasets", files={"file": ("mine.csv", _csv(seed=2))}, headers=bob)
    assert r.status_code == 201, r.text
    bob_ds = r.json()["id"]
    outside = tmp_path / "outside.csv"
    outside.write_text(f"{SECRET_COLUMN},V1,V2\n" + "\n".join(
        f"{i},{i * 2 % 7},{i * 3 % 11}" for i in range(40)) + "\n")
    listener = _Listener()
    url = f"http://127.0.0.1:{listener.port}/h.csv"
    cases = {
        "another principal's upload (path)": f"datasets/{alice_ds}.zarr",
        "another principal's upload (id)": {"id": alice_ds},
        "another principal's area": f"files/alice/{alice_ds}.zarr",
        "outside the root (relative)": "../outside.csv",
        "outside the root (absolute)": str(outside),
        "local://": f"local://{outside}",
        "file:// outside": f"file://{outside}",
        "simplecache::": f"simplecache::file://{outside}",
        "simplecache:: over http": f"simplecache::{url}",
        "http:// loopback": url,
        "https:// loopback": f"https://127.0.0.1:{listener.port}/h.zarr",
        "/etc/passwd": "/etc/passwd",
        "not a text": ["../outside.csv"],
        "null": None,
    }
    try:
        for field in sorted(DATA_FIELDS):
            for case, value in cases.items():
                one = _dataset_with(field, value, bob_ds)
                for form in ({"dataset": one},
                             {"datasets": [{"id": bob_ds, "name": "a"}, {**one, "name": "b"}]}):
                    r = c.post("/v1/audits", json={**HOLDOUT_SPEC, **form}, headers=bob)
                    assert r.status_code == 422, (field, case, r.text)
                    detail = r.json()["detail"]
                    assert f".{field}" in detail, (field, case, detail)
                    for leak in (str(tmp_path), str(store.root), SECRET_COLUMN, "root:x:"):
                        assert leak not in detail, (field, case, detail)
        time.sleep(0.2)
    finally:
        listener.close()
    assert listener.hits == 0
    assert store.audits("bob") == []


def test_own_data_may_be_named_in_every_data_field(two):
    """The checks refuse only what is not the principal's: an upload of bob's (by id) and
    a file under files/bob/ are accepted in every field that names data."""
    c, store, h, _ = two
    bob = h["bob"]
    ids = []
    for seed in (4, 5):
        r = c.post("/v1/datasets", files={"file": ("m.csv", _csv(seed=seed))},
                   data={"categorical": "V0"}, headers=bob)
        assert r.status_code == 201, r.text
        ids.append(r.json()["id"])
    area = store.root / "files" / "bob"
    area.mkdir(parents=True)
    (area / "mine.csv").write_bytes(_csv(seed=6))
    for field in sorted(DATA_FIELDS):
        for value in ({"id": ids[1]}, "files/bob/mine.csv"):
            ds = _dataset_with(field, value, ids[0])
            doc = HOLDOUT_SPEC if "holdout" in ds else SPEC
            ds = {**ds, "categorical": ["V0"]} if "holdout" in ds else ds
            r = c.post("/v1/audits", json={**doc, "dataset": ds}, headers=bob)
            assert r.status_code == 202, (field, value, r.text)
    r = c.post("/v1/audits", json={**HOLDOUT_SPEC, "dataset": {
        "id": ids[0], "holdout": {"id": ids[1]}, "categorical": ["V0"]}}, headers=bob)
    spec = json.loads(store.audit(r.json()["id"], "bob")["spec"])
    assert spec["dataset"]["path"] == f"datasets/{ids[0]}.zarr"
    assert spec["dataset"]["holdout"] == f"datasets/{ids[1]}.zarr"


def test_a_holdout_no_metric_needs_is_never_opened_but_must_exist(tmp_path):
    from sdcdist.audit.run import load_data, load_holdouts
    (tmp_path / "d.csv").write_bytes(_csv(seed=1))
    doc = {**SPEC, "dataset": {"path": "d.csv", "holdout": "no-such-file.csv",
                               "categorical": ["V0"]}}
    for metrics in (SPEC["metrics"], ["dcr_holdout_median"]):
        spec = parse_spec({**doc, "metrics": metrics}, base_dir=tmp_path)
        with pytest.raises(SdcInputError, match="The holdout file 'no-such-file.csv' does "
                                                "not exist"):
            load_data(spec)
    (tmp_path / "no-such-file.csv").write_bytes(b"\x00\xff not a table")
    spec = parse_spec(doc, base_dir=tmp_path)
    assert load_holdouts(spec, load_data(spec)) == {}        # there, and never opened


# -- the wrong-token limiter ------------------------------------------------------------------
def test_a_valid_token_passes_after_ten_wrong_ones_from_its_address(two):
    c, store, h, _ = two
    codes = [c.get("/v1/datasets", headers={"Authorization": f"Bearer wrong{i}"}).status_code
             for i in range(11)]
    assert codes == [401] * 10 + [429], codes
    assert c.get("/v1/datasets", headers=h["bob"]).status_code == 200
    assert c.get("/v1/datasets", headers=h["alice"]).status_code == 200
    assert c.get("/v1/datasets", headers={"Authorization": "Bearer x"}).status_code == 429


def test_failures_are_counted_per_address_and_ipv6_per_64():
    lim = FailureLimiter(limit=3)
    assert client_key("2001:db8:1:2::5") == client_key("2001:db8:1:2:ffff::9")
    assert client_key("::ffff:10.0.0.1") == "10.0.0.1"
    assert [lim.fail(f"2001:db8:1:2::{i:x}") for i in range(3)] == [0.0] * 3
    assert lim.fail("2001:db8:1:2:abcd::1") > 0 and lim.blocked("2001:db8:1:2::77") > 0
    assert lim.fail("2001:db8:1:3::1") == 0.0 and lim.blocked("10.0.0.1") == 0.0


class _Served:
    """The app in a real uvicorn server (in a thread), configured as ``sdcdist serve``
    configures it."""

    def __init__(self, app: object, forwarded_allow_ips: str | None = None):
        from sdcdist.cli.serve import uvicorn_config
        with socket.socket() as s:
            s.bind(("127.0.0.1", 0))
            port = s.getsockname()[1]
        cfg = uvicorn_config(app, host="127.0.0.1", port=port,
                             forwarded_allow_ips=forwarded_allow_ips)
        cfg.log_level = "warning"
        self.server = uvicorn.Server(cfg)
        self.url = f"http://127.0.0.1:{port}"
        self.thread = threading.Thread(target=self.server.run, daemon=True)
        self.thread.start()
        t0 = time.monotonic()
        while not self.server.started:
            assert time.monotonic() - t0 < 30 and self.thread.is_alive(), "no server"
            time.sleep(0.02)

    def close(self) -> None:
        self.server.should_exit = True
        self.thread.join(10)


def _with_scrypt_line(tmp_path: Path) -> tuple:
    """alice and bob (sha256 lines) and carol, an ``scrypt:`` line with cheap parameters:
    a slow line widens the time between checking a token and counting its failure, where
    a limiter that tests and counts apart lets more than its limit through."""
    import hashlib
    import os
    import secrets

    from sdcdist.service.auth import Tokens
    tokens, toks = _tokens(tmp_path)
    salt, n = secrets.token_bytes(16), 2**11
    digest = hashlib.scrypt(b"carol-token-cccc", salt=salt, n=n, r=8, p=1, dklen=32)
    f = tmp_path / "tokens.txt"
    f.write_text(f.read_text() + f"carol scrypt:{n}:8:1:{salt.hex()}:{digest.hex()}\n")
    os.chmod(f, 0o600)
    return Tokens.load(f), {**toks, "carol": "carol-token-cccc"}


@pytest.fixture
def served(tmp_path):
    tokens, toks = _with_scrypt_line(tmp_path)
    made: list[_Served] = []

    def start(forwarded_allow_ips: str | None = None) -> tuple[str, dict]:
        app, _, _ = _app(tmp_path / f"s{len(made)}", tokens=tokens)
        made.append(_Served(app, forwarded_allow_ips))
        return made[-1].url, {w: {"Authorization": f"Bearer {t}"} for w, t in toks.items()}
    yield start
    for s in made:
        s.close()


def test_forged_forwarded_for_headers_change_nothing(served):
    for trusted in (None, "192.0.2.1"):          # off, or a proxy that is not this peer
        url, h = served(trusted)
        with httpx.Client(base_url=url) as c:
            codes = [c.get("/v1/datasets", headers={
                "Authorization": f"Bearer wrong{i}", "X-Forwarded-For": f"198.51.100.{i}",
                "Forwarded": f"for=198.51.100.{i}"}).status_code for i in range(12)]
            assert codes == [401] * 10 + [429, 429], (trusted, codes)
            assert c.get("/v1/datasets", headers={**h["bob"], "X-Forwarded-For": "1.2.3.4"}
                         ).status_code == 200
    # the operator's proxy (here: this very peer) is believed, and only it
    url, h = served("127.0.0.1")
    with httpx.Client(base_url=url) as c:
        def wrong(client: str) -> int:
            return c.get("/v1/datasets", headers={"Authorization": "Bearer nope",
                                                  "X-Forwarded-For": client}).status_code
        assert [wrong("203.0.113.5") for _ in range(11)] == [401] * 10 + [429]
        assert wrong("203.0.113.6") == 401


def test_concurrent_wrong_tokens_are_counted_exactly(served):
    url, h = served()

    async def burst() -> list[int]:
        limits = httpx.Limits(max_connections=100, max_keepalive_connections=100)
        async with httpx.AsyncClient(base_url=url, limits=limits, timeout=60) as c:
            rs = await asyncio.gather(*(c.get("/v1/datasets", headers={
                "Authorization": f"Bearer wrong{i}"}) for i in range(100)))
        return [r.status_code for r in rs]
    codes = asyncio.run(burst())
    assert codes.count(401) == 10 and codes.count(429) == 90, sorted(codes)
    for who in ("alice", "carol"):          # valid tokens, sha256 and scrypt, still pass
        assert httpx.get(url + "/v1/datasets", headers=h[who]).status_code == 200


def test_an_idle_connection_outlives_the_clients_keep_alive(served):
    """A client keeps an idle connection 5 s (httpx, sdcdist.connect); the server must keep
    it longer, or a request sent on it as the server closes it is lost ("Server
    disconnected"). Here the same socket is reused after 6 s of silence."""
    url, _ = served()
    host, port = url.removeprefix("http://").split(":")
    request = (f"GET /v1/health HTTP/1.1\r\nHost: {host}\r\n\r\n").encode()

    def answer(sock: socket.socket) -> bytes:
        data = b""
        while b"\r\n\r\n" not in data:
            chunk = sock.recv(4096)
            if not chunk:
                return data
            data += chunk
        head, _, body = data.partition(b"\r\n\r\n")
        length = next(int(h.split(b":")[1]) for h in head.split(b"\r\n")
                      if h.lower().startswith(b"content-length:"))
        while len(body) < length:
            body += sock.recv(4096)
        return head
    with socket.create_connection((host, int(port)), timeout=30) as sock:
        sock.sendall(request)
        assert answer(sock).startswith(b"HTTP/1.1 200")
        time.sleep(6.0)
        sock.sendall(request)
        assert answer(sock).startswith(b"HTTP/1.1 200")


# -- spec parsing -----------------------------------------------------------------------------
def test_duplicate_json_keys_and_yaml_tags_are_refused(two):
    c, store, h, _ = two
    for body, key in (
            ('{"name": "a", "seed": 1, "name": "b"}', "name"),
            ('{"seed": 1, "dataset": {"reference": "census", "holdout": "x.csv", '
             '"holdout": "y.csv"}}', "holdout")):
        r = c.post("/v1/audits", content=body.encode(),
                   headers={**h["bob"], "Content-Type": "application/json"})
        assert r.status_code == 422, r.text
        assert f"the key {key!r} twice" in r.json()["detail"], r.text
    for tag in ("!!binary aGVsbG8=", "!!timestamp 2024-01-01", "!!set {a}", "!!omap [{a: 1}]",
                "!!pairs [{a: 1}]", "!!python/object/apply:os.getcwd []", "!local x"):
        text = (f"name: {tag}\nseed: 1\ndataset: {{reference: census}}\n"
                "methods: [{name: noise, params: [0.1]}]\nmetrics: [IL1s]\n")
        r = c.post("/v1/audits", content=text.encode(),
                   headers={**h["bob"], "Content-Type": "application/yaml"})
        assert r.status_code == 422, (tag, r.text)
        assert "uses the YAML tag" in r.json()["detail"], (tag, r.text)
    # the same spec without the tag is accepted
    r = c.post("/v1/audits", content=text.replace("!local x", "x").encode(),
               headers={**h["bob"], "Content-Type": "application/yaml"})
    assert r.status_code == 202, r.text


def test_a_holdout_is_sized_at_submission_only_when_a_metric_reads_it(tmp_path):
    from sdcdist.service.limits import Limits
    tokens, toks = _tokens(tmp_path)
    app, store, _ = _app(tmp_path, tokens=tokens, limits=Limits(max_rows=100))
    c = TestClient(app, base_url=BASE)
    bob = {"Authorization": f"Bearer {toks['bob']}"}
    area = store.root / "files" / "bob"
    area.mkdir(parents=True)
    (area / "small.csv").write_bytes(_csv(rows=60, seed=1))
    (area / "big.csv").write_bytes(_csv(rows=300, seed=2))
    ds = {"path": "files/bob/small.csv", "holdout": "files/bob/big.csv", "categorical": ["V0"]}
    r = c.post("/v1/audits", json={**HOLDOUT_SPEC, "dataset": ds}, headers=bob)
    assert r.status_code == 413 and "holdout" in r.json()["detail"], r.text
    r = c.post("/v1/audits", json={**SPEC, "dataset": ds}, headers=bob)
    assert r.status_code == 202, r.text


def test_a_missing_holdout_is_refused_at_submission(tmp_path):
    """Every file a spec names exists when it is submitted, read by a metric or not."""
    tokens, toks = _tokens(tmp_path)
    app, store, _ = _app(tmp_path, tokens=tokens)
    c = TestClient(app, base_url=BASE)
    bob = {"Authorization": f"Bearer {toks['bob']}"}
    area = store.root / "files" / "bob"
    area.mkdir(parents=True)
    (area / "small.csv").write_bytes(_csv(rows=60, seed=1))
    ds = {"path": "files/bob/small.csv", "holdout": "files/bob/gone.csv", "categorical": ["V0"]}
    for spec in (SPEC, HOLDOUT_SPEC):
        r = c.post("/v1/audits", json={**spec, "dataset": ds}, headers=bob)
        assert r.status_code == 422, r.text
        assert "The holdout file 'files/bob/gone.csv' does not exist" in r.json()["detail"]
        assert str(store.root) not in r.text
    assert c.get("/v1/audits", headers=bob).json() == []
