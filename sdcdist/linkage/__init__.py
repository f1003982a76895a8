"""Record linkage: numpy block kernels and the drivers that tile and reduce them.

Distance linkage: :mod:`distance` (kernels), :mod:`distance_drivers`. Probabilistic
record linkage: the package :mod:`prl` (settings, comparison, pattern counts, EM,
weights, candidates, the blocked passes and the driver), :mod:`link` (files linked by
column name). Which record is whose: :mod:`truth`. One-to-one assignment, dense
or sparse: the package :mod:`assignment`.
"""

from . import assignment, distance, distance_drivers, link, prl, truth
from .assignment import Candidates, assign
from .distance_drivers import link_top2, nearest_candidates
from .link import link_files
from .prl import PRLSettings, probabilistic_linkage
from .truth import check_truth, invert_truth, row_truth, truth_counts, truth_from_ids

__all__ = ["distance", "distance_drivers", "link_top2", "nearest_candidates", "truth",
           "row_truth", "truth_from_ids", "truth_counts", "check_truth", "invert_truth", "assignment", "assign", "Candidates",
           "prl", "PRLSettings", "probabilistic_linkage", "link", "link_files"]
