"""Gower distance on mixed keys (nominal, ordinal, numeric), in exact integer units.

Gower (1971): the distance of two records is the mean over the key columns of

- ``[a != b]`` for a nominal column (categorical codes),
- ``|a - b| / (L_j - 1)`` for an ordinal column (codes in label order, L_j its declared
  categories; the largest code + 1 when none are known: :func:`plan`),
- ``|a - b| / range_j`` for a numeric column (range of the ORIGINAL column),
- 1 when either value is missing.

Exact ties
----------
Linkage counts ties (1/t), so equal distances must compare equal whatever the
summation order or the block that computes them. The mean's 1/p is a common factor
and is left out (it changes no order); the sum is computed in integer *units*:

- one full term (d_j = 1: a nominal mismatch, a missing value) is ``unit`` units;
- ``unit`` is a multiple of every ordinal ``L_j - 1`` and of every numeric range on a
  decimal grid (values with at most 6 decimals, read as the integers ``v * 10^k``), so
  their terms are exact integers: ``|a - b| * (unit / den_j)``. The common
  denominator is their least common multiple, taken column by column while it stays
  at most 2^40; a column that would push it further is rounded like the next case;
- the other numeric columns (values off a short decimal grid, e.g. after noise) have
  their term rounded to the nearest unit;
- ``unit`` is that common denominator times the largest power of two (possibly
  negative: then the exact terms are rounded too) that keeps the largest possible total
  (masked values may lie outside the original range) at most 2^52.

Every term is then an integer below 2^52, so sums are exact in float64 in any order:
two pairs tie exactly when their (rounded) term sums are equal, and every block, the
compiled top-2 kernel and the numpy reference give the same bits. The values are
prepared once per file (:func:`prepare`): shifted by the original column's minimum
and multiplied by ``unit / den_j``, so a term is ``rint(|a' - b'|)``.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numba
import numpy as np

__all__ = ["Gower", "column_stats", "plan", "prepare", "gower_distances",
           "gathered_gower", "gower_top2", "KINDS", "MAX_DECIMALS"]

#: Column kinds: nominal (codes compared for equality), ordinal (codes in label order),
#: numeric.
KINDS = ("nominal", "ordinal", "numeric")

#: Most decimals a numeric column may have to be read exactly (as integers v * 10^k).
MAX_DECIMALS = 6

_MAX_DEN = 2.0 ** 40
_MAX_TOTAL = 2.0 ** 52


@dataclass(frozen=True)
class Gower:
    """The Gower distance of one key set, ready for the kernels.

    Attributes
    ----------
    nominal : tuple of bool
        Per prepared column: compared for equality (True) or by ``rint(|a - b|)``.
    unit : float
        Units of one full term (d_j = 1); the Gower distance is total / (p * unit).
    exact : tuple of bool
        Per column: whether its terms are exact (not rounded to a unit).
    ordinal : tuple of bool
        Per column: an ordinal categorical column (grouped with the nominal ones by the
        compiled kernel).
    """

    nominal: tuple[bool, ...]
    unit: float
    exact: tuple[bool, ...]
    ordinal: tuple[bool, ...] = ()

    @property
    def width(self) -> int:
        return len(self.nominal)


def _decimals(v: np.ndarray) -> int:
    """Fewest decimals k <= MAX_DECIMALS with every value the float nearest to an integer /
    10^k (so ``rint(v * 10^k)`` reads it exactly); -1 when there is none."""
    v = v[~np.isnan(v)]
    if v.size == 0:
        return 0
    for k in range(MAX_DECIMALS + 1):
        s = 10.0 ** k
        if np.max(np.abs(v)) * s >= 2.0 ** 52:
            return -1
        if np.array_equal(np.rint(v * s) / s, v):
            return k
    return -1


def column_stats(X: Any, cols: tuple[int, ...], lookups: Any = None) -> dict[str, np.ndarray]:
    """Task: per column of ``cols``: its minimum and maximum (NaN when all missing), whether
    it has a missing value, and its decimals (:func:`_decimals`). ``lookups`` (one per
    column, None for none) recode categorical codes first."""
    A = np.array(X[:, list(cols)], dtype=np.float64)
    if lookups is not None:
        from ..keytables import apply_lookup
        for j, lk in enumerate(lookups):
            if lk is not None:
                A[:, j] = apply_lookup(A[:, j], lk)
    p = A.shape[1]
    lo, hi = np.full(p, np.nan), np.full(p, np.nan)
    for j in range(p):
        ok = ~np.isnan(A[:, j])
        if ok.any():
            lo[j], hi[j] = A[ok, j].min(), A[ok, j].max()
    return {"min": lo, "max": hi, "nan": np.isnan(A).any(axis=0),
            "decimals": np.array([_decimals(A[:, j]) for j in range(p)], dtype=np.int64)}


def plan(kinds: tuple[str, ...], orig: dict[str, np.ndarray], masked: dict[str, np.ndarray],
         levels: Sequence[int | None] | None = None) -> tuple[Gower, dict[str, np.ndarray]]:
    """The Gower distance of a key set from the two files' :func:`column_stats`.

    ``levels``: per column, the number of declared categories ``L_j`` of an ordinal
    column (its labels, used or not); None (or no ``levels``): the largest code in either
    file plus one. A code beyond the declared categories widens ``L_j`` to it (a term
    never exceeds 1).

    Returns the :class:`Gower` and the per-column preparation ``{"shift", "scale",
    "mult", "grid"}``: a prepared value is ``(v - shift) * mult`` (nominal: the code
    itself), with ``v`` first read as the integer ``rint(v * scale)`` where ``grid``.
    A numeric column needs a positive original range (the caller refuses constant
    ones).
    """
    p = len(kinds)
    den = np.ones(p)             # the denominator of each column's term
    span = np.ones(p)            # largest |a - b| over both files, in the same scale
    shift = np.zeros(p)
    scale = np.ones(p)
    grid = np.zeros(p, bool)
    exact = np.zeros(p, bool)
    for j, kind in enumerate(kinds):
        lo_b = np.fmin(orig["min"][j], masked["min"][j])      # NaN: all missing
        hi_b = np.fmax(orig["max"][j], masked["max"][j])
        if kind == "nominal":
            exact[j] = True
            continue
        if kind == "ordinal":
            n_lev = int(hi_b) + 1 if np.isfinite(hi_b) else 1
            declared = levels[j] if levels is not None else None
            if declared is not None:
                n_lev = max(int(declared), n_lev)
            den[j] = max(n_lev - 1, 1)
            span[j] = den[j]
            grid[j] = exact[j] = True
            continue
        k = min(int(orig["decimals"][j]), int(masked["decimals"][j]))
        k = -1 if k < 0 else max(int(orig["decimals"][j]), int(masked["decimals"][j]))
        if k >= 0:
            scale[j] = 10.0 ** k
            grid[j] = exact[j] = True
            shift[j] = np.rint(orig["min"][j] * scale[j])
            den[j] = np.rint(orig["max"][j] * scale[j]) - shift[j]
            span[j] = np.rint(hi_b * scale[j]) - np.rint(lo_b * scale[j])
        else:
            shift[j] = orig["min"][j]
            den[j] = orig["max"][j] - orig["min"][j]
            span[j] = hi_b - lo_b
    # common denominator of the exact terms, column by column while it stays <= 2^40
    common = 1
    for j, kind in enumerate(kinds):
        if kind == "nominal" or not exact[j]:
            continue
        d = int(den[j])
        nxt = common * d // math.gcd(common, d)
        if nxt > _MAX_DEN:
            exact[j] = False
        else:
            common = nxt
    top = float(np.sum(np.maximum(span / den, 1.0)))   # largest total, in full terms
    s = math.floor(math.log2(_MAX_TOTAL / (common * top)))
    unit = math.ldexp(float(common), s)
    while unit * top > _MAX_TOTAL:                     # log2's rounding, to be safe
        unit /= 2.0
        s -= 1
    if s < 0:
        exact[:] = [k == "nominal" for k in kinds]
    mult = np.where([k == "nominal" for k in kinds], 1.0, unit / den)
    g = Gower(nominal=tuple(k == "nominal" for k in kinds), unit=float(unit),
              exact=tuple(bool(e) for e in exact), ordinal=tuple(k == "ordinal" for k in kinds))
    return g, {"shift": shift, "scale": scale, "mult": mult, "grid": grid}


def prepare(X: Any, cols: tuple[int, ...], kinds: tuple[str, ...], prep: dict[str, np.ndarray],
            lookups: Any = None) -> np.ndarray:
    """Task: the key columns of a file prepared for the kernels (NaN where missing)."""
    A = np.array(X[:, list(cols)], dtype=np.float64)
    if lookups is not None:
        from ..keytables import apply_lookup
        for j, lk in enumerate(lookups):
            if lk is not None:
                A[:, j] = apply_lookup(A[:, j], lk)
    for j, kind in enumerate(kinds):
        if kind == "nominal":
            continue
        v = np.rint(A[:, j] * prep["scale"][j]) if prep["grid"][j] else A[:, j]
        A[:, j] = (v - prep["shift"][j]) * prep["mult"][j]
    return np.ascontiguousarray(A)


# -- the numpy reference kernel -----------------------------------------------------------

def _term(a: np.ndarray, b: np.ndarray, nominal: bool, unit: float) -> np.ndarray:
    if nominal:
        return np.where(a == b, 0.0, unit)          # NaN on either side: unequal
    t = np.rint(np.abs(a - b))
    return np.where(np.isnan(t), unit, t)


def gower_distances(Q: np.ndarray, C: np.ndarray, g: Gower) -> np.ndarray:
    """Gower totals (units) of every query row to every candidate row, (len(Q), len(C))."""
    D = np.zeros((Q.shape[0], C.shape[0]))
    for j in range(g.width):
        D += _term(Q[:, j, None], C[None, :, j], g.nominal[j], g.unit)
    return D


def gathered_gower(Q: np.ndarray, C: np.ndarray, idx: np.ndarray, g: Gower) -> np.ndarray:
    """Gower totals of query row i to candidate rows ``idx[i, :]``, shape ``idx.shape``."""
    D = np.zeros(idx.shape)
    for j in range(g.width):
        D += _term(Q[:, j, None], C[:, j][idx], g.nominal[j], g.unit)
    return D


# -- the compiled top-2 kernel (same integers, no pair matrix) -------------------------------
#
# Candidates are grouped by their categorical values (nominal and ordinal columns; a missing
# value is a value of its own for grouping) and queries by theirs. For each query group the
# categorical part of the distance to every candidate group is computed once; the candidate
# groups are then visited in increasing categorical distance, and a group whose categorical
# part alone exceeds the query's second-best distance is never opened (every numeric term is
# >= 0), nor is any group after it. Within a group, a candidate's numeric terms are added
# until the total exceeds the second-best distance. Every total is the same integer as the
# reference kernel's (integers below 2^53 add exactly in any order), so the partial is the
# same bits; the pruning only skips candidates that cannot be among the two nearest
# distinct distances.

@numba.njit(cache=True, nogil=True)
def _cat_term(a, b, nominal, unit):
    if nominal:
        return 0.0 if a == b else unit
    t = np.rint(abs(a - b))
    return unit if t != t else t


@numba.njit(cache=True, nogil=True, inline="always")
def _offer(d, b1, n1, b2, n2):
    if d < b1:
        return d, 1, b1, n1
    if d == b1:
        return b1, n1 + 1, b2, n2
    if d < b2:
        return b1, n1, d, 1
    if d == b2:
        return b1, n1, b2, n2 + 1
    return b1, n1, b2, n2


@numba.njit(cache=True, nogil=True, inline="always")
def _total(Qn, i, Cn, k, base, unit, bound, nominal):
    """base + the per-pair terms of query i and candidate k, stopped once above ``bound``."""
    d = base
    for j in range(Qn.shape[1]):
        d += _cat_term(Qn[i, j], Cn[k, j], nominal[j], unit)
        if d > bound:
            break
    return d


@numba.njit(cache=True, nogil=True)
def _grouped_top2(Qc, Qn, q_order, q_start, q_count, Gc, cat_nominal, Cn, num_nominal, walk,
                  g_start, g_split, g_end, unit, d1, c1, d2, c2):
    n_groups = Gc.shape[0]
    pc = Gc.shape[1]
    pn = Cn.shape[1]
    catd = np.empty(n_groups)
    for u in range(q_start.shape[0]):
        first = q_order[q_start[u]]
        for g in range(n_groups):
            s = 0.0
            for j in range(pc):
                s += _cat_term(Qc[first, j], Gc[g, j], cat_nominal[j], unit)
            catd[g] = s
        visit = np.argsort(catd)
        for r in range(q_start[u], q_start[u] + q_count[u]):
            i = q_order[r]
            b1 = np.inf
            n1 = 0
            b2 = np.inf
            n2 = 0
            for v in range(n_groups):
                g = visit[v]
                base = catd[g]
                if base > b2:
                    break                    # every later group is as far on its categories
                lo, mid, hi = g_start[g], g_split[g], g_end[g]
                if not walk or Qn[i, 0] != Qn[i, 0]:
                    for k in range(lo, hi):  # no order to use: every candidate
                        d = _total(Qn, i, Cn, k, base, unit, b2, num_nominal)
                        b1, n1, b2, n2 = _offer(d, b1, n1, b2, n2)
                    continue
                # candidates [lo, mid) sorted by numeric column 0, [mid, hi) missing on it:
                # walk outwards from the query's value while column 0's term alone can place
                a0 = Qn[i, 0]
                pos = lo + np.searchsorted(Cn[lo:mid, 0], a0)
                k = pos
                while k < mid:
                    if base + np.rint(abs(a0 - Cn[k, 0])) > b2:
                        break
                    d = _total(Qn, i, Cn, k, base, unit, b2, num_nominal)
                    b1, n1, b2, n2 = _offer(d, b1, n1, b2, n2)
                    k += 1
                k = pos - 1
                while k >= lo:
                    if base + np.rint(abs(a0 - Cn[k, 0])) > b2:
                        break
                    d = _total(Qn, i, Cn, k, base, unit, b2, num_nominal)
                    b1, n1, b2, n2 = _offer(d, b1, n1, b2, n2)
                    k -= 1
                for k in range(mid, hi):
                    d = _total(Qn, i, Cn, k, base, unit, b2, num_nominal)
                    b1, n1, b2, n2 = _offer(d, b1, n1, b2, n2)
            d1[i] = b1
            c1[i] = n1
            d2[i] = b2
            c2[i] = n2 if b2 < np.inf else 0


def _groups(A: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Rows of ``A`` grouped by equal values (NaN equal to NaN): (order, start, count)."""
    if A.shape[1] == 0:
        n = A.shape[0]
        return (np.arange(n, dtype=np.int64), np.zeros(1 if n else 0, np.int64),
                np.full(1 if n else 0, n, np.int64))
    key = np.zeros(A.shape[0], np.int64)
    for j in range(A.shape[1]):
        # dense ids per column (prepared categorical values are >= 0; -1: missing), combined
        # into one key while it fits, else the rows themselves are compared
        u, ids = np.unique(np.where(np.isnan(A[:, j]), -1.0, A[:, j]), return_inverse=True)
        if key.max(initial=0) >= 2**62 // max(u.size, 1):
            _, ids_all = np.unique(np.where(np.isnan(A), -1.0, A), axis=0,
                                   return_inverse=True)
            key = ids_all.ravel().astype(np.int64)
            break
        key = key * u.size + ids.ravel()
    _, inverse, count = np.unique(key, return_inverse=True, return_counts=True)
    order = np.argsort(inverse.ravel(), kind="stable").astype(np.int64)
    start = np.concatenate([[0], np.cumsum(count)[:-1]]).astype(np.int64)
    return order, start, count.astype(np.int64)


