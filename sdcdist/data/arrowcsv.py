"""The fast CSV reader: Arrow's multithreaded parser, sdcdist's parsing rules.

Arrow (``pyarrow.csv``) splits the file into fields, in blocks of a few
megabytes, on several threads, and hands every column over as text exactly as
the file spells it (quoting off, no type inference, nothing taken as missing).
The rules of :mod:`sdcdist.data.parse` then decide, as for every reader:

- a column's cells become numbers by Arrow's cast when every cell of the block is
  a plain decimal (Arrow's parser is correctly rounded, so the value is exactly
  ``float(cell)``; ``tests/test_parsing.py`` checks this bit for bit); a block
  with any other cell (text, an empty or padded cell, ``1_000``) is dictionary-
  encoded, and each *distinct* cell is judged once by :func:`~sdcdist.data.parse.
  missing_mask` and :func:`~sdcdist.data.parse.parse_numbers`;
- categorical columns (declared, or text per :class:`~sdcdist.data.parse.TypeScan`)
  are coded through their dictionaries: labels verbatim, codes in
  :func:`~sdcdist.data.types.label_order`, so a file gives the same codes, and
  the same cube, whichever reader read it.

Anything this reader does not handle exactly as the reference reader
(:mod:`sdcdist.data.sources`) does — a quote character anywhere, a row whose
field count differs from the header's, a line of spaces, text that is not
UTF-8, a damaged gzip file, a one-column file — makes it step aside: the file is
then read by the reference reader, which gives the same values and every
message about a malformed file. Memory stays bounded by the block size when
streaming into a store (:func:`read_typed` with ``keep=False``).
"""

from __future__ import annotations

import zlib
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any

import numpy as np

from ..errors import column_positions

__all__ = ["read_typed", "BLOCK_BYTES", "NotPlain"]

#: Bytes of text Arrow parses per block (one batch of records per block).
BLOCK_BYTES = 1 << 23


class _StepAside(Exception):
    """This file is read by the reference reader instead (never reaches the user)."""


class NotPlain(Exception):
    """A column read only to be checked (``check`` of :func:`read_typed`) holds a cell that
    is not a plain finite number, or the file is one this reader steps aside for: the
    caller reads the whole file instead, which gives every value and every message
    (never reaches the user)."""


def _arrow_errors() -> tuple[type[BaseException], ...]:
    import pyarrow as pa
    return (pa.ArrowException, OSError, EOFError, ValueError, zlib.error)


def _batches(source: Path, header: Sequence[str], usecols: Sequence[str], sep: str,
             block_bytes: int, numbers: Sequence[str] = (),
             coded: Sequence[str] = ()) -> Iterator[list[Any]]:
    """Arrow string arrays of ``usecols`` (in that order), one list per block of records,
    followed by float64 arrays of ``numbers`` converted by Arrow's CSV reader (a cell it
    does not read as a number fails the block: :class:`_StepAside`). The columns of
    ``usecols`` in ``coded`` come dictionary-encoded by the reader (the same cells and
    entries as ``dictionary_encode`` of their text, encoded as they are parsed)."""
    import pyarrow as pa
    import pyarrow.csv as pacsv
    errors = _arrow_errors()
    text, codes = pa.string(), pa.dictionary(pa.int32(), pa.string())
    types = {**{c: codes if c in coded else text for c in usecols},
             **{c: pa.float64() for c in numbers}}
    # an uncompressed file is read through a memory map: its blocks come from the page
    # cache, not copied into fresh buffers first
    mapped = None
    if Path(source).suffix.lower() in (".csv", ".tsv"):
        try:
            mapped = pa.memory_map(str(source))
        except errors:                  # not a file that maps (a pipe): read as a stream
            mapped = None
    try:
        reader = pacsv.open_csv(
            mapped if mapped is not None else str(source),
            read_options=pacsv.ReadOptions(use_threads=True, block_size=block_bytes,
                                           skip_rows=1, column_names=list(header)),
            parse_options=pacsv.ParseOptions(delimiter=sep, quote_char=False,
                                             double_quote=False, escape_char=False,
                                             newlines_in_values=False,
                                             ignore_empty_lines=True),
            convert_options=pacsv.ConvertOptions(
                column_types=types, include_columns=list(types),
                null_values=[], strings_can_be_null=False, quoted_strings_can_be_null=False,
                check_utf8=True))
    except errors:
        if mapped is not None:
            mapped.close()
        raise _StepAside() from None
    try:
        while True:
            try:
                batch = reader.read_next_batch()
            except StopIteration:
                return
            except errors:
                raise _StepAside() from None
            # a quote character can only be in a column read through its dictionary (no
            # number holds one); _dictionary_part steps aside for it
            yield [batch.column(c) for c in types]
    finally:
        if mapped is not None:
            mapped.close()


