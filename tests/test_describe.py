"""`sdcdist describe`: summaries, k-anonymity violations against a brute force (a missing
key value matching every category), the riskiest records, bad input (exit 2)."""

from __future__ import annotations

import json

import numpy as np

from sdcdist.data import Microdata, write_microdata
from sdcdist.describe import describe


def _md(n=60, seed=3):
    rng = np.random.default_rng(seed)
    X = np.column_stack([rng.normal(40, 8, n).round(), rng.integers(0, 3, n).astype(float),
                         rng.integers(0, 5, n).astype(float), rng.gamma(2, 2, n)])
    X[[2, 7], 1] = np.nan                            # missing keys match every category
    return Microdata(X, ("AGE", "REG", "JOB", "INC"),
                     categories={"REG": ["n", "s", "e"], "JOB": list("abcde")})


def _brute(md, keys):
    idx = [md.columns.index(k) for k in keys]
    K = md.values[:, idx]
    f = np.zeros(len(K), int)
    for i in range(len(K)):
        for j in range(len(K)):
            both = ~np.isnan(K[i]) & ~np.isnan(K[j])
            f[i] += bool((K[i][both] == K[j][both]).all())
    return f


def test_kviolations_and_risk_against_brute_force():
    md = _md()
    for keys in (["REG", "JOB"], ["REG", "JOB", "AGE"]):       # a numeric key too
        d = describe(md, keys=keys, top=5)["risk"]
        f = _brute(md, keys)
        for k in (2, 3, 5):
            assert d["kviol"][str(k)]["records"] == int((f < k).sum())
        assert d["unique_records"] == int((f == 1).sum())
        r = 1.0 / f
        assert np.isclose(d["expected_reidentifications"], r.sum()) and np.isclose(d["risk_max"], r.max())
        order = sorted(range(len(f)), key=lambda i: (-r[i], i))[:5]
        assert [x["record"] for x in d["riskiest"]] == [i + 1 for i in order]
        x = d["riskiest"][0]
        i = x["record"] - 1
        assert x["frequency"] == f[i]
        reg = md.values[i, 1]
        assert x["keys"]["REG"] == (None if np.isnan(reg) else "nse"[int(reg)])


def test_summaries():
    md = _md()
    s = {x["name"]: x for x in describe(md, keys=["REG"])["summaries"]}
    inc = md.values[:, 3]
    assert np.isclose(s["INC"]["mean"], inc.mean()) and np.isclose(s["INC"]["sd"],
                                                                    inc.std(ddof=1))
    assert np.isclose(s["INC"]["quantiles"]["50%"], np.median(inc))
    assert s["REG"]["missing"] == 2
    reg = md.values[:, 1]
    assert [c["count"] for c in s["REG"]["categories"]] == \
        [int((reg == v).sum()) for v in range(3)]


def test_cli_text_json_and_bad_key(run, tmp_path):
    md = _md()
    write_microdata(md, tmp_path / "d.csv")
    r = run("describe", tmp_path / "d.csv", "--categorical", "REG,JOB", "--keys", "REG,JOB",
            "--json")
    assert r.exit_code == 0, r.output
    d = json.loads(r.output)
    f = _brute(md, ["REG", "JOB"])
    assert d["risk"]["kviol"]["3"]["records"] == int((f < 3).sum())
    r = run("describe", tmp_path / "d.csv", "--keys", "REG,JOB", "--top", "2")
    assert r.exit_code == 0 and "k = 5:" in r.output and "record " in r.output
    r = run("describe", tmp_path / "d.csv", "--keys", "REG,NOPE")
    assert r.exit_code == 2 and "NOPE" in r.output
