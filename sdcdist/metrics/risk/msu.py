"""SUDA2's search for minimal sample uniques (MSUs) over the key subsets of a table of
distinct key combinations (:func:`msu_search`); the scores and the metrics built on the
MSUs are in :mod:`.suda`.

The search goes level by level over the key subsets of 1, 2, ... columns, with SUDA2's
pruning: a record is *eligible* on S when it has no missing value on S and is not
unique on any S minus one column; a subset with no eligible record is never counted.
The subsets of a level are independent tasks (:func:`sdcdist.parallel.map_batches`),
each counting its key combinations over the distinct combinations with a numba kernel
(a direct count table, or open hashing on large key spaces) and returning which of its
eligible records are unique. A task takes its subsets in lexicographic order and keeps
the mixed-radix keys of every combination on their first columns on a stack, so a
subset's keys are its prefix's keys extended by one column, shared with the subsets of
the same prefix (a key space beyond int64 is counted from scratch, with renumbering).
Everything is integer, so the counts are the same for any batching and worker count.
"""

from __future__ import annotations

import math
from typing import Any

import numba
import numpy as np

from ...errors import count_error
from ...parallel import Runner, map_batches

__all__ = ["msu_search", "MAX_SUBSETS", "KEY_LIMIT"]

#: largest mixed-radix key space of a packed key (beyond, keys are renumbered)
KEY_LIMIT = np.int64(2 ** 62)

#: most key subsets a search may visit (all subsets of 16 keys); beyond, suda_max_size
MAX_SUBSETS = 2 ** 16 - 1


# -- numba kernels ------------------------------------------------------------------------

@numba.njit(cache=True, nogil=True)
def _slot(key: np.int64, mask: np.int64) -> np.int64:
    h = np.uint64(key) * np.uint64(0x9E3779B97F4A7C15)
    return np.int64((h >> np.uint64(17)) ^ h) & mask


@numba.njit(cache=True, nogil=True)
def _table_size(n: int) -> int:
    size = 16
    while size < 2 * n:
        size *= 2
    return size


@numba.njit(cache=True, nogil=True)
def _densify(key: np.ndarray) -> np.int64:
    """Renumber the keys 0..G-1 in order of first appearance; returns G."""
    size = _table_size(key.size)
    mask = np.int64(size - 1)
    slots = np.empty(size, np.int64)
    for i in range(size):
        slots[i] = -1
    ids = np.empty(size, np.int64)
    g = np.int64(0)
    for i in range(key.size):
        s = _slot(key[i], mask)
        while slots[s] != -1 and slots[s] != key[i]:
            s = (s + 1) & mask
        if slots[s] == -1:
            slots[s] = key[i]
            ids[s] = g
            g += 1
        key[i] = ids[s]
    return g


@numba.njit(cache=True, nogil=True)
def _keys(codes: np.ndarray, cols: np.ndarray, cards: np.ndarray, multi: np.ndarray,
          targets: np.ndarray) -> tuple:
    """Mixed-radix keys on the columns ``cols`` of the targets and of the ``multi`` rows
    that can share a target's values.

    Column by column, a multi row is dropped as soon as its code (or a missing value) is
    no target's code on that column, so later columns read only the survivors. Returns the
    key space (keys are renumbered densely where it would overflow int64), the surviving
    multi rows, their keys and the targets' keys.
    """
    na = multi.size
    m = np.empty(na, np.int64)
    mkey = np.empty(na, np.int64)
    for i in range(na):
        m[i] = multi[i]
        mkey[i] = 0
    tkey = np.empty(targets.size, np.int64)
    for i in range(targets.size):
        tkey[i] = 0
    space = np.int64(1)
    for t in range(cols.size):
        col = codes[cols[t]]
        c = np.int64(cards[cols[t]])
        if space > KEY_LIMIT // c:
            both = np.empty(na + tkey.size, np.int64)
            for i in range(na):
                both[i] = mkey[i]
            for i in range(tkey.size):
                both[na + i] = tkey[i]
            space = _densify(both)
            for i in range(na):
                mkey[i] = both[i]
            for i in range(tkey.size):
                tkey[i] = both[na + i]
        present = np.empty(c, np.bool_)
        for i in range(c):
            present[i] = False
        for i in range(targets.size):
            v = col[targets[i]]
            present[v] = True
            tkey[i] = tkey[i] * c + v
        w = 0
        for i in range(na):
            v = col[m[i]]
            if v >= 0 and present[v]:
                m[w] = m[i]
                mkey[w] = mkey[i] * c + v
                w += 1
        na = w
        space *= c
    return space, m[:na], mkey[:na], tkey


