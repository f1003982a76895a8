"""One-to-one assignment of records: dense exact, or sparse on a candidate graph.

Global linkage (probabilistic record linkage, GDBRL) pairs every record of one
file with at most one record of the other so that the total weight (or the
total distance) is optimal. Two solvers, both exact for the problem they are
given:

* **sparse**: :func:`solve_sparse`, successive shortest augmenting paths
  (Jonker-Volgenant style: an augmenting row reduction, then Dijkstra on reduced
  costs from each free row, dual potentials kept) on a candidate graph, e.g. each
  record's top-c partners. At equal distance a free column ends the search, then
  the lowest column index wins, so ties cost nothing and the result is
  deterministic; every search scans a column at most once, so it terminates on
  any graph (LAPJVsp, used before, did not return on micro-aggregated weights).
  One dummy partner per row makes a full matching always exist, so rows whose
  candidates are all taken stay unassigned (for linkage: not re-identified).
  The result equals the dense optimum whenever the dense optimum uses only
  candidate edges; otherwise it is the optimum over the candidate graph, and
  ``info["flag"]`` says the restriction was used. The solver also returns the
  optimal duals.
* **dense**: the exact optimum of the full ``n_rows x n_cols`` matrix. Memory
  ``O(n_rows * n_cols)``, so only up to a configurable size (``dense_limit``).
  By default (from :data:`EXACT_MIN` on) :func:`exact_dense`: the sparse solver
  on a first graph, then the dual certificate checked on every entry of the
  matrix, violated entries added and the solve warm-started, until no entry
  violates it, which proves the sparse optimum is the dense one. The first graph
  is each row's and column's best entries; from :data:`AUCTION_MIN` rows on, each
  row's best entries at the prices of a dense epsilon-scaling auction, whose
  prices also start the duals, so that the certificate holds after two or three
  rounds instead of a dozen (the optimum of a 5,000-record PRL matrix lies far down
  many rows' lists of raw weights). A matrix of few distinct values (PRL weights on
  categorical keys) takes the auction from :data:`AUCTION_FEW_MIN` rows on, in one
  coarse phase (:func:`~.auction.epsilons`). On PRL weight matrices, full of equal weights,
  it is many times faster than :func:`scipy.optimize.linear_sum_assignment`
  (benchmarks/assignment.py), which remains for small matrices. Tied optima may
  pair records differently from scipy's; the total weight is the same.

Exact ties (:mod:`.ties`): :func:`assign` rounds every weight once to a multiple of 2^-24
and solves on those integers (exact in float64), so totals equal in exact arithmetic are
equal; of all optimal assignments it returns the lexicographically smallest in the order of
the rows and columns (content order in :func:`assign_by_content`), whichever path solved it.

Semantics of leaving records unassigned (``unmatched``):

* ``None`` (default): as many rows as possible are assigned (a full
  assignment of the smaller side when the graph allows it), then the total
  weight is optimised — the dense solver's behaviour. On a sparse graph a row
  is left out only when no full assignment exists among the candidates.
* a number ``u`` (or one per row): leaving a row unassigned is worth ``u``
  (a cost ``u`` when minimising); a pair is kept only if it beats that, e.g.
  ``u = 0`` with log-likelihood weights keeps only pairs with positive weight.
* ``"row_floor"`` (sparse): each row's ``u`` is a hair below its worst
  candidate. On a complete graph this is the full assignment; on a contested
  candidate graph it avoids the long augmenting chains that maximising the
  cardinality needs (several times faster), at the price of a few more rows
  left unassigned.

The API is generic: rows and columns are any two record sets; the caller
says which is which.
"""

from __future__ import annotations

from . import api, auction, dense, sparse, ties
from .api import (DEFAULT_DENSE_LIMIT, assign, assign_by_content, content_order, expected_hits,
                  identical_classes, top_candidates)
from .dense import exact_dense
from .sparse import Candidates, solve_sparse

__all__ = ["Candidates", "assign", "assign_by_content", "content_order", "top_candidates",
           "identical_classes", "expected_hits",
           "exact_dense", "solve_sparse", "DEFAULT_DENSE_LIMIT", "api", "auction", "dense",
           "sparse", "ties"]
