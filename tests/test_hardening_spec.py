"""Hostile or careless specs and YAML values: refused with a clear SdcInputError, fast.

Spec files that are not UTF-8, YAML anchors and aliases (self-reference, "billion
laughs"), deep nesting, duplicate keys, YAML 1.1 number quirks, specs asking for more
than the data and cluster can hold, duplicate key-set columns, ``risk -o`` values.
"""

from __future__ import annotations

import doctest
import time

import numpy as np
import pytest
from click.testing import CliRunner

import sdcdist.limits
import sdcdist.metrics.keysets
import sdcdist.yamlsafe
import sdcdist.text
from sdcdist.audit import load_spec, parse_spec
from sdcdist.cli import main
from sdcdist.data.synth import COLUMNS
from sdcdist.errors import SdcInputError
from sdcdist.limits import LIMITS, MAX_CELLS, MAX_REPLICATES, MAX_ROWS, check_rows
from sdcdist.yamlsafe import load_yaml, parse_option_value

SPEC = """\
name: t
seed: 7
dataset:
  name: toy
  synthetic: {rows: 300, columns: 4, seed: 1}
methods:
  - {name: noise, params: [0.1]}
metrics: [IL1s]
"""

BASE = {"name": "t", "seed": 7,
        "dataset": {"name": "toy", "synthetic": {"rows": 300, "columns": 4, "seed": 1}},
        "methods": [{"name": "noise", "params": [0.1, 0.2]}], "metrics": ["IL1s", "DLD"]}

ALIASES = "specs and options may not use YAML anchors"


def _write(tmp_path, text: str | bytes, name: str = "spec.yaml"):
    p = tmp_path / name
    if isinstance(text, bytes):
        p.write_bytes(text)
    else:
        p.write_text(text, encoding="utf-8")
    return p


@pytest.mark.parametrize("module", [sdcdist.limits, sdcdist.yamlsafe, sdcdist.text,
                                    sdcdist.metrics.keysets])
def test_documented_examples_run(module):
    res = doctest.testmod(module, optionflags=doctest.NORMALIZE_WHITESPACE)
    assert res.attempted > 0 and res.failed == 0


def test_a_plain_spec_still_loads(tmp_path):
    s = load_spec(_write(tmp_path, SPEC))
    assert s.methods[0].params == (0.1,) and s.dataset.synthetic["rows"] == 300
    # a UTF-8 byte-order mark (Windows editors) is fine
    assert load_spec(_write(tmp_path, b"\xef\xbb\xbf" + SPEC.encode(), "bom.yaml")).name == "t"


# --- item 8: a spec that is not UTF-8, a self-referencing alias --------------------------

def test_spec_that_is_not_utf8_is_refused(tmp_path):
    p = _write(tmp_path, SPEC.replace("name: t", "name: caf\xe9").encode("latin-1"))
    with pytest.raises(SdcInputError, match=r"'spec.yaml' is not UTF-8 text \(byte 10, line 1\)"
                                            r"; save it as UTF-8"):
        load_spec(p)


def test_spec_not_utf8_exits_2_on_the_command_line(tmp_path):
    p = _write(tmp_path, SPEC.encode("utf-16"))
    res = CliRunner().invoke(main, ["audit", str(p), "--out", str(tmp_path / "c.zarr")])
    assert res.exit_code == 2, res.output
    assert "save it as UTF-8" in res.output
    assert not (tmp_path / "c.zarr").exists()


def test_self_referencing_alias_is_refused(tmp_path):
    p = _write(tmp_path, SPEC + "keysets: &k [*k]\n")
    with pytest.raises(SdcInputError, match=r"'spec.yaml' uses a YAML anchor \(&k\) at line 9; "
                                            + ALIASES):
        load_spec(p)


@pytest.mark.parametrize("text, says", [
    ("a: &x [1]\nb: *x\n", r"anchor \(&x\) at line 1"),
    ("b: *x\n", r"alias \(\*x\) at line 1"),                     # an alias with no anchor
    ("base: &b {p: 1}\nother:\n  <<: *b\n", r"anchor \(&b\)"),   # merge keys need aliases
])
def test_anchors_and_aliases_are_refused(text, says):
    with pytest.raises(SdcInputError, match=says + ".*" + ALIASES):
        load_yaml(text, what="the spec")


