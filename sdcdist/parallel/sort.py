"""An exact distributed sample sort of the columns of a file larger than memory.

Run for a group of columns of a file at once:

1. *sample*: each record chunk returns the keys of records spread evenly
   over it; the client picks ``B - 1`` splitters per column, ``B`` =
   n / ``bucket_rows``, so every bucket holds about ``bucket_rows`` keys per
   column;
2. *partition*: each chunk tells each of its keys its bucket and cuts its keys
   into ``B`` pieces (one per bucket, in record order);
3. *bucket*: bucket ``b`` gathers its pieces from every chunk, sorts them and
   hands out global ranks (its offset is the number of keys in buckets
   ``< b``, known from the partition counts), cut back into pieces per chunk,
   and keeps its sorted values.

The result (:class:`SortedFile`) holds handles: per chunk, the bucket of each
of its keys; per bucket, the ranks cut per chunk and the sorted values.
:func:`chunk_ranks` puts the ranks of a chunk's records back together.

A key is the pair (value mapped to an order-preserving unsigned integer by
:func:`value_keys`, tie key), where the tie key is a 64-bit hash of (a
per-column seed, the record's row number, or the record's id when the caller gives
``tie_ids``, e.g. a hash of its values) (:func:`tie_keys`): ties are broken
uniformly at random, reproducibly, and independently of how the records are
chunked (and, with ids that are content hashes, of the records' order). No task holds more than a few chunks.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from .reduce import chunk_bounds
from .runner import Runner

__all__ = ["value_keys", "key_values", "tie_keys", "distributed_sort", "SortedFile",
           "chunk_ranks"]

_GOLDEN = np.uint64(0x9E3779B97F4A7C15)
_SIGN = np.uint64(1 << 63)


def value_keys(x: np.ndarray) -> np.ndarray:
    """Map float64 values to uint64 with the same order (-0.0 and 0.0 map alike)."""
    b = (np.asarray(x, dtype=np.float64) + 0.0).view(np.uint64)
    return np.where(b & _SIGN, ~b, b | _SIGN)


def key_values(k: np.ndarray) -> np.ndarray:
    """Inverse of :func:`value_keys`."""
    k = np.asarray(k, dtype=np.uint64)
    return np.where(k & _SIGN, k & ~_SIGN, ~k).view(np.float64)


def tie_keys(seed: int, start: int, stop: int, ids: np.ndarray | None = None) -> np.ndarray:
    """SplitMix64 hash of ``(seed, row)`` for rows ``start:stop``: i.i.d.-looking uint64;
    with ``ids`` (n,), of ``(seed, ids[row])``."""
    rows = (np.arange(start, stop, dtype=np.uint64) if ids is None
            else np.asarray(ids[start:stop], dtype=np.uint64))
    with np.errstate(over="ignore"):
        z = np.uint64(seed) + rows * _GOLDEN
        z = (z ^ (z >> np.uint64(30))) * np.uint64(0xBF58476D1CE4E5B9)
        z = (z ^ (z >> np.uint64(27))) * np.uint64(0x94D049BB133111EB)
        return z ^ (z >> np.uint64(31))


def _chunk_keys(X: Any, start: int, stop: int, cols: tuple[int, ...], seeds: np.ndarray,
                ids: np.ndarray | None = None) -> tuple[np.ndarray, np.ndarray]:
    """Value keys and tie keys (both cols x rows) of records ``start:stop``, columns ``cols``."""
    x = np.asarray(X[start:stop], dtype=np.float64)[:, list(cols)]
    kx = value_keys(x).T.copy()
    u = np.stack([tie_keys(int(s), start, stop, ids) for s in seeds]) if len(seeds) else \
        np.empty((0, stop - start), dtype=np.uint64)
    return kx, u


def _sample_task(start: int, stop: int, X: Any, cols: tuple[int, ...], seeds: np.ndarray,
                 size: int, ids: np.ndarray | None = None) -> tuple[np.ndarray, np.ndarray]:
    """Keys of ``size`` records spread evenly over the chunk, per column."""
    rows = stop - start
    pick = np.unique(np.linspace(0, rows - 1, min(size, rows)).round().astype(np.int64))
    x = np.asarray(X[start:stop], dtype=np.float64)[pick][:, list(cols)]
    kx = value_keys(x).T.copy()
    u = np.stack([tie_keys(int(s_), start, stop, ids)[pick] for s_ in seeds])
    return kx, u


def _splitters(samples: list[tuple[np.ndarray, np.ndarray]], buckets: int
               ) -> tuple[np.ndarray, np.ndarray]:
    """``buckets - 1`` splitter keys per column from the gathered samples."""
    sk = np.concatenate([s[0] for s in samples], axis=1)
    su = np.concatenate([s[1] for s in samples], axis=1)
    m = sk.shape[1]
    pos = (np.arange(1, buckets) * m) // buckets
    out_k = np.empty((sk.shape[0], buckets - 1), dtype=np.uint64)
    out_u = np.empty_like(out_k)
    for j in range(sk.shape[0]):
        o = np.lexsort((su[j], sk[j]))
        out_k[j], out_u[j] = sk[j, o[pos]], su[j, o[pos]]
    return out_k, out_u


def _bucket_of(kx: np.ndarray, u: np.ndarray, spk: np.ndarray, spu: np.ndarray) -> np.ndarray:
    """Number of splitter keys strictly below each key (its bucket), for one column.

    Keys compare by value key, then tie key; splitters are sorted that way.
    """
    lo = np.searchsorted(spk, kx, side="left")
    hi = np.searchsorted(spk, kx, side="right")
    out = lo.astype(np.int64)
    tied = np.flatnonzero(hi > lo)               # value equal to some splitters' value
    if tied.size:
        run = hi[tied] - lo[tied]
        for t in range(int(run.max())):
            ok = t < run
            idx = tied[ok]
            out[idx] += spu[lo[idx] + t] < u[idx]
    return out


def _partition_task(start: int, stop: int, X: Any, cols: tuple[int, ...], seeds: np.ndarray,
                    spk: np.ndarray, spu: np.ndarray, ids: np.ndarray | None = None
                    ) -> dict[str, Any]:
    """Cut a chunk's keys into one piece per bucket (per column, record order kept)."""
    kx, u = _chunk_keys(X, start, stop, cols, seeds, ids)
    p, buckets = kx.shape[0], spk.shape[1] + 1
    # small bucket numbers let numpy's stable argsort use radix sort
    which = np.empty(kx.shape, dtype=np.int16 if buckets < 2**15 else np.int32)
    pieces: list[list[tuple[np.ndarray, np.ndarray]]] = [[] for _ in range(buckets)]
    counts = np.zeros((p, buckets), dtype=np.int64)
    for j in range(p):
        b = _bucket_of(kx[j], u[j], spk[j], spu[j])
        which[j] = b
        counts[j] = np.bincount(b, minlength=buckets)
        o = np.argsort(which[j], kind="stable")
        cuts = np.cumsum(counts[j])[:-1]
        for bk, idx in enumerate(np.split(o, cuts)):
            pieces[bk].append((kx[j, idx], u[j, idx]))
    return {"which": which, "pieces": pieces, "counts": counts}


