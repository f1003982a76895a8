"""Release rules: parsing, acceptability, the recommendation, its Pareto front and the
closest cell when none is acceptable, each against a brute force over the cube; the
rules in specs and in `sdcdist report`/`query`."""

from __future__ import annotations

import itertools
import json
import operator

import numpy as np
import pytest

from sdcdist import SdcInputError
from sdcdist.audit import parse_spec
from sdcdist.cube import create_cube, open_cube, write_cell
from sdcdist.rules import judge, parse_rule, parse_rules, recommend

METRICS = ["IL1s", "DLD", "kviol3", "ldiv_distinct"]
ASC = [True, True, True, False]
KINDS = ["loss", "risk", "risk", "risk"]
OPS = {"<=": operator.le, "<": operator.lt, ">=": operator.ge, ">": operator.gt,
       "==": operator.eq}


def _tie_values(seed, n_methods, n_params, reps):
    """Small-integer values (many ties), some cells never run, some replicates missing,
    an occasional NaN: (value, done)."""
    rng = np.random.default_rng(seed)
    value = np.full((n_methods, n_params, len(METRICS), reps), np.nan)
    done = np.zeros((n_methods, n_params, reps), np.int8)
    for m, p in itertools.product(range(n_methods), range(n_params)):
        if rng.random() < 0.15:
            continue                                         # cell never ran
        for r in range(reps):
            if r > 0 and rng.random() < 0.2:
                continue                                     # replicate not done
            v = rng.integers(0, 4, size=len(METRICS)).astype(float)
            if rng.random() < 0.05:
                v[rng.integers(len(METRICS))] = np.nan
            value[m, p, :, r] = v
            done[m, p, r] = 1
    return value, done


def _memory_cube(seed, methods=("noise", "rankswap", "micmul", "pram"),
                 params=(1.0, 2.0, 3.0, 4.0), reps=3):
    import xarray as xr

    from sdcdist.cube import as_cube
    value, done = _tie_values(seed, len(methods), len(params), reps)
    dims = ("method", "param", "metric", "replicate")
    ds = xr.Dataset({"value": (dims, value), "done": (("method", "param", "replicate"), done)},
                    coords={"method": list(methods), "param": list(params), "metric": METRICS,
                            "replicate": list(range(reps)), "dataset": "d",
                            "param_name": ("method", ["p"] * len(methods)),
                            "metric_kind": ("metric", KINDS),
                            "ascending": ("metric", np.array(ASC, np.int8))})
    return as_cube(ds)


def _tie_cube(path, seed, *, methods=("noise", "rankswap"), params=(1.0, 2.0, 3.0), reps=2,
              attrs=None):
    """The same kind of cube written to Zarr (small: each cell write is a store write)."""
    value, done = _tie_values(seed, len(methods), len(params), reps)
    create_cube(path, methods=list(methods), param_names=["p"] * len(methods),
                params=list(params), metrics=METRICS, metric_kinds=KINDS, ascending=ASC,
                replicates=reps, keysets=[("x",)], attrs=attrs or {"spec": {}})
    for m, p, r in zip(*np.nonzero(done)):
        write_cell(path, int(m), int(p), int(r), values=value[m, p, :, r],
                   keyset_values=np.full((len(METRICS), 1), np.nan),
                   excluded=np.zeros(len(METRICS), np.int32),
                   flags=np.zeros(len(METRICS), np.int8))
    return open_cube(path)


def _brute(cube, rules, loss="IL1s"):
    """Everything from the cube's arrays, by loops: per cell the replicate values, the
    acceptability, the mean loss, the normalised violation."""
    value = np.asarray(cube["value"].values)
    done = np.asarray(cube["done"].values) == 1
    names = [str(m) for m in cube["metric"].values]
    cells = []
    for mi in range(value.shape[0]):
        for pi in range(value.shape[1]):
            reps = [r for r in range(value.shape[3]) if done[mi, pi, r]]
            if reps:
                cells.append((mi, pi, reps))
    spread = {}
    for name, _, _ in rules:
        k = names.index(name)
        vals = [value[mi, pi, k, r] for mi, pi, reps in cells for r in reps
                if not np.isnan(value[mi, pi, k, r])]
        s = max(vals) - min(vals) if vals else 0.0
        spread[name] = s if s > 0 else 1.0
    out = []
    for order, (mi, pi, reps) in enumerate(cells):
        ok, viol = True, 0.0
        for name, op, bound in rules:
            k = names.index(name)
            worst = 0.0
            for r in reps:
                v = value[mi, pi, k, r]
                if np.isnan(v) or not OPS[op](v, bound):
                    ok = False
                if np.isnan(v):
                    worst = max(worst, spread[name])
                else:
                    gap = {"<=": v - bound, "<": v - bound, ">=": bound - v, ">": bound - v,
                           "==": abs(v - bound)}[op]
                    worst = max(worst, gap)
            viol += worst / spread[name]
        lv = [value[mi, pi, names.index(loss), r] for r in reps]
        lv = [x for x in lv if not np.isnan(x)]
        out.append({"cell": (str(cube["method"].values[mi]), float(cube["param"].values[pi])),
                    "ok": ok, "viol": viol, "order": order,
                    "loss": sum(lv) / len(lv) if lv else np.inf,
                    "means": {n: np.nanmean([value[mi, pi, names.index(n), r] for r in reps])
                              if any(not np.isnan(value[mi, pi, names.index(n), r])
                                     for r in reps) else np.nan for n in names}})
    return out


