"""Reductions over the pair space ``A x B``: all-pairs blocks, or indexes queried block by block.

Two tilings, both exact and independent of the cluster:

- :func:`pairwise_reduce`: every block of A rows x B rows is one task (a
  distance matrix, a pattern count);
- :func:`indexed_reduce`: every block of candidate rows becomes one index
  task (e.g. a KD-tree), which every block of query rows then queries (for
  tree-based linkage, memory linear in the block sizes).

Either way the partials of one block of A (query) rows merge over the
blocks of B (candidate) rows by a tree reduction, an optional finish step
turns the merged partial into a small dict, and those combine over the A
blocks by another tree reduction.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np

from .reduce import chunk_bounds, tree_reduce
from .runner import Runner

__all__ = ["pair_block_rows", "pairwise_reduce", "indexed_reduce"]


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
        parts = [runner.task(block_fn, a0, a1, b0, b1, A, B, *args)
                 for b0, b1 in chunk_bounds(n_b, rows_b)]
        merged = tree_reduce(runner, merge, parts, split_every)
        totals.append(runner.task(finish, a0, a1, merged, A, B, *args))
    return runner.result(tree_reduce(runner, combine, totals, split_every))


def indexed_reduce(runner: Runner, build: Callable, query: Callable, merge: Callable,
                   combine: Callable, Q: Any, C: Any, n_q: int, n_c: int, *,
                   rows_q: int, rows_c: int, finish: Callable | None = None,
                   query_args: tuple = (), finish_args: tuple = (),
                   split_every: int = 8) -> Any:
    """Reduce over the pairs ``Q x C`` through one index per block of candidate rows.

    1. ``build(c0, c1, C)``: one task per block of candidate rows ``[c0, c1)``
       (e.g. a KD-tree of those rows);
    2. ``query(q0, q1, Q, index, *query_args)``: every block of query rows
       ``[q0, q1)`` queries every index, returning a partial for its rows;
    3. ``merge(*partials)``: the partials of a query block merge over the
       indexes (tree reduction);
    4. ``finish(q0, q1, merged, Q, C, *finish_args)`` (optional) turns the
       merged partial of a query block into a small result;
    5. ``combine(*results)``: the query blocks' results combine (tree
       reduction, in query-row order).

    Returns the combined result, gathered.
    """
    indexes = [runner.task(build, c0, c1, C) for c0, c1 in chunk_bounds(n_c, rows_c)]
    totals = []
    for q0, q1 in chunk_bounds(n_q, rows_q):
        parts = [runner.task(query, q0, q1, Q, ix, *query_args) for ix in indexes]
        merged = tree_reduce(runner, merge, parts, split_every)
        totals.append(merged if finish is None
                      else runner.task(finish, q0, q1, merged, Q, C, *finish_args))
    return runner.result(tree_reduce(runner, combine, totals, split_every))
