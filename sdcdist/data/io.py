"""Microdata I/O: ingest CSV/Parquet into Zarr, open lazily, load into memory.

On disk a dataset is a Zarr group holding one float64 array ``values`` with
dimensions ``(record, variable)``, chunked along records, each chunk
Zstandard-compressed and CRC-32C checksummed (a corrupted chunk raises
:class:`~sdcdist.integrity.CorruptChunkError`). Stores may be local paths or
fsspec URLs (``s3://``, ``gs://``, ``file://``, ``memory://``); credentials
come from the environment (see :mod:`sdcdist.storage`). The group's
attributes carry the variable names (``columns``), their roles (``roles``:
``{"key": [...], "confidential": [...]}``), the record count and the SHA-256
of the source file.
"""

from __future__ import annotations

import csv
import hashlib
import os
import shutil
import signal
import socket
import threading
import time
import uuid
import zlib
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from .. import integrity
from ..errors import SdcInputError, column_positions, param_error
from .validate import ValueChecker, check_column_names, check_values

__all__ = ["Microdata", "align_categories", "ingest", "open_microdata", "load_microdata", "write_microdata",
           "from_array", "StoredArray", "is_store", "DEFAULT_CHUNK_ROWS"]

DEFAULT_CHUNK_ROWS = 65_536


@dataclass
class Microdata:
    """An in-memory microdata file.

    Attributes
    ----------
    values : ndarray, shape (n, m), float64
    columns : tuple of str, length m
    roles : dict
        ``{"key": [...], "confidential": [...], "weight": [...]}`` column names,
        possibly empty.
    sha256 : str or None
        Fingerprint of the source file (or of the values when built in memory).
    categories : dict
        ``{column: [label, ...]}`` for the categorical columns: their values are
        the codes 0..L-1 of these labels (NaN where missing); see
        :mod:`sdcdist.data.types`. Columns not listed are numeric.
    """

    values: np.ndarray
    columns: tuple[str, ...]
    roles: dict[str, list[str]] = field(default_factory=dict)
    sha256: str | None = None
    categories: dict[str, list[str]] = field(default_factory=dict)

    @property
    def categorical(self) -> list[str]:
        """Names of the categorical columns, in column order."""
        return [c for c in self.columns if c in self.categories]

    @property
    def weight(self) -> str | None:
        """The weight column's name, or None."""
        w = self.roles.get("weight") or []
        return w[0] if w else None

    def select(self, names: Sequence[str]) -> "Microdata":
        """These columns only (roles and categories restricted to them)."""
        idx = self.column_index(names)
        keep = set(names)
        return Microdata(self.values[:, idx], tuple(names),
                         {r: [c for c in cs if c in keep] for r, cs in self.roles.items()},
                         self.sha256, {c: v for c, v in self.categories.items() if c in keep})

    @property
    def shape(self) -> tuple[int, int]:
        return self.values.shape  # type: ignore[return-value]

    def column_index(self, names: Sequence[str], *, what: str = "column") -> list[int]:
        """Positions of ``names``; unknown names raise and list the valid ones."""
        return column_positions(names, self.columns, what=what)


def align_categories(reference: Microdata, other: Microdata) -> tuple[Microdata, Microdata]:
    """Both files with the same codes for the same labels in their shared categorical columns.

    Each file read on its own codes its labels 0..L-1 in its own label order, so a
    released file that lacks a category (suppressed, PRAMed away) or holds new ones
    (another tool's release) would code the same label differently. The shared
    columns get one label list: ``reference``'s labels in its order, then the labels
    only ``other`` has (in label order); ``reference``'s codes never change, and
    ``other``'s are recoded (a monotone map when its labels are a subset, so content
    order is kept). Columns that are categorical in one file only are left alone.
    """
    from .types import label_order
    shared = [c for c in reference.categories if c in other.categories]
    if not shared:
        return reference, other
    ref_cats = dict(reference.categories)
    oth_cats = dict(other.categories)
    ref_vals = reference.values
    oth_vals = other.values
    for c in shared:
        a, b = list(ref_cats[c]), list(oth_cats[c])
        if a == b:
            continue
        known = set(a)
        union = a + label_order(x for x in b if x not in known)
        pos = {lab: i for i, lab in enumerate(union)}
        if union != a:
            ref_cats[c] = union                   # codes unchanged, labels appended
        lookup = np.array([pos[lab] for lab in b] + [np.nan], dtype=np.float64)
        j = other.columns.index(c)
        if oth_vals is other.values:
            oth_vals = oth_vals.copy()
        col = oth_vals[:, j]
        codes = np.where(np.isnan(col), len(b), col).astype(np.int64)
        oth_vals[:, j] = lookup[codes]
        oth_cats[c] = union
    ref = Microdata(ref_vals, reference.columns, reference.roles, reference.sha256, ref_cats)
    oth = Microdata(oth_vals, other.columns, other.roles, other.sha256, oth_cats)
    return ref, oth


def values_fingerprint(values: np.ndarray) -> str:
    """SHA-256 of a float64 array's bytes (C order) and shape."""
    h = hashlib.sha256(repr(values.shape).encode())
    h.update(np.ascontiguousarray(values, dtype=np.float64).tobytes())
    return h.hexdigest()


