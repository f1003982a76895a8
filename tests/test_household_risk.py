"""Household (hierarchical) risk HR_* and model-based risk modrisk_*: sdcMicro 5.8.1's figures
on the household file, brute-force numpy implementations on small tie-heavy files, chunk
and worker invariance, bad input."""

from __future__ import annotations

import itertools
import json
import math
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from sdcdist import SdcInputError
from sdcdist.data import Microdata, reference_file
from sdcdist.data.types import check_roles
from sdcdist.metrics import measure
from sdcdist.metrics.risk.loglinear import GridDesign, design_matrix, poisson_glm, poisson_glm_grid

#: sdcMicro 5.8.1's measure_risk(hid = "ori_hid") and modRisk figures on the household file
#: (benchmarks/peers/risk_household_sdcmicro.R)
REF = json.loads((Path(__file__).parent / "data" / "household_reference.json").read_text())
SDC = REF["sdcmicro"]
HR = ["HR_mean", "HR_ER", "HR_max"]
MR = ["modrisk_tau1", "modrisk_tau2", "modrisk_gr1", "modrisk_gr2"]
CODED = ["urbrur", "roof", "walls", "water", "electcon", "relat", "sex", "age", "hhcivil"]


def test_reference_tool_is_named():
    assert SDC["tool"] == "sdcMicro 5.8.1"


def _household(missing: bool = False) -> pd.DataFrame:
    d = pd.read_csv(reference_file("household"))
    d["pop_weight"] = d["household_weights"] * 1000
    d["pop_weight_c"] = d["sampling_weight"] * 1000.0
    if missing:                                 # as the R script: 1-based records 7, 14, ...
        i = np.arange(1, len(d) + 1)
        d.loc[i % 7 == 0, "roof"] = np.nan
        d.loc[i % 11 == 0, "sex"] = np.nan
    return d


def _md(d: pd.DataFrame, *, weight: str | None, household: str | None = "ori_hid",
        coded=CODED) -> Microdata:
    X = d.to_numpy(dtype=np.float64).copy()
    cols = list(d.columns)
    cats = {}
    for k in coded:
        j = cols.index(k)
        lv = np.unique(X[~np.isnan(X[:, j]), j])
        X[:, j] = np.where(np.isnan(X[:, j]), np.nan, np.searchsorted(lv, X[:, j]))
        cats[k] = [str(int(v)) for v in lv]
    roles = {}
    if household:
        roles["household"] = [household]
    if weight:
        roles["weight"] = [weight]
    return Microdata(X, tuple(cols), roles, None, cats)


HH_CASES = {"hh_weighted": (["urbrur", "roof", "walls", "water", "sex"], "sampling_weight", False),
            "hh_unweighted": (["urbrur", "roof", "walls", "water", "sex"], None, False),
            "hh_age": (["urbrur", "water", "sex", "age"], "household_weights", False),
            "hh_missing": (["urbrur", "roof", "walls", "water", "sex"], "household_weights",
                           True)}


@pytest.mark.parametrize("case", list(HH_CASES))
def test_household_risk_equals_sdcmicro(case):
    keys, w, missing = HH_CASES[case]
    md = _md(_household(missing), weight=w)
    r = measure(md, md, HR + ["IR_mean"], keysets=[keys])
    ref = SDC[case]
    assert r["HR_mean"].value == pytest.approx(ref["hier_risk"], rel=1e-12, abs=1e-15)
    assert r["HR_ER"].value == pytest.approx(ref["hier_risk_ER"], rel=1e-12)
    assert r["HR_max"].value == pytest.approx(ref["hier_max"], rel=1e-12)
    assert r["IR_mean"].value == pytest.approx(ref["global_risk"], rel=1e-12)
    assert r["HR_mean"].info["households"] == 1000
    assert r["HR_mean"].info["largest_household"] == 12


def _model_cases(slow_names=("m_missing",)):
    for name, ref in SDC.items():
        if not name.startswith("m_"):
            continue
        for m in ("default", "CE", "PML", "weightedLLM", "IPF"):
            if m in ref:
                marks = [pytest.mark.slow] if name in slow_names and m != "IPF" else []
                yield pytest.param(name, m, marks=marks, id=f"{name}-{m}")


