"""Within-column ranks of files larger than memory, and the rank metrics of [CN].

Ranks come from an exact distributed sample sort, run for a group of columns
of a file at once:

1. *sample*: each record chunk returns the keys of records spread evenly
   over it; the client picks ``B - 1`` splitters per column, ``B`` =
   n / ``bucket_rows`` (option; default max(4 chunk_rows, 65536)), so every
   bucket holds about ``bucket_rows`` keys per column;
2. *partition*: each chunk tells each of its keys its bucket and cuts its keys
   into ``B`` pieces (one per bucket, in record order);
3. *bucket*: bucket ``b`` gathers its pieces from every chunk, sorts them and
   hands out global ranks (its offset is the number of keys in buckets
   ``< b``, known from the partition counts), cut back into pieces per chunk;
4. *finish*: each record chunk puts the ranks of its records together for the
   original and the masked file and returns integer totals; the sorted values
   of bucket ``b`` are paired with those of the other file's buckets covering
   the same ranks (order statistics, for EMD1).

No task holds more than a few chunks, and columns are sorted in groups, one
group after the other, so the data in flight stay within the ``sort_memory``
option (default 128 MiB) however large the file.

A key is the pair (value mapped to an order-preserving unsigned integer, tie
key), where the tie key is a 64-bit hash of (a per-column seed drawn from the
generator ``ctx.rng("rank_ties")``, shared by rMAE, brMAE and brMSE and by
both files, and the record's row number): ties are broken uniformly at random,
reproducibly, and independently of how the records are chunked; an unchanged
file gives exactly 0. All totals are integers (Python ints), so rank results
are bit-identical for any chunking and any cluster.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from ..errors import SdcInputError
from ..parallel import Runner, add_dicts, chunk_bounds, tree_reduce
from ._registry import MeasureContext, MetricResult, register

__all__ = ["value_keys", "key_values", "tie_keys", "distributed_sort", "rank_pass",
           "column_groups",
           "max_abs_rank_distance", "max_sq_rank_distance", "RANK_TIES"]

#: name of the generator that breaks rank ties (shared by rMAE, brMAE, brMSE)
RANK_TIES = "rank_ties"
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


def tie_keys(seed: int, start: int, stop: int) -> np.ndarray:
    """SplitMix64 hash of ``(seed, row)`` for rows ``start:stop``: i.i.d.-looking uint64."""
    with np.errstate(over="ignore"):
        z = np.uint64(seed) + np.arange(start, stop, dtype=np.uint64) * _GOLDEN
        z = (z ^ (z >> np.uint64(30))) * np.uint64(0xBF58476D1CE4E5B9)
        z = (z ^ (z >> np.uint64(27))) * np.uint64(0x94D049BB133111EB)
        return z ^ (z >> np.uint64(31))


def _chunk_keys(X: Any, start: int, stop: int, cols: tuple[int, ...], seeds: np.ndarray
                ) -> tuple[np.ndarray, np.ndarray]:
    """Value keys and tie keys (both cols x rows) of records ``start:stop``, columns ``cols``."""
    x = np.asarray(X[start:stop], dtype=np.float64)[:, list(cols)]
    kx = value_keys(x).T.copy()
    u = np.stack([tie_keys(int(s), start, stop) for s in seeds]) if len(seeds) else \
        np.empty((0, stop - start), dtype=np.uint64)
    return kx, u


def _sample_task(start: int, stop: int, X: Any, cols: tuple[int, ...], seeds: np.ndarray,
                 size: int) -> tuple[np.ndarray, np.ndarray]:
    """Keys of ``size`` records spread evenly over the chunk, per column."""
    rows = stop - start
    pick = np.unique(np.linspace(0, rows - 1, min(size, rows)).round().astype(np.int64))
    x = np.asarray(X[start:stop], dtype=np.float64)[pick][:, list(cols)]
    kx = value_keys(x).T.copy()
    u = np.stack([tie_keys(int(s_), start, stop)[pick] for s_ in seeds])
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
                    spk: np.ndarray, spu: np.ndarray) -> dict[str, Any]:
    """Cut a chunk's keys into one piece per bucket (per column, record order kept)."""
    kx, u = _chunk_keys(X, start, stop, cols, seeds)
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
                     bucket_rows: int | None = None) -> SortedFile:
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
    """
    bounds = chunk_bounds(n, chunk_rows)
    bucket_rows = int(bucket_rows or max(4 * chunk_rows, 65536))
    buckets = max(1, -(-n // bucket_rows))
    size = min(chunk_rows, max(64 * buckets, 256), 65536)
    samples = runner.gather([runner.submit(_sample_task, s, e, X, cols, seeds, size)
                             for s, e in bounds])
    spk, spu = _splitters(samples, buckets)
    spk_h, spu_h = runner.scatter(spk), runner.scatter(spu)
    parts = [runner.submit(_partition_task, s, e, X, cols, seeds, spk_h, spu_h)
             for s, e in bounds]
    counts = sum(runner.gather([runner.submit(_get, pt, "counts") for pt in parts]))
    offsets = np.concatenate([np.zeros((len(cols), 1), np.int64),
                              np.cumsum(counts, axis=1)[:, :-1]], axis=1)
    which = [runner.submit(_get, pt, "which") for pt in parts]
    bucket_h = [runner.submit(_bucket_task, offsets[:, b], n,
                              *[runner.submit(_get, pt, "pieces", b) for pt in parts])
                for b in range(buckets)]
    # only ``which`` and the buckets stay referenced: the pieces are freed once sorted
    return SortedFile(bounds, which, bucket_h, offsets, counts)


def _chunk_ranks(which: np.ndarray, *rank_pieces: list[np.ndarray]) -> np.ndarray:
    """Ranks (rows x cols) of one chunk's records from the pieces of every bucket."""
    p, rows = which.shape
    R = np.empty((rows, p), dtype=np.int64)
    for j in range(p):
        o = np.argsort(which[j], kind="stable")
        R[o, j] = np.concatenate([rp[j] for rp in rank_pieces])
    return R


