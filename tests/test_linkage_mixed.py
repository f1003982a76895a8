"""Linkage on mixed keys: DLD by the Gower distance, CRL on Spearman's correlations.

Each against an independent brute force (exact rationals, plain Python) on small
tie-heavy mixed files with missing values; the blocked paths on the cluster, the storage
chunking and the row order give the same bits; bad options are refused.
"""

from __future__ import annotations

import math
from fractions import Fraction

import numpy as np
import pytest

from sdcdist.data import load_microdata, write_microdata
from sdcdist.data.microdata import Microdata, values_fingerprint
from sdcdist.errors import SdcInputError
from sdcdist.linkage import gower
from sdcdist.linkage.distance import block_top2
from sdcdist.metrics import measure

COLS = ["sex", "region", "educ", "age", "income"]
CAT = ["sex", "region", "educ"]          # educ is ordinal (5 levels)


def mixed(rng, n=50, *, noise=False):
    """Tie-heavy original and masked files: few categories, ages on a grid of 1, incomes
    on a grid of 0.5 (or off any grid when ``noise``), missing values everywhere."""
    X = np.column_stack([rng.integers(0, 2, n), rng.integers(0, 3, n), rng.integers(0, 5, n),
                         rng.integers(20, 30, n), rng.integers(0, 12, n) * 0.5]).astype(float)
    Y = X.copy()
    flip = rng.random(n) < 0.3
    Y[flip, 1] = rng.integers(0, 3, flip.sum())
    Y[:, 2] = np.clip(Y[:, 2] + rng.integers(-1, 2, n), 0, 4)
    Y[:, 3] += rng.integers(-2, 3, n)                      # some masked ages off the range
    Y[:, 4] += rng.normal(0, 0.7, n) if noise else rng.integers(-1, 2, n) * 0.5
    for M in (X, Y):
        for j in (0, 2, 3, 4):
            M[rng.random(n) < 0.06, j] = np.nan
    return X, Y


# -- the independent brute force -------------------------------------------------------------

def gower_fraction(a, b, kinds, den):
    """The Gower distance as an exact rational (plain Python)."""
    tot = Fraction(0)
    for x, y, kind, d in zip(a, b, kinds, den):
        if math.isnan(x) or math.isnan(y):
            tot += 1
        elif kind == "nominal":
            tot += x != y
        else:
            tot += abs(Fraction(x) - Fraction(y)) / d
    return tot / len(kinds)


def brute_dld(X, Y, keys, ordinal=(), levels=None):
    """DLD and DLD2 (masked -> original, ties 1/t) with exact rational distances;
    ``levels``: an ordinal column's declared levels L (default: its largest code + 1)."""
    idx = [COLS.index(c) for c in keys]
    kinds = ["ordinal" if c in ordinal else "nominal" if c in CAT else "numeric"
             for c in keys]
    den = []
    for j, kind in zip(idx, kinds):
        if kind == "ordinal":
            hi = max(v for v in list(X[:, j]) + list(Y[:, j]) if not math.isnan(v))
            L = (levels or {}).get(COLS[j], int(hi) + 1)
            den.append(Fraction(L - 1))                   # L - 1, codes 0..L-1
        elif kind == "numeric":
            col = [Fraction(v) for v in X[:, j] if not math.isnan(v)]
            den.append(max(col) - min(col))
        else:
            den.append(None)
    first = second = Fraction(0)
    for i in range(len(Y)):
        d = [gower_fraction(Y[i, idx], X[k, idx], kinds, den) for k in range(len(X))]
        levels = sorted(set(d))
        c1 = d.count(levels[0])
        if d[i] == levels[0]:
            first += Fraction(1, c1)
            if c1 >= 2:
                second += Fraction(1, c1)
        elif c1 == 1 and len(levels) > 1 and d[i] == levels[1]:
            second += Fraction(1, d.count(levels[1]))
    n = len(Y)
    return 100 * float(first / n), 100 * float(second / n)


KEYSETS = [["sex", "region", "educ", "age", "income"], ["region", "income"], ["educ", "age"]]


