"""The disclosure-risk models of issue 24 in audits and reports: each family (attribute
disclosure, SUDA2, household risk, model-based risk, the three criteria with their
intervals, synthetic distances) in a spec, in `sdcdist measure` / `risk` output, in the
ranking table (direction, interval columns) and in the plots (error bars)."""

from __future__ import annotations

import json

import numpy as np
import pandas as pd
import pytest

from sdcdist import report as rp
from sdcdist.audit import parse_spec, run_audit
from sdcdist.cube import metric_ascending, open_cube
from sdcdist.data import reference_file
from sdcdist.masking import get_method
from sdcdist.masking._roles import method_options
from sdcdist.metrics import REGISTRY, companions, is_companion

#: an audit of 4 cells on 600 records and several CLI runs: about 30 s on two idle cores
pytestmark = pytest.mark.slow

#: one metric of each family, with the direction a reader expects: True = a smaller value
#: is safer (rank 1 = smallest)
FAMILIES = {
    "ldiv_distinct": False,         # more distinct confidential values per class: safer
    "ldiv_distinct_fail": True,
    "tclose": True,                 # farther from the file's distribution: less safe
    "beta_enhanced": True,
    "delta_disc": True,
    "suda_mean": True,
    "dis_suda_mean": True,
    "HR_ER": True,
    "HR_max": True,
    "modrisk_tau1": True,
    "so_uni": True,
    "so_multi": True,
    "linkability": True,
    "inference": True,
    "dcr_train_median": False,      # farther from the training records: safer
    "nndr_median": False,
    "cap": False,                   # 1 - correct attribution probability
    "DLD": True,
}
ATTACKS = ("so_uni", "so_multi", "linkability", "inference")
COLS = ["urbrur", "water", "sex", "age", "income", "ori_hid", "sampling_weight"]
KEYS = ["urbrur", "water", "sex", "age"]


@pytest.fixture(scope="module")
def hh_csv(tmp_path_factory):
    """The first 600 records of the household file (whole households)."""
    d = pd.read_csv(reference_file("household"))[COLS].iloc[:600]
    path = tmp_path_factory.mktemp("hh") / "hh.csv"
    d.to_csv(path, index=False)
    return path


def _spec(path, metrics):
    return parse_spec({
        "name": "families", "seed": 5,
        "dataset": {"name": "hh", "path": str(path), "categorical": KEYS,
                    "roles": {"key": KEYS, "confidential": ["income"],
                              "household": ["ori_hid"], "weight": ["sampling_weight"]}},
        "methods": [{"name": "pram", "params": [0.5, 0.9]},
                    {"name": "noise", "params": [0.1, 1.0]}],
        "replicates": 1, "metrics": list(metrics),
        "keysets": [KEYS + ["income"]],
        "options": {"control": 0.25, "attack_n": 60, "so_max_attempts": 3000}})


@pytest.fixture(scope="module")
def cube(hh_csv, client, tmp_path_factory):
    out = tmp_path_factory.mktemp("cube") / "c.zarr"
    res = run_audit(_spec(hh_csv, [*FAMILIES, "hellinger"]), str(out), client=client)
    assert res.computed == res.total
    return open_cube(str(out))


def test_spec_brings_each_interval_metric_with_its_interval(hh_csv):
    spec = _spec(hh_csv, ["so_uni", "DLD", "inference_hi"])
    m = list(spec.metrics)
    assert m[:4] == ["so_uni", "so_uni_lo", "so_uni_hi", "so_uni_base"]
    # a companion named by itself is that figure alone
    assert m[4:] == ["DLD", "inference_hi"]
    spec = _spec(hh_csv, ["linkability_base", "linkability"])
    assert list(spec.metrics) == ["linkability_base", "linkability", "linkability_lo",
                                  "linkability_hi"]


def test_registry_declares_direction_and_companions():
    for name, asc in FAMILIES.items():
        assert REGISTRY[name].ascending is asc, name
        assert REGISTRY[name].kind == "risk", name
        assert REGISTRY[name].unit, name
    for a in ATTACKS:
        assert companions(a) == {"lo": f"{a}_lo", "hi": f"{a}_hi", "base": f"{a}_base"}
        assert all(is_companion(c) and REGISTRY[c].part_of == a for c in companions(a).values())
        assert not is_companion(a)
    assert not any(is_companion(n) for n in FAMILIES)


