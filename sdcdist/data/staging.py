"""Staged writes: a store or file is written under a temporary name and moved into place.

A failed or interrupted write leaves nothing behind (SIGTERM included); leftovers of
writers killed outright are removed by the next write to the same path.

What an output may replace is decided here, once (:func:`check_replaceable`, which the
command line's output check and every writer call): an earlier output of the same kind
that sdcdist wrote, never a folder of anything else, the working directory, or a path
that is or holds an input.
"""

from __future__ import annotations

import json
import os
import shutil
import signal
import socket
import threading
import time
import uuid
from pathlib import Path
from typing import Any

import numpy as np

from .. import checksums
from ..errors import SdcInputError, exists_error
from ..storage import local_path
from ..text import redact

__all__ = ["remove_stale_temps", "open_zarr_group", "Staging", "new_values_array", "temp_name",
           "CleanOnSigterm", "STORE_KINDS", "stored_kind", "enclosing_store",
           "check_replaceable"]

#: The folders sdcdist writes, each recognised by attributes of its root Zarr group (the
#: first kind whose attributes are all there): what an output of that kind may replace.
STORE_KINDS: dict[str, tuple[str, tuple[str, ...]]] = {
    "calibration": ("a calibration cube (from `sdcdist calibrate --out`)", ("calibration",)),
    "cube": ("an audit cube (from `sdcdist audit`)", ("spec_sha256",)),
    "store": ("a dataset store (from `sdcdist ingest`, `synth` or `mask`)",
              ("columns", "n_records")),
}


