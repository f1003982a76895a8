"""The numba kernels of the singling-out, linkability and inference attacks
(:mod:`sdcdist.metrics.risk.attacks`): plain functions on arrays, no scheduling."""

from __future__ import annotations

import numba
import numpy as np

__all__ = ["knn_kernel", "knn_ids_kernel", "count_kernel", "count_numpy", "count_index_kernel", "query_index",
           "count_indexed", "NUMPY_QUERIES", "EQ", "NE", "GT", "LT", "GE", "LE", "ISNULL",
           "NOTNULL"]

#: query operators (``count_kernel``)
EQ, NE, GT, LT, GE, LE, ISNULL, NOTNULL = range(8)


@numba.njit(cache=True, nogil=True, inline="always")
def _mix(z: np.uint64) -> np.uint64:
    z = (z ^ (z >> np.uint64(30))) * np.uint64(0xBF58476D1CE4E5B9)
    z = (z ^ (z >> np.uint64(27))) * np.uint64(0x94D049BB133111EB)
    return z ^ (z >> np.uint64(31))


def knn_kernel(Q: np.ndarray, C: np.ndarray, inv_range: np.ndarray, is_cat: np.ndarray,
               k: int, a_off: int, b_off: int, salt: np.uint64
               ) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """:func:`knn_ids_kernel` with the rows of C numbered ``b_off``, ``b_off + 1``, ..."""
    return knn_ids_kernel(Q, C, inv_range, is_cat, k, a_off,
                          np.arange(b_off, b_off + C.shape[0], dtype=np.int64), salt)


@numba.njit(cache=True, nogil=True)
def knn_ids_kernel(Q: np.ndarray, C: np.ndarray, inv_range: np.ndarray, is_cat: np.ndarray,
                   k: int, a_off: int, ids: np.ndarray, salt: np.uint64
                   ) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """The k nearest rows of C to each row of Q, by (distance, tie key), as their ids
    ``ids`` (one a row of C; the rows' positions in content order, so that the result
    does not depend on the rows' order); the tie key of (target i, row id r) is a hash of
    (salt, i, r): ties are broken at random, reproducibly.
    A row's distance stops accumulating once it exceeds the k-th nearest so far (its terms
    are not negative: it cannot come back), the same result at a fraction of the work."""
    a, b, m = Q.shape[0], C.shape[0], Q.shape[1]
    D = np.full((a, k), np.inf)
    T = np.full((a, k), np.iinfo(np.uint64).max, dtype=np.uint64)
    Ix = np.full((a, k), -1, dtype=np.int64)
    last = k - 1
    for i in range(a):
        hi = _mix(salt ^ _mix(np.uint64(i + a_off) + np.uint64(0x9E3779B97F4A7C15)))
        worst = D[i, last]
        for j in range(b):
            d = 0.0
            for c in range(m):
                if d > worst:
                    break                      # farther than the k-th nearest already
                x = Q[i, c]
                y = C[j, c]
                xn = np.isnan(x)
                yn = np.isnan(y)
                if is_cat[c]:
                    if xn and yn:
                        continue
                    if xn or yn or x != y:
                        d += 1.0
                else:
                    if xn and yn:
                        d += 1.0
                    elif xn or yn:
                        d = np.inf
                        break
                    else:
                        d += abs(x - y) * inv_range[c]
            if d > worst:
                continue
            r = ids[j]
            t = _mix(hi ^ np.uint64(r))
            if d < worst or t < T[i, last]:
                p = last
                while p > 0 and (d < D[i, p - 1] or (d == D[i, p - 1] and t < T[i, p - 1])):
                    D[i, p] = D[i, p - 1]
                    T[i, p] = T[i, p - 1]
                    Ix[i, p] = Ix[i, p - 1]
                    p -= 1
                D[i, p] = d
                T[i, p] = t
                Ix[i, p] = r
                worst = D[i, last]
    return D, T, Ix


