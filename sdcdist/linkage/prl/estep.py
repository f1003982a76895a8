"""The E-step of the PRL EM (:mod:`.em`), compiled: each pattern's posterior match
probability from the two column groups' tables (:func:`~.em.group_tables`), summed into
the M-step's per-column-level totals and the log-likelihood in one fixed order.

Two kernels give the same bits: the plain loop :func:`_estep` over patterns, and
:func:`_estep_runs` over runs of patterns that share their group-1 row, taken in chunks
of :data:`ESTEP_CHUNK` with a vectorised softplus pass; :func:`estep` picks the one its
run tables (:func:`estep_runs`) call for. :class:`EStep` (the EM's) takes two groups by
runs and any other number by :func:`_chunks_range`: the general loop in chunks of
consecutive patterns with the same vectorised pass (13 key columns make three groups:
CASC Census and Tarragona), the same floats as the loop.
"""

from __future__ import annotations

import numba
import numpy as np

from ...parallel import serial_map

__all__ = ["estep", "estep_runs", "ESTEP_CHUNK", "ESTEP_PARTS", "ESTEP_MAP_MIN", "EStep"]


@numba.njit(cache=True, nogil=True, inline="always")
def _softplus(e, odds, LR, idx, q):
    # softplus(d_q) = ln(1 + e) and the match probability e / (1 + e) of pattern q from its
    # match odds e (d_q = ln e); from the logs (odds * prod exp(LR[idx[q, g]])) where e
    # is outside the double range (or 0)
    if 0.0 < e < 1e-4:              # series, error < e^5/5
        s = e * (1.0 - e * (0.5 - e * (1.0 / 3.0 - 0.25 * e)))
        w = e / (1.0 + e)
    elif 1e-4 <= e < 1e300:
        s = np.log1p(e)
        w = e / (1.0 + e)
    else:
        d = np.log(odds)
        for g in range(idx.shape[1]):
            d += LR[idx[q, g]]
        if d > 0.0:
            s = d + np.log1p(np.exp(-d))
            w = 1.0 / (1.0 + np.exp(-d))
        else:
            x = np.exp(d)
            s = np.log1p(x)
            w = x / (1.0 + x)
    return s, w


@numba.njit(cache=True, nogil=True)
def _estep(idx, c, clev, nl, m, u, p, T, N, bm, ratio, R, LR, S):
    # E-step on sparse pattern counts. The match odds of pattern q are
    # e_q = p/(1-p) prod_k (m/u)[k, level], a product over the column groups' tables R
    # (one gather per group); g_q = e_q / (1 + e_q). Fills bm (K, L) with the expected
    # level counts among matches (one scatter per group into S, then the tables);
    # returns their total and the log-likelihood
    # N ln(1 - p) + sum_kl T_kl ln u_kl + sum_q c_q softplus(d_q), d_q = ln e_q.
    P, G = idx.shape
    J = clev.shape[0]
    span = _row_spans(clev)
    base = _tables(clev, nl, m, u, p, T, N, ratio, R, LR, np.empty(J), span)
    S[:] = 0.0
    odds = p / (1.0 - p)
    sp = 0.0
    sm = 0.0
    if G == 2 and P > 0:
        # two column groups (the default comparison): the same operations in the same
        # order as the general loop (_loop_range), with the group-1 row's sum S[j1] held
        # in a register while it repeats (codes increase, so the high group changes
        # seldom: no store-to-load chain through S; the groups' rows are disjoint)
        j1 = idx[0, 1]
        a1 = S[j1]
        for q in range(P):
            i0 = idx[q, 0]
            i1 = idx[q, 1]
            s, w = _softplus(odds * R[i0] * R[i1], odds, LR, idx, q)
            sp += c[q] * s
            cm = c[q] * w
            sm += cm
            S[i0] += cm
            if i1 != j1:
                S[j1] = a1
                j1 = i1
                a1 = S[j1]
            a1 += cm
        S[j1] = a1
    else:
        sm, sp = _loop_range(idx, c, R, LR, odds, 0, P, S)
    _levels_from_rows(clev, S, bm, span)
    return sm, base + sp


#: Patterns per chunk of the run E-step (:func:`_estep_runs`): the chunk's terms are computed
#: in one vectorised pass into two buffers, then added in pattern order.
ESTEP_CHUNK = 512


