"""Frequency risk where sdcdist's rule differs from sdcMicro's, pinned and recorded in the cube:
weights below 1 (r = 1/f where F <= f) and records whose keys are all missing (symmetric)."""

from __future__ import annotations

import json
import math

import numpy as np
import pytest

from sdcdist.cube import conventions
from sdcdist.data import from_array
from sdcdist.keytables import combo_frequencies, combo_table
from sdcdist.metrics import measure
from sdcdist.metrics.risk.frequency import frequency_summary, individual_risk


def test_individual_risk_with_weights_below_one_stays_one_over_f():
    f = np.array([1.0, 2.0, 3.0, 1.0])
    F = np.array([0.5, 1.5, 3.0, 4.0])
    r = individual_risk(f, F)
    # sdcMicro's formula for f = 1 at F = 0.5 (p = 2): p/(1-p) log(1/p) = 1.386, a "risk"
    # above 1; sdcdist keeps 1/f wherever F <= f
    p = 1 / 0.5
    assert p / (1 - p) * math.log(1 / p) == pytest.approx(1.386, abs=1e-3)
    np.testing.assert_allclose(r[:3], [1.0, 0.5, 1 / 3], rtol=0, atol=0)
    p = 0.25
    assert r[3] == pytest.approx(p / (1 - p) * math.log(1 / p))
    # end to end: one record of weight 0.5 alone in its combination
    X = np.array([[0, 0, 0.5], [1, 1, 2.0], [1, 1, 2.0]])
    md = from_array(X, ["a", "b", "w"], roles={"key": ["a", "b"], "weight": ["w"]},
                    categories={"a": ["x", "y"], "b": ["u", "v"]})
    res = measure(md, md, ["IR_max", "ER"])
    assert res["IR_max"].value == 1.0
    assert "F <= f" in conventions()["IR_weights"] and "1.386" in conventions()["IR_weights"]


def test_all_missing_keys_count_both_ways():
    """A record whose keys are all missing matches every record and every record matches
    it (sdcMicro's freqCalc leaves it out of the others' f: addAllNAtoKeys)."""
    codes = np.array([[0, 0], [0, 1], [1, 1], [1, 1], [np.nan, np.nan]])
    t = combo_table(codes)
    fk, _ = combo_frequencies(t)
    per_record = fk[t["inverse"]]
    # sdcMicro: [1, 1, 2, 2, ...]; sdcdist adds the all-missing record to every f
    np.testing.assert_array_equal(per_record, [2, 2, 3, 3, 5])
    res = frequency_summary(t, False)
    assert res["uniques"] == 0.0                   # sdcMicro: 40 % (two uniques)
    assert res["kviol3"] == pytest.approx(40.0)
    assert "addAllNAtoKeys" in conventions()["all_missing_keys"]


def test_cube_records_the_conventions(tmp_path):
    from sdcdist.audit import parse_spec, run_audit
    from sdcdist.cube import open_cube
    spec = {"name": "conv", "seed": 1,
            "dataset": {"name": "s", "synthetic": {"rows": 60, "columns": 3, "seed": 2}},
            "methods": [{"name": "noise", "params": [0.1]}], "replicates": 1,
            "metrics": ["IL1s"]}
    out = tmp_path / "c.zarr"
    run_audit(parse_spec(spec), out)
    conv = json.loads(open_cube(out).attrs["conventions"])
    assert "F <= f" in conv["IR_weights"]
    assert "both ways" in conv["all_missing_keys"]
    assert "logarithm" in conv["PRL_EM"] and "x / (|H| |G|)" in conv["PRL_TIES"]
