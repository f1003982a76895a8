"""Reductions over record chunks: a fixed tree, so sums never depend on the cluster.

Every distributed computation in sdcdist has the shape of a dask reduction:
a per-piece numpy function returning a small dict of sufficient statistics,
a ``combine`` that merges such dicts, and a final ``aggregate`` on the client.
Partial results are combined by a tree reduction in a fixed order, so a
result never depends on the number of workers or on the order in which tasks
finish.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

from .runner import Runner

__all__ = ["tree_reduce", "map_reduce", "chunk_bounds", "add_dicts", "map_batches", "map_chunks",
           "reduce_chunks"]


def tree_reduce(runner: Runner, combine: Callable, handles: Sequence[Any],
                split_every: int = 8) -> Any:
    """Combine partial results level by level, ``split_every`` at a time; returns a handle.

    The grouping depends only on the number of partial results, never on
    timing, so floating-point sums come out the same on any cluster.
    """
    handles = list(handles)
    if not handles:
        raise ValueError("nothing to reduce")
    while len(handles) > 1:
        handles = [handles[i] if len(handles[i:i + split_every]) == 1
                   else runner.task(combine, *handles[i:i + split_every])
                   for i in range(0, len(handles), split_every)]
    return handles[0]


def chunk_bounds(n: int, chunk_rows: int) -> list[tuple[int, int]]:
    """``[(start, stop), ...]`` covering ``range(n)`` in pieces of ``chunk_rows``."""
    if chunk_rows < 1:
        raise ValueError("chunk_rows must be >= 1")
    return [(s, min(s + chunk_rows, n)) for s in range(0, n, chunk_rows)]


def map_reduce(runner: Runner, chunk_fn: Callable, combine: Callable,
               arrays: Sequence[Any], n: int, *, chunk_rows: int,
               aggregate: Callable | None = None, args: tuple = (),
               split_every: int = 8, local_rows: int | None = None) -> Any:
    """Reduce over record chunks.

    ``chunk_fn(start, stop, *arrays, *args)`` returns a small dict of sufficient
    statistics for records ``start:stop`` (it slices the arrays itself, so a
    task reads only its rows); ``combine(*dicts)`` merges them; the optional
    ``aggregate(dict)`` turns the total into the final result on the client.

    ``local_rows``: records per chunk when the reduction runs in this process (no
    client) on arrays held in memory, if larger than ``chunk_rows``: fewer partial
    results to combine, for a ``combine`` that is exact (its result does not depend on
    the chunking, as the key tables' exact sums), on records that are in memory anyway.
    """
    if local_rows is not None and runner.client is None and local_rows > chunk_rows and \
            all(_in_memory(a) for a in arrays):
        chunk_rows = local_rows
    parts = [runner.task(chunk_fn, s, e, *arrays, *args)
             for s, e in chunk_bounds(n, chunk_rows)]
    total = runner.result(tree_reduce(runner, combine, parts, split_every))
    return aggregate(total) if aggregate is not None else total


def _in_memory(a: Any) -> bool:
    """Whether a shared value (or the value itself) is an array held in memory."""
    import numpy as np

    from .runner import Local
    return isinstance(a.value if isinstance(a, Local) else a, np.ndarray)


def map_chunks(runner: Runner, chunk_fn: Callable, arrays: Sequence[Any], n: int, *,
               chunk_rows: int, args: tuple = ()) -> list[Any]:
    """``chunk_fn(start, stop, *arrays, *args)`` as one task per record chunk; the handles.

    For a per-chunk state that later tasks read many times (e.g. an index of the chunk's
    records): each stays where it was computed for as long as its handle lives. Chunks
    are those of :func:`map_reduce` (:func:`chunk_bounds`), in order.
    """
    return [runner.task(chunk_fn, s, e, *arrays, *args) for s, e in chunk_bounds(n, chunk_rows)]


def reduce_chunks(runner: Runner, fn: Callable, combine: Callable, handles: Sequence[Any], *,
                  args: tuple = (), split_every: int = 8) -> Any:
    """``combine`` over ``fn(state, *args)`` for the chunk states of :func:`map_chunks`,
    by the fixed tree of :func:`tree_reduce`; the value."""
    parts = [runner.task(fn, h, *args) for h in handles]
    return runner.result(tree_reduce(runner, combine, parts, split_every))


def add_dicts(*parts: dict) -> dict:
    """``combine`` for dicts of numbers or arrays that simply add up (in argument order)."""
    out = dict(parts[0])
    for p in parts[1:]:
        for k, v in p.items():
            out[k] = out[k] + v
    return out


def map_batches(runner: Runner, fn: Callable, items: Sequence[Any], *, shared: tuple = (),
                tasks: int | None = None) -> list[Any]:
    """``[fn(x) ...]`` over independent items, in contiguous batches, one task per batch.

    ``fn(batch, *shared)`` takes a list of items and returns a list of as many results;
    ``shared`` are handles (from :meth:`Runner.share`) or values every batch reads. The
    batches are ``tasks`` contiguous slices of ``items`` (default: four per worker, one
    without a client); results come back in ``items`` order, so when each item's result
    depends only on the item, the list is the same for any batching and worker count.
    """
    items = list(items)
    if not items:
        return []
    if tasks is None:
        tasks = 1 if runner.client is None else 4 * max(runner.n_workers, 1)
    tasks = max(1, min(int(tasks), len(items)))
    edges = [round(i * len(items) / tasks) for i in range(tasks + 1)]
    handles = [runner.task(fn, items[a:b], *shared) for a, b in zip(edges[:-1], edges[1:])
               if b > a]
    out: list[Any] = []
    for part in runner.result(handles):
        out.extend(part)
    return out
