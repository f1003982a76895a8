"""The audit service against the command line, its request latency under load, its memory.

Run as ``python benchmarks/service.py [--workers 2] [--clients 20] [--seconds 10]
[--no-table2-cli] [--quick] [--latency-only]``.

Prints, in one run:

1. The demo audit (``examples/demo.yaml``) with ``sdcdist audit`` and through the
   service (upload the demo's data, submit, wait), each on its own local cluster of
   ``--workers`` processes: the command's audit time (what it reports, cluster start and
   imports excluded) against the service's submit-to-done time (after one tiny warm-up
   audit), and their ratio.
2. The 109-parameterisation Table-2 audit (``examples/dmt_table2.yaml``, Census) the same
   two ways (a few minutes each; ``--no-table2-cli`` skips the command-line run), which
   also builds the cube of the next step.
3. ``/query`` and ``/cube`` on that cube under ``--clients`` concurrent clients for
   ``--seconds`` each: requests per second, p50 and p99 latency.
4. The service's memory: resident set of the service process when idle (started, nothing
   submitted) and its peak (VmHWM), and the peak of the whole process tree (with the
   local cluster's workers), sampled every 0.2 s.
5. The service process's peak memory for three small requests that used to cost far
   more than their size: a 41 KB CSV of 2,000 columns, a 150 KB ``.csv.gz`` of 12.6
   million rows, and a 295-byte spec asking for 3 million synthetic records (its peak
   resident set, reset before each request, over its resident set before it).
   ``--memory-only`` runs only this part.
6. The four uploads of issue 37 that cost gigabytes (a 10 KB Parquet of three 300 MB
   strings, a 0.9 MB ``.csv.gz`` of one 900 MB field, a 235 MB CSV of one field, a CSV of
   999 columns x 60,000 rows): status, the service process's peak RSS growth, seconds and
   the slowest ``/v1/health`` answer meanwhile, for this code and (``--baseline main``)
   for a commit's, in the same run, and a table. ``--uploads-only`` runs only this part
   (``--timeout``, ``--guard-mib`` stop the baseline's worst requests).
7. Data past the 64 MiB of the full check at submission, audited through the service
   (noise, IL1s): the 2,000,000 x 8 synthetic file and a 999-column x 9,000-record
   upload with named keys (72 MB in memory), each cube compared with ``run_audit``'s in
   process bit for bit. ``--large-audits`` runs only this part (with ``--baseline``, that
   commit's service too).

8. ``/query``, ``/report`` and ``/plot`` of a 44-cell cube (14 parameterisations of 3
   methods, 4 replicates of the random ones, 1,000 synthetic records) under 10 clients for
   ``--seconds`` each: the first request of each (which loads the cube or renders the
   plot), then requests per second, p50 and p99; and the same load on ``/v1/health``, a
   route that does nothing, as the floor of the framework, the client and the machine;
   and the service process's CPU time per request (user + system), which a busy machine
   does not inflate as it does latency.
   ``--latency-only`` runs only this part.

Everything runs on 127.0.0.1. ``--quick`` keeps 2 parameters per Table-2 method and 2
seconds per load test (a smoke test). The machine is shared: timings are noisy.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import re
import signal
import socket
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

import numpy as np
import yaml

ROOT = Path(__file__).resolve().parents[1]
PY = sys.executable


def env(tree: Path = ROOT) -> dict[str, str]:
    return {**os.environ, "PYTHONDONTWRITEBYTECODE": "1", "PYTHONPATH": os.pathsep.join(
        p for p in (str(tree), os.environ.get("PYTHONPATH")) if p)}


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def rss(pid: int) -> tuple[int, int]:
    """(VmRSS, VmHWM) of a process in bytes."""
    text = Path(f"/proc/{pid}/status").read_text()
    get = lambda k: int(re.search(rf"^{k}:\s+(\d+) kB", text, re.M).group(1)) * 1024  # noqa
    return get("VmRSS"), get("VmHWM")


def cpu_seconds(pid: int) -> float:
    """User + system CPU time a process has used, in seconds."""
    fields = Path(f"/proc/{pid}/stat").read_text().rpartition(")")[2].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def tree_rss(pgid: int) -> int:
    """Resident memory of every process of a process group, in bytes."""
    total = 0
    for d in Path("/proc").iterdir():
        if not d.name.isdigit():
            continue
        try:
            if os.getpgid(int(d.name)) == pgid:
                total += rss(int(d.name))[0]
        except (OSError, AttributeError):
            pass
    return total


class Service:
    def __init__(self, root: Path, workers: int, tree: Path = ROOT):
        import httpx
        self.port = free_port()
        self.url = f"http://127.0.0.1:{self.port}"
        self.log = (root.parent / "service.log").open("ab")
        self.proc = subprocess.Popen(
            [PY, "-m", "sdcdist.cli", "serve", "--root", str(root), "--port", str(self.port),
             "--workers", str(workers), "--max-upload", "1024"],
            stdout=self.log, stderr=subprocess.STDOUT, env=env(tree), start_new_session=True,
            cwd=str(tree),                # `python -m` puts the folder it runs in first
            stdin=subprocess.DEVNULL)
        t0 = time.monotonic()
        while True:
            try:
                if httpx.get(self.url + "/v1/health", timeout=2).status_code == 200:
                    break
            except httpx.HTTPError:
                pass
            if self.proc.poll() is not None or time.monotonic() - t0 > 300:
                raise RuntimeError("the service did not start; see service.log")
            time.sleep(0.2)
        self.http = httpx.Client(base_url=self.url, timeout=600)
        got = self.http.get("/v1/csrf")        # without tokens, uploads carry this token
        if got.status_code == 200:
            self.http.headers["X-Sdcdist-Csrf"] = got.json()["token"]
        self.peak_tree = 0
        self._stop = threading.Event()
        self._sampler = threading.Thread(target=self._sample, daemon=True)

    def start_sampling(self) -> None:
        self._sampler.start()

    def _sample(self) -> None:
        while not self._stop.is_set():
            self.peak_tree = max(self.peak_tree, tree_rss(self.proc.pid))
            time.sleep(0.2)

    def wait(self, audit_id: str) -> dict:
        while True:
            a = self.http.get(f"/v1/audits/{audit_id}").json()
            if a["status"] not in ("queued", "running"):
                if a["status"] != "done":
                    raise RuntimeError(f"audit {audit_id}: {a['status']} {a['error']}")
                return a
            time.sleep(0.1)

    def submit(self, doc: dict) -> tuple[str, float]:
        t0 = time.perf_counter()
        r = self.http.post("/v1/audits", json=doc)
        r.raise_for_status()
        audit_id = r.json()["id"]
        self.wait(audit_id)
        return audit_id, time.perf_counter() - t0

    def stop(self) -> None:
        self._stop.set()
        self.http.close()
        if self.proc.poll() is not None:
            self.log.close()
            return
        os.killpg(self.proc.pid, signal.SIGTERM)
        try:
            self.proc.wait(60)
        except subprocess.TimeoutExpired:
            os.killpg(self.proc.pid, signal.SIGKILL)
        self.log.close()


def reset_peak(pid: int) -> None:
    """Reset a process's peak resident set (VmHWM) to its current one."""
    Path(f"/proc/{pid}/clear_refs").write_text("5")


