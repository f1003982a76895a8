"""Calibration at equal risk: known risk curves recovered, unreachable targets reported."""

from __future__ import annotations

import numpy as np
import pytest

from sdcdist.audit import parse_spec
from sdcdist.audit.calibrate import calibrate, open_calibration
from sdcdist.errors import SdcInputError
from sdcdist.masking import REGISTRY as METHODS, register as register_method
from sdcdist.metrics import REGISTRY as METRICS, register as register_metric


@pytest.fixture(scope="module", autouse=True)
def known_curves():
    """Test-only methods whose risk curve is known exactly, and the metric reading it.

    ``t_shift``: X' = X + a (deterministic), so mean(X' - X) = a.
    ``t_noise``: X' = X + a + N(0, 0.01^2) noise, so the mean over cells is a up to noise.
    ``t_int``:   X' = X + k^2 for an integer k, so the curve is k^2.
    ``t_risk``:  mean(X' - X), a "risk" that the tests calibrate on.
    """
    @register_method("t_shift", param="a", kind="float", low=0.0, high=10.0, random=False,
                     description="test: shift by a")
    def t_shift(X, a, *, rng):
        return X + a

    @register_method("t_noise", param="a", kind="float", low=0.0, high=10.0, random=True,
                     description="test: shift by a plus small noise")
    def t_noise(X, a, *, rng):
        return X + a + rng.normal(0.0, 0.01, size=X.shape)

    @register_method("t_int", param="k", kind="int", low=1, high=10, random=False,
                     description="test: shift by k squared")
    def t_int(X, k, *, rng):
        return X + float(k) ** 2

    @register_metric("t_risk", kind="risk", description="test: mean shift")
    def t_risk(ctx):
        X = ctx.runner.result(ctx.original)
        Y = ctx.runner.result(ctx.masked)
        return float(np.mean(np.asarray(Y) - np.asarray(X)))

    @register_metric("t_util", kind="utility", description="test: twice the mean shift")
    def t_util(ctx):
        return 2.0 * ctx.value("t_risk")

    yield
    for name in ("t_shift", "t_noise", "t_int"):
        METHODS.pop(name)
    for name in ("t_risk", "t_util"):
        METRICS.pop(name)


def _spec(methods, replicates=3):
    return parse_spec({"name": "cal", "seed": 3,
                       "dataset": {"name": "s", "synthetic": {"rows": 50, "columns": 3,
                                                              "seed": 1}},
                       "methods": methods, "replicates": replicates,
                       "metrics": ["t_util"], "keysets": [["WAGES"]]})


def test_recovers_known_parameters(tmp_path):
    spec = _spec([{"name": "t_shift", "params": [0.0, 1.0, 2.0, 4.0]},
                  {"name": "t_noise", "params": [0.0, 5.0, 10.0]},
                  {"name": "t_int", "params": [1, 4, 10]}])
    res = calibrate(spec, metric="t_risk", target=2.7, tol=1e-3, out=tmp_path / "c.zarr")
    t = res.table
    # bisection between 2 and 4 for the exact curve a -> a
    assert t.loc["t_shift", "status"] == "ok"
    assert abs(t.loc["t_shift", "param"] - 2.7) <= 1e-3
    assert abs(t.loc["t_shift", "t_risk"] - 2.7) <= 1e-3
    # with noise: the mean over 3 replicates is within the tolerance, the parameter close
    assert t.loc["t_noise", "status"] == "ok"
    assert abs(t.loc["t_noise", "t_risk"] - 2.7) <= 1e-3
    assert abs(t.loc["t_noise", "param"] - 2.7) < 5e-3
    # integer k with k^2 = 2.7 has no exact solution: 1 -> 1, 2 -> 4; nearest is 2 (|4-2.7|
    # = 1.3 < |1-2.7| = 1.7)
    assert t.loc["t_int", "status"] == "nearest"
    # the calibration cube is sealed and fingerprinted like every store sdcdist writes
    from sdcdist.integrity import verify_store
    import zarr
    rep = verify_store(tmp_path / "c.zarr")
    assert rep.ok and rep.sealed and rep.checked["arrays fingerprinted"] >= 3, rep.lines()
    assert not any("older" in ln for ln in rep.lines())
    import shutil
    shutil.copytree(tmp_path / "c.zarr", tmp_path / "tampered.zarr")
    g = zarr.open_group(str(tmp_path / "tampered.zarr"), mode="r+")
    g["calibrated_param"][0] = 99.0
    rep = verify_store(tmp_path / "tampered.zarr")
    assert not rep.ok and "calibrated_param" in " ".join(rep.problems)
    assert t.loc["t_int", "param"] == 2
    assert t.loc["t_int", "t_risk"] == 4.0
    # the other metrics are measured at the calibrated parameter, ranked (lower is better)
    assert t.loc["t_shift", "t_util"] == pytest.approx(2 * t.loc["t_shift", "t_risk"])
    assert t.loc["t_shift", "t_util rank"] == 1 and t.loc["t_int", "t_util rank"] == 3
    ds = open_calibration(tmp_path / "c.zarr")
    assert float(ds.sel(method="t_int")["calibrated_param"].item()) == 2
    assert "achieved_risk" in ds and "value" in ds
    # the probes of the curve are kept: grid points and bisection midpoints
    probes = ds.sel(method="t_shift")["probe_param"].values
    assert {0.0, 1.0, 2.0, 4.0, 3.0} <= set(probes[np.isfinite(probes)].tolist())


