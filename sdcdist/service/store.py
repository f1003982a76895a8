"""The service's state: datasets, audits and finished cells in SQLite (WAL) under ``--root``.

Layout of the root folder::

    state.sqlite            this store (write-ahead log, synchronous=FULL)
    datasets/<id>.zarr      uploaded datasets, ingested as `sdcdist ingest` does
    audits/<id>/cube.zarr   audit cubes, written cell by cell by the audit runner
    tmp/                    uploads being received and validated; removed when done

An audit row is committed before its submission is answered (202), so an
accepted audit survives a kill. Each written cell is a row of ``cells`` with
the run that computed it: a cell computed twice would show as two rows.
Nothing here holds record values: schemas, counts, hashes and metric values
of finished cells only.
"""

from __future__ import annotations

import json
import os
import re
import secrets
import sqlite3
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any, Callable

__all__ = ["Store", "ACTIVE", "FINAL", "UploadsGone"]

#: audit states; ``queued`` and ``running`` count against a principal's limit
ACTIVE = ("queued", "running")
FINAL = ("done", "failed", "cancelled")

_SCHEMA = """
CREATE TABLE IF NOT EXISTS datasets (
    id TEXT PRIMARY KEY, owner TEXT NOT NULL, name TEXT NOT NULL, filename TEXT NOT NULL,
    rows INTEGER NOT NULL, columns TEXT NOT NULL, roles TEXT NOT NULL,
    sha256 TEXT NOT NULL, created REAL NOT NULL);
CREATE TABLE IF NOT EXISTS audits (
    seq INTEGER PRIMARY KEY AUTOINCREMENT, id TEXT UNIQUE NOT NULL, owner TEXT NOT NULL,
    name TEXT NOT NULL, spec TEXT NOT NULL, status TEXT NOT NULL,
    cells_done INTEGER NOT NULL DEFAULT 0, cells_total INTEGER NOT NULL,
    created REAL NOT NULL, started REAL, finished REAL, error TEXT,
    runs INTEGER NOT NULL DEFAULT 0, resumed_from INTEGER NOT NULL DEFAULT 0);
CREATE TABLE IF NOT EXISTS cells (
    seq INTEGER PRIMARY KEY AUTOINCREMENT, audit TEXT NOT NULL, run INTEGER NOT NULL,
    dataset TEXT NOT NULL, method TEXT NOT NULL, param REAL NOT NULL,
    replicate INTEGER NOT NULL, at REAL NOT NULL);
CREATE INDEX IF NOT EXISTS cells_audit ON cells(audit, seq);
CREATE INDEX IF NOT EXISTS audits_owner ON audits(owner, status);
"""


#: a spec's path of an uploaded dataset, as the service writes it (``datasets/<id>.zarr``)
_UPLOAD = re.compile(r"datasets/(ds_[0-9a-f]+)\.zarr")


def _names(gone: list[tuple[str, str]]) -> str:
    return ", ".join(f"{name!r} ({i})" for i, name in gone)


def deleted_message(gone: list[tuple[str, str]]) -> str:
    """What a result that needs an audit's data says when its dataset was deleted."""
    names = _names(gone)
    one = len(gone) == 1
    return (f"the audit's dataset{'' if one else 's'} {names} {'was' if one else 'were'} "
            "deleted, so what needs its data (a release, a comparison, a release report, a "
            "resume) cannot be made; the results of its cube (records, query, report, "
            "plots, the cube itself) are still answered")


class UploadsGone(Exception):
    """A submitted spec names uploads that were deleted: ``gone`` holds their
    ``(id, name)``."""

    def __init__(self, gone: list[tuple[str, str]]):
        super().__init__(f"the spec's dataset {_names(gone)} was deleted while the audit "
                         "was submitted; upload it again")
        self.gone = gone


def new_id(prefix: str) -> str:
    """A random identifier, e.g. ``au_3f9c0e1a2b4d5c6e``."""
    return f"{prefix}_{secrets.token_hex(8)}"


