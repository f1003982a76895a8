"""Helpers for tests and benchmarks.

:class:`LoopbackCluster` is a real multi-process Dask cluster on 127.0.0.1,
started the way Kubernetes starts one: ``dask scheduler`` and N ``dask worker``
processes (each with its nanny, in its own process group so a SIGKILL takes
the whole "pod"), optionally over mutually authenticated TLS. For tests,
benchmarks and trying a deployment locally; it only ever listens on the
loopback interface.

:func:`cube_fingerprints` hashes the numbers of a cube per metric, so two
cubes can be compared bit for bit without keeping either.
"""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from .parallel import worker_config_env
from .simd import PIN_ENV

__all__ = ["LoopbackCluster", "cube_fingerprints"]


def cube_fingerprints(path: str | os.PathLike, *,
                      variables: tuple[str, ...] = ("value", "keyset_value", "excluded", "flag")
                      ) -> dict[str, str]:
    """SHA-256 per metric of a cube's ``value``, ``keyset_value``, ``excluded`` and ``flag``.

    Each hash covers, for the metric's slice of each of the four arrays in that
    order, the array's name, its shape and its bytes (C order), as stored: the
    ``dataset`` dimension is kept even for one dataset. Equal fingerprints mean
    bit-identical numbers.

    Parameters
    ----------
    path : path of a Zarr cube
    variables : tuple of str
        The arrays hashed, in this order (default: all four).

    Returns
    -------
    dict of str -> str
        Metric name -> hex digest, in the cube's metric order.
    """
    import hashlib

    import numpy as np
    import xarray as xr
    ds = xr.open_zarr(str(path), consolidated=False, chunks=None).load()   # not through a cluster
    out = {}
    for i, m in enumerate(str(m) for m in ds["metric"].values):
        h = hashlib.sha256()
        for var in variables:
            a = np.ascontiguousarray(ds[var].isel(metric=i).values)
            h.update(var.encode())
            h.update(str(a.shape).encode())
            h.update(a.tobytes())
        out[m] = h.hexdigest()
    return out


class LoopbackCluster:
    """``dask scheduler`` + ``n_workers`` ``dask worker`` processes on 127.0.0.1.

    Parameters
    ----------
    n_workers : int
    tls_dir : path, optional
        A directory made by :func:`sdcdist.certs.make_certs`: the scheduler and
        workers then listen on ``tls://`` only.
    scheduler_args, worker_args : list of str, optional
        Extra ``dask scheduler`` / ``dask worker`` arguments (e.g. those of a
        Kubernetes manifest); the loopback host, ports, names and scheduler file
        given after them take precedence.
    timeout : float
        Seconds to wait for the scheduler and every worker.
    """

    def __init__(self, n_workers: int = 2, *, tls_dir: str | os.PathLike | None = None,
                 scheduler_args: list[str] | None = None,
                 worker_args: list[str] | None = None, timeout: float = 60.0):
        self.n_workers = n_workers
        self.tls_dir = Path(tls_dir) if tls_dir else None
        self.scheduler_args = list(scheduler_args or [])
        self.worker_args = list(worker_args or [])
        self.timeout = timeout
        self.workdir = Path(tempfile.mkdtemp(prefix="sdcdist-loopback-"))
        self.scheduler_proc: subprocess.Popen | None = None
        self.worker_procs: list[subprocess.Popen] = []
        self.address = ""

    # -- process handling ---------------------------------------------------
    def _tls(self, role: str, ca_flag: str = "--tls-ca-file") -> list[str]:
        if self.tls_dir is None:
            return []
        d = self.tls_dir
        return [ca_flag, str(d / "ca.crt"), "--tls-cert", str(d / f"{role}.crt"),
                "--tls-key", str(d / f"{role}.key")]

    def _spawn(self, name: str, args: list[str]) -> subprocess.Popen:
        log = open(self.workdir / f"{name}.log", "wb")
        return subprocess.Popen([sys.executable, "-m", *args], stdout=log,
                                stderr=subprocess.STDOUT, start_new_session=True,
                                env={**PIN_ENV, **worker_config_env(), **os.environ,
                                     "PYTHONUNBUFFERED": "1"})

    def start(self) -> "LoopbackCluster":
        sfile = self.workdir / "scheduler.json"
        proto = ["--protocol", "tls"] if self.tls_dir else []
        self.scheduler_proc = self._spawn("scheduler", [
            "distributed.cli.dask_scheduler", *self.scheduler_args,
            "--host", "127.0.0.1", "--port", "0",
            "--dashboard-address", "127.0.0.1:0", "--scheduler-file", str(sfile), *proto,
            *self._tls("scheduler")])
        deadline = time.monotonic() + self.timeout
        while not sfile.exists() or not sfile.read_text().strip():
            if self.scheduler_proc.poll() is not None or time.monotonic() > deadline:
                raise RuntimeError("the loopback scheduler did not start:\n" + self.log("scheduler"))
            time.sleep(0.1)
        self.address = json.loads(sfile.read_text())["address"]
        for i in range(self.n_workers):
            self.add_worker()
        self.wait_for_workers(self.n_workers)
        return self

    def add_worker(self) -> None:
        i = len(self.worker_procs)
        self.worker_procs.append(self._spawn(f"worker{i}", [
            "distributed.cli.dask_worker", *self.worker_args, self.address,
            "--name", f"worker{i}", "--nthreads", "1", "--host", "127.0.0.1",
            "--no-dashboard", *self._tls("worker")]))

    def security(self, role: str = "client") -> Any:
        if self.tls_dir is None:
            return None
        from distributed import Security
        d = self.tls_dir
        return Security(tls_ca_file=str(d / "ca.crt"), tls_client_cert=str(d / f"{role}.crt"),
                        tls_client_key=str(d / f"{role}.key"), require_encryption=True)

    def client(self, **kwargs: Any) -> Any:
        from distributed import Client
        sec = self.security()
        return Client(self.address, timeout="20s", **({"security": sec} if sec else {}),
                      **kwargs)

    def wait_for_workers(self, n: int) -> None:
        with self.client() as c:
            c.wait_for_workers(n, timeout=self.timeout)

    def kill_worker(self, i: int, sig: int = signal.SIGKILL) -> None:
        """Kill worker ``i`` and its nanny at once, like a pre-empted pod."""
        os.killpg(self.worker_procs[i].pid, sig)
        self.worker_procs[i].wait(30)

    def kill_scheduler(self, sig: int = signal.SIGKILL) -> None:
        assert self.scheduler_proc is not None
        os.killpg(self.scheduler_proc.pid, sig)
        self.scheduler_proc.wait(30)

    def log(self, name: str) -> str:
        p = self.workdir / f"{name}.log"
        return p.read_text(errors="replace") if p.exists() else ""

    def logs(self) -> dict[str, str]:
        """Everything the scheduler and the workers printed (for scanning)."""
        return {p.stem: p.read_text(errors="replace") for p in sorted(self.workdir.glob("*.log"))}

    def close(self) -> None:
        procs = [p for p in [self.scheduler_proc, *self.worker_procs] if p is not None]
        for p in procs:
            if p.poll() is None:
                try:
                    os.killpg(p.pid, signal.SIGTERM)
                except ProcessLookupError:
                    pass
        for p in procs:
            try:
                p.wait(15)
            except subprocess.TimeoutExpired:
                os.killpg(p.pid, signal.SIGKILL)
                p.wait(15)
        shutil.rmtree(self.workdir, ignore_errors=True)  # read logs() before closing

    def __enter__(self) -> "LoopbackCluster":
        return self.start()

    def __exit__(self, *exc: Any) -> None:
        self.close()
