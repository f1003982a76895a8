"""Distance linkage blocked on categorical keys.

When a key set holds categorical columns, a query record is compared only
with the candidate records that have the same categories on all of them (its
block), by the distance on the numeric keys (z-scored, ranked, ... over the
whole file, exactly as without blocking). A query record whose block holds no
candidate, or whose categorical key is missing (suppressed), is not linked: it
counts in the denominator and earns no credit.

The blocks are the unit of work. Small blocks are brute-forced together in
tasks of at most ``small_pairs`` pairs; a block larger than that is linked by
:func:`~sdcdist.linkage.distance_drivers.link_top2` on its own rows, which
tiles it into pair blocks sized to the memory budget (a huge block is split,
never held whole). Credits are integer tie counts added in block order, so the
result never depends on the tiling or on the cluster.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from ..parallel import Runner, tree_reduce
from . import distance
from .distance_drivers import link_top2

__all__ = ["block_keys", "group_blocks", "blocked_link_top2", "max_codes"]


def max_codes(X: Any, cols: tuple[int, ...]) -> np.ndarray:
    """Task: the largest code of each of ``cols`` (-1 for an all-missing column)."""
    A = np.asarray(X[:, list(cols)], dtype=np.float64)
    if A.shape[0] == 0:
        return np.full(len(cols), -1, dtype=np.int64)
    with np.errstate(invalid="ignore"):
        m = np.nanmax(np.where(np.isnan(A), -1.0, A), axis=0)
    return m.astype(np.int64)


def block_keys(X: Any, cols: tuple[int, ...], radix: tuple[int, ...],
               lookups: Any = None) -> np.ndarray:
    """Task: one int64 block key per record from its codes in ``cols`` (-1 if any is missing).

    ``radix[j]`` is larger than every code of column j in both files; ``lookups``
    (optional, one per column, None for none) recode the codes first.
    """
    A = np.array(X[:, list(cols)], dtype=np.float64)
    if lookups is not None:
        from ..keytables import apply_lookup
        for j, lk in enumerate(lookups):
            A[:, j] = apply_lookup(A[:, j], lk)
    miss = np.isnan(A).any(axis=1)
    key = np.zeros(A.shape[0], dtype=np.int64)
    for j, r in enumerate(radix):
        key = key * int(r) + np.where(np.isnan(A[:, j]), 0, A[:, j]).astype(np.int64)
    key[miss] = -1
    return key


def group_blocks(keys: np.ndarray) -> dict[str, np.ndarray]:
    """Task: records by block: ``order`` (rows sorted by key, stable), and per block its
    ``key``, ``start`` in ``order`` and ``count``; missing keys (-1) left out."""
    keys = np.asarray(keys)
    order = np.argsort(keys, kind="stable")
    order = order[keys[order] >= 0]
    uk, start, count = np.unique(keys[order], return_index=True, return_counts=True)
    return {"order": order, "key": uk, "start": start.astype(np.int64),
            "count": count.astype(np.int64)}


def _summary(g: dict[str, np.ndarray]) -> dict[str, np.ndarray]:
    return {"key": g["key"], "count": g["count"]}


def _rows(g: dict[str, np.ndarray], b: int) -> np.ndarray:
    s = int(g["start"][b])
    return g["order"][s:s + int(g["count"][b])]


def _block_values(X: Any, g: dict[str, np.ndarray], b: int) -> np.ndarray:
    """Task: the rows of block ``b`` of a (transformed) file."""
    return np.ascontiguousarray(np.asarray(X)[_rows(g, b)])


def _local_truth(gq: dict, gc: dict, bq: int, bc: int, truth: np.ndarray, n_c: int
                 ) -> np.ndarray:
    """Task: for each query row of block ``bq``, its true candidate's position in block
    ``bc`` (-1 when absent from the file or from the block)."""
    pos = np.full(n_c, -1, dtype=np.int64)
    rc = _rows(gc, bc)
    pos[rc] = np.arange(rc.size)
    t = np.asarray(truth, dtype=np.int64)[_rows(gq, bq)]
    return np.where(t >= 0, pos[np.maximum(t, 0)], -1)


def _small_blocks(Q: np.ndarray, C: np.ndarray, gq: dict, gc: dict,
                  pairs: list[tuple[int, int]], truth: np.ndarray, n_c: int, metric: str
                  ) -> dict[str, np.ndarray]:
    """Task: brute-force linkage inside each of several small blocks; tie counts."""
    first = [np.zeros(2, np.int64)]
    second = [np.zeros(2, np.int64)]
    for bq, bc in pairs:
        Qb = np.asarray(Q)[_rows(gq, bq)]
        Cb = np.asarray(C)[_rows(gc, bc)]
        t = _local_truth(gq, gc, bq, bc, truth, n_c)
        top = distance.block_top2(distance.pair_distances(Qb, Cb, metric))
        f, s = distance.top2_link_credit(top, distance.true_distances(Qb, Cb, t, metric))
        first.append(distance.credit_counts(f))
        second.append(distance.credit_counts(s))
    return {"first": distance.add_counts(*first), "second": distance.add_counts(*second)}


def _add(*parts: dict[str, np.ndarray]) -> dict[str, np.ndarray]:
    return {k: distance.add_counts(*[p[k] for p in parts]) for k in ("first", "second")}


def blocked_link_top2(runner: Runner, Q: Any, C: Any, qkeys: Any, ckeys: Any, n_q: int,
                      n_c: int, width: int, *, truth: Any, metric: str = "sqeuclidean",
                      block_memory: int = 64 * 2**20, block_rows: tuple[int, int] | None = None,
                      method: str = "index", small_pairs: int | None = None
                      ) -> dict[str, Any]:
    """Nearest-neighbour linkage within blocks of equal categorical keys, exact.

    Parameters
    ----------
    Q, C : array handles, shapes (n_q, width), (n_c, width)
        Transformed numeric key columns (width may be 0: categories only, every
        candidate of the block is then tied at distance 0).
    qkeys, ckeys : array handles of int64, shapes (n_q,), (n_c,)
        Block key of each record (:func:`block_keys`; -1: missing, never linked).
    truth : array handle of int, shape (n_q,)
        Row of each query's true candidate (-1 if absent).
    small_pairs : int, optional
        Blocks with at most this many pairs are brute-forced, several per task;
        larger ones are tiled by :func:`link_top2`. Default: ``block_memory / 8``.

    Returns
    -------
    dict
        As :func:`link_top2`: ``first``, ``second`` (1/t credits), ``first_hits``,
        ``second_hits``, ``n`` (= n_q), and ``blocks``, ``split_blocks``,
        ``unblocked`` (query rows with no candidate block).
    """
    small = int(small_pairs if small_pairs is not None else max(block_memory // 8, 1))
    gq = runner.task(group_blocks, qkeys)
    gc = runner.task(group_blocks, ckeys)
    sq = runner.result(runner.task(_summary, gq))
    sc = runner.result(runner.task(_summary, gc))
    common, iq, ic = np.intersect1d(sq["key"], sc["key"], assume_unique=True,
                                    return_indices=True)
    parts: list[Any] = []
    batch: list[tuple[int, int]] = []
    load = 0
    big: list[tuple[int, int]] = []
    for bq, bc in zip(iq.tolist(), ic.tolist()):
        pairs = int(sq["count"][bq]) * int(sc["count"][bc])
        if pairs > small:
            big.append((bq, bc))
            continue
        if batch and load + pairs > small:
            parts.append(runner.task(_small_blocks, Q, C, gq, gc, batch, truth, n_c, metric))
            batch, load = [], 0
        batch.append((bq, bc))
        load += pairs
    if batch:
        parts.append(runner.task(_small_blocks, Q, C, gq, gc, batch, truth, n_c, metric))
    first = [np.zeros(2, np.int64)]
    second = [np.zeros(2, np.int64)]
    if parts:
        tot = runner.result(tree_reduce(runner, _add, parts))
        first.append(tot["first"])
        second.append(tot["second"])
    for bq, bc in big:
        nq, nc = int(sq["count"][bq]), int(sc["count"][bc])
        r = link_top2(runner, runner.task(_block_values, Q, gq, bq),
                      runner.task(_block_values, C, gc, bc), nq, nc, width, metric=metric,
                      truth=runner.task(_local_truth, gq, gc, bq, bc, truth, n_c),
                      block_memory=block_memory, block_rows=block_rows,
                      method="brute" if width == 0 else method, counts=True)
        first.append(r["first_counts"])
        second.append(r["second_counts"])
    f, s = distance.add_counts(*first), distance.add_counts(*second)
    matched = int(sum(int(sq["count"][b]) for b in iq.tolist()))
    return {"first": distance.credit_total(f), "second": distance.credit_total(s),
            "first_hits": distance.hit_total(f), "second_hits": distance.hit_total(s),
            "n": n_q, "blocks": int(common.size), "split_blocks": len(big),
            "unblocked": n_q - matched}