@numba.njit(cache=True, nogil=True, error_model="numpy")
def _series_chunk(ii, cq, OR, r1, n, cs, cw, ce, ll):
    # the softplus terms c_q softplus(d_q) and c_q g_q of the n patterns of one chunk of a
    # group-1 row (ratio product r1; ii, cq: the chunk's group-0 rows and counts) by the
    # series branch of _softplus, the same operations in the same order (e = odds R[i0]
    # R[i1] = OR[i0] r1). The gather first (into ce, which keeps the gathered values for
    # the patterns outside the series' range), then a loop on contiguous values without a
    # branch, which vectorises. The chunk's arrays are slices, indexed from 0: no
    # negative-index wraparound on every access (a slice start plus an offset may be
    # negative as far as the compiler knows). Returns how many patterns are outside the
    # series' range (their terms are then computed again by _softplus). Without ``ll``
    # (the log-likelihood not wanted) only c_q g_q: g_q = e / (1 + e) is _softplus's
    # formula for every e in (0, 1e300), so only the patterns outside that range are
    # returned for _softplus.
    for p in range(n):
        ce[p] = OR[ii[p]]
    return _series_terms(cq, n, cs, cw, ce, r1, ll)


@numba.njit(cache=True, nogil=True)
def _row_spans(clev):
    # each table row's columns [span[j, 0], span[j, 1]): those of its group (consecutive;
    # clev is -1 on the others)
    J, K = clev.shape
    span = np.zeros((J, 2), dtype=np.int64)
    for j in range(J):
        k0 = K
        k1 = 0
        for k in range(K):
            if clev[j, k] >= 0:
                k0 = min(k0, k)
                k1 = k + 1
        span[j, 0] = k0
        span[j, 1] = max(k0, k1)
    return span


@numba.njit(cache=True, nogil=True)
def _tables(clev, nl, m, u, p, T, N, ratio, R, LR, OR, span):
    # the per-row tables of an E-step: ratio (K, L) = m / u, R / LR (J) the rows' ratio
    # products and log-ratio sums, OR = odds R; returns N ln(1 - p) + sum_kl T_kl ln u_kl.
    # A row's products over the columns of its group only (span, _row_spans): the same
    # factors in the same order as over all columns skipping the others
    J, K = clev.shape
    base = N * np.log1p(-p)
    lratio = np.zeros_like(ratio)
    for k in range(K):
        for l in range(nl[k]):
            lu = np.log(u[k, l])
            base += T[k, l] * lu
            ratio[k, l] = m[k, l] / u[k, l]
            lratio[k, l] = np.log(m[k, l]) - lu
    odds = p / (1.0 - p)
    for j in range(J):
        r = 1.0
        lr = 0.0
        for k in range(span[j, 0], span[j, 1]):
            lv = clev[j, k]
            if lv >= 0:
                r *= ratio[k, lv]
                lr += lratio[k, lv]
        R[j] = r
        LR[j] = lr
        OR[j] = odds * r
    return base


@numba.njit(cache=True, nogil=True, inline="always")
def _outside_series(ce, rs, top, n, cq, cs, cw, bad, odds, LR, idx, q):
    # the terms of a chunk's patterns outside the series' range (e = ce[t] rs not in
    # (0, top)) by _softplus: listed first without a branch (a chunk holds a few dozen of
    # them among hundreds), then computed (chunk offset q: the patterns' rows in idx)
    nb = 0
    for t in range(n):
        e = ce[t] * rs
        bad[nb] = t
        nb += np.int64(not ((e > 0.0) & (e < top)))
    for b in range(nb):
        t = bad[b]
        s, w = _softplus(ce[t] * rs, odds, LR, idx, q + t)
        cs[t] = cq[t] * s
        cw[t] = cq[t] * w


@numba.njit(cache=True, nogil=True)
def _runs_range(idx, i0, rstart, rrow, r_lo, r_hi, c, R, LR, OR, odds, S, cs, cw, ll=True):
    # the sums of _estep_runs over the runs r_lo .. r_hi - 1 (patterns rstart[r_lo] ..
    # rstart[r_hi] - 1): adds each pattern's c g into S (its two rows) and returns
    # (sum c g, sum c softplus(d)), each summed in pattern order. Without ll the second
    # sum is not computed (0.0 is returned for it); the rest is the same floats.
    sp = 0.0
    sm = 0.0
    top = 1e-4 if ll else 1e300          # the top of _series_chunk's range
    ce = np.empty(cs.size)               # the chunk's gathered OR values
    bad = np.empty(cs.size, dtype=np.int64)
    for rr in range(r_lo, r_hi):
        j1 = rrow[rr]
        r1 = R[j1]
        a1 = S[j1]
        q = rstart[rr]
        qe = rstart[rr + 1]
        while q < qe:
            n = min(ESTEP_CHUNK, qe - q)
            ii = i0[q:q + n]             # the chunk's rows and counts, indexed from 0
            cq = c[q:q + n]
            nb = _series_chunk(ii, cq, OR, r1, n, cs, cw, ce, ll)
            if nb:
                _outside_series(ce, r1, top, n, cq, cs, cw, bad, odds, LR, idx, q)
            if ll:
                for t in range(n):
                    cm = cw[t]
                    sp += cs[t]
                    sm += cm
                    S[ii[t]] += cm
                    a1 += cm
            else:
                for t in range(n):
                    cm = cw[t]
                    sm += cm
                    S[ii[t]] += cm
                    a1 += cm
            q += n
        S[j1] = a1
    return sm, sp


