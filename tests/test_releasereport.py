"""The release report (`sdcdist report CUBE --html R.html --chosen M:P[:R]`): one file that
opens offline, whose numbers are the cube's, whose external variant has no record-level
content, and that is refused (exit 2, nothing written) for a cell not in the cube."""

from __future__ import annotations

import json
import re

import numpy as np
import pytest

from sdcdist.audit import parse_spec, run_audit
from sdcdist.cube import open_cube, open_group, release_fingerprint
from sdcdist.data import Microdata, load_microdata, write_microdata
from sdcdist.describe import describe
from sdcdist.releasereport import association_matrix, parse_chosen

SPEC = {"name": "rr", "seed": 4, "replicates": 2, "require": ["kviol3 <= 50"],
        "methods": [{"name": "noise", "params": [0.1, 0.5]}],
        "metrics": ["IL1s", "kviol3", "IR_max"],
        "dataset": {"name": "people", "path": "data.csv", "keys": ["REGION", "SEX"]}}


@pytest.fixture(scope="module")
def audited(tmp_path_factory):
    d = tmp_path_factory.mktemp("rr")
    rng = np.random.default_rng(2)
    n = 60
    X = np.column_stack([rng.normal(50, 10, n).round(1), rng.gamma(2, 3, n),
                         rng.integers(0, 3, n).astype(float), rng.integers(0, 6, n)
                         .astype(float)])
    write_microdata(Microdata(X, ("AGE", "INC", "REGION", "SEX"),
                              categories={"REGION": ["north", "south", "east"],
                                          "SEX": ["qa", "qb", "qc", "qd", "qe", "qf"]}),
                    d / "data.csv")
    run_audit(parse_spec(SPEC, base_dir=d), d / "cube.zarr")
    return d


def _report(run, audited, out, *extra):
    return run("report", audited / "cube.zarr", "--chosen", "noise:0.5:1", "--html", out,
               *extra)


def _row(text, metric):
    m = re.search(rf"<tr><td>{metric}</td><td>[^<]*</td><td>([^<]*)</td><td>([^<]*)</td>",
                  text)
    return float(m.group(1)), float(m.group(2))


def _riskiest(audited):
    md = load_microdata(str(audited / "data.csv"))
    return describe(md, keys=["REGION", "SEX"], top=10)["risk"]["riskiest"]


def test_report_offline_with_the_cubes_numbers(run, audited, tmp_path, monkeypatch):
    monkeypatch.chdir(audited)
    out = tmp_path / "R.html"
    r = _report(run, audited, out)
    assert r.exit_code == 0, r.output
    text = out.read_text()
    # opens offline: nothing to fetch, every image inline
    assert not re.search(r"https?://|<script|<link|@import|url\(", text, re.I)
    assert set(re.findall(r'src="([a-z]+):', text)) == {"data"}
    assert text.count("data:image/png;base64,") == 5          # 4 variables + associations
    c = open_cube(str(audited / "cube.zarr"))
    for metric in ("kviol3", "IR_max"):
        v = c["value"].sel(method="noise", param=0.5, metric=metric).values
        one, mean = _row(text, metric)
        assert one == pytest.approx(float(v[1]), rel=1e-5, abs=1e-9)
        assert mean == pytest.approx(float(np.mean(v)), rel=1e-5, abs=1e-9)
    fp = release_fingerprint(open_group(str(audited / "cube.zarr"), "r"), 0, 0, 1, 1)
    assert fp.hex() in text
    assert json.loads(c.attrs["datasets"])[0]["sha256"] in text
    assert "kviol3 &lt;= 50" in text and "acceptable" in text
    # the internal variant lists the riskiest records with their key combinations
    for x in _riskiest(audited)[:3]:
        assert f"<tr><td>{x['record']}</td><td>{x['risk']:.6g}</td><td>{x['frequency']}</td>" \
            in text
        assert f"<td>{x['keys']['REGION']}</td><td>{x['keys']['SEX']}</td>" in text


def test_external_variant_has_no_record_content(run, audited, tmp_path, monkeypatch):
    monkeypatch.chdir(audited)
    out = tmp_path / "E.html"
    r = _report(run, audited, out, "--variant", "external")
    assert r.exit_code == 0, r.output
    text = out.read_text()
    assert "highest individual risk" not in text
    for x in _riskiest(audited):
        assert f"<tr><td>{x['record']}</td><td>{x['risk']:.6g}</td><td>{x['frequency']}</td>" \
            not in text
        assert f"<td>{x['keys']['REGION']}</td><td>{x['keys']['SEX']}</td>" not in text
    assert "k-anonymity" in text or "f_k &lt; k" in text           # aggregates stay


def test_refusals_write_nothing_and_ranking_html_unchanged(run, audited, tmp_path,
                                                           monkeypatch):
    monkeypatch.chdir(audited)
    out = tmp_path / "R.html"
    for chosen in ("noise:0.7", "swap:0.5", "noise:0.5:9", "noise", "noise:x"):
        r = run("report", audited / "cube.zarr", "--chosen", chosen, "--html", out)
        assert r.exit_code == 2, (chosen, r.output)
        assert not out.exists()
        if chosen == "noise:0.7":
            assert "not in the cube" in r.output
    r = run("report", audited / "cube.zarr", "--by", "IL1s", "--html", out)
    assert r.exit_code == 0 and "<table" in out.read_text()
    assert "base64" not in out.read_text()                   # still the ranking table
    assert run("report", audited / "cube.zarr", "--html", out).exit_code == 2   # no --by


def test_association_and_chosen():
    from scipy.stats.contingency import association, crosstab
    rng = np.random.default_rng(0)
    a, b = rng.integers(0, 3, 200).astype(float), rng.integers(0, 4, 200).astype(float)
    x = rng.normal(size=200) + a
    m = association_matrix(np.column_stack([a, b, x]), [True, True, False])
    assert m[0, 1] == pytest.approx(association(crosstab(a, b)[1], method="cramer"))
    means = np.array([x[a == k].mean() for k in range(3)])
    cnt = np.bincount(a.astype(int))
    eta = np.sqrt((cnt * (means - x.mean()) ** 2).sum() / ((x - x.mean()) ** 2).sum())
    assert m[0, 2] == pytest.approx(eta) and m[2, 0] == m[0, 2]
    assert parse_chosen("rankswap:10") == ("rankswap", 10.0, 0)
    assert parse_chosen("noise:0.5:2") == ("noise", 0.5, 2)
