"""The rank kernel's pattern space without the exact-agreement levels that no pair can meet.

A column whose first tolerance is 0 has an exact-agreement level (``|a - b| <= 0``, the
same finite value on both sides). On masked continuous values no B value equals an A value,
so that level is empty for every pair, yet it takes a sixth of the column's radix: ten
such columns of six levels span 6^10 (60 million) codes of which at most 5^10 (9.8 million)
can occur. :func:`compact_levels` finds the columns whose exact level cannot occur (no
finite value in both files' column) and gives the rank kernel their levels from the second
one on; :func:`expand_codes` maps the codes counted in that smaller space back to the
comparison's codes. The counts are the same: the same predicate on the same tolerances,
the levels of every pair shifted by one in those columns, and the map keeps the codes'
order (the digits keep their order of significance).
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numba
import numpy as np

from .comparison import mixed_radix

__all__ = ["CompactLevels", "compact_levels", "expand_codes"]


@dataclass(frozen=True)
class CompactLevels:
    """The rank kernel's levels with the empty exact levels left out: ``nlev`` (K,) levels
    a column, ``radix`` (K,) their mixed radix, ``tc`` (K, U) the tolerances (padded with
    -1 as :func:`~.patterns._const_tolerances` pads them), ``drop`` (K,) 1 where the exact
    level is left out, ``n_patterns`` the size of the smaller space."""

    nlev: np.ndarray
    radix: np.ndarray
    tc: np.ndarray
    drop: np.ndarray
    n_patterns: int


def _shares_a_value(a: np.ndarray, b: np.ndarray) -> bool:
    # whether a finite value of a equals one of b (0.0 and -0.0 are equal, as |a - b| <= 0
    # says); infinities never meet |a - b| <= 0 (inf - inf is NaN)
    a = np.unique(a[np.isfinite(a)])
    b = np.unique(b[np.isfinite(b)])
    if not a.size or not b.size:
        return False
    pos = np.minimum(np.searchsorted(a, b), a.size - 1)
    return bool(np.any(a[pos] == b))


def compact_levels(avT: np.ndarray, bv: np.ndarray, tc: np.ndarray, nlev: np.ndarray
                   ) -> CompactLevels | None:
    """The levels of the rank kernel without the exact levels that no pair of ``avT`` (K,
    n_a) and ``bv`` (n_b, K) can meet (columns of at least three levels whose first
    tolerance ``tc[k, 0]`` is 0 and whose finite values the two sides do not share);
    ``None`` when every column keeps all of its levels."""
    K = nlev.size
    drop = np.zeros(K, dtype=np.int64)
    for k in range(K):
        if nlev[k] >= 3 and tc[k, 0] == 0.0 and not _shares_a_value(avT[k], bv[:, k]):
            drop[k] = 1
    if not drop.any():
        return None
    nl = (nlev - drop).astype(np.int64)
    tcc = np.full_like(tc, -1.0)
    for k in range(K):
        tcc[k, :nl[k] - 1] = tc[k, drop[k]:nlev[k] - 1]
    return CompactLevels(nl, mixed_radix(nl), tcc, drop, int(np.prod(nl, dtype=object)))


def _digit_table(nl: np.ndarray, drop: np.ndarray, radix: np.ndarray) -> np.ndarray:
    # for each code of the mixed radix nl (its columns' digits), the comparison's code of
    # those columns: sum (digit + drop) * radix
    size = int(np.prod(nl, dtype=np.int64))
    t = np.arange(size, dtype=np.int64)
    out = np.zeros(size, dtype=np.int64)
    for k in range(nl.size):
        out += (t % nl[k] + drop[k]) * radix[k]
        t //= nl[k]
    return out


@numba.njit(cache=True, nogil=True)
def _expand(codes, plo, lo, hi):
    # codes (increasing) = x + plo * h: lo[x] + hi[h], h found by walking up from the
    # previous code's (no division)
    out = np.empty(codes.size, dtype=np.int64)
    h = 0
    base = 0
    for q in range(codes.size):
        x = codes[q]
        while x >= base + plo:
            base += plo
            h += 1
        out[q] = lo[x - base] + hi[h]
    return out


def expand_codes(codes: np.ndarray, cl: CompactLevels, radix: np.ndarray) -> np.ndarray:
    """The comparison's codes (``radix``, int64) of the increasing ``codes`` counted in
    ``cl``'s space: each column's digit plus its dropped level; they stay increasing. Two
    tables of the columns' codes (the first columns, about the square root of the space,
    and the rest) and a walk over the codes, without a division a code."""
    nl, drop = cl.nlev, cl.drop
    radix = np.asarray(radix, dtype=np.int64)
    j, plo = 1, int(nl[0])
    while j < nl.size and plo * int(nl[j]) <= max(1, math.isqrt(cl.n_patterns)):
        plo *= int(nl[j])
        j += 1
    return _expand(np.asarray(codes, dtype=np.int64), plo,
                   _digit_table(nl[:j], drop[:j], radix[:j]),
                   _digit_table(nl[j:], drop[j:], radix[j:]))
