"""Memory the service spends on one request: bounded, whatever the request's size.

An upload is scanned as it is stored, before anything is parsed or allocated
(:class:`TextScan`): its header's columns, its lines, its decompressed bytes, its
longest field and its longest line are counted while the (gzip) stream is read in
1 MiB blocks, and the upload is refused (413) as soon as one passes its limit. A
Parquet upload's page headers are read from the file and checked before any page is
decoded (:func:`check_parquet`). It is then ingested, in a child process that exits
(:mod:`.subproc`), in chunks of at most :data:`CHUNK_BYTES` (rows per chunk =
``CHUNK_BYTES / (8 x columns)``), so a wide file costs no more than a narrow one and
the service process holds none of it.

A submitted spec is sized from its datasets' metadata (a store's attributes, a
file's scan, a reference file's too, a synthetic dataset's rows and columns) before
any of it is read.
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

__all__ = ["Limits", "TextScan", "scan_upload", "check_parquet", "chunk_rows_for",
           "check_submission", "CHECK_BYTES", "CHUNK_BYTES", "check_holdouts"]

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
    max_field : bytes of one field of a CSV upload (its lines: 8 times; a Parquet page or
        dictionary once decompressed, and a Parquet footer: 16 times)
    """

    max_columns: int = 1000
    max_rows: int = 10**7
    max_data: int = 2**30
    max_inflated: int = 2**30
    max_field: int = 2**20


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


class TextScan:
    """An uploaded CSV's bytes, counted as they stream in (raw, or gzip-compressed, which
    is decompressed here in pieces of at most 1 MiB): the header's columns, the lines,
    the decompressed bytes, the longest field and the longest line. :meth:`feed` raises
    413 as soon as one passes its limit, so nothing past the limit is ever buffered.

    Fields and lines are delimited as the CSV readers delimit them: a separator or a
    newline inside double quotes belongs to the field (RFC 4180: every ``"`` toggles
    quoting, ``""`` twice). :meth:`finish` returns (records, columns), or None for a
    stream it could not read (ingest then says what is wrong).
    """

    def __init__(self, name: str, lim: Limits, what: str = "the upload"):
        low = name.lower()
        self.lim, self.what = lim, what
        self.sep = b"\t" if low.endswith(".tsv") else b","
        self._sepcode = self.sep[0]
        self._gz = zlib.decompressobj(wbits=31) if low.endswith(".gz") else None
        self.head_cap = max(2**16, 256 * lim.max_columns)
        self.max_line = 8 * lim.max_field
        self.total = self.lines = 0
        self.columns: int | None = None
        self.head = b""
        self.last = b"\n"
        self.broken = False
        self._field = self._line = 0      # lengths of the field and line still open
        self._quoted = 0                  # inside double quotes at the end of the last block
        self._member = False              # inside a gzip member not finished yet

    def feed(self, raw: bytes) -> None:
        """Count the next bytes of the file as sent."""
        if self.broken or not raw:
            return
        if self._gz is None:
            for i in range(0, len(raw), _BLOCK):
                self._text(raw[i:i + _BLOCK])
            return
        data = raw
        try:
            while data:
                self._member = True
                out = self._gz.decompress(data, _BLOCK)
                if out:
                    self._text(out)
                if self._gz.eof:          # the next gzip member, if any
                    self._member = False
                    data = self._gz.unused_data
                    self._gz = zlib.decompressobj(wbits=31)
                else:
                    data = self._gz.unconsumed_tail
        except zlib.error:
            self.broken = True            # ingest says what is wrong with the file

    def _text(self, block: bytes) -> None:
        import numpy as np
        lim, what = self.lim, self.what
        self.total += len(block)
        if self.total > lim.max_inflated:
            raise _too_large(what, f"more than {_mib(lim.max_inflated)} of text once "
                             "decompressed", _mib(lim.max_inflated), "--max-inflated")
        if self.columns is None:
            self.head += block[:self.head_cap]
            end = self.head.find(b"\n")
            if end < 0 and len(self.head) >= self.head_cap:
                n = self.head.count(self.sep)
                if n >= lim.max_columns:
                    raise _too_large(what, f"more than {n:,} columns",
                                     f"{lim.max_columns:,}", "--max-columns")
                raise _too_large(what, f"a header line longer than {_mib(self.head_cap)}",
                                 _mib(self.head_cap), "--max-columns")
            if end >= 0:
                self.columns = self.head[:end].count(self.sep) + 1
                check_shape(what, None, self.columns, lim)
                self.head = b""
        self.lines += block.count(b"\n")
        self.last = block[-1:]
        rows = max(0, self.lines - 1 + (self.last != b"\n"))
        check_shape(what, min(rows, lim.max_rows + 1), self.columns, lim)
        # the longest field and line, quotes respected
        a = np.frombuffer(block, dtype=np.uint8)
        nl = a == 10
        dl = nl | (a == self._sepcode)
        q = a == 34
        nq = int(np.count_nonzero(q))
        if nq or self._quoted:
            outside = ((np.cumsum(q, dtype=np.int64) + self._quoted) & 1) == 0
            nl &= outside
            dl &= outside
            self._quoted = (self._quoted + nq) & 1
        self._field = self._longest(dl, self._field, lim.max_field, "field", "--max-field")
        self._line = self._longest(nl, self._line, self.max_line, "line",
                                   "--max-field (a line may be 8 times a field)")

    def _longest(self, ends: Any, open_: int, limit: int, what: str, option: str) -> int:
        """The length of the run still open after this block; 413 if a run is longer
        than ``limit``."""
        import numpy as np
        pos = np.flatnonzero(ends)
        n = len(ends)
        if len(pos) == 0:
            longest = open_ = open_ + n
        else:
            longest = max(open_ + int(pos[0]),
                          int(np.diff(pos).max()) - 1 if len(pos) > 1 else 0)
            open_ = n - int(pos[-1]) - 1
            longest = max(longest, open_)
        if longest > limit:
            raise _too_large(self.what, f"a {what} longer than {_mib(limit)} (a quote that "
                             "opens a field and is not closed makes the rest one field)",
                             _mib(limit), option)
        return open_

    def finish(self) -> tuple[int, int] | None:
        if self.broken:
            return None
        if self._member:                  # a truncated gzip stream
            return None
        if self.columns is None:
            self.columns = self.head.count(self.sep) + 1 if self.head else 0
            check_shape(self.what, None, self.columns, self.lim)
        return max(0, self.lines - 1 + (self.last != b"\n")), self.columns


