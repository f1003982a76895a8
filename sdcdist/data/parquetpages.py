"""The page headers of a Parquet file, read from the file itself before any page is decoded.

A Parquet footer states each row group's size, but nothing checks that statement against
the pages: a 10 KB file can hold pages that decompress to gigabytes. Each page starts with
a ``PageHeader`` (Thrift compact protocol) that gives its type and its compressed and
uncompressed sizes; :func:`iter_pages` walks every column chunk page by page, reading only
those headers (a few bytes each), so a reader can refuse a page, a dictionary or a column
chunk that would not fit before a byte of it is decompressed.

The Thrift compact protocol is read here directly (a struct is a sequence of fields, each
a header byte with the field-id delta and the type, then the value: zigzag varints for
integers, a varint length for binary, a header for lists and maps, a stop byte ending the
struct), bounded: a header longer than ``header_limit`` bytes is refused, not read.
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

__all__ = ["Page", "ParquetFormatError", "ParquetHeaderTooLarge", "footer_length",
           "iter_pages", "MAX_PAGES"]

#: pages a file may have (a file of tiny pages costs time for nothing)
MAX_PAGES = 1_000_000
_DICTIONARY_PAGE = 2


class ParquetFormatError(ValueError):
    """Not a readable Parquet file (the full reader then says what is wrong)."""


class ParquetHeaderTooLarge(ValueError):
    """A page header longer than the limit, or more than :data:`MAX_PAGES` pages."""

    def __init__(self, limit: int):
        super().__init__(limit)
        self.limit = limit


@dataclass(frozen=True)
class Page:
    """One page's header: its sizes, whether it is a dictionary page, and the sum of the
    uncompressed sizes of its column chunk's pages so far (itself included)."""

    offset: int
    compressed: int
    uncompressed: int
    dictionary: bool
    chunk_uncompressed: int


def footer_length(path: str | os.PathLike) -> int:
    """The length of a Parquet file's footer (metadata), from its last 8 bytes."""
    with open(path, "rb") as f:
        f.seek(0, os.SEEK_END)
        size = f.tell()
        if size < 12:
            raise ParquetFormatError("too short")
        f.seek(0)
        head = f.read(4)
        f.seek(size - 8)
        tail = f.read(8)
    if head != b"PAR1" or tail[4:] != b"PAR1":
        raise ParquetFormatError("no PAR1 magic")
    n = int.from_bytes(tail[:4], "little")
    if n > size - 12:
        raise ParquetFormatError("footer longer than the file")
    return n


class _NeedMore(Exception):
    pass


class _Reader:
    """The Thrift compact protocol over a bytes buffer (raises _NeedMore at its end)."""

    def __init__(self, buf: bytes):
        self.buf, self.pos = buf, 0

    def byte(self) -> int:
        if self.pos >= len(self.buf):
            raise _NeedMore
        b = self.buf[self.pos]
        self.pos += 1
        return b

    def varint(self) -> int:
        out = shift = 0
        while True:
            b = self.byte()
            out |= (b & 0x7F) << shift
            if not b & 0x80:
                return out
            shift += 7
            if shift > 70:
                raise ParquetFormatError("varint too long")

    def zigzag(self) -> int:
        n = self.varint()
        return (n >> 1) ^ -(n & 1)

    def skip_bytes(self, n: int) -> None:
        if n < 0:
            raise ParquetFormatError("negative length")
        if self.pos + n > len(self.buf):
            raise _NeedMore
        self.pos += n

    def value(self, t: int, depth: int) -> Any:
        """Read (or skip) a value of compact type ``t``; integers are returned."""
        if depth > 32:
            raise ParquetFormatError("nested too deeply")
        if t in (1, 2):                  # boolean in a field header
            return t == 1
        if t == 3:
            return self.byte()
        if t in (4, 5, 6):
            return self.zigzag()
        if t == 7:
            self.skip_bytes(8)
        elif t == 8:
            self.skip_bytes(self.varint())
        elif t in (9, 10):
            h = self.byte()
            n = h >> 4
            if n == 15:
                n = self.varint()
            et = h & 0x0F
            for _ in range(n):
                if et in (1, 2):         # booleans in a list: one byte each
                    self.byte()
                else:
                    self.value(et, depth + 1)
        elif t == 11:
            n = self.varint()
            if n:
                kv = self.byte()
                for _ in range(n):
                    self.value(kv >> 4, depth + 1)
                    self.value(kv & 0x0F, depth + 1)
        elif t == 12:
            self.struct(depth + 1)
        else:
            raise ParquetFormatError(f"unknown compact type {t}")
        return None

    def struct(self, depth: int = 0) -> dict[int, Any]:
        """A struct's integer and boolean fields by id (others skipped)."""
        out: dict[int, Any] = {}
        last = 0
        while True:
            h = self.byte()
            if h == 0:
                return out
            t = h & 0x0F
            delta = h >> 4
            fid = last + delta if delta else self.zigzag()
            last = fid
            out[fid] = self.value(t, depth)


def _header(f: Any, offset: int, size: int, limit: int) -> tuple[int, dict[int, Any]]:
    """(length, fields) of the page header at ``offset``, reading at most ``limit`` bytes."""
    want = min(4096, limit)
    while True:
        f.seek(offset)
        buf = f.read(min(want, size - offset))
        r = _Reader(buf)
        try:
            fields = r.struct()
            return r.pos, fields
        except _NeedMore:
            if len(buf) < want:          # the file ends inside the header
                raise ParquetFormatError("truncated page header") from None
            if want >= limit:
                raise ParquetHeaderTooLarge(limit) from None
            want = min(limit, want * 8)


def iter_pages(path: str | os.PathLike, metadata: Any, *,
               header_limit: int = 2**20) -> Iterator[Page]:
    """Every page header of every column chunk of the Parquet file at ``path``, whose
    footer pyarrow read as ``metadata`` (``pyarrow.parquet.FileMetaData``).

    Raises :class:`ParquetFormatError` for headers that do not parse or do not fit the
    file, :class:`ParquetHeaderTooLarge` for a header longer than ``header_limit`` bytes
    or more than :data:`MAX_PAGES` pages.
    """
    size = os.path.getsize(path)
    pages = 0
    with open(path, "rb") as f:
        for i in range(metadata.num_row_groups):
            rg = metadata.row_group(i)
            for j in range(rg.num_columns):
                cc = rg.column(j)
                starts = [o for o in (cc.data_page_offset,
                                      cc.dictionary_page_offset if cc.has_dictionary_page
                                      else None) if o is not None and o > 0]
                if not starts:
                    raise ParquetFormatError("a column chunk without a page offset")
                pos = min(starts)
                end = pos + int(cc.total_compressed_size)
                if pos < 4 or end > size:
                    raise ParquetFormatError("a column chunk outside the file")
                total = 0
                while pos < end:
                    n, h = _header(f, pos, size, header_limit)
                    typ, unc, comp = h.get(1), h.get(2), h.get(3)
                    if not all(isinstance(x, int) for x in (typ, unc, comp)) or unc < 0 \
                            or comp < 0:
                        raise ParquetFormatError("a page header without its sizes")
                    total += unc
                    pages += 1
                    if pages > MAX_PAGES:
                        raise ParquetHeaderTooLarge(header_limit)
                    yield Page(pos, comp, unc, typ == _DICTIONARY_PAGE, total)
                    pos += n + comp