def small_requests() -> list[tuple[str, str, dict]]:
    """(label, what is sent, httpx keyword arguments) of the requests of step 5."""
    import gzip
    import json
    cols = 2000
    wide = (",".join(f"c{j}" for j in range(cols)) + "\n" +
            "\n".join(",".join(str((i * 7 + j) % 10) for j in range(cols)) for i in range(9))
            + "\n").encode()
    member = gzip.compress(b"1,2\n" * 2**18, compresslevel=9)
    bomb = gzip.compress(b"a,b\n" + b"".join(b"%d,%d\n" % (i, 7 * i % 11) for i in range(50))
                         ) + member * 48
    spec = json.dumps({"name": "cheap", "dataset": {"synthetic": {"rows": 3_000_000,
                                                                  "columns": 13}},
                       "methods": [{"name": "noise", "params": [0.1]}],
                       "metrics": ["IL1s"], "keysets": [["AGE", "HOURS"]]}).encode()
    return [("wide CSV (2,000 columns)", f"{len(wide) / 1000:.0f} KB upload",
             {"method": "POST", "url": "/v1/datasets",
              "files": {"file": ("wide.csv", wide)}}),
            ("gzip bomb (12.6 M rows)", f"{len(bomb) / 1000:.0f} KB upload",
             {"method": "POST", "url": "/v1/datasets",
              "files": {"file": ("bomb.csv.gz", bomb)}}),
            ("cheap spec (3 M synthetic rows)", f"{len(spec)} B spec",
             {"method": "POST", "url": "/v1/audits", "content": spec,
              "headers": {"Content-Type": "application/json"}})]


