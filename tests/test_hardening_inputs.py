"""Input files and stores that used to crash a command or be misnamed: values too large
for their variance, Parquet column types sdcdist does not read, a weight's bad values
counted, a weight that is not numeric, missing files and spec paths, and stores without a
manifest whose attributes are malformed."""

from __future__ import annotations

import decimal
import json
import shutil

import numpy as np
import pandas as pd
import pytest

from sdcdist.moments import overflowing_columns


def _user_error(res, *words):
    assert res.exit_code == 2, res.output
    assert "unexpected failure" not in res.output
    for w in words:
        assert w in res.output, res.output


@pytest.fixture
def huge(tmp_path):
    p = tmp_path / "huge.csv"
    p.write_text("A,B\n" + "".join(f"{1e308 if i % 3 == 0 else i},{i}\n" for i in range(20)))
    return p


@pytest.fixture
def big150(tmp_path):
    p = tmp_path / "big150.csv"
    p.write_text("A,B\n" + "".join(f"{1e155 * (i + 1)},{i}\n" for i in range(30)))
    return p


def test_overflowing_columns_is_the_variance_rule():
    X = np.array([[1e308 if i % 3 == 0 else i, i, 1e153 * (i + 1), 1e155 * (i + 1)]
                  for i in range(30)])
    assert overflowing_columns(X).tolist() == [True, False, False, True]
    assert overflowing_columns(np.array([[1e308], [np.nan]])).tolist() == [False]


def test_describe_refuses_values_too_large_as_measure_does(run, huge):
    res = run("describe", str(huge))
    _user_error(res, "['A']", "rescale", "describing")
    _user_error(run("measure", str(huge), str(huge), "--local"), "['A']", "rescale")


def test_values_too_small_in_magnitude_are_refused_at_reading(run, tmp_path):
    """A column of subnormal values has a variance of 0 in float64: noise added none (the
    column went out unmasked) and IL1s called it constant. Every reader refuses it, naming
    the column; a column with one tiny value among others, or all zeros, is kept."""
    from sdcdist.data import from_array
    from sdcdist.data.validate import TINY_MAGNITUDE
    from sdcdist.errors import SdcInputError
    rng = np.random.default_rng(3)
    tiny = rng.random(40) * 1e-310
    p = tmp_path / "sub.csv"
    pd.DataFrame({"A": tiny, "B": np.arange(40.0)}).to_csv(p, index=False)
    for cmd in (["describe", str(p)], ["mask", str(p), "-m", "noise", "-p", "0.1", "--out",
                                        str(tmp_path / "m.csv")],
                ["measure", str(p), str(p), "--local"]):
        _user_error(run(*cmd), "['A']", "below 1e-150", "rescale")
    assert not (tmp_path / "m.csv").exists()
    pd.DataFrame({"A": tiny, "B": np.arange(40.0)}).to_parquet(tmp_path / "sub.parquet")
    _user_error(run("describe", str(tmp_path / "sub.parquet")), "['A']", "below 1e-150")
    with pytest.raises(SdcInputError, match=r"\['A'\].*below 1e-150"):
        from_array(np.c_[tiny * 1e160, np.arange(40.0)], ["A", "B"])   # 1e-150 scale
    X = np.c_[np.r_[1e-310, np.arange(1.0, 40.0)], np.arange(40.0), np.zeros(40),
              np.full(40, TINY_MAGNITUDE * 2) * np.r_[1.0, np.ones(39) * 1.5]]
    from_array(X, ["A", "B", "Z", "C"], allow_constant=True)   # kept: none is all tiny


@pytest.mark.parametrize("name", ["huge", "big150"])
def test_risk_refuses_values_too_large(run, request, name):
    p = str(request.getfixturevalue(name))
    _user_error(run("risk", p, p, "--local", "--metric", "DLD"), "['A']", "rescale")
    _user_error(run("risk", p, p, "--local"), "['A']", "rescale")
    # DRL2 scales by the sd of |a - b| over all pairs, which overflows (the KD-tree crashed)
    _user_error(run("risk", p, p, "--local", "--metric", "DRL2"), "['A']", "rescale")


@pytest.fixture
def c50(tmp_path, rng):
    return pd.DataFrame({"X": rng.lognormal(3, 1, 50), "Y": rng.lognormal(2, 1, 50),
                         "K": rng.choice(["a", "b"], 50)})


