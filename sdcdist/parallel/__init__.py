"""How work is spread over the cluster: the only place in sdcdist that schedules.

Every other module states its work in the small vocabulary of a
:class:`Runner` (``task``, ``result``, ``call``, ``share``) and of the drivers
here; nothing else calls a Dask client.

- :mod:`.runner`: :class:`Runner`, :class:`Local` (a value standing in for a
  future without a client);
- :mod:`.reduce`: :func:`tree_reduce`, :func:`map_reduce` over record chunks,
  :func:`chunk_bounds`, :func:`add_dicts`, :func:`map_batches` (independent items in
  contiguous batches, e.g. the key subsets of SUDA2), :func:`map_chunks` and
  :func:`reduce_chunks` (a per-chunk state built once, e.g. an index, read by many
  reductions);
- :mod:`.pairs`: the pair space tiled into blocks (:func:`pairwise_reduce`,
  :func:`pair_block_rows`) or queried through one index per candidate block
  (:func:`indexed_reduce`);
- :mod:`.sort`: the exact distributed sample sort (:func:`distributed_sort`);
- :mod:`.cells`: the cell executor of the audit and the calibration
  (:class:`CellExecutor`, :func:`cell_mode`).

With ``client=None`` the same drivers run every piece in this process, one
after the other. Partial results are combined by tree reductions in a fixed
order, so a result never depends on the number of workers or on the order in
which tasks finish. A function here accepts a :class:`distributed.Client` but
never starts a cluster.
"""

from __future__ import annotations

from .cells import CellExecutor, cell_mode
from .pairs import indexed_reduce, pair_block_rows, pairwise_reduce
from .reduce import (add_dicts, chunk_bounds, map_batches, map_chunks, map_reduce, reduce_chunks,
                     tree_reduce)
from .runner import WORKER_CONFIG, Local, Runner, one_blas_thread, worker_config_env
from .sort import SortedFile, distributed_sort
from .threads import alongside, serial_map, thread_map, thread_pool

__all__ = ["WORKER_CONFIG", "worker_config_env",
           "serial_map", "thread_map", "thread_pool", "alongside", "Runner", "Local", "one_blas_thread", "tree_reduce", "map_reduce", "chunk_bounds", "add_dicts",
           "map_batches", "map_chunks", "reduce_chunks",
           "pairwise_reduce", "pair_block_rows", "indexed_reduce", "distributed_sort",
           "SortedFile", "CellExecutor", "cell_mode"]