def _dld(X, Y, options=None, client=None, keysets=KEYSETS):
    r = measure(X, Y, ["DLD", "DLD2"], columns=COLS, categorical=CAT, keysets=keysets,
                options={"ordinal": ["educ"], **(options or {})}, client=client)
    return r["DLD"], r["DLD2"]


@pytest.mark.parametrize("noise", [False, True])
def test_gower_dld_equals_exact_brute_force(noise):
    X, Y = mixed(np.random.default_rng(7 + noise), 40, noise=noise)
    dld, dld2 = _dld(X, Y)
    for k, keys in enumerate(KEYSETS[:1] if noise else KEYSETS):
        want1, want2 = brute_dld(X, Y, keys, ordinal=("educ",))
        assert dld.per_keyset[k] == pytest.approx(want1, abs=1e-12), keys
        assert dld2.per_keyset[k] == pytest.approx(want2, abs=1e-12), keys


def test_ordinal_levels_are_the_declared_categories():
    # educ declares 7 categories; its codes use 0..4 in both files, so the two highest
    # (categories 5 and 6) are unused: L_j is 7 (CATALOG), not the largest code + 1
    from sdcdist.metrics import Inputs
    X, Y = mixed(np.random.default_rng(11), 40)
    labels = {"sex": ["f", "m"], "region": ["n", "s", "w"],
              "educ": [f"e{i}" for i in range(7)]}
    keys = ["educ", "age", "income"]
    want = brute_dld(X, Y, keys, ordinal=("educ",), levels={"educ": 7})
    assert want != brute_dld(X, Y, keys, ordinal=("educ",))     # the levels matter here
    a, b = (Microdata(M, tuple(COLS), categories=labels) for M in (X, Y))
    r = measure(a, b, ["DLD", "DLD2"], keysets=[keys], options={"ordinal": ["educ"]})
    assert (r["DLD"].value, r["DLD2"].value) == pytest.approx(want, abs=1e-12)
    # the same from Inputs alone (ordinal and the declared counts as fields)
    inp = Inputs(columns=COLS, categorical=CAT, ordinal=("educ",), keysets=[keys],
                 n_categories={"educ": 7})
    r = measure(X, Y, ["DLD"], inputs=inp)
    assert r["DLD"].value == pytest.approx(want[0], abs=1e-12)
    # without labels: the largest code + 1, as before
    r = measure(X, Y, ["DLD"], inputs=inp.replace(n_categories=()))
    assert r["DLD"].value == pytest.approx(brute_dld(X, Y, keys, ordinal=("educ",))[0],
                                           abs=1e-12)


def test_gower_is_the_default_on_categorical_keys_only():
    X, Y = mixed(np.random.default_rng(3), 40)
    for M in (X, Y):              # the Euclidean path refuses missing numeric keys
        M[np.isnan(M)] = 1.0
    keys = [["sex", "region", "age"]]
    gow = _dld(X, Y, keysets=keys)[0].value
    assert gow == _dld(X, Y, {"dld_distance": "gower"}, keysets=keys)[0].value
    assert gow == pytest.approx(brute_dld(X, Y, keys[0])[0], abs=1e-12)
    # the categorical blocks of the Euclidean path give another figure
    assert gow != _dld(X, Y, {"dld_distance": "euclidean"}, keysets=keys)[0].value
    # all-numeric keys stay Euclidean by default
    num = [["age", "income"]]
    assert _dld(X, Y, keysets=num)[0].value == _dld(
        X, Y, {"dld_distance": "euclidean"}, keysets=num)[0].value
    assert _dld(X, Y, {"dld_distance": "gower"}, keysets=num)[0].value == pytest.approx(
        brute_dld(X, Y, num[0])[0], abs=1e-12)