def from_array(values: np.ndarray, columns: Sequence[str] | None = None, *,
               roles: Mapping[str, Sequence[str]] | None = None,
               allow_constant: bool = False,
               categories: Mapping[str, Sequence[str]] | None = None) -> Microdata:
    """Validate an in-memory array and wrap it as :class:`Microdata` (a copy).

    ``categories`` maps categorical columns to their labels; their values must
    then be the codes 0..L-1.
    """
    values = np.array(values, dtype=np.float64, copy=True)
    if values.ndim != 2:
        raise SdcInputError(f"microdata must be 2-D (records x variables); got shape "
                            f"{values.shape}")
    if columns is None:
        columns = [f"V{j + 1}" for j in range(values.shape[1])]
    columns = tuple(str(c) for c in columns)
    check_values(values, columns, "the array", allow_constant=allow_constant)
    md = Microdata(values, columns, {k: list(v) for k, v in (roles or {}).items()},
                   values_fingerprint(values),
                   {str(k): [str(x) for x in v] for k, v in (categories or {}).items()})
    check_typed(md, "the array")
    return md


def check_typed(md: Microdata, source: str = "the data") -> None:
    """Check roles and categorical codes of in-memory microdata (names only in messages)."""
    from .types import check_roles, check_weights
    column_positions(list(md.categories), md.columns, what="categorical column")
    check_roles(md.columns, md.roles, md.categories, source=source)
    for c, labels in md.categories.items():
        x = md.values[:, md.columns.index(c)]
        ok = np.isnan(x) | ((x >= 0) & (x < len(labels)) & (x == np.floor(x)))
        if not ok.all():
            raise SdcInputError(f"categorical column {c!r} has {int((~ok).sum())} values that "
                                f"are not codes 0..{len(labels) - 1} of its {len(labels)} "
                                "categories")
    if md.weight is not None:
        check_weights(md.values[:, md.columns.index(md.weight)], md.weight)


def file_sha256(path: str | os.PathLike) -> str:
    h = hashlib.sha256()
    with open(path, "rb") as f:
        for block in iter(lambda: f.read(1 << 20), b""):
            h.update(block)
    return h.hexdigest()


def is_store(path: str | os.PathLike) -> bool:
    """Whether ``path`` names a Zarr store (a ``.zarr`` path or URL, or a Zarr folder)."""
    s = str(path).rstrip("/")
    if s.endswith(".zarr") or "://" in s:
        return True
    p = Path(s)
    return p.is_dir() and (p / "zarr.json").exists()


# ---------------------------------------------------------------------------
# reading sources chunk by chunk


def _source_kind(source: Path) -> str:
    suffix = "".join(source.suffixes[-2:]).lower()
    if suffix.endswith((".parquet", ".pq")):
        return "parquet"
    if suffix.endswith((".csv", ".csv.gz", ".txt", ".tsv")):
        return "csv"
    raise SdcInputError(f"cannot tell the format of {source.name!r}; sdcdist reads CSV "
                        "(.csv, .csv.gz, .tsv) and Parquet (.parquet) files")


def _open_text(source: Path, *, errors: str = "strict") -> Any:
    import gzip
    if source.suffix.lower() == ".gz":
        return gzip.open(source, "rt", newline="", encoding="utf-8-sig", errors=errors)
    return open(source, "r", newline="", encoding="utf-8-sig", errors=errors)


#: What reading a damaged or truncated (gzip) text file raises.
_READ_ERRORS: tuple[type[BaseException], ...] = (OSError, EOFError, UnicodeDecodeError,
                                                 zlib.error)


def _read_error(source: Path, exc: BaseException) -> SdcInputError:
    if isinstance(exc, UnicodeDecodeError):
        why = "it is not UTF-8 text"
    elif source.suffix.lower() == ".gz":
        why = "the gzip file is truncated or damaged"
    else:
        why = "the file cannot be read"
    return SdcInputError(f"cannot read {source.name!r} ({type(exc).__name__}: {why}); check "
                         "the path and that it is a complete text CSV file")


def _csv_header(source: Path, sep: str) -> list[str]:
    try:
        with _open_text(source) as f:
            row = next(csv.reader(f, delimiter=sep), None)
    except _READ_ERRORS as exc:
        raise _read_error(source, exc) from None
    if row is None or not any(c.strip() for c in row):
        raise SdcInputError(f"{source.name!r} is empty; it needs a header row and at least "
                            "3 records")
    header = [c.strip() for c in row]
    _check_header(header, source.name, sep)
    return header


_DELIMITERS = {",": "comma", ";": "semicolon", "\t": "tab", "|": "vertical bar"}


def _looks_numeric(name: str) -> bool:
    """Whether a header name is a number (so the header row is really a record)."""
    if not any(ch.isdigit() for ch in name):
        return False
    try:
        float(name)
    except ValueError:
        return False
    return True