@numba.njit(cache=True, nogil=True)
def _loop_range(idx, c, R, LR, odds, q_lo, q_hi, S):
    # the sums of _estep's general loop over the patterns q_lo .. q_hi - 1 (any number of
    # column groups): adds each pattern's c g into S (its rows); returns (sum c g,
    # sum c softplus(d)), each in pattern order
    G = idx.shape[1]
    sp = 0.0
    sm = 0.0
    for q in range(q_lo, q_hi):
        e = odds
        for g in range(G):
            e *= R[idx[q, g]]
        s, w = _softplus(e, odds, LR, idx, q)
        sp += c[q] * s
        cm = c[q] * w
        sm += cm
        for g in range(G):
            S[idx[q, g]] += cm
    return sm, sp


@numba.njit(cache=True, nogil=True, error_model="numpy")
def _odds_chunk(idx, R, odds, q0, n, ce):
    # the match odds e = odds R[idx[q, 0]] R[idx[q, 1]] ... of patterns q0 .. q0 + n - 1
    # into ce, multiplied in group order as _loop_range does
    G = idx.shape[1]
    for p in range(n):
        x = odds
        for g in range(G):
            x *= R[idx[q0 + p, g]]
        ce[p] = x


@numba.njit(cache=True, nogil=True)
def _chunks_range(idx, c, R, LR, odds, q_lo, q_hi, S, cs, cw, ll=True):
    # _loop_range's sums (any number of column groups), the same floats: the patterns in
    # chunks of ESTEP_CHUNK, each chunk's odds gathered (_odds_chunk) and its terms computed
    # by _series_chunk's vectorised pass (the rare patterns outside the series' range by
    # _softplus), then added in pattern order. Without ll the log-likelihood's sum is not
    # computed (0.0 is returned for it)
    G = idx.shape[1]
    sp = 0.0
    sm = 0.0
    top = 1e-4 if ll else 1e300
    ce = np.empty(cs.size)
    bad = np.empty(cs.size, dtype=np.int64)
    q = q_lo
    while q < q_hi:
        n = min(ESTEP_CHUNK, q_hi - q)
        _odds_chunk(idx, R, odds, q, n, ce)
        cq = c[q:q + n]
        nb = _series_terms(cq, n, cs, cw, ce, 1.0, ll)
        if nb:
            _outside_series(ce, 1.0, top, n, cq, cs, cw, bad, odds, LR, idx, q)
        for t in range(n):
            cm = cw[t]
            if ll:
                sp += cs[t]
            sm += cm
            for g in range(G):
                S[idx[q + t, g]] += cm
        q += n
    return sm, sp


@numba.njit(cache=True, nogil=True, error_model="numpy", inline="always")
def _series_terms(cq, n, cs, cw, ce, rs, ll):
    # _series_chunk's pass on the gathered values ce: e = ce[p] rs (rs = 1.0, exact, where
    # ce holds the whole odds); returns how many patterns are outside the series' range
    bad = 0
    if not ll:
        for p in range(n):
            e = ce[p] * rs
            w = e / (1.0 + e)
            cw[p] = cq[p] * w
            bad += np.int64(not ((e > 0.0) & (e < 1e300)))
        return bad
    for p in range(n):
        e = ce[p] * rs
        s = e * (1.0 - e * (0.5 - e * (1.0 / 3.0 - 0.25 * e)))
        w = e / (1.0 + e)
        cs[p] = cq[p] * s
        cw[p] = cq[p] * w
        bad += np.int64(not ((e > 0.0) & (e < 1e-4)))
    return bad


@numba.njit(cache=True, nogil=True)
def _levels_from_rows(clev, S, bm, span):
    # bm (K, L): the expected level counts among matches from the rows' sums S (each row
    # on the columns of its group, span)
    bm[:, :] = 0.0
    for j in range(clev.shape[0]):
        for k in range(span[j, 0], span[j, 1]):
            lv = clev[j, k]
            if lv >= 0:
                bm[k, lv] += S[j]