@pytest.mark.parametrize("case,method", list(_model_cases()))
def test_model_risk_equals_sdcmicro(case, method):
    ref = SDC[case]
    md = _md(_household(case == "m_missing"), weight=ref["weight"])
    opts = {"modrisk_method": method, "modrisk_formula": ref["formula"]}
    if ref.get("bound"):
        opts["modrisk_bound"] = ref["bound"]
    r = measure(md, md, ["modrisk_gr1", "modrisk_gr2", "modrisk_tau1"], options=opts)
    assert r["modrisk_gr1"].value == pytest.approx(ref[method]["gr1"], rel=1e-9)
    assert r["modrisk_gr2"].value == pytest.approx(ref[method]["gr2"], rel=1e-9)
    info = r["modrisk_gr1"].info
    assert info["converged"]
    assert r["modrisk_tau1"].value == pytest.approx(r["modrisk_gr1"].value
                                                    * info["nonempty_cells"], rel=1e-14)
    if case == "m_missing":
        assert r["modrisk_gr1"].excluded == 654 + 416 - 59   # records missing roof or sex


# -- brute force on small tie-heavy files ---------------------------------------------

def _small(rng, n=80, *, weighted=True):
    """Keys a (4 levels), b (one category), c (3 levels, missing values), weight w,
    household id h (unsorted, households of 1 to 6)."""
    a = rng.integers(0, 4, n).astype(float)
    b = np.zeros(n)
    c = rng.integers(0, 3, n).astype(float)
    c[rng.random(n) < 0.15] = np.nan
    a[rng.random(n) < 0.05] = np.nan
    w = rng.choice([3.0, 7.5, 12.25, 40.0], n) if weighted else np.ones(n)
    sizes = rng.integers(1, 7, n)
    h = np.repeat(np.arange(n), sizes)[:n].astype(float) * 3 + 5
    h = h[rng.permutation(n)]
    X = np.column_stack([a, b, c, w, h])
    roles = {"household": ["h"], **({"weight": ["w"]} if weighted else {})}
    cats = {"a": list("0123"), "b": ["only"], "c": list("012")}
    return Microdata(X, ("a", "b", "c", "w", "h"), roles, None, cats), X


def _ir(f: float, F: float | None) -> float:
    if F is None or F <= f:
        return 1.0 / f
    p = f / F
    if f == 1:
        return p / (1 - p) * math.log(1 / p)
    if f == 2:
        return p / (1 - p) - (p / (1 - p)) ** 2 * math.log(1 / p)
    return p / (f - (1 - p))


def _brute_household(X, weighted):
    K, w, h = X[:, :3], X[:, 3], X[:, 4]
    n = len(X)
    r = np.empty(n)
    for i in range(n):
        match = np.all((K == K[i]) | np.isnan(K) | np.isnan(K[i]), axis=1)
        r[i] = _ir(match.sum(), w[match].sum() if weighted else None)
    hr = np.empty(n)
    for i in range(n):
        prod = 1.0
        for k in np.flatnonzero(h == h[i]):
            prod *= 1.0 - r[k]
        hr[i] = 1.0 - prod
    return hr


@pytest.mark.parametrize("weighted", [True, False])
def test_household_risk_brute_force(rng, weighted):
    md, X = _small(rng, weighted=weighted)
    r = measure(md, md, HR, keysets=[["a", "b", "c"]], options={"chunk_rows": 9})
    hr = _brute_household(X, weighted)
    assert r["HR_ER"].value == pytest.approx(hr.sum(), rel=1e-12)
    assert r["HR_mean"].value == pytest.approx(hr.mean(), rel=1e-12)
    assert r["HR_max"].value == pytest.approx(hr.max(), rel=1e-12)
    assert r["HR_ER"].info["households"] == np.unique(X[:, 4]).size


def _brute_glm(D, y, off, iters=25):
    """R's glm.fit iterations for a Poisson log link (weighted least squares by SVD)."""
    eta = np.log(y + 0.1)
    mu = np.exp(eta)

    def dev(mu):
        t = np.where(y > 0, y * np.log(np.where(y > 0, y, 1) / mu) - (y - mu), mu)
        return 2 * t.sum()
    old = dev(mu)
    for _ in range(iters):
        z = eta - off + (y - mu) / mu
        s = np.sqrt(mu)
        beta = np.linalg.lstsq(D * s[:, None], z * s, rcond=None)[0]
        eta = D @ beta + off
        mu = np.exp(eta)
        new = dev(mu)
        if abs(new - old) / (abs(new) + 0.1) < 1e-8:
            break
        old = new
    return mu