def test_integer_nearest_and_exact_grid_hit():
    spec = _spec([{"name": "t_int", "params": [1, 10]}])
    t = calibrate(spec, metric="t_risk", target=30.0).table
    assert t.loc["t_int", "param"] == 5      # 25 is nearer to 30 than 36
    t = calibrate(spec, metric="t_risk", target=36.0).table
    assert (t.loc["t_int", "param"], t.loc["t_int", "status"]) == (6, "ok")


def test_unreachable_target_is_reported_not_clipped(client):
    spec = _spec([{"name": "t_shift", "params": [0.0, 1.0, 2.0]},
                  {"name": "t_int", "params": [1, 3, 10]}])
    t = calibrate(spec, metric="t_risk", target=50.0, client=client).table
    assert t.loc["t_shift", "status"] == "unreachable"
    assert np.isnan(t.loc["t_shift", "param"]) and np.isnan(t.loc["t_shift", "t_risk"])
    assert t.loc["t_shift", "reach"] == "0..2"
    # k^2 reaches 50 between 7 (49) and 8 (64): 49 is nearest
    assert (t.loc["t_int", "param"], t.loc["t_int", "status"]) == (7, "nearest")


def test_bad_requests():
    spec = _spec([{"name": "t_shift", "params": [1.0]}])
    with pytest.raises(SdcInputError, match="at least two values"):
        calibrate(spec, metric="t_risk", target=1.0)
    spec = _spec([{"name": "t_shift", "params": [1.0, 2.0]}])
    with pytest.raises(SdcInputError, match="--risk needs a risk metric"):
        calibrate(spec, metric="t_util", target=1.0)
    with pytest.raises(SdcInputError, match="--utility needs"):
        calibrate(spec, metric="t_risk", target=1.0, mode="utility")


def test_equal_utility_dual():
    spec = parse_spec({"name": "cal", "seed": 3,
                       "dataset": {"name": "s", "synthetic": {"rows": 50, "columns": 3,
                                                              "seed": 1}},
                       "methods": [{"name": "t_shift", "params": [0.0, 4.0]}],
                       "metrics": ["t_risk"], "keysets": [["WAGES"]]})
    t = calibrate(spec, metric="t_util", target=3.0, mode="utility", tol=1e-4).table
    assert abs(t.loc["t_shift", "param"] - 1.5) <= 1e-4
    assert "t_risk" in t.columns


def test_several_datasets_and_curve_plot(tmp_path):
    from sdcdist.cli.results import _open_any
    from sdcdist.report import plot_risk_curves
    spec = parse_spec({"name": "cal", "seed": 3,
                       "datasets": [{"name": "x", "synthetic": {"rows": 40, "columns": 3}},
                                    {"name": "y", "synthetic": {"rows": 30, "columns": 2}}],
                       "methods": [{"name": "t_shift", "params": [0.0, 4.0]},
                                   {"name": "t_int", "params": [1, 9]}],
                       "metrics": ["t_util"], "keysets": [["WAGES"]]})
    res = calibrate(spec, metric="t_risk", target=1.0, tol=1e-6, out=tmp_path / "c.zarr")
    t = res.table
    assert list(t.index.names) == ["dataset", "method"] and len(t) == 4
    assert t.loc[("y", "t_int"), "param"] == 1 and t.loc[("x", "t_shift"), "param"] == 1.0
    cal = _open_any(str(tmp_path / "c.zarr"))
    out = plot_risk_curves(cal, metric="t_risk", out=str(tmp_path / "f.svg"), dataset="y")
    assert (tmp_path / "f.svg").stat().st_size > 1000 and out.endswith(".svg")
    with pytest.raises(SdcInputError, match="choose one"):
        plot_risk_curves(cal, metric="t_risk", out=str(tmp_path / "g.svg"))


