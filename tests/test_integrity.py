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
from sdcdist.checksums import CorruptChunkError, _chunk_ranges


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
    body = msg.replace(str(store), "<store>")   # the path's own digits are not values
    for v in small.ravel():  # the message names chunks, never the numbers in them
        assert repr(float(v)) not in body and f"{v:.4g}" not in body
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


# --------------------------------------------------------------------------- a verify that
# cannot be skipped: the manifest, each array's metadata, the root zarr.json


def _edit_json(path: Path, change) -> None:
    import json
    doc = json.loads(path.read_text())
    change(doc)
    path.write_text(json.dumps(doc))


@pytest.fixture(scope="module")
def sealed_cube(tmp_path_factory):
    spec = parse_spec({"name": "t", "dataset": {"synthetic": {"rows": 40, "columns": 3}},
                       "methods": [{"name": "noise", "params": [0.1, 0.2]}],
                       "metrics": ["IL1s"]})
    out = tmp_path_factory.mktemp("sealed") / "c.zarr"
    run_audit(spec, out)
    return out


def _copy(base: Path, tmp_path: Path, how) -> Path:
    import shutil
    q = tmp_path / "t.zarr"
    shutil.copytree(base, q)
    how(q)
    return q


def _refused(res, *words):
    assert res.exit_code == 1, res.output
    for w in words:
        assert w in res.output, res.output
    assert "JSONDecodeError" not in res.output and "asyncio" not in res.output
    assert "unexpected failure" not in res.output


@pytest.mark.parametrize("name,how,word", [
    ("manifest deleted",
     lambda q: _edit_json(q / "zarr.json", lambda d: d["attributes"].pop("integrity")),
     "manifest"),
    ("manifest and mark deleted",
     lambda q: _edit_json(q / "zarr.json", lambda d: [d["attributes"].pop(k) for k in
                                                       ("integrity", "manifest_version")]),
     "records sdcdist"),
    ("scale_factor on value",
     lambda q: _edit_json(q / "value" / "zarr.json",
                          lambda d: d["attributes"].update(scale_factor=2.0)),
     "metadata (zarr.json) of the array 'value'"),
    ("done's attributes",
     lambda q: _edit_json(q / "done" / "zarr.json",
                          lambda d: d["attributes"].update(coordinates="")),
     "array 'done'"),
    ("done's zarr.json deleted", lambda q: (q / "done" / "zarr.json").unlink(), "'done'"),
    ("root deleted", lambda q: (q / "zarr.json").unlink(), "root metadata (zarr.json) is missing"),
    ("root truncated", lambda q: (q / "zarr.json").write_text((q / "zarr.json").read_text()[:40]),
     "cannot be read"),
    ("value's zarr.json truncated",
     lambda q: (q / "value" / "zarr.json").write_text("{\"shape\": [1,"), "cannot be read"),
    ("a value changed",
     lambda q: zarr.open_group(str(q), mode="r+")["value"].__setitem__((0, 0, 0, 0, 0), 99.0),
     "fingerprint mismatch"),
    # an array's own metadata edited so that its chunks no longer decode
    ("value's data type", lambda q: _edit_json(q / "value" / "zarr.json", _dtype32),
     "dtype of the array 'value'"),
    ("value's chunk shape", lambda q: _edit_json(q / "value" / "zarr.json", _chunk_plus1),
     "chunks of the array 'value'"),
    ("value's codecs", lambda q: _edit_json(q / "value" / "zarr.json", _bytes_only),
     "codecs of the array 'value'"),
    ("done's data type", lambda q: _edit_json(q / "done" / "zarr.json", _dtype32),
     "dtype of the array 'done'"),
    ("flag's codecs", lambda q: _edit_json(q / "flag" / "zarr.json", _bytes_only),
     "codecs of the array 'flag'"),
])
def test_tampered_cube_fails_verify_and_is_refused_by_readers(run, sealed_cube, tmp_path,
                                                               name, how, word):
    assert run("verify", sealed_cube).exit_code == 0
    q = _copy(sealed_cube, tmp_path, how)
    _refused(run("verify", q), word)
    _refused(run("report", q, "--by", "IL1s"), word)
    _refused(run("query", q), word)
    with pytest.raises(SdcInputError, match="corrupted"):
        open_cube(q)
    if name == "a value changed":
        _refused(run("plot", q, "--kind", "ranks", "--out", tmp_path / "p.png"), word)
        assert not (tmp_path / "p.png").exists()


def _dtype32(d: dict) -> None:
    d["data_type"] = "float32" if d["data_type"] == "float64" else "int32"


def _chunk_plus1(d: dict) -> None:
    d["chunk_grid"]["configuration"]["chunk_shape"][0] += 1


def _bytes_only(d: dict) -> None:
    d["codecs"] = d["codecs"][:1]          # the bytes codec alone: Zstandard and CRC-32C gone


@pytest.mark.parametrize("edit", [_dtype32, _chunk_plus1, _bytes_only])
def test_edited_array_metadata_is_damage_not_a_crash(run, sealed_cube, store, tmp_path, edit):
    """An array's zarr.json edited so that its chunks cannot be decoded: verify lists every
    problem and exits 1 (no "unexpected failure"), with or without a manifest to compare."""
    q = _copy(sealed_cube, tmp_path, lambda q: _edit_json(q / "value" / "zarr.json", edit))
    res = run("verify", q)
    _refused(res, "is not the one written")
    if edit is not _chunk_plus1:     # a longer chunk reads the old ones short: still decodes
        assert "cannot be decoded with the array's metadata" in res.output
    # the same edit on a store whose manifest is gone: the chunks alone say it
    _edit_json(q / "zarr.json", lambda d: d["attributes"].pop("integrity"))
    _refused(run("verify", q), "corrupt:")
    _edit_json(store / "values" / "zarr.json", edit)
    _refused(run("verify", store), "values")
    _refused(run("describe", store), "'values' is not the one written")
    with pytest.raises(SdcInputError, match="corrupted"):
        load_microdata(store)


def test_read_names_chunks_its_metadata_cannot_decode(store):
    from sdcdist.checksums import read
    with pytest.raises(IndexError):      # not damage: a bad key is the caller's own error,
        read(zarr.open_group(str(store), mode="r")["values"], 10 ** 6)   # raised as it is
    _edit_json(store / "values" / "zarr.json", _bytes_only)
    arr = zarr.open_group(str(store), mode="r")["values"]
    with pytest.raises(CorruptChunkError, match=r"chunk\(s\) 0\.0, 1\.0, 2\.0, 3\.0 of the "
                       r"array 'values' cannot be decoded"):
        read(arr, store=str(store), name="values")
    with pytest.raises(IndexError):      # not damage: a bad key is the caller's own error
        zarr.open_group(str(store), mode="r")["values"][10 ** 6]


def test_dataset_store_without_its_manifest_fails_verify(run, store):
    assert run("verify", store).exit_code == 0
    _edit_json(store / "zarr.json", lambda d: d["attributes"].pop("integrity"))
    _refused(run("verify", store), "manifest")
    with pytest.raises(SdcInputError, match="manifest"):
        load_microdata(store)


@pytest.mark.parametrize("member", ["zarr.json", "values/zarr.json"])
def test_dataset_store_with_truncated_metadata_is_damage(run, store, member):
    (store / member).write_text((store / member).read_text()[:30])
    with pytest.raises(SdcInputError, match="cannot be read"):
        load_microdata(store)
    _refused(run("verify", store), "cannot be read")
    _refused(run("risk", store, store, "--metric", "DLD", "--local"), "cannot be read")