def test_ordinal_terms_are_exact_rationals():
    # 1/3 + 2/3 == 1: an ordinal step pair ties exactly with a nominal mismatch
    g, prep = gower.plan(("ordinal", "ordinal", "nominal"),
                         *[{"min": np.array([0., 0., 0.]), "max": np.array([3., 3., 1.]),
                            "nan": np.zeros(3, bool), "decimals": np.zeros(3, np.int64)}] * 2)
    Q = gower.prepare(np.array([[0., 0., 0.]]), (0, 1, 2), ("ordinal",) * 2 + ("nominal",), prep)
    C = gower.prepare(np.array([[1., 2., 0.], [0., 0., 1.], [3., 0., 0.]]), (0, 1, 2),
                      ("ordinal",) * 2 + ("nominal",), prep)
    D = gower.gower_distances(Q, C, g)
    assert D[0, 0] == D[0, 1] == D[0, 2] == g.unit
    assert all(g.exact)


MIXED = ("nominal", "nominal", "ordinal", "numeric", "numeric")


@pytest.mark.parametrize("noise, kinds, levels", [
    (False, MIXED, None), (True, MIXED, None), (True, MIXED, 280), (False, ("nominal",) * 5, None),
    (True, ("numeric",) * 5, None), (False, ("ordinal",) * 3 + ("nominal",) * 2, 280)])
def test_compiled_top2_equals_numpy_reference(noise, kinds, levels):
    """The grouped, pruned kernel against the pair matrix: the same bits (also with too
    many category combinations to group by)."""
    rng = np.random.default_rng(11)
    X, Y = mixed(rng, 300, noise=noise)
    if levels:
        X[:, 0] = rng.integers(0, levels, len(X))
        Y[:, 0] = np.where(rng.random(len(X)) < 0.8, X[:, 0], rng.integers(0, levels, len(X)))
    cols = tuple(range(5))
    g, prep = gower.plan(kinds, gower.column_stats(X, cols), gower.column_stats(Y, cols))
    Q, C = gower.prepare(Y, cols, kinds, prep), gower.prepare(X, cols, kinds, prep)
    D = gower.gower_distances(Q, C, g)
    assert np.array_equal(D, np.rint(D)) and D.max() <= 2.0 ** 52   # integer units
    want, got = block_top2(D), gower.gower_top2(Q, C, g)
    for k in want:
        assert np.array_equal(want[k], got[k]), k
    assert want["c1"].max() > 1                                    # ties were met


def test_blocked_on_cluster_equals_brute_force(client):
    X, Y = mixed(np.random.default_rng(5), 60)
    ref = _dld(X, Y, keysets=KEYSETS[:2])
    for opt in ({"block_memory": 4096}, {"block_rows": [17, 23]}):     # 3 x 3, 4 x 3 blocks
        got = _dld(X, Y, opt, client=client, keysets=KEYSETS[:2])
        for a, b in zip(ref, got):
            assert a.value == b.value and a.per_keyset == b.per_keyset


def test_same_bits_in_every_row_order_and_chunking(tmp_path, client):
    rng = np.random.default_rng(9)
    X, Y = mixed(rng, 80, noise=True)
    ref = _dld(X, Y)
    perm = rng.permutation(len(X))
    got = _dld(X[perm], Y[perm])                  # both files reordered: same truth
    for a, b in zip(ref, got):
        assert a.per_keyset == b.per_keyset
    for M in (X, Y):              # stored numeric columns are complete
        M[:, 3:][np.isnan(M[:, 3:])] = 25.0
    ref = _dld(X, Y)
    cats = {"sex": ["0", "1"], "region": ["0", "1", "2"], "educ": [str(i) for i in range(5)]}
    for rows in (7, 64):
        files = []
        for name, M in (("o", X), ("m", Y)):
            # (from_array refuses the missing categories: its check knows no categories)
            md = Microdata(M, tuple(COLS), {}, values_fingerprint(M), cats)
            write_microdata(md, tmp_path / f"{name}{rows}.zarr", chunk_rows=rows)
            files.append(load_microdata(tmp_path / f"{name}{rows}.zarr"))
        got = _dld(files[0], files[1], client=client)
        for a, b in zip(ref, got):
            assert a.per_keyset == b.per_keyset


