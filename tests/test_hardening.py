"""Hardening (issue 14): malformed inputs, damaged stores, leftovers, overflow, saturation.

Each test reproduces a silent wrong answer or an unhandled failure of the data
layer and the library: the fix turns it into an :class:`SdcInputError` that
names the culprit (a line, a position, a chunk) and never a record value.
"""

from __future__ import annotations

import gzip
import json
import os
import shutil
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import pytest
import zarr

from sdcdist.audit import parse_spec, run_audit
from sdcdist.checksums import MissingChunkError
from sdcdist.cube import CONVENTIONS, create_cube, open_cube, set_attrs, write_cell
from sdcdist.data import (StoredArray, from_array, ingest, load_microdata, open_microdata,
                          write_microdata)
from sdcdist.data.io import remove_stale_temps
from sdcdist.data.synth import write_synthetic
from sdcdist.errors import SdcInputError
from sdcdist.integrity import CorruptStoreError, verify_store
from sdcdist.masking import get_method
from sdcdist.metrics import measure

ROOT = Path(__file__).resolve().parents[1]
PLANTED = "987654321"                     # a distinctive value that must never be echoed


def _csv(path: Path, text: str) -> Path:
    path.write_text(text)
    return path


def _good_rows(n: int = 6) -> str:
    return "".join(f"{i + 1},{2 * i + 3},{(i * 7) % 5 + 0.5}\n" for i in range(n))


# ---------------------------------------------------------------------------
# item 2: malformed rows


@pytest.mark.parametrize("reader", ["ingest", "load"])
def test_row_with_an_extra_field_is_refused_with_its_line(tmp_path, reader):
    # "7,8,000,900": an unquoted thousands separator; pandas' usecols read it shifted
    src = _csv(tmp_path / "x.csv", "A,B,C\n" + _good_rows(3) + f"7,{PLANTED},000,900\n"
               + _good_rows(3))
    with pytest.raises(SdcInputError) as e:
        if reader == "ingest":
            ingest(src, tmp_path / "x.zarr")
        else:
            load_microdata(src)
    msg = str(e.value)
    assert "line 5 has 4 fields but the header has 3" in msg
    assert "thousands separator" in msg and PLANTED not in msg and "900" not in msg
    assert not (tmp_path / "x.zarr").exists()
    assert not [p for p in tmp_path.iterdir() if ".tmp-" in p.name]


def test_row_with_too_few_fields_is_refused(tmp_path):
    src = _csv(tmp_path / "x.csv", "A,B,C\n" + _good_rows(2) + f"{PLANTED},4\n"
               + _good_rows(3))
    with pytest.raises(SdcInputError, match="line 4 has 2 fields but the header has 3") as e:
        load_microdata(src)
    assert PLANTED not in str(e.value) and "missing fields" in str(e.value)


def test_extra_field_in_a_selected_columns_read_and_gz(tmp_path):
    body = "A,B,C\n" + _good_rows(4) + "1,2,3,4\n"
    gz = tmp_path / "x.csv.gz"
    with gzip.open(gz, "wt") as f:
        f.write(body)
    with pytest.raises(SdcInputError, match="line 6 has 4 fields"):
        load_microdata(gz, columns=["A", "B"])


@pytest.mark.parametrize("text,line", [
    ('"A","B","C"\n1,2,3\n"4,5",6,7\n8,9,1,2\n', 4),     # quoted file: the csv module
    ("A,B,C\r\n1,2,3\r\n\r\n4,5\r\n7,8,9\r\n", 4),        # CRLF, blank line kept counted
    ("A,B,C\n" + "1,2,3\n" * 300_000 + "1,2,3,4", 300_002),  # past a scan block, no final EOL
])
def test_bad_line_numbers_in_quoted_crlf_and_long_files(tmp_path, text, line):
    src = _csv(tmp_path / "x.csv", text)
    with pytest.raises(SdcInputError, match=f"line {line} has"):
        load_microdata(src)


