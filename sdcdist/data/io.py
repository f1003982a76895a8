"""Microdata I/O: ingest CSV/Parquet into Zarr, open lazily, load into memory.

On disk a dataset is a Zarr group holding one float64 array ``values`` with
dimensions ``(record, variable)``, chunked along records, each chunk
Zstandard-compressed and CRC-32C checksummed (a corrupted chunk raises
:class:`~sdcdist.checksums.CorruptChunkError`). Stores may be local paths or
fsspec URLs (``s3://``, ``gs://``, ``file://``, ``memory://``); credentials
come from the environment (see :mod:`sdcdist.storage`). The group's
attributes carry the variable names (``columns``), their roles (``roles``:
``{"key": [...], "confidential": [...]}``), the record count and the SHA-256
of the source file.
"""

from __future__ import annotations

import os
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import numpy as np

from .. import checksums, integrity
from ..errors import SdcInputError, column_positions, exists_error, param_error, weight_error
from .arrowcsv import read_typed
from .microdata import (DEFAULT_CHUNK_ROWS, Microdata, align_categories, check_typed,
                        file_sha256_in_background, from_array, is_store, values_fingerprint)
from .staging import (CleanOnSigterm, new_values_array, open_zarr_group, Staging, temp_name,
                      remove_stale_temps)
from .sources import source_frames
from .stores import StoredArray, check_fingerprint, store_group, open_microdata
from .validate import ValueChecker, check_column_names

__all__ = ["Microdata", "align_categories", "ingest", "open_microdata", "load_microdata",
           "source_columns",
           "write_microdata", "from_array", "StoredArray", "is_store", "DEFAULT_CHUNK_ROWS",
           "check_typed", "remove_stale_temps", "values_fingerprint", "write_table_file"]


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
    with Staging(store, overwrite, inputs=(source,)) as tmp:
        group = open_zarr_group(tmp, "w")
        state: dict[str, Any] = {}

        def start() -> None:
            if "arr" not in state:
                state["arr"] = new_values_array(group, 0, len(state["names"]), chunk_rows)
            state["arr"].resize((0, len(state["names"])))
            state.update(n=0, bad_weights=0, digest=integrity.ValuesDigest(),
                         checker=ValueChecker(state["names"], repr(source.name)))

        def write(block: np.ndarray) -> None:
            n = state["n"]
            state["checker"].update(block)
            if roles.get("weight") and roles["weight"][0] in state["names"]:
                from .types import bad_weights
                j = state["names"].index(roles["weight"][0])
                state["bad_weights"] += bad_weights(block[:, j])
            if roles.get("household") and roles["household"][0] in state["names"]:
                from .types import check_household_ids
                h = roles["household"][0]
                check_household_ids(block[:, state["names"].index(h)], h, repr(source.name))
            state["arr"].resize((n + block.shape[0], len(state["names"])))
            state["arr"][n:n + block.shape[0]] = block
            state["digest"].update(block)
            state["n"] = n + block.shape[0]

        names = _source_names(source, columns, chunk_rows)
        state["names"] = names
        _check_source_roles(names, roles, categorical, source.name)
        sha256 = file_sha256_in_background(source)
        names, labels = read_typed(source, columns, chunk_rows, categorical, start, write,
                                   na_values)
        _finish_checks(state["checker"], names, roles, labels, allow_constant)
        if roles.get("weight") and state["bad_weights"]:
            raise weight_error(roles["weight"][0], bad=state["bad_weights"])
        group.attrs.update({"columns": names, "roles": roles, "n_records": state["n"],
                            "categories": labels,
                            "source": source.name, "sha256": sha256()})
        integrity.seal(group, values_sha256=state["digest"].hexdigest())
    return str(store)


