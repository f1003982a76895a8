"""Local suppression of categorical key values towards k-anonymity (column selection in
:mod:`.categorical`).

- ``suppress`` (parameter k): local suppression towards k-anonymity, with a
  missing value matching every category (sdcMicro's convention). Greedy:
  while some record shares its key combination with fewer than k records
  (itself included), each such record gets one more of its key values set to
  missing, the one of the key with the most categories among those it still
  has. Suppressing a value never lowers any record's frequency (a missing
  value matches more records, never fewer), so records that start safe stay
  untouched: at most ``q x U`` values are suppressed, q the number of keys and
  U the number of records in key classes smaller than k before suppression,
  and the loop ends after at most q rounds (a record with every key missing
  matches all n >= k records). Then a give-back pass restores, one by one (keys
  of most importance first), every suppressed value k-anonymity does not need,
  through hash indexes on the key combinations (see ``_give_back``): no size limit.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np

from ..errors import option_error
from ._registry import register
from .categorical import check_suppress_k, masked_columns

__all__ = ["frequencies_wildcard", "suppress_greedy", "suppress"]


def frequencies_wildcard(codes: np.ndarray, weights: np.ndarray | None = None
                         ) -> tuple[np.ndarray, np.ndarray]:
    """Sample and weighted frequency of each record's key combination, a missing value
    (NaN) matching every category (sdcMicro's ``freqCalc`` with ``alpha = 1``).

    Parameters
    ----------
    codes : ndarray, shape (n, q)
        Key codes, NaN where missing.
    weights : ndarray, shape (n,), optional

    Returns
    -------
    fk, Fk : ndarray, shape (n,)
    """
    from ..keytables import combo_table, combo_frequencies
    table = combo_table(codes, weights)
    fk_u, Fk_u = combo_frequencies(table)
    return fk_u[table["inverse"]], Fk_u[table["inverse"]]


def suppress_greedy(codes: np.ndarray, k: int, *, importance: Sequence[int] | None = None
                    ) -> tuple[np.ndarray, int, int]:
    """Greedy local suppression to k-anonymity (NaN matches every category), then a pass
    giving back every suppressed value that is not needed.

    Parameters
    ----------
    codes : ndarray, shape (n, q)
    k : int, 2 <= k <= n
    importance : sequence of int, length q, optional
        sdcMicro's importance: 1 the most important key (suppressed last), q the least
        (suppressed first). Default: the key with the most categories is suppressed first.

    Returns
    -------
    out : ndarray, shape (n, q)
        With suppressed values set to NaN.
    suppressed : int
        Number of values set to missing.
    unsafe : int
        Records in key classes smaller than k before suppression (the bound is
        ``q * unsafe``).
    """
    orig = np.array(codes, dtype=np.float64, copy=True)
    order = _suppression_order(orig, importance)
    out, unsafe0 = _greedy(orig, k, order)
    _give_back(orig, out, k, order)
    total = int((np.isnan(out) & ~np.isnan(orig)).sum())
    return out, total, unsafe0


def _suppression_order(codes: np.ndarray, importance: Sequence[int] | None) -> np.ndarray:
    """Key positions, the first to suppress first."""
    q = codes.shape[1]
    if importance is None:
        levels = np.array([np.unique(codes[~np.isnan(codes[:, j]), j]).size
                           for j in range(q)])
        return np.argsort(-levels, kind="stable")             # most categories first
    imp = [int(v) for v in importance]
    if sorted(imp) != list(range(1, q + 1)):
        raise option_error("importance", f"the integers 1..{q} once each, one per masked column",
                           imp, owner="suppress")
    return np.argsort(-np.array(imp), kind="stable")          # least important first


def _greedy(orig: np.ndarray, k: int, order: np.ndarray) -> tuple[np.ndarray, int]:
    """The greedy rounds: (the codes with suppressions, records unsafe at the start)."""
    out = orig.copy()
    q = out.shape[1]
    fk, _ = frequencies_wildcard(out)
    unsafe0 = int((fk < k).sum())
    for _ in range(q + 1):
        bad = np.flatnonzero(fk < k)
        if bad.size == 0:
            break
        # choose, per record, the first key in ``order`` it still has
        has = ~np.isnan(out[bad][:, order])
        first = np.argmax(has, axis=1)
        rows = bad[has.any(axis=1)]
        cols = order[first[has.any(axis=1)]]
        out[rows, cols] = np.nan
        fk, _ = frequencies_wildcard(out)
    return out, unsafe0


def _give_back(orig: np.ndarray, out: np.ndarray, k: int, order: np.ndarray) -> None:
    """Give back suppressed values one by one wherever every record keeps at least k
    matches; ``out`` is updated in place.

    The values are visited once each, keys of most importance first (the reverse of
    ``order``), records in row order within a key. Restoring value v of record r in key
    j: the records that matched r keep matching it iff their key j is missing or v; the
    others lose one match, and r's count becomes the number of records that still match
    it. It is done iff that count is at least k and every record losing a match keeps at
    least k. Counts only fall during the pass, so a value refused once would be refused
    at the end too: no suppressed value left can be given back alone.

    Records are grouped by their combination (missing values included: a "pattern").
    The patterns compatible with a given one are looked up per missingness mask through
    hash indexes on the columns both have (built when first needed, kept up to date), so
    a step costs about the number of patterns it touches, not n. A pattern held by more
    than k records cannot refuse a give-back (its f_k is at least its count), so f_k is
    kept exactly for the patterns held by 1 to k records ("tracked"; computed afresh when
    a pattern enters that range), and the tracked patterns at f_k = k, the only ones that
    can refuse, have indexes of their own.
    """
    from operator import itemgetter
    from ..keytables import combo_frequencies, combo_table
    n, q = out.shape
    sup = np.argwhere(np.isnan(out) & ~np.isnan(orig))
    if sup.shape[0] == 0:
        return
    rank = np.empty(q, dtype=np.int64)
    rank[order] = np.arange(q)
    sup = sup[np.lexsort((sup[:, 0], -rank[sup[:, 1]]))]

    table = combo_table(out)
    fk_u, _ = combo_frequencies(table)
    rows = table["rows"]
    pats: list[tuple[int, ...]] = list(map(tuple, rows.tolist()))
    cnt: list[int] = table["count"].tolist()
    fk: list[int] = fk_u.astype(np.int64).tolist()     # exact where tracked
    pm: list[int] = ((rows >= 0) * (1 << np.arange(q))).sum(axis=1).tolist()  # present bits
    rec: list[int] = table["inverse"].tolist()          # each record's pattern
    pid = {p: i for i, p in enumerate(pats)}
    tracked = [c <= k for c in cnt]                      # invariant: 1 <= cnt <= k
    # families of patterns, listed per mask of present columns: 0 all, 1 the tight ones
    # (tracked with f_k == k; entries go stale and are checked on use), 2 the tracked ones
    family: list[dict[int, list[int]]] = [{}, {}, {}]
    member = [set(), set(), set()]                       # who is listed (no duplicates)
    getters: dict[int, Any] = {}
    index: dict[tuple[int, int, int], tuple[Any, dict[Any, list[int]]]] = {}
    built: dict[tuple[int, int], list[int]] = {}         # (family, m) -> the s indexed
    masks: list[int] = []

    def enter(f: int, i: int) -> None:
        if i in member[f]:
            return
        member[f].add(i)
        m = pm[i]
        if m not in family[f]:
            family[f][m] = []
            if f == 0:
                masks.append(m)
        family[f][m].append(i)
        p = pats[i]
        for s in built.get((f, m), ()):
            g, ix = index[(f, m, s)]
            ix.setdefault(g(p), []).append(i)

    def build(f: int, m: int, s: int) -> tuple[Any, dict[Any, list[int]]]:
        g = getters.get(s)
        if g is None:
            cols = [c for c in range(q) if s >> c & 1]
            g = itemgetter(*cols) if cols else (lambda p: ())
            getters[s] = g
        ix: dict[Any, list[int]] = {}
        for i in family[f].get(m, ()):
            ix.setdefault(g(pats[i]), []).append(i)
        e = index[(f, m, s)] = (g, ix)
        built.setdefault((f, m), []).append(s)
        return e

    empty: list[int] = []

    def count_compatible(p: tuple[int, ...], a: int) -> int:
        total = 0
        for m in masks:
            e = index.get((0, m, a & m)) or build(0, m, a & m)
            for i in e[1].get(e[0](p), empty):
                total += cnt[i]
        return total

    def track(i: int, f_i: int) -> None:
        tracked[i] = True
        fk[i] = f_i
        enter(2, i)
        if f_i == k:
            enter(1, i)

    for i, m in enumerate(pm):
        family[0].setdefault(m, []).append(i)
    masks.extend(family[0])
    member[0].update(range(len(pats)))
    for i in range(len(pats)):
        if tracked[i]:
            track(i, fk[i])

    given: list[int] = []
    values = orig[sup[:, 0], sup[:, 1]].astype(np.int64).tolist()
    for (r, j), v in zip(sup.tolist(), values):
        i0 = rec[r]
        p0 = pats[i0]
        a0 = pm[i0]
        bj = 1 << j
        p1 = p0[:j] + (v,) + p0[j + 1:]
        i1 = pid.get(p1)
        if i1 is not None and cnt[i1] > k:
            nk = -1                                      # at least cnt > k; not needed
        elif i1 is not None and tracked[i1]:
            nk = fk[i1]
        else:
            nk = count_compatible(p1, a0 | bj)
            if nk < k:
                continue
        if 0 <= nk < k:
            continue
        blocked = False
        fam1 = family[1]
        for m in masks:
            if m & bj and m in fam1:
                e = index.get((1, m, a0 & m)) or build(1, m, a0 & m)
                for i in e[1].get(e[0](p0), empty):
                    if tracked[i] and fk[i] == k and pats[i][j] != v:
                        blocked = True
                        break
                if blocked:
                    break
        if blocked:
            continue
        fam2 = family[2]
        for m in masks:
            if m & bj and m in fam2:
                e = index.get((2, m, a0 & m)) or build(2, m, a0 & m)
                for i in e[1].get(e[0](p0), empty):
                    if tracked[i] and pats[i][j] != v:
                        f = fk[i] - 1
                        fk[i] = f
                        if f == k:
                            enter(1, i)
        # move r from p0 to p1
        rec[r] = i1 if i1 is not None else len(pats)
        given.append(r * q + j)
        if i1 is None:
            i1 = len(pats)
            pats.append(p1)
            cnt.append(1)
            fk.append(nk)
            pm.append(a0 | bj)
            tracked.append(False)
            pid[p1] = i1
            enter(0, i1)
            track(i1, nk)
        else:
            cnt[i1] += 1
            if cnt[i1] == 1:
                track(i1, nk)                # its f_k is nk (computed above)
            elif cnt[i1] == k + 1:
                tracked[i1] = False
            # else its f_k is unchanged: it counted r already (through p0)
        cnt[i0] -= 1
        if cnt[i0] == 0:
            tracked[i0] = False
        elif cnt[i0] == k:
            track(i0, count_compatible(p0, a0))
    if given:
        flat = out.reshape(-1)          # out is C-contiguous (a copy made by _greedy)
        flat[given] = orig.reshape(-1)[given]



@register("suppress", param="k", kind="int", low=2, high=1e9, random=False,
          acts_on="categorical",
          options=("variables", "columns", "roles", "info", "importance"),
          allowed="an integer in [2, n]",
          description="local suppression of categorical key values until every key "
                      "combination is shared by >= k records (greedy, missing matches all)",
          reference="Templ, Kowarik and Meindl (2015), sdcMicro's localSuppression")
def suppress(X: np.ndarray, k: int, *, rng: np.random.Generator,
             categorical: Sequence[int] = (), variables: Sequence[str] | None = None,
             columns: Sequence[str] | None = None,
             roles: Mapping[str, Sequence[int]] | None = None,
             info: dict | None = None, importance: Sequence[int] | None = None) -> np.ndarray:
    """Local suppression. ``X`` (n, m); returns (n, m) with suppressed codes NaN."""
    check_suppress_k(int(k), X.shape[0])
    pos = masked_columns("suppress", X, categorical, variables, columns, roles)
    out = X.copy()
    sub, total, unsafe = suppress_greedy(X[:, pos], int(k), importance=importance)
    out[:, pos] = sub
    if info is not None:
        info.update(suppressed=total, unsafe=unsafe, bound=len(pos) * unsafe)
    return out

