"""EM for the two-class latent model with conditional independence (Winkler's constrained
EM, accelerated by SQUAREM) on sparse pattern counts."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import math

import numba
import numpy as np

from ...errors import SdcInputError
from ...parallel import serial_map
from .comparison import Comparison
from .estep import EStep
from .settings import DEFAULTS

__all__ = ["EMResult", "em", "EM_GROUP_SPACE", "limit_advice", "group_tables"]


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
    input of each evaluation (one per iteration; with SQUAREM NaN at the evaluations whose
    log-likelihood the acceleration does not use, which it then does not compute); ``identified`` (False: the observed
    information at the end point is singular, a flat likelihood the data do not pin down,
    :func:`identification`; set by the caller that checks it) and ``info_ratio`` (its
    smallest over its largest eigenvalue; NaN when not checked); ``tables``: the column
    groups' tables the E-step used (:func:`group_tables`), which the identification check
    reuses; ``pending``: with ``em(..., defer_loglik=True)``, the computation of ``loglik``
    (NaN until :meth:`settle` runs it).
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
    identified: bool = True
    info_ratio: float = float("nan")
    tables: Any = field(default=None, repr=False, compare=False)
    pending: Any = field(default=None, repr=False, compare=False)

    def settle(self) -> None:
        """Computes the deferred log-likelihood at the end point (``pending``), if any."""
        if self.pending is not None:
            self.loglik, self.pending = float(self.pending()), None


def _guard(x: np.ndarray, eps: float) -> tuple[np.ndarray, int]:
    """Keep level probabilities inside [eps, 1 - eps], renormalised."""
    hit = int(np.count_nonzero((x < eps) | (x > 1 - eps)))
    y = np.clip(x, eps, 1 - eps)
    return y / y.sum(), hit


def as_sparse(counts: Any) -> tuple[np.ndarray, np.ndarray]:
    """(codes, counts) of the occurring patterns from sparse or dense counts."""
    if isinstance(counts, tuple):
        codes, c = (np.asarray(x, dtype=np.int64) for x in counts)
    else:
        dense = np.asarray(counts)
        codes = np.flatnonzero(dense).astype(np.int64)
        c = dense[codes].astype(np.int64)
    keep = c > 0
    if keep.all():
        return codes, c
    return codes[keep], c[keep]


#: The defaults of the EM settings (option ``prl_em``; :data:`sdcdist.options.PRL_EM_DEFAULTS`).
_EM = DEFAULTS.em


#: Largest space of level combinations of one column group in the E-step tables.
EM_GROUP_SPACE = 8192


@numba.njit(cache=True, nogil=True, inline="always")
def _prefixes(code, divs, cur, ordered):
    # cur[g] = code // divs[g] for every group g: with ordered (codes increasing) moved up
    # from the previous code's (the quotients never decrease; all moves together take
    # max(code) / divs[g] steps), without integer divisions; else divided
    for g in range(divs.size):
        d = divs[g]
        if d == 1:
            cur[g] = code
        elif ordered:
            x = cur[g]
            while (x + 1) * d <= code:
                x += 1
            cur[g] = x
        else:
            cur[g] = code // d


@numba.njit(cache=True, nogil=True)
def _group_rows(codes, c, divs, rs, base, present, where, idx, cj, fill):
    # the column groups' digits of every code, (code // divs[g]) % rs[g], from the
    # quotients (_prefixes; the groups consecutive from the lowest: digit g = cur[g] -
    # cur[g + 1] rs[g]); without fill, which digits occur (present[base[g] + digit]); with
    # fill, each pattern's table row idx[q, g] = where[base[g] + digit] and the counts per
    # table row (cj)
    P = codes.size
    G = divs.size
    ordered = True
    for q in range(1, P):
        if codes[q] < codes[q - 1]:
            ordered = False
            break
    if G == 2 and ordered and divs[0] == 1:
        # two groups (the default comparison): the same digits with the quotient held in
        # a register, and the group-1 row's count too while it repeats (the same additions
        # in the same order as cj[j1] += c[q]: the groups' rows are disjoint)
        d1 = divs[1]
        r1 = rs[1]
        x = 0
        jc = -1
        a1 = cj[0] if fill and cj.size else 0
        for q in range(P):
            code = codes[q]
            while (x + 1) * d1 <= code:
                x += 1
            g0 = code - x * d1
            g1 = x if x < r1 else x % r1
            if fill:
                j0 = where[g0]
                j1 = where[base[1] + g1]
                idx[q, 0] = j0
                idx[q, 1] = j1
                cj[j0] += c[q]
                if j1 != jc:
                    if jc >= 0:
                        cj[jc] = a1
                    jc = j1
                    a1 = cj[j1]
                a1 += c[q]
            else:
                present[g0] = True
                present[base[1] + g1] = True
        if fill and jc >= 0:
            cj[jc] = a1
        return
    cur = np.zeros(G, dtype=np.int64)
    for q in range(P):
        _prefixes(codes[q], divs, cur, ordered)
        for g in range(G):
            if g + 1 < G:
                dg = cur[g] - cur[g + 1] * rs[g]
            else:
                dg = cur[g] if cur[g] < rs[g] else cur[g] % rs[g]
            if fill:
                j = where[base[g] + dg]
                idx[q, g] = j
                cj[j] += c[q]
            else:
                present[base[g] + dg] = True


#: Fewest patterns from which :func:`group_tables` with a ``pmap`` reads the codes in
#: :data:`GROUP_PARTS` parts side by side (whole counts: their sums per table row are
#: exact in any order, so the tables are the same).
GROUP_MAP_MIN = 1 << 17
GROUP_PARTS = 4


def group_tables(codes: np.ndarray, nl: np.ndarray, radix: np.ndarray,
                 counts: np.ndarray | None = None, *, pmap: Any = None) -> tuple:
    """Split the key columns into consecutive groups whose level combinations number at
    most :data:`EM_GROUP_SPACE` and index each pattern's combination in every group.

    Parameters
    ----------
    codes : ndarray of int64, shape (P,)
        Mixed-radix pattern codes (radix ``radix``, levels ``nl`` per column); increasing
        codes (as sparse counts hold them) are split without integer divisions.
    counts : ndarray (P,), optional
        The patterns' counts: then also their sums per table row.
    pmap : callable, optional
        ``pmap(fn, blocks)`` -> ``[fn(*b) for b in blocks]`` (e.g. on two threads): from
        :data:`GROUP_MAP_MIN` patterns on, without counts or with whole ones, the codes
        are read in :data:`GROUP_PARTS` parts side by side; the same tables.

    Returns
    -------
    idx : ndarray of int32, shape (P, G)
        Row of the combination table of each pattern in each group.
    clev : ndarray of int8, shape (J, K)
        Levels of table row j on the columns of its group, -1 on the others. Only
        combinations that occur get a row (increasing within a group).
    cj : ndarray (J,)
        With ``counts``: the counts of the patterns of each table row (float64).
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
    divs = np.array([int(radix[cols[0]]) for cols in groups], dtype=np.int64)
    rs = np.array([int(np.prod([int(nl[k]) for k in cols])) for cols in groups],
                  dtype=np.int64)
    base = np.r_[0, np.cumsum(rs)[:-1]].astype(np.int64)
    present = np.zeros(int(rs.sum()), dtype=np.bool_)
    codes = np.ascontiguousarray(codes, dtype=np.int64)
    # whole counts summed as integers (exact below 2**53: the same floats as float sums)
    whole = counts is not None and np.asarray(counts).dtype.kind in "iu"
    c = np.zeros(P) if counts is None else \
        np.ascontiguousarray(counts, dtype=np.int64 if whole else np.float64)
    idx = np.empty((P, len(groups)), dtype=np.int32)
    # parts of the codes side by side (each part's own occurring digits and sums per table
    # row, then joined: or, and integer sums); float counts are summed in pattern order
    parts = [(0, P)] if pmap is None or P < GROUP_MAP_MIN or not (whole or counts is None) \
        else [(P * q // GROUP_PARTS, P * (q + 1) // GROUP_PARTS) for q in range(GROUP_PARTS)]
    run = pmap if len(parts) > 1 else serial_map

    def occurring(q0: int, q1: int) -> np.ndarray:
        pr = np.zeros(present.size, dtype=np.bool_)
        _group_rows(codes[q0:q1], c[q0:q1], divs, rs, base, pr, np.zeros(0, np.int32),
                    idx[q0:q1], np.zeros(0), False)
        return pr
    for pr in run(occurring, parts):
        present |= pr
    # table rows: the occurring combinations, group after group, increasing within one
    where = np.zeros(present.size, dtype=np.int32)
    occ = np.flatnonzero(present)
    where[occ] = np.arange(occ.size, dtype=np.int32)

    def fill(q0: int, q1: int) -> np.ndarray:
        cq = np.zeros(occ.size, dtype=np.int64 if whole else np.float64)
        _group_rows(codes[q0:q1], c[q0:q1], divs, rs, base, present, where, idx[q0:q1], cq,
                    True)
        return cq
    sums = run(fill, parts)
    cj = sums[0]
    for cq in sums[1:]:
        cj += cq
    cj = cj.astype(np.float64, copy=False)
    rows = []
    for g, cols in enumerate(groups):
        og = occ[(occ >= base[g]) & (occ < base[g] + rs[g])] - base[g]
        cl = np.full((og.size, K), -1, dtype=np.int8)
        r = 1
        for k in cols:
            cl[:, k] = (og // r) % nl[k]
            r *= int(nl[k])
        rows.append(cl)
    clev = np.concatenate(rows)
    return (idx, clev) if counts is None else (idx, clev, cj)


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
def _mstep(sm, bm, T, N, nl, m, u, p, m2, u2, p_lo, p_hi, eps, fix_u, delta):
    # The M-step of Winkler's constrained EM, after the E-step at (m, u, p) gave the
    # expected matches sm and their level counts bm: the map F's output (m2, u2, p2).
    # Returns p2, the largest parameter change and how many probabilities were clipped /
    # columns pooled. F's output is always feasible (P(M) in [p_lo, p_hi], m >= u
    # cumulatively, probabilities in [eps, 1-eps]).
    K = nl.shape[0]
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
            # u stays (the observed level frequencies over all pairs): the plain M-step of
            # m, without the m >= u constraint (it guards the joint fit against a false
            # match class, which fixed u and P(M) rule out; Splink's fixed-u EM has none)
            pooled = False
            for l in range(nk):
                mm_[l] = am_[l] / smx
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
    return pn, change, clipped, constrained


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
def _sq_norms(nl, m, u, p, m1, u1, p1, m2, u2, p2):
    # SQUAREM's ||r||^2 and ||v||^2 (r = theta1 - theta0, v = theta2 - 2 theta1 + theta0)
    sr2 = (p1 - p) ** 2
    sv2 = (p2 - 2.0 * p1 + p) ** 2
    for k in range(nl.shape[0]):
        for l in range(nl[k]):
            sr2 += (m1[k, l] - m[k, l]) ** 2 + (u1[k, l] - u[k, l]) ** 2
            sv2 += ((m2[k, l] - 2.0 * m1[k, l] + m[k, l]) ** 2
                    + (u2[k, l] - 2.0 * u1[k, l] + u[k, l]) ** 2)
    return sr2, sv2


def _squarem(F: Any, nl: np.ndarray, m: np.ndarray, u: np.ndarray, p: float, p_lo: float,
             p_hi: float, eps: float, max_iter: int, tol: float, history: np.ndarray,
             accelerate: bool) -> tuple[float, int, bool, int, int]:
    """Constrained EM on the pattern counts, optionally accelerated by SQUAREM (Varadhan &
    Roland 2008, SqS3 with the global step-length bound of their package). ``F(m, u, p,
    m2, u2, ll)`` is the EM map (into m2, u2; returns p2, the largest change, the
    log-likelihood at its input, or NaN when ``ll`` is False, clipped, pooled). m, u (K, L) hold the start and are
    overwritten by the fit (padding beyond a column's levels stays 1, never read). Every
    evaluation of F counts as an iteration and records the log-likelihood at its input in
    history (NaN where SQUAREM has no use for it: at the start of a cycle, and at the
    stabilising step of a cycle that did not extrapolate); the fit has converged when one F step moves no parameter's logarithm by tol
    or more. Returns ``(p, iterations, converged, clipped, pooled)``."""
    m1, u1, m2, u2, mx, ux = m.copy(), u.copy(), m.copy(), u.copy(), m.copy(), u.copy()
    clipped = constrained = 0
    converged = False
    it = 0
    stepmax = 1.0
    while it < max_iter:
        # the log-likelihood at theta0 only goes into history: plain EM records it, SQUAREM
        # does not compute it (a fifth of an E-step; the step is the same floats)
        p1, ch, ll0, cl, co = F(m, u, p, m1, u1, not accelerate)
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
        p2, ch, ll1, cl, co = F(m1, u1, p1, m2, u2)
        history[it] = ll1
        it += 1
        clipped += cl
        constrained += co
        sr2, sv2 = _sq_norms(nl, m, u, p, m1, u1, p1, m2, u2, p2)
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
        a = math.sqrt(sr2 / sv2)
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
        # stabilise with one F step from the extrapolated point (into m, u); its
        # log-likelihood is compared with theta1's only after an extrapolation
        p3, ch, llx, cl, co = F(mx, ux, px, m, u, a > 1.0)
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


def limit_advice(accelerate: bool) -> str:
    """What to do about a fit that reached ``max_iter`` (the warning's second half)."""
    if accelerate:
        return "raise prl_em max_iter"
    return ("plain EM (prl_em accelerate: false) converges linearly, and slowly where the "
            "likelihood is nearly flat (on Census 2-key files with P(M) at its bound it can "
            "need more than 20,000 steps to move no parameter's logarithm by tol): keep the "
            "default accelerate: true (SQUAREM, the same fixed point in 10-100 times fewer "
            "steps), or raise prl_em max_iter")


def em(counts: Any, cmp: Comparison, *, p_start: float, p_max: float | None = None,
       m_start: float = _EM.m_start, max_iter: int = _EM.max_iter, tol: float = _EM.tol,
       eps: float = _EM.eps, fix_u: bool = False, fix_p: bool = False,
       accelerate: bool = _EM.accelerate, pmap: Any = None,
       defer_loglik: bool = False) -> EMResult:
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
        m then takes the plain M-step, without the constraint ``m >= u`` (which guards
        the joint fit against a false match class).
    fix_p : bool
        Keep P(M) at ``p_start`` (clipped to ``[1/N, p_max]``) instead of fitting it. With
        ``fix_u`` this is the ``m_only`` fit (option ``prl_em: {fit: m_only}``): only m is
        estimated, as Splink's EM with ``fix_u_probabilities`` and
        ``fix_probability_two_random_records_match`` does.
    accelerate : bool
        SQUAREM around the constrained EM map (default); ``False`` iterates the
        plain map. Both stop by the same rule at the same fixed point.
    pmap : callable, optional
        ``pmap(fn, blocks)`` -> ``[fn(*b) for b in blocks]`` in block order: how the
        E-step's fixed parts are run (:class:`~.estep.EStep`; default one after the other,
        e.g. :func:`sdcdist.parallel.thread_pool`'s map runs them in threads). The fit is
        the same bits either way.
    defer_loglik : bool
        Leave the log-likelihood at the end point (one more E-step) to
        :meth:`EMResult.settle`, which then runs it in the caller's thread (e.g. beside
        other work, once ``pmap``'s threads are gone): the same float.

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
    group of columns (:func:`group_tables`) for the match odds of a pattern
    and ``bu = T - bm`` with the fixed level totals ``T``. Everything runs in
    a fixed order: the same counts give the same fit bit for bit.
    """
    codes, c = as_sparse(counts)            # whole counts (int64), summed exactly
    N = float(c.sum())
    if N <= 0:
        raise SdcInputError("no record pairs to fit the linkage model on")
    nl = cmp.n_levels
    K = len(nl)
    L = int(nl.max())
    # one table row per occurring level combination of a column group (int8 levels), with
    # the pairs of each (cj)
    idx, clev, cj = group_tables(codes, nl, cmp.radix, c, pmap=pmap)
    T = np.zeros((K, L))        # T[k, l]: pairs at level l of column k (fixed; exact integers)
    for k in range(K):
        rows = np.flatnonzero(clev[:, k] >= 0)                   # the rows of k's group
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
    lo = p if fix_p else 1 / N
    if fix_p:
        hi = p
    history = np.zeros(int(max_iter))
    nl64 = nl.astype(np.int64)
    E = EStep(idx, clev, c, nl64, T, pmap)
    bm, delta = np.zeros((K, L)), np.zeros((K, L))

    def F(m: np.ndarray, u: np.ndarray, p: float, m2: np.ndarray, u2: np.ndarray,
          ll: bool = True) -> tuple:
        sm, ll = E(m, u, p, bm, loglik=ll)
        p2, ch, cl, co = _mstep(sm, bm, T, N, nl64, m, u, p, m2, u2, lo, hi, float(eps),
                                bool(fix_u), delta)
        return p2, ch, ll, cl, co

    p, it, converged, clipped, constrained = _squarem(
        F, nl64, M, U, p, lo, hi, float(eps), int(max_iter), float(tol), history,
        bool(accelerate))
    m = [M[k, :nl[k]].copy() for k in range(K)]
    u = [U[k, :nl[k]].copy() for k in range(K)]

    def loglik() -> float:
        return E(M, U, p, np.zeros((K, L)))[1]
    if defer_loglik:
        E.serial()                  # pmap's threads may be gone when it runs
    return EMResult(m, u, float(p), float("nan") if defer_loglik else loglik(), int(it),
                    bool(converged), int(clipped), int(constrained), history[:it].tolist(),
                    tables=(idx, clev), pending=loglik if defer_loglik else None)