RULE_SETS = [
    [("DLD", "<=", 2.0)],
    [("DLD", "<=", 2.0), ("kviol3", "<", 3.0)],
    [("DLD", "<=", 1.0), ("ldiv_distinct", ">=", 2.0)],
    [("kviol3", "==", 1.0), ("DLD", "<", 3.0)],
    [("DLD", "<", 0.0)],                                   # nothing can meet it
    [("DLD", "<=", 0.0), ("kviol3", "<=", 0.0), ("ldiv_distinct", ">", 3.0)],
]


@pytest.mark.parametrize("seed", range(3))
def test_rules_against_brute_force(seed):
    cube = _memory_cube(seed)
    for rs in RULE_SETS:
        rules = [parse_rule(f"{n} {o} {b:g}") for n, o, b in rs]
        brute = _brute(cube, rs)
        t = judge(cube, rules)
        assert [tuple(i) for i in t.index] == [b["cell"] for b in brute]
        assert t["acceptable"].tolist() == [b["ok"] for b in brute]
        for b, broken in zip(brute, t["breaks"]):
            assert (broken == "") == b["ok"]
            for n, o, bound in rs:               # every broken rule is named
                rule_text = f"{n} {o} {bound:g}"
                assert (rule_text in broken) == (not b["ok"] and _breaks(cube, b, n, o, bound))
        rec = recommend(cube, rules)
        ok = [b for b in brute if b["ok"]]
        if ok:
            risks = [n for n, _, _ in rs]
            risks = list(dict.fromkeys(risks))
            sign = {n: 1 if a else -1 for n, a in zip(METRICS, ASC)}

            def pt(b):
                return [b["loss"]] + [sign[n] * b["means"][n] for n in risks]
            front = [b for b in ok if np.isfinite(pt(b)).all() and not any(
                np.isfinite(pt(o)).all() and all(x <= y for x, y in zip(pt(o), pt(b)))
                and any(x < y for x, y in zip(pt(o), pt(b))) for o in ok)]
            assert set(rec.front) == {b["cell"] for b in front}
            best = min(front or ok, key=lambda b: (b["loss"], b["order"]))
            assert rec.recommended == best["cell"] and rec.closest is None
            assert best["loss"] == min(b["loss"] for b in ok)
            assert rec.lines()[1].startswith(f"recommended: {best['cell'][0]}")
        else:
            closest = min(brute, key=lambda b: (round(b["viol"], 12), b["loss"], b["order"]))
            assert rec.recommended is None and rec.closest == closest["cell"]
            assert "no cell is acceptable; closest" in rec.lines()[1]
            assert rec.as_dict()["recommended"] is None


def _breaks(cube, b, name, op, bound):
    value = np.asarray(cube.sel(method=b["cell"][0], param=b["cell"][1], metric=name)
                       ["value"].values)
    done = np.asarray(cube.sel(method=b["cell"][0], param=b["cell"][1])["done"].values) == 1
    return any(np.isnan(v) or not OPS[op](v, bound) for v in value[done])


def test_none_acceptable_is_said():
    cube = _memory_cube(7)
    rec = recommend(cube, [parse_rule("DLD < 0")])
    assert rec.recommended is None and rec.front == []
    # all cells break it; the closest has the smallest worst-replicate DLD
    worst = judge(cube, [parse_rule("DLD < 0")])["violation"]
    assert worst[rec.closest] == worst.min()


@pytest.mark.parametrize("text,match", [
    ("DLD => 5", "unexpected '='"),
    ("DLD 5", "expected a comparison operator"),
    ("DLD <= ", "ends where a number was expected"),
    ("DLD != 5", "unexpected '!'"),
    ("5 >= DLD", "expected a metric name"),
    ("DLD <= 5 and IL1s < 3", "one comparison per rule"),
    ("DLD <= 1e999", "finite"),
    ("__import__('os') <= 1", r"unexpected '\('"),
    ("", "it is empty"),
    ("NOPE <= 5", "names no metric sdcdist knows"),
    ("RR >= 5", "which this cube did not measure"),
])
def test_bad_rules(text, match):
    with pytest.raises(SdcInputError, match=match):
        parse_rule(text, METRICS)