@numba.njit(cache=True, nogil=True)
def _unique_on(codes: np.ndarray, count: np.ndarray, cols: np.ndarray, cards: np.ndarray,
               multi: np.ndarray, targets: np.ndarray) -> np.ndarray:
    """Whether each target row is the only record with its values on the columns ``cols``.

    ``codes`` (q, D) the distinct key combinations by column (codes 0..cards-1, -1
    missing), ``count`` (D,) their records. Only the rows that can share a target's
    values are counted: ``multi``, the rows held by several records, and the targets
    (rows of one record with no missing value on ``cols`` that are unique on no subset
    of ``cols``: any other row of one record is alone on ``cols`` or has a missing value
    there, and matches no target). A row with a missing value on ``cols`` matches nothing.
    """
    space, m, mkey, tkey = _keys(codes, cols, cards, multi, targets)
    return _count_unique(space, m, mkey, tkey, count)


@numba.njit(cache=True, nogil=True)
def _count_unique(space: np.int64, m: np.ndarray, mkey: np.ndarray, tkey: np.ndarray,
                  count: np.ndarray) -> np.ndarray:
    """Whether each target key ``tkey`` (each of one record) is held by no other record:
    ``m`` the multi rows (their records ``count[m]``) with keys ``mkey``, keys in
    [0, space)."""
    nt = tkey.size
    out = np.empty(nt, np.bool_)
    if space <= 32 * (m.size + nt) + (1 << 20):
        # saturating counts 0, 1, 2+ in a direct table
        tab = np.empty(space, np.uint8)
        for i in range(space):
            tab[i] = 0
        for i in range(m.size):
            tab[mkey[i]] = 2                  # a multi row holds several records
        for t in range(nt):
            k = tkey[t]
            if tab[k] < 2:
                tab[k] += 1
        for t in range(nt):
            out[t] = tab[tkey[t]] == 1
        return out
    size = _table_size(m.size + nt)
    mask = np.int64(size - 1)
    slots = np.empty(size, np.int64)
    sums = np.empty(size, np.int64)
    for i in range(size):
        slots[i] = -1
        sums[i] = 0
    for i in range(m.size + nt):
        k = mkey[i] if i < m.size else tkey[i - m.size]
        s = _slot(k, mask)
        while slots[s] != -1 and slots[s] != k:
            s = (s + 1) & mask
        slots[s] = k
        sums[s] += count[m[i]] if i < m.size else 1
    for t in range(nt):
        k = tkey[t]
        s = _slot(k, mask)
        while slots[s] != k:
            s = (s + 1) & mask
        out[t] = sums[s] == 1
    return out


@numba.njit(cache=True, nogil=True)
def _extend(prefix: np.ndarray, col: np.ndarray, c: np.int64) -> np.ndarray:
    """Mixed-radix keys of all rows on a key subset extended by one column: ``prefix``
    (D,) the keys on the subset (-1: a missing value there), ``col`` (D,) the codes of
    the new column (-1 missing), ``c`` its categories."""
    out = np.empty(prefix.size, np.int64)
    for i in range(prefix.size):
        v = col[i]
        out[i] = -1 if prefix[i] < 0 or v < 0 else prefix[i] * c + v
    return out