def test_every_family_in_the_cube(cube):
    have = [str(m) for m in cube["metric"].values]
    asc = metric_ascending(cube)
    for name, want in FAMILIES.items():
        v = cube["value"].sel(metric=name).values
        assert np.isfinite(v[~np.isnan(v)]).all() and (~np.isnan(v)).any(), name
        assert asc[name] is want, name
    for a in ATTACKS:
        assert set(companions(a).values()) <= set(have)
        t = rp.cell_table(cube)
        assert (t[f"{a}_lo"] <= t[a] + 1e-12).all() and (t[a] <= t[f"{a}_hi"] + 1e-12).all()


def test_household_id_is_never_masked(cube, hh_csv):
    """A numeric method leaves the household id alone, so HR_ER under noise is the
    original file's (the keys are not touched); PRAM moves it."""
    t = rp.cell_table(cube)
    noise = t.loc["noise", "HR_ER"].to_numpy()
    assert noise[0] == noise[1]
    d = pd.read_csv(hh_csv)
    X = d.to_numpy(float)
    opts = method_options("noise", columns=COLS, roles={"household": ["ori_hid"],
                                                         "weight": ["sampling_weight"]},
                          categorical=KEYS)
    Y = get_method("noise")(X, 0.5, rng=np.random.default_rng(0), **opts)
    assert np.array_equal(Y[:, 5], X[:, 5]) and np.array_equal(Y[:, 6], X[:, 6])
    assert not np.array_equal(Y[:, 4], X[:, 4])
    # a categorical household id, and no key role to limit what PRAM masks
    cat_opts = method_options("pram", columns=COLS, roles={"household": ["ori_hid"]},
                              categorical=[*KEYS, "ori_hid"])
    Z = get_method("pram")(X, 0.5, rng=np.random.default_rng(0), **cat_opts)
    assert np.array_equal(Z[:, 5], X[:, 5])
    assert any(not np.array_equal(Z[:, COLS.index(k)], X[:, COLS.index(k)]) for k in KEYS)


def test_ranking_table_ranks_by_direction_and_leaves_companions_unranked(cube):
    t = rp.ranking_table(cube, by="HR_ER")
    for a in ATTACKS:
        for c in companions(a).values():
            assert c in t.columns and f"{c} rank" not in t.columns
        assert f"{a} rank" in t.columns
    for name, asc in FAMILIES.items():
        r = t[f"{name} rank"].dropna()
        best = t.loc[r.idxmin(), name]
        vals = t[name].dropna()
        assert best == (vals.min() if asc else vals.max()), name
    # asked for by name, an attack brings its interval; the text shows it as [lo, hi]
    t2 = rp.ranking_table(cube, by="so_multi", metrics=["linkability"])
    assert list(t2.columns[2:10]) == ["linkability", "linkability_lo", "linkability_hi",
                                      "linkability_base", "so_multi", "so_multi_lo",
                                      "so_multi_hi", "so_multi_base"]
    text = rp.format_table(t2)
    assert "so_multi [lo, hi]" in text and "linkability_lo" not in text
    row = t2.iloc[0]
    assert f"{row['so_multi']:.2f} [" in rp.markdown_table(t2) or \
        f"{row['so_multi']:.1e} [" in rp.markdown_table(t2)


