"""The executor: run numpy functions as tasks on a Dask client, or here without one.

A :class:`Runner` offers the small vocabulary every metric and driver of
sdcdist schedules its work with:

- :meth:`Runner.task` — ``fn(*args)`` as one task, returning a handle at once;
- :meth:`Runner.result` — the value of a handle (or of a list of handles);
- :meth:`Runner.call` — both at once;
- :meth:`Runner.share` — place an input every task can read (the one place
  data are put on the cluster);
- :meth:`Runner.as_completed` — handles in the order they finish.

Handles may be passed as arguments of other tasks; the task then receives
the value. With ``client=None`` every task runs immediately in this process
and its handle is a :class:`Local`; that is the reference path the tests
compare against, and what a small computation in a notebook uses. A function
here accepts a :class:`distributed.Client` but never starts a cluster.

Every task runs with the BLAS and OpenMP thread pools of its process at one
thread (:func:`one_blas_thread`). Multi-threaded BLAS splits sums differently
for different thread counts, so without this a propensity-score fit (``PS2``)
gave other bits in a notebook (all cores) than on worker processes (one
thread each): the same spec on the same data must give the same cube
whatever runs it. The cluster's parallelism comes from its workers anyway.
"""

from __future__ import annotations

import contextlib
import threading
import time
import uuid
from collections.abc import Callable, Iterable, Iterator, Sequence
from dataclasses import dataclass
from typing import Any

__all__ = ["Runner", "Local", "lost_scheduler", "one_blas_thread"]

_blas_local = threading.local()
_blas_cache: dict[str, Any] = {"modules": -1, "controller": None, "setters": []}
_blas_cache_lock = threading.Lock()


def _blas_controls() -> tuple[Any, list[Any]]:
    """The thread-pool controller of the loaded libraries and OpenBLAS's per-thread setters.

    Looking the libraries up costs about a millisecond (and system calls), too
    much for every task, so it is done again only when modules were imported
    since (a new module may have loaded a new BLAS or OpenMP runtime).

    ``openblas_set_num_threads_local`` (OpenBLAS 0.3.27+) is used because
    OpenBLAS ignores ``openblas_set_num_threads`` (what threadpoolctl calls)
    from any thread but the main one; the local setter limits the calling
    thread, which is what a task running in a worker thread needs.
    """
    import sys
    with _blas_cache_lock:
        if _blas_cache["modules"] != len(sys.modules):
            import ctypes

            from threadpoolctl import ThreadpoolController
            controller = ThreadpoolController()
            setters = []
            for lc in controller.lib_controllers:
                if lc.internal_api != "openblas":
                    continue
                try:
                    f = lc.dynlib.openblas_set_num_threads_local
                except AttributeError:
                    continue
                f.restype, f.argtypes = ctypes.c_int, [ctypes.c_int]
                setters.append(f)
            _blas_cache.update(modules=len(sys.modules), controller=controller,
                               setters=setters)
        return _blas_cache["controller"], _blas_cache["setters"]


#: Dask settings of every worker sdcdist starts (the command line's LocalCluster,
#: :class:`~sdcdist.testing.LoopbackCluster`, the deploy/ image's processes as
#: :func:`worker_config_env` gives them): no statistical profiler. It samples every thread's
#: Python frames 100 times a second (``sys._current_frames`` and ``f_back``), which can
#: crash CPython 3.11 while those threads run (a segmentation fault in a worker sampling
#: the cell threads of an audit, seen in the test suite); what it gave is the dashboard's
#: profile page, empty without it. A cluster sdcdist did not start keeps its own settings.
WORKER_CONFIG = {"distributed.worker.profile.enabled": False}


def worker_config_env() -> dict[str, str]:
    """:data:`WORKER_CONFIG` as Dask's environment variables (``DASK_A__B__C``)."""
    return {"DASK_" + k.upper().replace(".", "__").replace("-", "_"): str(v)
            for k, v in WORKER_CONFIG.items()}


