"""PLD and PLD20 from an assignment: correct pairs, and correct pairs down to the
precision cutoff; PLD_best from each masked record's best weights (best link)."""

from __future__ import annotations

import math

import numpy as np

from ..assignment import expected_hits

__all__ = ["pld_counts", "precision_cutoff", "WEIGHT_GRID", "on_grid", "best_link_credit"]

#: Best-link weights are compared on this grid (nats): each weight rounded to the nearest
#: multiple, so weights equal in exact arithmetic tie exactly (CATALOG PRL item 5).
WEIGHT_GRID = 2.0 ** -24


def on_grid(w: np.ndarray) -> np.ndarray:
    """Weights in units of :data:`WEIGHT_GRID`, rounded to the nearest integer (as floats:
    exact for |w| < 2**29 nats; -inf stays -inf)."""
    return np.rint(np.asarray(w, dtype=np.float64) / WEIGHT_GRID)


def best_link_credit(top: np.ndarray, n_top: np.ndarray, wtrue: np.ndarray) -> np.ndarray:
    """Each masked record's best-link credit: 1/t when its true pair's weight is its best
    weight, shared with t - 1 other original records (all on the grid: ``top`` the best
    weight, ``n_top`` = t, ``wtrue`` the true pair's weight, NaN when it has none), else 0
    (DLD's rule)."""
    top = np.asarray(top, dtype=np.float64)
    wt = np.asarray(wtrue, dtype=np.float64)
    hit = np.isfinite(top) & np.isfinite(wt)
    hit[hit] = on_grid(wt[hit]) == top[hit]
    out = np.zeros(top.size)
    out[hit] = 1.0 / np.asarray(n_top)[hit]
    return out


def precision_cutoff(w: np.ndarray, correct: np.ndarray, level: float = 0.2) -> float:
    """Pairs counted by PLD20: correct pairs down to where precision falls to ``level``.

    The assigned pairs are sorted by weight (descending); at each distinct
    weight the precision of the pairs at that weight or higher is computed;
    the cutoff is the lowest weight where it is still ``>= level``. Returns
    the number of correct pairs at or above the cutoff (0 if none).
    ``correct`` may be boolean or each pair's expected correctness
    (:func:`~sdcdist.linkage.assignment.expected_hits`): the precision is then
    the expected correct pairs over the pairs, and the count is expected too.
    """
    w = np.asarray(w, dtype=np.float64)
    correct = np.asarray(correct, dtype=np.float64)
    if w.size == 0:
        return 0.0
    order = np.lexsort((-correct, -w))
    ws, cs = w[order], correct[order]
    cum_c = np.cumsum(cs)
    n = np.arange(1, ws.size + 1)
    last = np.r_[ws[1:] != ws[:-1], True]   # end of each tie group
    # (1 - 1e-12): a fractional cumulative sum a rounding below level * n still reaches it;
    # integer counts are never that close to level * n without reaching it
    ok = last & (cum_c >= level * n * (1.0 - 1e-12))
    if not ok.any():
        return 0.0
    return math.fsum(cs[:np.flatnonzero(ok)[-1] + 1].tolist())


def pld_counts(rows_b: np.ndarray, cols_a: np.ndarray, w: np.ndarray, truth: np.ndarray,
               level: float = 0.2, *, class_b: np.ndarray | None = None,
               class_a: np.ndarray | None = None) -> dict[str, float]:
    """Correct pairs of an assignment: all (PLD) and down to the precision cutoff (PLD20).

    With the classes of identical records (``class_b``, ``class_a``:
    :func:`~sdcdist.linkage.assignment.identical_classes` of the key values) each
    pair counts its expected correctness over the permutations of identical
    records (CATALOG PRL item 5), so the counts do not depend on how either file
    is sorted; without them, a pair is correct iff it is the true pair.
    """
    rows_b = np.asarray(rows_b, dtype=np.int64)
    cols_a = np.asarray(cols_a, dtype=np.int64)
    if class_b is None or class_a is None:
        credit = (np.asarray(truth)[rows_b] == cols_a).astype(np.float64)
    else:
        credit = expected_hits(rows_b, cols_a, truth, class_b, class_a)
    return {"correct": math.fsum(credit.tolist()),
            "correct20": precision_cutoff(w, credit, level), "assigned": int(rows_b.size)}