def _check_header(header: Sequence[str], name: str, sep: str) -> None:
    """Refuse a header that shows a wrong delimiter or a missing header row.

    Messages name positions and delimiters, never the names themselves (a
    header-less file's first row holds record values).
    """
    if len(header) == 1:
        found = [d for d in _DELIMITERS if d != sep and d in header[0]]
        if found:
            expected = _DELIMITERS[sep]
            seen = " or ".join(_DELIMITERS[d] for d in found)
            raise SdcInputError(
                f"{name!r} has a single column whose header contains {seen} characters: it "
                f"looks {seen}-separated, but sdcdist reads {expected}-separated text here "
                "(.csv files are comma-separated, .tsv files tab-separated). Convert the "
                "file to commas (or name a tab-separated file .tsv)")
    numeric = [i + 1 for i, c in enumerate(header) if _looks_numeric(c)]
    if numeric:
        where = ", ".join(str(i) for i in numeric[:10]) + (", ..." if len(numeric) > 10 else "")
        raise SdcInputError(
            f"the first row of {name!r} looks like data: the header names at positions "
            f"{where} are numbers. Add a header row with the column names (a name may not "
            "be a number)")


def _field_count_error(name: str, line: int, fields: int, width: int) -> SdcInputError:
    if fields > width:
        fix = ("a value containing the delimiter (for example an unquoted thousands "
               "separator) is split into two fields: quote such values or remove the "
               "separators, and check for a trailing delimiter")
    else:
        fix = ("fill in the missing fields (an empty field between two delimiters is a "
               "missing value) or remove the line")
    return SdcInputError(f"{name!r} line {line} has {fields} fields but the header has "
                         f"{width}; {fix}. Nothing was read from this file")


_FALLBACK = object()
_SCAN_BLOCK = 1 << 22


def _scan_unquoted(f: Any, sep: bytes, width: int) -> Any:
    """Field counts of a file without quotes, block by block with numpy.

    Returns ``(line, fields)`` of the first bad line, ``None`` when all agree,
    or ``_FALLBACK`` when the file has quotes or lone carriage returns (the
    csv module then counts, quoted delimiters and line breaks included).
    """
    first = f.readline()
    if b'"' in first:
        return _FALLBACK
    line_no = 1
    carry = b""
    sep_code = sep[0]
    while True:
        block = f.read(_SCAN_BLOCK)
        data = carry + block
        final = not block
        if final:
            if not data:
                return None
            data += b"\n"
        cut = data.rfind(b"\n") + 1
        if cut == 0:
            carry = data
            continue
        chunk, carry = data[:cut], data[cut:]
        if b'"' in chunk or chunk.count(b"\r") != chunk.count(b"\r\n"):
            return _FALLBACK
        a = np.frombuffer(chunk, dtype=np.uint8)
        ends = np.flatnonzero(a == 10)
        seps = np.flatnonzero(a == sep_code)
        before = np.searchsorted(seps, ends)
        counts = np.diff(before, prepend=0) + 1
        for i in np.flatnonzero(counts != width):
            start = int(ends[i - 1]) + 1 if i else 0
            if not chunk[start:int(ends[i])].strip():
                continue                          # blank line: pandas skips it too
            return line_no + int(i) + 1, int(counts[i])
        line_no += len(ends)
        if final:
            return None


def _check_field_counts(source: Path, sep: str, width: int) -> None:
    """Refuse any record line whose field count differs from the header's.

    pandas' ``usecols`` skips its own field-count check, so a row with an
    extra field (e.g. an unquoted thousands separator) would be read shifted.
    Blank lines are skipped, as pandas does. Raises with the 1-based line
    number in the file, never a value.
    """
    import gzip
    try:
        opener = gzip.open if source.suffix.lower() == ".gz" else open
        with opener(source, "rb") as fb:  # type: ignore[operator]
            found = _scan_unquoted(fb, sep.encode(), width)
        if found is None:
            return
        if found is not _FALLBACK:
            raise _field_count_error(source.name, found[0], found[1], width)
        with _open_text(source, errors="replace") as f:
            reader = csv.reader(f, delimiter=sep, skipinitialspace=True)
            next(reader, None)
            for row in reader:
                if len(row) == width:
                    continue
                if not row or (len(row) == 1 and not row[0].strip()):
                    continue
                raise _field_count_error(source.name, reader.line_num, len(row), width)
    except csv.Error as exc:
        raise SdcInputError(f"cannot parse {source.name!r} as CSV (malformed quoting "
                            f"{type(exc).__name__}); check the quotes around values") from None
    except _READ_ERRORS as exc:
        raise _read_error(source, exc) from None


def _select(header: Sequence[str], columns: Sequence[str] | None, name: str) -> list[str]:
    if columns is None:
        return list(header)
    column_positions(columns, header, what="column", where=repr(name))
    check_column_names(list(columns), "--columns")
    return list(columns)


