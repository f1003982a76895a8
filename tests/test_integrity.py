"""Checksummed chunks: a flipped byte is reported (array, chunk), never read as numbers."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
import zarr

from sdcdist.audit import parse_spec, run_audit
from sdcdist.cube import open_cube
from sdcdist.data import StoredArray, from_array, load_microdata, write_microdata
from sdcdist.errors import SdcInputError
from sdcdist.integrity import CorruptChunkError, _chunk_ranges


def _flip(path: Path, offset: int | None = None) -> None:
    b = bytearray(path.read_bytes())
    i = len(b) // 2 if offset is None else offset
    b[i] ^= 0x5A
    path.write_bytes(bytes(b))


@pytest.fixture
def store(tmp_path, small):
    out = tmp_path / "d.zarr"
    write_microdata(from_array(small), out, chunk_rows=16)  # 60 rows: chunks 0..3
    return out


def test_every_array_is_checksummed(store, tmp_path):
    codecs = [type(c).__name__ for c in zarr.open_group(str(store))["values"].metadata.codecs]
    assert codecs[-1] == "Crc32cCodec" and "ZstdCodec" in codecs
    spec = parse_spec({"name": "t", "dataset": {"path": str(store)},
                       "methods": [{"name": "noise", "params": [0.1]}],
                       "metrics": ["IL1s"]})
    run_audit(spec, tmp_path / "c.zarr")
    g = zarr.open_group(str(tmp_path / "c.zarr"))
    for name, arr in g.arrays():  # data and coordinates alike
        assert type(arr.metadata.codecs[-1]).__name__ == "Crc32cCodec", name


@pytest.mark.parametrize("flip_at", [None, 0, -1])  # middle of the payload, first byte, checksum
def test_flipped_byte_in_dataset_chunk_is_reported(store, small, flip_at):
    _flip(store / "values" / "c" / "1" / "0", flip_at)
    with pytest.raises(CorruptChunkError) as ei:
        load_microdata(store)
    msg = str(ei.value)
    assert "'values'" in msg and "chunk(s) 1.0 " in msg and "CRC-32C" in msg
    assert isinstance(ei.value, SdcInputError)
    for v in small.ravel():  # the message names chunks, never the numbers in them
        assert repr(float(v)) not in msg and f"{v:.4g}" not in msg
    arr = StoredArray(str(store))
    np.testing.assert_array_equal(arr[0:16], small[0:16])  # healthy chunks still read
    np.testing.assert_array_equal(arr[32:60], small[32:60])
    with pytest.raises(CorruptChunkError, match=r"chunk\(s\) 1\.0 "):
        arr[10:40]


def test_two_corrupt_chunks_are_both_named(store):
    _flip(store / "values" / "c" / "1" / "0")
    _flip(store / "values" / "c" / "3" / "0")
    with pytest.raises(CorruptChunkError, match=r"chunk\(s\) 1\.0, 3\.0 of the array 'values'"):
        load_microdata(store)


def test_flipped_byte_in_cube_is_reported(tmp_path):
    spec = parse_spec({"name": "t", "dataset": {"synthetic": {"rows": 40, "columns": 3}},
                       "methods": [{"name": "noise", "params": [0.1, 0.2]}],
                       "metrics": ["IL1s"]})
    out = tmp_path / "c.zarr"
    run_audit(spec, out)
    open_cube(out)  # healthy
    # value is (dataset, method, param, metric, replicate), one cell per chunk
    _flip(out / "value" / "c" / "0" / "0" / "1" / "0" / "0")
    with pytest.raises(CorruptChunkError,
                       match=r"chunk\(s\) 0\.0\.1\.0\.0 of the array 'value'"):
        open_cube(out)
    with pytest.raises(CorruptChunkError):  # resuming refuses too: nothing is read as numbers
        run_audit(spec, out)


def test_chunk_ranges():
    assert _chunk_ranges((60, 4), (16, 4), (slice(10, 40),)) == [(0, 0), (1, 0), (2, 0)]
    assert _chunk_ranges((60, 4), (16, 4), (slice(16, 32), 2)) == [(1, 0)]
    assert _chunk_ranges((60, 4), (16, 4), slice(None)) == [(0, 0), (1, 0), (2, 0), (3, 0)]