def gower_top2(Q: np.ndarray, C: np.ndarray, g: Gower) -> dict[str, np.ndarray]:
    """Top-2 partial (as :func:`sdcdist.linkage.distance.block_top2` of
    :func:`gower_distances`, bit for bit) without the pair matrix."""
    Q = np.ascontiguousarray(Q, dtype=np.float64)
    C = np.ascontiguousarray(C, dtype=np.float64)
    n = Q.shape[0]
    out = {"d1": np.full(n, np.inf), "c1": np.zeros(n, np.int64),
           "d2": np.full(n, np.inf), "c2": np.zeros(n, np.int64)}
    if C.shape[0] == 0 or n == 0:
        return out
    cat = [j for j in range(g.width) if g.nominal[j] or _categorical(g, j)]
    c_order, g_start, g_count = _groups(C[:, cat])
    if g_start.size > 8 * np.sqrt(C.shape[0]) + 64:
        # too many category combinations to group by (each query group would weigh every
        # candidate group): one group, the categorical terms per pair
        cat = []
        c_order, g_start, g_count = _groups(C[:, cat])
    num = [j for j in range(g.width) if j not in cat]
    walkable = [j for j in num if not g.nominal[j]]
    if walkable:
        # the numeric column whose terms spread most (interquartile range in units) first:
        # candidates are walked in its order, and its term alone bounds the walk
        def spread(j: int) -> float:
            v = C[:, j][~np.isnan(C[:, j])]
            return float(np.subtract(*np.percentile(v, [75, 25]))) if v.size else 0.0
        lead = max(walkable, key=lambda j: (spread(j), -j))
        num = [lead] + [j for j in num if j != lead]
    q_order, q_start, q_count = _groups(Q[:, cat])
    Cs = C[c_order]
    g_split = g_start + g_count
    if walkable:
        # within each group: sorted by the lead column, its missing values last
        lead_v = Cs[:, num[0]]
        grp = np.repeat(np.arange(g_start.size), g_count)
        within = np.lexsort((lead_v, np.isnan(lead_v), grp))
        Cs = Cs[within]
        miss = np.bincount(grp, weights=np.isnan(lead_v), minlength=g_start.size)
        g_split = g_start + g_count - miss.astype(np.int64)
    Gc = np.ascontiguousarray(Cs[g_start][:, cat])
    _grouped_top2(np.ascontiguousarray(Q[:, cat]), np.ascontiguousarray(Q[:, num]), q_order,
                  q_start, q_count, Gc, np.array([g.nominal[j] for j in cat], dtype=np.bool_),
                  np.ascontiguousarray(Cs[:, num]),
                  np.array([g.nominal[j] for j in num], dtype=np.bool_), bool(walkable),
                  g_start, g_split, g_start + g_count,
                  float(g.unit), out["d1"], out["c1"], out["d2"], out["c2"])
    return out


def _categorical(g: Gower, j: int) -> bool:
    return g.ordinal[j] if g.ordinal else False
