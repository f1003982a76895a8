"""Ranking tables and the Pareto front."""

from __future__ import annotations

import numpy as np
import pytest

from sdcdist import SdcInputError
from sdcdist.cube import create_cube, open_cube, write_cell
from sdcdist.report import pareto_front, ranking_table


def test_pareto_front():
    risk = np.array([1.0, 2, 3, 2, np.nan])
    loss = np.array([3.0, 2, 1, 3, 0])
    assert pareto_front(risk, loss).tolist() == [True, True, True, False, False]


@pytest.fixture
def cube(tmp_path):
    path = str(tmp_path / "c.zarr")
    create_cube(path, methods=["a", "b"], param_names=["p", "k"], params=[1.0, 2.0],
                metrics=["L", "RR"], metric_kinds=["loss", "risk"], ascending=[True, False],
                replicates=2, keysets=[("x",)], attrs={"spec": {}})
    vals = {(0, 0): [(1.0, 5.0), (3.0, 7.0)], (0, 1): [(2.0, 6.0), (2.0, 6.0)],
            (1, 0): [(2.0, 1.0), (2.0, 1.0)]}
    for (m, p), reps in vals.items():
        for r, v in enumerate(reps):
            write_cell(path, m, p, r, values=np.array(v), keyset_values=np.full((2, 1), np.nan),
                       excluded=np.zeros(2, np.int32), flags=np.zeros(2, np.int8))
    return open_cube(path)


def test_ranking_table_means_ties_and_direction(cube):
    t = ranking_table(cube, by="L")
    # means over replicates: a/1 -> (2, 6), a/2 -> (2, 6), b/1 -> (2, 1); b/2 never ran
    assert len(t) == 3
    assert (t["L"] == 2.0).all() and (t["L rank"] == 2.0).all()       # 3-way tie: average
    # RR: lower = riskier, so rank 1 is the largest value
    assert t.loc[("a", 1.0), "RR rank"] == 1.5 and t.loc[("b", 1.0), "RR rank"] == 3.0
    with pytest.raises(SdcInputError, match="no metric 'DLD'. Metrics in this cube: L, RR"):
        ranking_table(cube, by="DLD")


def test_sel_by_method_label(cube):
    v = cube.sel(method="a", param=1.0, metric="L").mean("replicate")["value"]
    assert float(v) == 2.0
    assert cube.sel(method="b").sizes["param"] == 2
