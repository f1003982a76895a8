"""Cancels and deleted datasets, in-process (FastAPI's test client, the runner driven by
hand): a queued audit cancelled while the worker is picking it up is never started, a
dataset an audit still computes on cannot be deleted, and the results that need a deleted
dataset's data (release, compare, release report, resume) say so up front."""

from __future__ import annotations

import warnings

import numpy as np
import pytest

from sdcdist.data import Microdata, write_microdata
from sdcdist.service.app import ServiceConfig, create_app
from sdcdist.service.jobs import JobRunner
from sdcdist.service.store import Store

with warnings.catch_warnings():
    warnings.simplefilter("ignore")
    from fastapi.testclient import TestClient


@pytest.fixture
def svc(tmp_path):
    """A service whose runner is not started: the test calls its worker itself."""
    store = Store(tmp_path / "root")
    runner = JobRunner(store, None, max_running=1)
    app = create_app(ServiceConfig(root=store.root), runner=runner, store=store)
    with TestClient(app) as c:
        c.store, c.runner = store, runner
        csrf = c.get("/v1/csrf")
        if csrf.status_code == 200:
            c.headers["X-Sdcdist-Csrf"] = csrf.json()["token"]
        yield c


def _upload(c, tmp_path, name: str = "census") -> str:
    rng = np.random.default_rng(4)
    md = Microdata(np.column_stack([rng.normal(40, 9, 120).round(1),
                                    rng.gamma(2, 3, 120).round(2),
                                    rng.normal(5, 1, 120).round(2)]), ("AGE", "INC", "X"))
    path = tmp_path / f"{name}.csv"
    write_microdata(md, path)
    with path.open("rb") as f:
        r = c.post("/v1/datasets", files={"file": (path.name, f)}, data={"name": name})
    assert r.status_code == 201, r.text
    return r.json()["id"]


def _submit(c, ds: str, params: list = (2,)) -> str:
    spec = {"name": "a", "seed": 1, "dataset": {"id": ds},
            "methods": [{"name": "rankswap", "params": list(params)}],
            "replicates": 1, "metrics": ["IL1s"]}
    r = c.post("/v1/audits", json=spec)
    assert r.status_code == 202, r.text
    return r.json()["id"]


def test_queued_audit_cancelled_during_dispatch_is_never_started(svc, tmp_path,
                                                                 monkeypatch):
    import sdcdist.audit
    import sdcdist.audit.run
    ds = _upload(svc, tmp_path)
    aid = _submit(svc, ds, [2, 5, 10])
    load = sdcdist.audit.run.load_data
    cancels = []

    def load_then_cancel(spec):
        # the worker has taken the audit off the queue; the owner's DELETE lands now
        cancels.append(svc.delete(f"/v1/audits/{aid}"))
        return load(spec)

    ran = []
    monkeypatch.setattr(sdcdist.audit.run, "load_data", load_then_cancel)
    monkeypatch.setattr(sdcdist.audit, "run_audit", lambda *a, **k: ran.append(a))
    svc.runner._run(aid)
    assert cancels[0].status_code == 200, cancels[0].text
    assert "before it started; nothing was computed" in cancels[0].json()["error"]
    assert not ran                                  # never started
    a = svc.get(f"/v1/audits/{aid}").json()
    assert (a["status"], a["cells_done"], a["runs"], a["started"]) == \
        ("cancelled", 0, 0, None), a
    assert "before it started" in a["error"]
    assert svc.get(f"/v1/audits/{aid}/cube").status_code == 409     # no cube written


def test_cancel_reason_is_the_state_it_ends(tmp_path):
    store = Store(tmp_path / "root")
    store.add_audit("au_1", "ann", name="a", spec={}, cells_total=3)
    assert store.start_run("au_1", cells_done=0) == 1
    seen = []
    assert store.cancel("au_1", "ann", lambda row: seen.append(row["status"]) or "x")
    assert seen == ["running"] and store.audit("au_1")["status"] == "cancelled"
    assert not store.cancel("au_1", "ann", lambda row: "again")      # once
    assert store.start_run("au_1", cells_done=0) is None           # a cancel wins
    assert store.audit("au_1")["runs"] == 1


