"""Audits on real multi-process clusters on loopback: identical cubes, faults, TLS, logs.

Each test starts ``dask scheduler`` and ``dask worker`` processes on 127.0.0.1
(:class:`sdcdist.testing.LoopbackCluster`) and runs ``sdcdist audit`` as a
separate process, as a Kubernetes job would. The dataset's values all lie in
[731000, 739000] so that any record value leaking into a log line, an error
message or a cube attribute is found by :func:`assert_no_record_values`.
"""

from __future__ import annotations

import json
import re
import subprocess
import sys
from collections import Counter
from pathlib import Path

import numpy as np
import pytest
import yaml
import zarr

from sdcdist.audit import load_spec, run_audit
from sdcdist.data import from_array, synth, write_microdata
from sdcdist.testing import LoopbackCluster

pytestmark = pytest.mark.slow

LOW, HIGH = 730_000.0, 740_000.0
CUBE_ARRAYS = ("value", "keyset_value", "excluded", "flag", "done")
_NUMBER = re.compile(r"(?<![\w.])[-+]?\d+(?:\.\d+)?(?:[eE][-+]?\d+)?(?![\w])")


def assert_no_record_values(text: str, where: str) -> None:
    """No number in ``text`` falls in the range the dataset's values live in."""
    hits = [m.group(0) for m in _NUMBER.finditer(text) if LOW <= abs(float(m.group(0))) <= HIGH]
    assert not hits, f"record-like values {hits[:5]} in {where}"


def distinctive_data(n: int = 240, p: int = 4) -> np.ndarray:
    x = synth.generate(n, columns=p, seed=3).values
    u = (x - x.min(0)) / (x.max(0) - x.min(0))
    return 731_000.0 + 8_000.0 * u


@pytest.fixture(scope="module")
def spec_file(tmp_path_factory) -> Path:
    d = tmp_path_factory.mktemp("audit")
    write_microdata(from_array(distinctive_data()), d / "people.zarr", chunk_rows=64)
    spec = {"name": "faults", "seed": 7,
            "dataset": {"name": "people", "path": "people.zarr"},
            # 21 cells: a fault after the 4th (or 2nd) written cell leaves most of them to
            # do on the surviving workers or in the resumed run
            "methods": [{"name": "noise", "params": [0.01, 0.05, 0.1, 0.3]},
                        {"name": "rankswap", "params": [1, 5, 20]}],
            "replicates": 3, "metrics": ["IL1s", "DLD"]}
    (d / "spec.yaml").write_text(yaml.safe_dump(spec))
    return d / "spec.yaml"


@pytest.fixture(scope="module")
def reference(spec_file, client, tmp_path_factory) -> dict[str, np.ndarray]:
    """The cube of the same spec on the in-process LocalCluster (the session client)."""
    out = tmp_path_factory.mktemp("ref") / "cube.zarr"
    run_audit(load_spec(spec_file), out, client=client)
    return cube_arrays(out)


def cube_arrays(path: Path) -> dict[str, np.ndarray]:
    g = zarr.open_group(str(path), mode="r")
    return {k: np.asarray(g[k][:]) for k in CUBE_ARRAYS}


def assert_same_cube(path: Path, reference: dict[str, np.ndarray]) -> None:
    got = cube_arrays(path)
    for k in CUBE_ARRAYS:  # bit-identical, NaNs in the same places
        assert got[k].tobytes() == reference[k].tobytes(), k
    assert_no_record_values(json.dumps(dict(zarr.open_group(str(path), mode="r").attrs)),
                            "cube attributes")