def _source_frames(source: Path, columns: Sequence[str] | None, chunk_rows: int
                   ) -> tuple[list[str], Any]:
    """The selected column names and ``frames(usecols)``, a factory of iterators of
    pandas DataFrames of columns ``usecols``.

    A CSV file's columns come as text exactly as the file spells them (no stripping,
    no missing-value guessing: :mod:`sdcdist.data.parse` decides); a Parquet file's
    columns keep their types.
    """
    import pandas as pd

    kind = _source_kind(source)
    if not source.exists():
        raise SdcInputError(f"{str(source)!r} does not exist; check the path")
    if source.stat().st_size == 0:
        raise SdcInputError(f"{source.name!r} is empty; it needs a header row and at least "
                            "3 records")
    if kind == "csv":
        sep = "\t" if source.suffix.lower() == ".tsv" else ","
        header = _csv_header(source, sep)
        check_column_names(header, repr(source.name))
        names = _select(header, columns, source.name)
        checked = [False]

        def frames(usecols: Sequence[str]) -> Iterator[Any]:
            if not checked[0]:
                _check_field_counts(source, sep, len(header))
                checked[0] = True
            usecols = list(usecols)
            try:
                # every cell as text, verbatim: the parsing rules are sdcdist's own
                reader = pd.read_csv(source, sep=sep, usecols=usecols, chunksize=chunk_rows,
                                     dtype=str, na_filter=False, low_memory=False)
                for df in reader:
                    yield df[usecols]
            except (EOFError, OSError, zlib.error) as exc:
                raise _read_error(source, exc) from None
            except (pd.errors.ParserError, UnicodeDecodeError, ValueError) as exc:
                if isinstance(exc, SdcInputError):
                    raise
                raise SdcInputError(f"cannot parse {source.name!r} as CSV "
                                    f"({type(exc).__name__}); check the delimiter and "
                                    "quoting") from None
        return names, frames
    try:
        import pyarrow.parquet as pq
        pf = pq.ParquetFile(source)
    except Exception as exc:  # pyarrow raises several types for unreadable files
        raise SdcInputError(f"cannot read {source.name!r} as Parquet ({type(exc).__name__}); "
                            "check that the file is a complete Parquet file") from None
    header = list(pf.schema_arrow.names)
    check_column_names(header, repr(source.name))
    names = _select(header, columns, source.name)

    def pframes(usecols: Sequence[str]) -> Iterator[Any]:
        for batch in pf.iter_batches(batch_size=chunk_rows, columns=list(usecols)):
            yield batch.to_pandas()[list(usecols)]
    return names, pframes


def _is_numeric(series: Any) -> bool:
    import pandas as pd
    return bool(pd.api.types.is_numeric_dtype(series) or pd.api.types.is_bool_dtype(series))


def _numeric_markers(markers: frozenset[str]) -> list[float]:
    """The markers that read as numbers (they mark missing values of a typed number column)."""
    out = []
    for m in markers:
        try:
            out.append(float(m))
        except ValueError:
            pass
    return out


def _column_cells(series: Any, markers: frozenset[str], numeric_markers: Sequence[float]
                  ) -> tuple[np.ndarray | None, np.ndarray | None, np.ndarray]:
    """One chunk of one column as ``(text, values, missing)``: a typed number column gives
    its values (text None), any other its cells as text (values None)."""
    from .parse import missing_mask
    if _is_numeric(series):
        v = np.array(series.to_numpy(dtype=np.float64, na_value=np.nan), dtype=np.float64)
        miss = np.isnan(v)
        if numeric_markers:
            miss |= np.isin(v, numeric_markers)
            v[miss] = np.nan
        return None, v, miss
    text = np.asarray(series.to_numpy(dtype=object), dtype=object)
    return text, None, missing_mask(text, markers)


def _column_labels(series: Any, text: np.ndarray | None, miss: np.ndarray) -> np.ndarray:
    """The labels of one chunk of a categorical column (None where missing): text
    verbatim; a typed number column's values as text (whole numbers without ``.0``)."""
    from .parse import labels_text
    from .types import _as_text
    if text is not None:
        return labels_text(text, miss)
    out = _as_text(series)
    out[miss] = None
    return out