def _ahead(batches: Iterator[list[Any]], depth: int = 2) -> Iterator[list[Any]]:
    """The same blocks, parsed by Arrow on a thread up to ``depth`` blocks ahead of the
    caller (Arrow's streaming reader is single-threaded; its parsing and this module's
    conversion, both outside the GIL, then run at once). Errors reach the caller."""
    import queue
    import threading
    q: queue.Queue = queue.Queue(maxsize=depth)
    stop = threading.Event()

    def put(item: tuple[str, Any]) -> bool:
        while not stop.is_set():
            try:
                q.put(item, timeout=0.1)
                return True
            except queue.Full:
                continue
        return False

    def run() -> None:
        try:
            for cols in batches:
                if not put(("block", cols)):
                    return
            put(("end", None))
        except BaseException as exc:        # handed to the caller
            put(("error", exc))

    thread = threading.Thread(target=run, name="sdcdist-csv", daemon=True)
    thread.start()
    try:
        while True:
            kind, value = q.get()
            if kind == "block":
                yield value
            elif kind == "end":
                return
            else:
                raise value
    finally:
        stop.set()
        thread.join()


def _as_numpy(a: Any, dtype: Any) -> np.ndarray:
    """An Arrow array of a fixed-width number type as numpy: its data buffer itself when
    it has no nulls (``to_numpy`` would give the same values, but imports pandas on its
    first call: more time than reading a million records), else ``to_numpy``."""
    dtype = np.dtype(dtype)
    if a.null_count == 0 and len(a):
        buf = a.buffers()[1]
        if buf is not None and a.type.bit_width == 8 * dtype.itemsize:
            return np.frombuffer(buf, dtype=dtype, count=len(a), offset=a.offset *
                                 dtype.itemsize)
    return np.asarray(a.to_numpy(zero_copy_only=False), dtype=dtype)


def _call(name: str, args: list[Any], options: Any = None) -> Any:
    """Arrow's compute function ``name``, called through ``pyarrow._compute``: importing
    ``pyarrow.compute`` builds a Python wrapper with a scraped docstring for each of its
    hundreds of functions, more time than the few this reader calls take on a million
    records."""
    from pyarrow._compute import call_function
    return call_function(name, args, options)


def _arrow_mask(mask: np.ndarray) -> Any:
    """A numpy bool array as an Arrow boolean array, built from its bits (``pa.array``
    of a numpy array imports pandas)."""
    import pyarrow as pa
    bits = np.packbits(np.asarray(mask, dtype=bool), bitorder="little")
    return pa.Array.from_buffers(pa.bool_(), len(mask), [None, pa.py_buffer(bits)])


def _cast_numbers(a: Any) -> np.ndarray | None:
    """``float(cell)`` of every cell when Arrow reads them all as numbers, else None.

    Arrow reads the text ``nan`` as a number; :mod:`sdcdist.data.parse` does not (it is
    missing only when named), so a block where a present cell gave NaN is not numbers
    only (the caller then judges each distinct cell by the shared rules)."""
    import pyarrow as pa
    from pyarrow._compute import CastOptions
    try:
        out = _call("cast", [a], CastOptions.safe(pa.float64()))
    except (pa.ArrowInvalid, pa.ArrowNotImplementedError):
        return None
    v = _as_numpy(out, np.float64)
    nan = np.isnan(v)
    if nan.any():
        if a.null_count == 0:
            return None             # every cell is present (the reader's text never null)
        if (nan & np.asarray(_call("is_valid", [a]).to_numpy(zero_copy_only=False),
                             dtype=bool)).any():
            return None
    return v


class _Part:
    """One block of one column: numbers for every cell (``values``), or a dictionary
    (distinct cells ``entries`` and each cell's entry ``index``) with, per entry, whether
    it is missing, its number (NaN where missing or not a number) and whether it is
    not a number."""

    __slots__ = ("n", "values", "entries", "index", "missing", "number", "bad")

    def __init__(self, n: int) -> None:
        self.n = n
        self.values: np.ndarray | None = None
        self.entries: np.ndarray | None = None
        self.index: np.ndarray | None = None
        self.missing: np.ndarray | None = None
        self.number: np.ndarray | None = None
        self.bad: np.ndarray | None = None

    def numbers(self) -> np.ndarray:
        """Each cell's number (NaN where missing or not a number)."""
        if self.values is not None:
            return self.values
        return self.number[self.index]          # type: ignore[index]

    def cell_masks(self) -> tuple[np.ndarray, np.ndarray]:
        """(missing, not a number) per cell."""
        if self.values is not None:
            z = np.zeros(self.n, dtype=bool)
            return z, z
        return self.missing[self.index], self.bad[self.index]   # type: ignore[index]

    def codes(self, labels: Sequence[str]) -> np.ndarray:
        """Codes (float64, NaN where missing) under ``labels``, which hold every entry."""
        pos = {lab: i for i, lab in enumerate(labels)}
        code = np.array([np.nan if m else pos[e] for e, m in
                         zip(self.entries.tolist(), self.missing.tolist())],  # type: ignore
                        dtype=np.float64)
        return code[self.index]                 # type: ignore[index]


