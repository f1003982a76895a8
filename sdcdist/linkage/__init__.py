"""Record linkage: numpy block kernels and the Dask drivers that tile and reduce them."""

from . import drivers, kernels
from .drivers import distance_link_counts

__all__ = ["kernels", "drivers", "distance_link_counts"]