@numba.njit(cache=True, nogil=True)
def _unique_ext(prefix: np.ndarray, col: np.ndarray, c: np.int64, space: np.int64,
                count: np.ndarray, multi: np.ndarray, uniques: np.ndarray, ok: np.ndarray
                ) -> np.ndarray:
    """:func:`_unique_on` from the keys ``prefix`` (D,) of all rows on the subset's first
    columns (-1: missing) and the codes ``col`` (D,) of its last column (``c``
    categories); ``space`` bounds the keys. The targets are the rows ``uniques`` (C,) where
    ``ok`` (C,) is true; returns whether each of the C rows is a unique target."""
    m = np.empty(multi.size, np.int64)
    mkey = np.empty(multi.size, np.int64)
    w = 0
    for i in range(multi.size):
        r = multi[i]
        v = col[r]
        if prefix[r] >= 0 and v >= 0:
            m[w] = r
            mkey[w] = prefix[r] * c + v
            w += 1
    nt = 0
    for i in range(ok.size):
        if ok[i]:
            nt += 1
    tkey = np.empty(nt, np.int64)
    t = 0
    for i in range(ok.size):
        if ok[i]:
            r = uniques[i]
            tkey[t] = prefix[r] * c + col[r]      # a target has no missing value on S
            t += 1
    u = _count_unique(space, m[:w], mkey[:w], tkey, count)
    out = np.empty(ok.size, np.bool_)
    t = 0
    for i in range(ok.size):
        out[i] = False
        if ok[i]:
            out[i] = u[t]
            t += 1
    return out


def _unique_batch(batch: list[tuple[tuple[int, ...], np.ndarray]], codes: np.ndarray,
                  count: np.ndarray, cards: np.ndarray, multi: np.ndarray,
                  uniques: np.ndarray) -> list[np.ndarray]:
    """Task: for each (key subset S, mask over ``uniques`` of its targets), which of the
    rows ``uniques`` are targets unique on S (a bool mask over ``uniques``).

    The keys of all rows on a subset's first columns are kept on a stack and extended one
    column at a time, so consecutive subsets sharing their first columns (lexicographic
    order) share that work. A subset whose key space exceeds int64 is counted from scratch
    (:func:`_unique_on`, which renumbers its keys)."""
    out = []
    stack: list[tuple[tuple[int, ...], np.ndarray, int]] = [((), np.zeros(codes.shape[1],
                                                                           np.int64), 1)]
    for S, ok in batch:
        P = S[:-1]
        space = math.prod(int(cards[j]) for j in S)
        if space > KEY_LIMIT:
            # the columns with most categories first: they drop the most multi rows
            idx = np.flatnonzero(ok)
            u = np.zeros(ok.size, bool)
            u[idx] = _unique_on(codes, count,
                                np.asarray(sorted(S, key=lambda j: -cards[j]), np.int64),
                                cards, multi, uniques[idx])
            out.append(u)
            continue
        while stack[-1][0] != P[:len(stack[-1][0])]:
            stack.pop()
        for j in P[len(stack[-1][0]):]:
            top = stack[-1]
            stack.append((top[0] + (j,), _extend(top[1], codes[j], np.int64(cards[j])),
                          top[2] * int(cards[j])))
        out.append(_unique_ext(stack[-1][1], codes[S[-1]], np.int64(cards[S[-1]]),
                               np.int64(space), count, multi, uniques, ok))
    return out


# -- the search ---------------------------------------------------------------------------

