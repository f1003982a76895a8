"""Threads inside one process, for compiled kernels that release the GIL.

Three shapes: :func:`thread_map` shares blocks out to a few threads and returns their
results in block order (so a result never depends on the thread count),
:func:`thread_pool` keeps such a map's threads for a with block (an iteration that maps
its fixed parts many times, as the PRL EM's E-step), and :func:`alongside` runs one side
computation in a thread of its own while the caller goes on. Everything else that spreads work (tasks on the cluster) is in :mod:`.reduce`,
:mod:`.pairs` and :mod:`.runner`.

The caller's thread is one of the threads of a map: it takes blocks itself (in block
order, from the same counter as the helper threads) instead of waiting idle, so a map on
``threads`` threads starts ``threads - 1`` helpers and nothing waits for a thread to wake
before the first block runs.
"""

from __future__ import annotations

import itertools
import threading
from collections.abc import Callable, Iterator, Sequence
from concurrent.futures import ThreadPoolExecutor
from contextlib import contextmanager
from typing import Any, TypeVar

__all__ = ["serial_map", "thread_map", "thread_pool", "alongside"]

T = TypeVar("T")
S = TypeVar("S")


def _shared_map(pool: ThreadPoolExecutor, helpers: int, fn: Callable[..., T],
                blocks: Sequence[tuple]) -> list[T]:
    # [fn(*b) for b in blocks]: the caller and up to ``helpers`` threads of ``pool`` take
    # the next block from one counter until none is left; results in block order, the
    # exception of the first failing block (in block order) raised once all have ended
    n = len(blocks)
    if n < 2:
        return [fn(*b) for b in blocks]
    out: list[Any] = [None] * n
    errors: dict[int, BaseException] = {}
    nxt = itertools.count()            # next() on it is atomic: each block is taken once

    def drain() -> None:
        while True:
            i = next(nxt)
            if i >= n:
                return
            try:
                out[i] = fn(*blocks[i])
            except BaseException as e:     # noqa: BLE001 - re-raised below, in block order
                errors[i] = e

    running = [pool.submit(drain) for _ in range(min(helpers, n - 1))]
    drain()
    for f in running:
        f.result()
    if errors:
        raise errors[min(errors)]
    return out


def serial_map(fn: Callable[..., T], blocks: Sequence[tuple]) -> list[T]:
    """``[fn(*b) for b in blocks]`` in the caller's thread: the map of one thread, where a
    ``pmap`` (:func:`thread_pool`'s) is expected."""
    return [fn(*b) for b in blocks]


def thread_map(fn: Callable[..., T], blocks: Sequence[tuple], threads: int, *,
               name: str = "sdcdist") -> list[T]:
    """``[fn(*b) for b in blocks]``, the blocks shared out to ``threads`` threads (the
    caller's among them); results in block order. One thread (or one block) runs in the
    caller's thread alone."""
    if threads <= 1 or len(blocks) < 2:
        return [fn(*b) for b in blocks]
    with ThreadPoolExecutor(max_workers=threads - 1, thread_name_prefix=name) as pool:
        return _shared_map(pool, threads - 1, fn, blocks)


@contextmanager
def thread_pool(threads: int, *, name: str = "sdcdist"
                ) -> Iterator[Callable[[Callable[..., T], Sequence[tuple]], list[T]]]:
    """A map ``pmap(fn, blocks)`` -> ``[fn(*b) for b in blocks]`` (results in block order)
    on ``threads`` threads (the caller's and ``threads - 1`` helpers kept for the with
    block); one thread runs in the caller's alone."""
    if threads <= 1:
        yield serial_map
        return
    with ThreadPoolExecutor(max_workers=threads - 1, thread_name_prefix=name) as pool:
        yield lambda fn, blocks: _shared_map(pool, threads - 1, fn, blocks)


def alongside(side: Callable[[], S], main: Callable[..., T], *,
              name: str = "sdcdist-side", gate: bool = False) -> tuple[T, S]:
    """``(main(), side())``, ``side`` run in a thread of its own while ``main`` runs in
    the caller's; an exception of either is raised once both have ended.

    With ``gate``, ``main`` is called with one argument, a function of no arguments that
    lets ``side`` start: ``side`` waits until ``main`` calls it (or ends, however it
    ends), so that side work does not take a core from the part of ``main`` that uses
    them all."""
    pool = ThreadPoolExecutor(max_workers=1, thread_name_prefix=name)
    opened = threading.Event()

    def gated() -> S:
        opened.wait()
        return side()
    try:
        fut = pool.submit(gated if gate else side)
        try:
            out = main(opened.set) if gate else main()
        finally:
            opened.set()                 # never left waiting: main has ended
        return out, fut.result()
    finally:
        pool.shutdown(wait=True)
