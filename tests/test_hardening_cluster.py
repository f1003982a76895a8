"""Losing workers mid-audit on a real loopback cluster (issue 14, item 15).

Kubernetes pre-empts and scales workers down at any time, so every input a
task needs must survive the loss of any one worker. Each audit here runs
against ``dask scheduler`` + ``dask worker`` processes on 127.0.0.1 and kills
workers at fixed points — the worker that holds a value right after it was
shared, and others after a given number of cells — and the cube must be the
one computed without a cluster, bit for bit. The kills are triggered by the
audit's own callbacks (the share hook and ``on_cell``), not by timers.
"""

from __future__ import annotations

import os
import signal

import numpy as np
import pytest
import yaml
import zarr

from sdcdist.audit import load_spec, run_audit
from sdcdist.data import synth, write_microdata
from sdcdist.parallel import runner as runner_mod
from sdcdist.testing import LoopbackCluster

pytestmark = pytest.mark.slow

CUBE_ARRAYS = ("value", "keyset_value", "excluded", "flag", "done")


@pytest.fixture(scope="module")
def spec_path(tmp_path_factory):
    d = tmp_path_factory.mktemp("kills")
    write_microdata(synth.generate(200, columns=4, seed=5), d / "people.zarr", chunk_rows=50)
    spec = {"name": "kills", "seed": 11,
            "dataset": {"name": "people", "path": str(d / "people.zarr")},
            "methods": [{"name": "noise", "params": [0.05, 0.2]},
                        {"name": "rankswap", "params": [2, 10]}],
            "replicates": 2, "metrics": ["IL1s", "DLD", "PLD"],
            "options": {"chunk_rows": 50}}
    (d / "spec.yaml").write_text(yaml.safe_dump(spec))
    return d / "spec.yaml"


def _with_mode(spec_path, mode: str):
    spec = yaml.safe_load(spec_path.read_text())
    spec["options"]["cell_mode"] = mode
    p = spec_path.parent / f"spec-{mode}.yaml"
    p.write_text(yaml.safe_dump(spec))
    return p


def cube(path) -> dict[str, bytes]:
    g = zarr.open_group(str(path), mode="r")
    return {k: np.asarray(g[k][:]).tobytes() for k in CUBE_ARRAYS}


class Killer:
    """Kills workers of a LoopbackCluster at shares and cells of an audit, deterministically.

    ``at_share[i]`` / ``at_cell[i]``: how to kill at the i-th share / after the
    i-th written cell: ``"gone"`` kills the worker holding the latest shared
    value with its nanny (a pre-empted pod, never back); ``"restart"`` kills
    only that worker's process (its nanny starts a new one, empty).
    """

    def __init__(self, lc: LoopbackCluster, client, *, at_share=None, at_cell=None):
        self.lc, self.client = lc, client
        self.at_share, self.at_cell = dict(at_share or {}), dict(at_cell or {})
        self.shares, self.cells, self.last = 0, 0, None
        self.killed: list[tuple[str, str]] = []

    def on_share(self, runner, handle) -> None:
        if runner.client is not self.client:
            return
        self.shares += 1
        self.last = handle
        if self.shares in self.at_share:
            self.kill_holder(handle, self.at_share[self.shares], f"share {self.shares}")

    def on_cell(self, cell) -> None:
        self.cells += 1
        if self.cells in self.at_cell and self.last is not None:
            self.kill_holder(self.last, self.at_cell[self.cells], f"cell {self.cells}")

    def kill_holder(self, handle, how: str, when: str) -> None:
        from distributed import wait
        wait(handle, timeout=60)           # the value now sits on a worker: kill that one
        addr = sorted(self.client.who_has([handle])[handle.key])[0]
        name = self.client.scheduler_info()["workers"][addr]["name"]
        if how == "gone":
            self.lc.kill_worker(int(str(name).removeprefix("worker")))
        else:
            pid = self.client.run(os.getpid, workers=[addr])[addr]
            os.kill(pid, signal.SIGKILL)
        self.killed.append((when, how))


@pytest.fixture(scope="module")
def references(spec_path):
    """The cubes without a cluster (every task in this process)."""
    out = {}
    for mode in ("task", "distributed"):
        p = spec_path.parent / f"ref-{mode}.zarr"
        run_audit(load_spec(_with_mode(spec_path, mode)), p)
        out[mode] = cube(p)
    assert out["task"] == out["distributed"]
    return out


# (cell mode, kills at shares, kills after cells); 3 workers, at most 2 gone per run
SCENARIOS = [
    ("task", {1: "gone"}, {2: "gone"}),
    ("distributed", {2: "gone", 9: "restart"}, {3: "gone"}),
    ("task", {1: "restart"}, {1: "gone", 5: "gone"}),
]


def test_killed_workers_do_not_kill_the_audit(spec_path, references, tmp_path):
    with LoopbackCluster(3) as lc:
        for i, (mode, at_share, at_cell) in enumerate(SCENARIOS):
            alive = [p for p in lc.worker_procs if p.poll() is None]
            for _ in range(3 - len(alive)):
                lc.add_worker()
            lc.wait_for_workers(3)
            with lc.client() as client:
                killer = Killer(lc, client, at_share=at_share, at_cell=at_cell)
                runner_mod._SHARE_HOOKS.append(killer.on_share)
                try:
                    out = tmp_path / f"{i}.zarr"
                    run_audit(load_spec(_with_mode(spec_path, mode)), out, client=client,
                              on_cell=killer.on_cell)
                finally:
                    runner_mod._SHARE_HOOKS.remove(killer.on_share)
            assert len(killer.killed) == len(at_share) + len(at_cell), killer.killed
            assert cube(out) == references[mode], (mode, killer.killed)
        logs = "\n".join(lc.logs().values())
    assert "lose scattered data" not in logs
