"""Gower distance on mixed keys (nominal, ordinal, numeric), in exact integer units.

Gower (1971): the distance of two records is the mean over the key columns of

- ``[a != b]`` for a nominal column (categorical codes),
- ``|a - b| / (L_j - 1)`` for an ordinal column (codes in label order, L_j levels),
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
    """

    nominal: tuple[bool, ...]
    unit: float
    exact: tuple[bool, ...]

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


def plan(kinds: tuple[str, ...], orig: dict[str, np.ndarray], masked: dict[str, np.ndarray]
         ) -> tuple[Gower, dict[str, np.ndarray]]:
    """The Gower distance of a key set from the two files' :func:`column_stats`.

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
        lo_b = np.nanmin([orig["min"][j], masked["min"][j]])
        hi_b = np.nanmax([orig["max"][j], masked["max"][j]])
        if kind == "nominal":
            exact[j] = True
            continue
        if kind == "ordinal":
            levels = int(hi_b) + 1 if np.isfinite(hi_b) else 1
            den[j] = max(levels - 1, 1)
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
              exact=tuple(bool(e) for e in exact))
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

@numba.njit(cache=True, nogil=True)
def _top2_kernel(Q, C, nominal, unit, d1, c1, d2, c2):
    nq, p = Q.shape
    nc = C.shape[0]
    for i in range(nq):
        b1 = np.inf
        n1 = 0
        b2 = np.inf
        n2 = 0
        for k in range(nc):
            d = 0.0
            for j in range(p):
                a = Q[i, j]
                b = C[k, j]
                if nominal[j]:
                    if not (a == b):
                        d += unit
                else:
                    t = np.rint(abs(a - b))
                    d += unit if t != t else t
                if d > b2:
                    break                       # terms are >= 0: it cannot place
            if d < b1:
                b2 = b1
                n2 = n1
                b1 = d
                n1 = 1
            elif d == b1:
                n1 += 1
            elif d < b2:
                b2 = d
                n2 = 1
            elif d == b2:
                n2 += 1
        d1[i] = b1
        c1[i] = n1
        d2[i] = b2
        c2[i] = n2 if b2 < np.inf else 0


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
    _top2_kernel(Q, C, np.array(g.nominal, dtype=np.bool_), float(g.unit),
                 out["d1"], out["c1"], out["d2"], out["c2"])
    return out