def _dictionary_part(a: Any, markers: frozenset[str], parse: bool) -> _Part:
    """A block of one column, dictionary-encoded; each distinct cell judged once."""
    from pyarrow._compute import (DictionaryEncodeOptions, MatchSubstringOptions,
                                  ScalarAggregateOptions)

    from .parse import missing_mask, parse_numbers
    import pyarrow as pa
    d = a if pa.types.is_dictionary(a.type) else \
        _call("dictionary_encode", [a], DictionaryEncodeOptions())
    if _call("any", [_call("match_substring", [d.dictionary], MatchSubstringOptions('"'))],
             ScalarAggregateOptions()).as_py():
        raise _StepAside()          # quoted fields are the reference reader's (quoting off)
    part = _Part(len(a))
    # to_pylist, not to_numpy: pyarrow converts strings to numpy through pandas, whose
    # import costs more than reading a million records
    entries = d.dictionary.to_pylist()
    part.entries = np.empty(len(entries), dtype=object)
    part.entries[:] = entries
    part.index = _as_numpy(d.indices, np.int32) if d.indices.null_count == 0 else \
        d.indices.to_numpy(zero_copy_only=False)                 # int32
    part.missing = missing_mask(part.entries, markers)
    if parse:
        present = ~part.missing
        number = np.full(len(part.entries), np.nan)
        bad = np.zeros(len(part.entries), dtype=bool)
        if present.all():
            fast = _cast_numbers(d.dictionary)
        elif present.any():
            from pyarrow._compute import FilterOptions
            fast = _cast_numbers(_call("filter", [d.dictionary, _arrow_mask(present)],
                                       FilterOptions()))
        else:
            fast = np.empty(0)
        if fast is not None:
            number[present] = fast
        else:
            number, bad = parse_numbers(part.entries, part.missing)
        part.number, part.bad = number, bad
    return part


class _Labels:
    """Distinct present labels of one column, up to one more than the level limit."""

    def __init__(self) -> None:
        self.seen: set[str] = set()
        self.over = False

    def update(self, part: _Part) -> None:
        from .types import MAX_LEVELS
        if self.over:
            return
        self.seen.update(e for e, m in zip(part.entries.tolist(),   # type: ignore[union-attr]
                                           part.missing.tolist()) if not m)  # type: ignore
        if len(self.seen) > MAX_LEVELS:
            self.over = True
            self.seen = set()


def read_typed(source: Path, columns: Sequence[str] | None, chunk_rows: int,
               categorical: Sequence[str] | None, start: Any, write: Any,
               na_values: Any = None, *, keep: bool = False,
               block_bytes: int | None = None,
               check: Sequence[str] = ()) -> tuple[list[str], dict[str, list[str]]]:
    """Read ``source`` into float64 blocks, categorical columns as codes.

    The contract of :func:`sdcdist.data.sources.read_typed_frames` (``start()`` before
    the blocks of a pass, ``write(block)`` for each, the same values, labels and
    messages): a CSV file goes through Arrow when it can, anything else (Parquet, a
    file Arrow does not read as the reference reader does) through pandas.

    ``keep``: hold the blocks (compactly: codes through small dictionaries) and
    write them after one pass, for a caller that keeps the whole file in memory
    anyway; otherwise a file with categorical columns is read twice (types and
    labels, then codes), in memory bounded by ``block_bytes`` (default
    :data:`BLOCK_BYTES`) times Arrow's read-ahead.

    ``check``: other columns of a CSV file (not among ``columns``), read only to be
    checked: Arrow's CSV reader converts them to float64 (its decimal parser, as its cast
    below, after trimming spaces and tabs, which ``float`` trims too), and every value
    must be finite (no missing-value markers given); their values are not kept. Anything
    else raises :class:`NotPlain` (so does a file this reader would hand to the reference
    reader), and the caller then reads every column. When no exception is raised, the
    columns read give what reading all of them would, messages included: every cell of
    those other columns is a finite number that :func:`~sdcdist.data.parse.parse_numbers`
    reads too (Arrow's parser takes no underscores, no empty cell), so they are numeric
    and complete, and would neither be refused nor change a type or a message.

    Returns the column names and ``{column: labels}``.
    """
    from .sources import csv_header, source_frames, source_kind, read_typed_frames
    names = source_frames(source, columns, chunk_rows)[0]      # checks: path, header
    if source_kind(source) == "csv":
        sep = "\t" if source.suffix.lower() == ".tsv" else ","
        header = csv_header(source, sep)
        if len(header) > 1:
            try:
                return _read_arrow(source, header, names, sep, categorical, start, write,
                                   na_values, keep, block_bytes or BLOCK_BYTES, check)
            except _StepAside:
                pass
    if check:
        raise NotPlain()
    return read_typed_frames(source, columns, chunk_rows, categorical, start, write,
                             na_values)


