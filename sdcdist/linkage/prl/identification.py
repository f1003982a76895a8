"""PRL identification check: whether the pattern counts identify the EM's fitted model,
from the observed information at its end point (:func:`identification`)."""

from __future__ import annotations

from typing import Any

import numba
import numpy as np

from .comparison import Comparison
from .em import EMResult, as_sparse, group_tables
from .settings import DEFAULTS

__all__ = ["identification", "FLAT_RATIO"]

_EM = DEFAULTS.em


#: Smallest ratio of the smallest to the largest eigenvalue of the observed information at
#: the EM's end point for the data to identify the fit (:func:`identification`): below it
#: the log-likelihood is flat (to rounding) along some direction of the parameters, so
#: other parameters (P(M) among them) fit the counts as well and the weights, and the
#: linkage, are not determined by the data.
FLAT_RATIO = 1e-11


@numba.njit(cache=True, nogil=True)
def _later_group(idx, clev, h, L):
    # group h's table rows (off .. top) and its first column; for each table row, the
    # cells (column k * L + level) of its levels in the columns before that (slot[j, :n[j]])
    P = idx.shape[0]
    J, K = clev.shape
    off = idx[0, h]
    top = idx[0, h]
    for q in range(P):
        off = min(off, idx[q, h])
        top = max(top, idx[q, h])
    first = K                      # the group's first column
    for k in range(K - 1, -1, -1):
        if clev[off, k] >= 0:
            first = k
    slot = np.full((J, max(first, 1)), -1, dtype=np.int64)
    n = np.zeros(J, dtype=np.int64)
    for j in range(J):
        for k in range(first):
            lv = clev[j, k]
            if lv >= 0:
                slot[j, n[j]] = k * L + lv
                n[j] += 1
    return off, top, first, slot, n


@numba.njit(cache=True, nogil=True)
def _cross_sums(idx, c, w, h, off, slot, n, B):
    # adds each pattern's c, c w, c w^2 into B[row of group h - off, cell of an earlier
    # group's level], in pattern order
    for q in range(idx.shape[0]):
        a0 = c[q]
        a1 = a0 * w[q]
        a2 = a1 * w[q]
        Bb = B[idx[q, h] - off]
        for g in range(h):
            j = idx[q, g]
            for t in range(n[j]):
                s = slot[j, t]
                Bb[s, 0] += a0
                Bb[s, 1] += a1
                Bb[s, 2] += a2


@numba.njit(cache=True, nogil=True)
def _crosstabs(idx, clev, L, c, w):
    # T[0], T[1], T[2]: sum over the patterns of c, c w and c w^2 at each pair of
    # (column k, level l), (column k', level l'): one-hot cross products, (K L) x (K L).
    # Through the column groups' tables (em.group_tables: consecutive columns per group;
    # pattern q is the rows idx[q, g], row j's levels in clev[j], -1 outside its group):
    # the three values summed per table row (R) give the cells of two columns of one
    # group; the cells across groups come from sums per row of the later group h and
    # (column k, level l) of the earlier groups (B; patterns come in runs of one row of
    # the last group, so B's row stays in cache). Every sum runs in pattern order, then in
    # table-row order: a fixed order, the same floats in every run, with about 3 K
    # additions a pattern instead of 3 K (K + 1) / 2. The terms c w and c w^2 are formed
    # as they are added (no (P, 3) array).
    P, G = idx.shape
    J, K = clev.shape
    KL = K * L
    S = np.zeros((KL, KL, 3))
    T = np.zeros((3, KL, KL))
    if P == 0:
        return T
    R = np.zeros((J, 3))
    for q in range(P):
        a0 = c[q]
        a1 = a0 * w[q]
        a2 = a1 * w[q]
        for g in range(G):
            Rj = R[idx[q, g]]
            Rj[0] += a0
            Rj[1] += a1
            Rj[2] += a2
    for j in range(J):
        for k in range(K):
            lv = clev[j, k]
            if lv < 0:
                continue
            for k2 in range(k, K):
                l2 = clev[j, k2]
                if l2 >= 0:
                    for i in range(3):
                        S[k * L + lv, k2 * L + l2, i] += R[j, i]
    for h in range(1, G):
        off, top, first, slot, n = _later_group(idx, clev, h, L)
        B = np.zeros((top - off + 1, first * L, 3))
        _cross_sums(idx, c, w, h, off, slot, n, B)
        for b in range(top - off + 1):
            j2 = off + b
            for k2 in range(first, K):
                l2 = clev[j2, k2]
                if l2 < 0:
                    continue
                for r in range(first * L):
                    for i in range(3):
                        S[r, k2 * L + l2, i] += B[b, r, i]
    for r in range(KL):
        for q in range(r, KL):
            for i in range(3):
                T[i, r, q] = S[r, q, i]
                T[i, q, r] = S[r, q, i]
    return T


