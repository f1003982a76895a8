"""The fast (Arrow) CSV reader against the reference (pandas) reader: same values, same
labels and codes, same messages; exact numbers; streaming into a store."""

from __future__ import annotations

import gzip

import numpy as np
import pytest
from hypothesis import given, settings, strategies as st

from sdcdist import SdcInputError, ingest, load_microdata
from sdcdist.data import arrowcsv, sources
from sdcdist.data.refdata import reference_file
from sdcdist.data.validate import TINY_MAGNITUDE


def _reference(monkeypatch):
    """Read with the reference reader only (the fast one steps aside)."""
    def aside(*args, **kwargs):
        raise arrowcsv._StepAside()
    monkeypatch.setattr(arrowcsv, "_read_arrow", aside)


def _outcome(call):
    try:
        md = call()
    except SdcInputError as exc:
        return ("error", str(exc))
    return ("ok", md.values.tobytes(), md.values.shape, md.values.flags["C_CONTIGUOUS"],
            md.columns, md.categories, md.sha256)


def _store_outcome(path):
    md = load_microdata(path)
    return md.values.tobytes(), md.columns, md.categories, md.sha256


ROWS = "".join(f"{i % 7},{i * 0.37:.17g},{'abc'[i % 3]}\n" for i in range(40))

CASES = {
    "plain": "A,B,C\n" + ROWS,
    "crlf": "A,B,C\r\n" + ROWS.replace("\n", "\r\n"),
    "lone cr": "A,B,C\r" + ROWS.replace("\n", "\r"),
    "blank lines": "A,B,C\n\n" + ROWS + "\n\n",
    "no final newline": "A,B,C\n" + ROWS.rstrip("\n"),
    "bom": "\ufeffA,B,C\n" + ROWS,
    "spaces kept": "A,B,C\n" + ROWS + "1, 2.5, a\n3,4 ,a \n",
    "line of spaces": "A,B,C\n" + ROWS + "   \n" + ROWS,
    "quoted cells": 'A,B,C\n' + ROWS + '"1","2,5",x\n',
    "quoted header": '"A","B","C"\n' + ROWS,
    "short row": "A,B,C\n" + ROWS + "1,2\n",
    "long row": "A,B,C\n" + ROWS + "1,2,3,4\n",
    "empty cells text": "A,B,C\n" + ROWS + "1,2,\n",
    "empty numeric": "A,B,C\n" + ROWS + ",2,a\n",
    "typo": "A,B,C\n" + ROWS + "1,2.x,a\n",
    "na words": "A,B,C\n" + ROWS + "1,2,NA\n2,3,None\n3,4,N/A\n",
    "python-only numbers": "A,B,C\n" + ROWS + " 1 ,1_000,a\n\u0661,+.5e1,b\n",
    "nan and inf": "A,B,C\n" + ROWS + "nan,2,a\n",
    "infinite": "A,B,C\n" + ROWS + "1,-Infinity,a\n",
    "numbers as labels": "A,B,C\n" + "".join(f"{i},{i}.0,{i % 4}.50\n" for i in range(30)),
    "text column of numbers and words": "A,B,C\n" + "".join(
        f"{i},{i},{i if i % 2 else 'w' + str(i)}\n" for i in range(30)),
    "header only": "A,B,C\n",
    "two records": "A,B,C\n1,2,a\n2,3,b\n",
    "not utf-8": "A,B,C\n" + ROWS + "1,2,caf\xe9\n",
    "long digits": "A,B,C\n" + "".join(
        f"{i},0.1000000000000000055511151231257827{i},x\n" for i in range(5)),
}


@pytest.mark.parametrize("case", sorted(CASES))
@pytest.mark.parametrize("opts", [{}, {"categorical": ["A"], "na_values": ["NA", "2"]},
                                  {"columns": ["C", "A"]}])
def test_the_fast_reader_reads_as_the_reference_reader(tmp_path, monkeypatch, case, opts):
    path = tmp_path / "t.csv"
    text = CASES[case]
    if case == "not utf-8":
        path.write_bytes(text.encode("latin-1"))
    else:
        path.write_bytes(text.encode())
    fast = _outcome(lambda: load_microdata(path, **opts))
    with monkeypatch.context() as m:
        _reference(m)
        ref = _outcome(lambda: load_microdata(path, **opts))
    assert fast == ref


