"""Work that may allocate a lot runs in a child process that exits.

An upload's ingestion and the full check of a large file named by a spec can hold
their data in memory (a Parquet row group, the labels of a text column, a whole CSV
read by the fallback reader). Run in the service process, the allocator would keep that
memory after the request, and a large allocation would hold the interpreter while the
event loop waits. :func:`run_child` runs such a function in a fresh process (forked from
a small ``forkserver`` that has the data modules imported, so a child starts in
milliseconds), waits for it in the request's worker thread, and returns its result; the
child exits, handing all its memory back. At most :data:`MAX_CHILDREN` run at once (the
others wait), so the service's own growth is a pipe's worth, whatever the file.

Errors cross back as they were raised: :class:`~sdcdist.errors.SdcInputError` with its
message (422), an ``HTTPException`` with its status and detail (413); any other
exception becomes a ``RuntimeError`` naming its type only (its message could hold a
record value). A child killed by the system (out of memory) is said so.
"""

from __future__ import annotations

import multiprocessing
import threading
from typing import Any, Callable

from fastapi import HTTPException

from ..errors import SdcInputError

__all__ = ["run_child", "MAX_CHILDREN"]

#: children that ingest or check data at once (the others wait for one to finish)
MAX_CHILDREN = 2
_slots = threading.BoundedSemaphore(MAX_CHILDREN)
_ctx_lock = threading.Lock()
_ctx: Any = None

#: imported once by the fork server, so that its children start warm
_PRELOAD = ["sdcdist.data.io", "pyarrow.parquet", "pyarrow.csv", "zarr"]


def _context() -> Any:
    global _ctx
    with _ctx_lock:
        if _ctx is None:
            try:
                ctx = multiprocessing.get_context("forkserver")
                ctx.set_forkserver_preload(_PRELOAD)
            except ValueError:          # no fork server on this platform
                ctx = multiprocessing.get_context("spawn")
            _ctx = ctx
        return _ctx


def _child(conn: Any, fn: Callable[..., Any], args: tuple, kwargs: dict) -> None:
    try:
        out: tuple = ("ok", fn(*args, **kwargs))
    except SdcInputError as e:
        out = ("input", str(e))
    except HTTPException as e:
        out = ("http", e.status_code, e.detail)
    except MemoryError:
        out = ("error", "MemoryError")
    except BaseException as e:          # noqa: BLE001 - its type only: no record value
        out = ("error", type(e).__name__)
    try:
        conn.send(out)
    finally:
        conn.close()


def run_child(fn: Callable[..., Any], *args: Any, **kwargs: Any) -> Any:
    """``fn(*args, **kwargs)`` in a child process that exits; its result, or its error
    raised again here. ``fn`` and its arguments must pickle (module-level functions)."""
    ctx = _context()
    with _slots:
        recv, send = ctx.Pipe(duplex=False)
        p = ctx.Process(target=_child, args=(send, fn, args, kwargs), daemon=True)
        p.start()
        send.close()
        try:
            got = recv.recv()
        except EOFError:
            got = None
        finally:
            recv.close()
            p.join()
    if got is None:
        raise RuntimeError(f"the process reading the data ended without an answer (exit "
                           f"code {p.exitcode}: out of memory?)")
    if got[0] == "ok":
        return got[1]
    if got[0] == "input":
        raise SdcInputError(got[1])
    if got[0] == "http":
        raise HTTPException(got[1], got[2])
    raise RuntimeError(f"reading the data failed ({got[1]})")
