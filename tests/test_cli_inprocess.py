"""The default path computes in this process when the work fits, and says so."""

from __future__ import annotations

import numpy as np
import pandas as pd

from sdcdist.cli._common import (IN_PROCESS_PAIRS, ClusterOptions, choose_where,
                                 in_process_reason)


def test_which_work_fits_in_this_process():
    big = 10_000_000
    assert in_process_reason(["uniques", "kviol2", "IR_mean"], big, big)   # counting
    assert in_process_reason(["IL1s", "X_MSE"], big, big)                  # one pass
    assert in_process_reason(["DLD"], 1000, 1000)                          # few pairs
    assert in_process_reason(["DLD"], 20_000, 20_000) is None              # many pairs
    assert in_process_reason(["Score"], 20_000, 20_000) is None            # brings DLD along
    assert 1000 * 1000 <= IN_PROCESS_PAIRS < 20_000 ** 2
    # DCR / NNDR search a KD-tree (n log n): in this process up to a few million records,
    # not only while the record pairs are few
    assert in_process_reason(["dcr_overfit", "nndr_median"], 100_000, 100_000)
    assert in_process_reason(["dcr_baseline"], 1_000_000, 1_000_000)
    assert in_process_reason(["dcr_train_median"], big, big) is None
    assert in_process_reason(["dcr_overfit", "DLD"], 100_000, 100_000) is None


def test_only_the_default_path_is_changed():
    for given in (ClusterOptions(workers=2), ClusterOptions(scheduler="tcp://h:8786"),
                  ClusterOptions(local=True)):
        assert choose_where(given, "fits") is given
    assert choose_where(ClusterOptions(), None) == ClusterOptions()
    assert choose_where(ClusterOptions(), "fits") == ClusterOptions(local=True)


def test_risk_and_measure_say_they_compute_here(run, tmp_path, rng):
    X = np.column_stack([rng.integers(0, 4, 60), rng.integers(0, 3, 60),
                         rng.uniform(1, 9, 60)])
    pd.DataFrame(X, columns=["r", "s", "w"]).to_csv(tmp_path / "a.csv", index=False)
    res = run("risk", tmp_path / "a.csv", tmp_path / "a.csv", "--metric", "uniques,kviol2",
              "--categorical", "r,s", "--weight", "w", "--keys", "r,s")
    assert res.exit_code == 0, res.output
    assert "computing in this process" in res.output and "Dask dashboard" not in res.output
    res = run("measure", tmp_path / "a.csv", tmp_path / "a.csv", "--metric", "X_MSE")
    assert res.exit_code == 0, res.output
    assert "computing in this process" in res.output