def _source_names(source: Path, columns: Sequence[str] | None, chunk_rows: int) -> list[str]:
    return source_frames(source, columns, chunk_rows)[0]


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
        return write_table_file(md.values, md.columns, md.categories, out,
                                overwrite=overwrite, chunk_rows=chunk_rows)
    with Staging(store, overwrite) as tmp:
        group = open_zarr_group(tmp, "w")
        n, m = md.values.shape
        arr = new_values_array(group, n, m, chunk_rows)
        arr[:] = md.values
        group.attrs.update({"columns": list(md.columns), "roles": md.roles, "n_records": n,
                            "categories": md.categories,
                            "sha256": md.sha256 or values_fingerprint(md.values),
                            **dict(attrs or {})})
        digest = integrity.ValuesDigest()
        digest.update(md.values)
        integrity.seal(group, values_sha256=digest.hexdigest())
    return out


def write_table_file(values: np.ndarray, columns: Sequence[str],
                     categories: Mapping[str, Sequence[str]], out: str | os.PathLike, *,
                     overwrite: bool = False, chunk_rows: int = DEFAULT_CHUNK_ROWS) -> str:
    """Write records as CSV or Parquet (by extension), ``chunk_rows`` records at a time.

    Categorical columns are written as their labels (a missing code as an empty cell /
    null), numbers with 17 significant digits in CSV. Only one chunk is ever converted
    to a table, so a file of any length needs memory for ``values`` and one chunk. The
    file is written under a temporary name and moved into place when complete (nothing
    half-written is left, even on SIGTERM). The same records give the same bytes, whatever
    wrote them (``sdcdist mask``, ``sdcdist release``).
    """
    import pandas as pd
    out = str(out)
    low = out.lower()
    if Path(out).exists() and not overwrite:
        raise exists_error("file", out)
    columns = [str(c) for c in columns]
    cat_index = {c: columns.index(c) for c in categories if c in columns}

    def frame(i: int) -> Any:
        block = values[i:i + chunk_rows]
        df = pd.DataFrame(block, columns=columns)
        for c, j in cat_index.items():
            codes = block[:, j]
            df[c] = pd.Categorical.from_codes(np.where(np.isnan(codes), -1, codes)
                                              .astype(np.int64),
                                              categories=list(categories[c]))
        return df

    starts = range(0, max(values.shape[0], 1), chunk_rows)
    final = Path(out).resolve()
    remove_stale_temps(final)
    tmp = str(temp_name(final))
    try:
        with CleanOnSigterm(tmp):
            if low.endswith(".csv"):
                with open(tmp, "w", newline="", encoding="utf-8") as f:
                    for k, i in enumerate(starts):
                        frame(i).to_csv(f, index=False, header=k == 0, float_format="%.17g")
            else:
                import pyarrow as pa
                import pyarrow.parquet as pq
                writer = None
                try:
                    for i in starts:
                        df = frame(i)
                        if writer is None:
                            table = pa.Table.from_pandas(df, preserve_index=False)
                            writer = pq.ParquetWriter(tmp, table.schema)
                        else:
                            table = pa.Table.from_pandas(df, schema=writer.schema,
                                                         preserve_index=False)
                        writer.write_table(table)
                finally:
                    if writer is not None:
                        writer.close()
            os.replace(tmp, out)
    finally:
        if os.path.exists(tmp):
            os.remove(tmp)
    return out