# --- item 9: resource exhaustion -----------------------------------------------------

def _laughs(levels: int) -> str:
    lines = ['a0: &a0 ["lol", "lol", "lol", "lol", "lol", "lol", "lol", "lol", "lol", "lol"]']
    for i in range(1, levels + 1):
        prev = f"*a{i - 1}"
        lines.append(f"a{i}: &a{i} [{', '.join([prev] * 10)}]")
    return "\n".join(lines) + f"\nkeysets: [*a{levels}]\n"


def test_billion_laughs_is_refused_at_once(tmp_path):
    text = SPEC + _laughs(9)      # 10^10 strings once expanded
    assert len(text.encode()) < 1024
    p = _write(tmp_path, text)
    t0 = time.perf_counter()
    with pytest.raises(SdcInputError, match=ALIASES):
        load_spec(p)
    # refused before any expansion: expanding 10^10 strings would take hours, the refusal
    # milliseconds (10 s leaves room for a loaded machine)
    assert time.perf_counter() - t0 < 10.0


def test_deep_nesting_is_refused_not_a_recursion_error(tmp_path):
    for text in ("x: " + "[" * 5000 + "]" * 5000, "x: " + "{a: " * 3000 + "1" + "}" * 3000):
        with pytest.raises(SdcInputError, match="nests lists or mappings more than 50 levels"):
            load_spec(_write(tmp_path, SPEC + text + "\n"))


def test_huge_spec_file_is_refused(tmp_path):
    p = _write(tmp_path, SPEC + "description: " + "x" * (2**20) + "\n")
    with pytest.raises(SdcInputError, match=r"'spec.yaml' is larger than 1 MiB"):
        load_spec(p)


def test_spec_path_that_is_a_folder_is_refused(tmp_path):
    with pytest.raises(SdcInputError, match="is a folder; give the YAML file itself"):
        load_spec(tmp_path)


@pytest.mark.parametrize("synthetic, says", [
    ({"rows": MAX_ROWS + 1, "columns": 1}, r"synthetic.rows must be an integer in \[3, 1000000000\]"),
    ({"rows": 2 * 10**8, "columns": 8},
     r"asks for 200000000 records of 8 columns, 11.9 GiB in memory, more than the 8 GiB.*"
     r"use at most 134217728 records of 8 columns"),
    ({"rows": 1000, "columns": 14},
     r"synthetic.columns must be an integer in \[1, 13\] \(the generator has 13 variables\)"),
    ({"rows": 2}, r"synthetic.rows must be an integer in \[3, "),
    ({"rows": "many"}, r"synthetic.rows must be an integer in \[3, .*Got 'many' instead"),
])
def test_synthetic_dataset_is_bounded(synthetic, says):
    with pytest.raises(SdcInputError, match=says):
        parse_spec({**BASE, "dataset": {"name": "toy", "synthetic": synthetic}})


def test_bounds_match_what_they_bound():
    assert LIMITS["columns"] == len(COLUMNS)
    # the largest in-memory file at the bound is accepted, one more record is not
    most = LIMITS["memory_bytes"] // (13 * 8)
    assert check_rows(most, columns=13, what="rows", in_memory=True) == most
    with pytest.raises(SdcInputError, match="in memory"):
        check_rows(most + 1, columns=13, what="rows", in_memory=True)
    assert check_rows(MAX_ROWS, columns=13, what="--rows", in_memory=False) == MAX_ROWS
    with pytest.raises(SdcInputError, match=r"or write a Zarr store"):
        check_rows(most + 1, columns=13, what="--rows", in_memory=True,
                   hint="write a Zarr store (--out data.zarr), which is streamed")


def test_too_many_replicates_are_refused():
    assert parse_spec({**BASE, "replicates": MAX_REPLICATES}).replicates == MAX_REPLICATES
    with pytest.raises(SdcInputError, match=r"'replicates' must be an integer in \[1, 1000\]"):
        parse_spec({**BASE, "replicates": MAX_REPLICATES + 1})


def test_too_many_cells_are_refused():
    params = [float(p) for p in np.linspace(0.001, 1.0, 1001)]
    doc = {**BASE, "methods": [{"name": "noise", "params": params}], "replicates": 1000}
    with pytest.raises(SdcInputError, match=r"the spec asks for 1001000 cells \(1 dataset\(s\) "
                                            r"x 1000 replicate\(s\) x 1001 parameter value"):
        parse_spec(doc)
    assert MAX_CELLS == 10**6
    parse_spec({**doc, "replicates": 999})          # 999,999 cells: accepted


