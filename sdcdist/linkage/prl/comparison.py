"""PRL comparison: how key columns are compared, and the compared values of each file.

See the package docstring (:mod:`sdcdist.linkage.prl`) for the comparison and its levels.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numba
import numpy as np

from ...errors import count_error, param_error
from ...moments import column_moments, constant_columns
from .settings import DEFAULTS, PRLSettings

__all__ = ["Comparison", "comparison", "transform", "prepare_side", "column_sd", "transposed",
           "all_rows", "level", "MAX_LEVELS", "MAX_PATTERN_CODE", "RULE_DOWNWEIGHT",
           "RULE_LEVEL", "RULE_LINEAR", "same_tolerances", "const_tolerances", "mixed_radix"]


def mixed_radix(n_levels: np.ndarray) -> np.ndarray:
    """The place value of each column in a pattern code ``sum_k level_k * radix_k``
    (``radix_0 = 1``, each the product of the levels of the columns before it), int64."""
    return np.concatenate([[1], np.cumprod(n_levels)[:-1]]).astype(np.int64)


#: Most tolerances per column (levels = tolerances + 1).
MAX_LEVELS = 15

#: Largest mixed-radix pattern code (int64 with headroom).
MAX_PATTERN_CODE = 1 << 62

#: The comparison rule of a key column (:attr:`Comparison.rule`), how its weight is read:
#: the d/l downweighting of a binary numeric column (from the agreement weight at
#: difference 0 down to the disagreement weight at the tolerance) ...
RULE_DOWNWEIGHT = 0
#: ... the weight of the pair's level (a categorical column; a multi-level numeric one
#: under the weight shape ``prl_weights: step``) ...
RULE_LEVEL = 1
#: ... or linear in the difference between the levels' middles (a multi-level numeric
#: column under the weight shape ``prl_weights: linear``, the default).
RULE_LINEAR = 2


@dataclass(frozen=True)
class Comparison:
    """How the key columns are compared.

    Attributes
    ----------
    method : {"s", "l", "d"}
        Numeric comparison: absolute difference in sd of A's column (s),
        relative difference on raw values (d) or on ``g(v)`` (l).
    levels : tuple of tuple of float
        Increasing tolerances of each key column (one for a binary
        agree/disagree comparison); ``()`` for a categorical column.
    categorical : tuple of bool
        Columns compared by equality.
    weights : {"linear", "step"}
        The weight shape of multi-level numeric columns (option ``prl_weights``, whose
        default is this field's): linear in the difference between the levels' middles,
        or a step function, the weight of the pair's level (:func:`comparison`).
    """

    method: str
    levels: tuple[tuple[float, ...], ...]
    categorical: tuple[bool, ...]
    weights: str = DEFAULTS.weights

    @property
    def n_levels(self) -> np.ndarray:
        """Outcomes per column: number of tolerances + 1 (2 for categorical)."""
        return np.array([2 if c else len(t) + 1 for t, c in zip(self.levels, self.categorical)],
                        dtype=np.int64)

    @property
    def radix(self) -> np.ndarray:
        return mixed_radix(self.n_levels)

    @property
    def n_patterns(self) -> int:
        """Size of the pattern space ``prod(n_levels)`` (a Python int: never overflows)."""
        out = 1
        for x in self.n_levels.tolist():
            out *= int(x)
        return out

    @property
    def rule(self) -> np.ndarray:
        """The comparison rule of each column (int8): :data:`RULE_DOWNWEIGHT` (binary
        numeric), :data:`RULE_LEVEL` (categorical; multi-level numeric under the step
        shape) or :data:`RULE_LINEAR` (multi-level numeric under the linear shape)."""
        multi = RULE_LINEAR if self.weights == "linear" else RULE_LEVEL
        return np.array([RULE_LEVEL if c else (multi if len(t) > 1 else RULE_DOWNWEIGHT)
                         for t, c in zip(self.levels, self.categorical)], dtype=np.int8)

    @property
    def flat_tolerances(self) -> np.ndarray:
        """Tolerances as a (K, Lmax) array, padded with +inf."""
        L = max(1, max((len(t) for t in self.levels), default=1))
        out = np.full((len(self.levels), L), np.inf)
        for k, (t, c) in enumerate(zip(self.levels, self.categorical)):
            if c:
                out[k, 0] = 0.0
            else:
                out[k, :len(t)] = t
        return out


def comparison(n_keys: int, settings: PRLSettings | None = None, *, categorical: Any = None,
               method: str | None = None, t: Any = None, weights: str | None = None
               ) -> Comparison:
    """Build and check a :class:`Comparison` for ``n_keys`` key columns.

    Parameters
    ----------
    n_keys : int
    settings : PRLSettings, optional
        Checked settings (default: the registry's); their ``method``, ``t`` and
        ``weights`` are used.
    categorical : sequence of bool, optional
        Columns compared by equality.
    method, t, weights : optional
        These three settings given directly, over ``settings`` (checked by the registry
        as ``prl_method``, ``prl_t``, ``prl_weights``), e.g. ``comparison(3, t=0.05)``:

    method : {"s", "l", "d"}
    t : float, sequence of float, or per-column sequence of sequences
        One tolerance for every numeric column (binary comparison), an
        increasing list of tolerances (the same levels for every column), or
        one list per column.
    weights : {"linear", "step"}
        Multi-level numeric columns: ``linear`` (default) puts each level's
        weight ``w_l`` at the middle ``c_l = (t_{l-1} + t_l) / 2`` of its
        interval ``(t_{l-1}, t_l]`` (``t_{-1} = 0``; the last level's at
        ``c_L = t_{L-1}``) and reads a pair's weight at difference ``d``
        linearly between neighbouring middles,
        ``w_l + (w_{l+1} - w_l) (d - c_l) / (c_{l+1} - c_l)`` for
        ``c_l <= d <= c_{l+1}``; ``w`` of the first level below its middle,
        ``w_L`` beyond the last tolerance, and an exact-agreement level
        (``t_0 = 0``) keeps ``w_0`` at ``d = 0``. It is the multi-level
        analogue of the d/l downweighting of binary comparisons: the weight
        falls with the difference instead of in steps. ``step`` gives every
        pair of a level its weight ``w_l``. Binary and categorical columns are
        not affected.
    """
    settings = settings or DEFAULTS
    given = {name: v for name, v in (("prl_method", method), ("prl_t", t),
                                      ("prl_weights", weights)) if v is not None}
    if given:
        settings = settings.updated(given)
    method, t, weights = settings.method, settings.t, settings.weights
    if n_keys < 1:
        raise count_error("Probabilistic record linkage", "at least 1", "key column", 0,
                          "give key columns (e.g. --keys V1,V2)")
    cat = tuple(bool(c) for c in (categorical if categorical is not None else [False] * n_keys))
    if len(cat) != n_keys:
        raise count_error("The categorical flags", f"exactly {n_keys}",
                          "entries (one per key column)", len(cat))
    if not isinstance(t, (list, tuple)) and np.ndim(t) == 0:    # per-column lists may be ragged
        per = [(float(t),)] * n_keys
    elif all(np.ndim(x) == 0 for x in t):
        per = [tuple(float(x) for x in t)] * n_keys
    else:
        per = [tuple(float(x) for x in np.atleast_1d(x)) for x in t]
        if len(per) != n_keys:
            raise count_error("The tolerances 't'", f"exactly {n_keys}",
                              "lists (one per key column)", len(per))
    levels = tuple(() if c else lev for lev, c in zip(per, cat))
    for lev in levels:
        if len(lev) > MAX_LEVELS:
            raise param_error("t", "prl", f"at most {MAX_LEVELS} tolerances per column",
                              f"{len(lev)} tolerances")
    cmp = Comparison(method, levels, cat, weights)
    if cmp.n_patterns > MAX_PATTERN_CODE:
        raise count_error(f"The comparison of {n_keys} key columns", f"at most "
                          f"{MAX_PATTERN_CODE:.3g} (what a pattern code holds)",
                          "comparison patterns", f"{cmp.n_patterns:.3g}", "use fewer tolerances "
                          "per column or fewer key columns per key set")
    return cmp


def transform(values: np.ndarray, method: str) -> np.ndarray:
    """``g(v) = sign(v) log(1 + |v|)`` for the l method; the values for d."""
    v = np.asarray(values, dtype=np.float64)
    return np.sign(v) * np.log1p(np.abs(v)) if method == "l" else v


def prepare_side(X: Any, cols: tuple[int, ...], cmp: Comparison, *, side: str,
                 start: int = 0, stop: int | None = None) -> dict[str, np.ndarray]:
    """Compared values of one file's key columns (rows ``start:stop``).

    For file A (``side="a"``) also the tolerance of each value and level,
    ``tol[i, k, l] = t_kl * max(|a_ik|, 0.1)`` (0 for categorical columns); under method
    ``s``, ``t_kl * sd_k`` with ``sd_k`` A's column sd (:func:`column_sd`), 1 for a column
    that is constant in A (all its values equal, found exactly,
    :func:`sdcdist.moments.constant_columns`) or has no finite positive sd.

    Returns
    -------
    dict
        ``v`` (n, K) float64 compared values; for A also ``tol`` (n, K, L).
    """
    stop = X.shape[0] if stop is None else stop
    raw = np.asarray(X[start:stop][:, list(cols)], dtype=np.float64)
    v = raw.copy()
    for k, c in enumerate(cmp.categorical):
        if not c:
            v[:, k] = transform(raw[:, k], cmp.method)
    out = {"v": np.ascontiguousarray(v)}
    if side == "a":
        if cmp.method == "s":
            # absolute differences in units of A's column sd (ddof=1), like comparison
            # levels on standardised differences; the whole file gives the sd. A constant
            # column (all its values equal, found exactly: copies of 0.1 have a computed
            # sd of about 1e-17, not 0) or one without a finite positive sd is compared in
            # units of 1
            sd = column_sd(raw) if raw.shape[0] > 1 else np.ones(raw.shape[1])
            sd = np.where(np.isfinite(sd) & (sd > 0) & ~constant_columns(raw), sd, 1.0)
            base = np.broadcast_to(sd, v.shape)
        else:
            base = np.maximum(np.abs(v), 0.1)
        T = cmp.flat_tolerances
        tol = base[:, :, None] * T[None, :, :]
        tol[:, np.asarray(cmp.categorical, dtype=bool), 0] = 0.0   # equality
        out["tol"] = np.ascontiguousarray(tol)
    return out


def column_sd(raw: np.ndarray) -> np.ndarray:
    """Each column's sd (ddof=1, NaN left out), the same float in every row order.

    A floating-point sum depends on the order of its terms, so ``np.nanstd`` of a
    shuffled column can differ in its last bit; through the tolerances that moves
    every pair weight by a rounding and lets the row order pick among tied optimal
    assignments (CATALOG PRL item 5). Each column is summed in sorted order (its
    values alone fix the result; -0.0 counts as 0.0): :func:`sdcdist.moments.column_moments`,
    which the distance linkage's standardisation shares.

    Parameters
    ----------
    raw : ndarray (n, K)

    Returns
    -------
    ndarray (K,)
        NaN for a column with fewer than two values.
    """
    return column_moments(raw)[1]


def same_tolerances(tolT: np.ndarray, nlev: np.ndarray) -> np.ndarray:
    """Which key columns have the same tolerances on every A row (the ``s`` method's, in sd
    of the column; categorical columns): ``tolT`` (K, L, n) as :func:`transposed` gives
    it, a column's first ``nlev[k] - 1``; bool (K,). A kernel may then read a column's
    tolerances once: the very values of the per-row array, so the same results."""
    out = np.zeros(tolT.shape[0], dtype=np.bool_)
    for k in range(tolT.shape[0]):
        t = tolT[k, :int(nlev[k]) - 1]
        out[k] = t.shape[1] == 0 or bool(np.all(t == t[:, :1]))
    return out


def const_tolerances(tolT: np.ndarray, nlev: np.ndarray, width: int = 5
                     ) -> tuple[np.ndarray, np.ndarray]:
    """Columns whose tolerances are the same on every A row (:func:`same_tolerances`), as
    a ``(K, max(width, L))`` table of their tolerances padded with -1, and the flag per
    column. A column flagged constant is compared with the very tolerance value the
    per-row array holds, so the predicate, and the counts, are the same bit for bit."""
    K = tolT.shape[0]
    tc = np.full((K, max(width, tolT.shape[1])), -1.0)
    const = same_tolerances(tolT, nlev)
    if tolT.shape[2]:
        for k in np.flatnonzero(const):
            nl = int(nlev[k]) - 1
            tc[k, :nl] = tolT[k, :nl, 0]
    return tc, const


def transposed(a: dict) -> tuple[np.ndarray, np.ndarray]:
    """A's values (K, n) and tolerances (K, L, n), contiguous along the records."""
    return np.ascontiguousarray(a["v"].T), np.ascontiguousarray(a["tol"].transpose(1, 2, 0))


def all_rows(n_b: int, n_a: int) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    return (np.zeros(n_b, np.int64), np.full(n_b, n_a, np.int64), np.arange(n_a, dtype=np.int64))


@numba.njit(cache=True, nogil=True, inline="always")
def level(d: float, tol: np.ndarray, k: int, nlev: int) -> int:
    # number of tolerances missed; NaN misses all
    lev = 0
    for l in range(nlev - 1):
        if not (d <= tol[k, l]):
            lev += 1
    return lev