def test_plots_draw_intervals_as_error_bars(cube, tmp_path, monkeypatch):
    import matplotlib
    matplotlib.use("Agg")
    from matplotlib.axes import Axes
    calls = []
    real = Axes.errorbar

    def spy(self, *a, **k):
        calls.append(k.get("yerr"))
        return real(self, *a, **k)
    monkeypatch.setattr(Axes, "errorbar", spy)
    rp.plot_tradeoff(cube, risk="so_multi", loss="hellinger", out=str(tmp_path / "t.png"))
    assert len(calls) == 2 and all(np.all(np.asarray(c) >= 0) for c in calls)
    t = rp.cell_table(cube).loc["pram"]
    assert np.allclose(calls[0][1], t["so_multi_hi"] - t["so_multi"])
    calls.clear()
    rp.plot_tradeoff(cube, risk="HR_ER", loss="hellinger", out=str(tmp_path / "h.png"))
    assert not calls
    rp.plot_risk_curves(cube, metric="inference", out=str(tmp_path / "c.png"))
    assert len(calls) == 2
    for name in FAMILIES:
        rp.plot_tradeoff(cube, risk=name, loss="hellinger", out=str(tmp_path / "f.png"))
    monkeypatch.setattr(rp, "ranks", _spy_ranks(seen := []))
    rp.plot_rank_heatmap(cube, out=str(tmp_path / "r.png"))
    assert seen and not any(is_companion(n) for n in seen[0])
    assert set(FAMILIES) <= set(seen[0])


def _spy_ranks(seen):
    real = rp.ranks

    def f(cube, names, **kw):
        seen.append(list(names))
        return real(cube, names, **kw)
    return f


@pytest.fixture(scope="module")
def released(hh_csv, tmp_path_factory):
    d = pd.read_csv(hh_csv)
    tmp = tmp_path_factory.mktemp("rel")
    rng = np.random.default_rng(3)
    m = d.copy()
    m["income"] = m["income"] + rng.normal(0, 0.1 * m["income"].std(), len(m))
    d.iloc[:450].to_csv(tmp / "o.csv", index=False)
    m.iloc[:450].to_csv(tmp / "m.csv", index=False)
    d.iloc[450:].to_csv(tmp / "c.csv", index=False)
    m.to_csv(tmp / "mall.csv", index=False)
    return tmp


def _json(output: str) -> dict:
    """The JSON object of a command's output (a note on stderr may come first)."""
    return json.loads(output[output.index("\n{") + 1 if not output.startswith("{")
                             else 0:])


COMMON = ["--categorical", ",".join(KEYS), "--weight", "sampling_weight",
          "--household", "ori_hid", "--confidential", "income", "--keys", ",".join(KEYS),
          "-o", "attack_n=40", "-o", "so_max_attempts=2000", "--json"]


@pytest.mark.parametrize("command", ["measure", "risk"])
def test_every_family_in_measure_and_risk_output(run, hh_csv, released, command):
    names = [n for n in FAMILIES if n != "DLD"]
    r = run(command, hh_csv, released / "mall.csv", "--metric", ",".join(names), *COMMON)
    assert r.exit_code == 0, r.output
    got = _json(r.output)
    got = got["metrics"] if command == "risk" else got
    assert set(got) == set(names)
    for n in names:
        assert np.isfinite(got[n]["value"]), n
        if n in ATTACKS:
            lo, hi = got[n]["interval"]
            assert lo <= got[n]["value"] <= hi and 0 <= got[n]["baseline"] <= 1
        else:
            assert "interval" not in got[n]


def test_risk_takes_a_control_set(run, released):
    args = ["--metric", "so_multi,inference", *COMMON]
    with_c = _json(run("risk", released / "o.csv", released / "m.csv", "--control",
                       released / "c.csv", *args).output)["metrics"]
    without = _json(run("risk", released / "o.csv", released / "m.csv",
                        *args).output)["metrics"]
    # the residual over the control set is below the main attack's rate
    assert with_c["inference"]["value"] <= without["inference"]["value"]
    text = run("risk", released / "o.csv", released / "m.csv", "--control",
               released / "c.csv", *args[:-1]).output
    assert "baseline" in text and "[" in text
    pd.read_csv(released / "c.csv").drop(columns=["income"]).to_csv(released / "bad.csv",
                                                                       index=False)
    r = run("risk", released / "o.csv", released / "m.csv", "--control",
            released / "bad.csv", "--metric", "so_uni")
    assert r.exit_code == 2 and "control file's columns" in r.output


def test_service_default_ranking_leaves_companions_out(cube):
    """The service's balanced rank averages the risk ranks: an interval bound or a
    baseline is not a risk of its own there either."""
    from sdcdist.service.results import default_ranking
    r = default_ranking(cube)
    assert r["by"] == "balanced" and "so_uni" in r["parts"]
    assert not any(is_companion(p) for p in r["parts"])
