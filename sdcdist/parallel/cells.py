"""The cell executor: many independent cells (mask + measure), here or on a cluster.

An audit and a calibration both evaluate cells: a masked file made from one
input file, then measured. Two ways to spread them, with bit-identical
results:

- ``task`` (small files): a whole cell is one task (``whole``), and many
  cells run at once on the cluster;
- ``distributed`` (large files): a cell is driven from this process
  (``spread``) and its own tasks (the masked file, each metric's chunk and
  pair-block tasks) spread over the cluster; several cells are driven at
  once from a few threads so the workers stay busy.

``cell_mode: auto`` picks ``task`` up to ``task_cell_limit`` records and
``distributed`` above (:func:`cell_mode`; the caller passes both options in).

Each cell's result is handed to ``on_done`` as soon as it is ready, in this
thread (so the caller may write it to a store); on a failure the cells not
yet finished are cancelled, and if the client loses its scheduler the run
stops with a :class:`ConnectionError` instead of waiting for ever.
"""

from __future__ import annotations

import queue
import threading
from collections.abc import Callable, Hashable, Mapping, Sequence
from typing import Any, TypeVar

from .runner import Runner, lost_scheduler

__all__ = ["CellExecutor", "cell_mode"]

C = TypeVar("C")


def cell_mode(mode: str, n: int, *, limit: int, cells: int | None = None,
              workers: int = 1) -> str:
    """``task`` or ``distributed``: the ``cell_mode`` option, ``auto`` resolved for ``n`` rows.

    Parameters
    ----------
    mode : {"auto", "task", "distributed"}
        The ``cell_mode`` option.
    n : int
        Records in the largest input file.
    limit : int
        The ``task_cell_limit`` option: ``auto`` is ``task`` up to ``limit`` rows,
        unless there are fewer ``cells`` than twice the ``workers``: then whole-cell
        tasks would leave workers idle, and ``distributed`` spreads each cell's own
        tasks (its key sets at once) over them. Both modes give the same cube bit for bit.
    """
    if mode == "auto":
        limit = int(limit)
        few = cells is not None and workers > 1 and cells < 2 * workers
        return "task" if n <= limit and not few else "distributed"
    return mode


class CellExecutor:
    """Runs cells on inputs placed once on the cluster.

    Parameters
    ----------
    runner : Runner
    inputs : mapping of key -> array
        The input files, shared once (:meth:`Runner.share`: a killed worker
        never takes the only copy with it; the scheduler recomputes it).
    """

    def __init__(self, runner: Runner, inputs: Mapping[Hashable, Any]):
        self.runner = runner
        self.inputs = {k: runner.share(v) for k, v in inputs.items()}

    def run(self, cells: Sequence[C], *, mode: str, input_of: Callable[[C], Hashable],
            whole: Callable[..., Any], whole_args: Callable[[C], tuple],
            spread: Callable[[Runner, Any, C], Any],
            on_done: Callable[[C, Any], None]) -> None:
        """Evaluate ``cells``; ``on_done(cell, result)`` as each finishes.

        Parameters
        ----------
        cells : sequence
        mode : {"task", "distributed"}
        input_of : callable
            The key of a cell's input in ``inputs``.
        whole, whole_args : callable
            Task mode: ``whole(input, *whole_args(cell))`` is the cell as one task
            (a plain function, run on a worker).
        spread : callable
            Distributed mode: ``spread(runner, input_handle, cell)`` drives the
            cell's tasks through the runner and returns its result.
        on_done : callable
            Receives each cell and its result, in this thread.
        """
        if mode not in ("task", "distributed"):
            raise ValueError(f"cell mode must be 'task' or 'distributed', not {mode!r}")
        cells = list(cells)
        if not cells:
            return
        r = self.runner
        if mode == "task":
            if r.client is None:
                for c in cells:
                    on_done(c, r.result(r.fresh_task(whole, self.inputs[input_of(c)],
                                                     *whole_args(c))))
            else:
                self._run_tasks(cells, input_of, whole, whole_args, on_done)
        elif r.client is None:
            for c in cells:
                on_done(c, spread(r, self.inputs[input_of(c)], c))
        else:
            self._drive(cells, lambda c: spread(r, self.inputs[input_of(c)], c), on_done)

    def _run_tasks(self, cells: list, input_of: Callable, whole: Callable,
                   whole_args: Callable, on_done: Callable) -> None:
        r = self.runner
        handles = {r.fresh_task(whole, self.inputs[input_of(c)], *whole_args(c)): c
                   for c in cells}
        try:
            for h in r.as_completed(handles):
                on_done(handles[h], r.result(h))
        finally:
            r.cancel(list(handles))

    def _drive(self, cells: list, one: Callable[[Any], Any],
               on_done: Callable[[Any, Any], None]) -> None:
        """Drive cells from a few daemon threads, handing each result over as it finishes.

        The threads only wait on futures; this thread calls ``on_done`` and
        watches the client, and the daemon threads do not keep the process
        alive.
        """
        todo: queue.Queue = queue.Queue()
        for c in cells:
            todo.put(c)
        results: queue.Queue = queue.Queue()

        def work() -> None:
            while True:
                try:
                    c = todo.get_nowait()
                except queue.Empty:
                    return
                try:
                    results.put((c, one(c), None))
                except BaseException as exc:  # handed to the driving thread
                    results.put((c, None, exc))
        nthreads = max(2, 2 * self.runner.n_workers)
        for _ in range(min(nthreads, len(cells))):
            threading.Thread(target=work, daemon=True, name="sdcdist-cells").start()
        try:
            for _ in cells:
                while True:
                    try:
                        c, res, exc = results.get(timeout=0.5)
                        break
                    except queue.Empty:
                        if self.runner.lost():
                            raise lost_scheduler() from None
                if exc is not None:
                    raise exc
                on_done(c, res)
        finally:
            while not todo.empty():  # stop the threads taking new cells
                try:
                    todo.get_nowait()
                except queue.Empty:
                    break
