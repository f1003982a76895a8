"""Composite scores equal their formulas; ranks handle ties and NaN."""

from __future__ import annotations

import numpy as np
import pytest
import xarray as xr

from sdcdist.cube import as_cube, ranks
from sdcdist.metrics import (REGISTRY, Inputs, MeasureContext, MetricResult,
                             expand_requirements)
from sdcdist.metrics.scores import SCORE_WEIGHTS
from sdcdist.parallel import Runner
from sdcdist.report import add_scores, ranking_table

PARTS = ["IL", "IL_S2", "DLD", "PLD", "PLD20", "ID1", "ID2", "s0", "s1", "s2"]


def _formulas(v: dict[str, float]) -> dict[str, float]:
    """The catalogue's formulas, written out."""
    return {
        "Score": 0.5 * v["IL"] + 0.125 * v["DLD"] + 0.125 * v["PLD"] + 0.25 * v["ID1"],
        "Score2": 0.5 * v["IL_S2"] + 0.25 * v["DLD"] + 0.125 * v["ID1"] + 0.125 * v["ID2"],
        "Ascore": 100 * (v["s0"] + v["PLD"] / 100) / 2,
        "Dscore": 100 * (v["s1"] + v["PLD"] / 100) / 2,
        "Sscore": 100 * (v["s2"] + v["PLD"] / 100) / 2,
        "Ascore_20": 100 * (v["s0"] + v["PLD20"] / 100) / 2,
        "Dscore_20": 100 * (v["s1"] + v["PLD20"] / 100) / 2,
        "Sscore_20": 100 * (v["s2"] + v["PLD20"] / 100) / 2,
    }


def test_registered_as_scores_with_their_parts():
    for name in SCORE_WEIGHTS:
        m = REGISTRY[name]
        assert m.kind == "score" and m.ascending
        assert set(m.requires) == set(SCORE_WEIGHTS[name])
    assert expand_requirements(["Score"])[-1] == "Score"
    assert set(expand_requirements(["Score"])) == {"IL", "DLD", "PLD", "ID1", "Score"} | \
        set(expand_requirements(["IL", "DLD", "PLD", "ID1"]))


def test_scores_from_context_equal_formulas():
    """A cell whose parts are set by hand: each score is exactly its formula."""
    rng = np.random.default_rng(4)
    for _ in range(5):
        v = dict(zip(PARTS, rng.uniform(0, 100, len(PARTS))))
        for k in ("s0", "s1", "s2"):
            v[k] /= 100
        ctx = MeasureContext(Runner(None), None, None, inputs=Inputs(
            shape_original=(3, 2), shape_masked=(3, 2), columns=["a", "b"]))
        ctx.results.update({k: MetricResult(x) for k, x in v.items()})
        want = _formulas(v)
        for name in SCORE_WEIGHTS:
            assert ctx.value(name) == pytest.approx(want[name], rel=1e-13)


def _hand_cube(values: np.ndarray, metrics: list[str], ascending: list[int]) -> xr.Dataset:
    """values (cells, metrics, replicates) -> cube with methods a/b and params 1, 2, 3."""
    cells = [("a", 1.0), ("a", 2.0), ("a", 3.0), ("b", 1.0), ("b", 2.0)]
    val = np.full((2, 3, len(metrics), values.shape[2]), np.nan)
    done = np.zeros((2, 3, values.shape[2]), np.int8)
    for (m, p), v in zip(cells, values):
        mi, pi = "ab".index(m), int(p) - 1
        val[mi, pi] = v
        done[mi, pi] = 1
    ds = xr.Dataset({"value": (("method", "param", "metric", "replicate"), val),
                     "done": (("method", "param", "replicate"), done)},
                    coords={"method": ["a", "b"], "param": [1.0, 2.0, 3.0],
                            "metric": metrics, "replicate": np.arange(values.shape[2]),
                            "param_name": ("method", ["p", "k"]),
                            "metric_kind": ("metric", ["risk"] * len(metrics)),
                            "ascending": ("metric", np.array(ascending, np.int8))})
    return as_cube(ds)


def test_scores_from_a_hand_made_cube():
    rng = np.random.default_rng(9)
    values = rng.uniform(0, 100, (5, len(PARTS), 2))
    values[:, PARTS.index("s0"):, :] /= 100
    cube = add_scores(_hand_cube(values, PARTS, [1] * len(PARTS)))
    for name in SCORE_WEIGHTS:
        got = cube.sel(metric=name)["value"].values
        for mi, pi, r in zip(*np.nonzero(cube["done"].values)):
            v = {k: cube["value"].values[mi, pi, PARTS.index(k), r] for k in PARTS}
            assert got[mi, pi, r] == pytest.approx(_formulas(v)[name], rel=1e-13)
    # a ranking table by a score the cube lacks computes it from the parts
    t = ranking_table(_hand_cube(values, PARTS, [1] * len(PARTS)), by="Score")
    assert list(t.columns[:6]) == ["param_name", "replicates", "IL", "DLD", "PLD", "ID1"]
    mean = values.mean(axis=2)
    want = sorted(_formulas(dict(zip(PARTS, row)))["Score"] for row in mean)
    assert t["Score"].tolist() == pytest.approx(want)
    assert t["Score rank"].tolist() == [1, 2, 3, 4, 5]


def test_ranks_ties_average_and_nan_excluded():
    # cells a1 a2 a3 b1 b2; DLD with a tie and a NaN, RR where larger is safer
    dld = [3.0, 1.0, 3.0, np.nan, 7.0]
    rr = [0.2, 0.9, 0.5, 0.5, 0.1]
    values = np.array([[d, r] for d, r in zip(dld, rr)])[:, :, None]
    cube = _hand_cube(values, ["DLD", "RR"], [1, 0])
    rk = ranks(cube)
    assert rk["DLD"].tolist()[:3] == [2.5, 1.0, 2.5]
    assert np.isnan(rk.loc[("b", 1.0), "DLD"]) and rk.loc[("b", 2.0), "DLD"] == 4.0
    # RR: rank 1 = the largest distance (lowest risk); 0.5 twice -> 2.5
    assert rk["RR"].tolist() == [4.0, 1.0, 2.5, 2.5, 5.0]
    t = ranking_table(cube, by="DLD", metrics=["RR"])
    assert t.index[-1] == ("b", 1.0)           # NaN sorted last, without a rank
    assert np.isnan(t["DLD rank"].iloc[-1])