def test_dmt_convention_links_original_to_masked_with_ties_as_hits():
    X, Y = mixed(np.random.default_rng(4), 50)
    keys = ["sex", "region", "age"]
    got = _dld(X, Y, {"dld": "dmt"}, keysets=[keys])[0].value
    # swap the files' roles: the brute force links masked -> original with ties 1/t, so
    # compute the tie-as-hit rate directly
    idx = [COLS.index(c) for c in keys]
    den = [None, None, Fraction(np.nanmax(X[:, 3]) - np.nanmin(X[:, 3]))]
    kinds = ["nominal", "nominal", "numeric"]
    hits = 0
    for i in range(len(X)):
        d = [gower_fraction(X[i, idx], Y[k, idx], kinds, den) for k in range(len(Y))]
        hits += d[i] == min(d)
    assert got == pytest.approx(100 * hits / len(X), abs=1e-12)


# -- CRL on Spearman's correlations ----------------------------------------------------------

def midranks(v):
    """Mid-ranks of a list (plain Python)."""
    order = sorted(range(len(v)), key=lambda i: v[i])
    r = [0.0] * len(v)
    i = 0
    while i < len(v):
        j = i
        while j + 1 < len(v) and v[order[j + 1]] == v[order[i]]:
            j += 1
        for k in range(i, j + 1):
            r[order[k]] = (i + j) / 2 + 1
        i = j + 1
    return r


def spearman(a, b):
    ok = [k for k in range(len(a)) if not (math.isnan(a[k]) or math.isnan(b[k]))]
    ra, rb = midranks([a[k] for k in ok]), midranks([b[k] for k in ok])
    ma, mb = sum(ra) / len(ra), sum(rb) / len(rb)
    sab = sum((x - ma) * (y - mb) for x, y in zip(ra, rb))
    saa = sum((x - ma) ** 2 for x in ra)
    sbb = sum((y - mb) ** 2 for y in rb)
    return sab / math.sqrt(saa * sbb) if saa > 0 and sbb > 0 else 0.0


def brute_crl(X, Y, ia, ib):
    """CRL [DTMS §4.3] on Spearman's correlations, expected hits over the orders of
    records identical on all the attributes (plain Python)."""
    n = len(X)
    corr = {(i, j): spearman(list(X[:, i]), list(Y[:, j])) for i in ia for j in ib}
    pairs = sorted(corr, key=lambda p: (-round(abs(corr[p]), 12), ia.index(p[0]),
                                        ib.index(p[1])))

    def key(v):                               # NaN sorts last, as numpy
        return (1, 0.0) if math.isnan(v) else (0, v)
    ka = [tuple(key(X[r, i]) for i, _ in pairs) for r in range(n)]
    kb = [tuple(key(Y[r, j] * (1 if corr[(i, j)] >= 0 else -1)) for i, j in pairs)
          for r in range(n)]
    oa, ob = sorted(range(n), key=lambda r: ka[r]), sorted(range(n), key=lambda r: kb[r])
    total = Fraction(0)
    place_a = {}
    for k in range(n):                    # the places of each A key, the group at each place
        place_a.setdefault(ka[oa[k]], []).append(k)
    group_b = {}
    for m in range(n):
        group_b.setdefault(kb[ob[m]], set()).add(ob[m])
    for x in range(n):
        spots = place_a[ka[x]]
        for k in spots:
            group = group_b[kb[ob[k]]]
            total += Fraction(int(x in group), len(spots) * len(group))
    return 100 * float(total / n)