def test_the_spec_holdout_reaches_the_probes(tmp_path):
    """A calibrate spec whose dataset names a holdout file measures the holdout metrics
    (dcr_*) at the calibrated parameter, as an audit of that parameter would."""
    from pathlib import Path

    import pandas as pd

    from sdcdist.audit import run_audit
    from sdcdist.cube import open_cube
    d = pd.read_csv(Path(__file__).parents[1] / "sdcdist" / "data" / "reference" /
                    "household.csv")[["urbrur", "water", "sex", "age", "income"]]
    d.iloc[:150].to_csv(tmp_path / "train.csv", index=False)
    d.iloc[150:300].to_csv(tmp_path / "hold.csv", index=False)
    cats = ["urbrur", "water", "sex"]
    spec = parse_spec({"name": "cal", "seed": 3,
                       "dataset": {"name": "s", "path": "train.csv", "holdout": "hold.csv",
                                   "categorical": cats},
                       "methods": [{"name": "t_shift", "params": [0.0, 4.0]}],
                       "metrics": ["dcr_holdout_median", "dcr_overfit"],
                       "keysets": [["urbrur", "water"]]}, base_dir=tmp_path)
    t = calibrate(spec, metric="t_risk", target=0.6, tol=1e-6, out=tmp_path / "c.zarr").table
    a = t.loc["t_shift", "param"]
    got = open_calibration(tmp_path / "c.zarr")["value"].sel(dataset="s", method="t_shift")
    assert t.loc["t_shift", "status"] == "ok" and 0 < a < 4
    doc = {**spec.raw, "methods": [{"name": "t_shift", "params": [float(a)]}]}
    run_audit(parse_spec(doc, base_dir=tmp_path), tmp_path / "a.zarr")
    cube = open_cube(tmp_path / "a.zarr")
    for m in ("dcr_holdout_median", "dcr_overfit"):
        want = float(cube["value"].sel(method="t_shift", metric=m).isel(param=0, replicate=0))
        assert np.isfinite(want) and float(got.sel(metric=m)) == want, m


def test_the_spec_control_and_household_reach_the_probes(tmp_path):
    """A calibrate spec with a control share and a household id measures the attacks
    (against the control set) and the household risk at the calibrated parameter as an
    audit of that parameter does."""
    from pathlib import Path

    import pandas as pd

    from sdcdist.audit import run_audit
    from sdcdist.cube import open_cube
    d = pd.read_csv(Path(__file__).parents[1] / "sdcdist" / "data" / "reference" /
                    "household.csv")[["urbrur", "water", "sex", "age", "income", "ori_hid"]]
    d.iloc[:300].to_csv(tmp_path / "h.csv", index=False)
    cats = ["urbrur", "water", "sex", "age"]
    spec = parse_spec({"name": "cal", "seed": 3,
                       "dataset": {"name": "s", "path": "h.csv", "categorical": cats,
                                   "roles": {"household": ["ori_hid"]}},
                       "methods": [{"name": "t_shift", "params": [0.0, 4.0]}],
                       "metrics": ["HR_mean", "so_uni"],
                       "options": {"control": 0.2, "attack_n": 20},
                       "keysets": [["urbrur", "water", "sex", "age"]]}, base_dir=tmp_path)
    t = calibrate(spec, metric="t_risk", target=0.6, tol=1e-6, out=tmp_path / "c.zarr").table
    a = t.loc["t_shift", "param"]
    got = open_calibration(tmp_path / "c.zarr")["value"].sel(dataset="s", method="t_shift")
    doc = {**spec.raw, "methods": [{"name": "t_shift", "params": [float(a)]}]}
    run_audit(parse_spec(doc, base_dir=tmp_path), tmp_path / "a.zarr")
    cube = open_cube(tmp_path / "a.zarr")
    for m in ("HR_mean", "so_uni"):
        want = float(cube["value"].sel(method="t_shift", metric=m).isel(param=0, replicate=0))
        assert np.isfinite(want) and float(got.sel(metric=m)) == want, m