def _read_typed(source: Path, columns: Sequence[str] | None, chunk_rows: int,
                categorical: Sequence[str] | None, start: Any, write: Any,
                na_values: Any = None) -> tuple[list[str], dict[str, list[str]]]:
    """Read ``source`` into float64 blocks, categorical columns as codes.

    ``start()`` is called before the blocks of a pass, ``write(block)`` with each
    block. The parsing rules (missing cells, numbers, verbatim labels, which
    columns are numeric) are those of :mod:`sdcdist.data.parse`; ``na_values``
    names extra missing-value markers. A file with no categorical column (none
    declared, no text column) is read once; otherwise a first pass finds the text
    columns, a second collects the categories of the categorical columns, a third
    writes the codes. Returns the column names and ``{column: labels}``.

    Raises
    ------
    SdcInputError
        A CSV column that looks numeric but has a few non-numbers (not declared
        categorical), among others.
    """
    import pandas as pd

    from .parse import CATEGORICAL, TypeScan, missing_markers, parse_numbers
    from .types import LabelCollector, encode_column

    names, frames = _source_frames(source, columns, chunk_rows)
    markers = missing_markers(na_values)
    nmark = _numeric_markers(markers)
    declared = list(dict.fromkeys(categorical or []))
    column_positions(declared, names, what="categorical column", where=repr(source.name))
    scan = TypeScan([c for c in names if c not in declared], repr(source.name))
    typed_text: list[str] = []          # text columns of a typed (Parquet) file
    offset = 0
    start()
    for df in frames(names):
        block = np.empty((len(df), len(names)))
        for j, c in enumerate(names):
            if c in declared:
                continue
            text, v, miss = _column_cells(df[c], markers, nmark)
            if text is None:
                bad = np.zeros(miss.shape, dtype=bool)
            elif _source_kind(source) == "csv":
                v, bad = parse_numbers(text, miss)
            else:
                if c not in typed_text:
                    typed_text.append(c)
                continue
            scan.update(c, miss, bad, offset)
            block[:, j] = v
        offset += len(df)
        if not declared and not typed_text and not scan.text_so_far():
            # column-major, as pandas' to_numpy gave it: some metrics' float sums depend
            # on the layout, and the cubes of CSV inputs must stay bit for bit
            write(np.asfortranarray(block))
    kinds = scan.kinds()
    cats = [c for c in names if c in declared or c in typed_text
            or kinds.get(c) == CATEGORICAL]
    if not cats:
        return names, {}
    collector = LabelCollector(cats, repr(source.name))
    for df in frames(cats):
        labels_chunk = {}
        for c in cats:
            text, _, miss = _column_cells(df[c], markers, nmark)
            labels_chunk[c] = _column_labels(df[c], text, miss)
        collector.update(pd.DataFrame(labels_chunk, dtype=object))
    labels = collector.finish()
    start()
    for df in frames(names):
        out = np.empty((len(df), len(names)))
        for j, c in enumerate(names):
            text, v, miss = _column_cells(df[c], markers, nmark)
            if c in labels:
                out[:, j] = encode_column(_column_labels(df[c], text, miss), labels[c])
            elif text is not None:
                out[:, j] = parse_numbers(text, miss)[0]
            else:
                out[:, j] = v
        write(out)
    return names, labels


# ---------------------------------------------------------------------------
# writing stores


def _open_group(store: str, mode: str) -> Any:
    import zarr
    return zarr.open_group(store, mode=mode)


def _new_values_array(group: Any, n: int, m: int, chunk_rows: int) -> Any:
    rows = chunk_rows if n == 0 else max(1, min(chunk_rows, n))
    return group.create_array("values", shape=(n, m), chunks=(rows, m),
                              dtype="float64", dimension_names=("record", "variable"),
                              fill_value=np.nan, compressors=integrity.compressors())


class _Terminated(BaseException):
    """Raised in the main thread by SIGTERM during a staged write (not an Exception, so
    nothing on the way swallows it)."""


def _temp_name(final: Path) -> Path:
    """``.NAME.tmp-HOST-PID-RANDOM`` next to ``final``: whose write it is, so a later
    write can tell a dead writer's leftovers from a live one's."""
    host = socket.gethostname().replace("/", "_") or "host"
    return final.parent / f".{final.name}.tmp-{host}-{os.getpid()}-{uuid.uuid4().hex[:8]}"


def _pid_alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except (PermissionError, OSError):
        return True                          # exists, owned by someone else
    return True


#: Leftovers in the old ``.NAME.tmp-RANDOM`` form (no writer recorded) are removed once
#: they are this old.
_STALE_SECONDS = 24 * 3600


def remove_stale_temps(final: str | os.PathLike) -> list[str]:
    """Remove leftovers of interrupted writes to ``final`` (a local path).

    A leftover is ``.NAME.tmp-HOST-PID-RANDOM`` (optionally ``.old``) next to
    ``final``; it is stale when HOST is this machine and no process PID is
    running (a SIGKILLed ``ingest``/``synth``/``mask``). Leftovers of other
    hosts (shared file systems) or of live processes are kept; old-style names
    without a writer are removed after a day. Returns the removed paths.
    """
    final = Path(final)
    parent = final.parent
    prefix = f".{final.name}.tmp-"
    host = socket.gethostname().replace("/", "_") or "host"
    removed = []
    try:
        entries = list(parent.iterdir())
    except OSError:
        return removed
    for entry in entries:
        if not entry.name.startswith(prefix):
            continue
        rest = entry.name[len(prefix):]
        if rest.endswith(".old"):
            rest = rest[:-4]
        parts = rest.rsplit("-", 2)
        if len(parts) == 3 and parts[1].isdigit():
            stale = parts[0] == host and not _pid_alive(int(parts[1]))
        else:
            try:
                stale = time.time() - entry.stat().st_mtime > _STALE_SECONDS
            except OSError:
                stale = False
        if stale:
            if entry.is_dir():
                shutil.rmtree(entry, ignore_errors=True)
            else:
                try:
                    entry.unlink()
                except OSError:
                    pass
            removed.append(str(entry))
    return removed