# --- item 14: YAML 1.1 reads 5e-2 as a string -----------------------------------------

def test_exponent_numbers_are_numbers(tmp_path):
    text = SPEC.replace("  - {name: noise, params: [0.1]}",
                        "  - {name: noise, params: [5e-2, 1E-1]}\n"
                        "  - {name: rankswap, params: [1e1, 1.5e1]}")
    s = load_spec(_write(tmp_path, text))
    assert {m.name: m.params for m in s.methods} == {"noise": (0.05, 0.1),
                                                     "rankswap": (10.0, 15.0)}
    # quoted values stay strings, integers stay integers, dates are not dates
    assert load_yaml("a: '5e-2'\nb: 12\nc: 2024-13-45\nd: .5\ne: -2E+4", what="x") == \
        {"a": "5e-2", "b": 12, "c": "2024-13-45", "d": 0.5, "e": -20000.0}


def test_duplicate_keys_are_refused(tmp_path):
    p = _write(tmp_path, SPEC + "metrics: [DLD]\n")
    with pytest.raises(SdcInputError, match="gives the key 'metrics' twice in one mapping at "
                                            "line 9; give each key once"):
        load_spec(p)


def test_unknown_keys_of_mixed_types_are_named():
    with pytest.raises(SdcInputError, match=r"Unknown key\(s\) \[1, 'colour'\] in the spec"):
        parse_spec({**BASE, 1: "a", "colour": "blue"})


# --- item 12: a key set that names a column twice --------------------------------------

@pytest.mark.parametrize("change, says", [
    ({"keysets": [["WAGES"], ["WAGES", "BUSINC", "WAGES"]]},
     r"key set 2 \(WAGES, BUSINC, WAGES\) names column\(s\) \['WAGES'\] more than once; "
     r"list each column once"),
    ({"dataset": {**BASE["dataset"], "keys": ["WAGES", "BUSINC", "BUSINC"]}},
     r"'dataset'.keys \(WAGES, BUSINC, BUSINC\) names column\(s\) \['BUSINC'\] more than"),
    ({"dataset": {**BASE["dataset"], "columns": ["WAGES", "WAGES"]}},
     r"'dataset'.columns \(WAGES, WAGES\) names column\(s\) \['WAGES'\]"),
    ({"dataset": {**BASE["dataset"], "roles": {"key": ["WAGES", "WAGES"]}}},
     r"'dataset'.roles.key \(WAGES, WAGES\) names column\(s\) \['WAGES'\]"),
])
def test_a_column_named_twice_is_refused(change, says):
    with pytest.raises(SdcInputError, match=says):
        parse_spec({**BASE, **change})


# --- item 8: malformed YAML in risk -o KEY=VALUE ---------------------------------------

@pytest.mark.parametrize("text, want", [
    ("[V4, V12]", ["V4", "V12"]), ("5e-2", 0.05), ("true", True), ("3", 3), ("", None)])
def test_option_values_parse(text, want):
    assert parse_option_value("k", text) == want


@pytest.mark.parametrize("text, says", [
    ("[V4, V12", r"the value of option 'crl_external' is not valid YAML at line 1 \(expected"),
    ("{a: 1", "is not valid YAML"),
    ("a: b: c", "is not valid YAML"),
    ("&x [*x]", ALIASES),
    ("\x00", "contains a character YAML does not allow"),
    ("!!python/name:os.system", "uses the YAML tag '!!python/name:os.system'"),
    ("!!timestamp 2024-13-45", "uses the YAML tag '!!timestamp'"),
    ("!!int abc", "has a value YAML cannot convert"),
    ("[" * 100 + "]" * 100, "nests lists or mappings"),
])
def test_malformed_option_values_are_refused(text, says):
    with pytest.raises(SdcInputError, match=says):
        parse_option_value("crl_external", text)


# --- names given twice, files a spec names ---------------------------------------------