def _brute_modrisk(X, cols, terms, method, weighted=True, bound=None):
    """The cells by a loop over the level combinations; dummies by pandas; modRisk's sums."""
    K, w = X[:, cols], X[:, 3]
    levels = [np.unique(K[~np.isnan(K[:, j]), j]) for j in range(len(cols))]
    grid = list(itertools.product(*levels))
    f = np.array([np.sum(np.all(K == g, axis=1)) for g in grid], float)
    ws = np.array([w[np.all(K == g, axis=1)].sum() for g in grid])
    pi = np.array([(1 / w[np.all(K == g, axis=1)]).sum() for g in grid])
    G = pd.DataFrame(grid, columns=[f"v{j}" for j in range(len(cols))]).astype(int).astype(str)
    parts = [np.ones((len(grid), 1))]
    for t in terms:
        prod = None
        for j in t:
            dm = pd.get_dummies(G[f"v{j}"], drop_first=True).to_numpy(float)
            prod = dm if prod is None else np.einsum("gi,gj->gij", prod, dm).reshape(len(grid), -1)
        parts.append(prod)
    D = np.column_stack(parts)
    off = np.zeros(len(grid))
    y = f
    if method == "CE":
        off = np.log(np.where(ws > 0, f / np.where(ws > 0, ws, 1), 0) + 0.1)
    elif method == "PML":
        y = np.round(ws * (len(X) / w.sum()))
    elif method == "weightedLLM":
        D = np.column_stack([D, ws])
    if method == "IPF":
        n = f.sum()
        lam = np.array([np.prod([f[[g2[j] == g[j] for g2 in grid]].sum() for j in range(len(cols))])
                        for g in grid]) / n ** (len(cols) - 1)
    else:
        lam = _brute_glm(D, y, off)
    sel = (f > 0) & (f <= (bound or np.inf))
    u = sel & (f == 1)
    v = (1 - pi[u]) * lam[u]
    r1 = np.where(v > 0, np.exp(-v), 1.0)
    r2 = np.where(v > 0, (1 - np.exp(-v)) / np.where(v > 0, v, 1), 1.0)
    return r1.sum(), r2.sum(), r1.sum() / sel.sum(), r2.sum() / sel.sum()


@pytest.mark.parametrize("method", ["default", "CE", "PML", "weightedLLM", "IPF"])
def test_model_risk_brute_force(rng, method):
    md, X = _small(rng, n=120)
    X = X.copy()
    X[:, 3] = rng.uniform(20, 80, len(X))           # continuous weights
    md = Microdata(X, md.columns, md.roles, None, md.categories)
    formula = "~ a + b + c" if method == "IPF" else "~ a*c + b"
    terms = [(0,), (1,), (2,)] if method == "IPF" else [(0,), (2,), (0, 2), (1,)]
    r = measure(md, md, MR, options={"chunk_rows": 11, "modrisk_method": method,
                                     "modrisk_formula": formula})
    # records with a missing model value are left out; the one-category b adds nothing
    keep = ~np.isnan(X[:, :3]).any(axis=1)
    want = _brute_modrisk(X[keep], [0, 1, 2], terms, method)
    got = [r[k].value for k in MR]
    np.testing.assert_allclose(got, want, rtol=1e-9)
    assert r["modrisk_tau1"].excluded == int((~keep).sum())


def test_model_risk_unweighted_sample_is_population(rng):
    md, X = _small(rng, weighted=False)
    r = measure(md, md, MR, options={"modrisk_formula": "~ a + c"})
    # weights 1: pi = f >= 1, every sample unique is a population unique (risk 1)
    keep = ~np.isnan(X[:, [0, 2]]).any(axis=1)
    cells, counts = np.unique(X[keep][:, [0, 2]], axis=0, return_counts=True)
    assert r["modrisk_tau1"].value == (counts == 1).sum()
    assert r["modrisk_tau2"].value == (counts == 1).sum()
    assert r["modrisk_gr1"].value == pytest.approx((counts == 1).sum() / len(cells), rel=1e-15)