def _rank_error_task(wa: np.ndarray, wb: np.ndarray, na: int, *pieces: Any) -> dict[str, Any]:
    """Integer totals of |r - r'| and (r - r')**2 per column for one record chunk."""
    ra = _chunk_ranks(wa, *pieces[:na])
    rb = _chunk_ranks(wb, *pieces[na:])
    d = np.abs(ra - rb)
    peak = int(d.max()) if d.size else 0
    if peak * peak * max(d.shape[0], 1) < 2**62:      # int64 cannot overflow
        sq = np.array([int(v) for v in (d * d).sum(axis=0)], dtype=object)
    else:
        sq = (d.astype(object) ** 2).sum(axis=0)
    return {"abs": np.array([int(v) for v in d.sum(axis=0)], dtype=object), "sq": sq}


def _bucket_ranks(bucket: dict, c: int) -> list[np.ndarray]:
    return bucket["ranks"][c]


def _bucket_column(bucket: dict, j: int) -> np.ndarray:
    return bucket["values"][j]


def _paired_l1(lo: int, a: np.ndarray, starts: list[int], *bs: np.ndarray) -> float:
    """sum |a_k - b_k| over the ranks lo .. lo + len(a) - 1 of one column."""
    hi = lo + a.size
    b = np.concatenate([v[max(lo - s, 0):max(min(hi - s, v.size), 0)]
                        for v, s in zip(bs, starts)])
    return float(np.sum(np.abs(a - b)))


def _sum(*xs: float) -> float:
    return float(np.sum(xs))


def _order_stat_l1(runner: Runner, A: SortedFile, B: SortedFile, j: int) -> Any:
    """Future of sum_k |x_(k) - x'_(k)| for sorted column ``j`` of both files.

    Bucket ``b`` of A holds the ranks ``[offset, offset + count)``; it is paired
    with the buckets of B whose rank ranges overlap it.
    """
    parts = []
    for b, bucket in enumerate(A.buckets):
        lo, size = int(A.offsets[j, b]), int(A.counts[j, b])
        if size == 0:
            continue
        hi = lo + size
        over = [c for c in range(len(B.buckets))
                if B.offsets[j, c] < hi and B.offsets[j, c] + B.counts[j, c] > lo]
        bs = [runner.submit(_bucket_column, B.buckets[c], j) for c in over]
        parts.append(runner.submit(_paired_l1, lo, runner.submit(_bucket_column, bucket, j),
                                   [int(B.offsets[j, c]) for c in over], *bs))
    return tree_reduce(runner, _sum, parts)


def _tie_seeds(ctx: MeasureContext) -> np.ndarray:
    """One tie-key seed per column, shared by both files.

    Sharing makes the tie-breaking a common random permutation of the
    records: records tied in both files keep their relative order, so an
    unchanged file gives exactly 0, while within each file ties are still
    ordered uniformly at random.
    """
    g = ctx.rng(RANK_TIES)
    return g.integers(0, 2**64, size=len(ctx.columns), dtype=np.uint64, endpoint=False)


