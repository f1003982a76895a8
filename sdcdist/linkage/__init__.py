"""Record linkage: numpy block kernels and the Dask drivers that tile and reduce them."""

from . import drivers, kernels
from .drivers import (distance_link_counts, link_top2, nearest_candidates, row_truth,
                      truth_from_ids)

__all__ = ["kernels", "drivers", "distance_link_counts", "link_top2", "nearest_candidates",
           "row_truth", "truth_from_ids"]