class _CleanOnSigterm:
    """Around a local staged write: SIGTERM removes the temporary path, then the signal
    is delivered again to the previous handler (by default the process ends as it would
    have). Installed only in the main thread; the previous handler is restored on exit."""

    def __init__(self, path: str):
        self.path = path
        self.previous: Any = None
        self.installed = False

    def _handler(self, signum: int, frame: Any) -> None:
        # Clean up here, in the handler, rather than by unwinding: the signal may land
        # in code that swallows exceptions (Zarr's I/O waits), and the write would go on.
        self._clean()
        self._restore()
        os.kill(os.getpid(), signal.SIGTERM)     # now to the previous handler (default: end)
        raise _Terminated()                      # a previous handler that returned: unwind

    def _clean(self) -> None:
        _remove(self.path)
        # a write already handed to Zarr's I/O thread may still land: remove it again
        for _ in range(5):
            time.sleep(0.05)
            if not os.path.lexists(self.path):
                break
            _remove(self.path)

    def _restore(self) -> None:
        if self.installed:
            signal.signal(signal.SIGTERM, self.previous if self.previous is not None
                          else signal.SIG_DFL)
            self.installed = False

    def __enter__(self) -> "_CleanOnSigterm":
        if threading.current_thread() is threading.main_thread():
            prev = signal.getsignal(signal.SIGTERM)
            if prev is not signal.SIG_IGN:
                self.previous = prev
                signal.signal(signal.SIGTERM, self._handler)
                self.installed = True
        return self

    def __exit__(self, exc_type, exc, tb) -> None:
        if exc_type is not None:
            self._clean() if exc_type is _Terminated else _remove(self.path)
        self._restore()


def _remove(path: str) -> None:
    if os.path.isdir(path):
        shutil.rmtree(path, ignore_errors=True)
    elif os.path.lexists(path):
        try:
            os.remove(path)
        except OSError:
            pass


class _Staging:
    """Write a local store under a temporary name, then move it into place.

    A failed write leaves nothing behind; an existing store is replaced only
    with ``overwrite=True`` and only after the new one is complete. SIGTERM
    during the write removes the temporary folder (see :class:`_CleanOnSigterm`);
    leftovers of writers killed outright (SIGKILL) are removed by the next
    write to the same path (:func:`remove_stale_temps`).
    """

    def __init__(self, store: str | os.PathLike, overwrite: bool):
        self.final = str(store)
        self.remote = "://" in self.final and not self.final.startswith("file://")
        if self.final.startswith("file://"):
            self.final = self.final[len("file://"):]
        self.guard: _CleanOnSigterm | None = None
        if not self.remote:
            if Path(self.final).exists() and not overwrite:
                raise SdcInputError(f"{self.final!r} already exists; pass --overwrite "
                                    "(overwrite=True) to replace it, or choose another path")
            final = Path(self.final).resolve()
            final.parent.mkdir(parents=True, exist_ok=True)
            remove_stale_temps(final)
            self.path = str(_temp_name(final))
        else:
            self.path = self.final

    def __enter__(self) -> str:
        if not self.remote:
            self.guard = _CleanOnSigterm(self.path)
            self.guard.__enter__()
        return self.path

    def __exit__(self, exc_type, exc, tb) -> None:
        if self.remote:
            return
        try:
            if exc_type is not None:
                shutil.rmtree(self.path, ignore_errors=True)
                return
            if Path(self.final).exists():
                old = self.path + ".old"
                os.replace(self.final, old)
                os.replace(self.path, self.final)
                shutil.rmtree(old, ignore_errors=True)
            else:
                os.replace(self.path, self.final)
        finally:
            if self.guard is not None:
                self.guard.__exit__(exc_type, exc, tb)


def ingest(source: str | os.PathLike, store: str | os.PathLike, *,
           chunk_rows: int = DEFAULT_CHUNK_ROWS, columns: Sequence[str] | None = None,
           roles: Mapping[str, Sequence[str]] | None = None, overwrite: bool = False,
           allow_constant: bool = True, categorical: Sequence[str] | None = None,
           na_values: Sequence[str] | str | None = None) -> str:
    """Read a CSV or Parquet file into a validated Zarr store.

    Parameters
    ----------
    source : path
        CSV (``.csv``, ``.csv.gz``, ``.tsv``) or Parquet file. Never modified.
    store : path or URL
        Where to write the Zarr group.
    chunk_rows : int, keyword-only
        Records per chunk on disk.
    columns : list of str, optional
        Keep only these columns (e.g. to leave out non-numeric ones).
    roles : dict, optional
        ``{"key": [...], "confidential": [...], "weight": [...]}`` column names.
    overwrite : bool
        Replace an existing store (only once the new one is complete).
    allow_constant : bool
        Accept constant columns (a survey year); default True. Metrics that
        cannot use a constant column leave it out of their default key sets
        and say so; ``False`` refuses them here.
    categorical : list of str, optional
        Numeric (integer-coded) columns to store as categorical. Text columns
        are categorical anyway. Categorical columns are stored as codes with
        their labels (verbatim) in the ``categories`` attribute; a missing
        categorical value (an empty cell) is stored as NaN.
    na_values : list of str or comma-separated str, optional
        Cells (after trimming spaces) that mean "missing" besides empty cells,
        e.g. ``["NA", "-99"]``. By default only an empty cell is missing.

    Returns
    -------
    str
        The store path.

    Raises
    ------
    SdcInputError
        Unreadable or empty file, missing values in a numeric column, infinite
        values, a CSV column that is mostly numbers with a few non-numbers
        (a typo; declare it categorical if it is one), fewer than 3 records, duplicate names, a text column with too many
        categories, a weight column that is categorical or not positive, an
        existing store without ``overwrite``. Nothing is left behind.
    """
    source = Path(source)
    if chunk_rows < 1:
        raise param_error("chunk_rows", "ingest", "an integer >= 1", chunk_rows)
    roles = {k: list(v) for k, v in (roles or {}).items()}
    with _Staging(store, overwrite) as tmp:
        group = _open_group(tmp, "w")
        state: dict[str, Any] = {}

        def start() -> None:
            if "arr" not in state:
                state["arr"] = _new_values_array(group, 0, len(state["names"]), chunk_rows)
            state["arr"].resize((0, len(state["names"])))
            state.update(n=0, digest=integrity.ValuesDigest(),
                         checker=ValueChecker(state["names"], repr(source.name)))

        def write(block: np.ndarray) -> None:
            n = state["n"]
            state["checker"].update(block)
            state["arr"].resize((n + block.shape[0], len(state["names"])))
            state["arr"][n:n + block.shape[0]] = block
            state["digest"].update(block)
            state["n"] = n + block.shape[0]

        names = _source_names(source, columns, chunk_rows)
        state["names"] = names
        _check_source_roles(names, roles, categorical, source.name)
        names, labels = _read_typed(source, columns, chunk_rows, categorical, start, write,
                                    na_values)
        _finish_checks(state["checker"], names, roles, labels, allow_constant)
        if roles.get("weight"):
            from .types import check_weights
            w = names.index(roles["weight"][0])
            check_weights(np.array([state["checker"].lo[w]]), roles["weight"][0])
        group.attrs.update({"columns": names, "roles": roles, "n_records": state["n"],
                            "categories": labels,
                            "source": source.name, "sha256": file_sha256(source)})
        integrity.seal(group, values_sha256=state["digest"].hexdigest())
    return str(store)


