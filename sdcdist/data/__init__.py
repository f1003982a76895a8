"""Microdata I/O, validation, reference files and the synthetic generator."""

from .io import (DEFAULT_CHUNK_ROWS, Microdata, StoredArray, align_categories, from_array,
                 ingest, is_store, load_microdata, open_microdata, source_columns,
                 write_microdata)
from .refdata import reference_file
from . import synth

__all__ = ["Microdata", "StoredArray", "align_categories", "ingest", "open_microdata", "load_microdata",
           "write_microdata", "from_array", "is_store", "reference_file", "synth",
           "DEFAULT_CHUNK_ROWS", "source_columns"]