def _get(d: dict, key: str, i: int | None = None) -> Any:
    return d[key] if i is None else d[key][i]


def _bucket_task(offsets: np.ndarray, n: int, *pieces: list[tuple[np.ndarray, np.ndarray]]
                 ) -> dict[str, Any]:
    """Sort one bucket: global ranks cut back per chunk, and the sorted values."""
    p = len(pieces[0])
    rank_dtype = np.int32 if n < 2**31 - 1 else np.int64
    ranks: list[list[np.ndarray]] = [[None] * p for _ in pieces]  # type: ignore[list-item]
    values: list[np.ndarray] = []
    for j in range(p):
        kx = np.concatenate([pc[j][0] for pc in pieces])
        u = np.concatenate([pc[j][1] for pc in pieces])
        # order by (value key, tie key): sort by tie key, then stably by value key
        # (same result as np.lexsort((u, kx)), faster)
        o = np.argsort(u, kind="stable")
        o = o[np.argsort(kx[o], kind="stable")]
        r = np.empty(kx.size, dtype=rank_dtype)
        r[o] = offsets[j] + 1 + np.arange(kx.size, dtype=rank_dtype)
        cuts = np.cumsum([pc[j][0].size for pc in pieces])[:-1]
        for c, part in enumerate(np.split(r, cuts)):
            ranks[c][j] = part
        values.append(key_values(kx[o]))
    return {"ranks": ranks, "values": values}


