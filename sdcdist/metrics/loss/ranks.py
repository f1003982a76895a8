"""Within-column ranks of files larger than memory, and the rank metrics of [CN].

Ranks come from the exact distributed sample sort of
:mod:`sdcdist.parallel.sort`, run for a group of columns of both files at once
(buckets of ``bucket_rows`` keys per column; option, default
max(4 chunk_rows, 65536)). Then each record chunk puts the ranks of its
records together for the original and the masked file and returns integer
totals; the sorted values of bucket ``b`` are paired with those of the other
file's buckets covering the same ranks (order statistics, for EMD1).

Columns are sorted in groups, one group after the other, so the data in
flight stay within the ``sort_memory`` option (default 128 MiB) however large
the file.

Ties are broken by tie keys hashed from a per-column seed drawn from the
generator ``ctx.rng("rank_ties")``, shared by rMAE, brMAE and brMSE and by
both files, and a hash of the record's values in both files (the pair of its
original and masked rows): uniformly at random, reproducibly, and independently
of how the records are chunked or ordered; an unchanged file gives exactly 0.
All totals are integers (Python ints), so rank results are bit-identical for
any chunking, any row order and any cluster.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from ...errors import count_error
from ...parallel import Runner, add_dicts, map_reduce, tree_reduce
from ...parallel.sort import SortedFile, chunk_ranks, distributed_sort
from .._registry import MeasureContext, MetricResult, register
from ..content import row_hashes
from ..exactsum import exact_sums, to_fraction

__all__ = ["rank_pass", "column_groups", "max_abs_rank_distance", "max_sq_rank_distance",
           "RANK_TIES"]

#: name of the generator that breaks rank ties (shared by rMAE, brMAE, brMSE)
RANK_TIES = "rank_ties"


def _rank_error_task(wa: np.ndarray, wb: np.ndarray, na: int, *pieces: Any) -> dict[str, Any]:
    """Integer totals of |r - r'| and (r - r')**2 per column for one record chunk."""
    ra = chunk_ranks(wa, *pieces[:na])
    rb = chunk_ranks(wb, *pieces[na:])
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


def _paired_l1(lo: int, a: np.ndarray, starts: list[int], *bs: np.ndarray) -> int:
    """sum |a_k - b_k| over the ranks lo .. lo + len(a) - 1 of one column, exact (a Python
    int in units 2**-SCALE): the same total whatever the buckets' bounds."""
    hi = lo + a.size
    b = np.concatenate([v[max(lo - s, 0):max(min(hi - s, v.size), 0)]
                        for v, s in zip(bs, starts)])
    return int(exact_sums(np.abs(a - b)[:, None])[0])


def _sum(*xs: int) -> int:
    return sum(int(x) for x in xs)


def _pair_hashes(start: int, stop: int, X: Any, Y: Any) -> dict[str, Any]:
    """A hash of each record's original and masked values (the records' tie ids)."""
    return {"h": [row_hashes(np.hstack([np.asarray(X[start:stop], dtype=np.float64),
                                        np.asarray(Y[start:stop], dtype=np.float64)]))]}


def _cat(*parts: dict[str, Any]) -> dict[str, Any]:
    return {"h": [x for p in parts for x in p["h"]]}


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
        bs = [runner.task(_bucket_column, B.buckets[c], j) for c in over]
        parts.append(runner.task(_paired_l1, lo, runner.task(_bucket_column, bucket, j),
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
    and sum_k |x_(k) - x'_(k)| (the correctly rounded float of its exact value). Cached; shared by rMAE, brMAE, brMSE and EMD1.

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
        # ties broken by a hash of each record's values in both files, not its row number
        h = map_reduce(r, _pair_hashes, _cat, [ctx.original, ctx.masked], n, chunk_rows=chunk)
        ids = r.share(np.concatenate(h["h"]) if h["h"] else np.zeros(0, np.uint64))
        for cols in column_groups(n, p, memory):
            kw = {"chunk_rows": chunk, "seeds": seeds[list(cols)],
                  "bucket_rows": ctx.options.get("bucket_rows"), "tie_ids": ids}
            A = distributed_sort(r, ctx.original, n, cols, **kw)
            B = distributed_sort(r, ctx.masked, n, cols, **kw)
            parts = []
            for c in range(len(A.bounds)):
                pa = [r.task(_bucket_ranks, bk, c) for bk in A.buckets]
                pb = [r.task(_bucket_ranks, bk, c) for bk in B.buckets]
                parts.append(r.task(_rank_error_task, A.which[c], B.which[c], len(pa),
                                      *pa, *pb))
            err = tree_reduce(r, add_dicts, parts)
            l1 = [_order_stat_l1(r, A, B, j) for j in range(len(cols))]
            del parts, A, B
            got = r.result([err, *l1])
            idx = list(cols)
            out["abs"][idx] = got[0]["abs"]
            out["sq"][idx] = got[0]["sq"]
            out["l1"][idx] = [float(to_fraction(v)) for v in got[1:]]
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
        raise count_error("The file measured by the rank metrics", "at least 2", "records", n)
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
          unit="ranks",
          description="mean over all values of |rank - rank'| (within-column ranks, "
                      "ties at random)")
def rmae(ctx: MeasureContext) -> MetricResult:
    return _rank_metric(ctx, "rMAE")


@register("brMAE", kind="loss", reference="[CN eq. 8]", random=True, options=RANK_OPTIONS,
          unit="fraction of the largest possible (0 to 1)",
          description="sum |rank - rank'| over its maximum (fully reversed ranks): in [0, 1]")
def brmae(ctx: MeasureContext) -> MetricResult:
    return _rank_metric(ctx, "brMAE")


@register("brMSE", kind="loss", reference="[CN eq. 9]", random=True, options=RANK_OPTIONS,
          unit="fraction of the largest possible (0 to 1)",
          description="sum (rank - rank')**2 over its maximum (fully reversed ranks): in [0, 1]")
def brmse(ctx: MeasureContext) -> MetricResult:
    return _rank_metric(ctx, "brMSE")
