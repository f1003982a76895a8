"""The service's memory, for real: the uploads that cost gigabytes, and large datasets.

A real ``sdcdist serve`` process: the peak resident set of the service process (VmHWM,
reset through ``/proc/PID/clear_refs``) over its resident set before each upload, while a
thread asks ``/v1/health`` all along. Then a 2,000,000 x 8 synthetic dataset (128 MiB in
memory, past the 64 MiB of the full check at submission) is audited through the service,
and its cube equals ``run_audit``'s in this process bit for bit.
"""

from __future__ import annotations

import gzip
import re
import time
from pathlib import Path

import httpx
import numpy as np
import pytest
from fastapi import HTTPException

from _service import Server, wait_done
from sdcdist.service.limits import Limits, TextScan, check_parquet, scan_upload

BOUND = 64 * 2**20          # the bound docs/service.md states for an upload


# -- the scanner, fast ------------------------------------------------------------------
def _scan(data: bytes, name: str = "x.csv", lim: Limits = Limits(max_field=100),
          piece: int = 7) -> tuple[int, int] | None:
    s = TextScan(name, lim)
    for i in range(0, len(data), piece):     # the bytes arrive in small pieces
        s.feed(data[i:i + piece])
    return s.finish()


def test_field_and_line_lengths_are_bounded_while_streaming():
    ok = b"a,b\n" + b"1," + b"x" * 100 + b"\n"
    assert _scan(ok) == (1, 2)
    with pytest.raises(HTTPException) as e:
        _scan(b"a,b\n1," + b"x" * 101 + b"\n")
    assert e.value.status_code == 413 and "--max-field" in e.value.detail
    # a quoted field holding separators and newlines is one field
    quoted = b'a,b\n1,"' + b"x,\n" * 40 + b'"\n'
    with pytest.raises(HTTPException) as e:
        _scan(quoted)
    assert "field" in e.value.detail
    # "" inside quotes does not end the quoting; commas outside quotes split fields
    assert _scan(b'a,b\n1,"x""y,z"\n' + b"2," * 60 + b"3\n", piece=3) == (2, 2)
    # a line of many short fields: bounded at 8 x max_field
    with pytest.raises(HTTPException) as e:
        _scan(b"a\n" + b"1," * 500 + b"1\n", lim=Limits(max_field=100, max_columns=10**6))
    assert "line" in e.value.detail
    # compressed: counted once decompressed, member after member
    gz = gzip.compress(b"a,b\n") + gzip.compress(b"1," + b"y" * 1000 + b"\n")
    assert len(gz) < 100
    with pytest.raises(HTTPException):
        _scan(gz, "x.csv.gz")
    assert _scan(gzip.compress(ok) + gzip.compress(b"2,3\n"), "x.csv.gz") == (2, 2)
    assert _scan(gzip.compress(ok)[:-9], "x.csv.gz") is None      # truncated: ingest says
    assert _scan(b"not gzip at all", "x.csv.gz") is None


def test_parquet_pages_are_checked_before_they_are_decoded(tmp_path):
    import pyarrow as pa
    import pyarrow.parquet as pq
    from sdcdist.data import parquetpages as pp
    s = "z" * (2 << 20)                     # 2 MiB strings, 48 KiB on disk
    p = tmp_path / "b.parquet"
    pq.write_table(pa.table({"a": [1., 2., 3., 4.], "t": [s, s, s, "w"]}), p,
                   compression="zstd")
    assert p.stat().st_size < 50_000
    lim = Limits(max_field=2**16)           # pages up to 1 MiB
    with pytest.raises(HTTPException) as e:
        check_parquet(p, lim)
    assert e.value.status_code == 413 and "Parquet" in e.value.detail
    assert "--max-field" in e.value.detail
    # an ordinary file passes, every page header read
    q = tmp_path / "ok.parquet"
    n = 50_000
    pq.write_table(pa.table({"a": np.arange(n, dtype=float), "c": [str(i % 7) for i in
                                                                   range(n)]}), q,
                   row_group_size=20_000, data_page_size=2**14)
    md = pq.ParquetFile(q).metadata
    pages = list(pp.iter_pages(q, md))
    assert sum(not pg.dictionary for pg in pages) > md.num_row_groups * 2
    assert scan_upload(q, Limits()) == (n, 2)
    # a header that claims more than the limit is refused, not read
    with pytest.raises(pp.ParquetHeaderTooLarge):
        list(pp.iter_pages(q, md, header_limit=8))
    bad = tmp_path / "bad.parquet"
    bad.write_bytes(b"PAR1" + b"\x00" * 20 + b"PAR1")
    assert check_parquet(bad, Limits()) is None          # ingest says what is wrong


