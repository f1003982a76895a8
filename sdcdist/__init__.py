"""sdcdist: how much a masking method costs analysts, and how easily it re-identifies people.

The public facade. Modules each do one thing:

- :mod:`sdcdist.data`      microdata I/O (CSV/Parquet -> Zarr), validation, synthetic files
- :mod:`sdcdist.masking`   masking methods, registry ``masking.REGISTRY``
- :mod:`sdcdist.metrics`   information loss, utility, disclosure risk, ``metrics.REGISTRY``
- :mod:`sdcdist.linkage`   record-linkage kernels and their Dask drivers
- :mod:`sdcdist.parallel`  how work is spread over the cluster
- :mod:`sdcdist.audit`     audit specs, plans, runs
- :mod:`sdcdist.cube`      the result cube and its query helpers (best, pareto, at_risk, ranks)
- :mod:`sdcdist.query`     the small filter language of ``sdcdist query --where``
- :mod:`sdcdist.report`    ranking tables and plots
- :mod:`sdcdist.client`    ``connect(url)``: audits on an ``sdcdist serve`` service

The names below are imported on first use (PEP 562), so ``import sdcdist``
(and the command line's ``sdcdist --help``) does not load numpy, numba,
scipy or Dask until something needs them.

Importing sdcdist first pins numpy's and OpenBLAS's SIMD code paths to their AVX2
level for this process and every process it starts (:mod:`sdcdist.simd`), so a cube
does not depend on the CPU; when numpy was imported before, sdcdist warns if the
paths it runs are not the pinned ones, and cubes record them.
"""

from __future__ import annotations

import importlib
import importlib.util
from typing import TYPE_CHECKING, Any

from . import simd as _simd
from .errors import SdcInputError

if not _simd.pin():          # numpy came first: its paths are chosen; say which if unpinned
    _simd.check(stacklevel=2)

__version__ = "0.1.0"

__all__ = ["SdcInputError", "Microdata", "from_array", "ingest", "load_microdata",
           "open_microdata", "write_microdata", "MASKING_METHODS", "METRICS", "measure",
           "Inputs", "mask", "connect", "__version__"]

#: public name -> (module, attribute), imported on first access
_LAZY = {
    "Microdata": (".data", "Microdata"),
    "from_array": (".data", "from_array"),
    "ingest": (".data", "ingest"),
    "load_microdata": (".data", "load_microdata"),
    "open_microdata": (".data", "open_microdata"),
    "write_microdata": (".data", "write_microdata"),
    "MASKING_METHODS": (".masking", "REGISTRY"),
    "METRICS": (".metrics", "REGISTRY"),
    "measure": (".metrics", "measure"),
    "Inputs": (".metrics", "Inputs"),
    "connect": (".client", "connect"),
}

if TYPE_CHECKING:  # pragma: no cover - for type checkers and IDEs
    from .data import (Microdata, from_array, ingest, load_microdata, open_microdata,
                       write_microdata)
    from .masking import REGISTRY as MASKING_METHODS
    from .metrics import REGISTRY as METRICS, Inputs, measure
    from .client import connect


def __getattr__(name: str) -> Any:
    if name in _LAZY:
        module, attr = _LAZY[name]
        value = getattr(importlib.import_module(module, __name__), attr)
        globals()[name] = value          # later lookups skip this function
        return value
    if not name.startswith("_") and importlib.util.find_spec(f"{__name__}.{name}"):
        # a subpackage used as an attribute (``sdcdist.masking.REGISTRY``) before its import
        return importlib.import_module(f".{name}", __name__)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


def __dir__() -> list[str]:
    return sorted(set(globals()) | set(__all__))


def mask(X, method: str, param: float = 0.0, *, rng, **options):
    """Mask ``X`` (n x m array) with a registered method; returns a new array.

    >>> import numpy as np, sdcdist
    >>> X = np.random.default_rng(0).normal(size=(100, 3))
    >>> Y = sdcdist.mask(X, "rankswap", 5, rng=np.random.default_rng(1))
    >>> bool((np.sort(Y, axis=0) == np.sort(X, axis=0)).all())
    True
    """
    from .masking import get_method
    return get_method(method)(X, param, rng=rng, **options)
