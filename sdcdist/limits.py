"""Upper bounds on what a spec or a command can ask for, and why each is where it is.

A spec of a few hundred bytes must not be able to ask for days of work, or
more memory than a machine has, before anything refuses it. The bounds
below lie far above any real use. They are checked when a spec is parsed or
a command's arguments are read: before data is loaded, a cluster started or
a cube created. :data:`LIMITS` lists them all by name.

========================  ==============  ==============================================
name                      value           why
========================  ==============  ==============================================
``MAX_ROWS``              10^9            records of a generated file (``synth --rows``,
                                          ``synthetic.rows``): 10^9 x 13 columns x 8 bytes
                                          is about 100 GB, before compression
``MAX_COLUMNS``           13              columns of a generated file: the generator has
                                          13 variables (:data:`sdcdist.data.synth.COLUMNS`)
``MAX_MEMORY_BYTES``      8 GiB           a file built in memory (rows x columns x 8
                                          bytes): an audit holds each dataset in memory,
                                          and ``synth`` builds CSV and Parquet output in
                                          memory (Zarr output is streamed)
``MAX_REPLICATES``        1000            replicates of each cell; beyond that the mean
                                          over replicates does not move
``MAX_CELLS``             10^6            cells of an audit (datasets x replicates x the
                                          parameter values of all methods); each cell
                                          masks and measures a whole file
``MAX_TOP_C``             1000            linkage candidates kept per masked record; the
                                          sparse assignment holds n x top_c weights
``MAX_CHUNK_ROWS``        2^22            records per chunk (``--chunk-rows``): a chunk is
                                          read whole into a worker's memory; 2^22 x 13
                                          columns x 8 bytes is about 440 MB
``MAX_QUERY_DEPTH``       100             nesting of parentheses in a ``query --where``
                                          filter
``MAX_SPEC_BYTES``        1 MiB           size of a spec file
``MAX_YAML_DEPTH``        50              nesting of lists and mappings in a spec (a
                                          spec needs about five levels)
``MAX_EM_ITER``           10^7            PRL EM steps (``prl_em: {max_iter}``, ``link
                                          --em``): the fit keeps one float64 per step
                                          (80 MB); SQUAREM converges within 10^4
``MAX_ATTACKS``           10^5            attacks per attack kind (``attack_n``): each
                                          is a nearest-neighbour query or a singling-out
                                          query; at 10^5 the Wilson interval is about
                                          +-0.3 points wide, anonymeter's default is 500
``MAX_ATTEMPTS``          10^9            candidate queries of the multivariate
                                          singling-out attacker (``so_max_attempts``)
``MAX_QUERY_COLUMNS``     64              columns per singling-out query (``so_n_cols``,
                                          also at most the attack columns of the file)
                                          and largest SUDA2 search (``suda_max_size``)
========================  ==============  ==============================================

>>> check_rows(10**10, columns=8, what="--rows", in_memory=False)
Traceback (most recent call last):
...
sdcdist.errors.SdcInputError: --rows must be an integer in [3, 1000000000] (10^9 records of 13 columns are about 100 GB, the largest file sdcdist generates). Got 10000000000 instead.
"""

from __future__ import annotations

from .errors import SdcInputError, value_error

__all__ = ["LIMITS", "MAX_ROWS", "MAX_COLUMNS", "MAX_MEMORY_BYTES", "MAX_REPLICATES",
           "MAX_CELLS", "MAX_TOP_C", "MAX_DENSE", "MAX_CHUNK_ROWS", "MAX_QUERY_DEPTH", "MAX_SPEC_BYTES", "MAX_YAML_DEPTH",
           "MAX_EM_ITER", "MAX_ATTACKS", "MAX_ATTEMPTS", "MAX_QUERY_COLUMNS", "check_rows"]

MIN_ROWS = 3
MAX_ROWS = 10**9
MAX_COLUMNS = 13
MAX_MEMORY_BYTES = 8 * 2**30
MAX_REPLICATES = 1000
MAX_CELLS = 10**6
MAX_TOP_C = 1000
#: largest file linked by a dense exact assignment: its n x n float64 weights fill
#: MAX_MEMORY_BYTES (32768**2 * 8 bytes = 8 GiB)
MAX_DENSE = 32768
MAX_CHUNK_ROWS = 2**22
MAX_QUERY_DEPTH = 100
MAX_SPEC_BYTES = 2**20
MAX_YAML_DEPTH = 50
MAX_EM_ITER = 10**7
MAX_ATTACKS = 10**5
MAX_ATTEMPTS = 10**9
MAX_QUERY_COLUMNS = 64

#: Every bound by name (for the CLI's option ranges and the docs).
LIMITS: dict[str, int] = {
    "rows": MAX_ROWS, "columns": MAX_COLUMNS, "memory_bytes": MAX_MEMORY_BYTES,
    "replicates": MAX_REPLICATES, "cells": MAX_CELLS, "top_c": MAX_TOP_C, "dense": MAX_DENSE, "chunk_rows": MAX_CHUNK_ROWS,
    "query_depth": MAX_QUERY_DEPTH, "spec_bytes": MAX_SPEC_BYTES, "yaml_depth": MAX_YAML_DEPTH,
    "em_iter": MAX_EM_ITER, "attacks": MAX_ATTACKS, "attempts": MAX_ATTEMPTS,
    "query_columns": MAX_QUERY_COLUMNS,
}


def check_rows(rows: object, *, columns: int, what: str, in_memory: bool,
               hint: str = "") -> int:
    """Check the size of a generated file; return ``rows``.

    Parameters
    ----------
    rows : int
        Number of records asked for.
    columns : int
        Number of columns (already checked to be in [1, :data:`MAX_COLUMNS`]).
    what : str
        How the user wrote it, for the message (``"--rows"``,
        ``"'dataset'.synthetic.rows"``).
    in_memory : bool
        Whether the whole file is built in memory (an audit's dataset, CSV or
        Parquet output of ``synth``), which bounds it by :data:`MAX_MEMORY_BYTES`
        as well.
    hint : str, optional
        A way out appended to the memory message (``synth``: "write a Zarr store
        instead, which is streamed").

    Raises
    ------
    SdcInputError
        If ``rows`` is not an integer in [3, :data:`MAX_ROWS`] or the file does
        not fit in :data:`MAX_MEMORY_BYTES`.
    """
    if isinstance(rows, bool) or not isinstance(rows, int) or not \
            MIN_ROWS <= rows <= MAX_ROWS:
        raise value_error(what, f"an integer in [{MIN_ROWS}, {MAX_ROWS}] (10^9 records of "
                          f"{MAX_COLUMNS} columns are about 100 GB, the largest file sdcdist "
                          "generates)", rows)
    need = rows * columns * 8
    if in_memory and need > MAX_MEMORY_BYTES:
        most = MAX_MEMORY_BYTES // (columns * 8)
        raise SdcInputError(
            f"{what} asks for {rows} records of {columns} columns, {need / 2**30:.1f} GiB in "
            f"memory, more than the {MAX_MEMORY_BYTES // 2**30} GiB a file built in memory "
            f"may take; use at most {most} records of {columns} columns"
            + (f", or {hint}" if hint else ""))
    return rows
