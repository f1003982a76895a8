"""Special uniques: SUDA2's minimal sample uniques, SUDA and DIS-SUDA scores.

A record is a *sample unique* on a set S of key columns when no other record of
the released file has its values on S. S is a *minimal sample unique* (MSU) of
the record when, moreover, the record is not unique on any proper subset of S
(uniqueness is monotone, so it suffices that it is not unique on any S minus one
column). A record with small MSUs is a *special unique*: an intruder needs few
of its key values to single it out. Definitions and conventions follow sdcMicro's
``suda2`` (Manning, Haglin and Keane 2008; Elliot et al. 2002), on the
categorical key columns of the masked (released) file:

- a missing key value (NaN, or the code of the option ``suda_missing``) is never
  part of an MSU, and matches no value of another record;
- SUDA score of a record: Σ over its MSUs S of w(|S|), with w(k) = (m - k)! for
  m = max(key columns, 3) (``suda_original_scores`` true, sdcMicro's default, from
  Elliot et al.), or w(k) = (2^(m-k) - 1) k! (m-k)! / m! (false: the IHSN
  program's scores); sdcMicro pads one or two keys with constant columns, hence the 3;
- DIS-SUDA score of a record with score s > 0 (0 otherwise), with U sdcMicro's count of
  sample uniques on all keys (:func:`hash_uniques`), P twice the number of key combinations held by
  exactly two records, f the sampling fraction (option ``suda_dis_fraction``,
  default 0.01), Q = 1 + (8 - m) / 20 and A = Σ_r s_r^-Q over the records with a
  positive score: D = U f / (U f + P (1 - f)) and
  dis = 1 / (1 + (U / D - U) / (s^Q A)), D, Q and U / D - U in single precision
  as sdcMicro computes them;
- MSUs are searched up to ``suda_max_size`` columns (default: all, as sdcMicro);
  the weights stay (m - k)!, so a smaller maximum leaves out the MSUs larger than
  it (the smallest weights) and never changes the others.

How it runs. A record-chunk reduction (:func:`sdcdist.parallel.map_reduce`) builds the
table of distinct key combinations with their record counts (as the frequency
metrics); only combinations held by one record can have MSUs. The search for them
(:func:`~sdcdist.metrics.risk.msu.msu_search`, level by level over the key subsets with
SUDA2's pruning, one task per batch of subsets) counts, in integers, the MSUs of each
size of each sample unique. Everything is integer until the scores, which the client
computes in a fixed order, so every figure is the same bit for bit for any chunking,
batching and worker count.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from fractions import Fraction
from typing import Any

import numba
import numpy as np

from ...errors import SdcInputError, column_positions
from ...keytables import combo_table, merge_tables, unpack_keys
from ...parallel import Runner, map_reduce
from .._registry import MeasureContext, MetricResult, register
from ..categorical_keys import frequency_keys
from .msu import KEY_LIMIT, MAX_SUBSETS, msu_search

__all__ = ["MAX_SUBSETS", "hash_uniques", "suda_weights", "msu_search", "suda_scores",
           "suda2_records", "suda_summary", "MSU_SIZES"]

#: the MSU sizes with their own count metric (msu1, msu2, msu3); the others are in info
MSU_SIZES = (1, 2, 3)

def suda_weights(m: int, *, original_scores: bool = True) -> np.ndarray:
    """The weight w(k) of an MSU of k columns, k = 0..m (w(0) = 0), as sdcMicro's suda2.

    ``m`` is the number of key columns (sdcMicro pads it to at least 3).
    """
    m = max(int(m), 3)
    w = np.zeros(m + 1)
    for k in range(1, m + 1):
        if original_scores:
            w[k] = float(math.factorial(m - k))
        else:
            w[k] = float(Fraction((2 ** (m - k) - 1) * math.factorial(k)
                                  * math.factorial(m - k), math.factorial(m)))
    return w


def suda_scores(counts: np.ndarray, n_keys: int, uniques: int, pairs: int, *,
                dis_fraction: float = 0.01, original_scores: bool = True
                ) -> tuple[np.ndarray, np.ndarray]:
    """SUDA and DIS-SUDA scores from the MSU counts by size.

    Parameters
    ----------
    counts : int ndarray, shape (K + 1, r)
        MSUs of size k of each of r records (row 0 unused).
    n_keys : int
        Key columns m.
    uniques : int
        Records unique on all keys (U).
    pairs : int
        Records whose key combination is held by exactly two records (P).
    dis_fraction, original_scores
        As sdcMicro's ``DisFraction`` and ``original_scores``.

    Returns
    -------
    score, dis : float ndarray, shape (r,)
    """
    m = max(int(n_keys), 3)
    w = suda_weights(n_keys, original_scores=original_scores)
    score = np.zeros(counts.shape[1])
    for k in range(1, counts.shape[0]):
        score += counts[k] * w[k]
    f32 = np.float32
    f, U, P = f32(dis_fraction), f32(uniques), f32(pairs)
    dis = np.zeros_like(score)
    pos = score > 0
    if not pos.any():
        return score, dis
    with np.errstate(divide="ignore", invalid="ignore"):
        D = U * f / (U * f + P * (f32(1.0) - f))
        t = float(f32(U / D) - U)
    Q = float(f32(1.0) + (f32(8.0) - f32(m)) / f32(20.0))
    sq = score[pos] ** Q
    A = float(np.cumsum(1.0 / sq)[-1])       # in record order, as sdcMicro
    dis[pos] = 1.0 / (1.0 + t / (sq * A))
    return score, dis


def hash_uniques(rows: np.ndarray, count: np.ndarray, missing: float | None = None) -> int:
    """sdcMicro's count U of sample uniques: the records alone in their 16-bit hash bucket.

    sdcMicro's suda2 counts as unique only the records that share their bucket of a 16-bit
    rotate-and-add hash of the key codes with no other record (a unique sharing its bucket
    is missed). U enters the DIS-SUDA score only through single-precision rounding (in exact
    arithmetic U / D - U = P (1 - f) / f), so this count makes the scores equal sdcMicro's to
    the last bit. ``rows`` (D, q) codes (-1 missing, hashed as ``missing``, default -999),
    padded with constant columns of 1 to three columns as sdcMicro does.
    """
    rows = np.asarray(rows, dtype=np.int64)
    if rows.shape[0] == 0:
        return 0
    miss = -999 if missing is None else int(missing)
    V = np.where(rows < 0, miss, rows)
    if V.shape[1] < 3:
        V = np.column_stack([V] + [np.ones(V.shape[0], np.int64)] * (3 - V.shape[1]))
    h = np.zeros(V.shape[0], np.int64)
    for j in range(V.shape[1]):
        carry = (h >> 15) & 1
        h = ((h << 1) + V[:, j] + carry) & 0xFFFF
    bucket = np.bincount(h, weights=count, minlength=1 << 16)
    return int(((count == 1) & (bucket[h] == 1)).sum())


@numba.njit(cache=True, nogil=True)
def _pack_chunk(block: np.ndarray, keys: np.ndarray, missing: float, use_missing: bool
                ) -> tuple:
    """One int64 key per record of its codes on the columns ``keys`` of ``block`` (n, p),
    mixed-radix on the codes + 1 (a missing value, NaN or ``missing``, is 0), so keys sort
    as the rows of codes do. Returns the keys, the radices, and how many values are not
    codes 0, 1, 2, ... (below 2**53); the keys are all 0 when the key space exceeds 2**62."""
    n, q = block.shape[0], keys.size
    radix = np.empty(q, np.int64)
    for t in range(q):
        radix[t] = 2
    bad = 0
    for i in range(n):
        for t in range(q):
            v = block[i, keys[t]]
            if v != v or (use_missing and v == missing):
                continue
            if v >= 0 and v < 9007199254740992.0 and v == np.floor(v):
                if np.int64(v) + 2 > radix[t]:
                    radix[t] = np.int64(v) + 2
            else:
                bad += 1
    key = np.empty(n, np.int64)
    for i in range(n):
        key[i] = 0
    space = np.int64(1)
    for t in range(q):
        if space > KEY_LIMIT // radix[t]:
            return key, radix, bad, False
        space *= radix[t]
    if bad:
        return key, radix, bad, True
    for i in range(n):
        k = np.int64(0)
        for t in range(q):
            v = block[i, keys[t]]
            c = np.int64(0)
            if not (v != v or (use_missing and v == missing)):
                c = np.int64(v) + 1
            k = k * radix[t] + c
        key[i] = k
    return key, radix, bad, True


def _table_chunk(start: int, stop: int, X: Any, keys: Sequence[int], missing: float | None
                 ) -> dict[str, Any]:
    """The key-combination table of records ``start:stop`` from one pass over the block:
    ``key`` its distinct packed keys (increasing), ``radix`` their radices and ``count``
    their records (:func:`_merge_chunks` merges such tables, :func:`_chunks_table` turns
    one into :func:`combo_table`'s rows and counts). Where the key space exceeds int64,
    combo_table's table (without the inverse)."""
    block = np.asarray(X[start:stop], dtype=np.float64)
    key, radix, bad, fits = _pack_chunk(block, np.asarray(keys, np.int64),
                                        np.nan if missing is None else float(missing),
                                        missing is not None)
    if bad or not fits:                # refused by combo_table, or too many combinations
        block = block[:, list(keys)]
        if missing is not None:
            block[block == missing] = np.nan
        t = combo_table(block)
        t.pop("inverse")
        return t
    uk, count = np.unique(key, return_counts=True)
    return {"key": uk, "radix": radix, "count": count.astype(np.int64)}


@numba.njit(cache=True, nogil=True)
def _repack(key: np.ndarray, radix: np.ndarray, to: np.ndarray) -> np.ndarray:
    """Packed keys with radices ``radix`` re-packed with the radices ``to`` (each at least
    as large: the same rows, the same order)."""
    out = np.empty(key.size, np.int64)
    digits = np.empty(radix.size, np.int64)
    for i in range(key.size):
        rest = key[i]
        for t in range(radix.size - 1, -1, -1):
            digits[t] = rest % radix[t]
            rest //= radix[t]
        k = np.int64(0)
        for t in range(radix.size):
            k = k * to[t] + digits[t]
        out[i] = k
    return out


def _as_rows(t: dict[str, Any]) -> dict[str, Any]:
    if "key" not in t:
        return t
    count = t["count"]
    return {"rows": unpack_keys(t["key"], t["radix"]), "count": count,
            "weight": count.astype(np.float64)}


def _merge_chunks(*tables: dict[str, Any]) -> dict[str, Any]:
    """``combine`` of :func:`_table_chunk`'s tables: the packed keys re-packed with the
    largest radices and merged (merge_tables when a table or the merged key space does not
    fit int64)."""
    to = np.max([t["radix"] for t in tables if "key" in t], axis=0) \
        if all("key" in t for t in tables) else None
    if to is None or math.prod(int(r) for r in to) > KEY_LIMIT:
        return merge_tables(*[_as_rows(t) for t in tables])
    key = np.concatenate([t["key"] if np.array_equal(t["radix"], to)
                          else _repack(t["key"], t["radix"], to) for t in tables])
    uk, inv = np.unique(key, return_inverse=True)
    count = np.bincount(inv.reshape(-1), weights=np.concatenate([t["count"] for t in tables]),
                        minlength=uk.size).astype(np.int64)
    return {"key": uk, "radix": to, "count": count}


def _chunks_table(t: dict[str, Any]) -> dict[str, Any]:
    """``aggregate``: combo_table's ``rows``, ``count`` and ``weight`` of a merged table."""
    t = _as_rows(t)
    return {"rows": t["rows"], "count": t["count"], "weight": t["weight"]}


def suda_summary(runner: Runner, table: dict[str, Any], n_keys: int, *,
                 max_size: int | None, dis_fraction: float, original_scores: bool,
                 columns: Sequence[str], missing: float | None = None) -> dict[str, Any]:
    """Every file-level SUDA figure from the merged key-combination table."""
    rows, count = table["rows"], table["count"]
    n = int(count.sum())
    s = msu_search(runner, rows, count, max_size=max_size)
    pairs = 2 * int((count == 2).sum())
    score, dis = suda_scores(s["counts"], n_keys, hash_uniques(rows, count, missing), pairs,
                             dis_fraction=dis_fraction, original_scores=original_scores)
    K = s["counts"].shape[0] - 1
    by_size = s["counts"].sum(axis=1)
    out = {"suda_share": 100.0 * int((score > 0).sum()) / n if n else 0.0,
           "suda_mean": math.fsum(score) / n if n else 0.0,
           "suda_max": float(score.max()) if score.size else 0.0,
           "dis_suda_mean": math.fsum(dis) / n if n else 0.0,
           "dis_suda_max": float(dis.max()) if dis.size else 0.0,
           "msu_total": float(by_size[1:].sum())}
    for k in MSU_SIZES:
        out[f"msu{k}"] = float(by_size[k]) if k <= K else 0.0
    w = suda_weights(n_keys, original_scores=original_scores)[:K + 1]
    total = math.fsum(score)
    contrib = {c: (100.0 * math.fsum(s["per_column"][j] * w) / total if total else 0.0)
               for j, c in enumerate(columns)}
    out["info"] = {"keys": list(columns), "max_size": K, "records": n,
                   "sample_uniques": int(s["uniques"].size), "pairs": pairs,
                   "msu_by_size": {str(k): int(by_size[k]) for k in range(1, K + 1)},
                   "column_contributions": contrib, "subsets_counted": int(s["subsets"])}
    return out


def suda2_records(codes: np.ndarray, *, max_size: int | None = None,
                  dis_fraction: float = 0.01, original_scores: bool = True,
                  missing: float | None = None, runner: Runner | None = None
                  ) -> dict[str, np.ndarray]:
    """Per-record SUDA2 results of one file of key codes (sdcMicro's ``suda2`` output).

    Parameters
    ----------
    codes : ndarray, shape (n, m)
        Categorical key codes (NaN, or ``missing``, a missing value).
    max_size, dis_fraction, original_scores, missing
        As the options ``suda_max_size``, ``suda_dis_fraction``, ``suda_original_scores``
        and ``suda_missing``.
    runner : Runner, optional
        Where the subset tasks run (default: here).

    Returns
    -------
    dict
        ``score`` and ``dis`` (n,) float64; ``msu`` (n, K) int64, the MSUs of each size
        1..K of each record.
    """
    runner = runner or Runner(None)
    X = np.asarray(codes, dtype=np.float64)
    if missing is not None:
        X = np.where(X == missing, np.nan, X)
    t = combo_table(X)
    s = msu_search(runner, t["rows"], t["count"], max_size=max_size)
    pairs = 2 * int((t["count"] == 2).sum())
    score, dis = suda_scores(s["counts"], X.shape[1],
                             hash_uniques(t["rows"], t["count"], missing), pairs,
                             dis_fraction=dis_fraction, original_scores=original_scores)
    D = t["rows"].shape[0]
    rs, rd = np.zeros(D), np.zeros(D)
    rs[s["uniques"]], rd[s["uniques"]] = score, dis
    msu = np.zeros((D, s["counts"].shape[0] - 1), np.int64)
    msu[s["uniques"]] = s["counts"][1:].T
    inv = t["inverse"]
    return {"score": rs[inv], "dis": rd[inv], "msu": msu[inv]}


# -- the metrics --------------------------------------------------------------------------

def _summary(ctx: MeasureContext, name: str) -> dict[str, Any]:
    keys = frequency_keys(ctx, name)
    both = [c for c in ctx.confidential if c in keys]
    if both:
        raise SdcInputError(
            f"column(s) {both} are both confidential and key columns of {name}; a confidential "
            "column is what an intruder wants to learn, not what he knows: leave it out of "
            "the keys or of the confidential columns")
    if ctx.weight is not None and ctx.weight in keys:
        raise SdcInputError(f"the weight column {ctx.weight!r} is a key column of {name}; "
                            "leave it out of the keys")
    pos = tuple(column_positions(keys, ctx.masked_columns, what="key column",
                                 where="the masked file"))
    o = ctx.options
    max_size = o["suda_max_size"]
    missing = o["suda_missing"]
    missing = None if missing is None else float(missing)
    opts = (max_size, float(o["suda_dis_fraction"]), bool(o["suda_original_scores"]), missing)

    def compute() -> dict[str, Any]:
        t = map_reduce(ctx.runner, _table_chunk, _merge_chunks, [ctx.masked],
                       ctx.shape_masked[0], chunk_rows=int(o["chunk_rows"]),
                       args=(pos, missing), aggregate=_chunks_table)
        return suda_summary(ctx.runner, t, len(keys), max_size=opts[0], dis_fraction=opts[1],
                            original_scores=opts[2], columns=keys, missing=missing)
    return ctx.cached(("suda2", keys) + opts, compute)


_OPTIONS = ("chunk_rows", "suda_max_size", "suda_dis_fraction", "suda_original_scores",
            "suda_missing")
_REF = ("Elliot, Manning and Ford (2002); Manning, Haglin and Keane (2008); sdcMicro "
        "suda2")

#: metric -> (unit, description)
METRICS: dict[str, tuple[str, str]] = {
    "suda_share": ("% of records", "% of records with at least one minimal sample unique "
                   "(special uniques, SUDA2) among the categorical keys"),
    "suda_mean": ("SUDA score", "mean SUDA score of the records (sum over a record's MSUs "
                  "of (m - size)!; sdcMicro suda2)"),
    "suda_max": ("SUDA score", "largest SUDA score of a record"),
    "dis_suda_mean": ("DIS-SUDA score (0 to 1)", "mean DIS-SUDA score of the records "
                      "(sdcMicro suda2, sampling fraction suda_dis_fraction)"),
    "dis_suda_max": ("DIS-SUDA score (0 to 1)", "largest DIS-SUDA score of a record"),
    "msu_total": ("MSUs", "minimal sample uniques found (all sizes up to suda_max_size)"),
    **{f"msu{k}": ("MSUs", f"minimal sample uniques of {k} key column{'s' if k > 1 else ''}")
       for k in MSU_SIZES},
}


def _guard(inputs: Any, options: Mapping[str, Any]) -> Any:
    """Why SUDA2 would refuse these inputs without a ``suda_max_size``: its search over
    every subset of more than 16 categorical keys."""
    from ..inputs import Reason
    q = len(inputs.categorical_keys())
    if "suda_max_size" in options or 2 ** q - 1 <= MAX_SUBSETS:
        return None
    fit = max(k for k in range(1, q + 1)
              if sum(math.comb(q, i) for i in range(1, k + 1)) <= MAX_SUBSETS)
    return Reason(f"{q} categorical keys", "SUDA2 over every subset of them is too large; "
                  f"ask with --metric and -o suda_max_size={fit} or less", order=3)


def _register(name: str, unit: str, description: str) -> None:
    def func(ctx: MeasureContext) -> MetricResult:
        s = _summary(ctx, name)
        return MetricResult(s[name], info=dict(s["info"]))
    register(name, kind="risk", same_shape=False, categorical=True, options=_OPTIONS,
             unit=unit, reference=_REF, description=description + " (released file)",
             guard=_guard)(func)


for _name, (_unit, _desc) in METRICS.items():
    _register(_name, _unit, _desc)