class Store:
    """Thread-safe access to the state database (one connection per thread)."""

    def __init__(self, root: str | Path):
        self.root = Path(root).resolve()
        self.root.mkdir(parents=True, exist_ok=True, mode=0o700)
        for sub in ("datasets", "audits", "tmp", "files"):
            (self.root / sub).mkdir(parents=True, exist_ok=True, mode=0o700)
        self.path = self.root / "state.sqlite"
        self._local = threading.local()
        self._write = threading.Lock()
        with self._conn() as c:
            c.executescript(_SCHEMA)
        # the root holds microdata: this user only (the folders close it to others)
        for p in (self.root, *(self.root / s for s in ("datasets", "audits", "tmp", "files"))):
            os.chmod(p, 0o700)
        for p in self.root.glob("state.sqlite*"):
            os.chmod(p, 0o600)

    @staticmethod
    def private(path: Path) -> None:
        """Make ``path`` (a file or a folder tree) readable by this user only."""
        path = Path(path)
        if path.is_dir():
            for dirpath, dirs, files in os.walk(path):
                os.chmod(dirpath, 0o700)
                for f in files:
                    os.chmod(os.path.join(dirpath, f), 0o600)
        elif path.exists():
            os.chmod(path, 0o600)

    def clean(self) -> int:
        """At start-up: remove what a killed process left half-made: uploads being
        received (``tmp/``) and dataset stores without a row (killed between the ingest
        and the commit). Returns how many entries were removed."""
        import shutil
        n = 0
        for p in (self.root / "tmp").iterdir():
            shutil.rmtree(p, ignore_errors=True) if p.is_dir() else p.unlink(missing_ok=True)
            n += 1
        known = {r["id"] for r in self._all("SELECT id FROM datasets")}
        for p in (self.root / "datasets").iterdir():
            if p.name.removesuffix(".zarr") not in known:
                shutil.rmtree(p, ignore_errors=True) if p.is_dir() else p.unlink(missing_ok=True)
                n += 1
        return n

    # -- connections -------------------------------------------------------
    def _conn(self) -> sqlite3.Connection:
        c = getattr(self._local, "conn", None)
        if c is None:
            c = sqlite3.connect(self.path, timeout=30, isolation_level=None,
                                check_same_thread=False)
            c.row_factory = sqlite3.Row
            c.execute("PRAGMA journal_mode=WAL")
            c.execute("PRAGMA synchronous=FULL")
            c.execute("PRAGMA busy_timeout=30000")
            self._local.conn = c
        return c

    def _rollback(self, c: sqlite3.Connection) -> None:
        """Undo a failed write. When the rollback itself fails (a full disk may have
        rolled back already, or left the connection unusable) the connection is closed,
        so that it holds no lock and the next call opens a new one; the original error
        is the one raised."""
        try:
            if c.in_transaction:
                c.execute("ROLLBACK")
        except sqlite3.Error:
            try:
                c.close()
            finally:
                self._local.conn = None

    @contextmanager
    def _transaction(self) -> Iterator[sqlite3.Connection]:
        """One write transaction (``BEGIN IMMEDIATE``: it holds the write lock from its
        first statement, so what it reads is still true when it writes), committed when
        the with block ends, rolled back (:meth:`_rollback`) when it raises."""
        with self._write:
            c = self._conn()
            c.execute("BEGIN IMMEDIATE")
            try:
                yield c
                c.execute("COMMIT")
            except BaseException:
                self._rollback(c)
                raise

    def _exec(self, sql: str, args: tuple = ()) -> sqlite3.Cursor:
        with self._transaction() as c:
            return c.execute(sql, args)

    def _one(self, sql: str, args: tuple = ()) -> dict[str, Any] | None:
        row = self._conn().execute(sql, args).fetchone()
        return dict(row) if row is not None else None

    def _all(self, sql: str, args: tuple = ()) -> list[dict[str, Any]]:
        return [dict(r) for r in self._conn().execute(sql, args).fetchall()]

    # -- paths -------------------------------------------------------------
    def dataset_path(self, dataset_id: str) -> Path:
        return self.root / "datasets" / f"{dataset_id}.zarr"

    def audit_dir(self, audit_id: str) -> Path:
        return self.root / "audits" / audit_id

    def cube_path(self, audit_id: str) -> Path:
        return self.audit_dir(audit_id) / "cube.zarr"

    # -- datasets ----------------------------------------------------------
    def add_dataset(self, dataset_id: str, owner: str, *, name: str, filename: str, rows: int,
                    columns: list[str], roles: dict[str, list[str]], sha256: str) -> None:
        self._exec("INSERT INTO datasets VALUES (?,?,?,?,?,?,?,?,?)",
                   (dataset_id, owner, name, filename, rows, json.dumps(columns),
                    json.dumps(roles), sha256, time.time()))

    def dataset(self, dataset_id: str, owner: str) -> dict[str, Any] | None:
        d = self._one("SELECT * FROM datasets WHERE id=? AND owner=?", (dataset_id, owner))
        return _dataset_out(d) if d else None

    def datasets(self, owner: str) -> list[dict[str, Any]]:
        return [_dataset_out(d) for d in
                self._all("SELECT * FROM datasets WHERE owner=? ORDER BY created", (owner,))]

    def delete_dataset(self, dataset_id: str, owner: str,
                       busy: Callable[[dict[str, Any]], bool] | None = None) -> str:
        """Delete ``owner``'s dataset unless ``busy`` says one of their audits (a row) still
        needs it: ``"deleted"``, ``"used"`` or ``"missing"``. The audits are read and the
        row deleted in one transaction, so a submit or a resume that names the dataset
        either comes first (and the delete is refused) or finds it gone."""
        with self._transaction() as c:
            if busy is not None and any(
                    busy(dict(a)) for a in c.execute("SELECT * FROM audits WHERE owner=?",
                                                     (owner,)).fetchall()):
                return "used"
            n = c.execute("DELETE FROM datasets WHERE id=? AND owner=?",
                          (dataset_id, owner)).rowcount
        return "deleted" if n else "missing"

    # -- audits ------------------------------------------------------------
    def add_audit(self, audit_id: str, owner: str, *, name: str, spec: dict[str, Any],
                  cells_total: int, limit: int | None = None) -> bool:
        """Insert a queued audit; with ``limit``, only if ``owner`` has fewer active ones.

        Returns whether it was inserted (the check and the insert are one transaction).
        Raises :class:`UploadsGone` when an upload the spec reads was deleted (checked in
        the same transaction as the insert: a delete comes first or is refused).
        """
        with self._transaction() as c:
            gone = self.deleted_uploads(spec, owner)
            if gone:
                raise UploadsGone(gone)
            if limit is not None:
                n = c.execute("SELECT COUNT(*) FROM audits WHERE owner=? AND status IN "
                              "(?,?)", (owner, *ACTIVE)).fetchone()[0]
                if n >= limit:
                    return False
            c.execute("INSERT INTO audits (id, owner, name, spec, status, cells_total, "
                      "created) VALUES (?,?,?,?,?,?,?)",
                      (audit_id, owner, name, json.dumps(spec), "queued", cells_total,
                       time.time()))
        return True

    def audit(self, audit_id: str, owner: str | None = None) -> dict[str, Any] | None:
        if owner is None:
            return self._one("SELECT * FROM audits WHERE id=?", (audit_id,))
        return self._one("SELECT * FROM audits WHERE id=? AND owner=?", (audit_id, owner))

    def audits(self, owner: str) -> list[dict[str, Any]]:
        return self._all("SELECT * FROM audits WHERE owner=? ORDER BY seq", (owner,))

    def queued(self) -> list[dict[str, Any]]:
        return self._all("SELECT * FROM audits WHERE status='queued' ORDER BY seq")

    def requeue_running(self) -> int:
        """At start-up: audits a previous process left running go back to the queue."""
        return self._exec("UPDATE audits SET status='queued' WHERE status='running'").rowcount

    def start_run(self, audit_id: str, *, cells_done: int) -> int | None:
        """Mark a queued audit running; returns the number of this run (1 for the first),
        or None when the audit is no longer queued (cancelled before it started): the
        check and the update are one transaction, so a cancel and a start never both win.
        """
        with self._transaction() as c:
            n = c.execute("UPDATE audits SET status='running', "
                          "started=COALESCE(started, ?), runs=runs+1, cells_done=?, "
                          "resumed_from=? WHERE id=? AND status='queued'",
                          (time.time(), cells_done, cells_done, audit_id)).rowcount
            row = c.execute("SELECT runs FROM audits WHERE id=?", (audit_id,)).fetchone()
        return int(row[0]) if n and row is not None else None

    def cancel(self, audit_id: str, owner: str,
               reason: Callable[[dict[str, Any]], str]) -> bool:
        """Cancel a queued or running audit of ``owner``'s, with the text ``reason`` makes
        of the row as it is at that moment (read and written in one transaction, so a
        queued audit cancelled before it starts is never started). Returns whether it
        was active."""
        with self._transaction() as c:
            row = c.execute("SELECT * FROM audits WHERE id=? AND owner=?",
                            (audit_id, owner)).fetchone()
            if row is None or row["status"] not in ACTIVE:
                return False
            c.execute("UPDATE audits SET status='cancelled', finished=?, error=? "
                      "WHERE id=?", (time.time(), reason(dict(row)), audit_id))
        return True

    def deleted_uploads(self, spec: Any, owner: str) -> list[tuple[str, str]]:
        """The uploads of ``owner``'s that an audit's stored ``spec`` (a dict or its
        JSON) reads and that were deleted since: ``(id, name)`` pairs, in spec order."""
        from ..audit.spec import DATA_FIELDS
        if isinstance(spec, str):
            spec = json.loads(spec)
        if not isinstance(spec, dict):
            return []
        found = [spec["dataset"]] if isinstance(spec.get("dataset"), dict) else []
        found += [d for d in spec.get("datasets") or [] if isinstance(d, dict)]
        out: list[tuple[str, str]] = []
        for d in found:
            for field in sorted(DATA_FIELDS | {"path"}):
                m = _UPLOAD.fullmatch(str(d.get(field, "")))
                if m and self.dataset(m[1], owner) is None and \
                        m[1] not in (i for i, _ in out):
                    out.append((m[1], str(d.get("name", m[1]))))
        return out

    def add_cell(self, audit_id: str, run: int, *, dataset: str, method: str, param: float,
                 replicate: int) -> None:
        with self._transaction() as c:
            c.execute("INSERT INTO cells (audit, run, dataset, method, param, replicate, at)"
                      " VALUES (?,?,?,?,?,?,?)",
                      (audit_id, run, dataset, method, float(param), int(replicate),
                       time.time()))
            c.execute("UPDATE audits SET cells_done=cells_done+1 WHERE id=?", (audit_id,))

    def cells(self, audit_id: str, after: int = 0) -> list[dict[str, Any]]:
        """The audit's recorded cells after its ``after``-th; each row's ``n`` numbers
        it within the audit (1, 2, ...), so it tells nothing of other audits."""
        return self._all("SELECT * FROM (SELECT *, ROW_NUMBER() OVER (ORDER BY seq) AS n "
                         "FROM cells WHERE audit=?) WHERE n>? ORDER BY n",
                         (audit_id, after))

    def requeue(self, audit_id: str, owner: str, limit: int | None = None) -> str:
        """Put a failed or cancelled audit back in the queue (it resumes from its cube).

        With ``limit``, only if ``owner`` has fewer active (queued or running) audits: a
        resumed audit counts against the limit as a submitted one does (the check and
        the update are one transaction). Returns ``"queued"``, ``"limit"``, ``"state"``
        (the audit is not failed or cancelled) or ``"deleted"`` (an upload it reads was
        deleted: checked in the same transaction, so a delete comes first or is refused).
        """
        with self._transaction() as c:
            row = c.execute("SELECT status, spec FROM audits WHERE id=? AND owner=?",
                            (audit_id, owner)).fetchone()
            if row is None or row[0] not in ("failed", "cancelled"):
                return "state"
            if self.deleted_uploads(row[1], owner):
                return "deleted"
            if limit is not None:
                n = c.execute("SELECT COUNT(*) FROM audits WHERE owner=? AND status IN "
                              "(?,?)", (owner, *ACTIVE)).fetchone()[0]
                if n >= limit:
                    return "limit"
            c.execute("UPDATE audits SET status='queued', finished=NULL, error=NULL "
                      "WHERE id=? AND owner=?", (audit_id, owner))
        return "queued"

    def finish(self, audit_id: str, status: str, error: str | None = None) -> bool:
        """Set a final status unless the audit already has one (a cancel wins)."""
        return self._exec("UPDATE audits SET status=?, finished=?, error=? WHERE id=? AND "
                          "status IN (?,?)",
                          (status, time.time(), error, audit_id, *ACTIVE)).rowcount > 0


def _dataset_out(d: dict[str, Any]) -> dict[str, Any]:
    return {"id": d["id"], "name": d["name"], "filename": d["filename"], "rows": d["rows"],
            "columns": json.loads(d["columns"]), "roles": json.loads(d["roles"]),
            "sha256": d["sha256"], "created": _iso(d["created"])}


def _iso(t: float | None) -> str | None:
    if t is None:
        return None
    return time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(t))


def audit_out(a: dict[str, Any]) -> dict[str, Any]:
    """The public view of an audit row."""
    return {"id": a["id"], "name": a["name"], "status": a["status"],
            "cells_done": a["cells_done"], "cells_total": a["cells_total"],
            "created": _iso(a["created"]), "started": _iso(a["started"]),
            "finished": _iso(a["finished"]), "error": a["error"], "runs": a["runs"],
            "resumed_from": a["resumed_from"]}