def scan_upload(path: Path, lim: Limits, what: str = "the upload") -> tuple[int, int] | None:
    """Count an uploaded file's columns and records, streaming (:class:`TextScan`;
    Parquet: its footer and its pages' headers, :func:`check_parquet`); refuse (413) as
    soon as a limit is passed. Returns (records, columns), or None for a file it cannot
    read (ingest then says what is wrong)."""
    if path.name.lower().endswith((".parquet", ".pq")):
        return check_parquet(path, lim, what)
    scan = TextScan(path.name, lim, what)
    try:
        with open(path, "rb") as f:
            while block := f.read(_BLOCK):
                scan.feed(block)
    except OSError:
        return None
    return scan.finish()


def check_parquet(path: Path, lim: Limits, what: str = "the upload") -> tuple[int, int] | None:
    """Size a Parquet file before anything of it is decoded: its footer's length, then its
    shape and total size from the footer, then every page's header read from the file
    (:mod:`sdcdist.data.parquetpages`): a page or a dictionary larger than 16 x
    ``max_field`` once decompressed, or a column chunk larger than ``max_inflated``, is
    refused (413). Returns (records, columns), or None for a file it cannot read."""
    from ..data import parquetpages as pp
    page_limit = 16 * lim.max_field
    try:
        footer = pp.footer_length(path)
    except pp.ParquetFormatError:
        return None
    if footer > page_limit:
        raise _too_large(what, f"a Parquet footer of {_mib(footer)}", _mib(page_limit),
                         "--max-field (Parquet metadata may be 16 times a field)")
    try:
        import pyarrow.parquet as pq
        md = pq.ParquetFile(path).metadata
    except Exception:               # noqa: BLE001 - ingest reports an unreadable file
        return None
    check_shape(what, md.num_rows, md.num_columns, lim)
    inflated = sum(md.row_group(i).total_byte_size for i in range(md.num_row_groups))
    if inflated > lim.max_inflated:
        raise _too_large(what, f"{_mib(inflated)} of data once decompressed",
                         _mib(lim.max_inflated), "--max-inflated")
    try:
        for page in pp.iter_pages(path, md, header_limit=lim.max_field):
            if page.uncompressed > page_limit:
                kind = "dictionary" if page.dictionary else "page"
                raise _too_large(what, f"a Parquet {kind} of {_mib(page.uncompressed)} once "
                                 "decompressed", _mib(page_limit),
                                 "--max-field (a Parquet page may be 16 times a field)")
            if page.chunk_uncompressed > lim.max_inflated:
                raise _too_large(what, f"a Parquet column chunk of more than "
                                 f"{_mib(lim.max_inflated)} once decompressed",
                                 _mib(lim.max_inflated), "--max-inflated")
    except pp.ParquetHeaderTooLarge as e:
        raise _too_large(what, f"a Parquet page header of more than {_mib(e.limit)}",
                         _mib(e.limit), "--max-field") from None
    except pp.ParquetFormatError:
        return None
    return md.num_rows, md.num_columns