def _source_names(source: Path, columns: Sequence[str] | None, chunk_rows: int) -> list[str]:
    return _source_frames(source, columns, chunk_rows)[0]


def _check_source_roles(names: Sequence[str], roles: Mapping[str, Sequence[str]],
                        categorical: Sequence[str] | None, source_name: str) -> None:
    """Roles and declared categorical columns against the file's columns (names only)."""
    from .types import check_roles
    column_positions(list(categorical or []), names, what="categorical column",
                     where=repr(source_name))
    check_roles(names, roles, categorical or (), source=repr(source_name))


def _finish_checks(checker: ValueChecker, names: Sequence[str],
                   roles: Mapping[str, Sequence[str]], labels: Mapping[str, Sequence[str]],
                   allow_constant: bool) -> None:
    """Missing, infinite and constant values (a constant weight is allowed), and a
    weight column that turned out categorical."""
    from .types import check_roles
    check_roles(names, roles, labels, source=checker.source)
    checker.finish(allow_constant=allow_constant, constant_ok=roles.get("weight") or (),
                   missing_ok=list(labels))


def write_microdata(md: Microdata, store: str | os.PathLike, *,
                    chunk_rows: int = DEFAULT_CHUNK_ROWS, overwrite: bool = False,
                    attrs: Mapping[str, Any] | None = None) -> str:
    """Write an in-memory :class:`Microdata` to a store, or to CSV/Parquet by extension."""
    out = str(store)
    low = out.lower()
    if low.endswith((".csv", ".parquet", ".pq")):
        import pandas as pd
        if Path(out).exists() and not overwrite:
            raise SdcInputError(f"{out!r} already exists; pass --overwrite to replace it")
        df = pd.DataFrame(md.values, columns=list(md.columns))
        for c, labels in md.categories.items():
            codes = md.values[:, md.columns.index(c)]
            df[c] = pd.Categorical.from_codes(np.where(np.isnan(codes), -1, codes)
                                              .astype(np.int64), categories=list(labels))
        final = Path(out).resolve()
        remove_stale_temps(final)
        tmp = str(_temp_name(final))
        try:
            with _CleanOnSigterm(tmp):
                if low.endswith(".csv"):
                    df.to_csv(tmp, index=False, float_format="%.17g")
                else:
                    df.to_parquet(tmp, index=False)
                os.replace(tmp, out)
        finally:
            if os.path.exists(tmp):
                os.remove(tmp)
        return out
    with _Staging(store, overwrite) as tmp:
        group = _open_group(tmp, "w")
        n, m = md.values.shape
        arr = _new_values_array(group, n, m, chunk_rows)
        arr[:] = md.values
        group.attrs.update({"columns": list(md.columns), "roles": md.roles, "n_records": n,
                            "categories": md.categories,
                            "sha256": md.sha256 or values_fingerprint(md.values),
                            **dict(attrs or {})})
        digest = integrity.ValuesDigest()
        digest.update(md.values)
        integrity.seal(group, values_sha256=digest.hexdigest())
    return out


# ---------------------------------------------------------------------------
# reading stores


def _store_group(store: str | os.PathLike) -> Any:
    """Open a dataset store; its metadata is checked against its manifest."""
    s = str(store)
    try:
        group = _open_group(s, "r")
        group["values"]
    except Exception:
        raise SdcInputError(f"{s!r} is not an sdcdist Zarr store (no 'values' array); "
                            "create one with 'sdcdist ingest'") from None
    problems = integrity.check_metadata(group, s)
    if problems:
        raise integrity.metadata_error(s, problems)
    return group