def memory_per_request(svc: "Service") -> None:
    """Step 5: the service process's peak memory for each small request, read when its
    answer arrives (an accepted audit then starts on the runner, which holds its data
    while it runs: that is the audit's cost, not the request's)."""
    import json
    from sdcdist.data import write_microdata
    from sdcdist.data.synth import generate
    with tempfile.TemporaryDirectory() as tmp:      # warm-up: the imports of both paths
        warm = Path(tmp) / "warm.csv"
        write_microdata(generate(200, columns=3, seed=1), warm)
        with warm.open("rb") as f:
            ds = svc.http.post("/v1/datasets", files={"file": ("warm.csv", f)}).json()
    svc.submit({"name": "warm-up", "dataset": {"id": ds["id"]},
                "methods": [{"name": "noise", "params": [0.1]}], "metrics": ["IL1s"]})
    print(f"{'request':34s} {'sent':>14s} {'status':>6s} {'RSS before':>11s} "
          f"{'peak':>9s} {'growth':>9s} {'seconds':>8s}")
    reqs = small_requests()
    bomb_id = None
    while reqs:
        label, sent, kw = reqs.pop(0)
        time.sleep(1.0)
        reset_peak(svc.proc.pid)
        before, _ = rss(svc.proc.pid)
        t0 = time.perf_counter()
        r = svc.http.request(**kw)
        took = time.perf_counter() - t0
        _, peak = rss(svc.proc.pid)
        if r.status_code == 202:             # stop it: the next figures are the requests'
            svc.http.delete(f"/v1/audits/{r.json()['id']}")
        print(f"{label:34s} {sent:>14s} {r.status_code:>6d} {before / 2**20:>7.0f} MiB "
              f"{peak / 2**20:>5.0f} MiB {(peak - before) / 2**20:>5.0f} MiB {took:>8.1f}")
        if label.startswith("gzip") and r.status_code == 201:
            bomb_id = r.json()["id"]        # accepted: what does a spec naming it cost?
            spec = json.dumps({"name": "on-bomb", "dataset": {"id": bomb_id},
                               "methods": [{"name": "noise", "params": [0.1]}],
                               "metrics": ["IL1s"]}).encode()
            reqs.insert(0, ("spec naming the gzip upload", f"{len(spec)} B spec",
                            {"method": "POST", "url": "/v1/audits", "content": spec,
                             "headers": {"Content-Type": "application/json"}}))
    if bomb_id is None:
        print(f"{'spec naming the gzip upload':34s} {'-':>14s} (the upload was refused)")