def test_spearman_crl_equals_brute_force():
    rng = np.random.default_rng(21)
    X, Y = mixed(rng, 60, noise=True)
    r = measure(X, Y, ["CRL"], columns=COLS, categorical=CAT,
                options={"crl_correlation": "spearman", "ordinal": ["educ"],
                         "crl_external": ["educ", "age"], "crl_released": ["sex", "income"]})
    # sex is nominal: left out with a note
    assert r["CRL"].info["nominal_left_out"] == ["sex"]
    assert r["CRL"].value == pytest.approx(brute_crl(X, Y, [2, 3], [4]), abs=1e-9)
    r = measure(X, Y, ["CRL"], columns=COLS, categorical=CAT, keysets=[["educ", "age"]],
                options={"crl_correlation": "spearman", "ordinal": ["educ"]})
    assert r["CRL"].value == pytest.approx(brute_crl(X, Y, [2, 3], [2, 3]), abs=1e-9)
    perm = rng.permutation(len(X))
    again = measure(X[perm], Y[perm], ["CRL"], columns=COLS, categorical=CAT,
                    keysets=[["educ", "age"]],
                    options={"crl_correlation": "spearman", "ordinal": ["educ"]})
    assert again["CRL"].value == r["CRL"].value


# -- bad input ---------------------------------------------------------------------------------

@pytest.mark.parametrize("options, words", [
    ({"dld_distance": "manhattan"}, "dld_distance"),
    ({"ordinal": ["nope"]}, "nope"),
    ({"ordinal": ["age"]}, "numeric"),
    ({"crl_correlation": "kendall"}, "crl_correlation"),
])
def test_bad_options_are_refused(options, words):
    X, Y = mixed(np.random.default_rng(1), 20)
    with pytest.raises(SdcInputError, match=words):
        measure(X, Y, ["DLD", "CRL"], columns=COLS, categorical=CAT,
                keysets=[["sex", "age"]], options=options)


def test_spearman_crl_without_rankable_columns_is_refused():
    X, Y = mixed(np.random.default_rng(1), 20)
    with pytest.raises(SdcInputError, match="ordinal"):
        measure(X, Y, ["CRL"], columns=COLS, categorical=CAT, keysets=[["sex", "region"]],
                options={"crl_correlation": "spearman"})


def test_pearson_crl_refuses_categorical_columns_and_the_defaults_skip_it(tmp_path):
    """CRL on Pearson's correlations (the default) compares numeric values: a categorical
    column among its columns is refused by name, with or without missing values (it was
    taken by its codes, and one missing value made it "constant"); the default metrics of
    ``risk`` skip it with a note and compute the rest."""
    from click.testing import CliRunner

    from sdcdist.cli import main
    from sdcdist.metrics import Inputs, applicable
    rng = np.random.default_rng(2)
    n = 40
    X = np.column_stack([rng.integers(0, 2, n), rng.integers(0, 3, n), rng.integers(0, 5, n),
                         rng.integers(20, 60, n), rng.normal(30, 5, n).round(1)]).astype(float)
    Y = X.copy()
    Y[:, 3:] += rng.normal(0, 1, (n, 2)).round(1)
    for missing in (False, True):
        Xm, Ym = X.copy(), Y.copy()
        if missing:
            Xm[3, COLS.index("region")] = np.nan
        with pytest.raises(SdcInputError, match=r"Pearson.*\['region'\]"):
            measure(Xm, Ym, ["CRL"], columns=COLS, categorical=CAT,
                    keysets=[["age", "region"]])
    inputs = Inputs(columns=tuple(COLS), categorical=tuple(CAT))
    assert "categorical" in str(applicable("CRL", inputs, {}))
    assert applicable("CRL", inputs, {"crl_correlation": "spearman"}) is None
    assert applicable("CRL", inputs, {"crl_external": ["age"], "crl_released": ["income"]}) \
        is None
    import pandas as pd
    df = pd.DataFrame(X, columns=COLS)
    df["region"] = df["region"].astype("Int64").astype(object)
    df.loc[3, "region"] = None
    df.to_csv(tmp_path / "a.csv", index=False)
    pd.DataFrame(Y, columns=COLS).to_csv(tmp_path / "b.csv", index=False)
    res = CliRunner().invoke(main, ["risk", str(tmp_path / "a.csv"), str(tmp_path / "b.csv"),
                                    "--categorical", ",".join(CAT), "--json"])
    assert res.exit_code == 0, res.output
    assert "skipping CRL" in res.output and '"DLD"' in res.output