@pytest.mark.parametrize("opts", [{}, {"categorical": ["A"]}, {"na_values": "NA"}])
def test_streamed_ingest_in_small_blocks_equals_the_reference(tmp_path, monkeypatch, opts):
    # numbers first, words from the third block on: the late text column is read again
    rows = "".join(f"{i % 5},{i * 1.5},{i if i < 300 else 'w' + str(i % 7)}\n"
                   for i in range(1000))
    path = tmp_path / "t.csv"
    path.write_text("A,B,C\n" + rows)
    monkeypatch.setattr(arrowcsv, "BLOCK_BYTES", 1 << 10)
    ingest(path, tmp_path / "fast.zarr", chunk_rows=64, **opts)
    fast_load = _outcome(lambda: load_microdata(path, **opts))
    with monkeypatch.context() as m:
        _reference(m)
        ingest(path, tmp_path / "ref.zarr", chunk_rows=64, **opts)
        ref_load = _outcome(lambda: load_microdata(path, **opts))
    assert _store_outcome(tmp_path / "fast.zarr") == _store_outcome(tmp_path / "ref.zarr")
    assert fast_load == ref_load
    assert fast_load[0] == "ok" and fast_load[5]["C"][:2] == ["0", "1"]


def test_typo_records_are_counted_across_blocks(tmp_path, monkeypatch):
    monkeypatch.setattr(arrowcsv, "BLOCK_BYTES", 1 << 9)
    rows = [f"{i}.5,{i}" for i in range(400)]
    rows[250] = "1O.5,3"
    path = tmp_path / "t.csv"
    path.write_text("a,b\n" + "\n".join(rows) + "\n")
    with pytest.raises(SdcInputError, match=r"has 1 non-numeric \(of 400\) values "
                                            r"\(records 251\)"):
        ingest(path, tmp_path / "t.zarr")
    assert not (tmp_path / "t.zarr").exists()


def test_too_many_levels_is_refused_as_before(tmp_path, monkeypatch):
    import sdcdist.data.types as types
    monkeypatch.setattr(types, "MAX_LEVELS", 50)
    path = tmp_path / "t.csv"
    path.write_text("a,b\n" + "".join(f"id{i},{i % 3}\n" for i in range(200)))
    with pytest.raises(SdcInputError, match="Categorical column 'a' of 't.csv' must have at most 50 distinct"):
        load_microdata(path)
    with pytest.raises(SdcInputError, match="Categorical column 'a' of 't.csv' must have at most 50 distinct"):
        ingest(path, tmp_path / "t.zarr")


def test_a_plain_file_is_read_by_arrow_and_a_quoted_one_by_the_reference(tmp_path,
                                                                         monkeypatch):
    calls = []
    real = sources.read_typed_frames

    def spy(*args, **kwargs):
        calls.append(args[0])
        return real(*args, **kwargs)
    monkeypatch.setattr(sources, "read_typed_frames", spy)
    plain = tmp_path / "p.csv"
    plain.write_text("A,B,C\n" + ROWS)
    load_microdata(plain)
    assert calls == []
    quoted = tmp_path / "q.csv"
    quoted.write_text('A,B,C\n' + ROWS + '"1",2,a\n')
    load_microdata(quoted)
    assert calls == [quoted]
    gz = tmp_path / "g.csv.gz"
    with gzip.open(gz, "wt") as f:
        f.write("A,B,C\n" + ROWS)
    assert _outcome(lambda: load_microdata(gz))[1] == load_microdata(plain).values.tobytes()
    assert calls == [quoted]                    # gzip through Arrow too


# -- numbers: Arrow's cast is exactly float() ---------------------------------------------

_DIGITS = st.text("0123456789", min_size=1, max_size=30)
_DECIMALS = st.builds(
    lambda sign, whole, frac, exp: f"{sign}{whole}{frac}{exp}",
    st.sampled_from(["", "-", "+"]),
    _DIGITS,
    st.one_of(st.just(""), st.just("."), _DIGITS.map(lambda d: "." + d)),
    st.one_of(st.just(""), st.integers(-350, 330).map(lambda e: f"e{e}"),
              st.integers(-30, 30).map(lambda e: f"E{e:+d}")))


@settings(max_examples=300, deadline=None)
@given(st.lists(st.one_of(_DECIMALS, st.floats(allow_nan=False).map(repr),
                          st.text("0123456789.eE+-_ nafiINF", max_size=8)),
                min_size=1, max_size=40))
def test_arrow_numbers_are_python_floats_bit_for_bit(cells):
    import pyarrow as pa
    got = arrowcsv._cast_numbers(pa.array(cells, pa.string()))
    try:
        want = np.array([float(c) for c in cells])
    except ValueError:
        want = None
    if got is None:
        return                       # Arrow refused a cell: the cells are judged one by one
    assert want is not None          # Arrow never reads a cell that float() refuses
    same = (got.view(np.uint64) == want.view(np.uint64)) | (np.isnan(got) & np.isnan(want))
    assert same.all()


