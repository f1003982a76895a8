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
"""

from .errors import SdcInputError
from .data import (Microdata, from_array, ingest, load_microdata, open_microdata,
                   write_microdata)
from .masking import REGISTRY as MASKING_METHODS
from .metrics import REGISTRY as METRICS, measure

__version__ = "0.1.0"

__all__ = ["SdcInputError", "Microdata", "from_array", "ingest", "load_microdata",
           "open_microdata", "write_microdata", "MASKING_METHODS", "METRICS", "measure",
           "mask", "__version__"]


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