def test_a_delete_and_a_resume_or_submit_of_its_dataset_never_both_win(tmp_path):
    """Deleting an upload reads the audits and deletes in one transaction, as a submit
    and a resume check their uploads: a resume that starts while a delete is deciding
    waits for it and then finds the dataset gone (it would otherwise requeue an audit
    whose data is being removed)."""
    import threading

    from sdcdist.service.store import UploadsGone
    store = Store(tmp_path / "root")
    spec = {"name": "a", "dataset": {"name": "d", "path": "datasets/ds_0a.zarr"}}
    for i in ("ds_0a", "ds_0b"):
        store.add_dataset(i, "ann", name=i, filename="d.csv", rows=3, columns=["x"],
                          roles={}, sha256="0" * 64)
    store.add_audit("au_1", "ann", name="a", spec=spec, cells_total=1)
    store.finish("au_1", "failed", "x")
    entered, release, got = threading.Event(), threading.Event(), {}

    def deciding(row):                      # the delete's check, held open a moment
        entered.set()
        release.wait(10)
        return False
    delete = threading.Thread(target=lambda: got.update(
        delete=store.delete_dataset("ds_0a", "ann", busy=deciding)))
    delete.start()
    assert entered.wait(10)
    resume = threading.Thread(target=lambda: got.update(resume=store.requeue("au_1", "ann")))
    resume.start()
    resume.join(0.5)
    assert resume.is_alive()                # waits for the delete's transaction
    release.set()
    delete.join(10)
    resume.join(10)
    assert got == {"delete": "deleted", "resume": "deleted"}
    assert store.audit("au_1")["status"] == "failed"
    with pytest.raises(UploadsGone) as gone:
        store.add_audit("au_2", "ann", name="b", spec=spec, cells_total=1)
    assert gone.value.gone == [("ds_0a", "d")] and store.audit("au_2") is None
    # an active audit that reads it keeps a dataset; a second delete finds nothing
    other = {"name": "b", "dataset": {"name": "e", "path": "datasets/ds_0b.zarr"}}
    store.add_audit("au_3", "ann", name="c", spec=other, cells_total=1)
    busy = lambda a: "ds_0b" in a["spec"] and a["status"] in ("queued", "running")  # noqa: E731
    assert store.delete_dataset("ds_0b", "ann", busy=busy) == "used"
    assert store.dataset("ds_0b", "ann") is not None
    assert store.delete_dataset("ds_0a", "ann") == "missing"


def test_dataset_of_a_cancelled_audit_still_computing_is_kept(svc, tmp_path):
    ds = _upload(svc, tmp_path)
    aid = _submit(svc, ds)
    assert svc.delete(f"/v1/audits/{aid}").json()["status"] == "cancelled"
    with svc.runner._lock:                          # its worker has not stopped yet
        svc.runner._running[aid] = None
    r = svc.delete(f"/v1/datasets/{ds}")
    assert r.status_code == 409 and "used by an audit" in r.json()["detail"], r.text
    with svc.runner._lock:
        svc.runner._running.pop(aid)
    assert svc.delete(f"/v1/datasets/{ds}").status_code == 200


@pytest.mark.slow
def test_results_of_an_audit_whose_dataset_was_deleted(svc, tmp_path):
    ds = _upload(svc, tmp_path, "census")
    done = _submit(svc, ds)
    svc.runner._run(done)
    assert svc.get(f"/v1/audits/{done}").json()["status"] == "done"
    q = {"method": "rankswap", "param": 2, "replicate": 0}
    assert svc.get(f"/v1/audits/{done}/compare", params=q).status_code == 200   # cached
    queued = _submit(svc, ds)
    assert svc.delete(f"/v1/audits/{queued}").json()["status"] == "cancelled"
    assert svc.delete(f"/v1/datasets/{ds}").status_code == 200
    for route in ("release", "compare", "release-report"):
        r = svc.get(f"/v1/audits/{done}/{route}", params=q)
        detail = r.json()["detail"]
        assert r.status_code == 409, (route, r.text)
        assert f"'census' ({ds}) was deleted" in detail and "datasets/" not in detail
    for route in ("cube", "report", "summary"):                     # the cube's own
        assert svc.get(f"/v1/audits/{done}/{route}").status_code == 200, route
    r = svc.post(f"/v1/audits/{queued}/resume")
    assert r.status_code == 409 and f"({ds}) was deleted" in r.json()["detail"], r.text
    assert svc.get(f"/v1/audits/{queued}").json()["status"] == "cancelled"
    # a resume now finds the dataset gone in the same transaction (it cannot requeue)
    assert svc.store.requeue(queued, "local") == "deleted"
    # queued all the same (a root whose state was edited by hand): the worker says the
    # same, not a file path
    svc.store._exec("UPDATE audits SET status='queued' WHERE id=?", (queued,))
    svc.runner._run(queued)
    a = svc.get(f"/v1/audits/{queued}").json()
    assert a["status"] == "failed" and "was deleted" in a["error"], a
    assert "datasets/" not in a["error"]