def chunk_rows_for(columns: int, default: int) -> int:
    """Records per chunk of a ``columns``-wide upload: at most :data:`CHUNK_BYTES`."""
    return max(1, min(default, CHUNK_BYTES // (8 * max(1, columns))))


@dataclass
class _Meta:
    rows: int | None
    columns: list[str] | None
    roles: dict[str, list[str]]
    categorical: bool | None = None      # has categorical columns (None: cannot tell)
    categories: tuple[str, ...] = ()     # a store's categorical columns
    store: str | None = None             # a Zarr store's path or URL
    chunk_rows: int | None = None        # a store's records per chunk


def _meta(spec: Any, d: Any, lim: Limits) -> _Meta:
    """What a dataset of ``spec`` is, from its metadata only."""
    what = f"dataset {d.name!r}"
    if d.synthetic is not None:
        from ..data.synth import COLUMNS
        rows, m = int(d.synthetic["rows"]), int(d.synthetic["columns"])
        check_shape(what, rows, m, lim)
        return _Meta(rows, list(COLUMNS[:m]), {}, False)
    if d.reference is not None:
        # a file shipped with sdcdist (or in $SDCDIST_REFDATA): sized as any file
        from ..data import reference_file
        path, url = "", False
        full = reference_file(d.reference)
    else:
        path = d.path or ""
        url = "://" in path
        full = Path(path) if url or Path(path).is_absolute() else Path(spec.base_dir) / path
    if url or full.is_dir() or path.rstrip("/").endswith(".zarr"):
        try:
            import zarr
            g = zarr.open_group(path if url else str(full), mode="r")
            attrs = dict(g.attrs)
            rows, cols = int(attrs["n_records"]), list(attrs["columns"])
            chunk = int(g["values"].chunks[0])
        except Exception:               # noqa: BLE001 - the full check says what is wrong
            return _Meta(None, None, {})
        check_shape(what, rows, len(cols), lim)
        return _Meta(rows, cols, dict(attrs.get("roles") or {}),
                     bool(attrs.get("categories")), tuple(attrs.get("categories") or ()),
                     path if url else str(full), chunk)
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
    need = [k for k in spec.metrics if get_metric(k).needs_categorical]
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
        cats = {c: [] for c in [*(m.categories or ()), *(d.categorical or ())] if c in cols}
        md = Microdata(np.empty((0, len(cols))), tuple(cols), {**m.roles, **d.roles},
                       categories=cats)
        for r, names in md.roles.items():
            md.column_index(names, what=f"{r} column")
        if d.keys:
            md.column_index(d.keys, what="key column")
        constant = None
        if spec.keysets == "prefixes":
            constant = _constant_columns(spec, d, m, cols)
            if constant is None:        # a file named by path: checked in a child process
                from .subproc import run_child
                run_child(load_data, spec)
                continue
        resolve_keysets(spec, md, d, constant=constant)


def _constant_columns(spec: Any, d: Any, m: _Meta, cols: list[str]) -> list[bool] | None:
    """Whether each of ``cols`` holds one value (NaN ignored), read chunk by chunk: a
    synthetic dataset's blocks or a store's record chunks, one at a time, so the memory
    is one chunk's whatever the data's size. None for data that is neither."""
    import numpy as np
    pos = [list(m.columns or []).index(c) for c in cols]
    lo = np.full(len(cols), np.inf)
    hi = np.full(len(cols), -np.inf)

    def add(block: np.ndarray) -> None:
        b = np.asarray(block, dtype=np.float64)[:, pos]
        if len(b):
            np.fmin(lo, np.fmin.reduce(b, axis=0), out=lo)
            np.fmax(hi, np.fmax.reduce(b, axis=0), out=hi)
    if d.synthetic is not None:
        from ..data.synth import iter_blocks
        for block in iter_blocks(int(d.synthetic["rows"]), columns=int(d.synthetic["columns"]),
                                 seed=d.synthetic["seed"]):
            add(block)
    elif m.store is not None:
        from ..data.stores import StoredArray
        arr = StoredArray(m.store)
        step = max(1, min(m.chunk_rows or 65536, CHUNK_BYTES // (8 * max(1, arr.shape[1]))))
        for start in range(0, arr.shape[0], step):
            add(arr[start:start + step])
    else:
        return None
    # as sdcdist.moments.constant_columns: no value, or min == max, is constant
    return [not bool(a < b) for a, b in zip(lo, hi)]


def check_holdouts(spec: Any, lim: Limits) -> None:
    """Size (413 past the limits) each holdout file a requested metric will read, from its
    metadata as a dataset is, before the audit is queued. A holdout no requested metric
    needs is not read at all, here or when the audit runs."""
    from dataclasses import replace

    from ..metrics import needing
    if not needing(spec.metrics, "holdout"):
        return
    for d in spec.datasets:
        if d.holdout is not None:
            _meta(spec, replace(d, name=f"{d.name} (its holdout)", path=d.holdout), lim)