@numba.njit(cache=True, nogil=True)
def _estep_runs(idx, i0, rstart, rrow, c, clev, nl, m, u, p, T, N, bm, ratio, R, LR, S, OR,
                cs, cw):
    # _estep for two column groups, the same floats bit for bit: the patterns (codes
    # increasing) form runs of one group-1 row (rrow[r]: patterns rstart[r] ..
    # rstart[r + 1] - 1); each run is taken in chunks of ESTEP_CHUNK patterns whose
    # softplus terms are computed in a vectorised pass (_series_chunk, the rare patterns
    # outside the series' range by _softplus), then added in pattern order into the same
    # sums as _estep's loop (sp, sm, S[i0] and the run's group-1 sum held in a register).
    # i0: idx[:, 0] contiguous; OR, cs, cw: scratch (J), (ESTEP_CHUNK,), (ESTEP_CHUNK,).
    span = _row_spans(clev)
    base = _tables(clev, nl, m, u, p, T, N, ratio, R, LR, OR, span)
    S[:] = 0.0
    sm, sp = _runs_range(idx, i0, rstart, rrow, 0, rstart.size - 1, c, R, LR, OR,
                         p / (1.0 - p), S, cs, cw)
    _levels_from_rows(clev, S, bm, span)
    return sm, base + sp


@numba.njit(cache=True, nogil=True)
def estep(idx, c, clev, nl, m, u, p, T, N, bm, ratio, R, LR, S, runs):
    # the E-step: by runs (_estep_runs) when runs holds them (two column groups), else
    # _estep
    i0, rstart, rrow, OR, cs, cw = runs
    if rstart.size > 1:
        return _estep_runs(idx, i0, rstart, rrow, c, clev, nl, m, u, p, T, N, bm, ratio, R,
                           LR, S, OR, cs, cw)
    return _estep(idx, c, clev, nl, m, u, p, T, N, bm, ratio, R, LR, S)


@numba.njit(cache=True, nogil=True)
def _run_tables(idx, i0):
    # one pass over idx (P, 2): the group-0 rows into i0 and where each run of one group-1
    # row starts (rstart, ending with P) and its row (rrow)
    P = idx.shape[0]
    starts = np.empty(P + 1, dtype=np.int64)
    n = 0
    prev = -1
    for q in range(P):
        i0[q] = idx[q, 0]
        v = idx[q, 1]
        if v != prev:
            starts[n] = q
            n += 1
            prev = v
    starts[n] = P
    rstart = starts[:n + 1].copy()
    rrow = np.empty(n, dtype=np.int64)
    for r in range(n):
        rrow[r] = idx[rstart[r], 1]
    return rstart, rrow


def estep_runs(idx: np.ndarray, J: int) -> tuple:
    """The run tables of :func:`_estep_runs` for ``idx`` of two column groups (codes
    increasing): ``(i0, rstart, rrow, OR, cs, cw)``; empty tables (so :func:`_estep`)
    otherwise."""
    z = np.zeros(0)
    if idx.shape[1] != 2 or idx.shape[0] == 0:
        return (np.zeros(0, np.uint16), np.zeros(0, np.int64), np.zeros(0, np.int64), z, z, z)
    # group-0 rows as uint16 where they fit (half the bytes the E-step streams)
    i0 = np.empty(idx.shape[0], dtype=np.uint16 if J <= 65536 else np.int32)
    rstart, rrow = _run_tables(idx, i0)
    return (i0, rstart, rrow, np.zeros(J), np.zeros(ESTEP_CHUNK), np.zeros(ESTEP_CHUNK))


#: Parts of the EM's E-step (:class:`EStep`): consecutive runs of patterns whose sums are
#: computed on their own (in threads when the caller maps them so) and then added in part
#: order. Fixed, so the fit is the same bits for any number of threads.
ESTEP_PARTS = 4

#: Fewest patterns for which :class:`EStep` hands its parts to the caller's map (threads);
#: below, one part after the other in the caller's thread (a thread's hand-off costs more
#: than the sums). The same floats either way.
ESTEP_MAP_MIN = 1 << 17