@numba.njit(cache=True, nogil=True)
def _term(x: float, op: int, v: float) -> bool:
    """Whether value ``x`` satisfies the query term ``op v`` (a comparison with a missing
    value is false)."""
    if op == 6:
        return np.isnan(x)
    if op == 7:
        return not np.isnan(x)
    if np.isnan(x):
        return False
    if op == 0:
        return x == v
    if op == 1:
        return x != v
    if op == 2:
        return x > v
    if op == 3:
        return x < v
    if op == 4:
        return x >= v
    return x <= v


@numba.njit(cache=True, nogil=True)
def count_kernel(X: np.ndarray, keep: np.ndarray, cols: np.ndarray, ops: np.ndarray,
                  vals: np.ndarray, cap: int) -> np.ndarray:
    """The rows with ``keep`` each query (``cols``, ``ops``, ``vals``: (nq, t), column -1
    an unused term) matches; ``cap`` > 0: counting stops at ``cap``."""
    nq, t = cols.shape
    out = np.zeros(nq, dtype=np.int64)
    for q in range(nq):
        cnt = 0
        for r in range(X.shape[0]):
            if not keep[r]:
                continue
            ok = True
            for s in range(t):
                c = cols[q, s]
                if c >= 0 and not _term(X[r, c], ops[q, s], vals[q, s]):
                    ok = False
                    break
            if ok:
                cnt += 1
                if cap > 0 and cnt >= cap:
                    break
        out[q] = cnt
    return out


@numba.njit(cache=True, nogil=True)
def _search(values: np.ndarray, a: int, b: int, v: float, right: bool) -> int:
    """``a + np.searchsorted(values[a:b], v, side)`` (no missing value among them)."""
    lo, hi = a, b
    while lo < hi:
        mid = (lo + hi) >> 1
        if values[mid] < v or (right and values[mid] == v):
            lo = mid + 1
        else:
            hi = mid
    return lo


@numba.njit(cache=True, nogil=True)
def count_index_kernel(X: np.ndarray, rows: np.ndarray, ptr: np.ndarray, values: np.ndarray,
                       cols: np.ndarray, ops: np.ndarray, vals: np.ndarray, cap: int
                       ) -> np.ndarray:
    """As :func:`count_kernel` on an indexed block (:func:`query_index`): each query tests
    only the rows of its most selective term, one contiguous range of ``rows`` (every kept
    row when no term narrows them: ``!=`` terms only)."""
    nq, t = cols.shape
    m = (ptr.size - 2) // 2
    out = np.zeros(nq, dtype=np.int64)
    for q in range(nq):
        lo = ptr[2 * m]
        hi = ptr[2 * m + 1]
        for s in range(t):
            c = cols[q, s]
            if c < 0:
                continue
            op = ops[q, s]
            v = vals[q, s]
            a = ptr[c]
            b = ptr[c + 1]
            if op == 6:
                la, hb = ptr[m + c], ptr[m + c + 1]
            elif op == 7:
                la, hb = a, b
            elif op == 1:
                continue
            elif np.isnan(v):
                la, hb = a, a                  # x op NaN holds for no x
            elif op == 0:
                la, hb = _search(values, a, b, v, False), _search(values, a, b, v, True)
            elif op == 2:
                la, hb = _search(values, a, b, v, True), b
            elif op == 3:
                la, hb = a, _search(values, a, b, v, False)
            elif op == 4:
                la, hb = _search(values, a, b, v, False), b
            else:
                la, hb = a, _search(values, a, b, v, True)
            if hb - la < hi - lo:
                lo, hi = la, hb
        cnt = 0
        for p in range(lo, hi):
            r = rows[p]
            ok = True
            for s in range(t):
                c = cols[q, s]
                if c >= 0 and not _term(X[r, c], ops[q, s], vals[q, s]):
                    ok = False
                    break
            if ok:
                cnt += 1
                if cap > 0 and cnt >= cap:
                    break
        out[q] = cnt
    return out


#: up to this many queries a chunk counts them with numpy (no compiled kernel to load)
NUMPY_QUERIES = 4096