def stored_kind(path: str | os.PathLike) -> str | None:
    """The kind of sdcdist store (a key of :data:`STORE_KINDS`) the local folder ``path``
    holds, from its root group's attributes (``zarr.json``, or ``.zattrs`` of a Zarr v2
    group); None for anything else (another folder, a file, an unreadable group)."""
    folder = Path(path)
    attrs: Any = None
    try:
        if (folder / "zarr.json").is_file():
            doc = json.loads((folder / "zarr.json").read_text(encoding="utf-8"))
            if isinstance(doc, dict) and doc.get("node_type") == "group":
                attrs = doc.get("attributes")
        elif (folder / ".zgroup").is_file() and (folder / ".zattrs").is_file():
            attrs = json.loads((folder / ".zattrs").read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None
    if not isinstance(attrs, dict):
        return None
    return next((kind for kind, (_, keys) in STORE_KINDS.items()
                 if all(k in attrs for k in keys)), None)


def enclosing_store(path: str | os.PathLike) -> tuple[str, str] | None:
    """The sdcdist store that holds the local path ``path`` at some depth (the path itself
    left out: it may be an earlier store that is replaced): ``(its folder, its kind)``, or
    None when no folder above ``path`` is one. An output written there would change a
    store (and fail its integrity check)."""
    real = Path(os.path.realpath(local_path(str(path))))
    for folder in real.parents:
        if (folder / "zarr.json").is_file() or (folder / ".zgroup").is_file():
            kind = stored_kind(folder)
            if kind is not None:
                return str(folder), kind
    return None


def check_outside_stores(path: str | os.PathLike, *, what: str = "the output") -> None:
    """Refuse a local output inside an sdcdist store at any depth (:func:`enclosing_store`):
    writing there would change the store and fail its integrity check. Raise
    :class:`SdcInputError` naming the store and the fix."""
    inside = enclosing_store(path)
    if inside is None:
        return
    folder, found = inside
    cwd = os.path.realpath(os.getcwd())
    if folder == cwd or folder.startswith(cwd + os.sep):
        folder = os.path.relpath(folder, cwd)
    raise SdcInputError(f"The {what} {redact(str(path))!r} is inside {folder!r}, "
                        f"{STORE_KINDS[found][0]}, and writing there would change it "
                        "(its integrity check would then fail); give a path outside it")


def _within(inner: Path, outer: Path) -> bool:
    return inner == outer or outer in inner.parents


def check_replaceable(path: str | os.PathLike, *, what: str = "the output",
                      kind: str = "file", inputs: Any = ()) -> None:
    """Refuse an existing local output that a write may not replace; raise
    :class:`SdcInputError` naming it and what to do.

    Refused, whether or not ``--overwrite`` is given: a path inside an sdcdist store
    (:func:`check_outside_stores`), existing or not; the working directory or a folder
    holding it; an input of the command (``inputs``: its local files, stores and spec) or
    a folder holding one at any depth; for a store ``kind`` (a key of
    :data:`STORE_KINDS`), a folder that is not an earlier store of that kind (another
    kind of store, or a folder of anything else, even an empty one); for a ``file``, a
    folder. Nothing else is checked for a path that does not exist or for ``kind="dir"``
    (a folder written into, never replaced), nothing at all for a URL.

    Parameters
    ----------
    path : path
        The output.
    what : str
        The option or argument naming it, for the message (``"--out"``).
    kind : {"file", "dir", "store", "cube", "calibration"}
        What is written there.
    inputs : iterable of paths or URLs
        Everything the command reads (None and URLs are skipped).
    """
    shown = local_path(str(path))
    if "://" in shown:
        return
    check_outside_stores(shown, what=what)
    if kind == "dir" or not os.path.lexists(shown):
        return
    real = Path(os.path.realpath(shown))
    fix = "choose another output path"
    cwd = Path(os.path.realpath(os.getcwd()))
    if _within(cwd, real):
        where = "is the working directory" if real == cwd else "holds the working directory"
        raise SdcInputError(f"The {what} {shown!r} {where}, which sdcdist never replaces; "
                            f"{fix} (a new name, e.g. {_example(kind)!r}).")
    for inp in inputs or ():
        local = local_path(str(inp)) if inp is not None else ""
        if not local or "://" in local:
            continue
        rin = Path(os.path.realpath(local))
        if _within(rin, real):
            where = "is" if rin == real else "holds"
            raise SdcInputError(f"The {what} {shown!r} {where} the input {str(inp)!r} of this "
                                f"command, and writing there would lose that input; {fix}.")
    if kind == "file":
        if real.is_dir():
            raise SdcInputError(f"The {what} {shown!r} is a folder; give a file name "
                                f"(e.g. {os.path.join(shown, 'out.csv')!r}).")
        return
    desc = STORE_KINDS[kind][0]
    found = stored_kind(real) if real.is_dir() else None
    if found != kind:
        if found is not None:
            has = f"holds {STORE_KINDS[found][0]}"
        elif real.is_dir():
            has = "is a folder sdcdist did not write" + ("" if any(real.iterdir())
                                                          else " (empty)")
        else:
            has = "is not a folder"
        raise SdcInputError(f"The {what} {shown!r} {has}; --overwrite replaces only "
                            f"{desc} that sdcdist wrote: {fix}, or remove {shown!r} "
                            "yourself if it may go.")


def _example(kind: str) -> str:
    return {"file": "out.csv", "calibration": "calibration.zarr",
            "cube": "cube.zarr"}.get(kind, "out.zarr")

def open_zarr_group(store: str, mode: str) -> Any:
    import zarr
    return zarr.open_group(store, mode=mode)


def new_values_array(group: Any, n: int, m: int, chunk_rows: int) -> Any:
    rows = chunk_rows if n == 0 else max(1, min(chunk_rows, n))
    return group.create_array("values", shape=(n, m), chunks=(rows, m),
                              dtype="float64", dimension_names=("record", "variable"),
                              fill_value=np.nan, compressors=checksums.compressors())


class _Terminated(BaseException):
    """Raised in the main thread by SIGTERM during a staged write (not an Exception, so
    nothing on the way swallows it)."""


def temp_name(final: Path) -> Path:
    """``.NAME.tmp-HOST-PID-RANDOM`` next to ``final``: whose write it is, so a later
    write can tell a dead writer's leftovers from a live one's."""
    host = socket.gethostname().replace("/", "_") or "host"
    return final.parent / f".{final.name}.tmp-{host}-{os.getpid()}-{uuid.uuid4().hex[:8]}"


def _pid_alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except (PermissionError, OSError):
        return True                          # exists, owned by someone else
    return True


#: Leftovers in the old ``.NAME.tmp-RANDOM`` form (no writer recorded) are removed once
#: they are this old.
_STALE_SECONDS = 24 * 3600


def remove_stale_temps(final: str | os.PathLike) -> list[str]:
    """Remove leftovers of interrupted writes to ``final`` (a local path).

    A leftover is ``.NAME.tmp-HOST-PID-RANDOM`` (optionally ``.old``) next to
    ``final``; it is stale when HOST is this machine and no process PID is
    running (a SIGKILLed ``ingest``/``synth``/``mask``). Leftovers of other
    hosts (shared file systems) or of live processes are kept; old-style names
    without a writer are removed after a day. Returns the removed paths.
    """
    final = Path(final)
    parent = final.parent
    prefix = f".{final.name}.tmp-"
    host = socket.gethostname().replace("/", "_") or "host"
    removed = []
    try:
        entries = list(parent.iterdir())
    except OSError:
        return removed
    for entry in entries:
        if not entry.name.startswith(prefix):
            continue
        rest = entry.name[len(prefix):]
        if rest.endswith(".old"):
            rest = rest[:-4]
        parts = rest.rsplit("-", 2)
        if len(parts) == 3 and parts[1].isdigit():
            stale = parts[0] == host and not _pid_alive(int(parts[1]))
        else:
            try:
                stale = time.time() - entry.stat().st_mtime > _STALE_SECONDS
            except OSError:
                stale = False
        if stale:
            if entry.is_dir():
                shutil.rmtree(entry, ignore_errors=True)
            else:
                try:
                    entry.unlink()
                except OSError:
                    pass
            removed.append(str(entry))
    return removed


class CleanOnSigterm:
    """Around a local staged write: SIGTERM removes the temporary path, then the signal
    is delivered again to the previous handler (by default the process ends as it would
    have). Installed only in the main thread; the previous handler is restored on exit."""

    def __init__(self, path: str):
        self.path = path
        self.previous: Any = None
        self.installed = False

    def _handler(self, signum: int, frame: Any) -> None:
        # Clean up here, in the handler, rather than by unwinding: the signal may land
        # in code that swallows exceptions (Zarr's I/O waits), and the write would go on.
        self._clean()
        self._restore()
        os.kill(os.getpid(), signal.SIGTERM)     # now to the previous handler (default: end)
        raise _Terminated()                      # a previous handler that returned: unwind

    def _clean(self) -> None:
        _remove(self.path)
        # writes already handed to Zarr's I/O threads may still land (later on a loaded
        # machine): remove again until the path has stayed absent for three checks in a
        # row, for at most about 2 s
        quiet = 0
        for _ in range(40):
            time.sleep(0.05)
            if os.path.lexists(self.path):
                quiet = 0
                _remove(self.path)
            else:
                quiet += 1
                if quiet >= 3:
                    break

    def _restore(self) -> None:
        if self.installed:
            signal.signal(signal.SIGTERM, self.previous if self.previous is not None
                          else signal.SIG_DFL)
            self.installed = False

    def __enter__(self) -> "CleanOnSigterm":
        if threading.current_thread() is threading.main_thread():
            prev = signal.getsignal(signal.SIGTERM)
            if prev is not signal.SIG_IGN:
                self.previous = prev
                signal.signal(signal.SIGTERM, self._handler)
                self.installed = True
        return self

    def __exit__(self, exc_type, exc, tb) -> None:
        if exc_type is not None:
            self._clean() if exc_type is _Terminated else _remove(self.path)
        self._restore()


def _remove(path: str) -> None:
    if os.path.isdir(path):
        shutil.rmtree(path, ignore_errors=True)
    elif os.path.lexists(path):
        try:
            os.remove(path)
        except OSError:
            pass


class Staging:
    """Write a local store under a temporary name, then move it into place.

    A failed write leaves nothing behind; an existing store is replaced only
    with ``overwrite=True`` and only after the new one is complete. SIGTERM
    during the write removes the temporary folder (see :class:`CleanOnSigterm`);
    leftovers of writers killed outright (SIGKILL) are removed by the next
    write to the same path (:func:`remove_stale_temps`). What an existing path may
    be is :func:`check_replaceable`'s rule (``kind``, ``inputs``: what the write reads).
    """

    def __init__(self, store: str | os.PathLike, overwrite: bool, *, kind: str = "store",
                 inputs: Any = ()):
        self.final = str(store)
        self.remote = "://" in self.final and not self.final.startswith("file://")
        if self.final.startswith("file://"):
            self.final = self.final[len("file://"):]
        self.guard: CleanOnSigterm | None = None
        if not self.remote:
            check_replaceable(self.final, what=kind, kind=kind, inputs=inputs)
            if Path(self.final).exists() and not overwrite:
                raise exists_error("store", self.final, "pass --overwrite (overwrite=True) to "
                                   "replace it, or choose another path")
            final = Path(self.final).resolve()
            final.parent.mkdir(parents=True, exist_ok=True)
            remove_stale_temps(final)
            self.path = str(temp_name(final))
        else:
            self.path = self.final

    def __enter__(self) -> str:
        if not self.remote:
            self.guard = CleanOnSigterm(self.path)
            self.guard.__enter__()
        return self.path

    def __exit__(self, exc_type, exc, tb) -> None:
        if self.remote:
            return
        try:
            if exc_type is not None:
                shutil.rmtree(self.path, ignore_errors=True)
                return
            if Path(self.final).exists():
                old = self.path + ".old"
                os.replace(self.final, old)
                os.replace(self.path, self.final)
                shutil.rmtree(old, ignore_errors=True)
            else:
                os.replace(self.path, self.final)
        finally:
            if self.guard is not None:
                self.guard.__exit__(exc_type, exc, tb)
