"""Exact weight sums of the key tables: what they cost against a float fold, at 10^7 records.

Run: ``python benchmarks/frequency_exact.py [--rows 10000000]``

The file of ``benchmarks/mixed.py`` (5 skewed categorical keys with 100, 40, 12, 5 and 2
categories, a weight in [1, 500)), in memory, one process. The key table of every record
chunk of ``chunk_rows`` records, merged 8 at a time as :func:`sdcdist.parallel.map_reduce`
merges them, then the frequency metrics from the merged table, two ways:

- float fold (the baseline; how the tables added weights before): each chunk's weight sums
  by ``numpy.bincount``, chunk sums added by ``bincount`` at every merge;
- exact (:func:`sdcdist.keytables.combo_table` / ``merge_tables``): 24-bit digits added
  exactly, the float the correctly rounded exact sum.

Each way runs at two chunkings (ratio: exact / float fold at the same chunking); it says whether IR_mean / IR_max / ER keep their
bits from one chunking to the other. Then ``measure()`` of the 7 frequency metrics on the
whole file (exact sums), for the end-to-end time. The machine is shared: wall times are
noisy, compare the ratios within one run.
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).parent))
from mixed import FREQ, LEVELS, categorical_file  # noqa: E402

CHUNKINGS = (65_536, 1_000_000)


def _float_table(codes: np.ndarray, w: np.ndarray) -> dict:
    from sdcdist.keytables import unique_rows
    u, inv = unique_rows(codes.astype(np.int64))
    return {"rows": u, "count": np.bincount(inv, minlength=u.shape[0]).astype(np.int64),
            "weight": np.bincount(inv, weights=w, minlength=u.shape[0])}


def _float_merge(*tables: dict) -> dict:
    from sdcdist.keytables import unique_rows
    u, inv = unique_rows(np.concatenate([t["rows"] for t in tables]))
    add = lambda k: np.bincount(inv, weights=np.concatenate([t[k] for t in tables]),  # noqa
                                minlength=u.shape[0])
    return {"rows": u, "count": add("count").astype(np.int64), "weight": add("weight")}


def _exact_table(codes: np.ndarray, w: np.ndarray) -> dict:
    from sdcdist.keytables import combo_table
    t = combo_table(codes, w)
    t.pop("inverse")
    return t


def reduce_tables(X: np.ndarray, chunk: int, table, merge) -> dict:
    """Chunk tables merged 8 at a time, level by level (map_reduce's tree)."""
    parts = [table(X[s:s + chunk, :5], X[s:s + chunk, 5]) for s in range(0, len(X), chunk)]
    while len(parts) > 1:
        parts = [merge(*parts[i:i + 8]) if len(parts[i:i + 8]) > 1 else parts[i]
                 for i in range(0, len(parts), 8)]
    return parts[0]


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--rows", type=int, default=10_000_000)
    a = ap.parse_args()
    from sdcdist.keytables import exact_group_sums, exact_to_float, merge_tables
    from sdcdist.metrics import measure
    from sdcdist.metrics.risk.frequency import frequency_summary
    exact_to_float(exact_group_sums(np.ones(2), np.zeros(2, np.int64), 1))   # compile
    X = categorical_file(a.rows)
    print(f"{a.rows:,} records, keys with {LEVELS} categories + weight, in memory")
    reduce_tables(X[:100_000], 65_536, _float_table, _float_merge)           # warm up
    print(f"{'chunk_rows':>10s} {'way':11s} {'tables s':>9s}  {'IR_mean':>22s} "
          f"{'IR_max':>22s} {'ER':>22s}")
    seen: dict[str, set] = {}
    for chunk in CHUNKINGS:
        secs = {}
        for way, table, merge in (("float fold", _float_table, _float_merge),
                                  ("exact", _exact_table, merge_tables)):
            t0 = time.perf_counter()
            merged = reduce_tables(X, chunk, table, merge)
            secs[way] = time.perf_counter() - t0
            s = frequency_summary(merged, True)
            seen.setdefault(way, set()).add((s["IR_mean"], s["IR_max"], s["ER"]))
            print(f"{chunk:>10,d} {way:11s} {secs[way]:9.2f}  {s['IR_mean']!r:>22s} "
                  f"{s['IR_max']!r:>22s} {s['ER']!r:>22s}")
        print(f"{'':>10s} ratio exact / float fold: {secs['exact'] / secs['float fold']:.2f}")
    for way, vals in seen.items():
        print(f"  {way}: {'same bits' if len(vals) == 1 else 'DIFFERENT bits'} at chunk_rows "
              f"{' and '.join(f'{c:,}' for c in CHUNKINGS)}")
    names = [f"k{j}" for j in range(5)] + ["w"]
    t0 = time.perf_counter()
    measure(X, X, FREQ, columns=names, keysets=[names[:5]], categorical=names[:5], weight="w")
    print(f"measure() of the 7 frequency metrics, exact sums, one process: "
          f"{time.perf_counter() - t0:.2f} s")


if __name__ == "__main__":
    main()
