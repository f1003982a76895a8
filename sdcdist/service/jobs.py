"""Running audits for the service: a queue in the store, worker threads, one Dask client.

Each accepted audit is a row of the store (status ``queued``). A dispatcher
thread starts up to ``max_running`` of them at once, each in its own thread
calling :func:`sdcdist.audit.run_audit` on the service's one Dask client, so
audits of several principals share the cluster. Every cell the runner writes
is recorded in the store (``cells``) and counted in ``cells_done``.

A restarted service puts the audits its previous process left ``running``
back in the queue; the runner then resumes each from its cube, computing only
the cells not yet marked done there. A cancelled audit stops at its next
finished cell (its cube keeps the cells written so far); one cancelled while queued is
never started: the start and the cancel are each one transaction of the store, and the
worker starts an audit only if it is still queued.
"""

from __future__ import annotations

import errno
import json
import logging
import sqlite3
import threading
import time
from typing import Any

from ..errors import SdcInputError
from ..logs import event
from .store import Store, deleted_message

__all__ = ["JobRunner"]

log = logging.getLogger("sdcdist.service")


class _Stop(Exception):
    """Raised in a running audit's cell callback to stop it (cancel or shutdown)."""


class JobRunner:
    """Runs the store's queued audits on ``client``, ``max_running`` at a time."""

    def __init__(self, store: Store, client: Any, *, max_running: int = 4):
        self.store = store
        self.client = client
        self.max_running = max_running
        self._running: dict[str, threading.Thread] = {}
        self._cancel: set[str] = set()
        self._lock = threading.Lock()
        self._wake = threading.Event()
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self._unsaid: dict[str, str] = {}      # audit -> failure not yet stored (disk full)
        self._workers: tuple[float, int | None] = (0.0, None)

    # -- control -------------------------------------------------------------
    def start(self) -> None:
        removed = self.store.clean()
        if removed:
            event(log, "removed half-made uploads", entries=removed)
        n = self.store.requeue_running()
        if n:
            event(log, "resuming audits", audits=n)
        self._thread = threading.Thread(target=self._dispatch, daemon=True,
                                        name="sdcdist-dispatch")
        self._thread.start()

    def notify(self) -> None:
        """A new audit was queued."""
        self._wake.set()

    def cancel(self, audit_id: str) -> None:
        """Stop a running audit at its next cell (its ``cancelled`` state is in the store
        already; a queued one is not started)."""
        with self._lock:
            self._cancel.add(audit_id)

    def shutdown(self, timeout: float = 10.0) -> None:
        """Stop dispatching; running audits stop at their next cell and stay ``running``
        in the store, so the next start resumes them."""
        self._stop.set()
        self._wake.set()
        with self._lock:
            threads = list(self._running.values())
        for t in threads:
            t.join(timeout / max(1, len(threads)))

    @property
    def running(self) -> list[str]:
        with self._lock:
            return list(self._running)

    def workers(self) -> int | None:
        """Workers of the cluster (asked at most every 2 s; None: cannot tell)."""
        at, n = self._workers
        if time.monotonic() - at < 2.0:
            return n
        try:
            n = len(self.client.scheduler_info().get("workers", {}))
        except Exception:               # noqa: BLE001 - a lost scheduler: cannot tell
            n = None
        self._workers = (time.monotonic(), n)
        return n

    def note(self, a: dict[str, Any]) -> str | None:
        """Why an active audit does not move, if the runner knows; else None."""
        with self._lock:
            unsaid = self._unsaid.get(a["id"])
        if unsaid is not None:
            return unsaid
        if a["status"] not in ("queued", "running") or self.client is None:
            return None
        if getattr(self.client, "status", "running") in ("closed", "closing"):
            return ("the service lost its Dask cluster; the audit waits until the service "
                    "is restarted")
        if self.workers() == 0:
            return ("the Dask cluster has no workers; the audit waits until a worker joins "
                    "(ask the operator)")
        return None

    # -- the dispatcher --------------------------------------------------------
    def _dispatch(self) -> None:
        while not self._stop.is_set():
            try:
                self._say_unsaid()
                self._start_some()
            except Exception as exc:   # noqa: BLE001 - keep dispatching
                event(log, "dispatch failed", logging.ERROR, kind=type(exc).__name__)
            self._wake.wait(0.5)
            self._wake.clear()

    def _start_some(self) -> None:
        with self._lock:
            free = self.max_running - len(self._running)
            busy = set(self._running) | set(self._unsaid)   # unsaid: failed, not yet stored
        if free <= 0:
            return
        for a in self.store.queued():
            if free <= 0 or self._stop.is_set():
                break
            if a["id"] in busy:
                continue
            t = threading.Thread(target=self._run, args=(a["id"],), daemon=True,
                                 name=f"sdcdist-audit-{a['id']}")
            with self._lock:
                self._running[a["id"]] = t
            t.start()
            free -= 1

    def _fail(self, audit_id: str, message: str) -> None:
        """Mark the audit failed; if the store cannot be written (a full disk), keep the
        reason, show it as the audit's note, and write it when the store can be written
        again (the dispatcher retries). The message names no absolute server path."""
        from .security import hide_root
        message = hide_root(message, self.store.root)
        try:
            self.store.finish(audit_id, "failed", message)
        except Exception as exc:        # noqa: BLE001 - retried by the dispatcher
            with self._lock:
                self._unsaid[audit_id] = message
            event(log, "cannot record a failed audit yet", logging.ERROR, audit=audit_id,
                  kind=type(exc).__name__)
        else:
            with self._lock:
                self._unsaid.pop(audit_id, None)

    def _say_unsaid(self) -> None:
        with self._lock:
            pending = dict(self._unsaid)
        for audit_id, message in pending.items():
            try:
                self.store.finish(audit_id, "failed", message)
            except Exception:           # noqa: BLE001 - still full: next round
                return
            with self._lock:
                self._unsaid.pop(audit_id, None)

    # -- one audit ---------------------------------------------------------------
    def _run(self, audit_id: str) -> None:
        try:
            self._run_audit(audit_id)
        except BaseException as exc:   # noqa: BLE001 - the audit fails, the runner lives
            if not self._stop.is_set():
                self._fail(audit_id, _reason(self.client, audit_id, exc))
                event(log, "audit failed", logging.ERROR, audit=audit_id,
                      kind=type(exc).__name__)
        finally:
            with self._lock:
                self._running.pop(audit_id, None)
                self._cancel.discard(audit_id)
            self._wake.set()

    def _run_audit(self, audit_id: str) -> None:
        from .. import cube as cubemod
        from ..audit import parse_spec, run_audit
        from ..audit.run import load_data
        store = self.store
        a = store.audit(audit_id)
        if a is None or a["status"] != "queued":
            return
        out = str(store.cube_path(audit_id))
        gone = store.deleted_uploads(a["spec"], a["owner"])
        if gone:
            self._fail(audit_id, deleted_message(gone))
            return
        try:
            spec = parse_spec(json.loads(a["spec"]), base_dir=store.root)
            data = load_data(spec)
        except SdcInputError as exc:
            self._fail(audit_id, _message(exc))
            return
        done = 0
        if store.cube_path(audit_id).exists():
            try:
                done = int(cubemod.done_cells(out).sum())
            except Exception:           # noqa: BLE001 - an unreadable cube: the runner says
                done = 0
        store.audit_dir(audit_id).mkdir(parents=True, exist_ok=True)
        with self._lock:
            # a cancel is recorded in the store before it reaches the runner; one that
            # reached it for an earlier run of this audit (cancelled, then resumed before
            # its thread got here) is not this run's
            run = store.start_run(audit_id, cells_done=done)
            if run is not None:
                self._cancel.discard(audit_id)
        if run is None:             # cancelled while queued: never started
            event(log, "audit not started", audit=audit_id, reason="cancelled")
            return
        event(log, "audit started", audit=audit_id, run=run, cells_total=a["cells_total"],
              resumed_from=done)

        def on_cell(cell: Any) -> None:
            store.add_cell(audit_id, run, dataset=cell.dataset, method=cell.method,
                           param=cell.param, replicate=cell.replicate)
            if self._stop.is_set() or audit_id in self._cancel:
                raise _Stop()

        try:
            res = run_audit(spec, out, client=self.client, on_cell=on_cell, data=data)
        except _Stop:
            event(log, "audit stopped", audit=audit_id,
                  reason="shutdown" if self._stop.is_set() else "cancelled")
            return
        except SdcInputError as exc:
            self._fail(audit_id, _message(exc))
            event(log, "audit failed", logging.WARNING, audit=audit_id, kind="input")
            return
        except BaseException as exc:   # noqa: BLE001 - the audit fails, the service lives
            if self._stop.is_set():
                return                  # the cluster went away at shutdown: resumed later
            if audit_id in self._cancel:
                return
            self._fail(audit_id, _reason(self.client, audit_id, exc))
            event(log, "audit failed", logging.ERROR, audit=audit_id,
                  kind=type(exc).__name__)
            return
        store.finish(audit_id, "done")
        event(log, "audit finished", audit=audit_id, computed=res.computed,
              skipped=res.skipped, total=res.total, seconds=round(res.seconds, 2))