def audit_process(args: list[str], *, after: int | None = None, action=None,
                  env: dict | None = None) -> tuple[int, str, str, list[dict]]:
    """Run ``sdcdist --log-format json audit ...``; call ``action`` after ``after`` cells."""
    import os
    p = subprocess.Popen([sys.executable, "-m", "sdcdist.cli", "--log-format", "json", "audit",
                          *args, "--no-progress"], stdout=subprocess.PIPE,
                         stderr=subprocess.PIPE, text=True, env={**os.environ, **(env or {})})
    lines, events, cells = [], [], 0
    assert p.stderr is not None
    for line in p.stderr:
        lines.append(line)
        if line.startswith("{"):
            ev = json.loads(line)
            events.append(ev)
            if ev["event"] == "cell written":
                cells += 1
                if cells == after:
                    action()
    rc = p.wait(120)
    out, err = p.stdout.read(), "".join(lines)  # type: ignore[union-attr]
    stray = [ln for ln in lines if not ln.startswith("{")]
    assert not stray, f"non-JSON log lines with --log-format json: {stray[:3]}"
    assert_no_record_values(out + err, "the audit's output and logs")
    return rc, out, err, events


def written_cells(events: list[dict]) -> Counter:
    return Counter((e["method"], e["param"], e["replicate"]) for e in events
                   if e["event"] == "cell written")


def test_loopback_cluster_matches_localcluster_even_when_a_worker_is_killed(
        spec_file, reference, tmp_path):
    total = len(load_spec(spec_file).methods[0].params) * 3 + \
        len(load_spec(spec_file).methods[1].params) * 3
    with LoopbackCluster(2) as lc:
        rc, out, err, events = audit_process([str(spec_file), "--out", str(tmp_path / "a.zarr"),
                                              "--scheduler", lc.address])
        assert rc == 0, err
        assert_same_cube(tmp_path / "a.zarr", reference)
        connected = next(e for e in events if e["event"] == "connected")
        assert connected["dashboard"].startswith("http://127.0.0.1:")
        assert all(v == 1 for v in written_cells(events).values())
        assert sum(written_cells(events).values()) == total
        assert {"audit started", "connected", "audit finished"} <= {e["event"] for e in events}
        from distributed import Client
        with Client(lc.address) as c:      # the workers run without the profiler
            assert c.run(lambda dask_worker: "profile" in dask_worker.periodic_callbacks) \
                == {a: False for a in c.scheduler_info()["workers"]}

        # SIGKILL one worker (and its nanny) mid-audit: the audit completes, same cube
        rc, out, err, events = audit_process(
            [str(spec_file), "--out", str(tmp_path / "b.zarr"), "--scheduler", lc.address],
            after=4, action=lambda: lc.kill_worker(0))
        assert rc == 0, err
        assert lc.worker_procs[0].poll() is not None  # it really died
        assert_same_cube(tmp_path / "b.zarr", reference)
        cells = written_cells(events)
        assert sum(cells.values()) == total and set(cells.values()) == {1}  # none lost/doubled
        for name, text in lc.logs().items():
            assert_no_record_values(text, f"the {name} log")


def test_killing_the_scheduler_exits_1_and_a_rerun_resumes(spec_file, reference, tmp_path):
    out = tmp_path / "c.zarr"
    with LoopbackCluster(2) as lc:
        rc, _, err, events = audit_process([str(spec_file), "--out", str(out), "--scheduler",
                                            lc.address], after=4, action=lc.kill_scheduler)
        logs = lc.logs()
    assert rc == 1, err
    assert "Error: lost the connection to the Dask scheduler" in err
    assert "rerun the same command" in err and "Traceback" not in err
    assert any(e["event"] == "lost the scheduler" for e in events)
    done = int(np.asarray(zarr.open_group(str(out), mode="r")["done"][:]).sum())
    assert done >= 4
    with LoopbackCluster(2) as lc2:
        rc, stdout, err, events = audit_process([str(spec_file), "--out", str(out),
                                                 "--scheduler", lc2.address])
    assert rc == 0, err
    assert f"({done} already in the cube)" in stdout
    assert sum(written_cells(events).values()) == int(reference["done"].sum()) - done
    assert_same_cube(out, reference)
    for name, text in logs.items():
        assert_no_record_values(text, f"the {name} log")