class SortedFile:
    """Handles of a distributed sort of some columns of one file (futures on the cluster)."""

    def __init__(self, bounds: list[tuple[int, int]], which: list[Any], buckets: list[Any],
                 offsets: np.ndarray, counts: np.ndarray):
        self.bounds = bounds
        self.which = which          # per chunk: (cols, rows) bucket of each key
        self.buckets = buckets      # per bucket: {"ranks", "values"}
        self.offsets = offsets      # (cols, B) rank offset of each bucket per column
        self.counts = counts        # (cols, B) keys per bucket per column


def distributed_sort(runner: Runner, X: Any, n: int, cols: tuple[int, ...], *,
                     chunk_rows: int, seeds: np.ndarray,
                     bucket_rows: int | None = None, tie_ids: Any = None) -> SortedFile:
    """Exact within-column ranks (1..n, ties by tie keys) of columns ``cols`` of file ``X``.

    Parameters
    ----------
    runner : Runner
    X : array handle (n, p)
    cols : tuple of int
        Columns to sort (each one independently).
    chunk_rows : int
        Records per chunk.
    seeds : uint64 array (len(cols),)
        One tie-key seed per sorted column.
    bucket_rows : int, optional
        Target keys per bucket and column (default ``max(4 * chunk_rows, 65536)``):
        fewer, larger buckets mean fewer tasks.
    tie_ids : array handle (n,) of uint64, optional
        Each record's id in the tie keys instead of its row number.

    Returns
    -------
    SortedFile
        Handles; ``chunk_ranks(result(which[c]), *[result(b)["ranks"][c] for b in
        buckets])`` are the ranks of chunk ``c``'s records, and
        ``result(buckets[b])["values"][j]`` the sorted values of column ``j`` in
        bucket ``b``.
    """
    bounds = chunk_bounds(n, chunk_rows)
    bucket_rows = int(bucket_rows or max(4 * chunk_rows, 65536))
    buckets = max(1, -(-n // bucket_rows))
    size = min(chunk_rows, max(64 * buckets, 256), 65536)
    samples = runner.result([runner.task(_sample_task, s, e, X, cols, seeds, size, tie_ids)
                             for s, e in bounds])
    spk, spu = _splitters(samples, buckets)
    spk_h, spu_h = runner.share(spk), runner.share(spu)
    parts = [runner.task(_partition_task, s, e, X, cols, seeds, spk_h, spu_h, tie_ids)
             for s, e in bounds]
    counts = sum(runner.result([runner.task(_get, pt, "counts") for pt in parts]))
    offsets = np.concatenate([np.zeros((len(cols), 1), np.int64),
                              np.cumsum(counts, axis=1)[:, :-1]], axis=1)
    which = [runner.task(_get, pt, "which") for pt in parts]
    bucket_h = [runner.task(_bucket_task, offsets[:, b], n,
                            *[runner.task(_get, pt, "pieces", b) for pt in parts])
                for b in range(buckets)]
    # only ``which`` and the buckets stay referenced: the pieces are freed once sorted
    return SortedFile(bounds, which, bucket_h, offsets, counts)


def chunk_ranks(which: np.ndarray, *rank_pieces: list[np.ndarray]) -> np.ndarray:
    """Ranks (rows x cols) of one chunk's records from the pieces of every bucket."""
    p, rows = which.shape
    R = np.empty((rows, p), dtype=np.int64)
    for j in range(p):
        o = np.argsort(which[j], kind="stable")
        R[o, j] = np.concatenate([rp[j] for rp in rank_pieces])
    return R
