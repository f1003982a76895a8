"""The cube's query helpers: their documented examples run, and their edge cases hold."""

from __future__ import annotations

import doctest

import numpy as np
import pytest

import sdcdist.cube
import sdcdist.metrics.scores
import sdcdist.query
import sdcdist.report
from sdcdist.cube import at_risk, best, crossing, example_cube, pareto, pareto_mask
from sdcdist.errors import SdcInputError


@pytest.mark.parametrize("module", [sdcdist.cube, sdcdist.query, sdcdist.metrics.scores,
                                    sdcdist.report])
def test_documented_examples_run(module):
    res = doctest.testmod(module, optionflags=doctest.NORMALIZE_WHITESPACE)
    assert res.attempted > 0 and res.failed == 0


def test_crossing_edge_cases():
    ps = np.array([1.0, 2.0, 3.0, 4.0])
    assert crossing(ps, np.array([1.0, np.nan, 5.0, 9.0]), 3.0) == (0, 2)   # NaN skipped
    assert crossing(ps, np.array([1.0, 5.0, 1.0, 5.0]), 3.0) == (0, 1)      # first crossing
    assert crossing(ps, np.array([1.0, 3.0, 5.0, 7.0]), 3.0) == (1, 1)      # exact hit
    assert crossing(ps, np.full(4, np.nan), 3.0) is None


def test_pareto_mask():
    risk = np.array([1.0, 2, 3, 2, np.nan])
    loss = np.array([3.0, 2, 1, 3, 0])
    assert pareto_mask(risk, loss).tolist() == [True, True, True, False, False]


def test_best_pareto_at_risk_respect_direction():
    cube = example_cube()
    # flip DLD's direction: larger is now better (as for RR)
    flipped = cube.assign_coords(ascending=("metric", np.array([0, 1], np.int8)))
    assert best(flipped, "DLD", n=1).index[0] == ("rankswap", 5.0)
    assert best(cube, "DLD", n=None).shape[0] == 4
    # with DLD larger-is-better, the front trades high DLD against low IL1s
    assert list(pareto(flipped, risk="DLD", loss="IL1s").index) == [("rankswap", 5.0)]
    t = at_risk(cube, "DLD", 2.0)
    assert t.loc["noise", "param"] == 0.2 and t.loc["noise", "status"] == "ok"
    with pytest.raises(SdcInputError, match="Unknown metric 'RR'"):
        at_risk(cube, "RR", 1.0)


def test_cell_writer_signs_what_it_stores(tmp_path):
    # the writer's fingerprint of each cell (computed from the arrays it writes) equals the
    # one computed from the stored arrays read back, whatever the inputs' dtypes, a NaN's
    # payload, a narrower key-set block or a missing masked-file fingerprint
    from sdcdist import integrity
    from sdcdist.cube import CellWriter, create_cube, open_group
    path = str(tmp_path / "c.zarr")
    create_cube(path, methods=["a", "b"], param_names=["p", "p"], params=[1.0, 2.0],
                metrics=["L", "R", "S"], metric_kinds=["loss", "risk", "risk"],
                ascending=[True, True, True], replicates=2, keysets=[("x",), ("y",)],
                attrs={"spec": {}})
    g = open_group(path)
    w = CellWriter(g)
    odd_nan = np.frombuffer(np.uint64(0xFFF8_0000_0000_0001).tobytes(), dtype=np.float64)[0]
    w.write(0, 0, 0, values=np.array([1.5, odd_nan, -0.0]), keyset_values=np.ones((3, 2)),
            excluded=[0, 1, 2], flags=np.array([0, 1, 0], dtype=np.int64),
            release_fingerprint=bytes(range(32)))
    w.write(1, 1, 1, values=np.array([np.nan, 2.0, 3.0], dtype=np.float32),
            keyset_values=np.full((3, 1), 4.0), excluded=np.zeros(3, np.int64),
            flags=np.zeros(3, np.int8))
    for cell in [(0, 0, 0, 0), (0, 1, 1, 1)]:
        stored = bytes(np.asarray(g[integrity.CELL_DIGESTS][cell], dtype=np.uint8))
        assert any(stored) and stored == integrity.cell_sha256(g, cell)
    assert np.asarray(g["done"][0, 0, 0, 0]) == 1 and np.asarray(g["done"][0, 1, 1, 1]) == 1
    assert np.isnan(np.asarray(g["keyset_value"][0, 1, 1, :, 1, 1])).all()   # never written