@contextlib.contextmanager
def one_blas_thread() -> Iterator[None]:
    """BLAS and OpenMP at one thread for the calling thread while it is inside.

    Re-entrant. In the main thread it sets the process-wide limits
    (threadpoolctl); in any thread it also sets OpenBLAS's per-thread limit
    and OpenMP's (which is per thread), so tasks running at once in the
    threads of one worker each compute as a one-thread worker process does.
    The previous limits are restored on leaving.
    """
    depth = getattr(_blas_local, "depth", 0)
    if depth:
        _blas_local.depth = depth + 1
        try:
            yield
        finally:
            _blas_local.depth -= 1
        return
    controller, setters = _blas_controls()
    if setters and threading.current_thread() is not threading.main_thread():
        # a worker thread: OpenBLAS by its per-thread setter only, never the process-wide
        # one (which other threads' tasks would see change under them)
        limiter = controller.select(internal_api=["openmp", "mkl", "blis", "flexiblas"]
                                    ).limit(limits=1)
    else:
        limiter = controller.limit(limits=1)
    previous = [f(1) for f in setters]
    _blas_local.depth = 1
    try:
        yield
    finally:
        _blas_local.depth = 0
        for f, p in zip(setters, previous):
            f(p)
        limiter.restore_original_limits()


class _OneThread:
    """A task function run under :func:`one_blas_thread` (pickles with its function)."""

    __slots__ = ("fn",)

    def __init__(self, fn: Callable):
        self.fn = fn

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        with one_blas_thread():
            return self.fn(*args, **kwargs)

    def __reduce__(self) -> tuple:
        return (_OneThread, (self.fn,))


@dataclass
class Local:
    """A computed value standing in for a future when there is no client."""

    value: Any

    def result(self) -> Any:
        return self.value


#: test hooks, each called as ``hook(runner, handle)`` right after a value is shared
#: (e.g. to kill the worker that holds it); empty in normal use
_SHARE_HOOKS: list[Callable[[Any, Any], None]] = []


def _held(value: Any) -> Any:
    """Task: the shared value itself (held in the task's spec, so it can be recomputed)."""
    return value


def _unwrap(x: Any) -> Any:
    return x.value if isinstance(x, Local) else x


