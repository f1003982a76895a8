"""Memory the service spends on one request: bounded, whatever the request's size.

An upload is scanned as it is stored, before anything is parsed or allocated:
its header's columns, its lines and its decompressed bytes are counted while
the (gzip) stream is read in 1 MiB blocks, and the upload is refused (413) as
soon as one passes its limit. It is then ingested in chunks of at most
:data:`CHUNK_BYTES` (rows per chunk = ``CHUNK_BYTES / (8 x columns)``), so a wide
file costs no more than a narrow one.

A submitted spec is sized from its datasets' metadata (a store's attributes, a
file's scan, a synthetic dataset's rows and columns) before any of it is read.
Data beyond the limits is refused (413). Data of at most :data:`CHECK_BYTES` in
memory is read and checked at submission exactly as ``sdcdist audit`` checks it;
larger data is checked against its schema (columns, roles, keys, key sets) there,
and against its values when the audit starts (a failure then fails the audit with
the same message). So a submission costs at most about :data:`CHECK_BYTES` plus
a few times the spec's size, and a running audit about its data's size
(``rows x columns x 8`` bytes, at most ``max_data``) plus the cluster's work.
"""

from __future__ import annotations

import gzip
import zlib
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from fastapi import HTTPException

from ..errors import SdcInputError

__all__ = ["Limits", "scan_upload", "chunk_rows_for", "check_submission", "CHECK_BYTES",
           "CHUNK_BYTES", "check_holdouts"]

#: data of at most this many bytes in memory is read and checked at submission
CHECK_BYTES = 64 * 2**20
#: bytes of one chunk of an upload being ingested
CHUNK_BYTES = 4 * 2**20
_BLOCK = 2**20


@dataclass(frozen=True)
class Limits:
    """The sizes of a dataset the service accepts (``sdcdist serve --max-*``).

    Attributes
    ----------
    max_columns : columns of a dataset
    max_rows : records of a dataset (for CSV: lines after the header)
    max_data : bytes of a dataset in memory, ``rows x columns x 8``
    max_inflated : bytes of an upload once decompressed (a ``.csv.gz`` or Parquet)
    """

    max_columns: int = 1000
    max_rows: int = 10**7
    max_data: int = 2**30
    max_inflated: int = 2**30


def _mib(n: int) -> str:
    return f"{n / 2**20:,.0f} MiB" if n >= 2**20 else f"{n:,} bytes"


def _too_large(what: str, got: str, limit: str, option: str) -> HTTPException:
    return HTTPException(413, f"{what} has {got}; this service accepts at most {limit} "
                              f"(sdcdist serve {option}); make it smaller or ask the "
                              "operator to raise the limit")


def check_shape(what: str, rows: int | None, columns: int | None, lim: Limits) -> None:
    """Refuse (413) a dataset whose rows, columns or memory pass the limits."""
    if columns is not None and columns > lim.max_columns:
        raise _too_large(what, f"{columns:,} columns", f"{lim.max_columns:,}",
                         "--max-columns")
    if rows is not None and rows > lim.max_rows:
        raise _too_large(what, f"more than {lim.max_rows:,} records" if rows == lim.max_rows
                         + 1 else f"{rows:,} records", f"{lim.max_rows:,}", "--max-rows")
    if rows is not None and columns is not None and rows * columns * 8 > lim.max_data:
        raise _too_large(what, f"at least {rows:,} records of {columns:,} columns "
                         f"({_mib(rows * columns * 8)} in memory)", _mib(lim.max_data),
                         "--max-data")


def scan_upload(path: Path, lim: Limits, what: str = "the upload") -> tuple[int, int] | None:
    """Count an uploaded file's columns and records, streaming; refuse (413) as soon as a
    limit is passed. Returns (records, columns), or None for a file it cannot read
    (ingest then says what is wrong)."""
    low = path.name.lower()
    if low.endswith((".parquet", ".pq")):
        try:
            import pyarrow.parquet as pq
            md = pq.ParquetFile(path).metadata
        except Exception:               # noqa: BLE001 - ingest reports an unreadable file
            return None
        inflated = sum(md.row_group(i).total_byte_size for i in range(md.num_row_groups))
        check_shape(what, md.num_rows, md.num_columns, lim)
        if inflated > lim.max_inflated:
            raise _too_large(what, f"{_mib(inflated)} of data once decompressed",
                             _mib(lim.max_inflated), "--max-inflated")
        return md.num_rows, md.num_columns
    sep = b"\t" if low.endswith(".tsv") else b","
    head_cap = max(2**16, 256 * lim.max_columns)
    total = lines = 0
    columns: int | None = None
    head = b""
    last = b"\n"
    try:
        with (gzip.open(path, "rb") if low.endswith(".gz") else open(path, "rb")) as f:
            while True:
                block = f.read(_BLOCK)
                if not block:
                    break
                total += len(block)
                if total > lim.max_inflated:
                    raise _too_large(what, f"more than {_mib(lim.max_inflated)} of text once "
                                     "decompressed", _mib(lim.max_inflated), "--max-inflated")
                if columns is None:
                    head += block[:head_cap]
                    end = head.find(b"\n")
                    if end < 0 and len(head) >= head_cap:
                        n = head.count(sep)
                        if n >= lim.max_columns:
                            raise _too_large(what, f"more than {n:,} columns",
                                             f"{lim.max_columns:,}", "--max-columns")
                        raise _too_large(what, f"a header line longer than {_mib(head_cap)}",
                                         _mib(head_cap), "--max-columns")
                    if end >= 0:
                        columns = head[:end].count(sep) + 1
                        check_shape(what, None, columns, lim)
                        head = b""
                lines += block.count(b"\n")
                last = block[-1:]
                rows = max(0, lines - 1 + (last != b"\n"))
                check_shape(what, min(rows, lim.max_rows + 1), columns, lim)
    except HTTPException:
        raise
    except (OSError, EOFError, zlib.error, ValueError):
        return None                     # ingest says what is wrong with the file
    if columns is None:
        columns = head.count(sep) + 1 if head else 0
        check_shape(what, None, columns, lim)
    rows = max(0, lines - 1 + (last != b"\n"))
    return rows, columns