#: what a Dask client raises when its scheduler or the workers holding results are gone
_LOST = ("FutureCancelledError", "CancelledError", "CommClosedError", "StreamClosedError",
         "TimeoutError")


def disk_full(exc: BaseException) -> bool:
    """Whether ``exc`` (or what caused it) says the disk is full."""
    seen: set[int] = set()
    e: BaseException | None = exc
    while e is not None and id(e) not in seen:
        seen.add(id(e))
        if _disk_full(e):
            return True
        e = e.__cause__ or e.__context__
    return False


def _disk_full(exc: BaseException) -> bool:
    return (isinstance(exc, OSError) and exc.errno in (errno.ENOSPC, errno.EDQUOT)) or \
        (isinstance(exc, sqlite3.OperationalError) and "full" in str(exc))


def _reason(client: Any, audit_id: str, exc: BaseException) -> str:
    """The one-line reason a failed audit shows: what happened, and what to do."""
    resume = (f"the cells already written are kept in its cube: resume it with POST "
              f"/v1/audits/{audit_id}/resume")
    seen: set[int] = set()
    e: BaseException | None = exc
    while e is not None and id(e) not in seen:      # the cause may be wrapped
        seen.add(id(e))
        if _disk_full(e):
            return f"the disk under the service's root is full ({type(e).__name__}); " \
                   f"once the operator has freed space, {resume}"
        e = e.__cause__ or e.__context__
    name = type(exc).__name__
    lost = name in _LOST or getattr(client, "status", "running") in ("closed", "closing")
    if lost:
        return (f"the Dask cluster was lost while the audit ran ({name}); once it is back, "
                f"{resume}")
    if name == "KilledWorker":
        return (f"a Dask worker died computing a cell of this audit ({name}; often out of "
                f"memory); {resume} after the operator has given the workers more memory")
    return f"unexpected failure ({name}); {resume}"


def _message(exc: BaseException) -> str:
    from ..text import redact
    return redact(str(exc))