def test_scheduler_loss_in_distributed_cell_mode_exits_1(spec_file, tmp_path):
    """Cells spread over the cluster (large-file mode): a lost scheduler must not hang."""
    spec = yaml.safe_load(spec_file.read_text())
    spec["options"] = {"cell_mode": "distributed"}
    spec["dataset"]["path"] = str(spec_file.parent / "people.zarr")
    (tmp_path / "spec.yaml").write_text(yaml.safe_dump(spec))
    with LoopbackCluster(2) as lc:
        rc, _, err, _ = audit_process([str(tmp_path / "spec.yaml"), "--out",
                                       str(tmp_path / "d.zarr"), "--scheduler", lc.address],
                                      after=2, action=lc.kill_scheduler)
    assert rc == 1, err
    assert "Error: lost the connection to the Dask scheduler" in err


def test_tls_cluster(spec_file, reference, tmp_path):
    from click.testing import CliRunner
    from distributed import Client, Security

    from sdcdist.cli import main
    r = CliRunner().invoke(main, ["certs", "--out", str(tmp_path / "tls")])
    assert r.exit_code == 0, r.output
    CliRunner().invoke(main, ["certs", "--out", str(tmp_path / "rogue")])
    assert oct((tmp_path / "tls" / "client.key").stat().st_mode & 0o777) == "0o600"
    tls = [f"--tls-{k}" for k in ("ca", "cert", "key")]
    files = [str(tmp_path / "tls" / n) for n in ("ca.crt", "client.crt", "client.key")]
    with LoopbackCluster(2, tls_dir=tmp_path / "tls") as lc:
        assert lc.address.startswith("tls://127.0.0.1:")
        rc, _, err, events = audit_process(
            [str(spec_file), "--out", str(tmp_path / "t.zarr"), "--scheduler", lc.address,
             *[a for pair in zip(tls, files) for a in pair]])
        assert rc == 0, err
        assert_same_cube(tmp_path / "t.zarr", reference)
        with Client(lc.address, security=lc.security()) as c:  # workers too are on tls://
            assert all(w.startswith("tls://") for w in c.scheduler_info()["workers"])
        rogue = Security(tls_ca_file=str(tmp_path / "rogue" / "ca.crt"),
                         tls_client_cert=str(tmp_path / "rogue" / "client.crt"),
                         tls_client_key=str(tmp_path / "rogue" / "client.key"),
                         require_encryption=True)
        with pytest.raises((OSError, TimeoutError)):  # a certificate from another CA
            Client(lc.address, security=rogue, timeout="3s")
        with pytest.raises((OSError, TimeoutError)):  # plain tcp to a TLS scheduler
            Client("tcp://" + lc.address[len("tls://"):], timeout="3s")
        # the CLI without certificates: a clear user error, exit 2
        rc, _, err, _ = audit_process([str(spec_file), "--out", str(tmp_path / "u.zarr"),
                                       "--scheduler", "tcp://" + lc.address[len("tls://"):]])
        assert rc == 2 and "cannot reach the Dask scheduler" in err
        for name, text in lc.logs().items():
            assert_no_record_values(text, f"the {name} log")


def test_unexpected_failure_exits_1_without_values(tmp_path, monkeypatch):
    from click.testing import CliRunner

    import sdcdist.audit as audit_pkg
    from sdcdist.cli import main

    def boom(*a, **k):
        raise RuntimeError(f"secret detail {LOW + 1234.5}")
    monkeypatch.setattr(audit_pkg, "run_audit", boom)
    spec = tmp_path / "s.yaml"
    spec.write_text(yaml.safe_dump({"dataset": {"synthetic": {"rows": 30}},
                                    "methods": [{"name": "noise", "params": [0.1]}],
                                    "metrics": ["IL1s"]}))
    r = CliRunner().invoke(main, ["audit", str(spec), "--out", str(tmp_path / "c.zarr"),
                                  "--workers", "1"])
    assert r.exit_code == 1
    assert "unexpected failure (RuntimeError in test_cluster.py:" in r.output
    assert_no_record_values(r.output, "the error message")