class Runner:
    """Run numpy functions as tasks on a Dask client, or here without one.

    Parameters
    ----------
    client : distributed.Client or None
        Where tasks run. ``None`` runs them immediately in this process.
    """

    def __init__(self, client: Any = None):
        self.client = client

    def task(self, fn: Callable, /, *args: Any, **kwargs: Any) -> Any:
        """Run ``fn(*args, **kwargs)`` as one task; returns a handle at once.

        Arguments that are handles reach ``fn`` as their values. Tasks are
        pure (the same function on the same arguments is computed once).
        """
        if self.client is None:
            with one_blas_thread():
                return Local(fn(*[_unwrap(a) for a in args],
                                **{k: _unwrap(v) for k, v in kwargs.items()}))
        from dask.base import tokenize
        from dask.utils import funcname
        key = f"{funcname(fn)}-{tokenize(fn, kwargs, *args)}"
        return self.client.submit(_OneThread(fn), *args, key=key, **kwargs)

    def fresh_task(self, fn: Callable, /, *args: Any) -> Any:
        """Like :meth:`task`, but never merged with an identical earlier task.

        For tasks whose result is consumed once and dropped (a whole audit
        cell), so that a rerun computes them again.
        """
        if self.client is None:
            with one_blas_thread():
                return Local(fn(*[_unwrap(a) for a in args]))
        from dask.utils import funcname
        return self.client.submit(_OneThread(fn), *args, key=f"{funcname(fn)}-{uuid.uuid4().hex}",
                                  pure=False)

    def share(self, value: Any) -> Any:
        """Place a value on the cluster once, as a handle every task can read.

        The handle survives the loss of any worker: the value is the
        argument of a task (held in the task's spec by the scheduler), so
        when the worker holding the result dies — pre-empted, scaled down,
        restarted by its nanny or gone for good — the scheduler computes it
        again on another worker instead of failing every task that needs it
        (which is what happens to data placed by ``Client.scatter``). The
        price is one serialized copy of each shared value on the scheduler
        for as long as the handle lives. A worker that needs the value
        fetches it once from a worker that has it.

        Parameters
        ----------
        value : any
            Typically an array many tasks read.
        """
        if self.client is None:
            return Local(value)
        import dask
        key = f"shared-{type(value).__name__}-{uuid.uuid4().hex}"
        # the value is deliberately part of the graph: that is what makes it recomputable
        with dask.config.set({"distributed.admin.large-graph-warning-threshold": "1 PiB"}):
            handle = self.client.submit(_held, value, key=key, pure=False)
        for hook in list(_SHARE_HOOKS):
            hook(self, handle)
        return handle

    def result(self, handle: Any) -> Any:
        """The value of a handle, or the values of a list of handles."""
        if isinstance(handle, list):
            if self.client is None:
                return [_unwrap(h) for h in handle]
            return self.client.gather(handle)
        if self.client is None:
            return _unwrap(handle)
        return handle.result()

    def call(self, fn: Callable, /, *args: Any, **kwargs: Any) -> Any:
        """``fn(*args, **kwargs)`` run as one task, its value returned: ``result(task(...))``."""
        return self.result(self.task(fn, *args, **kwargs))

    def map_concurrent(self, fn: Callable[[Any], Any], items: Sequence[Any]) -> list[Any]:
        """``[fn(x) for x in items]``, with the calls driven at once from a few threads.

        For independent pieces of work that each submit their own tasks through
        this runner (e.g. the key sets of a metric): their tasks reach the cluster
        together, so every worker has work. Results come back in ``items``
        order and do not depend on the threads (each call is deterministic on
        its own). Without a client, or for one item, the calls run one after
        the other here. The first exception (in item order) is raised.
        """
        items = list(items)
        if self.client is None or len(items) < 2:
            return [fn(x) for x in items]
        from concurrent.futures import ThreadPoolExecutor
        with ThreadPoolExecutor(max_workers=min(len(items), max(2, 2 * self.n_workers)),
                                thread_name_prefix="sdcdist-pieces") as pool:
            futures = [pool.submit(fn, x) for x in items]
            return [f.result() for f in futures]

    def as_completed(self, handles: Iterable[Any], *, poll: float = 0.05) -> Iterator[Any]:
        """The handles, each as soon as its task has finished (in list order without a client).

        Raises
        ------
        ConnectionError
            If the client loses its scheduler while tasks are pending (instead of
            waiting for ever for results that will never come).
        """
        if self.client is None:
            yield from handles
            return
        from distributed import as_completed
        ac = as_completed(list(handles))
        while not ac.is_empty():
            if ac.has_ready():
                yield from ac.next_batch(block=False)
            elif self.lost():
                raise lost_scheduler()
            else:
                time.sleep(poll)

    def cancel(self, handles: Sequence[Any]) -> None:
        """Drop the tasks of ``handles`` that have not finished (nothing to do without a client)."""
        if self.client is not None:
            for h in handles:
                h.cancel()

    @property
    def n_workers(self) -> int:
        """Workers of the cluster (1 without a client)."""
        if self.client is None:
            return 1
        return len(self.client.scheduler_info().get("workers", {}))

    def everywhere(self, fn: Callable[[], Any]) -> list[Any]:
        """``fn()`` in this process and on every worker (once each), in worker address order.

        For facts about the processes themselves (their SIMD code paths), not data.
        """
        out = [fn()]
        if self.client is not None:
            res = self.client.run(fn)
            out += [res[w] for w in sorted(res)]
        return out

    def lost(self) -> bool:
        """True once the client has given up on its scheduler."""
        return self.client is not None and self.client.status in ("closing", "closed")


def lost_scheduler() -> ConnectionError:
    """The error of a run whose client has lost its scheduler."""
    return ConnectionError("lost the connection to the Dask scheduler (the client could not "
                           "reconnect)")
