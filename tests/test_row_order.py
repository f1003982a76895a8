"""Same contents, same figures: every metric of the registry gives the same bits when the rows
of its inputs are permuted (the original and the masked file in the same way, since their
rows are paired; the holdout and the control file each in its own way; and, for the
metrics that do not pair records by row, the masked file apart from the original with the
truth permuted along)."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from sdcdist.data import reference_file
from sdcdist.errors import SdcInputError
from sdcdist.metrics import REGISTRY, measure


def _numeric(rng):
    n, m = 60, 5
    z = rng.standard_normal((n, m)) @ np.triu(np.full((m, m), 0.4)) + rng.standard_normal((n, m))
    X = np.round(np.exp(z / 2) * np.array([1000, 50, 10, 1, 3]), 2)
    X[5:12] = X[20]                        # ties: identical records and tied values
    X[30:40, 1] = X[30, 1]
    Y = X + np.round(rng.standard_normal((n, m)) * X.std(axis=0) * 0.2, 2)
    Y[::4] = X[::4]
    H = np.round(np.exp(rng.standard_normal((40, m)) / 2) * np.array([1000, 50, 10, 1, 3]), 2)
    C = np.round(np.exp(rng.standard_normal((40, m)) / 2) * np.array([1000, 50, 10, 1, 3]), 2)
    H[:6] = X[20]
    names = ["a", "b", "c", "d", "e"]
    kw = {"columns": names, "keysets": [names[:2], names[:4]], "confidential": ["e"]}
    return X, Y, H, C, kw


def _categorical(rng):
    n = 80
    X = np.column_stack([rng.integers(0, 4, n), rng.integers(0, 3, n), rng.integers(0, 3, n),
                         rng.integers(0, 3, n), rng.uniform(1, 40, n) *
                         np.where(rng.random(n) < 0.2, 1e7, 1.0),
                         np.round(rng.uniform(0, 100, n), 1)]).astype(np.float64)
    X[10:20, :4] = X[10, :4]
    Y = X.copy()
    ch = rng.random(n) < 0.25
    Y[ch, 0] = rng.integers(0, 4, int(ch.sum()))
    Y[rng.random(n) < 0.1, 1] = np.nan
    H = X[rng.integers(0, n, 40)].copy()
    H[:, 0] = rng.integers(0, 4, 40)
    C = X[rng.integers(0, n, 40)].copy()
    C[:, 1] = rng.integers(0, 3, 40)
    names = ["r", "s", "t", "u", "w", "y"]
    kw = {"columns": names, "categorical": names[:4], "weight": "w", "keysets": [names[:4]],
          "confidential": ["t"], "options": {"modrisk_formula": "~ r + s"}}
    return X, Y, H, C, kw


def _household(rng):
    d = pd.read_csv(reference_file("household"))
    d = d[d["ori_hid"] <= 25]               # 25 households, about 100 records
    cols = ["urbrur", "roof", "walls", "water", "sex", "age", "income", "ori_hid",
            "household_weights"]
    X = d[cols].to_numpy(dtype=np.float64).copy()
    for j in range(5):                     # codes 0, 1, 2, ...
        X[:, j] = np.unique(X[:, j], return_inverse=True)[1]
    Y = X.copy()
    ch = rng.random(X.shape[0]) < 0.3
    Y[ch, 1] = (Y[ch, 1] + 1) % (X[:, 1].max() + 1)
    Y[:, 6] = np.round(Y[:, 6] * rng.uniform(0.9, 1.1, X.shape[0]), -3)
    idx = rng.permutation(X.shape[0])
    H, C = X[idx[:30]].copy(), X[idx[30:60]].copy()
    kw = {"columns": cols, "categorical": cols[:5], "weight": "household_weights",
          "household": "ori_hid", "keysets": [cols[:5]], "confidential": ["income"]}
    return X, Y, H, C, kw


SCENARIOS = {"numeric": _numeric, "categorical": _categorical, "household": _household}
OPTIONS = {"attack_n": 25, "so_max_attempts": 2_000, "so_n_cols": 2, "chunk_rows": 16}


def _kw(kw):
    return {**kw, "options": {**OPTIONS, **kw.get("options", {})}}


def _values(res):
    return {n: (r.value, r.per_keyset, r.excluded, r.flag) for n, r in res.items()}


def _changed(a, b):
    return sorted(n for n in a if repr(a[n]) != repr(b[n]))


def _run(X, Y, H, C, kw, names, truth=None):
    return _values(measure(X, Y, names, holdout=H, control=C, truth=truth, seed=5, **_kw(kw)))


def test_every_metric_is_a_function_of_the_files_contents():
    rng = np.random.default_rng(41)
    covered, changed = set(), {}
    for label, make in SCENARIOS.items():
        X, Y, H, C, kw = make(np.random.default_rng(7))
        ok = []
        for n in REGISTRY:                  # the registry itself: a new metric is covered
            try:
                _run(X, Y, H, C, kw, [n])
                ok.append(n)
            except SdcInputError:
                pass
        covered |= set(ok)
        base = _run(X, Y, H, C, kw, ok)
        # the metrics that do not pair records by row: the masked file apart, the truth along
        apart = [n for n in ok if not REGISTRY[n].same_shape]
        base_t = _run(X, Y, H, C, kw, apart, truth=np.arange(len(Y)))
        for _ in range(2):
            p, q, r = (rng.permutation(len(V)) for V in (X, H, C))
            for n in _changed(base, _run(X[p], Y[p], H[q], C[r], kw, ok)):
                changed.setdefault(n, []).append(f"{label}: both files")
            s = rng.permutation(len(Y))
            truth = np.argsort(p)[s]        # masked row i is original row s[i], now at p^-1
            for n in _changed(base_t, _run(X[p], Y[s], H[q], C[r], kw, apart, truth=truth)):
                changed.setdefault(n, []).append(f"{label}: masked apart")
    assert sorted(set(REGISTRY) - covered) == []
    assert changed == {}, "\n".join(f"{k}: {v}" for k, v in sorted(changed.items()))


def test_the_masked_files_column_order_changes_no_figure():
    """The metrics that take files with their own columns (not paired column by column)
    find the masked file's columns by name: with its columns in another order they give
    the same bits (PLD used the original's positions in the masked file, and the attacks'
    content order hashed the masked columns in their file order)."""
    changed = {}
    for label, make in SCENARIOS.items():
        X, Y, H, C, kw = make(np.random.default_rng(7))
        apart = []
        for n in REGISTRY:
            if REGISTRY[n].same_shape:
                continue
            try:
                _run(X, Y, H, C, kw, [n])
                apart.append(n)
            except SdcInputError:
                pass
        base = _run(X, Y, H, C, kw, apart)
        cols = list(kw["columns"])
        perm = list(range(len(cols)))[::-1]
        got = _run(X, Y[:, perm], H, C, {**kw, "masked_columns": [cols[j] for j in perm]},
                   apart)
        for n in _changed(base, got):
            changed.setdefault(n, []).append(label)
    assert changed == {}, "\n".join(f"{k}: {v}" for k, v in sorted(changed.items()))
