"""Threads inside one process, for compiled kernels that release the GIL.

Three shapes: :func:`thread_map` shares blocks out to a few threads and returns their
results in block order (so a result never depends on the thread count),
:func:`thread_pool` keeps such a map's threads for a with block (an iteration that maps
its fixed parts many times, as the PRL EM's E-step), and :func:`alongside` runs one side
computation in a thread of its own while the caller goes on. Everything else that spreads work (tasks on the cluster) is in :mod:`.reduce`,
:mod:`.pairs` and :mod:`.runner`.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Sequence
from concurrent.futures import ThreadPoolExecutor
from contextlib import contextmanager
from typing import TypeVar

__all__ = ["thread_map", "thread_pool", "alongside"]

T = TypeVar("T")
S = TypeVar("S")


def thread_map(fn: Callable[..., T], blocks: Sequence[tuple], threads: int, *,
               name: str = "sdcdist") -> list[T]:
    """``[fn(*b) for b in blocks]``, the blocks shared out to ``threads`` threads;
    results in block order. One thread (or one block) runs in the caller's thread."""
    if threads <= 1 or len(blocks) < 2:
        return [fn(*b) for b in blocks]
    with ThreadPoolExecutor(max_workers=threads, thread_name_prefix=name) as pool:
        return list(pool.map(lambda b: fn(*b), blocks))


@contextmanager
def thread_pool(threads: int, *, name: str = "sdcdist"
                ) -> Iterator[Callable[[Callable[..., T], Sequence[tuple]], list[T]]]:
    """A map ``pmap(fn, blocks)`` -> ``[fn(*b) for b in blocks]`` (results in block order)
    on ``threads`` threads kept for the with block; one thread runs in the caller's."""
    if threads <= 1:
        yield lambda fn, blocks: [fn(*b) for b in blocks]
        return
    with ThreadPoolExecutor(max_workers=threads, thread_name_prefix=name) as pool:
        yield lambda fn, blocks: list(pool.map(lambda b: fn(*b), blocks)) \
            if len(blocks) > 1 else [fn(*b) for b in blocks]


def alongside(side: Callable[[], S], main: Callable[[], T], *,
              name: str = "sdcdist-side") -> tuple[T, S]:
    """``(main(), side())``, ``side`` run in a thread of its own while ``main`` runs in
    the caller's; an exception of either is raised once both have ended."""
    pool = ThreadPoolExecutor(max_workers=1, thread_name_prefix=name)
    try:
        fut = pool.submit(side)
        out = main()
        return out, fut.result()
    finally:
        pool.shutdown(wait=True)