@pytest.mark.parametrize("change, says", [
    ({"keysets": [["WAGES"], ["WAGES"]]},
     r"'keysets': key sets 1 and 2 \(\[WAGES\] and \[WAGES\]\) have the same columns"),
    ({"keysets": [["WAGES", "TAXINC"], ["FEDTAX"], ["TAXINC", "WAGES"]]},
     r"key sets 1 and 3 \(\[WAGES, TAXINC\] and \[TAXINC, WAGES\]\) have the same"),
    ({"metrics": ["IL1s", "DLD", "IL1s"]}, r"'metrics' names \['IL1s'\] more than once"),
])
def test_a_key_set_or_metric_named_twice_is_refused(change, says):
    with pytest.raises(SdcInputError, match=says):
        parse_spec({**BASE, **change})
    parse_spec({**BASE, "keysets": [["WAGES"], ["WAGES", "TAXINC"]]})


@pytest.mark.parametrize("name,got", [(None, "Got None"), ("", "an empty text"),
                                      ("  ", "a blank text"), ("a\nb", "control character"),
                                      ("x" * 300, "300 bytes"), ({"a": 1}, "a dict"),
                                      (["x"], "a list")])
def test_a_dataset_name_is_a_bounded_printable_text(name, got):
    """A dataset's 'name' in a spec is held to the rule of the spec's own name (it was
    turned into text unchecked: a mapping, a line break or 10,000 bytes went into the
    cube, its reports and the service's pages); a number is read as its text."""
    with pytest.raises(SdcInputError, match="The 'name' of 'dataset' must be a non-empty "
                                            "text") as e:
        parse_spec({**BASE, "dataset": {**BASE["dataset"], "name": name}})
    assert got in str(e.value) and len(str(e.value)) < 300
    with pytest.raises(SdcInputError, match=r"The 'name' of datasets\[1\]"):
        parse_spec({**{k: v for k, v in BASE.items() if k != "dataset"},
                    "datasets": [BASE["dataset"], {**BASE["dataset"], "name": name}]})
    assert parse_spec({**BASE, "dataset": {**BASE["dataset"], "name": 2024}}
                      ).datasets[0].name == "2024"


def test_the_same_key_set_twice_is_refused_by_measure_too(small):
    from sdcdist.metrics import measure
    with pytest.raises(SdcInputError, match="have the same columns"):
        measure(small, small, ["DLD"], keysets=[["V1", "V2"], ["V2", "V1"]],
                columns=[f"V{i}" for i in range(1, small.shape[1] + 1)])


def _csv_spec(tmp_path, metrics: str, **dataset) -> object:
    rng = np.random.default_rng(3)
    data = tmp_path / "d.csv"
    np.savetxt(data, rng.lognormal(3, 1, size=(40, 3)), delimiter=",", header="a,b,c",
               comments="")
    extra = "".join(f"  {k}: {v}\n" for k, v in dataset.items())
    return _write(tmp_path, f"name: t\ndataset:\n  name: d\n  path: d.csv\n{extra}"
                            f"methods: [{{name: noise, params: [0.1, 0.5]}}]\nmetrics: {metrics}\n")


@pytest.mark.parametrize("metrics", ["[IL1s, DLD]", "[IL1s, dcr_holdout_median]"])
def test_a_missing_holdout_file_is_refused_before_a_cluster_starts(tmp_path, monkeypatch,
                                                                   metrics):
    """Every file a spec names exists, whether a metric reads it or not; checked with the
    spec, before a cluster starts and before the cube is made."""
    import distributed

    from sdcdist.audit.run import load_data

    def refuse(*args, **kwargs):
        raise AssertionError("a cluster was started")
    monkeypatch.setattr(distributed, "LocalCluster", refuse)
    spec = _csv_spec(tmp_path, metrics, holdout="gone.csv")
    says = "The holdout file 'gone.csv' does not exist; paths in a spec are relative to"
    with pytest.raises(SdcInputError, match=says):
        load_data(load_spec(spec))
    for args in (["audit", spec, "--out", tmp_path / "c.zarr", "--workers", "1"],
                 ["calibrate", spec, "--risk", "DLD", "--target", "1", "--workers", "1"]):
        res = CliRunner().invoke(main, [str(a) for a in args], catch_exceptions=False)
        assert res.exit_code == 2 and says in res.output, res.output
    assert not (tmp_path / "c.zarr").exists()
    (tmp_path / "gone.csv").write_text((tmp_path / "d.csv").read_text())
    load_data(load_spec(spec))                   # there now: accepted