# -- the service process ----------------------------------------------------------------
def _kib(pid: int, field: str) -> int:
    text = Path(f"/proc/{pid}/status").read_text()
    return int(re.search(rf"^{field}:\s+(\d+) kB", text, re.M).group(1))


_POLL = r"""
import os, sys, time
import httpx
url, stop = sys.argv[1], sys.argv[2]
worst, n = 0.0, 0
with httpx.Client(timeout=10) as c:
    while not os.path.exists(stop):
        t0 = time.monotonic()
        try:
            ok = c.get(url + "/v1/health").status_code == 200
        except httpx.HTTPError:
            ok = False
        worst = max(worst, time.monotonic() - t0 if ok else 10.0)
        n += 1
        time.sleep(0.05)
print(worst, n)
"""


class _Health:
    """Asks /v1/health every 50 ms from a process of its own (so that the uploads this
    test builds, which hold its own interpreter, cannot delay the asking); the slowest
    answer (a failure counts as 10 s)."""

    def __init__(self, url: str, tmp: Path):
        self.url, self.worst, self.n = url, 0.0, 0
        self._stop = tmp / "health.stop"
        self._stop.unlink(missing_ok=True)

    def start(self) -> None:
        import subprocess
        import sys
        self._proc = subprocess.Popen([sys.executable, "-c", _POLL, self.url, str(self._stop)],
                                      stdout=subprocess.PIPE, text=True)
        time.sleep(1.0)                       # its first answers before the uploads

    def finish(self) -> None:
        self._stop.write_text("")
        out, _ = self._proc.communicate(timeout=60)
        worst, n = out.split()
        self.worst, self.n = float(worst), int(n)