def test_spec_require_is_validated_and_stored():
    base = {"dataset": {"synthetic": {"rows": 50, "columns": 3}},
            "methods": [{"name": "noise", "params": [0.1]}], "metrics": ["IL1s", "DLD"]}
    spec = parse_spec({**base, "require": ["DLD<=5", "IL1s < 1e1"]})
    assert spec.require == ("DLD <= 5", "IL1s < 10") and spec.raw["require"] == list(spec.require)
    assert "require" not in parse_spec(base).raw         # old specs keep their SHA-256
    with pytest.raises(SdcInputError, match="does not measure"):
        parse_spec({**base, "require": ["kviol3 <= 1"]})
    with pytest.raises(SdcInputError, match="names no metric sdcdist knows"):
        parse_spec({**base, "require": ["DLDX <= 1"]})
    with pytest.raises(SdcInputError, match="non-empty list"):
        parse_spec({**base, "require": {"DLD": 5}})
    with pytest.raises(SdcInputError, match="more than 100"):
        parse_rules(["DLD <= 1"] * 101)


def test_report_and_query_with_rules(tmp_path, run):
    path = str(tmp_path / "c.zarr")
    cube = _tie_cube(path, 3, attrs={"spec": {"require": ["kviol3 <= 3"]}})
    rec = recommend(cube, [parse_rule("kviol3 <= 3"), parse_rule("DLD <= 2")])
    r = run("report", path, "--by", "DLD", "--require", "DLD <= 2", "--csv",
            tmp_path / "t.csv")
    assert r.exit_code == 0, r.output
    assert "rules: kviol3 <= 3, DLD <= 2" in r.output
    assert rec.lines()[1] in r.output
    import pandas as pd
    t = pd.read_csv(tmp_path / "t.csv", index_col=[0, 1], keep_default_na=False)
    assert (t["acceptable"] == "yes").sum() == rec.table["acceptable"].sum()
    r = run("query", path, "--require", "DLD <= 3", "--acceptable", "--loss", "DLD")
    assert r.exit_code == 0 and "least DLD" in r.output, r.output
    # bad input: exit 2, nothing written
    out = tmp_path / "bad.csv"
    # (every kind of bad rule is refused by the parser above; here: before any output)
    r = run("report", path, "--by", "DLD", "--require", "RR >= 1", "--csv", out)
    assert r.exit_code == 2 and not out.exists() and "did not measure" in r.output, r.output
    r = run("query", path, "--require", "DLD <= 2", "--loss", "RR", "--csv", out)
    assert r.exit_code == 2 and not out.exists() and "no metric 'RR'" in r.output, r.output
    assert json.loads(open_cube(path).attrs["spec"])["require"] == ["kviol3 <= 3"]


def test_calibrate_to_rules_matches_the_audit_grid(tmp_path, run):
    """With no bisection, calibration to rules picks per method what the rules pick on an
    audit cube of the same spec (the same seeds: the same probes); bisection then finds an
    acceptable parameter of no more loss."""
    from sdcdist.audit import run_audit
    from sdcdist.audit.calibrate import calibrate_rules
    doc = {"name": "cr", "seed": 3, "replicates": 2,
           "dataset": {"name": "s", "synthetic": {"rows": 80, "columns": 3, "seed": 2}},
           "methods": [{"name": "noise", "params": [0.02, 0.3, 1.0]},
                       {"name": "micmul", "params": [2, 5, 9]}],
           "metrics": ["IL1s", "DLD"]}
    spec = parse_spec(doc)
    run_audit(spec, tmp_path / "c.zarr")
    cube = open_cube(str(tmp_path / "c.zarr"))
    dld = np.asarray(cube.sel(metric="DLD")["value"].values)
    bound = float(np.nanmedian(dld))                     # some cells pass, some do not
    rule = f"DLD <= {bound!r}"
    t = judge(cube, [parse_rule(rule)])
    grid = calibrate_rules(spec, [rule], max_iter=0).table
    for m in ("noise", "micmul"):
        rows = t.xs(m, level="method")
        good = rows[rows["acceptable"]]
        got = grid.loc[("s", m)]
        if len(good):
            want = min(good.index, key=lambda p: (good.loc[p, "loss"], p))
            assert got["status"] == "acceptable" and got["param"] == want
            assert got["IL1s"] == pytest.approx(good.loc[want, "loss"], rel=0, abs=0)
        else:
            assert got["status"].startswith("none acceptable")
    fine = calibrate_rules(spec, [rule], max_iter=4).table
    for m in ("noise", "micmul"):
        a, b = grid.loc[("s", m)], fine.loc[("s", m)]
        assert b["status"] == a["status"]
        if a["status"] == "acceptable":
            assert b["DLD"] <= bound and b["IL1s"] <= a["IL1s"]
    with open(tmp_path / "spec.yaml", "w") as f:
        json.dump(doc, f)
    r = run("calibrate", tmp_path / "spec.yaml", "--require", "kviol3 <= 1")
    assert r.exit_code == 2 and "did not measure" in r.output
    r = run("calibrate", tmp_path / "spec.yaml", "--require", "DLD <= 1", "--target", "3")
    assert r.exit_code == 2 and "takes no --risk" in r.output, r.output


def test_documented_examples_run():
    import doctest

    import sdcdist.rules
    res = doctest.testmod(sdcdist.rules, optionflags=doctest.NORMALIZE_WHITESPACE)
    assert res.attempted > 0 and res.failed == 0