def test_quoted_delimiters_blank_lines_and_multiline_fields_still_read(tmp_path):
    src = _csv(tmp_path / "x.csv", 'A,B,"C"\n' + _good_rows(3) + "\n" + '"7","8000","9"\n'
               + _good_rows(2))
    md = load_microdata(src)
    assert md.shape == (6, 3) and md.values[3].tolist() == [7.0, 8000.0, 9.0]


# ---------------------------------------------------------------------------
# item 3: no header row


def test_csv_without_header_is_refused_without_echoing_the_values(tmp_path):
    src = _csv(tmp_path / "x.csv", f"{PLANTED},2.5,3\n" + _good_rows(5))
    for call in (lambda: ingest(src, tmp_path / "x.zarr"), lambda: load_microdata(src)):
        with pytest.raises(SdcInputError, match="first row of 'x.csv' looks like data") as e:
            call()
        assert PLANTED not in str(e.value) and "2.5" not in str(e.value)
        assert "Add a header row" in str(e.value)


def test_header_with_digits_but_not_numbers_is_fine(tmp_path):
    src = _csv(tmp_path / "x.csv", "x1,2nd,nan\n" + _good_rows(4))
    assert load_microdata(src).columns == ("x1", "2nd", "nan")


# ---------------------------------------------------------------------------
# item 14: wrong delimiter, unusable column names, truncated gzip


@pytest.mark.parametrize("sep,word", [(";", "semicolon"), ("\t", "tab")])
def test_wrong_delimiter_is_named(tmp_path, sep, word):
    rows = "".join(sep.join(str(v) for v in (i, 2 * i + 1, i % 3)) + "\n" for i in range(6))
    src = _csv(tmp_path / "x.csv", sep.join("ABC") + "\n" + rows)
    with pytest.raises(SdcInputError, match=f"looks {word}-separated") as e:
        ingest(src, tmp_path / "x.zarr")
    assert "non-numeric" not in str(e.value)


def test_comma_separated_tsv_is_named(tmp_path):
    src = _csv(tmp_path / "x.tsv", "A,B,C\n" + _good_rows(4))
    with pytest.raises(SdcInputError, match="looks comma-separated"):
        load_microdata(src)


@pytest.mark.parametrize("name", ["a,b", "two\nlines", "tab\there", "cr\rname"])
def test_column_names_that_break_messages_are_refused(tmp_path, name):
    quoted = '"' + name + '"'
    src = _csv(tmp_path / "x.csv", f"A,{quoted},C\n" + _good_rows(4))
    with pytest.raises(SdcInputError, match=r"commas, line breaks .*positions \[2\]") as e:
        load_microdata(src)
    assert "\n" not in str(e.value) and "\r" not in str(e.value)
    with pytest.raises(SdcInputError, match="positions \\[2\\]"):
        from_array(np.arange(12.0).reshape(4, 3) ** 1.5, ["A", name, "C"])


