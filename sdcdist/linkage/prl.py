"""Probabilistic record linkage (Fellegi-Sunter with EM): the math, on blocks of records.

Files A (original or external, ``n_a`` records) and B (masked, ``n_b``), key
columns K. Everything here is plain numpy / numba on arrays a task already
holds; :mod:`sdcdist.linkage.prl_drivers` tiles the pair space and reduces.

Comparison (CATALOG.md, "Probabilistic record linkage")
-------------------------------------------------------
Numeric key column, method ``d``: a pair agrees iff ``|a - b| <= t * max(|a|, 0.1)``
(``a`` the value in A); method ``l``: the same on ``g(v) = sign(v) log(1 + |v|)``;
method ``s`` (the default, with levels 0, 0.1, 0.25, 0.5, 1): ``|a - b| <= t * sd``,
``sd`` the column's sd in A (ddof=1), like comparison levels on absolute
differences in other linkers.
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
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any

import numba
import numpy as np

from ..errors import SdcInputError, one_of, param_error
from .assignment import expected_hits

__all__ = ["Comparison", "comparison", "transform", "prepare_side", "pattern_counts",
           "pattern_levels", "sparse_counts", "merge_counts", "dense_counts",
           "EMResult", "em", "WeightParams", "weight_params",
           "topc_block", "merge_topc", "pair_weights", "dense_weights", "match_probability",
           "pld_counts", "precision_cutoff"]


#: Most tolerances per column (levels = tolerances + 1).
MAX_LEVELS = 15

#: Largest mixed-radix pattern code (int64 with headroom).
MAX_PATTERN_CODE = 1 << 62

# --------------------------------------------------------------------------
# comparison specification
# --------------------------------------------------------------------------

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
    weights : {"step", "linear"}
        How a multi-level numeric column's weight is read from its per-level
        weights: the weight of the pair's level (step), or linear in the
        difference between the levels' middles (:func:`comparison`).
    """

    method: str
    levels: tuple[tuple[float, ...], ...]
    categorical: tuple[bool, ...]
    weights: str = "step"

    @property
    def n_levels(self) -> np.ndarray:
        """Outcomes per column: number of tolerances + 1 (2 for categorical)."""
        return np.array([2 if c else len(t) + 1 for t, c in zip(self.levels, self.categorical)],
                        dtype=np.int64)

    @property
    def radix(self) -> np.ndarray:
        nl = self.n_levels
        return np.concatenate([[1], np.cumprod(nl)[:-1]]).astype(np.int64)

    @property
    def n_patterns(self) -> int:
        """Size of the pattern space ``prod(n_levels)`` (a Python int: never overflows)."""
        out = 1
        for x in self.n_levels.tolist():
            out *= int(x)
        return out

    @property
    def step(self) -> np.ndarray:
        """Columns weighted by level (categorical or multi-level) instead of downweighting."""
        return np.array([c or len(t) > 1 for t, c in zip(self.levels, self.categorical)])

    @property
    def rule(self) -> np.ndarray:
        """Weight rule of each column (int8): 0 d/l downweighting (binary numeric),
        1 step weight of the level (categorical; multi-level with ``weights="step"``),
        2 linear within the level (multi-level numeric with ``weights="linear"``)."""
        lin = 2 if self.weights == "linear" else 1
        return np.array([1 if c else (lin if len(t) > 1 else 0)
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


#: The default comparison (chosen by benchmarks/prl.py): method and tolerances.
DEFAULT_METHOD = "s"
DEFAULT_T = (0.0, 0.1, 0.25, 0.5, 1.0)
DEFAULT_WEIGHTS = "linear"

#: How the weight of a multi-level numeric column is read from its per-level weights.
WEIGHT_RULES = ("linear", "step")


def comparison(n_keys: int, *, method: str = DEFAULT_METHOD, t: float | Any = DEFAULT_T,
               categorical: Any = None, weights: str = DEFAULT_WEIGHTS) -> Comparison:
    """Build and check a :class:`Comparison` for ``n_keys`` key columns.

    Parameters
    ----------
    method : {"s", "l", "d"}
        Unknown names raise :class:`SdcInputError` listing the valid ones.
    t : float, sequence of float, or per-column sequence of sequences
        One tolerance for every numeric column (binary comparison), an
        increasing list of tolerances (the same levels for every column), or
        one list per column.
    categorical : sequence of bool, optional
        Columns compared by equality.
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
    if weights not in WEIGHT_RULES:
        raise param_error("weights", "prl", one_of(WEIGHT_RULES), weights)
    if n_keys < 1:
        raise SdcInputError("probabilistic record linkage needs at least one key column; "
                            "got none. Give key columns (e.g. --keys V1,V2)")
    if method not in ("d", "l", "s"):
        raise param_error("method", "prl", one_of(("d", "l", "s")), method)
    cat = tuple(bool(c) for c in (categorical if categorical is not None else [False] * n_keys))
    if len(cat) != n_keys:
        raise SdcInputError(f"categorical flags for {len(cat)} columns but {n_keys} key columns")
    if not isinstance(t, (list, tuple)) and np.ndim(t) == 0:    # per-column lists may be ragged
        per = [(float(t),)] * n_keys
    elif all(np.ndim(x) == 0 for x in t):
        per = [tuple(float(x) for x in t)] * n_keys
    else:
        per = [tuple(float(x) for x in np.atleast_1d(x)) for x in t]
        if len(per) != n_keys:
            raise SdcInputError(f"tolerances for {len(per)} columns but {n_keys} key columns")
    for lev in per:
        if len(lev) == 0 or not all(np.isfinite(x) and x > 0 for x in lev[1:]) or \
                not (np.isfinite(lev[0]) and (lev[0] > 0 or (lev[0] == 0 and len(lev) > 1))):
            raise param_error("t", "prl", "a tolerance > 0 (finite), or increasing ones of which "
                              "only the first may be 0 (exact agreement)", list(lev))
        if any(b <= a for a, b in zip(lev, lev[1:])):
            raise param_error("t", "prl", "a list of increasing tolerances", list(lev))
    levels = tuple(() if c else lev for lev, c in zip(per, cat))
    for lev in levels:
        if len(lev) > MAX_LEVELS:
            raise param_error("t", "prl", f"at most {MAX_LEVELS} tolerances per column",
                              f"{len(lev)} tolerances")
    cmp = Comparison(method, levels, cat, weights)
    if cmp.n_patterns > MAX_PATTERN_CODE:
        raise SdcInputError(f"{n_keys} key columns with these levels make {cmp.n_patterns:.3g} "
                            f"comparison patterns, more than the {MAX_PATTERN_CODE:.3g} a "
                            "pattern code can hold; use fewer tolerances per column or fewer "
                            "key columns per key set")
    return cmp


def transform(values: np.ndarray, method: str) -> np.ndarray:
    """``g(v) = sign(v) log(1 + |v|)`` for the l method; the values for d."""
    v = np.asarray(values, dtype=np.float64)
    return np.sign(v) * np.log1p(np.abs(v)) if method == "l" else v


def prepare_side(X: Any, cols: tuple[int, ...], cmp: Comparison, *, side: str,
                 start: int = 0, stop: int | None = None) -> dict[str, np.ndarray]:
    """Compared values of one file's key columns (rows ``start:stop``).

    For file A (``side="a"``) also the tolerance of each value and level,
    ``tol[i, k, l] = t_kl * max(|a_ik|, 0.1)`` (0 for categorical columns).

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
            # levels on standardised differences; the whole file gives the sd
            sd = np.nanstd(raw, axis=0, ddof=1) if raw.shape[0] > 1 else np.ones(raw.shape[1])
            sd = np.where(np.isfinite(sd) & (sd > 0), sd, 1.0)
            base = np.broadcast_to(sd, v.shape)
        else:
            base = np.maximum(np.abs(v), 0.1)
        T = cmp.flat_tolerances
        tol = base[:, :, None] * T[None, :, :]
        tol[:, np.asarray(cmp.categorical, dtype=bool), 0] = 0.0   # equality
        out["tol"] = np.ascontiguousarray(tol)
    return out


# --------------------------------------------------------------------------
# kernels (numba: 3.5e9 pairs x 8 columns must not allocate pair matrices)
# --------------------------------------------------------------------------

@numba.njit(cache=True, nogil=True, inline="always")
def _level(d: float, tol: np.ndarray, k: int, nlev: int) -> int:
    # number of tolerances missed; NaN misses all
    lev = 0
    for l in range(nlev - 1):
        if not (d <= tol[k, l]):
            lev += 1
    return lev


@numba.njit(cache=True, nogil=True)
def _codes_row(avT, tolT, bj, lo, hi, aidx, identity, nlev, radix, code):
    # pattern code of B row bj against A rows aidx[lo:hi] (or lo:hi when identity),
    # column by column so the inner loop runs over contiguous A values
    n = hi - lo
    code[:n] = 0
    for k in range(avT.shape[0]):
        r = radix[k]
        x = bj[k]
        for l in range(nlev[k] - 1):
            if identity:
                for q in range(n):
                    i = lo + q
                    code[q] += r - r * (abs(avT[k, i] - x) <= tolT[k, l, i])
            else:
                for q in range(n):
                    i = aidx[lo + q]
                    code[q] += r - r * (abs(avT[k, i] - x) <= tolT[k, l, i])
    return n


#: Largest pattern space counted with a dense histogram inside a block (then
#: compressed); above it a block counts into an open-addressing hash table.
DENSE_PATTERN_SPACE = 1 << 16

@numba.njit(cache=True, nogil=True)
def _counts_dense(avT, tolT, bv, lo, hi, aidx, identity, nlev, radix, n_patterns):
    # four interleaved histograms: runs of the same pattern do not serialise the increments
    counts = np.zeros((4, n_patterns), dtype=np.int64)
    code = np.empty(avT.shape[1] if identity else max(1, aidx.size), dtype=np.int64)
    for j in range(bv.shape[0]):
        n = _codes_row(avT, tolT, bv[j], lo[j], hi[j], aidx, identity, nlev, radix, code)
        for q in range(n):
            counts[q & 3, code[q]] += 1
    return counts.sum(axis=0)


@numba.njit(cache=True, nogil=True, inline="always")
def _slot(key, mask):
    # Fibonacci hashing of a non-negative code
    return ((key * np.uint64(0x9E3779B97F4A7C15)) >> np.uint64(20)) & mask


@numba.njit(cache=True, nogil=True)
def _hash_add(keys, vals, key, inc, mask):
    h = _slot(np.uint64(key), mask)
    while True:
        k = keys[h]
        if k == key:
            vals[h] += inc
            return 0
        if k < 0:
            keys[h] = key
            vals[h] = inc
            return 1
        h = (h + np.uint64(1)) & mask


@numba.njit(cache=True, nogil=True)
def _counts_hash(avT, tolT, bv, lo, hi, aidx, identity, nlev, radix):
    # open addressing with linear probing; grows at load 1/2. A B row's codes
    # are first run-length merged (neighbouring A rows often share a pattern).
    size = 1 << 12
    keys = np.full(size, -1, dtype=np.int64)
    vals = np.zeros(size, dtype=np.int64)
    used = 0
    code = np.empty(avT.shape[1] if identity else max(1, aidx.size), dtype=np.int64)
    for j in range(bv.shape[0]):
        n = _codes_row(avT, tolT, bv[j], lo[j], hi[j], aidx, identity, nlev, radix, code)
        q = 0
        while q < n:
            x = code[q]
            r = q + 1
            while r < n and code[r] == x:
                r += 1
            used += _hash_add(keys, vals, x, r - q, np.uint64(size - 1))
            if 2 * used > size:
                size *= 2
                k2 = np.full(size, -1, dtype=np.int64)
                v2 = np.zeros(size, dtype=np.int64)
                for s in range(keys.size):
                    if keys[s] >= 0:
                        _hash_add(k2, v2, keys[s], vals[s], np.uint64(size - 1))
                keys, vals = k2, v2
            q = r
    ok = keys >= 0
    ck, cv = keys[ok], vals[ok]
    o = np.argsort(ck)
    return ck[o], cv[o]


def sparse_counts(codes: np.ndarray, counts: np.ndarray | None = None
                  ) -> tuple[np.ndarray, np.ndarray]:
    """Sparse pattern counts from per-pair pattern codes (or from weighted codes).

    This is the one representation of pattern counts used everywhere: only the
    patterns that occur, as two int64 arrays sorted by code, never a dense
    vector over all ``prod(n_levels)`` patterns (13 columns x 5 levels would be
    1.2e9 entries).

    Parameters
    ----------
    codes : int array, shape (n,)
        Mixed-radix pattern code of each pair (``sum_k level_k * radix_k``,
        :attr:`Comparison.radix`), in any order, repeats allowed.
    counts : int array, shape (n,), optional
        Multiplicity of each entry of ``codes`` (default 1 each), e.g. to merge
        several sparse counts: ``sparse_counts(concat(codes), concat(counts))``.

    Returns
    -------
    codes : ndarray of int64, shape (p,)
        The distinct codes that occur (with a non-zero count), increasing.
    counts : ndarray of int64, shape (p,)
        Number of pairs with each code (> 0). The result depends only on the
        multiset of codes, so counts merge exactly in any order.
    """
    codes = np.asarray(codes, dtype=np.int64).ravel()
    if counts is None:
        u, c = np.unique(codes, return_counts=True)
        return u.astype(np.int64), c.astype(np.int64)
    counts = np.asarray(counts, dtype=np.int64).ravel()
    if counts.shape != codes.shape:
        raise ValueError("codes and counts must have the same length")
    u, inv = np.unique(codes, return_inverse=True)
    c = np.zeros(u.size, dtype=np.int64)
    np.add.at(c, inv.ravel(), counts)
    keep = c != 0
    return u[keep].astype(np.int64), c[keep]


def merge_counts(*parts: tuple[np.ndarray, np.ndarray]) -> tuple[np.ndarray, np.ndarray]:
    """Sum of several sparse pattern counts (:func:`sparse_counts` form); exact, order-free."""
    if len(parts) == 1:
        return parts[0]
    return sparse_counts(np.concatenate([p[0] for p in parts]),
                         np.concatenate([p[1] for p in parts]))


def dense_counts(sparse: tuple[np.ndarray, np.ndarray], n_patterns: int) -> np.ndarray:
    """The dense vector of counts over all ``n_patterns`` codes (small pattern spaces only)."""
    out = np.zeros(int(n_patterns), dtype=np.int64)
    out[np.asarray(sparse[0], dtype=np.int64)] = sparse[1]
    return out


def _transposed(a: dict) -> tuple[np.ndarray, np.ndarray]:
    """A's values (K, n) and tolerances (K, L, n), contiguous along the records."""
    return np.ascontiguousarray(a["v"].T), np.ascontiguousarray(a["tol"].transpose(1, 2, 0))


def _all(n_b: int, n_a: int) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    return (np.zeros(n_b, np.int64), np.full(n_b, n_a, np.int64), np.arange(n_a, dtype=np.int64))


def pattern_counts(a: dict, b: dict, cmp: Comparison, *, lo: np.ndarray | None = None,
                   hi: np.ndarray | None = None, aidx: np.ndarray | None = None
                   ) -> tuple[np.ndarray, np.ndarray]:
    """Sparse counts of the comparison patterns over pairs of a block.

    Parameters
    ----------
    a, b : dict
        :func:`prepare_side` output for some A rows and some B rows.
    lo, hi, aidx : int arrays, optional
        Restrict B row ``j`` to the A rows ``aidx[lo[j]:hi[j]]`` (a blocking
        window); default all pairs of the block.

    Returns
    -------
    codes, counts : ndarrays of int64, shape (p,)
        The patterns that occur (increasing codes) and their pair counts, as
        :func:`sparse_counts`; :func:`merge_counts` adds blocks up.
    """
    identity = lo is None
    if identity:
        lo, hi, aidx = _all(b["v"].shape[0], a["v"].shape[0])
    avT, tolT = _transposed(a)
    if cmp.n_patterns <= DENSE_PATTERN_SPACE:
        d = _counts_dense(avT, tolT, b["v"], lo, hi, aidx, identity, cmp.n_levels, cmp.radix,
                          cmp.n_patterns)
        nz = np.flatnonzero(d)
        return nz.astype(np.int64), d[nz]
    return _counts_hash(avT, tolT, b["v"], lo, hi, aidx, identity, cmp.n_levels, cmp.radix)


def pattern_levels(cmp: Comparison, codes: np.ndarray | None = None) -> np.ndarray:
    """Level of each column in each pattern code: int array (n_codes, K).

    ``codes`` default: every code ``0 .. n_patterns - 1`` (small pattern spaces only).
    """
    if codes is None:
        codes = np.arange(cmp.n_patterns)
    codes = np.asarray(codes, dtype=np.int64)
    return (codes[:, None] // cmp.radix[None, :]) % cmp.n_levels[None, :]


# --------------------------------------------------------------------------
# EM for the two-class latent model with conditional independence
# --------------------------------------------------------------------------

@dataclass
class EMResult:
    """Fitted two-class model.

    ``m[k]``, ``u[k]``: level probabilities of column k among matches /
    non-matches (level 0 = agreement); ``p``: P(M); ``loglik`` of the pattern
    counts at the estimate; ``iterations``: evaluations of the EM map (E-steps,
    plain or within an accelerated cycle); ``converged`` (False: the iteration
    limit was reached before the parameters settled); ``clipped``: how many times
    a probability hit the guard bounds; ``constrained``: how many times the
    constraint ``m >= u`` was active in a column's M-step; ``history``: the log-likelihood at the
    input of each evaluation (one per iteration).
    """

    m: list[np.ndarray]
    u: list[np.ndarray]
    p: float
    loglik: float
    iterations: int
    converged: bool
    clipped: int = 0
    constrained: int = 0
    history: list[float] = field(default_factory=list, repr=False)


def _guard(x: np.ndarray, eps: float) -> tuple[np.ndarray, int]:
    """Keep level probabilities inside [eps, 1 - eps], renormalised."""
    hit = int(np.count_nonzero((x < eps) | (x > 1 - eps)))
    y = np.clip(x, eps, 1 - eps)
    return y / y.sum(), hit


def _as_sparse(counts: Any) -> tuple[np.ndarray, np.ndarray]:
    """(codes, counts) of the occurring patterns from sparse or dense counts."""
    if isinstance(counts, tuple):
        codes, c = (np.asarray(x, dtype=np.int64) for x in counts)
    else:
        dense = np.asarray(counts)
        codes = np.flatnonzero(dense).astype(np.int64)
        c = dense[codes].astype(np.int64)
    keep = c > 0
    return codes[keep], c[keep]


#: EM stops when no parameter's logarithm (log P(M), any log m or log u) moved by this
#: or more (a relative change: the weights are differences of logarithms).
EM_TOL = 1e-10

#: EM iteration limit; a fit that reaches it is flagged (``converged`` False).
EM_MAX_ITER = 20000


#: Largest space of level combinations of one column group in the E-step tables.
EM_GROUP_SPACE = 8192


def _group_tables(codes: np.ndarray, nl: np.ndarray,
                  radix: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Split the key columns into consecutive groups whose level combinations number at
    most :data:`EM_GROUP_SPACE` and index each pattern's combination in every group.

    Parameters
    ----------
    codes : ndarray of int64, shape (P,)
        Mixed-radix pattern codes (radix ``radix``, levels ``nl`` per column).

    Returns
    -------
    idx : ndarray of int32, shape (P, G)
        Row of the combination table of each pattern in each group.
    clev : ndarray of int8, shape (J, K)
        Levels of table row j on the columns of its group, -1 on the others. Only
        combinations that occur get a row (increasing within a group).
    """
    P, K = codes.shape[0], len(nl)
    groups: list[list[int]] = [[]]
    space = 1
    for k in range(K):
        if groups[-1] and space * int(nl[k]) > EM_GROUP_SPACE:
            groups.append([])
            space = 1
        groups[-1].append(k)
        space *= int(nl[k])
    idx = np.empty((P, len(groups)), dtype=np.int32)
    rows = []
    off = 0
    for g, cols in enumerate(groups):
        r = 1
        for k in cols:
            r *= int(nl[k])
        gc = (codes // radix[cols[0]]) % r          # the group's digits, local radix
        present = np.zeros(r, dtype=bool)
        present[gc] = True
        occ = np.flatnonzero(present)
        where = np.zeros(r, dtype=np.int64)
        where[occ] = np.arange(occ.size)
        idx[:, g] = where[gc] + off
        cl = np.full((occ.size, K), -1, dtype=np.int8)
        r = 1
        for k in cols:
            cl[:, k] = (occ // r) % nl[k]
            r *= int(nl[k])
        rows.append(cl)
        off += occ.size
    return idx, np.concatenate(rows)


@numba.njit(cache=True, nogil=True)
def _estep(idx, c, clev, nl, m, u, p, T, N, bm, ratio, R, LR, S):
    # E-step on sparse pattern counts. The match odds of pattern q are
    # e_q = p/(1-p) prod_k (m/u)[k, level], a product over the column groups' tables R
    # (one gather per group); g_q = e_q / (1 + e_q). Fills bm (K, L) with the expected
    # level counts among matches (one scatter per group into S, then the tables);
    # returns their total and the log-likelihood
    # N ln(1 - p) + sum_kl T_kl ln u_kl + sum_q c_q softplus(d_q), d_q = ln e_q.
    P, G = idx.shape
    J, K = clev.shape
    base = N * np.log1p(-p)
    lratio = np.zeros_like(ratio)
    for k in range(K):
        for l in range(nl[k]):
            lu = np.log(u[k, l])
            base += T[k, l] * lu
            ratio[k, l] = m[k, l] / u[k, l]
            lratio[k, l] = np.log(m[k, l]) - lu
    for j in range(J):
        r = 1.0
        lr = 0.0
        for k in range(K):
            lv = clev[j, k]
            if lv >= 0:
                r *= ratio[k, lv]
                lr += lratio[k, lv]
        R[j] = r
        LR[j] = lr
        S[j] = 0.0
    odds = p / (1.0 - p)
    sp = 0.0
    sm = 0.0
    for q in range(P):
        e = odds
        for g in range(G):
            e *= R[idx[q, g]]
        if 0.0 < e < 1e-4:              # softplus(d) = ln(1 + e): series, error < e^5/5
            s = e * (1.0 - e * (0.5 - e * (1.0 / 3.0 - 0.25 * e)))
            w = e / (1.0 + e)
        elif 1e-4 <= e < 1e300:
            s = np.log1p(e)
            w = e / (1.0 + e)
        else:                           # odds outside the double range (or 0): from the logs
            d = np.log(odds)
            for g in range(G):
                d += LR[idx[q, g]]
            if d > 0.0:
                s = d + np.log1p(np.exp(-d))
                w = 1.0 / (1.0 + np.exp(-d))
            else:
                x = np.exp(d)
                s = np.log1p(x)
                w = x / (1.0 + x)
        sp += c[q] * s
        cm = c[q] * w
        sm += cm
        for g in range(G):
            S[idx[q, g]] += cm
    bm[:, :] = 0.0
    for j in range(J):
        for k in range(K):
            lv = clev[j, k]
            if lv >= 0:
                bm[k, lv] += S[j]
    return sm, base + sp


@numba.njit(cache=True, nogil=True, inline="always")
def _segment(a, b, lo, hi):
    # expected matches and non-matches of the levels lo..hi (one piece between active cuts)
    As = 0.0
    Bs = 0.0
    for q in range(lo, hi + 1):
        As += a[q]
        Bs += b[q]
    return As, Bs


@numba.njit(cache=True, nogil=True)
def _constrained_levels(a, b, nk, m, u, smx, sux, t, N):
    # The exact M-step of one column under the constraint: maximise
    # sum_l a_l ln m_l + sum_l b_l ln u_l (a, b: expected level counts among matches /
    # non-matches) subject to sum_{l' <= l} m_l' >= sum_{l' <= l} u_l' for l < nk - 1.
    # At the optimum the active cuts split the levels into segments of equal mass
    # w_s = (A_s + B_s) / (A + B) in m and u, proportional to a and to b inside a
    # segment; the optimum is the feasible candidate with the largest objective over all
    # 2^(nk-1) sets of active cuts (strictly concave: unique). Writes m, u; returns
    # whether a cut is active. No cut: the unconstrained a / smx, b / sux (smx, sux the
    # E-step's totals); every cut: the pooled frequencies t / N (t the level totals).
    # the plain M-step when it is feasible (no need to enumerate the cut sets)
    ca = 0.0
    cb = 0.0
    free = True
    for l in range(nk - 1):
        ca += a[l]
        cb += b[l]
        if ca / smx < cb / sux:
            free = False
            break
    if free:
        for l in range(nk):
            m[l] = a[l] / smx
            u[l] = b[l] / sux
        return False
    A = 0.0
    B = 0.0
    for l in range(nk):
        A += a[l]
        B += b[l]
    A = A if A > 1e-300 else 1e-300
    B = B if B > 1e-300 else 1e-300
    best = -np.inf
    best_s = -1
    for s in range(1 << (nk - 1)):       # bit j set: cut after level j is active
        f = 0.0
        ok = True
        lo = 0
        for l in range(nk):
            if l < nk - 1 and not (s >> l) & 1:
                continue
            As, Bs = _segment(a, b, lo, l)       # segment lo..l
            ws = (As + Bs) / (A + B)
            ca = 0.0
            cb = 0.0
            for q in range(lo, l + 1):
                if q < l:                 # internal cut: must hold inside the segment
                    ca += a[q]
                    cb += b[q]
                    if As > 0.0 and Bs > 0.0 and ca / As < cb / Bs:
                        ok = False
                if a[q] > 0.0:
                    f += a[q] * np.log(ws * a[q] / As)
                if b[q] > 0.0:
                    f += b[q] * np.log(ws * b[q] / Bs)
            if not ok:
                break
            lo = l + 1
        if ok and f > best:
            best = f
            best_s = s
    if best_s == 0:
        for l in range(nk):
            m[l] = a[l] / smx
            u[l] = b[l] / sux
        return False
    if best_s == (1 << (nk - 1)) - 1:
        for l in range(nk):
            m[l] = t[l] / N
            u[l] = t[l] / N
        return True
    lo = 0
    for l in range(nk):
        if l < nk - 1 and not (best_s >> l) & 1:
            continue
        As, Bs = _segment(a, b, lo, l)
        ws = (As + Bs) / (A + B)
        for q in range(lo, l + 1):
            # a segment without expected matches (or non-matches) takes the other side's
            # shape: m = u there
            if As > 0.0:
                m[q] = ws * a[q] / As
                u[q] = ws * (b[q] / Bs if Bs > 0.0 else a[q] / As)
            elif Bs > 0.0:
                m[q] = ws * b[q] / Bs
                u[q] = ws * b[q] / Bs
            else:
                m[q] = 0.0
                u[q] = 0.0
        lo = l + 1
    return best_s != 0


@numba.njit(cache=True, nogil=True)
def _em_step(idx, c, clev, T, N, nl, m, u, p, m2, u2, p_lo, p_hi, eps, fix_u, bm, delta,
             R, LR, S):
    # One step of Winkler's constrained EM, the map F: (m, u, p) -> (m2, u2, p2).
    # Returns p2, the largest parameter change, the log-likelihood at (m, u, p), and
    # how many probabilities were clipped / columns pooled. F's output is always
    # feasible (P(M) in [p_lo, p_hi], m >= u cumulatively, probabilities in [eps, 1-eps]).
    K = nl.shape[0]
    sm, ll = _estep(idx, c, clev, nl, m, u, p, T, N, bm, delta, R, LR, S)
    su = N - sm                      # bu = T - bm: one scatter per column
    # M-step: P(M) bounded above (at most min(nA, nB) matches)
    pn = sm / N
    pn = p_lo if pn < p_lo else (p_hi if pn > p_hi else pn)
    # the change of the logarithms (relative change): weights are log m - log u, so a
    # probability near the eps floor must settle relatively, not only absolutely
    change = abs(np.log(pn) - np.log(p))
    smx = sm if sm > 1e-300 else 1e-300
    sux = su if su > 1e-300 else 1e-300
    clipped = 0
    constrained = 0
    L = m.shape[1]
    am_ = np.zeros(L)
    au_ = np.zeros(L)
    mm_ = np.zeros(L)
    uu_ = np.zeros(L)
    for k in range(K):
        nk = nl[k]
        # m >= u (cumulatively over the levels): the exact constrained maximum of the
        # expected complete-data log-likelihood (_constrained_levels); pooled frequencies
        # T / N only when every cut is active (always for a violating binary column)
        for l in range(nk):
            bu = T[k, l] - bm[k, l]
            am_[l] = bm[k, l] if bm[k, l] > 0.0 else 0.0
            au_[l] = bu if bu > 0.0 else 0.0
        if fix_u:
            # u stays: m takes u when the unconstrained step violates the constraint
            pooled = False
            cm = 0.0
            cu = 0.0
            for l in range(nk - 1):
                cm += am_[l]
                cu += au_[l]
                if cm / smx < cu / sux:
                    pooled = True
            for l in range(nk):
                mm_[l] = u[k, l] if pooled else am_[l] / smx
                uu_[l] = u[k, l]
        else:
            pooled = _constrained_levels(am_, au_, nk, mm_, uu_, smx, sux, T[k], N)
        if pooled:
            constrained += 1
        for side in range(2):
            tot = 0.0
            for l in range(nk):
                v = mm_[l] if side == 0 else uu_[l]
                if side == 1 and fix_u:
                    delta[k, l] = v
                    tot += v
                    continue
                if v < eps or v > 1.0 - eps:
                    clipped += 1
                    v = eps if v < eps else 1.0 - eps
                delta[k, l] = v          # scratch
                tot += v
            for l in range(nk):
                v = delta[k, l] / tot if not (side == 1 and fix_u) else u[k, l]
                if side == 0:
                    d = abs(np.log(v) - np.log(m[k, l]))
                    m2[k, l] = v
                else:
                    d = abs(np.log(v) - np.log(u[k, l]))
                    u2[k, l] = v
                if d > change:
                    change = d
    return pn, change, ll, clipped, constrained


@numba.njit(cache=True, nogil=True)
def _extrapolate(nl, a, m0, u0, p0, m1, u1, p1, m2, u2, p2, mx, ux, p_lo, p_hi, eps):
    # SQUAREM point theta0 + 2 a r + a^2 v (r = theta1 - theta0, v = theta2 - 2 theta1
    # + theta0) into (mx, ux); returns its P(M) (clipped to its bounds), or -1.0 when
    # a probability is not positive. Valid points are guarded like an M-step
    # (probabilities in [eps, 1 - eps], renormalised per column).
    K = nl.shape[0]
    for k in range(K):
        for side in range(2):
            tot = 0.0
            for l in range(nl[k]):
                if side == 0:
                    x0, x1, x2 = m0[k, l], m1[k, l], m2[k, l]
                else:
                    x0, x1, x2 = u0[k, l], u1[k, l], u2[k, l]
                r = x1 - x0
                v = x2 - 2.0 * x1 + x0
                x = x0 + 2.0 * a * r + a * a * v
                if not x > 0.0:
                    return -1.0
                x = eps if x < eps else (1.0 - eps if x > 1.0 - eps else x)
                if side == 0:
                    mx[k, l] = x
                else:
                    ux[k, l] = x
                tot += x
            for l in range(nl[k]):
                if side == 0:
                    mx[k, l] /= tot
                else:
                    ux[k, l] /= tot
    px = p0 + 2.0 * a * (p1 - p0) + a * a * (p2 - 2.0 * p1 + p0)
    return p_lo if px < p_lo else (p_hi if px > p_hi else px)


@numba.njit(cache=True, nogil=True)
def _em_kernel(idx, c, clev, T, nl, m, u, p, p_lo, p_hi, eps, max_iter, tol, history, fix_u,
               accelerate):
    # Constrained EM on sparse pattern counts, optionally accelerated by SQUAREM
    # (Varadhan & Roland 2008, SqS3 with the global step-length bound of their
    # package). m, u (K, L) hold the start and are overwritten by the fit (padding
    # beyond a column's levels stays 1, never read). Every evaluation of the EM map F
    # counts as an iteration and records the log-likelihood at its input in history;
    # the fit has converged when one F step moves no parameter's logarithm by tol or more.
    K, L = m.shape
    N = 0.0
    for q in range(c.shape[0]):
        N += c[q]
    bm = np.zeros((K, L))
    delta = np.zeros((K, L))
    J = clev.shape[0]
    R = np.zeros(J)
    LR = np.zeros(J)
    S = np.zeros(J)
    m1 = m.copy()
    u1 = u.copy()
    m2 = m.copy()
    u2 = u.copy()
    mx = m.copy()
    ux = u.copy()
    clipped = 0
    constrained = 0
    converged = False
    it = 0
    stepmax = 1.0
    while it < max_iter:
        p1, ch, ll0, cl, co = _em_step(idx, c, clev, T, N, nl, m, u, p, m1, u1, p_lo, p_hi, eps,
                                       fix_u, bm, delta, R, LR, S)
        history[it] = ll0
        it += 1
        clipped += cl
        constrained += co
        if ch < tol or not accelerate or it >= max_iter:
            m[:, :] = m1
            u[:, :] = u1
            p = p1
            if ch < tol:
                converged = True
                break
            continue
        p2, ch, ll1, cl, co = _em_step(idx, c, clev, T, N, nl, m1, u1, p1, m2, u2, p_lo, p_hi, eps,
                                       fix_u, bm, delta, R, LR, S)
        history[it] = ll1
        it += 1
        clipped += cl
        constrained += co
        sr2 = (p1 - p) ** 2
        sv2 = (p2 - 2.0 * p1 + p) ** 2
        for k in range(K):
            for l in range(nl[k]):
                sr2 += (m1[k, l] - m[k, l]) ** 2 + (u1[k, l] - u[k, l]) ** 2
                sv2 += ((m2[k, l] - 2.0 * m1[k, l] + m[k, l]) ** 2
                        + (u2[k, l] - 2.0 * u1[k, l] + u[k, l]) ** 2)
        if ch < tol or it >= max_iter or not sv2 > 0.0:
            m[:, :] = m2
            u[:, :] = u2
            p = p2
            if ch < tol:
                converged = True
                break
            continue
        # step length a = ||r|| / ||v|| (the paper's -a), in [1, stepmax]; a = 1 gives
        # theta2 itself. Backtrack toward 1 while a probability would not be positive.
        a = np.sqrt(sr2 / sv2)
        a = 1.0 if a < 1.0 else (stepmax if a > stepmax else a)
        px = -1.0
        while a > 1.0:
            px = _extrapolate(nl, a, m, u, p, m1, u1, p1, m2, u2, p2, mx, ux, p_lo, p_hi, eps)
            if px >= 0.0:
                break
            a = 0.5 * (a + 1.0)
            if a < 1.01:
                a = 1.0
        if a == 1.0:
            mx[:, :] = m2
            ux[:, :] = u2
            px = p2
        # stabilise with one F step from the extrapolated point (into m, u)
        p3, ch, llx, cl, co = _em_step(idx, c, clev, T, N, nl, mx, ux, px, m, u, p_lo, p_hi, eps,
                                       fix_u, bm, delta, R, LR, S)
        history[it] = llx
        it += 1
        clipped += cl
        constrained += co
        if a > 1.0 and llx < ll1:
            # the extrapolation lost likelihood: continue from the plain EM step theta2
            m[:, :] = m2
            u[:, :] = u2
            p = p2
            if a == stepmax:
                stepmax = max(1.0, stepmax / 4.0)
            continue
        p = p3
        if ch < tol:
            converged = True
            break
        if a == stepmax:
            stepmax *= 4.0
    return p, it, converged, clipped, constrained


def em(counts: Any, cmp: Comparison, *, p_start: float, p_max: float | None = None,
       m_start: float = 0.9, max_iter: int = EM_MAX_ITER, tol: float = EM_TOL,
       eps: float = 1e-9, fix_u: bool = False, accelerate: bool = True) -> EMResult:
    """Fit P(M), m and u by Winkler's constrained EM on the pattern counts.

    Parameters
    ----------
    counts : (codes, counts) or ndarray (n_patterns,)
        Sparse pattern counts (:func:`sparse_counts`) or a dense vector.
    p_start : float
        Start of P(M) (CATALOG: ``min(n_a, n_b) / (n_a n_b)``).
    p_max : float, optional
        Upper bound of P(M); the driver passes ``min(n_a, n_b) / N`` (a 1-1
        linkage has at most ``min(n_a, n_b)`` matches). ``None`` or a value
        >= 1 turns the bound off (P(M) <= 1 - 1/N only).
    m_start : float
        Start of m on the closest level that occurs (level 0 unless it is empty,
        e.g. an exact-agreement level on noisy data); the rest spread evenly.
    max_iter : int
        Limit on the evaluations of the EM map (E-steps); a fit that reaches it
        has ``converged`` False (the cell is flagged).
    tol : float
        Stop when one plain EM step moves no parameter's logarithm (log P(M),
        every log m and log u level probability) by ``tol`` or more: the
        fixed-point residual in relative terms, with or without acceleration.
        An absolute test would pass while probabilities near the ``eps`` floor
        still move, and the weights are their logarithms. Not the
        log-likelihood: it flattens long before the parameters settle.
    eps : float
        Level probabilities are kept in ``[eps, 1 - eps]`` (renormalised) so
        weights stay finite; P(M) in ``[1/N, p_max]``.
    fix_u : bool
        Keep u at the observed level frequencies over all pairs and fit only m
        and P(M) (as linkers that estimate u from random pairs do); off by default.
    accelerate : bool
        SQUAREM around the constrained EM map (default); ``False`` iterates the
        plain map. Both stop by the same rule at the same fixed point.

    Notes
    -----
    Start: m as above, u the observed level frequencies of each column over
    all pairs (nearly all pairs are non-matches). Constraints (Winkler's
    constrained EM, CATALOG.md): ``P(M) <= p_max``, and ``m >= u`` for every
    column: agreement within each of its tolerances (cumulatively over the
    levels: ``sum_{l' <= l} m_l' >= sum_{l' <= l} u_l'`` for every ``l < L``)
    is at least as likely among matches as among non-matches. When the plain
    M-step violates it for a column, the column takes the exact constrained
    maximum of the expected complete-data log-likelihood: the cuts where the
    constraint binds split the levels into pieces on which m and u have equal
    mass (the pieces' pooled frequencies), shaped inside each piece like the
    plain M-step (:func:`_constrained_levels`). A binary column, or one whose
    every cut binds, takes its pooled level frequencies (weight 0: it carries no
    evidence). The constrained M-step is continuous in the E-step counts, so the
    EM map has fixed points that plain EM reaches (pooling a whole multi-level
    column instead made the map jump, and plain EM cycled between pooled and
    free on a 59,315-record file). Without the
    constraints, on all pairs of real-looking files EM calls the large class
    of pairs agreeing on zeros and correlated keys "matches" (P(M) ~ 0.4).
    The bounded M-step for P(M) is exact (the expected log-likelihood is
    concave in P(M)), so the log-likelihood of plain EM never decreases.

    Acceleration: SQUAREM (Varadhan and Roland 2008, scheme SqS3) around the
    constrained EM map F, whose output is always feasible. From theta0 a cycle
    takes theta1 = F(theta0), theta2 = F(theta1), r = theta1 - theta0,
    v = theta2 - 2 theta1 + theta0, the step a = ||r|| / ||v|| bounded to
    [1, s] (s starts at 1, is multiplied by 4 each time a cycle uses it and
    divided by 4 when such a cycle fails), the point theta0 + 2 a r + a^2 v
    (a halved toward 1 while a probability would not be positive; then
    probabilities clipped to [eps, 1 - eps] and renormalised per column, P(M)
    clipped to its bounds) and stabilises it with one F step. When the
    log-likelihood at the extrapolated point is below that at theta1 the cycle
    continues from the plain EM point theta2 instead. Every F evaluation counts
    towards ``max_iter``; the fit stops as soon as one of them moves no
    parameter's logarithm by ``tol``. On files with many distinct patterns this takes 10-20
    times fewer E-steps than plain EM. The E-step uses one table lookup per
    group of columns (:func:`_group_tables`) for the match odds of a pattern
    and ``bu = T - bm`` with the fixed level totals ``T``. Everything runs in
    a fixed order: the same counts give the same fit bit for bit.
    """
    codes, c = _as_sparse(counts)
    c = c.astype(np.float64)
    N = c.sum()
    if N <= 0:
        raise SdcInputError("no record pairs to fit the linkage model on")
    if int(max_iter) < 1:
        raise param_error("max_iter", "prl_em", "an integer >= 1", max_iter)
    nl = cmp.n_levels
    K = len(nl)
    L = int(nl.max())
    # one table row per occurring level combination of a column group (int8 levels)
    idx, clev = _group_tables(codes, nl, cmp.radix)
    J = clev.shape[0]
    T = np.zeros((K, L))        # T[k, l]: pairs at level l of column k (fixed; exact integers)
    for g in range(idx.shape[1]):
        cj = np.bincount(idx[:, g], weights=c, minlength=J)    # pairs per table row
        cols = np.flatnonzero(clev[idx[0, g]] >= 0)              # the group's columns
        rows = np.flatnonzero(clev[:, cols[0]] >= 0)              # and its table rows
        for k in cols:
            T[k, :nl[k]] = np.bincount(clev[rows, k], weights=cj[rows], minlength=nl[k])
    M = np.ones((K, L))
    U = np.ones((K, L))
    for k in range(K):
        uk = T[k, :nl[k]] / N
        U[k, :nl[k]] = _guard(uk, eps)[0]
        # m_start on the closest level that occurs (an exact-agreement level may be empty)
        first = int(np.flatnonzero(uk > 0)[0]) if np.any(uk > 0) else 0
        mk = np.full(nl[k], (1 - m_start) / max(nl[k] - 1, 1))
        mk[first] = m_start
        M[k, :nl[k]] = mk
    hi = 1 - 1 / N if p_max is None else float(np.clip(p_max, 1 / N, 1 - 1 / N))
    p = float(np.clip(p_start, 1 / N, hi))
    history = np.zeros(int(max_iter))
    nl64 = nl.astype(np.int64)
    p, it, converged, clipped, constrained = _em_kernel(
        idx, c, clev, T, nl64, M, U, p, 1 / N, hi, float(eps), int(max_iter), float(tol),
        history, bool(fix_u), bool(accelerate))
    ll = _estep(idx, c, clev, nl64, M, U, p, T, N, np.zeros((K, L)), np.zeros((K, L)),
                np.zeros(J), np.zeros(J), np.zeros(J))[1]
    m = [M[k, :nl[k]].copy() for k in range(K)]
    u = [U[k, :nl[k]].copy() for k in range(K)]
    return EMResult(m, u, float(p), ll, int(it), bool(converged), int(clipped),
                    int(constrained), history[:it].tolist())


# --------------------------------------------------------------------------
# weights
# --------------------------------------------------------------------------

@dataclass(frozen=True)
class WeightParams:
    """Per-column weights from a fitted model.

    ``w_agr``, ``w_dis``: (K,) full agreement / disagreement weights of the
    binary numeric columns; ``w_level``: (K, Lmax+1) level weights of
    categorical and multi-level columns; ``step``: (K,) int8, which rule a
    column uses (:attr:`Comparison.rule`: 0 d/l downweighting, 1 the level's
    weight, 2 linear within the level; non-zero = weighted by level);
    ``lin``: (K, 4, P + 1) the linear weights' segments (:func:`linear_segments`).
    """

    w_agr: np.ndarray
    w_dis: np.ndarray
    w_level: np.ndarray
    step: np.ndarray
    log_prior_odds: float
    lin: np.ndarray

    @property
    def order(self) -> np.ndarray:
        """Order in which column weights are summed: widest weight range first.

        Fixed for a fitted model, so every kernel adds the same terms in the same
        order (bit-identical pair weights); the most discriminating columns come
        first.
        """
        lo = np.where(self.step != 0, self.w_level.min(axis=1),
                      np.minimum(self.w_agr, self.w_dis))
        return np.argsort(-(self._best - lo), kind="stable").astype(np.int64)

    @property
    def _best(self) -> np.ndarray:
        return np.where(self.step != 0, self.w_level.max(axis=1),
                        np.maximum(self.w_agr, self.w_dis))


def weight_params(fit: EMResult, cmp: Comparison) -> WeightParams:
    K = len(fit.m)
    L = int(cmp.n_levels.max())
    wl = np.zeros((K, L))
    wa, wd = np.zeros(K), np.zeros(K)
    for k in range(K):
        wk = np.log(fit.m[k]) - np.log(fit.u[k])
        wl[k, :wk.size] = wk
        wa[k] = np.log(fit.m[k][0] / fit.u[k][0])
        wd[k] = np.log((1 - fit.m[k][0]) / (1 - fit.u[k][0]))
    return WeightParams(wa, wd, wl, cmp.rule,
                        float(np.log(fit.p) - np.log1p(-fit.p)), linear_segments(wl, cmp))


def linear_segments(wl: np.ndarray, cmp: Comparison) -> np.ndarray:
    """The linear weights of multi-level numeric columns as segments, for the kernels.

    Column k's weight is a function of ``x = |a - b| / t_L`` (``t_L`` the pair's
    last tolerance; the same for every method, as all tolerances of a row scale
    together): through the points ``(x_l, w_l)`` of the levels ``l`` after an
    exact-agreement level, ``x_l`` the middle of level ``l``'s interval
    ``(t_{l-1} + t_l) / 2 / t_L`` (``t_{-1} = 0``), the last level at ``x = 1``;
    constant before the first point and after the last.

    Returns
    -------
    ndarray, shape (K, 4, P + 1)
        ``[k, 0, :P]`` the points' x, increasing, padded with +inf (P = the most
        levels of a column); for segment ``s`` (the number of points at or left
        of x) ``[k, 1, s]``, ``[k, 2, s]``, ``[k, 3, s]``: its start x0, the
        weight there and the slope: ``w = w0 + slope (x - x0)``. Zeros for the
        other columns.
    """
    K, P = wl.shape
    out = np.zeros((K, 4, P + 1))
    out[:, 0, :] = np.inf
    T = cmp.flat_tolerances
    for k, rule in enumerate(cmp.rule):
        if rule != 2:
            continue
        last = int(cmp.n_levels[k]) - 1
        t = T[k, :last]
        first = 1 if t[0] == 0.0 else 0
        lower = np.r_[0.0, t[:-1]]
        xs = np.r_[0.5 * (lower + t) / t[-1], 1.0][first:]
        ws = wl[k, first:last + 1]
        out[k, 0, :xs.size] = xs
        out[k, 1, 0], out[k, 2, 0] = xs[0], ws[0]           # before the first point
        for s in range(1, xs.size + 1):
            out[k, 1, s], out[k, 2, s] = xs[s - 1], ws[s - 1]
            if s < xs.size and xs[s] > xs[s - 1]:
                out[k, 3, s] = (ws[s] - ws[s - 1]) / (xs[s] - xs[s - 1])
    return out


@numba.njit(cache=True, nogil=True, inline="always")
def _linear(wl, lin, k, d, t0, tl, last):
    # linear weight of difference d on multi-level column k (linear_segments), t0 and tl
    # the pair's first and last tolerance: exact agreement (t0 = 0, d = 0) keeps wl[k, 0],
    # NaN the last level's; otherwise the segment holding x = d / tl. Every weight reader
    # calls this (bit-identical weights).
    if d == 0.0 and t0 == 0.0:
        return wl[k, 0]
    x = d / tl
    if not (x >= 0.0):
        return wl[k, last]
    s = 0
    for p in range(last + 1):
        s += lin[k, 0, p] <= x
    return lin[k, 2, s] + lin[k, 3, s] * (x - lin[k, 1, s])


@numba.njit(cache=True, nogil=True, inline="always")
def _term(av, atol, bv, i, j, k, nlev, wa, wd, wl, step, lin):
    # one column's weight of pair (A row i, B row j); _weights_row is the same
    # arithmetic vectorised over A rows
    d = abs(av[i, k] - bv[j, k])
    if step[k] == 2:
        return _linear(wl, lin, k, d, atol[i, k, 0], atol[i, k, nlev[k] - 2], nlev[k] - 1)
    if step[k]:
        return wl[k, _level(d, atol[i], k, nlev[k])]
    # linear downweighting from w_agr (d = 0) to w_dis (d >= tolerance); NaN -> w_dis
    x = wa[k] - (wa[k] - wd[k]) * d / atol[i, k, 0]
    return x if x > wd[k] else wd[k]


@numba.njit(cache=True, nogil=True, inline="always")
def _pair_weight(av, atol, bv, i, j, nlev, wa, wd, wl, step, lin, order):
    w = 0.0
    for k in order:
        w += _term(av, atol, bv, i, j, k, nlev, wa, wd, wl, step, lin)
    return w


@numba.njit(cache=True, nogil=True)
def _weights_row(avT, tolT, bj, lo, hi, aidx, identity, nlev, wa, wd, wl, step, lin, order, w):
    # weights of B row bj against A rows aidx[lo:hi] (lo:hi when identity) into w[:n];
    # the same terms, in the same order, as _pair_weight (bit-identical sums)
    n = hi - lo
    w[:n] = 0.0
    for k in order:
        x = bj[k]
        if step[k] == 2:
            last = nlev[k] - 1
            for q in range(n):
                i = lo + q if identity else aidx[lo + q]
                w[q] += _linear(wl, lin, k, abs(avT[k, i] - x), tolT[k, 0, i],
                                tolT[k, last - 1, i], last)
        elif step[k]:
            for q in range(n):
                i = lo + q if identity else aidx[lo + q]
                d = abs(avT[k, i] - x)
                lev = 0
                for l in range(nlev[k] - 1):
                    if not (d <= tolT[k, l, i]):
                        lev += 1
                w[q] += wl[k, lev]
        else:
            wak = wa[k]
            dd = wa[k] - wd[k]
            wdk = wd[k]
            if identity:
                for q in range(n):
                    i = lo + q
                    y = wak - dd * abs(avT[k, i] - x) / tolT[k, 0, i]
                    w[q] += y if y > wdk else wdk
            else:
                for q in range(n):
                    i = aidx[lo + q]
                    y = wak - dd * abs(avT[k, i] - x) / tolT[k, 0, i]
                    w[q] += y if y > wdk else wdk
    return n


@numba.njit(cache=True, nogil=True, inline="always")
def _keep_top(wt, idx, filled, x, g):
    """Offer candidate ``g`` with weight ``x`` to one B row's top list ``wt``/``idx``
    (length c, ``filled`` entries kept sorted by weight desc, then A row asc); returns
    the new fill."""
    c = wt.shape[0]
    if filled == c:
        if x < wt[c - 1] or (x == wt[c - 1] and g > idx[c - 1]):
            return filled
        p = c - 1
    else:
        p = filled
        filled += 1
    # the list is sorted: insertion from the tail
    while p > 0 and (wt[p - 1] < x or (wt[p - 1] == x and idx[p - 1] > g)):
        wt[p] = wt[p - 1]
        idx[p] = idx[p - 1]
        p -= 1
    wt[p] = x
    idx[p] = g
    return filled


@numba.njit(cache=True, nogil=True)
def _topc_kernel(avT, tolT, bv, lo, hi, aidx, identity, aglob, nlev, wa, wd, wl, step, lin, order,
                 c):
    nb = bv.shape[0]
    idx = np.full((nb, c), -1, dtype=np.int64)
    wt = np.full((nb, c), -np.inf)
    w = np.empty(avT.shape[1] if identity else max(1, aidx.size))
    for j in range(nb):
        n = _weights_row(avT, tolT, bv[j], lo[j], hi[j], aidx, identity, nlev, wa, wd, wl,
                         step, lin, order, w)
        filled = 0
        for q in range(n):
            i = lo[j] + q if identity else aidx[lo[j] + q]
            filled = _keep_top(wt[j], idx[j], filled, w[q], aglob[i])
    return idx, wt


def topc_block(a: dict, b: dict, cmp: Comparison, wp: WeightParams, c: int, *, a0: int = 0,
               lo: np.ndarray | None = None, hi: np.ndarray | None = None,
               aidx: np.ndarray | None = None, aglob: np.ndarray | None = None) -> dict:
    """Each B row's ``c`` best A rows of the block by weight (ties: lower A row first).

    Returns
    -------
    dict
        ``idx`` (n_b, c) int64 global A rows (-1 = none), ``w`` (n_b, c) weights.
    """
    identity = lo is None
    if identity:
        lo, hi, aidx = _all(b["v"].shape[0], a["v"].shape[0])
    if aglob is None:
        aglob = a0 + np.arange(a["v"].shape[0], dtype=np.int64)
    avT, tolT = _transposed(a)
    idx, w = _topc_kernel(avT, tolT, b["v"], lo, hi, aidx, identity, aglob, cmp.n_levels,
                          wp.w_agr, wp.w_dis, wp.w_level, wp.step, wp.lin, wp.order, int(c))
    return {"idx": idx, "w": w}


def merge_topc(*parts: dict) -> dict:
    """Merge top-c lists of the same B rows over A blocks (exact, order-free)."""
    idx = np.concatenate([p["idx"] for p in parts], axis=1)
    w = np.concatenate([p["w"] for p in parts], axis=1)
    c = parts[0]["idx"].shape[1]
    key_idx = np.where(idx < 0, np.iinfo(np.int64).max, idx)
    order = _rowwise_order(w, key_idx, c)
    return {"idx": np.take_along_axis(idx, order, 1), "w": np.take_along_axis(w, order, 1)}


def _rowwise_order(w: np.ndarray, idx: np.ndarray, c: int) -> np.ndarray:
    # sort by A row, then stably by weight descending: ties keep the lower A row first
    o1 = np.argsort(idx, axis=1, kind="stable")
    w1 = np.take_along_axis(w, o1, 1)
    o2 = np.argsort(-w1, axis=1, kind="stable")
    return np.take_along_axis(o1, o2, 1)[:, :c]


@numba.njit(cache=True, nogil=True)
def _pairs_kernel(av, atol, bv, ia, jb, nlev, wa, wd, wl, step, lin, order):
    out = np.empty(ia.size)
    for q in range(ia.size):
        out[q] = _pair_weight(av, atol, bv, ia[q], jb[q], nlev, wa, wd, wl, step, lin, order)
    return out


def pair_weights(a: dict, b: dict, ia: np.ndarray, jb: np.ndarray, cmp: Comparison,
                 wp: WeightParams) -> np.ndarray:
    """Weights of the pairs (A row ``ia[q]`` of ``a``, B row ``jb[q]`` of ``b``)."""
    ia = np.asarray(ia, dtype=np.int64)
    jb = np.asarray(jb, dtype=np.int64)
    return _pairs_kernel(a["v"], a["tol"], b["v"], ia, jb, cmp.n_levels, wp.w_agr, wp.w_dis,
                         wp.w_level, wp.step, wp.lin, wp.order)


@numba.njit(cache=True, nogil=True)
def _dense_kernel(avT, tolT, bv, nlev, wa, wd, wl, step, lin, order):
    na = avT.shape[1]
    out = np.empty((bv.shape[0], na))
    none = np.zeros(1, dtype=np.int64)
    for j in range(bv.shape[0]):
        _weights_row(avT, tolT, bv[j], 0, na, none, True, nlev, wa, wd, wl, step, lin, order, out[j])
    return out


def dense_weights(a: dict, b: dict, cmp: Comparison, wp: WeightParams) -> np.ndarray:
    """All pair weights, shape (n_b, n_a) (rows = B records)."""
    avT, tolT = _transposed(a)
    return _dense_kernel(avT, tolT, b["v"], cmp.n_levels, wp.w_agr, wp.w_dis, wp.w_level,
                         wp.step, wp.lin, wp.order)


def match_probability(w: np.ndarray, wp: WeightParams) -> np.ndarray:
    """P(M | pair) from its weight: logistic of weight + log prior odds."""
    z = np.asarray(w, dtype=np.float64) + wp.log_prior_odds
    return 1.0 / (1.0 + np.exp(-z))


# --------------------------------------------------------------------------
# PLD / PLD20 from an assignment
# --------------------------------------------------------------------------

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
