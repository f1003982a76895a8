"""The service survives a SIGKILL: accepted audits are kept, a running audit resumes from its
cube without recomputing finished cells (counted), and its cube equals an uninterrupted run's."""

from __future__ import annotations

import json
import time

import httpx
import numpy as np
import pytest

from _service import Server, wait_done
from sdcdist.audit import parse_spec, run_audit
from sdcdist.cube import open_cube

pytestmark = pytest.mark.slow

LONG = {"name": "long", "seed": 5,
        "dataset": {"name": "d", "synthetic": {"rows": 3000, "columns": 4, "seed": 2}},
        "methods": [{"name": "rankswap", "params": list(range(1, 21))}],
        "replicates": 2, "metrics": ["IL1s", "DLD"]}
SMALL = {"name": "small", "seed": 6,
         "dataset": {"name": "d", "synthetic": {"rows": 200, "columns": 3, "seed": 1}},
         "methods": [{"name": "noise", "params": [0.1, 0.2]}], "metrics": ["IL1s"]}


def _events(http: httpx.Client, audit: str) -> list[dict]:
    with http.stream("GET", f"/v1/audits/{audit}/events") as s:
        text = "".join(s.iter_text())
    return [json.loads(block.split("data: ", 1)[1]) for block in text.split("\n\n")
            if block.startswith("id: ") and "event: cell" in block]


def test_sigkill_and_restart_resumes_without_recomputing(tmp_path, client):
    server = Server(tmp_path / "root", tmp_path / "service.log", "--max-audits", "2",
                    "--max-running", "1").start()
    try:
        http = httpx.Client(base_url=server.url, timeout=60)
        long_id = http.post("/v1/audits", json=LONG).json()["id"]
        small_id = http.post("/v1/audits", json=SMALL).json()["id"]
        r = http.post("/v1/audits", json=SMALL)          # a third while two are active
        assert r.status_code == 429 and "at once" in r.json()["detail"]
        t0 = time.monotonic()
        while time.monotonic() - t0 < 180:
            a = http.get(f"/v1/audits/{long_id}").json()
            if a["cells_done"] >= 3:
                break
            time.sleep(0.05)
        assert a["status"] == "running" and 3 <= a["cells_done"] < a["cells_total"] == 40, a
        server.kill()
        http.close()

        # what a kill during an upload leaves: a file being received, a store without a row
        (server.root / "tmp" / "ds_dead").mkdir()
        (server.root / "datasets" / "ds_dead.zarr").mkdir()
        server.start()                                   # same root, a new process
        assert not list((server.root / "tmp").iterdir())
        assert not (server.root / "datasets" / "ds_dead.zarr").exists()
        http = httpx.Client(base_url=server.url, timeout=60)
        a = wait_done(http, long_id)
        assert a["status"] == "done" and a["cells_done"] == 40 and a["runs"] == 2, a
        assert wait_done(http, small_id)["status"] == "done"     # queued, never lost
        cells = _events(http, long_id)
        first = {(c["method"], c["param"], c["replicate"]) for c in cells if c["run"] == 1}
        second = [(c["method"], c["param"], c["replicate"]) for c in cells if c["run"] == 2]
        assert len(first) >= 3 and not first & set(second)       # none computed twice
        assert len(second) == len(set(second)) == 40 - a["resumed_from"]
        assert a["resumed_from"] >= len(first)
        http.close()
    finally:
        server.stop()
    ref = run_audit(parse_spec(LONG), tmp_path / "ref.zarr", client=client)
    want = open_cube(ref.cube)
    got = open_cube(str(server.root / "audits" / long_id / "cube.zarr"))
    for var in ("value", "keyset_value", "excluded", "flag", "done"):
        assert np.array_equal(got[var].values, want[var].values, equal_nan=True), var
    log = server.log.read_text()
    assert "resuming audits" in log


def test_https_with_certfile_and_keyfile(tmp_path, run):
    """--certfile/--keyfile: the service speaks https only, verified against the CA."""
    import ssl
    assert run("certs", "--out", tmp_path / "tls").exit_code == 0
    tls = tmp_path / "tls"
    ca = ssl.create_default_context(cafile=str(tls / "ca.crt"))
    server = Server(tmp_path / "root", tmp_path / "service.log", "--certfile",
                    str(tls / "scheduler.crt"), "--keyfile", str(tls / "scheduler.key"),
                    verify=ca).start()
    try:
        assert server.url.startswith("https://")
        with httpx.Client(base_url=server.url, verify=ca) as c:
            assert c.get("/v1/health").json()["status"] == "ok"
            assert c.get("/v1/methods").status_code == 200
        with pytest.raises(httpx.HTTPError):
            httpx.get(f"http://127.0.0.1:{server.port}/v1/health", timeout=5)
    finally:
        server.stop()


def test_a_port_taken_before_the_service_binds_it_is_replaced(tmp_path, monkeypatch):
    """The tests' service picks another free port when the one it drew was taken before it
    bound it (its local cluster or another test's may draw the same one in between)."""
    import socket

    import _service
    server = Server(tmp_path / "root", tmp_path / "service.log")
    with socket.socket() as held:
        held.bind(("127.0.0.1", 0))
        held.listen()
        taken = held.getsockname()[1]
        ports = iter([taken])
        real = _service.free_port
        monkeypatch.setattr(_service, "free_port", lambda: next(ports, None) or real())
        server.start()
        try:
            assert server.port != taken
            assert httpx.get(server.url + "/v1/health", timeout=10).status_code == 200
            assert "address already in use" in server.log.read_text()
        finally:
            server.stop()