def test_truncated_gzip_is_an_input_error(tmp_path):
    body = "A,B,C\n" + _good_rows(20000)
    whole = gzip.compress(body.encode())
    gz = tmp_path / "x.csv.gz"
    gz.write_bytes(whole[: len(whole) // 2])
    for call in (lambda: ingest(gz, tmp_path / "x.zarr"), lambda: load_microdata(gz)):
        with pytest.raises(SdcInputError, match="truncated or damaged"):
            call()
    assert not (tmp_path / "x.zarr").exists()
    env = dict(os.environ, PYTHONPATH=str(ROOT))
    proc = subprocess.run([sys.executable, "-m", "sdcdist.cli", "ingest", str(gz),
                           str(tmp_path / "y.zarr")], capture_output=True, text=True, env=env,
                          timeout=120)
    assert proc.returncode == 2, proc.stderr
    assert "Traceback" not in proc.stderr and "truncated" in proc.stderr


# ---------------------------------------------------------------------------
# item 5: missing chunks, metadata checksum, record count, fingerprint


@pytest.fixture
def store(tmp_path, small) -> Path:
    out = tmp_path / "d.zarr"
    write_microdata(from_array(small), out, chunk_rows=16)     # 60 rows: 4 chunks
    return out


def test_missing_dataset_chunk_is_corruption_not_nan(store, small):
    assert verify_store(store).ok
    os.remove(store / "values" / "c" / "2" / "0")
    with pytest.raises(MissingChunkError, match=r"chunk\(s\) 2\.0 of the array 'values'"):
        load_microdata(store)
    sa = StoredArray(str(store))
    np.testing.assert_array_equal(sa[0:16], small[0:16])      # untouched chunks still read
    with pytest.raises(MissingChunkError, match=str(store.name)):
        sa[20:40]
    da = open_microdata(store)                                 # lazy reads check too
    np.testing.assert_array_equal(da[:16].values, small[:16])
    with pytest.raises(MissingChunkError, match=r"chunk\(s\) 2\.0"):
        da.values
    rep = verify_store(store)
    assert not rep.ok and any("2.0 of 'values' are missing" in p for p in rep.problems)
    env = dict(os.environ, PYTHONPATH=str(ROOT))            # mask wrote NaN with exit 0
    proc = subprocess.run([sys.executable, "-m", "sdcdist.cli", "mask", str(store), "-m",
                           "noise", "-p", "0.1", "--out", str(store.parent / "m.csv")],
                          capture_output=True, text=True, env=env, timeout=120)
    assert proc.returncode == 1 and "chunk(s) 2.0" in proc.stderr, proc.stderr
    assert not (store.parent / "m.csv").exists()


def test_ingested_store_is_sealed_and_verifiable(tmp_path):
    src = _csv(tmp_path / "x.csv", "A,B,C\n" + _good_rows(50))
    out = tmp_path / "x.zarr"
    ingest(src, out, chunk_rows=8)
    rep = verify_store(out, source=src)
    assert rep.ok and rep.sealed, rep.problems
    assert rep.checked["records"] == 50 and rep.checked["fingerprint"] == "matches"
    assert rep.checked["source"] == "sha256 matches"
    other = _csv(tmp_path / "y.csv", "A,B,C\n" + _good_rows(51))
    assert any("not the one this store was ingested from" in p
               for p in verify_store(out, source=other).problems)
    with pytest.raises(SdcInputError, match="Cannot open 'gone.csv' as the source file"):
        verify_store(out, source=tmp_path / "gone.csv")
    assert "fingerprint: matches" in "\n".join(rep.lines())


def test_tampered_metadata_and_record_count_are_detected(store):
    meta = store / "zarr.json"
    doc = json.loads(meta.read_text())
    doc["attributes"]["columns"][0] = "renamed"
    meta.write_text(json.dumps(doc))
    with pytest.raises(CorruptStoreError, match="attributes .* changed"):
        load_microdata(store)
    with pytest.raises(CorruptStoreError):
        StoredArray(str(store))[0:4]
    assert not verify_store(store).ok
    doc["attributes"]["columns"][0] = "V1"
    doc["attributes"]["n_records"] = 59
    meta.write_text(json.dumps(doc))
    assert any("record count" in p or "attributes" in p for p in verify_store(store).problems)


def test_rewritten_values_fail_the_fingerprint(store, small):
    arr = zarr.open_group(str(store), mode="r+")["values"]
    arr[3, 1] = arr[3, 1] + 1.0          # valid chunk bytes and checksum, different data
    rep = verify_store(store)
    assert any("fingerprint" in p for p in rep.problems) and rep.checked["fingerprint"] == "differs"
    with pytest.raises(CorruptStoreError, match="fingerprint"):
        load_microdata(store)


def test_synthetic_store_is_sealed(tmp_path):
    out = tmp_path / "s.zarr"
    write_synthetic(str(out), 100, columns=3, chunk_rows=32)
    rep = verify_store(out)
    assert rep.ok and rep.sealed and rep.checked["fingerprint"] == "matches"


def _audit_cube(tmp_path) -> Path:
    spec = parse_spec({"name": "t", "dataset": {"synthetic": {"rows": 40, "columns": 3}},
                       "methods": [{"name": "noise", "params": [0.1, 0.2]}],
                       "metrics": ["IL1s"], "replicates": 2})
    out = tmp_path / "c.zarr"
    run_audit(spec, out)
    return out


def test_missing_chunk_of_a_done_cell_is_reported(tmp_path):
    out = _audit_cube(tmp_path)
    open_cube(out)
    rep = verify_store(out)
    assert rep.ok and rep.kind == "cube" and rep.checked["done cells"] == 4, rep.problems
    # replicate 1 of param 0.2: report averaged the remaining replicate silently
    os.remove(out / "value" / "c" / "0" / "0" / "1" / "0" / "1")
    with pytest.raises(MissingChunkError, match=r"0\.0\.1\.0\.1 of the array 'value'"):
        open_cube(out)
    assert any("0.0.1.0.1 of 'value' are missing" in p for p in verify_store(out).problems)


def test_all_nan_cell_is_still_stored(tmp_path):
    out = str(tmp_path / "c.zarr")
    create_cube(out, methods=["noise"], param_names=["p"], params=[0.1], metrics=["A", "B"],
                metric_kinds=["loss", "loss"], ascending=[True, True], replicates=1,
                keysets=[["x"]], attrs={"spec": "{}"})
    write_cell(out, 0, 0, 0, values=np.full(2, np.nan), keyset_values=np.full((2, 1), np.nan),
               excluded=np.zeros(2, np.int32), flags=np.zeros(2, np.int8))
    assert verify_store(out).ok
    os.remove(Path(out) / "value" / "c" / "0" / "0" / "0" / "0" / "0")
    with pytest.raises(MissingChunkError):
        open_cube(out)


def test_unmarked_cell_is_reported_and_cube_attrs_are_checksummed(tmp_path):
    out = _audit_cube(tmp_path)
    os.remove(out / "done" / "c" / "0" / "0" / "0" / "1")     # resume recomputes it
    rep = verify_store(out)
    assert rep.ok and rep.checked["cells written but not marked done"] == 1
    out2 = _audit_cube(tmp_path / "b")
    set_attrs(str(out2), note="kept current")       # set_attrs reseals
    assert verify_store(out2).ok
    meta = out2 / "zarr.json"
    doc = json.loads(meta.read_text())
    doc["attributes"]["spec_sha256"] = "0" * 64
    meta.write_text(json.dumps(doc))
    with pytest.raises(CorruptStoreError):
        open_cube(out2)
    out3 = _audit_cube(tmp_path / "c")                         # an array's zarr.json
    meta = out3 / "flag" / "zarr.json"
    doc = json.loads(meta.read_text())
    doc["fill_value"] = 1
    meta.write_text(json.dumps(doc))
    with pytest.raises(CorruptStoreError, match="fill_value of the array 'flag'"):
        open_cube(out3)
    assert any("'flag'" in p for p in verify_store(out3).problems)


def test_verify_store_refuses_what_is_not_a_store(tmp_path):
    with pytest.raises(SdcInputError, match="not a Zarr store"):
        verify_store(tmp_path / "nothing.zarr")


# ---------------------------------------------------------------------------
# item 11: leftovers of interrupted writes

_SLOW_INGEST = """
import sys
from sdcdist.data import ingest
ingest(sys.argv[1], sys.argv[2], chunk_rows=200)
"""


def _start_slow_ingest(tmp_path: Path) -> tuple[subprocess.Popen, Path]:
    src = tmp_path / "big.csv"
    rng = np.random.default_rng(0)
    vals = rng.standard_normal((200_000, 3))
    np.savetxt(src, vals, delimiter=",", header="A,B,C", comments="", fmt="%.6f")
    out = tmp_path / "big.zarr"
    env = dict(os.environ, PYTHONPATH=str(ROOT))
    proc = subprocess.Popen([sys.executable, "-c", _SLOW_INGEST, str(src), str(out)], env=env)
    deadline = time.time() + 120
    while time.time() < deadline:
        tmp = [p for p in tmp_path.iterdir() if p.name.startswith(".big.zarr.tmp-")]
        if tmp and (tmp[0] / "values").exists():
            return proc, out
        if proc.poll() is not None:
            break
        time.sleep(0.05)
    proc.kill()
    pytest.fail("the ingest never started writing")


def test_sigterm_during_ingest_leaves_nothing(tmp_path):
    proc, out = _start_slow_ingest(tmp_path)
    time.sleep(0.05)                                      # mid-write (about 2 s of chunks)
    proc.send_signal(signal.SIGTERM)
    assert proc.wait(timeout=60) == -signal.SIGTERM      # still ends as SIGTERM does
    assert not out.exists()
    assert [p.name for p in tmp_path.iterdir() if ".tmp-" in p.name] == []


def test_sigkill_leftovers_are_removed_by_the_next_write(tmp_path, small):
    proc, out = _start_slow_ingest(tmp_path)
    proc.kill()
    proc.wait(timeout=60)
    left = [p for p in tmp_path.iterdir() if ".tmp-" in p.name]
    assert left                                          # SIGKILL cannot be caught
    # a live writer's temp folder (this process) must survive
    live = tmp_path / f".big.zarr.tmp-{socket.gethostname()}-{os.getpid()}-abcdef12"
    live.mkdir()
    write_microdata(from_array(small), out)
    names = sorted(p.name for p in tmp_path.iterdir() if ".tmp-" in p.name)
    assert names == [live.name]
    assert remove_stale_temps(out) == []
    shutil.rmtree(live)


def test_sigterm_handler_is_restored(tmp_path, small):
    before = signal.getsignal(signal.SIGTERM)
    write_microdata(from_array(small), tmp_path / "a.zarr")
    write_microdata(from_array(small), tmp_path / "a.csv")
    assert signal.getsignal(signal.SIGTERM) is before


# ---------------------------------------------------------------------------
# item 12: overflow in masking


def test_noise_overflow_is_refused_not_written_as_inf():
    big = np.where(np.arange(50) % 2, 1.7e308, -1.7e308) * np.linspace(0.5, 1.0, 50)
    X = np.column_stack([np.linspace(1, 2, 50), big])
    assert np.isfinite(X).all()
    with pytest.raises(SdcInputError, match=r"noise produced infinite .* column\(s\) 2 ") as e:
        get_method("noise")(X, 1.0, rng=np.random.default_rng(0))
    assert "Rescale" in e.value.args[0] and "1.7" not in e.value.args[0]
    out = get_method("noise")(X / 1e160, 1.0, rng=np.random.default_rng(0))
    assert np.isfinite(out).all()


# ---------------------------------------------------------------------------
# item 16: PS saturation


def test_ps_separation_sets_the_flag(small):
    X = small[:30]
    Y = X.copy()
    Y[:, 1] += 100 * X[:, 1].std()
    got = measure(X, Y, ["PS", "PS2"])
    for name in ("PS", "PS2"):
        assert got[name].value == 0.25 and got[name].flag == 1
        assert got[name].info["separation"] == "complete" and "separates" in got[name].info["why"]
    assert "PS" in CONVENTIONS["flag"]


# ---------------------------------------------------------------------------
# item 12 and 14: a repeated key-set column, the message of a method without parameter


def test_a_key_set_naming_a_column_twice_is_refused():
    from sdcdist import measure
    X = np.random.default_rng(0).normal(size=(40, 3))
    with pytest.raises(SdcInputError, match=r"names \['V1'\] more than once"):
        measure(X, X, ["DLD"], keysets=[["V1", "V2", "V1"]])


def test_a_method_without_parameter_says_so():
    from sdcdist import mask
    X = np.random.default_rng(0).normal(size=(40, 3))
    with pytest.raises(SdcInputError) as e:
        mask(X, "distr", 3, rng=np.random.default_rng(0))
    assert "distr has no parameter" in str(e.value) and "'none' parameter" not in str(e.value)
