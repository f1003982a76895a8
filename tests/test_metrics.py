"""The metric registry, ``measure`` and the first metrics against hand-computed values."""

from __future__ import annotations

import numpy as np
import pytest

from sdcdist import SdcInputError, measure
from sdcdist.metrics import REGISTRY, default_keysets, get_metric


def test_il1s_hand_computed():
    X = np.array([[1.0, 2], [3, 4], [5, 9]])
    Y = np.array([[2.0, 2], [3, 5], [5, 7]])
    # s = (2, sqrt(13)); |X - Y| column sums (1, 3); mean over 3 x 2 values
    expected = (1 / (np.sqrt(2) * 2) + 3 / (np.sqrt(2) * np.sqrt(13))) / 6
    assert measure(X, Y, ["IL1s"])["IL1s"].value == pytest.approx(expected, rel=1e-14)


def test_id1_hand_computed():
    x = np.arange(20.0)[:, None]
    y = x + 1
    # h = floor(p * 20 / 100): 0 for p = 1..4 (nothing inside), 1 for p = 5..9 and 2 for
    # p = 10 (every record but the first inside): 100 * (5 * 19/20 + 19/20) / 10
    assert measure(x, y, ["ID1"])["ID1"].value == pytest.approx(57.0, abs=1e-12)
    assert measure(x, x, ["ID1"])["ID1"].value == 100.0


def test_dld_identity_and_permutation(rng):
    X = rng.normal(size=(400, 4))
    res = measure(X, X, ["DLD", "IL1s"])
    assert res["DLD"].value == 100.0 and res["IL1s"].value == 0.0
    assert res["DLD"].per_keyset == (100.0,) * 4
    perm = rng.permutation(400)
    dld = measure(X, X[perm], ["DLD"])["DLD"].value
    assert dld == pytest.approx(100 * np.mean(perm == np.arange(400)), abs=1e-9)


def test_dld_ties_count_one_over_t():
    # one key column with values 0, 0, 1, 1, 1: a masked record equal to its original is
    # tied with the other records of the same value
    X = np.array([[0.0], [0.0], [1.0], [1.0], [1.0]])
    res = measure(X, X, ["DLD"], keysets=[["V1"]])
    assert res["DLD"].value == pytest.approx(100 * (2 * 1 / 2 + 3 * 1 / 3) / 5)


def test_default_keysets_are_prefixes():
    cols = [f"c{i}" for i in range(9)]
    ks = default_keysets(cols)
    assert ks == [tuple(cols[:k]) for k in range(1, 8)]
    assert default_keysets(cols, ["c3", "c1"]) == [("c3",), ("c3", "c1")]
    assert ks.given is False and ks.columns == tuple(cols)
    assert default_keysets(cols, ["c3", "c1"]).columns == ("c3", "c1")


def test_keyset_default_is_declared_at_registration():
    from sdcdist.metrics import register
    assert REGISTRY["DLD"].keyset_default == "prefixes" and REGISTRY["RR"].keyset_default == "all"
    with pytest.raises(ValueError, match="keyset_default"):
        register("XX", kind="risk", keysets=True, keyset_default="some", description="x")
    assert "XX" not in REGISTRY


def test_registry_entries_are_complete():
    for name, m in REGISTRY.items():
        assert m.name == name and m.description and m.kind in {"loss", "utility", "risk",
                                                               "score"}
        for r in m.requires:
            assert r in REGISTRY


def test_bad_input():
    X = np.ones((5, 2)) * np.arange(5)[:, None]
    with pytest.raises(SdcInputError, match="Unknown metric 'DDL'. Valid metrics: .*DLD"):
        get_metric("DDL")
    with pytest.raises(SdcInputError, match="same columns"):
        measure(X, X[:, :1], ["IL1s"])
    with pytest.raises(SdcInputError, match="Unknown key set column 'Z' in the original file"):
        measure(X, X, ["DLD"], keysets=[["Z"]])
    with pytest.raises(SdcInputError, match="empty key set"):
        measure(X, X, ["DLD"], keysets=[[]])
    const = np.column_stack([np.arange(5.0), np.ones(5)])
    with pytest.raises(SdcInputError, match="constant"):
        measure(const, const, ["DLD"], keysets=[["V2"]])
    # IL1s divides by each column's sd: a constant column is left out of it, with a note
    res = measure(const, const, ["IL1s"])["IL1s"]
    assert res.value == 0.0 and res.info["constant_columns_left_out"] == ["V2"]


def test_cluster_equals_in_process(rng, client):
    X = rng.normal(size=(300, 3))
    Y = X + rng.normal(size=X.shape)
    opts = {"chunk_rows": 37, "block_rows": (41, 53)}
    a = measure(X, Y, ["DLD", "IL1s", "ID1"], options=opts)
    b = measure(X, Y, ["DLD", "IL1s", "ID1"], options=opts, client=client)
    assert {k: v.value for k, v in a.items()} == {k: v.value for k, v in b.items()}


def test_needs_are_declared_where_the_metrics_register():
    """What a metric reads besides the two files is declared when it registers, and the
    layers above read the declaration (needing, index, by_name), not lists of names: the
    holdout metrics, the confidential-column measures, the household risks, the distance
    (KD-tree) metrics and the attacks."""
    from sdcdist.metrics import NEEDS, REGISTRY, needing
    from sdcdist.metrics.risk.attacks import ATTACK_METRICS
    from sdcdist.metrics.risk.attribute import MEASURES, needs_confidential
    from sdcdist.metrics.risk.household import METRICS as HOUSEHOLD
    names = list(REGISTRY)
    assert set(needing(names, "holdout")) == {"dcr_holdout_median", "dcr_closer_train",
                                              "dcr_overfit"}
    conf = set(needing(names, "confidential"))
    assert set(MEASURES) <= conf and "cap" in conf
    assert all(needs_confidential(n) for n in conf)
    # the inference attack needs a confidential column unless infer_secret names its secret
    assert "inference" in conf and not needs_confidential("inference", {"infer_secret": "s"})
    assert needing(["inference", "cap"], "confidential", {"infer_secret": "s"}) == ["cap"]
    assert set(needing(names, "household")) == set(HOUSEHOLD)
    assert {n for n in names if REGISTRY[n].by_name} == set(ATTACK_METRICS)
    assert {n for n in names if REGISTRY[n].index} == {
        "dcr_train_median", "dcr_holdout_median", "dcr_closer_train", "dcr_overfit",
        "dcr_baseline", "nndr_median"}
    assert all(m.needs <= set(NEEDS) for m in REGISTRY.values())
    with pytest.raises(ValueError, match="unknown need"):
        needing(names, "holdouts")