def count_numpy(X: np.ndarray, keep: np.ndarray, cols: np.ndarray, ops: np.ndarray,
                vals: np.ndarray, cap: int) -> np.ndarray:
    """The records (rows with ``keep``) each query matches: the compiled kernel's counts,
    with numpy (a comparison with a missing value is false)."""
    out = np.zeros(cols.shape[0], np.int64)
    nan = np.isnan(X)
    valid = cols >= 0
    single = valid.sum(axis=1) == 1
    # one-term queries: counts from each column's sorted known values
    if single.any():
        first = np.argmax(valid, axis=1)
        sc = cols[np.arange(cols.shape[0]), first]
        so = ops[np.arange(cols.shape[0]), first]
        sv = vals[np.arange(cols.shape[0]), first]
        for c in np.unique(sc[single]):
            sel = np.flatnonzero(single & (sc == c))
            xs = np.sort(X[keep & ~nan[:, c], c])
            n_known = xs.size
            n_null = int(np.count_nonzero(keep & nan[:, c]))
            left = np.searchsorted(xs, sv[sel], side="left")
            right = np.searchsorted(xs, sv[sel], side="right")
            o = so[sel]
            cnt = np.select([o == EQ, o == NE, o == GT, o == LT, o == GE, o == LE,
                             o == ISNULL, o == NOTNULL],
                            [right - left, n_known - (right - left), n_known - right, left,
                             n_known - left, right, np.full(sel.size, n_null),
                             np.full(sel.size, n_known)])
            out[sel] = np.minimum(cnt, cap) if cap > 0 else cnt
    with np.errstate(invalid="ignore"):
        for i in np.flatnonzero(~single):
            m = keep.copy()
            for c, o, v in zip(cols[i], ops[i], vals[i]):
                if c < 0:
                    continue
                x = X[:, c]
                if o == ISNULL:
                    m &= nan[:, c]
                elif o == NOTNULL:
                    m &= ~nan[:, c]
                elif o == EQ:
                    m &= x == v
                elif o == NE:
                    m &= (x != v) & ~nan[:, c]
                elif o == GT:
                    m &= x > v
                elif o == LT:
                    m &= x < v
                elif o == GE:
                    m &= x >= v
                else:
                    m &= x <= v
            n = int(np.count_nonzero(m))
            out[i] = min(n, cap) if cap > 0 else n
    return out


# -- an index of a record chunk for query counts ---------------------------------------------

def query_index(B: np.ndarray, keep: np.ndarray) -> dict[str, np.ndarray]:
    """The kept rows of a block ``B`` (r, m), arranged so that the rows any query term can
    match are one contiguous range of ``rows``.

    ``rows`` holds, for each column j, the kept rows with a known value sorted by value
    (``ptr[j]:ptr[j + 1]``, their values ``values[ptr[j]:ptr[j + 1]]``), then for each column
    the kept rows missing there (``ptr[m + j]:ptr[m + j + 1]``), then every kept row
    (``ptr[2m]:ptr[2m + 1]``).
    """
    B = np.ascontiguousarray(B, dtype=np.float64)
    m = B.shape[1]
    kept = np.flatnonzero(keep)
    known, missing, values = [], [], []
    for j in range(m):
        x = B[kept, j]
        nan = np.isnan(x)
        o = np.argsort(x[~nan], kind="stable")
        known.append(kept[~nan][o])
        values.append(x[~nan][o])
        missing.append(kept[nan])
    parts = known + missing + [kept]
    ptr = np.cumsum([0] + [p.size for p in parts]).astype(np.int64)
    rows = np.concatenate(parts).astype(np.int64) if parts else np.zeros(0, np.int64)
    vals = np.concatenate(values) if values else np.zeros(0)
    return {"X": B, "rows": rows, "ptr": ptr, "values": vals}


def count_indexed(ix: dict[str, np.ndarray], cols: np.ndarray, ops: np.ndarray,
                  vals: np.ndarray, cap: int) -> np.ndarray:
    """The kept rows of an indexed block (:func:`query_index`) each query matches
    (:func:`count_kernel`'s counts), testing only the rows of its most selective term."""
    if cols.shape[0] == 0:
        return np.zeros(0, np.int64)
    return count_index_kernel(ix["X"], ix["rows"], ix["ptr"], ix["values"],
                              np.ascontiguousarray(cols, np.int64),
                              np.ascontiguousarray(ops, np.int64),
                              np.ascontiguousarray(vals, np.float64), cap)
