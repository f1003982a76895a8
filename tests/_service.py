"""Helpers of the service tests: a real ``sdcdist serve`` process on a free loopback port."""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import httpx

import sdcdist

ROOT = Path(sdcdist.__file__).resolve().parents[1]


def env() -> dict[str, str]:
    path = os.pathsep.join(p for p in (str(ROOT), os.environ.get("PYTHONPATH")) if p)
    return {**os.environ, "PYTHONPATH": path}


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def hash_token(name: str) -> tuple[str, str]:
    """(token, tokens-file line) from ``sdcdist serve --hash-token NAME``."""
    r = subprocess.run([sys.executable, "-m", "sdcdist.cli", "serve", "--hash-token", name],
                       capture_output=True, text=True, env=env(), timeout=60,
                       stdin=subprocess.DEVNULL)
    assert r.returncode == 0, r.stderr
    token = r.stderr.strip().splitlines()[-1]
    return token, r.stdout.strip()


class PortTaken(RuntimeError):
    """The service could not bind the port picked for it."""


class Server:
    """``sdcdist serve`` in its own process group; ``kill()`` is a SIGKILL of the group
    (the service and its local cluster's worker processes, as a killed pod)."""

    def __init__(self, root: Path, log: Path, *args: str, verify: Any = True):
        self.root, self.log, self.args, self.verify = root, log, args, verify
        self.scheme = "https" if "--certfile" in args else "http"
        self.port = free_port()
        self.url = f"{self.scheme}://127.0.0.1:{self.port}"
        self.proc: subprocess.Popen | None = None

    def start(self, timeout: float = 180, tries: int = 3) -> "Server":
        """Start the service on a free port; another free port when the one picked was
        taken before the service bound it (its own local cluster, or another test's, may
        have drawn the same port in between)."""
        for attempt in range(tries):
            try:
                return self._start(timeout)
            except PortTaken:
                if attempt == tries - 1:
                    raise
        raise AssertionError("unreachable")

    def _start(self, timeout: float) -> "Server":
        self.port = free_port()
        self.url = f"{self.scheme}://127.0.0.1:{self.port}"
        before = self.log.stat().st_size if self.log.exists() else 0
        f = self.log.open("ab")
        self.proc = subprocess.Popen(
            [sys.executable, "-m", "sdcdist.cli", "--log-level", "info", "serve",
             "--root", str(self.root), "--port", str(self.port), "--workers", "1",
             *self.args], stdout=f, stderr=subprocess.STDOUT, env=env(),
            start_new_session=True, stdin=subprocess.DEVNULL)
        f.close()
        t0 = time.monotonic()
        while time.monotonic() - t0 < timeout:
            if self.proc.poll() is not None:
                text = self.log.read_bytes()[before:].decode(errors="replace")
                if f"('127.0.0.1', {self.port}): address already in use" in text:
                    raise PortTaken(self.port)
                raise RuntimeError(f"the service exited ({self.proc.returncode}):\n"
                                   + self.log.read_text(errors="replace")[-3000:])
            try:
                if httpx.get(self.url + "/v1/health", timeout=2,
                             verify=self.verify).status_code == 200:
                    return self
            except httpx.HTTPError:
                pass
            time.sleep(0.3)
        self.stop()
        raise RuntimeError("the service did not come up:\n" + self.log.read_text()[-3000:])

    def kill(self) -> None:
        if self.proc is not None and self.proc.poll() is None:
            os.killpg(self.proc.pid, signal.SIGKILL)
            self.proc.wait(30)

    def stop(self) -> None:
        if self.proc is None or self.proc.poll() is not None:
            return
        os.killpg(self.proc.pid, signal.SIGTERM)
        try:
            self.proc.wait(30)
        except subprocess.TimeoutExpired:
            self.kill()


def wait_done(http: httpx.Client, audit_id: str, timeout: float = 240) -> dict:
    t0 = time.monotonic()
    while time.monotonic() - t0 < timeout:
        a = http.get(f"/v1/audits/{audit_id}").json()
        if a["status"] not in ("queued", "running"):
            return a
        time.sleep(0.2)
    raise TimeoutError(f"audit {audit_id} still {a['status']} ({a['cells_done']} of "
                       f"{a['cells_total']} cells)")