def load_microdata(source: str | os.PathLike | Microdata, *,
                   columns: Sequence[str] | None = None,
                   allow_constant: bool = True,
                   categorical: Sequence[str] | None = None,
                   na_values: Sequence[str] | str | None = None,
                   only: Sequence[str] | None = None,
                   fingerprint: bool = True) -> Microdata:
    """Load a store, a CSV or a Parquet file fully into memory, validated.

    ``categorical``: numeric columns of a CSV or Parquet file to read as
    categorical (text columns are categorical anyway); a store records its own.
    ``na_values``: cells that mean "missing" besides empty ones (CSV and Parquet
    text); see :mod:`sdcdist.data.parse` for the rules. Missing values are
    allowed in categorical columns only. Constant columns are accepted unless
    ``allow_constant`` is False.

    ``only``: the columns a caller will read (those of ``categorical`` too). The other
    columns of a CSV file are then checked without being kept, when that gives the same
    outcome: when every cell of theirs is a plain finite number, the result holds only
    the columns read (in file order); otherwise, and for stores, Parquet files and files
    the fast reader does not read, every column is read as without ``only``, so every
    refusal and its message are those of a whole read. :func:`source_columns` gives
    all of the file's columns.

    ``fingerprint``: compute the SHA-256 of a CSV or Parquet file (``sha256``); False
    leaves it None, for a caller that does not record it.
    """
    if isinstance(source, Microdata):
        return source
    if is_store(source):
        group = store_group(source)
        names = tuple(group.attrs["columns"])
        values = np.asarray(checksums.read(group["values"], store=str(source), name="values",
                                           complete=True), dtype=np.float64)
        check_fingerprint(group, values, str(source))
        bad = integrity.code_problems(dict(group.attrs.get("categories", {})),
                                      list(group.attrs["columns"]), lambda j: values[:, j])
        if bad:
            raise integrity.malformed_error(str(source), bad)
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
    if only is not None and columns is None and allow_constant:
        md = _load_read_columns(path, state["names"], only, categorical, na_values,
                                fingerprint)
        if md is not None:
            return md

    def start() -> None:
        state.update(parts=[], checker=ValueChecker(state["names"], repr(path.name)))

    def write(block: np.ndarray) -> None:
        state["checker"].update(block)
        state["parts"].append(block)

    sha256 = file_sha256_in_background(path) if fingerprint else (lambda: None)
    names, labels = read_typed(path, columns, DEFAULT_CHUNK_ROWS, categorical, start, write,
                               na_values, keep=True)
    _finish_checks(state["checker"], names, {}, labels, allow_constant)
    return Microdata(_stacked(state["parts"], len(names)), tuple(names), {}, sha256(), labels)


def _stacked(parts: list[np.ndarray], width: int) -> np.ndarray:
    """The blocks one under the other, in C order whatever the reader gives, as a store's
    values are read (same data, same layout); each block freed once copied."""
    values = np.empty((sum(len(p) for p in parts), width))
    row = 0
    while parts:
        block = parts.pop(0)
        values[row:row + len(block)] = block
        row += len(block)
    return values


def _load_read_columns(path: Path, names: Sequence[str], only: Sequence[str],
                       categorical: Sequence[str] | None, na_values: Any,
                       fingerprint: bool) -> Microdata | None:
    """``load_microdata(only=...)``'s reading of the columns read, the others checked to
    be plain finite numbers; None when the whole file must be read (see there)."""
    from ..errors import SdcInputError
    from .arrowcsv import NotPlain
    from .sources import source_kind
    wanted = set(only) | set(categorical or ())
    kept = [c for c in names if c in wanted]
    rest = [c for c in names if c not in wanted]
    if not rest or len(kept) != len(wanted) or source_kind(path) != "csv":
        return None             # a message naming a column the file lacks lists them all
    state: dict[str, Any] = {}

    def start() -> None:
        state.update(parts=[], checker=ValueChecker(kept, repr(path.name)))

    def write(block: np.ndarray) -> None:
        state["checker"].update(block)
        state["parts"].append(block)

    sha256 = file_sha256_in_background(path) if fingerprint else (lambda: None)
    try:
        got, labels = read_typed(path, kept, DEFAULT_CHUNK_ROWS, categorical, start, write,
                                 na_values, keep=True, check=rest)
        # the columns left out are complete and numeric: what a whole read would refuse
        # here, it refuses in these columns; the whole read below words it
        _finish_checks(state["checker"], got, {}, labels, True)
    except (NotPlain, SdcInputError):
        return None
    return Microdata(_stacked(state["parts"], len(got)), tuple(got), {}, sha256(), labels)


def source_columns(source: str | os.PathLike) -> list[str]:
    """All the column names of a CSV or Parquet file, or of a store, in their order."""
    if is_store(source):
        return list(store_group(source).attrs["columns"])
    return _source_names(Path(source), None, DEFAULT_CHUNK_ROWS)
