"""Probabilistic record linkage (Fellegi-Sunter with EM): the math, on blocks of records.

Files A (original or external, ``n_a`` records) and B (masked, ``n_b``), key
columns K. Everything here is plain numpy / numba on arrays a task already
holds; :mod:`.blocks` tiles the pair space and reduces, :mod:`.driver` runs the phases.

Comparison (CATALOG.md, "Probabilistic record linkage")
-------------------------------------------------------
Numeric key column, method ``d``: a pair agrees iff ``|a - b| <= t * max(|a|, 0.1)``
(``a`` the value in A); method ``l``: the same on ``g(v) = sign(v) log(1 + |v|)``;
method ``s`` (the default, with levels 0, 0.1, 0.25, 0.5, 1): ``|a - b| <= t * sd``,
``sd`` the column's sd in A (ddof=1; summed over the sorted column, the same float in
every row order: :func:`~.comparison.column_sd`; 1 for a column constant in A, found by
its values, not its sd), like comparison levels on absolute differences in other linkers.
Categorical columns agree iff equal. With several tolerances ``t_1 < t_2 <
...`` per column (multi-level comparison, like Splink's comparison levels) the
level of a pair is the number of tolerances it misses: 0 = agrees within
``t_1``, ..., ``L`` = misses all. A missing value (NaN) is at the last level.

Patterns
--------
The comparison vector of a pair is coded ``sum_k level_k * radix_k``
(mixed radix, ``radix_0 = 1``). Pattern counts are sparse: the codes that
occur, increasing, with their pair counts (:func:`sparse_counts`); blocks merge
exactly (integers, :func:`merge_counts`). The pattern space ``prod(n_levels)``
is never materialised, so 13 columns x several levels work.

Weights
-------
Binary numeric columns use the d/l downweighting of Yancey-Winkler-Creecy:
``w = max(w_agr - (w_agr - w_dis) |a - b| / (t max(|a|, 0.1)), w_dis)``
with ``w_agr = ln(m/u)``, ``w_dis = ln((1-m)/(1-u))``; categorical columns
use the weight ``w_l = ln(m_l / u_l)`` of the pair's level. Multi-level numeric
columns, by default (``weights="linear"``), read ``w_l`` at the middle of level
``l``'s interval (the last level at the last tolerance) and interpolate linearly
in ``|a - b|`` between neighbouring middles (constant below the first middle and
beyond the last tolerance; an exact-agreement level keeps ``w_0``): the weight
falls with the difference as the d/l downweighting does for binary columns.
With ``weights="step"`` every pair of a level gets ``w_l``.
The pair weight is the sum over key columns, accumulated in column order, so a
pair gets the same float in every block.

Modules
-------
:mod:`.settings` (the options, checked once), :mod:`.comparison`,
:mod:`.patterns` (counts over pairs), :mod:`.counting` (the same counts
without all pairs), :mod:`.em`, :mod:`.weights` (the one column-weight
function every kernel inlines), :mod:`.topc` (candidates), :mod:`.pld`,
:mod:`.blocks` (the passes on a cluster), :mod:`.driver`
(:func:`probabilistic_linkage`).
"""

from __future__ import annotations

from . import blocks, counting, driver, patterns, pld, settings, topc, weights
from .blocks import blocked_pattern_counts
from .comparison import Comparison, comparison, prepare_side, transform
from .driver import PRLResult, probabilistic_linkage
from .em import EMResult, em
from .patterns import merge_counts, pattern_counts, sparse_counts
from .pld import pld_counts, precision_cutoff
from .settings import DEFAULTS, EMSettings, PRLSettings
from .topc import merge_topc, topc_block
from .weights import (WeightParams, dense_weights, match_probability, pair_weights,
                      weight_params)

__all__ = ["Comparison", "comparison", "transform", "prepare_side", "pattern_counts",
           "sparse_counts", "merge_counts", "EMResult", "em", "WeightParams", "weight_params",
           "topc_block", "merge_topc", "pair_weights", "dense_weights", "match_probability",
           "pld_counts", "precision_cutoff", "PRLSettings", "EMSettings", "DEFAULTS",
           "PRLResult", "probabilistic_linkage", "blocked_pattern_counts",
           "blocks", "counting", "driver", "patterns", "pld", "settings", "topc", "weights"]