def msu_search(runner: Runner, rows: np.ndarray, count: np.ndarray, *,
               max_size: int | None = None, tasks: int | None = None) -> dict[str, Any]:
    """Count the minimal sample uniques of every sample unique, by size.

    Parameters
    ----------
    runner : Runner
    rows : int ndarray, shape (D, q)
        Distinct key combinations (codes >= 0, -1 missing).
    count : int ndarray, shape (D,)
        Records of each combination.
    max_size : int or None
        Largest MSU searched (None: q).
    tasks : int or None
        Tasks per level of key subsets (:func:`~sdcdist.parallel.map_batches`; default four
        per worker); the result does not depend on it.

    Returns
    -------
    dict
        ``uniques`` (C,) the rows held by one record; ``counts`` (K + 1, C) int64, the
        MSUs of size k of each (row 0 unused); ``per_column`` (q, K + 1) int64, the MSUs of
        each size that contain each column; ``subsets`` the key subsets counted.
    """
    rows = np.ascontiguousarray(rows, dtype=np.int32)
    count = np.ascontiguousarray(count, dtype=np.int64)
    D, q = rows.shape
    K = q if max_size is None else max(0, min(int(max_size), q))
    n_subsets = sum(math.comb(q, k) for k in range(1, K + 1))
    if n_subsets > MAX_SUBSETS:
        fit = max(k for k in range(1, q + 1)
                  if sum(math.comb(q, i) for i in range(1, k + 1)) <= MAX_SUBSETS)
        raise count_error("SUDA2's search space", f"at most {MAX_SUBSETS}", "key subsets",
                          f"{n_subsets} ({q} key columns, MSUs of up to {K})",
                          f"set the 'suda_max_size' option to at most {fit}, or name fewer "
                          "categorical keys")
    uniques = np.flatnonzero(count == 1).astype(np.int64)
    C = uniques.size
    counts = np.zeros((K + 1, C), np.int64)
    per_column = np.zeros((q, K + 1), np.int64)
    out = {"uniques": uniques, "counts": counts, "per_column": per_column, "subsets": 0}
    if C == 0 or K == 0:
        return out
    cards = (rows.max(axis=0).astype(np.int64) + 1).clip(min=1) if D else np.ones(q, np.int64)
    codes_h = runner.share(np.ascontiguousarray(rows.T))
    count_h = runner.share(count)
    multi_h = runner.share(np.flatnonzero(count > 1).astype(np.int64))
    # free[S]: a mask over uniques of the records with no missing value on S that are not
    # unique on S, nor on any of its subsets: those that can have an MSU through a superset
    # of S. A subset absent from it frees no record.
    uniques_h = runner.share(uniques)
    free: dict[tuple[int, ...], np.ndarray] = {}
    for k in range(1, K + 1):
        work: list[tuple[tuple[int, ...], np.ndarray]] = []
        for S in _candidates(free, q, k):
            if k == 1:
                ok = rows[uniques, S[0]] >= 0
            else:
                # the subsets of k - 1 columns cover S, so a record free on all of them has
                # no missing value on S
                ok = free[S[1:]].copy()
                for i in range(1, k):
                    ok &= free[S[:i] + S[i + 1:]]
            if ok.any():
                work.append((S, ok))
        if not work:
            break
        res = map_batches(runner, _unique_batch, work,
                          shared=(codes_h, count_h, cards, multi_h, uniques_h), tasks=tasks)
        nxt: dict[tuple[int, ...], np.ndarray] = {}
        for (S, ok), u in zip(work, res):
            counts[k] += u
            per_column[list(S), k] += int(np.count_nonzero(u))
            f = ok & ~u
            if f.any():
                nxt[S] = f
        free = nxt
        out["subsets"] += len(work)
    return out


def _candidates(free: dict[tuple[int, ...], np.ndarray], q: int, k: int
                ) -> list[tuple[int, ...]]:
    """The key subsets of k columns whose every subset of k - 1 columns leaves some record
    free (present in ``free``, SUDA2's pruning), in lexicographic order: joins of two
    such subsets sharing their first k - 2 columns (every column, for k = 1)."""
    if k == 1:
        return [(j,) for j in range(q)]
    live = sorted(free)
    out = []
    i = 0
    while i < len(live):
        j = i
        while j < len(live) and live[j][:-1] == live[i][:-1]:
            j += 1
        for a in range(i, j):
            for b in range(a + 1, j):
                S = live[a] + (live[b][-1],)
                if all(S[:t] + S[t + 1:] in free for t in range(k - 2)):
                    out.append(S)
        i = j
    return out
