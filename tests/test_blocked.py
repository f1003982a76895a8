"""Distance linkage blocked on categorical keys equals brute force."""

from __future__ import annotations

import numpy as np
import pytest

from sdcdist.data import from_array
from sdcdist.metrics import measure


def _files(rng, n=300, levels=(4, 3)):
    cats = np.column_stack([rng.integers(0, L, n) for L in levels]).astype(float)
    x = rng.standard_normal((n, 2)) * np.array([1.0, 10.0]) + 50
    X = np.column_stack([cats, x])
    Y = X.copy()
    Y[:, 2:] += 0.6 * rng.standard_normal((n, 2)) * np.array([1.0, 10.0])
    Y[:, 2] = np.round(Y[:, 2])                       # ties among candidates
    flip = rng.random(n) < 0.15                       # categories moved (as PRAM would)
    Y[flip, 0] = (Y[flip, 0] + 1) % levels[0]
    Y[rng.random(n) < 0.05, 1] = np.nan               # suppressed: never linked
    names = ["a", "b", "x", "y"]
    categories = {"a": [str(i) for i in range(levels[0])],
                  "b": [str(i) for i in range(levels[1])]}
    return X, Y, names, categories


def _brute_dld(X, Y, cat, num):
    """Direct: each masked record against the originals sharing its categories; z-scores over
    each whole file; 1/t credit when its own record is (tied) nearest; DLD2 likewise."""
    def z(A):
        return (A - A.mean(axis=0)) / A.std(axis=0, ddof=1)
    ZX, ZY = z(X[:, num]), z(Y[:, num])
    first = second = 0.0
    for i in range(len(Y)):
        if np.isnan(Y[i, cat]).any():
            continue
        block = np.flatnonzero((X[:, cat] == Y[i, cat]).all(axis=1))
        if i not in set(block):
            continue
        d = ((ZX[block] - ZY[i]) ** 2).sum(axis=1)
        dist = np.unique(d)
        dt = d[block == i][0]
        t1 = int((d == dist[0]).sum())
        if dt == dist[0]:
            first += 1 / t1
            if t1 >= 2:
                second += 1 / t1
        elif len(dist) > 1 and dt == dist[1] and t1 == 1:
            second += 1 / int((d == dist[1]).sum())
    return 100 * first / len(Y), 100 * second / len(Y)


@pytest.mark.parametrize("small_pairs", [None, 50])
def test_blocked_dld_equals_brute_force(rng, small_pairs, client, monkeypatch):
    X, Y, names, categories = _files(rng)
    if small_pairs is not None:
        # every block larger than 50 pairs goes through the tiled driver, in 7 x 5 tiles
        import sdcdist.linkage.blocked as blocked
        real = blocked.blocked_link_top2
        monkeypatch.setattr("sdcdist.linkage.blocked.blocked_link_top2",
                            lambda *a, **k: real(*a, **{**k, "small_pairs": small_pairs}))
    md = from_array(X, names, categories=categories)
    # the blocked Euclidean path (Gower is the default on categorical keys)
    opts = {"dld_distance": "euclidean", **({"block_rows": [7, 5]} if small_pairs else {})}
    r = measure(md, Y, ["DLD", "DLD2"], keysets=[["a", "b", "x", "y"], ["a", "x"]],
                options=opts, client=client if small_pairs else None)
    for k, cat, num in ((0, (0, 1), (2, 3)), (1, (0,), (2,))):
        first, second = _brute_dld(X, Y, list(cat), list(num))
        assert first > 3 and second > 1
        assert r["DLD"].per_keyset[k] == pytest.approx(first, rel=1e-12, abs=1e-12)
        assert r["DLD2"].per_keyset[k] == pytest.approx(second, rel=1e-12, abs=1e-12)


def test_categories_only_key_set(rng):
    X, Y, names, categories = _files(rng, n=120)
    md = from_array(X, names, categories=categories)
    r = measure(md, Y, ["DLD"], keysets=[["a", "b"]], options={"dld_distance": "euclidean"})
    first, _ = _brute_dld(X, Y, [0, 1], [])
    assert r["DLD"].value == pytest.approx(first, rel=1e-12)
    # every record's block has ~10 originals: about 1/10 of the records that kept theirs
    assert 0 < r["DLD"].value < 20


def test_numeric_keys_unchanged_by_the_categorical_columns(rng):
    X, Y, names, categories = _files(rng, n=150)
    Y[:, 1] = X[:, 1]
    md = from_array(X, names, categories=categories)
    a = measure(md, Y, ["DLD", "PDL", "DRL2"], keysets=[["x", "y"]])
    b = measure(X[:, 2:], Y[:, 2:], ["DLD", "PDL", "DRL2"], columns=["x", "y"],
                keysets=[["x", "y"]])
    for k in ("DLD", "PDL", "DRL2"):
        assert a[k].value == b[k].value


def test_prl_compares_categorical_keys_by_equality(rng):
    from sdcdist.linkage import prl
    X, Y, names, categories = _files(rng, n=80)
    seen = {}
    real = prl.probabilistic_linkage

    def spy(*a, **k):
        seen["categorical"] = list(k["categorical"])
        return real(*a, **k)
    import sdcdist.metrics.risk.prl as prlmod
    prlmod.probabilistic_linkage, old = spy, prlmod.probabilistic_linkage
    try:
        md = from_array(X, names, categories=categories)
        r = measure(md, Y, ["PLD"], keysets=[["a", "x", "b"]])
    finally:
        prlmod.probabilistic_linkage = old
    assert seen["categorical"] == [True, False, True]
    assert 0 <= r["PLD"].value <= 100


def test_a_recoded_key_is_linked_at_the_recoded_level(rng):
    from sdcdist.masking import REGISTRY
    n = 200
    age = rng.integers(0, 40, n).astype(float)
    x = rng.standard_normal(n)
    X = np.column_stack([age, x])
    labels = {"age": [str(i) for i in range(40)]}
    Y = REGISTRY["recode"](X, 10, rng=rng, categorical=[0], columns=["age", "x"], labels=labels)
    md = from_array(X, ["age", "x"], categories=labels)
    r = measure(md, Y, ["DLD", "hellinger", "tvd", "changed"], keysets=[["age", "x"]],
                categorical=["age"])
    # x unchanged: everyone is linked within the band of its recoded age
    assert r["DLD"].value == 100.0
    assert r["hellinger"].value == 0.0 and r["tvd"].value == 0.0
    assert r["changed"].value == 1.0                  # every code moved to a band