def _check_plain(a: Any) -> None:
    """Raise :class:`NotPlain` unless every value of ``a`` (float64, from Arrow's CSV
    reader) is finite (Arrow reads ``nan`` and ``inf`` as numbers)."""
    if a.null_count or not np.isfinite(_as_numpy(a, np.float64)).all():
        raise NotPlain()


def _read_arrow(source: Path, header: Sequence[str], names: list[str], sep: str,
                categorical: Sequence[str] | None, start: Any, write: Any, na_values: Any,
                keep: bool, block_bytes: int,
                check: Sequence[str] = ()) -> tuple[list[str], dict[str, list[str]]]:
    from .parse import CATEGORICAL, TypeScan, missing_markers
    from .types import label_order, too_many_levels

    markers = missing_markers(na_values)
    check = [c for c in check if c not in names]
    if check and (markers or not keep):
        raise NotPlain()            # a marker could make a cell of them missing
    declared = list(dict.fromkeys(categorical or []))
    column_positions(declared, names, what="categorical column", where=repr(source.name))
    scan = TypeScan([c for c in names if c not in declared], repr(source.name))
    text = set(declared)                # columns read through dictionaries from now on
    had_numbers: set[str] = set()       # columns with a block read as numbers only
    labels_of = {c: _Labels() for c in names}
    kept: list[dict[str, _Part]] = []
    offset = 0
    start()

    def part_of(c: str, a: Any, collect: bool) -> _Part:
        if c in declared:
            part = _dictionary_part(a, markers, parse=False)
        else:
            part = None
            if c not in text and not markers:
                v = _cast_numbers(a)
                if v is not None:
                    part = _Part(len(a))
                    part.values = v
                    had_numbers.add(c)
            if part is None:
                part = _dictionary_part(a, markers, parse=True)
                text.add(c)
        if collect and part.entries is not None:
            labels_of[c].update(part)
        return part

    for cols in _ahead(_batches(source, header, names, sep, block_bytes, check,
                                coded=declared)):
        for a in cols[len(names):]:
            _check_plain(a)
        cols = cols[:len(names)]
        parts = {c: part_of(c, a, True) for c, a in zip(names, cols)}
        n = len(cols[0]) if cols else 0
        for c in scan.names:
            miss, bad = parts[c].cell_masks()
            scan.update(c, miss, bad, offset)
        offset += n
        if keep:
            kept.append(parts)
        elif not declared and not scan.text_so_far():
            write(_block(parts, names, {}))
    kinds = scan.kinds()
    cats = [c for c in names if c in declared or kinds.get(c) == CATEGORICAL]
    if not cats:
        while kept:
            write(_block(kept.pop(0), names, {}))
        return names, {}
    late = [c for c in cats if c in had_numbers]
    if late:
        # a text column with whole blocks of numbers first: its labels from the text
        i = 0
        for cols in _ahead(_batches(source, header, late, sep, block_bytes)):
            for c, a in zip(late, cols):
                part = _dictionary_part(a, markers, parse=False)
                labels_of[c].update(part)
                if keep:
                    if i >= len(kept) or kept[i][c].n != part.n:
                        raise _StepAside()      # blocks differ between passes: not expected
                    kept[i][c] = part
            i += 1
        if keep and i != len(kept):
            raise _StepAside()
    for c in cats:
        if labels_of[c].over:
            raise too_many_levels(c, repr(source.name))
    labels = {c: label_order(labels_of[c].seen) for c in cats}
    if keep:
        while kept:                     # each block's parts freed once written
            write(_block(kept.pop(0), names, labels))
        return names, labels
    start()
    declared = cats                     # the second pass codes every categorical column
    for cols in _ahead(_batches(source, header, names, sep, block_bytes)):
        parts = {c: part_of(c, a, False) for c, a in zip(names, cols)}
        write(_block(parts, names, labels))
    return names, labels


def _block(parts: dict[str, _Part], names: Sequence[str],
           labels: dict[str, list[str]]) -> np.ndarray:
    """The float64 (records, columns) block of one batch: codes or numbers."""
    n = parts[names[0]].n if names else 0
    out = np.empty((n, len(names)), order="F")      # columns filled and checked whole
    for j, c in enumerate(names):
        p = parts[c]
        out[:, j] = p.codes(labels[c]) if c in labels else p.numbers()
    return out