class StoredArray:
    """A Zarr-backed (n, m) array that tasks can slice by records.

    Pickles as its URL, so a task reads only the rows it needs from storage.
    """

    def __init__(self, url: str):
        self.url = str(url)
        self._arr = None
        self.shape = tuple(self._array().shape)

    def _array(self) -> Any:
        if self._arr is None:
            self._arr = _store_group(self.url)["values"]
        return self._arr

    def __getitem__(self, key: Any) -> np.ndarray:
        return np.asarray(integrity.read(self._array(), key, store=self.url, name="values",
                                         complete=True), dtype=np.float64)

    def __getstate__(self) -> dict:
        return {"url": self.url, "shape": self.shape}

    def __setstate__(self, state: dict) -> None:
        self.url = state["url"]
        self.shape = state["shape"]
        self._arr = None

    def __len__(self) -> int:
        return self.shape[0]

    dtype = np.dtype(np.float64)

    @property
    def ndim(self) -> int:
        return len(self.shape)


def open_microdata(store_or_url: str | os.PathLike) -> Any:
    """Open a store lazily as a Dask-backed :class:`xarray.DataArray`.

    Dims ``(record, variable)``, coordinate ``variable`` = column names; the
    group attributes (roles, fingerprint, ...) are in ``.attrs``.
    """
    import dask.array as dsa
    import xarray as xr
    from dask.base import tokenize

    url = str(store_or_url)
    group = _store_group(url)
    arr = group["values"]
    # chunks are read through StoredArray: checksums, missing chunks (no NaN fill)
    data = dsa.from_array(StoredArray(url), chunks=tuple(arr.chunks), asarray=False,
                          fancy=False, lock=False, meta=np.empty((0, 0), dtype=np.float64),
                          name="values-" + tokenize(url, group.attrs.get("integrity"),
                                                    group.attrs.get("sha256")))
    da = xr.DataArray(data, dims=("record", "variable"), name="values",
                      coords={"variable": list(group.attrs["columns"])})
    da.attrs.update(dict(group.attrs))
    return da


def _check_fingerprint(group: Any, values: np.ndarray, store: str) -> None:
    """A fully read store's values must hash to the fingerprint sealed at write time."""
    manifest = group.attrs.get(integrity.INTEGRITY_ATTR)
    want = manifest.get("values", {}).get("sha256") if isinstance(manifest, Mapping) else None
    if want:
        digest = integrity.ValuesDigest()
        digest.update(values)
        if digest.hexdigest() != want:
            raise integrity.metadata_error(store, [
                "the values' fingerprint (SHA-256) differs from the one recorded when it was "
                "written"])


def load_microdata(source: str | os.PathLike | Microdata, *,
                   columns: Sequence[str] | None = None,
                   allow_constant: bool = True,
                   categorical: Sequence[str] | None = None,
                   na_values: Sequence[str] | str | None = None) -> Microdata:
    """Load a store, a CSV or a Parquet file fully into memory, validated.

    ``categorical``: numeric columns of a CSV or Parquet file to read as
    categorical (text columns are categorical anyway); a store records its own.
    ``na_values``: cells that mean "missing" besides empty ones (CSV and Parquet
    text); see :mod:`sdcdist.data.parse` for the rules. Missing values are
    allowed in categorical columns only. Constant columns are accepted unless
    ``allow_constant`` is False.
    """
    if isinstance(source, Microdata):
        return source
    if is_store(source):
        group = _store_group(source)
        names = tuple(group.attrs["columns"])
        values = np.asarray(integrity.read(group["values"], store=str(source), name="values",
                                           complete=True), dtype=np.float64)
        _check_fingerprint(group, values, str(source))
        check_column_names(list(names), repr(str(source)))
        md = Microdata(values, names, dict(group.attrs.get("roles", {})),
                       group.attrs.get("sha256"), dict(group.attrs.get("categories", {})))
        if categorical:
            md.column_index(categorical, what="categorical column")
            undeclared = [c for c in categorical if c not in md.categories]
            if undeclared:
                raise SdcInputError(
                    f"column(s) {undeclared} of the store {str(source)!r} were stored as "
                    "numeric; declare categorical columns when ingesting (sdcdist ingest "
                    "--categorical)")
        if columns is not None:
            md = md.select(columns)
        return md
    path = Path(source)
    state: dict[str, Any] = {"names": _source_names(path, columns, DEFAULT_CHUNK_ROWS)}
    _check_source_roles(state["names"], {}, categorical, path.name)

    def start() -> None:
        state.update(parts=[], checker=ValueChecker(state["names"], repr(path.name)))

    def write(block: np.ndarray) -> None:
        state["checker"].update(block)
        state["parts"].append(block)

    names, labels = _read_typed(path, columns, DEFAULT_CHUNK_ROWS, categorical, start, write,
                                na_values)
    _finish_checks(state["checker"], names, {}, labels, allow_constant)
    # C order whatever the reader gives, as a store's values are read (same data, same layout)
    values = (np.ascontiguousarray(np.concatenate(state["parts"])) if state["parts"]
              else np.empty((0, len(names))))
    return Microdata(values, tuple(names), {}, file_sha256(path), labels)