def big_uploads(wide_rows: int = 60_000):
    """(label, file name, bytes) of the four uploads of issue 37 that used to cost
    gigabytes: a 10 KB Parquet of three 300 MB strings (zstd), a 0.9 MB ``.csv.gz`` of one
    900 MB field (gzip members of 1 MiB each), a 235 MB CSV of one field, and a CSV of 999
    columns x ``wide_rows`` records under every limit. Built one at a time."""
    import gzip
    import io

    import pyarrow as pa
    import pyarrow.parquet as pq
    s = "z" * (300 << 20)
    buf = io.BytesIO()
    pq.write_table(pa.table({"a": [1., 2., 3., 4.], "t": [s, s, s, "w"]}), buf,
                   compression="zstd", compression_level=1, write_statistics=False)
    del s
    yield "Parquet, 3 x 300 MB strings (zstd)", "p.parquet", buf.getvalue()
    member = gzip.compress(b"z" * 2**20, compresslevel=9)
    yield ("csv.gz, one 900 MB field", "f.csv.gz",
           gzip.compress(b"a,t\n1,") + member * 900 + gzip.compress(b"\n"))
    yield "CSV, one 235 MB field", "f.csv", b"a,t\n1," + b"z" * (235 << 20) + b"\n"
    rng = np.random.default_rng(1)
    cols = 999
    head = ",".join(f"c{j}" for j in range(cols)).encode() + b"\n"
    lines = ["\n".join(",".join(map(str, r)) for r in rng.integers(0, 10, (100, cols)))
             for _ in range(2)]
    body = "\n".join(lines[i % 2] for i in range(wide_rows // 100)).encode()
    yield f"CSV, 999 columns x {wide_rows:,} rows", "w.csv", head + body + b"\n"


class _Health(threading.Thread):
    """Asks a service's /v1/health every 50 ms and keeps the slowest answer (no answer
    within the timeout counts as the timeout)."""

    def __init__(self, url: str, timeout: float = 10.0):
        super().__init__(daemon=True)
        self.url, self.timeout, self.worst = url, timeout, 0.0
        self.stop = threading.Event()

    def run(self) -> None:
        import httpx
        with httpx.Client(timeout=self.timeout) as c:
            while not self.stop.is_set():
                t0 = time.monotonic()
                try:
                    c.get(self.url + "/v1/health")
                    took = time.monotonic() - t0
                except httpx.HTTPError:
                    took = self.timeout
                self.worst = max(self.worst, took)
                time.sleep(0.05)


def upload_memory(trees: list[tuple[str, Path]], workers: int, timeout: float,
                  guard_mib: int, wide_rows: int) -> None:
    """The four uploads against a service run from each source tree: status, the service
    process's peak RSS growth (VmHWM reset before each, over VmRSS before), seconds, and
    the slowest /v1/health answer meanwhile. A request that passes ``timeout`` seconds,
    or a service whose RSS passes ``guard_mib``, is stopped (the service is killed and
    started again for the next upload); its figures are then lower bounds."""
    import httpx
    rows: list[tuple[str, str, str, float, float, float]] = []
    with tempfile.TemporaryDirectory(prefix="sdcdist-bench-uploads-") as tmp:
        for version, tree in trees:
            svc = None
            for k, (label, name, data) in enumerate(big_uploads(wide_rows)):
                if svc is None or svc.proc.poll() is not None:
                    if svc is not None:
                        svc.stop()
                    svc = Service(Path(tmp) / f"root-{version}-{k}", workers, tree)
                    warm = svc.http.post("/v1/datasets", files={"file": (
                        "warm.csv", b"a,b\n1,2\n3,5\n4,4\n")})
                    warm.raise_for_status()
                    time.sleep(1.0)
                pid = svc.proc.pid
                reset_peak(pid)
                before, _ = rss(pid)
                health = _Health(svc.url)
                health.start()
                killed = threading.Event()
                done = threading.Event()

                def guard() -> None:
                    while not done.wait(0.2):
                        try:
                            if rss(pid)[0] > guard_mib * 2**20:
                                killed.set()
                                os.killpg(pid, signal.SIGKILL)
                                return
                        except (OSError, AttributeError):
                            return
                g = threading.Thread(target=guard, daemon=True)
                g.start()
                t0 = time.perf_counter()
                peak = before
                try:
                    r = svc.http.post("/v1/datasets", files={"file": (name, data)},
                                      timeout=timeout)
                    status = str(r.status_code)
                except httpx.TimeoutException:
                    status = f"none in {timeout:.0f} s"
                except httpx.HTTPError:
                    status = "killed" if killed.is_set() else "failed"
                took = time.perf_counter() - t0
                try:
                    peak = rss(pid)[1]
                except (OSError, AttributeError):
                    peak = guard_mib * 2**20
                done.set()
                health.stop.set()
                health.join()
                if killed.is_set():
                    status = f"killed at {guard_mib:,} MiB"
                    peak = max(peak, guard_mib * 2**20)
                if status.startswith("none"):
                    try:
                        peak = rss(pid)[1]
                    except (OSError, AttributeError):
                        pass
                    os.killpg(pid, signal.SIGKILL)    # the next upload gets a fresh one
                    svc.proc.wait(60)
                del data
                rows.append((version, label, status, (peak - before) / 2**20, took,
                             health.worst))
                print(f"{version:7s} {label:38s} {status:>22s} {(peak - before) / 2**20:>9,.0f} "
                      f"MiB {took:>7.1f} s  health {health.worst:.2f} s", flush=True)
            if svc is not None:
                svc.stop()
    print()
    print("| upload | version | status | service RSS growth | seconds | slowest /v1/health |")
    print("|---|---|---|---|---|---|")
    for version, label, status, grew, took, worst in rows:
        print(f"| {label} | {version} | {status} | {grew:,.0f} MiB | {took:.1f} | "
              f"{worst:.2f} s |")


def large_audits(trees: list[tuple[str, Path]], workers: int, wide_rows: int) -> None:
    """Datasets past the 64 MiB of the full check at submission, audited through the
    service (noise 0.1, IL1s): the 2,000,000 x 8 synthetic file, and an upload of 999
    columns x ``wide_rows`` records with named keys. Each cube is compared with
    ``run_audit``'s in this process on the same data (``sdcdist.testing.cube_fingerprints``,
    bit for bit)."""
    from sdcdist.audit.run import run_audit
    from sdcdist.audit.spec import parse_spec
    from sdcdist.testing import cube_fingerprints
    base = {"seed": 1, "methods": [{"name": "noise", "params": [0.1]}], "metrics": ["IL1s"]}
    with tempfile.TemporaryDirectory(prefix="sdcdist-bench-large-") as tmp:
        tmp = Path(tmp)
        wide = tmp / "wide.csv"
        rng = np.random.default_rng(3)
        with wide.open("w") as f:
            f.write(",".join(f"c{j}" for j in range(999)) + "\n")
            for _ in range(wide_rows // 1000):
                f.write("\n".join(",".join(map(str, r))
                                  for r in rng.integers(0, 1000, (1000, 999))) + "\n")
        syn = {**base, "name": "synthetic-2M",
               "dataset": {"name": "big", "synthetic": {"rows": 2_000_000, "columns": 8,
                                                         "seed": 1}}}
        up = {**base, "name": "wide-upload", "dataset": {"name": "wide", "keys": ["c0", "c1"]}}
        refs = {}
        for version, tree in trees:
            svc = Service(tmp / f"root-{version}", workers, tree)
            try:
                for doc in (syn, up):
                    t0 = time.perf_counter()
                    if doc is up:
                        with wide.open("rb") as f:
                            r = svc.http.post("/v1/datasets", files={"file": ("wide.csv", f)},
                                              data={"keys": "c0,c1"})
                        if r.status_code != 201:
                            print(f"{version:7s} {doc['name']:14s} upload {r.status_code} "
                                  f"{r.text[:200]}")
                            continue
                        doc = {**doc, "dataset": {**doc["dataset"], "id": r.json()["id"]}}
                    r = svc.http.post("/v1/audits", json=doc)
                    if r.status_code != 202:
                        print(f"{version:7s} {doc['name']:14s} {r.status_code} "
                              f"{r.json().get('detail', '')[:160]}")
                        continue
                    a = svc.http.get(f"/v1/audits/{r.json()['id']}").json()
                    while a["status"] in ("queued", "running"):
                        time.sleep(0.5)
                        a = svc.http.get(f"/v1/audits/{r.json()['id']}").json()
                    took = time.perf_counter() - t0
                    if a["status"] != "done":
                        print(f"{version:7s} {doc['name']:14s} {a['status']}: {a['error']}")
                        continue
                    got = cube_fingerprints(tmp / f"root-{version}" / "audits" /
                                            r.json()["id"] / "cube.zarr")
                    name = doc["name"]
                    if name not in refs:
                        ref = dict(doc)
                        if doc["name"] == "wide-upload":
                            ref["dataset"] = {"name": "wide", "path": str(wide),
                                              "keys": ["c0", "c1"]}
                        t1 = time.perf_counter()
                        run_audit(parse_spec(ref), tmp / f"{name}.zarr")
                        refs[name] = (cube_fingerprints(tmp / f"{name}.zarr"),
                                      time.perf_counter() - t1)
                    print(f"{version:7s} {name:14s} done, upload+submit-to-done {took:.1f} s; "
                          f"in-process run_audit {refs[name][1]:.1f} s; cubes equal bit for "
                          f"bit: {got == refs[name][0]}", flush=True)
            finally:
                svc.stop()


def cli_audit(spec: Path, out: Path, workers: int) -> tuple[float, float]:
    """(audit seconds as the command reports them, wall seconds of the command)."""
    t0 = time.perf_counter()
    r = subprocess.run([PY, "-m", "sdcdist.cli", "audit", str(spec), "--out", str(out),
                        "--workers", str(workers), "--no-progress", "--overwrite"],
                       capture_output=True, text=True, env=env())
    wall = time.perf_counter() - t0
    if r.returncode:
        raise RuntimeError(r.stderr)
    m = re.search(r"in ([0-9.]+) s", r.stdout)
    return float(m.group(1)), wall


async def load(url: str, paths: list[str], clients: int, seconds: float) -> dict:
    import httpx
    lat: list[float] = []
    errors = 0
    stop = time.perf_counter() + seconds

    async def one(i: int) -> None:
        nonlocal errors
        async with httpx.AsyncClient(base_url=url, timeout=60) as c:
            k = i
            while time.perf_counter() < stop:
                t0 = time.perf_counter()
                r = await c.get(paths[k % len(paths)])
                lat.append(time.perf_counter() - t0)
                errors += r.status_code != 200
                k += 1
    t0 = time.perf_counter()
    await asyncio.gather(*(one(i) for i in range(clients)))
    wall = time.perf_counter() - t0
    a = np.array(lat) * 1000
    return {"n": len(lat), "rate": len(lat) / wall, "p50": float(np.percentile(a, 50)),
            "p99": float(np.percentile(a, 99)), "errors": errors}


#: the 44-cell audit of the results' latency test
LATENCY_SPEC = {
    "name": "latency", "seed": 5,
    "dataset": {"synthetic": {"rows": 1000, "columns": 6, "seed": 2}},
    "methods": [{"name": "noise", "params": [0.02, 0.05, 0.1, 0.2]},
                {"name": "rankswap", "params": [1, 2, 5, 10, 15, 20]},
                {"name": "micmul", "params": [3, 5, 8, 10]}],
    "replicates": 4, "metrics": ["IL1s", "DLD", "ID1", "Score2"]}


def results_latency(svc: Service, clients: int, seconds: float) -> None:
    """/query, /report and /plot of a 44-cell cube under ``clients`` concurrent clients."""
    au, took = svc.submit(LATENCY_SPEC)
    cells = svc.http.get(f"/v1/audits/{au}").json()["cells_total"]
    print(f"results latency: a {cells}-cell audit, submit-to-done {took:.1f} s")
    base = f"/v1/audits/{au}"
    sets = {
        "/query": [f"{base}/query", f"{base}/query?sort=Score2&top=10",
                   f"{base}/query?where=DLD%20%3C%2020%20and%20IL1s%20%3C%201&sort=Score2"],
        "/report": [f"{base}/report?by=Score2&format=json",
                    f"{base}/report?by=DLD&format=csv"],
        "/plot": [f"{base}/plot?kind=tradeoff&risk=DLD&loss=IL_S2",
                  f"{base}/plot?kind=tradeoff&risk=ID1&loss=IL1s"],
    }
    # the floor: the same load on a route that does nothing (framework, client, machine);
    # the service's CPU time per request does not depend on what else the machine runs
    cpu = cpu_seconds(svc.proc.pid)
    r = asyncio.run(load(svc.url, ["/v1/health"], clients, seconds))
    per = 1000 * (cpu_seconds(svc.proc.pid) - cpu) / max(r["n"], 1)
    print(f"{'/health':8s} {clients} clients x {seconds:g} s: {r['rate']:.0f} requests/s, "
          f"p50 {r['p50']:.1f} ms, p99 {r['p99']:.1f} ms, service CPU {per:.2f} ms/request "
          f"({r['n']} requests, {r['errors']} errors; the floor: a route that does nothing)")
    for name, paths in sets.items():
        t0 = time.perf_counter()
        for p in paths:                     # the first of each: loads, computes, renders
            svc.http.get(p).raise_for_status()
        first = (time.perf_counter() - t0) / len(paths)
        cpu = cpu_seconds(svc.proc.pid)
        r = asyncio.run(load(svc.url, paths, clients, seconds))
        per = 1000 * (cpu_seconds(svc.proc.pid) - cpu) / max(r["n"], 1)
        print(f"{name:8s} {clients} clients x {seconds:g} s: {r['rate']:.0f} requests/s, "
              f"p50 {r['p50']:.1f} ms, p99 {r['p99']:.1f} ms, service CPU {per:.2f} ms/"
              f"request ({r['n']} requests, {r['errors']} errors; first request "
              f"{1000 * first:.0f} ms)")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--workers", type=int, default=2)
    ap.add_argument("--clients", type=int, default=20)
    ap.add_argument("--seconds", type=float, default=10.0)
    ap.add_argument("--no-table2-cli", action="store_true")
    ap.add_argument("--quick", action="store_true")
    ap.add_argument("--memory-only", action="store_true")
    ap.add_argument("--latency-only", action="store_true")
    ap.add_argument("--uploads-only", action="store_true",
                    help="only the four large uploads (step 6)")
    ap.add_argument("--baseline", metavar="GIT_REF",
                    help="with --uploads-only: also run the uploads against this commit's "
                         "code (git archive into a temporary folder), first")
    ap.add_argument("--timeout", type=float, default=120.0,
                    help="seconds an upload may take before it is stopped")
    ap.add_argument("--guard-mib", type=int, default=8192,
                    help="a service whose RSS passes this is killed (the baseline's uploads "
                         "took 7 GiB)")
    ap.add_argument("--wide-rows", type=int, default=60_000)
    ap.add_argument("--large-audits", action="store_true",
                    help="only the audits of data past 64 MiB (step 7), service against "
                         "run_audit (with --baseline: that commit's service too)")
    a = ap.parse_args()
    if a.large_audits or a.uploads_only:
        with tempfile.TemporaryDirectory(prefix="sdcdist-bench-base-") as base:
            trees = []
            if a.baseline:          # the baseline commit's tree, measured in the same run
                arch = subprocess.run(["git", "-C", str(ROOT), "archive", a.baseline],
                                      check=True, capture_output=True).stdout
                subprocess.run(["tar", "-x", "-C", base], input=arch, check=True)
                trees.append(("before", Path(base)))
            trees.append(("after", ROOT))
            if a.large_audits:
                large_audits(trees, a.workers, 9_000)
            else:
                upload_memory(trees, a.workers, a.timeout, a.guard_mib, a.wide_rows)
        return
    if a.memory_only:
        with tempfile.TemporaryDirectory(prefix="sdcdist-bench-service-") as tmp:
            svc = Service(Path(tmp) / "root", a.workers)
            try:
                time.sleep(2.0)
                memory_per_request(svc)
            finally:
                svc.stop()
        return
    seconds = 2.0 if a.quick else a.seconds
    if a.latency_only:
        with tempfile.TemporaryDirectory(prefix="sdcdist-bench-service-") as tmp:
            svc = Service(Path(tmp) / "root", a.workers)
            try:
                results_latency(svc, 10, seconds)
            finally:
                svc.stop()
        return
    from sdcdist.data import write_microdata
    from sdcdist.data.synth import generate
    with tempfile.TemporaryDirectory(prefix="sdcdist-bench-service-") as tmp:
        tmp = Path(tmp)
        # -- 1. the demo -----------------------------------------------------------------
        demo = yaml.safe_load((ROOT / "examples" / "demo.yaml").read_text())
        t2 = yaml.safe_load((ROOT / "examples" / "dmt_table2.yaml").read_text())
        if a.quick:
            for m in t2["methods"]:
                if "params" in m:
                    m["params"] = m["params"][:2]
        t2_spec = tmp / "table2.yaml"
        t2_spec.write_text(yaml.safe_dump(t2))
        cli_demo, cli_demo_wall = cli_audit(ROOT / "examples" / "demo.yaml", tmp / "demo.zarr",
                                            a.workers)
        svc = Service(tmp / "root", a.workers)
        time.sleep(2.0)
        idle, _ = rss(svc.proc.pid)
        idle_tree = tree_rss(svc.proc.pid)
        svc.start_sampling()
        try:
            syn = demo["dataset"]["synthetic"]
            csv = tmp / "incomes.csv"
            write_microdata(generate(syn["rows"], columns=syn["columns"], seed=syn["seed"]),
                            csv)
            with csv.open("rb") as f:
                ds = svc.http.post("/v1/datasets", files={"file": ("incomes.csv", f)}).json()
            doc = dict(demo, dataset={"id": ds["id"], "name": demo["dataset"]["name"]})
            # a running service is warm: its first audit pays the imports, as a command's
            # start does (which the command's audit time leaves out); pay them untimed
            svc.submit({"name": "warm-up", "dataset": {"synthetic": {"rows": 100,
                                                                      "columns": 3}},
                        "methods": [{"name": "noise", "params": [0.1]}],
                        "metrics": ["IL1s"]})
            _, svc_demo = svc.submit(doc)
            print(f"demo audit (16 cells, {a.workers} workers): sdcdist audit {cli_demo:.1f} s "
                  f"(command {cli_demo_wall:.1f} s with cluster start), service submit-to-done "
                  f"{svc_demo:.1f} s: ratio service/command {svc_demo / cli_demo:.2f}")
            # -- 2. Table 2 ----------------------------------------------------------------
            t2_id, svc_t2 = svc.submit(t2)
            cells = svc.http.get(f"/v1/audits/{t2_id}").json()["cells_total"]
            line = f"Table-2 audit ({cells} cells): service submit-to-done {svc_t2:.1f} s"
            if not a.no_table2_cli:
                cli_t2, _ = cli_audit(t2_spec, tmp / "t2.zarr", a.workers)
                line += (f", sdcdist audit {cli_t2:.1f} s: ratio service/command "
                         f"{svc_t2 / cli_t2:.2f}")
            print(line)
            # -- 3. latency under load --------------------------------------------------
            queries = [f"/v1/audits/{t2_id}/query?where=DLD%20%3C%2010%20and%20IL%20%3C%2050"
                       f"&sort=Score&top=10", f"/v1/audits/{t2_id}/query?sort=Score2&top=20",
                       f"/v1/audits/{t2_id}/query?where=ID1%20%3E%2020"]
            cubes = [f"/v1/audits/{t2_id}/cube?metric=Score",
                     f"/v1/audits/{t2_id}/cube?method=rankswap&metric=DLD&metric=IL",
                     f"/v1/audits/{t2_id}/cube"]
            t0 = time.perf_counter()          # the first request opens and checks the cube
            svc.http.get(queries[0]).raise_for_status()
            print(f"first /query on the finished cube (opens it and checks every chunk): "
                  f"{time.perf_counter() - t0:.2f} s")
            for name, paths in (("/query", queries), ("/cube", cubes)):
                r = asyncio.run(load(svc.url, paths, a.clients, seconds))
                print(f"{name:7s} {a.clients} clients x {seconds:g} s: {r['rate']:.0f} "
                      f"requests/s, p50 {r['p50']:.0f} ms, p99 {r['p99']:.0f} ms "
                      f"({r['n']} requests, {r['errors']} errors)")
            results_latency(svc, 10, seconds)
            _, peak = rss(svc.proc.pid)
            print(f"service memory: idle {idle / 2**20:.0f} MiB, peak {peak / 2**20:.0f} MiB "
                  f"(service process); with the local cluster's workers: idle "
                  f"{idle_tree / 2**20:.0f} MiB, peak {svc.peak_tree / 2**20:.0f} MiB")
            # -- 5. memory of small requests ---------------------------------------------
            memory_per_request(svc)
        finally:
            svc.stop()


if __name__ == "__main__":
    main()
