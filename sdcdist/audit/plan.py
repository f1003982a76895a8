"""Expand a spec into cells (dataset, method, param, replicate), each with its own seed.

Seeds come from ``SeedSequence(spec.seed, spawn_key=(crc32(dataset),
crc32(method), crc32(repr(param)), replicate))``: stable integer ids that
depend on the names, never on the order of the spec, the worker count or
the scheduling order.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from ..masking import get_method
from ..metrics._registry import stable_id
from .spec import AuditSpec

__all__ = ["Cell", "plan_cells", "cell_seed"]


@dataclass(frozen=True)
class Cell:
    """One unit of work: mask once, measure every metric."""

    method: str
    param: float
    replicate: int
    m: int          # index of the method in the cube
    p: int          # index of the parameter value in the cube
    entropy: int
    spawn_key: tuple[int, ...]
    dataset: str = "data"
    d: int = 0      # index of the dataset in the cube

    @property
    def seed(self) -> np.random.SeedSequence:
        return np.random.SeedSequence(self.entropy, spawn_key=self.spawn_key)


def cell_seed(spec_seed: int, dataset: str, method: str, param: float,
              replicate: int) -> tuple[int, tuple[int, ...]]:
    """``(entropy, spawn_key)`` of a cell."""
    return spec_seed, (stable_id(dataset), stable_id(method), stable_id(repr(float(param))),
                       int(replicate))


def plan_cells(spec: AuditSpec) -> list[Cell]:
    """Every cell of the spec in cube order; deterministic methods get replicate 0 only."""
    grid = spec.param_grid()
    index = {p: i for i, p in enumerate(grid)}
    cells = []
    for di, ds in enumerate(spec.datasets):
        for mi, ms in enumerate(spec.methods):
            reps = spec.replicates if get_method(ms.name).random else 1
            for p in ms.params:
                for r in range(reps):
                    ent, key = cell_seed(spec.seed, ds.name, ms.name, p, r)
                    cells.append(Cell(ms.name, float(p), r, mi, index[p], ent, key,
                                      ds.name, di))
    return cells