def chunk_rows_for(columns: int, default: int) -> int:
    """Records per chunk of a ``columns``-wide upload: at most :data:`CHUNK_BYTES`."""
    return max(1, min(default, CHUNK_BYTES // (8 * max(1, columns))))


@dataclass
class _Meta:
    rows: int | None
    columns: list[str] | None
    roles: dict[str, list[str]]
    categorical: bool | None = None      # has categorical columns (None: cannot tell)


def _meta(spec: Any, d: Any, lim: Limits) -> _Meta:
    """What a dataset of ``spec`` is, from its metadata only."""
    what = f"dataset {d.name!r}"
    if d.synthetic is not None:
        from ..data.synth import COLUMNS
        rows, m = int(d.synthetic["rows"]), int(d.synthetic["columns"])
        check_shape(what, rows, m, lim)
        return _Meta(rows, list(COLUMNS[:m]), {}, False)
    if d.reference is not None:
        return _Meta(None, None, {})      # a small file shipped with sdcdist
    path = d.path or ""
    url = "://" in path
    full = Path(path) if url or Path(path).is_absolute() else Path(spec.base_dir) / path
    if url or full.is_dir() or path.rstrip("/").endswith(".zarr"):
        try:
            import zarr
            attrs = dict(zarr.open_group(path if url else str(full), mode="r").attrs)
            rows, cols = int(attrs["n_records"]), list(attrs["columns"])
        except Exception:               # noqa: BLE001 - the full check says what is wrong
            return _Meta(None, None, {})
        check_shape(what, rows, len(cols), lim)
        return _Meta(rows, cols, dict(attrs.get("roles") or {}),
                     bool(attrs.get("categories")))
    if full.is_file():
        got = scan_upload(full, lim, what)
        if got is not None and full.name.lower().endswith((".parquet", ".pq")):
            import pyarrow.parquet as pq
            return _Meta(got[0], list(pq.ParquetFile(full).schema_arrow.names), {})
        if got is not None and not full.name.lower().endswith((".parquet", ".pq")):
            import csv
            import io
            try:
                with (gzip.open(full, "rb") if full.name.lower().endswith(".gz")
                      else open(full, "rb")) as f:
                    line = f.readline(2**20).decode("utf-8-sig")
                sep = "\t" if full.name.lower().endswith(".tsv") else ","
                names = next(csv.reader(io.StringIO(line), delimiter=sep,
                                        skipinitialspace=True), [])
                return _Meta(got[0], [n.strip() for n in names], {})
            except (OSError, EOFError, zlib.error, UnicodeDecodeError):
                pass
    return _Meta(None, None, {})


def check_submission(spec: Any, lim: Limits) -> None:
    """Check a parsed spec against its data within the memory bound of the module
    docstring: refuse (413) data past the limits; read and check data of at most
    :data:`CHECK_BYTES` fully, larger data by its schema only."""
    from ..audit.run import load_data
    metas = [_meta(spec, d, lim) for d in spec.datasets]
    unknown = any(m.rows is None or m.columns is None for m in metas)
    size = sum((m.rows or 0) * len(m.columns or ()) * 8 for m in metas)
    if unknown or size <= CHECK_BYTES:
        load_data(spec)
        return
    import numpy as np

    from ..audit.run import resolve_keysets
    from ..data.io import Microdata
    from ..errors import column_positions
    from ..metrics import get_metric
    need = [k for k in spec.metrics if get_metric(k).categorical and not get_metric(k).keysets]
    for d, m in zip(spec.datasets, metas):
        if d.categorical and d.synthetic is not None:
            raise SdcInputError("a synthetic dataset has numeric columns only; leave "
                                "'categorical' out of it")
        if need and m.categorical is False and not d.categorical:
            raise SdcInputError(
                f"{', '.join(need)} measure categorical columns, and dataset {d.name!r} "
                "has none: name its integer-coded categorical columns in the dataset's "
                "'categorical:' (text columns are categorical anyway)")
        cols = list(m.columns or [])
        if d.columns:
            column_positions(list(d.columns), cols, what="column", where=repr(d.name))
            cols = list(d.columns)
        md = Microdata(np.empty((0, len(cols))), tuple(cols), {**m.roles, **d.roles})
        for r, names in md.roles.items():
            md.column_index(names, what=f"{r} column")
        if d.keys:
            md.column_index(d.keys, what="key column")
        resolve_keysets(spec, md, d)


def check_holdouts(spec: Any, lim: Limits) -> None:
    """Size (413 past the limits) each holdout file a requested metric will read, from its
    metadata as a dataset is, before the audit is queued. A holdout no requested metric
    needs is not read at all, here or when the audit runs."""
    from dataclasses import replace

    from ..metrics.synthetic import HOLDOUT_METRICS
    if not any(k in HOLDOUT_METRICS for k in spec.metrics):
        return
    for d in spec.datasets:
        if d.holdout is not None:
            _meta(spec, replace(d, name=f"{d.name} (its holdout)", path=d.holdout), lim)