@numba.njit(cache=True, nogil=True)
def _posterior(idx, clev, mt, ut, p):
    # per pattern w = p M / f, f = p M + (1 - p) U, M and U the products over the column
    # groups (in group order) of each group's row product (over its columns, left to
    # right, from 1) of the level probabilities; 0 where f is not positive
    P, G = idx.shape
    J, K = clev.shape
    rm = np.ones(J)
    ru = np.ones(J)
    for j in range(J):
        for k in range(K):
            lv = clev[j, k]
            if lv >= 0:
                rm[j] *= mt[k, lv]
                ru[j] *= ut[k, lv]
    w = np.empty(P)
    for q in range(P):
        mg = 1.0
        ug = 1.0
        for g in range(G):
            mg *= rm[idx[q, g]]
            ug *= ru[idx[q, g]]
        f = p * mg + (1 - p) * ug
        w[q] = p * mg / f if f > 0 else 0.0
    return w


def identification(counts: Any, cmp: Comparison, fit: EMResult, *, eps: float = _EM.eps,
                   p_max: float | None = None, m_only: bool = False) -> dict[str, Any]:
    """Whether the pattern counts identify the fitted model: the observed information.

    The log-likelihood ``sum_g c_g log f_g``, ``f_g = p prod_k m_k(l_gk) + (1 - p) prod_k
    u_k(l_gk)``, in free coordinates at the end point: logit P(M) (unless P(M) sits at a
    bound) and, per column and class, the log-ratios of the level probabilities that are
    not at the guard bounds (``eps``, ``1 - eps``) to the largest of them (the levels at
    a bound, and so the free levels' total mass, held fixed). Its negative Hessian is
    exact, from the posterior match probabilities ``w_g = p M_g / f_g``:

    * score: ``w - p`` (logit P(M)), ``w e`` (m), ``(1 - w) e'`` (u), with ``e`` the
      pattern's level indicator minus the free levels' shares (0 for a pattern whose
      level is not free);
    * second derivatives of ``f_g`` over ``f_g``: ``(1 - 2p)(w - p)``, ``(1 - p) w e``,
      ``-p (1 - w) e'``, ``w (e e^T - D_m)``, ``(1 - w)(e' e'^T - D_u)``;

    observed information ``= sum_g c_g (s_g s_g^T - f_g''/f_g)``, every sum a linear map of
    the weighted cross tabulations of the columns' levels (:func:`_crosstabs`, one pass
    over the patterns). Its eigenvalues scaled by the largest: a smallest ratio below
    :data:`FLAT_RATIO` (or a negative one) is a flat ridge or a saddle, a fit the data do
    not identify (e.g. two key columns: a two-class model of two indicators has more
    parameters than the counts determine; SQUAREM and plain EM then stop at different
    P(M) with the same log-likelihood).

    With ``m_only`` (the ``m_only`` fit: u and P(M) fixed, not estimated) only m's
    coordinates are free: the information of m alone.

    Returns
    -------
    dict
        ``identified`` (bool), ``info_ratio`` (smallest / largest eigenvalue),
        ``info_params`` (free coordinates).
    """
    codes, c = as_sparse(counts)
    c = c.astype(np.float64)
    nl = cmp.n_levels.astype(np.int64)
    K = len(nl)
    L = int(nl.max())
    N = c.sum()
    p = float(fit.p)
    hi = 1 - 1 / N if p_max is None else float(np.clip(p_max, 1 / N, 1 - 1 / N))
    free_p = not m_only and (1 / N) * (1 + 1e-9) < p < hi * (1 - 1e-9)
    # e = A @ one-hot(levels): one row per free coordinate (m's, then u's)
    rows_m, rows_u, dm, du = [], [], [], []
    for cls, probs, rows, ds in ((0, fit.m, rows_m, dm), (1, fit.u, rows_u, du)):
        if cls == 1 and m_only:
            continue                                     # u fixed: not a coordinate
        for k in range(K):
            pr = np.asarray(probs[k], dtype=np.float64)
            inside = np.flatnonzero((pr > eps * (1 + 1e-6)) & (pr < 1 - eps * (1 + 1e-6)))
            if inside.size < 2:
                continue
            ref = int(inside[np.argmax(pr[inside])])
            fl = inside[inside != ref]
            q = pr[fl] / pr[inside].sum()
            A = np.zeros((fl.size, K * L))
            A[:, k * L + inside] = -q[:, None]
            A[np.arange(fl.size), k * L + fl] += 1.0
            rows.append(A)
            ds.append((k, inside, np.diag(q) - np.outer(q, q)))
    Am = np.concatenate(rows_m) if rows_m else np.zeros((0, K * L))
    Au = np.concatenate(rows_u) if rows_u else np.zeros((0, K * L))
    nm, nu = Am.shape[0], Au.shape[0]
    P = int(free_p) + nm + nu
    if P == 0:
        return {"identified": True, "info_ratio": 1.0, "info_params": 0}
    mt = np.zeros((K, L))
    ut = np.zeros((K, L))
    for k in range(K):
        mt[k, :nl[k]] = np.asarray(fit.m[k], dtype=np.float64)[:nl[k]]
        ut[k, :nl[k]] = np.asarray(fit.u[k], dtype=np.float64)[:nl[k]]
    tables = getattr(fit, "tables", None)
    if tables is None or tables[0].shape[0] != codes.size:
        tables = group_tables(codes, cmp.n_levels, cmp.radix)
    w = _posterior(*tables, mt, ut, p)
    T = _crosstabs(*tables, L, c, w)
    Tc, Tw, Tw2 = T[0], T[1], T[2]
    Tv = Tc - Tw                                         # c (1 - w)
    Twv = Tw - Tw2                                       # c w (1 - w)
    Tv2 = Tv - Twv                                       # c (1 - w)^2
    t = np.diagonal(T, axis1=1, axis2=2)                 # first-order sums per level
    tc, tw, tw2 = t[0], t[1], t[2]
    tv, twv = tc - tw, tw - tw2
    H = np.zeros((P, P))
    o = int(free_p)
    im, iu = slice(o, o + nm), slice(o + nm, P)
    # scores' products minus the second derivatives of f over f
    H[im, im] = Am @ (Tw2 - Tw) @ Am.T
    H[iu, iu] = Au @ (Tv2 - Tv) @ Au.T
    H[im, iu] = Am @ Twv @ Au.T
    H[iu, im] = H[im, iu].T
    # + the D terms (the curvature of the log-ratio coordinates), block diagonal
    for ds, start, tt in ((dm, o, tw), (du, o + nm, tv)):
        at = start
        for k, inside, D in ds:
            H[at:at + D.shape[0], at:at + D.shape[0]] += float(tt[k * L + inside].sum()) * D
            at += D.shape[0]
    if free_p:
        sw = float(tw.sum()) / K                          # sum c w  (each column counts all)
        sc = float(tc.sum()) / K
        sw2 = float(tw2.sum()) / K
        s_wp = sw - p * sc                                # sum c (w - p)
        s_wp2 = sw2 - 2 * p * sw + p * p * sc             # sum c (w - p)^2
        H[0, 0] = s_wp2 - (1 - 2 * p) * s_wp
        # score cross terms: sum c (w - p) w e and sum c (w - p)(1 - w) e'; second
        # derivatives: (1 - p) sum c w e and -p sum c (1 - w) e'
        gm = Am @ (tw2 - p * tw) - (1 - p) * (Am @ tw)
        gu = Au @ (twv - p * tv) + p * (Au @ tv)
        H[0, im] = H[im, 0] = gm
        H[0, iu] = H[iu, 0] = gu
    ev = np.linalg.eigvalsh(0.5 * (H + H.T))
    top = float(np.max(np.abs(ev)))
    ratio = float(ev[0] / top) if top > 0 else 0.0
    return {"identified": bool(ratio >= FLAT_RATIO), "info_ratio": ratio, "info_params": P}
