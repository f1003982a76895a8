"""Record linkage: numpy block kernels and the Dask drivers that tile and reduce them.

Distance linkage: :mod:`kernels`, :mod:`drivers`. Probabilistic record linkage:
:mod:`prl` (comparison, pattern counts, EM, weights, candidate kernels),
:mod:`prl_drivers` (the blocked passes), :mod:`link` (files linked by column
name). One-to-one assignment, dense or sparse: :mod:`assignment`.
"""

from . import assignment, drivers, kernels, link, prl, prl_drivers
from .assignment import Candidates, assign
from .drivers import (distance_link_counts, link_top2, nearest_candidates, row_truth,
                      truth_from_ids)
from .link import link_files
from .prl_drivers import probabilistic_linkage

__all__ = ["kernels", "drivers", "distance_link_counts", "link_top2", "nearest_candidates",
           "row_truth", "truth_from_ids", "assignment", "assign", "Candidates", "prl",
           "prl_drivers", "probabilistic_linkage", "link", "link_files"]