@pytest.fixture(scope="module")
def server(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("mem")
    srv = Server(tmp / "root", tmp / "service.log").start()
    http = httpx.Client(base_url=srv.url, timeout=300)
    http.headers["X-Sdcdist-Csrf"] = http.get("/v1/csrf").json()["token"]
    # warm up: the libraries of an upload, its child process, a submission
    r = http.post("/v1/datasets", files={"file": ("warm.csv", b"a,b\n1,2\n3,5\n4,4\n")})
    assert r.status_code == 201, r.text
    yield srv, http, tmp
    http.close()
    srv.stop()


def _gz_field(mib: int) -> bytes:
    """A .csv.gz of one field of ``mib`` MiB: gzip members of 1 MiB each (a reader reads
    them as one stream), so it is built in milliseconds and never held decompressed."""
    member = gzip.compress(b"z" * 2**20, compresslevel=9)
    return gzip.compress(b"a,t\n1,") + member * mib + gzip.compress(b"\n")


def _uploads():
    import io

    import pyarrow as pa
    import pyarrow.parquet as pq
    s = "z" * (300 << 20)
    buf = io.BytesIO()
    pq.write_table(pa.table({"a": [1., 2., 3., 4.], "t": [s, s, s, "w"]}), buf,
                   compression="zstd", compression_level=1, write_statistics=False)
    del s
    yield "parquet", "p.parquet", buf.getvalue(), 413
    yield "gz", "f.csv.gz", _gz_field(900), 413
    yield "field", "f.csv", b"a,t\n1," + b"z" * (235 << 20) + b"\n", 413
    rng = np.random.default_rng(1)
    rows, cols = 6_000, 999                   # 999 x 60,000 in the issue: the same width
    head = ",".join(f"c{j}" for j in range(cols)).encode() + b"\n"
    lines = ["\n".join(",".join(map(str, r)) for r in rng.integers(0, 10, (100, cols)))
             for _ in range(2)]
    body = "\n".join(lines[i % 2] for i in range(rows // 100)).encode()
    yield "wide", "w.csv", head + body + b"\n", 201


@pytest.mark.slow
def test_uploads_that_cost_gigabytes_are_bounded_and_health_answers(server):
    srv, http, tmp = server
    pid = srv.proc.pid
    health = _Health(srv.url, tmp)
    health.start()
    longest = 0.0
    try:
        for label, name, data, want in _uploads():
            time.sleep(0.3)
            Path(f"/proc/{pid}/clear_refs").write_text("5")        # reset VmHWM
            before = _kib(pid, "VmRSS")
            t0 = time.perf_counter()
            r = http.post("/v1/datasets", files={"file": (name, data)})
            longest = max(longest, time.perf_counter() - t0)
            grew = (_kib(pid, "VmHWM") - before) * 1024
            del data
            assert r.status_code == want, (label, r.text)
            if want == 413:
                assert "--max-field" in r.json()["detail"], (label, r.text)
            assert grew <= BOUND, (label, grew / 2**20)
    finally:
        health.finish()
    assert health.n > 5
    # a service whose event loop an upload held would not answer for about the upload's
    # whole time (the longest takes 3-5 s on 2 idle cores; health answers within 0.04 s
    # there); on a loaded machine an answer also waits its turn for a core, and the
    # uploads slow down with it: the bound is a quarter of the longest, at least 1 s
    assert health.worst < max(1.0, longest / 4), (health.worst, longest)


@pytest.mark.slow
def test_a_dataset_past_the_check_limit_is_audited_as_in_process(server, tmp_path):
    from sdcdist.audit.run import run_audit
    from sdcdist.audit.spec import parse_spec
    from sdcdist.testing import cube_fingerprints
    from sdcdist.service import limits
    srv, http, tmp = server
    # 1.1 million records of 8 columns (70 MB): past CHECK_BYTES (64 MiB), so the service
    # checks the spec by its schema and the constant columns chunk by chunk, as for the
    # 2 million records of the issue, in half the time
    rows, columns = 1_100_000, 8
    assert rows * columns * 8 > limits.CHECK_BYTES
    doc = {"name": "big", "seed": 1,
           "dataset": {"name": "big", "synthetic": {"rows": rows, "columns": columns,
                                                     "seed": 1}},
           "methods": [{"name": "noise", "params": [0.1]}], "metrics": ["IL1s"]}
    r = http.post("/v1/audits", json=doc)       # was 422: "has no key column that can link"
    assert r.status_code == 202, r.text
    a = wait_done(http, r.json()["id"], timeout=300)
    assert a["status"] == "done", a
    got = cube_fingerprints(tmp / "root" / "audits" / r.json()["id"] / "cube.zarr")
    run_audit(parse_spec(doc), tmp_path / "cli.zarr")
    assert got == cube_fingerprints(tmp_path / "cli.zarr")


def test_the_schema_check_of_large_data_finds_constant_columns_chunk_by_chunk(
        tmp_path, monkeypatch):
    """Past CHECK_BYTES a spec is checked by its schema; its constant columns are read
    chunk by chunk (here with CHECK_BYTES 0 and 7-record chunks), not taken to be all."""
    from fastapi.testclient import TestClient

    from sdcdist.service import limits
    from sdcdist.service.app import ServiceConfig, create_app
    from sdcdist.service.store import Store
    store = Store(tmp_path / "root")
    app = create_app(ServiceConfig(root=store.root), None, store)
    c = TestClient(app, base_url="http://127.0.0.1:8000")
    c.headers["X-Sdcdist-Csrf"] = app.state.csrf
    rng = np.random.default_rng(2)
    rows = [f"{a},{b},5,{7 if i == 40 else 3}" for i, (a, b) in
            enumerate(rng.integers(1, 50, (60, 2)))]
    r = c.post("/v1/datasets", files={"file": ("d.csv", ("A,B,K,L\n" + "\n".join(rows)
                                                         + "\n").encode())})
    assert r.status_code == 201, r.text
    ds = r.json()["id"]
    monkeypatch.setattr(limits, "CHECK_BYTES", 0)
    monkeypatch.setattr(limits, "CHUNK_BYTES", 7 * 8 * 4)       # 7 records a chunk
    spec = {"name": "s", "seed": 1, "methods": [{"name": "noise", "params": [0.1]}],
            "metrics": ["IL1s", "DLD"]}
    # L varies in one record of the sixth chunk: it can link; K cannot
    r = c.post("/v1/audits", json={**spec, "dataset": {"id": ds, "keys": ["K", "L"]}})
    assert r.status_code == 202, r.text
    r = c.post("/v1/audits", json={**spec, "dataset": {"id": ds, "keys": ["K"]}})
    assert r.status_code == 422, r.text
    assert "['K']" in r.json()["detail"], r.text            # K only, not every column
    r = c.post("/v1/audits", json={**spec, "dataset": {"synthetic": {"rows": 3_000,
                                                                     "columns": 3}}})
    assert r.status_code == 202, r.text