@settings(max_examples=60, deadline=None)
@given(st.lists(st.floats(allow_nan=False, allow_infinity=False), min_size=3, max_size=30))
def test_floats_written_in_any_precision_read_back_as_float_does(tmp_path_factory, xs):
    path = tmp_path_factory.mktemp("f") / "t.csv"
    cells = [repr(x) if i % 4 == 0 else format(x, [".17g", ".6g", ".25e"][i % 4 - 1])
             for i, x in enumerate(xs)]
    path.write_text("v,w\n" + "".join(f"{c},{i}\n" for i, c in enumerate(cells)))
    want = np.array([float(c) for c in cells])
    if want.min() != want.max() and np.abs(want).max() < TINY_MAGNITUDE:
        with pytest.raises(SdcInputError, match=r"\['v'\].*below 1e-150"):
            load_microdata(path)             # all below 1e-150: refused, by name
        return
    md = load_microdata(path)
    assert md.values[:, 0].tobytes() == want.tobytes()


@pytest.mark.parametrize("name", ["census", "tarragona", "household", "free1"])
def test_reference_files_read_by_arrow_as_by_the_reference_reader(name, monkeypatch):
    path = reference_file(name)
    fast = _outcome(lambda: load_microdata(path))
    with monkeypatch.context() as m:
        _reference(m)
        assert fast == _outcome(lambda: load_microdata(path))


def test_blocks_read_ahead_keep_their_order_and_errors():
    def blocks(fail_at=None):
        for i in range(6):
            if i == fail_at:
                raise arrowcsv._StepAside()
            yield [i]
    assert list(arrowcsv._ahead(blocks())) == [[i] for i in range(6)]
    got = []
    with pytest.raises(arrowcsv._StepAside):
        for b in arrowcsv._ahead(blocks(fail_at=4)):
            got.append(b)
    assert got == [[0], [1], [2], [3]]
    for b in arrowcsv._ahead(blocks()):          # the caller stops early: the thread ends
        break


#: odd cells of a numeric column: what Python's float reads and what it does not
_ODD_CELLS = ["1_000", "nan", "NaN", "+nan", "inf", "-inf", "Infinity", "+1", "1.", ".5",
              "+.5", "1e5", "1E+05", " 7", "7 ", "\t7", "\u00a07", "7\u00a0", "\x0c7",
              "0x10", "1d5", "\u0661", "\u22121", "1e", "e1", ".", "-", "+", "--1", "1..2",
              "1e5.5", "0001", "-0", "1e-400", "1e400", "9" * 400, "1f", "1_0.5", "-.e1",
              "1e+", "1\x00", "12345678901234567890.123456789"]


def test_cells_arrow_converts_to_finite_numbers_are_numbers_of_the_rules():
    """The premise of reading only some columns (``load_microdata(only=...)``): a cell of
    a column left unread that Arrow's CSV reader converts to a finite float64 is one that
    :func:`~sdcdist.data.parse.parse_numbers` reads as the same number (so the column would
    be numeric and complete in a whole read); every other cell makes the reader read the
    whole file."""
    import io

    import pyarrow as pa
    import pyarrow.csv as pacsv

    from sdcdist.data.parse import parse_numbers
    for cell in _ODD_CELLS:
        data = ("a,b\n1," + cell + "\n").encode()
        try:
            t = pacsv.read_csv(io.BytesIO(data),
                               parse_options=pacsv.ParseOptions(quote_char=False),
                               convert_options=pacsv.ConvertOptions(
                                   column_types={"b": pa.float64()}, null_values=[],
                                   strings_can_be_null=False))
        except pa.ArrowInvalid:
            continue
        v = t.column("b")[0].as_py()
        if not np.isfinite(v):
            continue
        text = np.array([cell], dtype=object)
        got, bad = parse_numbers(text, np.zeros(1, dtype=bool))
        assert not bad[0] and got[0] == v, repr(cell)


def test_only_the_columns_read_when_the_others_are_plain_numbers(tmp_path):
    """``load_microdata(only=...)`` keeps the named columns when every other cell is a
    finite number, with the values and categories of a whole read; a text, ``nan``,
    ``inf``, empty or underscored cell in another column gives the whole read."""
    lines = ["k,w,x,y"] + [f"{i % 3},{1 + i / 7:.5f},{i * 1.5},{i}" for i in range(30)]
    f = tmp_path / "f.csv"
    f.write_text("\n".join(lines) + "\n")
    whole = load_microdata(f, categorical=["k"])
    part = load_microdata(f, categorical=["k"], only=["w"], fingerprint=False)
    assert part.columns == ("k", "w") and part.sha256 is None
    assert part.values.tobytes() == np.ascontiguousarray(whole.values[:, :2]).tobytes()
    assert part.categories == whole.categories
    for cell in ("abc", "nan", "inf", "", "1_000", "1e999"):
        rows = list(lines)
        rows[5] = rows[5].rsplit(",", 1)[0] + "," + cell
        g = tmp_path / "g.csv"
        g.write_text("\n".join(rows) + "\n")
        try:
            want = ("ok", load_microdata(g, categorical=["k"]).columns)
        except SdcInputError as exc:
            want = ("error", str(exc))
        try:
            got = ("ok", load_microdata(g, categorical=["k"], only=["w"]).columns)
        except SdcInputError as exc:
            got = ("error", str(exc))
        assert got == want, cell