class EStep:
    """The EM's E-step on fixed parts of the patterns (:data:`ESTEP_PARTS`).

    Each part sums its patterns in pattern order (by runs of one group-1 row with two
    column groups, :func:`_runs_range`; by :func:`_chunks_range` otherwise) into its own
    row sums; the parts' sums are then added in part order. ``pmap(fn, blocks)`` runs the
    parts from :data:`ESTEP_MAP_MIN` patterns on (``[fn(*b) for b in blocks]`` by default
    and below; a thread map gives the same floats).

    Parameters
    ----------
    idx : ndarray (P, G), clev : ndarray (J, K)
        The column groups' tables (:func:`~.em.group_tables`).
    c : ndarray (P,)
        Pattern counts (float64, or whole counts as integers).
    nl : ndarray (K,) of int64
    T : ndarray (K, L)
        Level totals over all pairs.
    """

    def __init__(self, idx: np.ndarray, clev: np.ndarray, c: np.ndarray, nl: np.ndarray,
                 T: np.ndarray, pmap=None):
        self.idx, self.clev, self.nl, self.T = idx, clev, nl, T
        self.span = _row_spans(clev)
        # whole counts below 2^32 streamed as uint32 (half the bytes a step reads; each
        # converts to the same float64 in the kernels); integer counts are summed exactly
        # (below 2^53 the same float as a float sum)
        c = np.asarray(c)
        self.N = float(np.sum(c))
        if c.dtype.kind in "iu":
            whole = c.size and int(c.min()) >= 0 and int(c.max()) < 2 ** 32
        else:
            whole = c.size and float(c.min()) >= 0 and float(c.max()) < 2.0 ** 32 \
                and bool(np.all(c == np.floor(c)))
        self.c = c.astype(np.uint32) if whole else c.astype(np.float64, copy=False)
        J, K = clev.shape
        L = T.shape[1]
        self.runs = estep_runs(idx, J)
        rstart = self.runs[1]
        P = idx.shape[0]
        if rstart.size > 1:           # parts of whole runs, cut near equal pattern counts
            goal = [P * k // ESTEP_PARTS for k in range(1, ESTEP_PARTS)]
            cuts = np.searchsorted(rstart, goal)
            bounds = np.unique(np.r_[0, cuts, rstart.size - 1])
        else:
            bounds = np.unique(np.r_[0, [P * k // ESTEP_PARTS for k in range(1, ESTEP_PARTS)],
                                     P])
        self.parts = [(int(bounds[i]), int(bounds[i + 1])) for i in range(bounds.size - 1)]
        self.S = [np.zeros(J) for _ in self.parts]
        self.scratch = [(np.zeros(ESTEP_CHUNK), np.zeros(ESTEP_CHUNK)) for _ in self.parts]
        self.ratio, self.R, self.LR, self.OR = np.zeros((K, L)), np.zeros(J), np.zeros(J), \
            np.zeros(J)
        self.pmap = pmap if pmap is not None and P >= ESTEP_MAP_MIN else serial_map

    def serial(self) -> None:
        """From now on the parts run one after the other in the caller's thread (the same
        floats)."""
        self.pmap = serial_map

    def _part(self, k: int, odds: float, ll: bool) -> tuple[float, float]:
        S = self.S[k]
        S[:] = 0.0
        lo, hi = self.parts[k]
        if self.runs[1].size > 1:
            i0, rstart, rrow = self.runs[0], self.runs[1], self.runs[2]
            cs, cw = self.scratch[k]
            return _runs_range(self.idx, i0, rstart, rrow, lo, hi, self.c, self.R, self.LR,
                               self.OR, odds, S, cs, cw, ll)
        cs, cw = self.scratch[k]
        return _chunks_range(self.idx, self.c, self.R, self.LR, odds, lo, hi, S, cs, cw, ll)

    def __call__(self, m: np.ndarray, u: np.ndarray, p: float, bm: np.ndarray, *,
                 loglik: bool = True) -> tuple[float, float]:
        """Expected matches ``sum c g`` and the log-likelihood at ``(m, u, p)``; ``bm``
        (K, L) receives the expected level counts among matches. ``loglik=False``: the
        log-likelihood is not computed (NaN is returned for it; with two column groups
        the step then skips each pattern's softplus, about a fifth of its time); the
        expected counts are the same floats."""
        base = _tables(self.clev, self.nl, m, u, p, self.T, self.N, self.ratio, self.R,
                       self.LR, self.OR, self.span)
        odds = p / (1.0 - p)
        sums = self.pmap(self._part, [(k, odds, loglik) for k in range(len(self.parts))])
        S = self.S[0].copy()
        sm, sp = sums[0]
        for k in range(1, len(sums)):
            S += self.S[k]
            sm += sums[k][0]
            sp += sums[k][1]
        _levels_from_rows(self.clev, S, bm, self.span)
        return sm, (base + sp) if loglik else float("nan")