@pytest.mark.parametrize("col,value,kind", [
    ("L", lambda i: [1, 2], "nested"), ("ST", lambda i: {"a": 1}, "nested"),
    ("T", lambda i: pd.Timestamp("2020-01-01") + pd.Timedelta(days=i), "date"),
    ("TD", lambda i: pd.Timedelta(seconds=i), "duration"),
    ("B", lambda i: b"ab" if i % 2 else b"cd", "binary")])
def test_parquet_columns_of_unread_types_are_named(run, tmp_path, c50, col, value, kind):
    c50[col] = [value(i) for i in range(50)]
    p = tmp_path / "t.parquet"
    c50.to_parquet(p)
    res = run("ingest", str(p), str(tmp_path / "x.zarr"))
    _user_error(res, f"Column '{col}'", kind, "--columns")
    assert not (tmp_path / "x.zarr").exists()
    assert run("ingest", str(p), str(tmp_path / "y.zarr"), "--columns", "X,Y,K").exit_code == 0


def test_parquet_decimals_are_numbers(run, tmp_path, c50):
    c50["D"] = [decimal.Decimal(i) / 10 for i in range(50)]
    p = tmp_path / "d.parquet"
    c50.to_parquet(p)
    assert run("ingest", str(p), str(tmp_path / "x.zarr")).exit_code == 0
    from sdcdist.data import load_microdata
    md = load_microdata(str(tmp_path / "x.zarr"))
    assert "D" not in md.categorical
    assert md.values[:, md.columns.index("D")].tolist() == [i / 10 for i in range(50)]


def test_ingest_counts_every_bad_weight(run, tmp_path):
    p = tmp_path / "wbad.csv"
    p.write_text("W,K,X\n1,a,1\n0,b,2\n-2,a,3\n3,b,4\n2,a,5\n")
    res = run("ingest", str(p), str(tmp_path / "w.zarr"), "--weight", "W", "--categorical", "K")
    _user_error(res, "'W' has 2 values")


def test_describe_names_a_weight_that_is_not_numeric(run, tmp_path):
    p = tmp_path / "bool.csv"
    p.write_text("A,B\ntrue,1\nfalse,2\ntrue,3\n")
    res = run("describe", str(p), "--weight", "A")
    _user_error(res, "'A' is categorical", "numeric")
    assert "also a key column" not in res.output