# -- chunk and worker invariance -------------------------------------------------------

def test_same_bits_for_any_chunking_order_and_workers(rng, client):
    md, X = _small(rng, n=300)
    X = X.copy()
    X[:, 3] = rng.uniform(1.5, 90, len(X))
    md = Microdata(X, md.columns, md.roles, None, md.categories)
    kw = {"keysets": [["a", "b", "c"]]}
    names = HR + MR + ["IR_mean"]
    base = measure(md, md, names, options={"chunk_rows": 10**6}, **kw)
    for opts, cl in (({"chunk_rows": 7}, None), ({"chunk_rows": 13}, client),
                     ({"chunk_rows": 64}, client)):
        other = measure(md, md, names, options=opts, client=cl, **kw)
        for k in HR + MR:
            assert repr(other[k].value) == repr(base[k].value), (k, opts)
    # the households spread over chunks in any order: the records sorted by household
    # give the same bits as the unsorted file in chunks of 5
    srt = np.argsort(X[:, 4], kind="stable")
    md2 = Microdata(X[srt], md.columns, md.roles, None, md.categories)
    other = measure(md2, md2, HR + MR, options={"chunk_rows": 5}, **kw)
    for k in HR + MR:
        assert repr(other[k].value) == repr(base[k].value), k


# -- bad input ---------------------------------------------------------------------------

def test_household_id_is_never_a_key(rng):
    md, X = _small(rng)
    with pytest.raises(SdcInputError, match="household id is never a linkage key"):
        measure(md, md, ["HR_mean"], keysets=[["a", "h"]])
    with pytest.raises(SdcInputError, match="household id is never a linkage key"):
        measure(md, md, ["DLD"], keysets=[["w", "h"]], weight=None)
    with pytest.raises(SdcInputError, match="both the household id and a key"):
        check_roles(["a", "h"], {"key": ["a", "h"], "household": ["h"]})
    with pytest.raises(SdcInputError, match="household role of the data must have exactly 1 column. Got 2"):
        check_roles(["a", "h"], {"household": ["a", "h"]})
    # default key sets (linkage and frequency keys) leave the household id out
    r = measure(md, md, ["uniques"])
    assert "h" not in r["uniques"].info["keys"]