def column_groups(n: int, p: int, memory: int) -> list[tuple[int, ...]]:
    """Columns sorted together so that a group's intermediate data fit ``memory`` bytes.

    A key costs about 64 bytes over both files while it moves (value and tie
    keys, bucket numbers, ranks and sorted values).
    """
    g = int(max(1, min(p, memory // max(64 * n, 1))))
    return [tuple(range(s, min(s + g, p))) for s in range(0, p, g)]


#: the options of the metrics computed from :func:`rank_pass`
RANK_OPTIONS = ("chunk_rows", "sort_memory", "bucket_rows")


def rank_pass(ctx: MeasureContext) -> dict[str, Any]:
    """Sort both files and reduce: per column sum |r - r'|, sum (r - r')**2 (Python ints)
    and sum_k |x_(k) - x'_(k)| (float). Cached; shared by rMAE, brMAE, brMSE and EMD1.

    Column groups are sorted one after the other (option ``sort_memory``), so
    the cluster never holds more than about ``sort_memory`` bytes of sort data.
    """
    def run() -> dict[str, Any]:
        from .infoloss import record_stats
        record_stats(ctx)                        # validates the data (NaN, shapes) first
        seeds = _tie_seeds(ctx)
        n, p = ctx.shape_original
        r = ctx.runner
        chunk = int(ctx.options["chunk_rows"])
        memory = int(ctx.options.get("sort_memory") or 128 * 2**20)
        out = {"abs": np.zeros(p, dtype=object), "sq": np.zeros(p, dtype=object),
               "l1": np.zeros(p)}
        for cols in column_groups(n, p, memory):
            kw = {"chunk_rows": chunk, "seeds": seeds[list(cols)],
                  "bucket_rows": ctx.options.get("bucket_rows")}
            A = distributed_sort(r, ctx.original, n, cols, **kw)
            B = distributed_sort(r, ctx.masked, n, cols, **kw)
            parts = []
            for c in range(len(A.bounds)):
                pa = [r.submit(_bucket_ranks, bk, c) for bk in A.buckets]
                pb = [r.submit(_bucket_ranks, bk, c) for bk in B.buckets]
                parts.append(r.submit(_rank_error_task, A.which[c], B.which[c], len(pa),
                                      *pa, *pb))
            err = tree_reduce(r, add_dicts, parts)
            l1 = [_order_stat_l1(r, A, B, j) for j in range(len(cols))]
            del parts, A, B
            got = r.gather([err, *l1])
            idx = list(cols)
            out["abs"][idx] = got[0]["abs"]
            out["sq"][idx] = got[0]["sq"]
            out["l1"][idx] = got[1:]
        return out
    return ctx.cached("rank_pass", run)


def max_abs_rank_distance(n: int) -> int:
    """Largest possible sum of |r - r'| over two rank vectors of 1..n: 2 sum_k (n - 2k + 1)."""
    k = n // 2
    return 2 * (k * (n + 1) - k * (k + 1))


def max_sq_rank_distance(n: int) -> int:
    """Largest possible sum of (r - r')**2: 2 sum_{k=1}^{K} (n - 2k + 1)**2, K = n // 2."""
    k = n // 2
    # sum (n+1-2k)^2 = K(n+1)^2 - 4(n+1)K(K+1)/2 + 4 K(K+1)(2K+1)/6
    s = k * (n + 1) ** 2 - 2 * (n + 1) * k * (k + 1) + (2 * k * (k + 1) * (2 * k + 1)) // 3
    return 2 * s


def _rank_metric(ctx: MeasureContext, which: str) -> MetricResult:
    n, p = ctx.shape_original
    if n < 2:
        raise SdcInputError(f"rank metrics need at least 2 records; got {n}")
    e = rank_pass(ctx)
    total_abs, total_sq = sum(int(v) for v in e["abs"]), sum(int(v) for v in e["sq"])
    if which == "rMAE":
        value = total_abs / (n * p)
    elif which == "brMAE":
        value = total_abs / (p * max_abs_rank_distance(n))
    else:
        value = total_sq / (p * max_sq_rank_distance(n))
    return MetricResult(float(value))


@register("rMAE", kind="loss", reference="[CN eq. 6]", random=True, options=RANK_OPTIONS,
          description="mean over all values of |rank - rank'| (within-column ranks, "
                      "ties at random)")
def rmae(ctx: MeasureContext) -> MetricResult:
    return _rank_metric(ctx, "rMAE")


@register("brMAE", kind="loss", reference="[CN eq. 8]", random=True, options=RANK_OPTIONS,
          description="sum |rank - rank'| over its maximum (fully reversed ranks): in [0, 1]")
def brmae(ctx: MeasureContext) -> MetricResult:
    return _rank_metric(ctx, "brMAE")


@register("brMSE", kind="loss", reference="[CN eq. 9]", random=True, options=RANK_OPTIONS,
          description="sum (rank - rank')**2 over its maximum (fully reversed ranks): in [0, 1]")
def brmse(ctx: MeasureContext) -> MetricResult:
    return _rank_metric(ctx, "brMSE")
