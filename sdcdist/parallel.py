"""How work is spread over the cluster: one small executor and generic drivers.

Every distributed computation in sdcdist has the shape of a dask reduction:
a per-piece numpy function returning a small dict of sufficient statistics,
a ``combine`` that merges such dicts, and a final ``aggregate`` on the client.
The pieces are record chunks (:func:`map_reduce`) or blocks of the pair space
(:func:`pairwise_reduce`). Partial results are combined by a tree reduction in
a fixed order, so a result never depends on the number of workers or on the
order in which tasks finish.

With ``client=None`` the same drivers run every piece in this process, one
after the other: that is the reference path the tests compare against, and
what a small computation in a notebook uses. A function here accepts a
:class:`distributed.Client` but never starts a cluster.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

__all__ = ["Runner", "Local", "tree_reduce", "map_reduce", "pairwise_reduce",
           "chunk_bounds", "pair_block_rows", "add_dicts"]


@dataclass
class Local:
    """A computed value standing in for a future when there is no client."""

    value: Any

    def result(self) -> Any:
        return self.value


def _unwrap(x: Any) -> Any:
    return x.value if isinstance(x, Local) else x


class Runner:
    """Submit numpy functions to a Dask client, or run them here without one.

    Parameters
    ----------
    client : distributed.Client or None
        Where tasks run. ``None`` runs them immediately in this process.
    """

    def __init__(self, client: Any = None):
        self.client = client

    def submit(self, fn: Callable, *args: Any, **kwargs: Any) -> Any:
        """Run ``fn(*args, **kwargs)`` as one task; returns a future-like handle."""
        if self.client is None:
            return Local(fn(*[_unwrap(a) for a in args],
                            **{k: _unwrap(v) for k, v in kwargs.items()}))
        return self.client.submit(fn, *args, **kwargs)

    def scatter(self, value: Any) -> Any:
        """Place a value on the cluster once (e.g. an array many tasks read)."""
        if self.client is None:
            return Local(value)
        return self.client.scatter(value, hash=False)

    def gather(self, handle: Any) -> Any:
        """Bring a result (or a list of results) back to this process."""
        if isinstance(handle, list):
            if self.client is None:
                return [_unwrap(h) for h in handle]
            return self.client.gather(handle)
        if self.client is None:
            return _unwrap(handle)
        return handle.result()


def tree_reduce(runner: Runner, combine: Callable, handles: Sequence[Any],
                split_every: int = 8) -> Any:
    """Combine partial results level by level, ``split_every`` at a time.

    The grouping depends only on the number of partial results, never on
    timing, so floating-point sums come out the same on any cluster.
    """
    handles = list(handles)
    if not handles:
        raise ValueError("nothing to reduce")
    while len(handles) > 1:
        handles = [handles[i] if len(handles[i:i + split_every]) == 1
                   else runner.submit(combine, *handles[i:i + split_every])
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
               split_every: int = 8) -> Any:
    """Reduce over record chunks.

    ``chunk_fn(start, stop, *arrays, *args)`` returns a small dict of sufficient
    statistics for records ``start:stop`` (it slices the arrays itself, so a
    task reads only its rows); ``combine(*dicts)`` merges them; the optional
    ``aggregate(dict)`` turns the total into the final result on the client.
    """
    parts = [runner.submit(chunk_fn, s, e, *arrays, *args)
             for s, e in chunk_bounds(n, chunk_rows)]
    total = runner.gather(tree_reduce(runner, combine, parts, split_every))
    return aggregate(total) if aggregate is not None else total


def pair_block_rows(n_a: int, n_b: int, width: int, *,
                    memory_bytes: int = 64 * 2**20) -> tuple[int, int]:
    """Block sizes (rows of A, rows of B) whose pair block fits ``memory_bytes``.

    A block holds a few float64 matrices of ``rows_a x rows_b`` (distances and
    a working copy), so each pair costs about ``3 * 8`` bytes; ``width`` adds
    the per-column temporaries.
    """
    per_pair = 8 * (3 + min(width, 4))
    pairs = max(memory_bytes // per_pair, 1024)
    rows_b = int(min(n_b, max(256, int(np.sqrt(pairs)))))
    rows_a = int(min(n_a, max(1, pairs // max(rows_b, 1))))
    return rows_a, rows_b


def pairwise_reduce(runner: Runner, block_fn: Callable, merge: Callable,
                    finish: Callable, combine: Callable, A: Any, B: Any,
                    n_a: int, n_b: int, *, rows_a: int, rows_b: int,
                    args: tuple = (), split_every: int = 8) -> Any:
    """Reduce over the pair space ``A x B`` tiled into blocks.

    For each block of A rows ``[a0, a1)`` and each block of B rows ``[b0, b1)``:
    ``block_fn(a0, a1, b0, b1, A, B, *args)`` returns a partial result for the
    A rows of the block (e.g. their top-2 neighbours among those B rows, with
    tie counts). ``merge(*partials)`` merges partials of the same A rows over
    B blocks (tree reduction); ``finish(a0, a1, merged, A, B, *args)`` turns the
    merged partial into a small dict of statistics; ``combine(*dicts)`` adds
    those up over A blocks (tree reduction). No task ever holds more than one
    ``rows_a x rows_b`` block of pairs. Returns the combined dict, gathered.
    """
    totals = []
    for a0, a1 in chunk_bounds(n_a, rows_a):
        parts = [runner.submit(block_fn, a0, a1, b0, b1, A, B, *args)
                 for b0, b1 in chunk_bounds(n_b, rows_b)]
        merged = tree_reduce(runner, merge, parts, split_every)
        totals.append(runner.submit(finish, a0, a1, merged, A, B, *args))
    return runner.gather(tree_reduce(runner, combine, totals, split_every))


def add_dicts(*parts: dict) -> dict:
    """``combine`` for dicts of numbers or arrays that simply add up."""
    out = dict(parts[0])
    for p in parts[1:]:
        for k, v in p.items():
            out[k] = out[k] + v
    return out