def test_mask_of_a_missing_file_says_it_does_not_exist(run, tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    res = run("mask", "nonexist", "-m", "noise", "-p", "0.1", "--out", "x.csv")
    _user_error(res, "'nonexist' does not exist")


@pytest.mark.parametrize("path", ["null", '""'])
def test_a_spec_path_that_is_null_or_empty_is_refused(run, tmp_path, path):
    spec = tmp_path / "s.yaml"
    spec.write_text(f"dataset:\n  path: {path}\nmethods:\n  - {{name: noise, params: [0.1]}}\n"
                    "metrics: [IL1s]\n")
    res = run("audit", str(spec), "--out", str(tmp_path / "a.zarr"))
    _user_error(res, "'dataset.path' must be the path")


@pytest.fixture
def store(run, tmp_path, rng):
    p = tmp_path / "c.csv"
    pd.DataFrame({"AGI": rng.lognormal(9, 1, 60).round(), "W": rng.lognormal(3, 1, 60),
                  "R": rng.choice(["a", "b"], 60)}).to_csv(p, index=False)
    s = tmp_path / "s.zarr"
    assert run("ingest", str(p), str(s)).exit_code == 0
    return s


def _unsealed(store, name, edit):
    """A copy of ``store`` without its manifest (the older format), attributes edited."""
    out = store.parent / name
    shutil.copytree(store, out)
    meta = json.loads((out / "zarr.json").read_text())
    attrs = meta["attributes"]
    attrs.pop("integrity")
    attrs.pop("manifest_version")
    edit(meta, attrs)
    (out / "zarr.json").write_text(json.dumps(meta))
    return out


EDITS = {
    "no attributes": (lambda m, a: m.pop("attributes"), "'columns'"),
    "categories on a number": (lambda m, a: a.update(categories={"AGI": ["x"]}),
                               "'categories'"),
    "roles": (lambda m, a: a.update(roles="bad"), "'roles'"),
    "n_records text": (lambda m, a: a.update(n_records="abc"), "'n_records'"),
    "n_records wrong": (lambda m, a: a.update(n_records=999), "'n_records'"),
    "columns text": (lambda m, a: a.update(columns="AGI"), "'columns'"),
    "columns cut": (lambda m, a: a.update(columns=a["columns"][:2]), "'columns'"),
}


@pytest.mark.parametrize("edit", sorted(EDITS))
def test_an_unsealed_store_with_malformed_attributes_is_refused(run, store, edit):
    func, attr = EDITS[edit]
    s = str(_unsealed(store, "u.zarr", func))
    for args in (("describe", s), ("risk", s, s, "--local"),
                 ("mask", s, "-m", "noise", "-p", "0.1", "--out",
                  str(store.parent / "m.csv"))):
        _user_error(run(*args), "u.zarr'", f"attribute {attr} is malformed", "re-ingest")
    res = run("verify", s)
    assert res.exit_code == 1, res.output
    assert "corrupt:" in res.output and f"attribute {attr} is malformed" in res.output


def test_an_unsealed_store_with_good_attributes_still_reads(run, store):
    s = str(_unsealed(store, "u.zarr", lambda m, a: None))
    assert run("verify", s).exit_code == 0
    assert run("describe", s).exit_code == 0


def test_risk_with_ids_skips_or_refuses_the_record_by_record_metrics(run, tmp_path, rng):
    """With --id pairing a shuffled masked file, the default leaves ID1, ID2 and SDID out
    with a note (the rest computed) and naming them is refused, exit 2."""
    n = 60
    o = pd.DataFrame({"id": np.arange(n), "A": rng.normal(size=n), "B": rng.normal(size=n)})
    m = o.copy()
    m[["A", "B"]] += rng.normal(size=(n, 2)) * 0.1
    m = m.iloc[rng.permutation(n)]
    o.to_csv(tmp_path / "o.csv", index=False)
    m.to_csv(tmp_path / "m.csv", index=False)
    base = [str(tmp_path / "o.csv"), str(tmp_path / "m.csv"), "--local", "--id", "id"]
    res = run("risk", *base, "--metric", "ID1,DLD")
    _user_error(res, "ID1 compare the files record by record", "sort both files")
    res = run("risk", *base, "--keys", "A,B")
    assert res.exit_code == 0, res.output
    assert "skipping ID1, ID2, SDID" in res.output and "DLD" in res.output


def test_text_identifiers_match_by_label_not_by_code(run, tmp_path, rng):
    """Text identifiers pair records by their labels: a masked file holding a subset of the
    ids in another order gives the figures of the same file with numeric ids (each file
    codes its own labels, and the codes were compared); text against numbers is refused;
    link writes the identifiers themselves."""
    n = 80
    o = pd.DataFrame({"id": np.arange(n), "A": rng.normal(size=n), "B": rng.normal(size=n)})
    m = o.copy()
    m[["A", "B"]] += rng.normal(size=(n, 2)) * 0.2
    m = m.iloc[rng.permutation(n)[:60]]                  # 60 of the 80, shuffled
    files = {}
    for tag, f in (("o", o), ("m", m)):
        files[tag] = tmp_path / f"{tag}.csv"
        f.to_csv(files[tag], index=False)
        t = f.assign(id="P" + f["id"].astype(str))
        files[tag + "t"] = tmp_path / f"{tag}t.csv"
        t.to_csv(files[tag + "t"], index=False)
    args = ["--local", "--id", "id", "--metric", "DLD,PLD", "--json"]
    num = run("risk", files["o"], files["m"], *args)
    txt = run("risk", files["ot"], files["mt"], *args)
    assert num.exit_code == 0 and txt.exit_code == 0, txt.output
    assert json.loads(num.stdout)["metrics"] == json.loads(txt.stdout)["metrics"]
    _user_error(run("risk", files["o"], files["mt"], *args), "text in the masked file",
                "--categorical id")
    out = tmp_path / "pairs.parquet"
    res = run("link", files["ot"], files["mt"], "--local", "--id", "id", "--keys", "A,B",
              "--out", out)
    assert res.exit_code == 0, res.output
    pairs = pd.read_parquet(out)
    assert set(pairs["id_b"]) == set("P" + m["id"].astype(str))
    assert pairs["correct"].tolist() == (pairs["id_a"] == pairs["id_b"]).tolist()
