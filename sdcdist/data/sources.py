"""Reading CSV and Parquet sources chunk by chunk (pandas), with the checks of a text file.

Header checks (a wrong delimiter, a missing header row), field counts, damaged or
non-UTF-8 files, and :func:`read_typed_frames`, the reader every file can take: a
CSV file's cells as text verbatim, parsed by :mod:`sdcdist.data.parse`. CSV files
are read by the faster :mod:`sdcdist.data.arrowcsv` when it can (see there); this
reader is the reference and the fallback, and gives every message about a
malformed file.
"""

from __future__ import annotations

import csv
import zlib
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any

import numpy as np

from ..errors import SdcInputError, column_positions, missing_file_error, unreadable_error
from .validate import check_column_names

__all__ = ["read_typed_frames", "source_kind", "source_frames", "csv_header"]

# ---------------------------------------------------------------------------
# reading sources chunk by chunk


def source_kind(source: Path) -> str:
    suffix = "".join(source.suffixes[-2:]).lower()
    if suffix.endswith((".parquet", ".pq")):
        return "parquet"
    if suffix.endswith((".csv", ".csv.gz", ".txt", ".tsv")):
        return "csv"
    if not source.exists():         # no kind to read: first say that it is not there
        raise missing_file_error("data file", source, "check the path")
    raise unreadable_error("a data file", source.name, "unknown format", "sdcdist reads CSV "
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
    return unreadable_error("a CSV file", source.name, f"{type(exc).__name__}: {why}",
                            "check the path and that it is a complete text CSV file")


def _empty_file(source: Path) -> SdcInputError:
    return unreadable_error("a data file", source.name, "it is empty",
                            "it needs a header row and at least 3 records")


def csv_header(source: Path, sep: str) -> list[str]:
    try:
        with _open_text(source) as f:
            row = next(csv.reader(f, delimiter=sep), None)
    except _READ_ERRORS as exc:
        raise _read_error(source, exc) from None
    if row is None or not any(c.strip() for c in row):
        raise _empty_file(source)
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
        raise unreadable_error("CSV", source.name, f"malformed quoting, {type(exc).__name__}",
                               "check the quotes around values") from None
    except _READ_ERRORS as exc:
        raise _read_error(source, exc) from None


def _select(header: Sequence[str], columns: Sequence[str] | None, name: str) -> list[str]:
    if columns is None:
        return list(header)
    column_positions(columns, header, what="column", where=repr(name))
    check_column_names(list(columns), "--columns")
    return list(columns)


def source_frames(source: Path, columns: Sequence[str] | None, chunk_rows: int
                   ) -> tuple[list[str], Any]:
    """The selected column names and ``frames(usecols)``, a factory of iterators of
    pandas DataFrames of columns ``usecols``.

    A CSV file's columns come as text exactly as the file spells them (no stripping,
    no missing-value guessing: :mod:`sdcdist.data.parse` decides); a Parquet file's
    columns keep their types.
    """
    kind = source_kind(source)
    if not source.exists():
        raise missing_file_error("data file", source, "check the path")
    if source.stat().st_size == 0:
        raise _empty_file(source)
    if kind == "csv":
        sep = "\t" if source.suffix.lower() == ".tsv" else ","
        header = csv_header(source, sep)
        check_column_names(header, repr(source.name))
        names = _select(header, columns, source.name)
        checked = [False]

        def frames(usecols: Sequence[str]) -> Iterator[Any]:
            import pandas as pd         # here: reading the column names needs no pandas
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
                raise unreadable_error("CSV", source.name, type(exc).__name__,
                                       "check the delimiter and quoting") from None
        return names, frames
    try:
        import pyarrow.parquet as pq
        pf = pq.ParquetFile(source)
    except Exception as exc:  # pyarrow raises several types for unreadable files
        raise unreadable_error("a Parquet file", source.name, type(exc).__name__,
                               "check that the file is a complete Parquet file") from None
    header = list(pf.schema_arrow.names)
    check_column_names(header, repr(source.name))
    names = _select(header, columns, source.name)
    decimals = parquet_decimals(pf.schema_arrow, names, source.name)

    def pframes(usecols: Sequence[str]) -> Iterator[Any]:
        import pandas  # noqa: F401  (to_pandas needs it)
        import pyarrow as pa
        for batch in pf.iter_batches(batch_size=chunk_rows, columns=list(usecols)):
            for c in decimals.intersection(usecols):
                # decimals read as numbers: through their text, the float nearest each
                # (Arrow's direct cast divides by the scale, 0.3 -> 0.30000000000000004)
                i = batch.schema.get_field_index(c)
                x = batch.column(i).cast(pa.string()).cast(pa.float64())
                batch = batch.set_column(i, c, x)
            yield batch.to_pandas()[list(usecols)]
    return names, pframes


def parquet_decimals(schema: Any, names: Sequence[str], source_name: str) -> set[str]:
    """The columns of ``names`` of Parquet type decimal (read as float64 numbers), after
    refusing the types sdcdist does not read: nested columns (list, struct, map), dates,
    times and durations, and binary columns (bytes are neither numbers nor text).

    Numbers (integers, floats), true/false and text (also dictionary-encoded) are read as
    they are.
    """
    import pyarrow.types as pt
    decimals = set()
    for name in names:
        t = schema.field(name).type
        if pt.is_dictionary(t):
            t = t.value_type
        if pt.is_decimal(t):
            decimals.add(name)
            continue
        if pt.is_nested(t):
            kind, fix = "a nested (list, struct or map) column", "flatten it into columns of " \
                "numbers or text"
        elif pt.is_temporal(t):
            kind, fix = "a date, time or duration column", "convert it to numbers (e.g. " \
                "a year, an age in days) or to text (categories)"
        elif pt.is_binary(t) or pt.is_large_binary(t) or pt.is_fixed_size_binary(t):
            kind, fix = "a binary column", "decode it to text"
        else:
            continue
        raise SdcInputError(
            f"Column {name!r} of {source_name!r} is {kind} (Parquet type {t}), which sdcdist "
            f"does not read; {fix} before reading the file, or leave it out (--columns).")
    return decimals


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
    from .types import as_text
    if text is not None:
        return labels_text(text, miss)
    out = as_text(series)
    out[miss] = None
    return out


def read_typed_frames(source: Path, columns: Sequence[str] | None, chunk_rows: int,
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

    names, frames = source_frames(source, columns, chunk_rows)
    markers = missing_markers(na_values)
    nmark = _numeric_markers(markers)
    declared = list(dict.fromkeys(categorical or []))
    column_positions(declared, names, what="categorical column", where=repr(source.name))
    scan = TypeScan([c for c in names if c not in declared], repr(source.name))
    tscan = TypeScan([c for c in names if c not in declared], repr(source.name))
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
            elif source_kind(source) == "csv":
                v, bad = parse_numbers(text, miss)
            else:
                # a text column of a typed file is categorical, unless most of its cells
                # are numbers and a few are not: a typo, refused as in a CSV file
                if c not in typed_text:
                    typed_text.append(c)
                tscan.update(c, miss, parse_numbers(text, miss)[1], offset)
                continue
            scan.update(c, miss, bad, offset)
            block[:, j] = v
        offset += len(df)
        if not declared and not typed_text and not scan.text_so_far():
            # column-major, as pandas' to_numpy gave it: some metrics' float sums depend
            # on the layout, and the cubes of CSV inputs must stay bit for bit
            write(np.asfortranarray(block))
    kinds = scan.kinds()
    tscan.kinds()                        # raises for a typed text column with a typo
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