def test_default_linkage_keys_skip_household(rng):
    X = np.column_stack([rng.normal(size=40), rng.normal(size=40), np.arange(40.0) // 3])
    md = Microdata(X, ("x", "y", "h"), {"household": ["h"]}, None, {})
    r = measure(md, md, ["DLD"])
    assert len(r["DLD"].per_keyset) == 2            # the prefixes (x), (x, y): no h


def test_audit_keys_skip_household(rng):
    from sdcdist.audit.run import resolve_keysets
    from sdcdist.audit.spec import parse_spec
    X = np.column_stack([rng.normal(size=40), rng.normal(size=40), np.arange(40.0) // 3])
    md = Microdata(X, ("x", "y", "h"), {"household": ["h"]}, None, {})
    spec = parse_spec({"dataset": {"name": "toy", "synthetic": {"rows": 40, "columns": 3}},
                       "methods": [{"name": "noise", "params": [0.1]}], "metrics": ["DLD"]})
    ks = resolve_keysets(spec, md)
    assert all("h" not in k for k in ks) and ks
    md_bad = Microdata(X, ("x", "y", "h"), {"household": ["h"], "key": ["x", "h"]}, None, {})
    with pytest.raises(SdcInputError, match="household id is never a linkage key"):
        resolve_keysets(spec, md_bad)


def test_household_bad_input(rng):
    md, X = _small(rng)
    X2 = X.copy()
    X2[[3, 9], 4] = np.nan
    bad = Microdata(X2, md.columns, md.roles, None, {**md.categories, "h": [str(i) for i in range(400)]})
    with pytest.raises(SdcInputError, match="has 2 missing values"):
        measure(bad, bad, ["HR_mean"], keysets=[["a", "c"]])
    none = Microdata(X, md.columns, {"weight": ["w"]}, None, md.categories)
    with pytest.raises(SdcInputError, match="needs the household id column, and none is named"):
        measure(none, none, ["HR_mean"], keysets=[["a", "c"]])
    with pytest.raises(SdcInputError, match="both the household id and the weight"):
        measure(md, md, ["HR_mean"], keysets=[["a", "c"]], household="w")


@pytest.mark.parametrize("opts,match", [
    ({"modrisk_method": "IPF", "modrisk_formula": "~ a + c + a:c"}, "main effects only"),
    ({"modrisk_formula": "~ a + a:c"}, "without its term c"),
    ({"modrisk_formula": "~ a + zz"}, "zz"),
    ({"modrisk_formula": "~ a + w"}, "numeric"),
    ({"modrisk_formula": "~ a + + c"}, "empty term"),
    ({"modrisk_formula": "y ~ a ~ c"}, "right-hand side"),
    ({"modrisk_method": "LLM"}, "default"),
])
def test_model_risk_bad_input(rng, opts, match):
    md, _ = _small(rng)
    with pytest.raises(SdcInputError, match=match):
        measure(md, md, ["modrisk_gr1"], options=opts)


# -- the command line ----------------------------------------------------------------------

def test_cli_ingest_and_risk_with_a_household(run, tmp_path, rng):
    n = 60
    X = np.column_stack([rng.integers(0, 4, n), rng.integers(0, 3, n), rng.uniform(1, 9, n),
                         rng.permutation(np.arange(n) // 3)])
    pd.DataFrame(X, columns=["r", "s", "w", "hh"]).to_csv(tmp_path / "a.csv", index=False)
    res = run("ingest", tmp_path / "a.csv", tmp_path / "bad.zarr", "--categorical", "r,s",
              "--keys", "r,hh", "--household", "hh")
    assert res.exit_code == 2 and "never a linkage key" in res.output
    assert not (tmp_path / "bad.zarr").exists()
    res = run("ingest", tmp_path / "a.csv", tmp_path / "a.zarr", "--categorical", "r,s",
              "--weight", "w", "--household", "hh")
    assert res.exit_code == 0, res.output
    res = run("risk", tmp_path / "a.zarr", tmp_path / "a.zarr", "--metric", "HR_mean,HR_ER",
              "--keys", "r,s", "--json")
    assert res.exit_code == 0, res.output
    res = run("risk", tmp_path / "a.zarr", tmp_path / "a.zarr", "--metric", "HR_mean",
              "--keys", "r,hh")
    assert res.exit_code == 2 and "never a linkage key" in res.output
    # without a household id the default metrics leave HR_* out
    res = run("risk", tmp_path / "a.csv", tmp_path / "a.csv", "--categorical", "r,s",
              "--weight", "w", "--keys", "r,s", "--json")
    assert res.exit_code == 0, res.output
    assert "HR_mean" not in res.output and "modrisk_gr1" in res.output


def test_cli_link_refuses_the_household_as_key(run, tmp_path, rng):
    n = 30
    X = np.column_stack([rng.normal(size=n), rng.normal(size=n), np.arange(n) // 3])
    pd.DataFrame(X, columns=["x", "y", "hh"]).to_csv(tmp_path / "a.csv", index=False)
    assert run("ingest", tmp_path / "a.csv", tmp_path / "a.zarr", "--household",
               "hh").exit_code == 0
    res = run("link", tmp_path / "a.zarr", tmp_path / "a.zarr", "--keys", "x,hh", "--out",
              tmp_path / "p.parquet")
    assert res.exit_code == 2 and "never a linkage key" in res.output
    assert not (tmp_path / "p.parquet").exists()


def test_weighted_chunk_tables_merge_to_the_whole_file_tables(rng):
    """The combine shared by the household and model-based risks: chunk tables merged in
    any grouping equal the whole file's table, and the bad weights add up."""
    from sdcdist.keytables import merge_weighted_tables, pair_table
    keys = rng.integers(0, 3, (90, 2)).astype(float)
    keys[::13, 1] = np.nan
    w = rng.choice([1.5, 2.0, 7.25], 90)
    cuts = [0, 7, 40, 41, 90]
    parts = [{"tables": {"cells": pair_table(keys[a:b], w[a:b])}, "bad_weights": i}
             for i, (a, b) in enumerate(zip(cuts[:-1], cuts[1:]))]
    whole = pair_table(keys, w)
    for merged in (merge_weighted_tables(*parts),
                   merge_weighted_tables(merge_weighted_tables(*parts[:2]),
                                         merge_weighted_tables(*parts[2:]))):
        assert merged["bad_weights"] == 0 + 1 + 2 + 3
        for f in ("rows", "value", "count", "missing"):
            np.testing.assert_array_equal(merged["tables"]["cells"][f], whole[f])


def test_household_risk_keeps_the_digits_of_tiny_risks(rng):
    """Records with risks near 1e-9 (sample uniques of huge weights): R_h is the correctly
    rounded 1 - prod(1 - r_k) to a few ulps. Evaluated as 1 - prod(1 - r) it would keep
    only the bits of r above 2^-53: only 7 of its 16 digits kept (as sdcMicro's default
    fast_hier does in R; see docs/catalog.md)."""
    from fractions import Fraction

    from sdcdist.keytables import pair_table
    from sdcdist.metrics.risk.frequency import individual_risk
    from sdcdist.metrics.risk.household import household_risks

    n = 400
    keys = np.arange(n, dtype=np.float64)[:, None]        # every record a sample unique
    w = rng.uniform(2e8, 5e9, n)
    hid = np.sort(rng.integers(0, 120, n)).astype(np.float64)
    tables = {"weights": pair_table(keys, w), "households": pair_table(keys, hid)}
    risk, size = household_risks(tables, True)
    r = individual_risk(np.ones(n, np.int64), w)           # each record's own risk
    assert 1e-10 < r.min() and r.max() < 1e-7
    ids = np.unique(hid)
    assert size.tolist() == [int((hid == h).sum()) for h in ids]
    for R, h in zip(risk, ids):
        keep = Fraction(1)
        for rk in r[hid == h]:
            keep *= 1 - Fraction(float(rk))
        exact = float(1 - keep)
        assert abs(R - exact) <= 4 * np.spacing(exact), (R, exact)


def test_a_fractional_household_id_is_refused():
    from sdcdist.data import from_array
    X = np.column_stack([np.arange(20) % 3, np.arange(20) % 2, np.repeat(np.arange(10.0), 2)])
    X2 = X.copy()
    X2[5, 2] = 1.5
    with pytest.raises(SdcInputError, match="household id column 'H' .* not whole numbers"):
        measure(X, X2, ["HR_mean"], columns=["A", "B", "H"], categorical=["A", "B"],
                household="H")
    with pytest.raises(SdcInputError, match="not whole numbers"):
        from_array(X2, columns=["A", "B", "H"], roles={"household": ["H"]},
                   categories={"A": ["a", "b", "c"], "B": ["x", "y"]})
    assert measure(X, X, ["HR_mean"], columns=["A", "B", "H"], categorical=["A", "B"],
                   household="H")["HR_mean"].value > 0


@pytest.mark.parametrize("levels,terms", [((3, 4, 2), [(0,), (1,), (2,)]),
                                          ((3, 1, 5), [(0,), (1,), (2,), (2, 0)]),
                                          ((2, 3, 4), [(0,), (1,), (2,), (0, 1), (1, 2)])])
def test_grid_design_products_equal_the_dense_design(rng, levels, terms):
    # the margins of the grid give the dense design's products, and the fit on them the
    # dense pivoted-QR fit (the weight column of weightedLLM as a dense extra column)
    G = int(np.prod(levels))
    X = design_matrix(levels, terms)
    extra = rng.uniform(0, 3, G)
    D, De = GridDesign(levels, terms), GridDesign(levels, terms, extra)
    Xe = np.column_stack([X, extra])
    w, beta = rng.uniform(1, 2, G), rng.normal(size=De.P)
    np.testing.assert_allclose(D.gram(w), X.T @ (w[:, None] * X), rtol=1e-13)
    np.testing.assert_allclose(De.gram(w), Xe.T @ (w[:, None] * Xe), rtol=1e-13)
    np.testing.assert_allclose(De.tmul(w), Xe.T @ w, rtol=1e-13)
    np.testing.assert_allclose(De.mul(beta), Xe @ beta, rtol=1e-13, atol=1e-13)
    y = rng.poisson(2, G).astype(float)
    for des, dense in ((D, X), (De, Xe)):
        got, it, ok = poisson_glm_grid(des, y)
        want, it0, ok0 = poisson_glm(dense, y)
        assert (it, ok) == (it0, ok0)
        np.testing.assert_allclose(got[y > 0], want[y > 0], rtol=1e-11)
