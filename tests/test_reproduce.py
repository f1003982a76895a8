"""examples/reproduce.py: the transcribed paper values and its paper-vs-sdcdist comparison."""

from __future__ import annotations

import importlib.util
import math
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]


@pytest.fixture(scope="module")
def reproduce():
    spec = importlib.util.spec_from_file_location("reproduce", ROOT / "examples" / "reproduce.py")
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def test_table2_transcription_is_consistent(reproduce):
    """109 rows, ranks 1..109 in Score order, each Score the paper's weighted sum."""
    rows = reproduce.paper_rows("dmt")
    assert len(rows) == 109
    assert [r["rank"] for r in rows] == list(range(1, 110))
    assert all(a["Score"] <= b["Score"] for a, b in zip(rows, rows[1:]))
    for r in rows:
        s = 0.5 * r["IL"] + 0.125 * r["DLD"] + 0.125 * r["PLD"] + 0.25 * r["ID1"]
        assert abs(s - r["Score"]) < 0.011, r["label"]
    for col in ("IL", "DLD", "PLD", "ID1"):
        assert sorted(r[f"{col}_rank"] for r in rows) == list(range(1, 110)), col


def test_ywc_transcription_is_consistent(reproduce):
    """Table 3's scores are 100 (s + reid) / 2 with Table 1's s0, s1, s2 and Table 2's
    rates, once the misprints are corrected and Table 2's add05 rates are add01's; the
    d-metric scores of the scaled mixtures are a little off in the paper (up to 0.15)."""
    raw = {r["label"]: r for r in reproduce.paper_rows("ywc", raw=True)}
    assert len(raw) == 14 and math.isnan(raw["add01"]["reid_l"])
    assert raw["rnkswp15"]["Sscore_l"] == 30.67
    rows = {r["label"]: r for r in reproduce.paper_rows("ywc")}
    assert len(rows) == 13 and "add05" not in rows
    assert rows["add01"]["reid_l"] == raw["add05"]["reid_l"] == 0.75
    checked = 0
    for lab, r in rows.items():
        for m in ("d", "l"):
            for score, s in (("Ascore", "s0"), ("Dscore", "s1"), ("Sscore", "s2")):
                tol = 0.16 if m == "d" and lab.startswith("scal") else 0.06
                assert abs(100 * (r[s] + r[f"reid_{m}"]) / 2 - r[f"{score}_{m}"]) < tol, \
                    (lab, score, m)
                checked += 1
    assert checked == 13 * 6


def test_quick_run_compares_and_agrees(reproduce, client, tmp_path, capsys):
    """The deterministic microaggregations give the paper's DLD to two decimals."""
    res = reproduce.main(["--paper", "dmt", "--cells", "micir:3,micz:5",
                          "--out", str(tmp_path)], client=client)
    rows = {r["label"]: r for r in res["dmt"]["rows"]}
    assert set(rows) == {"MicIR03", "MicZ05"}
    assert round(rows["MicIR03"]["sdcdist DLD"], 2) == 97.39
    assert round(rows["MicZ05"]["sdcdist DLD"], 2) == 4.03
    assert round(rows["MicZ05"]["sdcdist IL"], 2) == 104.06
    agr = res["dmt"]["agreement"]
    assert agr["DLD"]["rows"] == 2 and agr["DLD"]["within10"] == 1.0
    assert agr["ID1"]["within10"] == 1.0
    out = capsys.readouterr().out
    assert "MicIR03" in out and "97.39 / 97.39" in out and "within 10 %" in out


def test_cells_and_bad_method(reproduce):
    assert reproduce.parse_cells("micir:3, micz:5,distr") == \
        {"micir": [3.0], "micz": [5.0], "distr": []}
    with pytest.raises(SystemExit, match="no method"):
        reproduce.restricted_spec("dmt", {"nosuch": [1]})


def test_convention_lab_equals_sdcdist_prl_at_its_defaults():
    """examples/conventions/prl_lab.py, whose search the README reports, links as sdcdist's
    PRL does when every convention is sdcdist's (same EM, weights, 1-1 assignment)."""
    import numpy as np
    spec = importlib.util.spec_from_file_location(
        "prl_lab", ROOT / "examples" / "conventions" / "prl_lab.py")
    lab = importlib.util.module_from_spec(spec)
    sys.modules["prl_lab"] = lab          # its dataclass looks its module up
    try:
        spec.loader.exec_module(lab)
    finally:
        del sys.modules["prl_lab"]
    rng = np.random.default_rng(7)
    X = rng.lognormal(8, 1.5, size=(150, 4)) * (rng.random((150, 4)) > 0.2)
    for sd in (0.05, 0.3):
        Xm = X + rng.normal(0, sd, X.shape) * X.std(axis=0)
        for method in ("l", "d"):
            want = lab.sdcdist_pld(X, Xm, [0, 1, 2, 3], {"prl_method": method, "prl_t": 0.1})
            got = lab.link(X, Xm, [0, 1, 2, 3], lab.Convention(method=method, t=0.1))
            assert got == want, (sd, method)


# -- the tables of examples/README.md -------------------------------------------------------

def test_readme_tables_are_generated(reproduce):
    """Every table of README_TABLES sits between its markers and is exactly what
    reproduce.py renders from the committed summary (tests/data/example_tables.json)."""
    sections = reproduce.readme_sections(reproduce.README.read_text())
    tables = reproduce.readme_tables()
    assert set(tables) == set(reproduce.README_TABLES)
    assert set(tables) <= set(sections), "a generated table has no markers in the README"
    stale = [t for t in tables if sections[t] != tables[t]]
    assert not stale, (f"examples/README.md's tables {stale} differ from the summary: run "
                       "python examples/reproduce.py --readme")


def test_readme_summary_is_of_the_fingerprinted_cubes(reproduce):
    """The summary was made from the cubes whose fingerprints tests/test_examples.py pins:
    regenerating the fingerprints without the summary (and so the README) fails here."""
    import json
    data = ROOT / "tests" / "data"
    summary = json.loads(reproduce.SUMMARY_FILE.read_text())
    recorded = json.loads((data / "example_fingerprints.json").read_text())
    values_only = json.loads((data / "example_values_fingerprints.json").read_text())
    for name in {spec for spec, _ in reproduce.README_TABLES.values()}:
        want = {m: ["values", values_only[m]] if m in values_only else h
                for m, h in recorded[name].items()}
        got = summary[name]["fingerprints"]
        differ = sorted(m for m in want if got.get(m) != want[m])
        assert not differ, (f"{name}: the summary's cube differs from the fingerprinted one in "
                            f"{differ}: run python tests/data/make_fingerprints.py {name}")


def test_readme_writer_replaces_between_markers(reproduce, tmp_path):
    text = "intro\n<!-- table: a -->\n| old |\n<!-- /table -->\nmiddle\n" \
           "<!-- table: b -->\n| keep |\n<!-- /table -->\n"
    path = tmp_path / "README.md"
    path.write_text(text)
    assert reproduce.write_readme({"a": "| new |\n|---|"}, path)
    assert reproduce.readme_sections(path.read_text()) == {"a": "| new |\n|---|",
                                                           "b": "| keep |"}
    assert not reproduce.write_readme({"a": "| new |\n|---|"}, path)
    with pytest.raises(SystemExit):
        reproduce.write_readme({"c": "x"}, path)

