"""Special uniques (SUDA2): against sdcMicro 5.8.1's suda2 on the household file, against an
independent brute-force search on small tie-heavy files, the same bits for any chunking,
batching and worker count, and the refusals."""

from __future__ import annotations

import json
import math
from itertools import combinations
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from sdcdist.errors import SdcInputError
from sdcdist.keytables import combo_table
from sdcdist.metrics import REGISTRY, measure
from sdcdist.metrics.risk.suda import METRICS, msu_search, suda2_records
from sdcdist.parallel import Runner

ROOT = Path(__file__).resolve().parents[1]
#: sdcMicro 5.8.1's suda2 on the cases of benchmarks/peers/suda2_cases.json, as
#: benchmarks/peers/suda2_sdcmicro.R printed them: for each case the SUDA and DIS-SUDA score of
#: every record with a positive score (1-based row number -> [score, dis]), their number and
#: the attribute contributions (%), numbers as text with 17 significant digits.
REFERENCE = json.loads((ROOT / "tests" / "data" / "suda2_reference.json").read_text())
CASES = json.loads((ROOT / "benchmarks" / "peers" / "suda2_cases.json").read_text())
HOUSEHOLD = ROOT / "sdcdist" / "data" / "reference" / "household.csv"
NAMES = list(METRICS)


def _codes(case: dict) -> np.ndarray:
    d = pd.read_csv(HOUSEHOLD)[case["keys"]].astype(np.float64)
    rows = np.arange(1, len(d) + 1)
    for col, (k, r) in case.get("na", {}).items():
        d.loc[rows % k == r, col] = np.nan
    return d.to_numpy()


@pytest.mark.parametrize("name", sorted(CASES))
def test_equals_sdcmicro_suda2(name):
    case, ref = CASES[name], REFERENCE[name]
    assert REFERENCE["tool"] == "sdcMicro 5.8.1"
    X = _codes(case)
    r = suda2_records(X, dis_fraction=case.get("dis_fraction", 0.01),
                      original_scores=case.get("original_scores", True),
                      missing=case.get("missing"))
    score = np.zeros(X.shape[0])
    dis = np.zeros(X.shape[0])
    for row, (s, d) in ref["scored"].items():
        score[int(row) - 1], dis[int(row) - 1] = float(s), float(d)
    assert int((r["score"] > 0).sum()) == ref["n_scored"]
    np.testing.assert_array_equal(r["score"], score)
    np.testing.assert_allclose(r["dis"], dis, rtol=1e-13, atol=1e-15)
    # the metrics: file figures of the same scores, contributions as sdcMicro's
    opts = {"suda_dis_fraction": case.get("dis_fraction", 0.01),
            "suda_original_scores": case.get("original_scores", True),
            "suda_missing": case.get("missing")}
    res = measure(X, X, NAMES, columns=case["keys"], categorical=case["keys"], options=opts)
    n = X.shape[0]
    assert res["suda_share"].value == pytest.approx(100 * ref["n_scored"] / n, rel=1e-14)
    assert res["suda_mean"].value == pytest.approx(score.sum() / n, rel=1e-13)
    assert res["suda_max"].value == score.max()
    assert res["dis_suda_mean"].value == pytest.approx(dis.sum() / n, rel=1e-12)
    assert res["dis_suda_max"].value == pytest.approx(dis.max(), rel=1e-13)
    assert res["msu_total"].value == r["msu"].sum()
    contrib = res["suda_mean"].info["column_contributions"]
    for col, v in ref["contributions"].items():
        assert contrib[col] == pytest.approx(float(v), rel=1e-12), col


# -- brute force -----------------------------------------------------------------------

def brute_msu(X: np.ndarray, K: int) -> np.ndarray:
    """MSU counts (n, K) by enumerating every key subset up to K columns: a record's subset S
    is an MSU when the record has no missing value on S, no other record has its values on
    S, and on every proper subset of S (the empty one included) another record has them."""
    n, m = X.shape
    out = np.zeros((n, K), np.int64)

    def unique_on(i: int, S: tuple) -> bool:
        if not S:
            return False
        eq = np.ones(n, bool)
        for j in S:
            eq &= X[:, j] == X[i, j]        # NaN equals nothing
        return int(eq.sum()) == 1
    for i in range(n):
        for k in range(1, K + 1):
            for S in combinations(range(m), k):
                if np.isnan(X[i, list(S)]).any() or not unique_on(i, S):
                    continue
                if any(unique_on(i, T) for r in range(k) for T in combinations(S, r)):
                    continue
                out[i, k - 1] += 1
    return out


def brute_scores(msu: np.ndarray, m: int, f: float) -> tuple[np.ndarray, np.ndarray]:
    """SUDA (weights (M - k)!, M = max(m, 3)) and DIS-SUDA in double precision, from the
    formula: 1 / (1 + P (1 - f) / f / (s^Q Σ s^-Q))."""
    M = max(m, 3)
    w = np.array([math.factorial(M - k) for k in range(1, msu.shape[1] + 1)], float)
    s = msu @ w
    return s, w


@pytest.mark.parametrize("seed", range(12))
def test_equals_brute_force_on_tie_heavy_files(seed):
    rng = np.random.default_rng(seed)
    n = int(rng.integers(8, 40))
    m = int(rng.integers(1, 6))
    levels = rng.integers(1, 4, m)                  # some columns have one category
    X = np.column_stack([rng.integers(0, c, n) for c in levels]).astype(np.float64)
    X[rng.random(X.shape) < 0.15] = np.nan
    K = int(rng.integers(1, m + 1))
    f = float(rng.choice([0.01, 0.1, 0.5]))
    want = brute_msu(X, K)
    r = suda2_records(X, max_size=K, dis_fraction=f)
    np.testing.assert_array_equal(r["msu"], want)
    s, _ = brute_scores(want, m, f)
    np.testing.assert_array_equal(r["score"], s)
    # DIS-SUDA: P records in key combinations of exactly two records (missing = a value)
    _, inv, cnt = np.unique(np.nan_to_num(X, nan=-1), axis=0, return_inverse=True,
                            return_counts=True)
    P = int((cnt[inv.reshape(-1)] == 2).sum())
    Q = 1 + (8 - max(m, 3)) / 20
    dis = np.zeros(n)
    if (s > 0).any():
        A = (s[s > 0] ** -Q).sum()
        dis[s > 0] = 1 / (1 + P * (1 - f) / f / (s[s > 0] ** Q * A))
    np.testing.assert_allclose(r["dis"], dis, rtol=2e-6, atol=1e-12)


def test_smaller_maximum_keeps_the_smaller_msus():
    X = _codes(CASES["hh7"])
    full = suda2_records(X)["msu"]
    for K in (1, 2, 4):
        np.testing.assert_array_equal(suda2_records(X, max_size=K)["msu"], full[:, :K])


def test_missing_code_is_missing():
    X = _codes(CASES["hh7_na"])
    a = suda2_records(X)
    Y = np.where(np.isnan(X), -999.0, X)
    b = suda2_records(Y, missing=-999)
    for k in a:
        np.testing.assert_array_equal(a[k], b[k])


# -- the kernels' fast paths against their plain versions ---------------------------------

def _tie_heavy(rng, n, q, na=0.2):
    X = np.column_stack([rng.integers(0, c, n) for c in rng.integers(1, 5, q)]).astype(float)
    X[rng.random(X.shape) < na] = np.nan
    return X


@pytest.mark.parametrize("seed", range(4))
def test_extended_keys_equal_keys_from_scratch(seed):
    """The keys of a subset extended from its first columns' keys (on a stack shared by the
    subsets of a task) find the same uniques as keys built column by column, and as a
    brute-force count, also where the key space exceeds int64 (counted from scratch)."""
    from sdcdist.metrics.risk.msu import _unique_batch, _unique_on
    rng = np.random.default_rng(seed)
    q = 5
    t = combo_table(_tie_heavy(rng, 300, q))
    rows, count = t["rows"], t["count"]
    codes = np.ascontiguousarray(rows.T.astype(np.int32))
    multi = np.flatnonzero(count > 1).astype(np.int64)
    uniques = np.flatnonzero(count == 1).astype(np.int64)
    for cards in (rows.max(axis=0) + 1).clip(min=1), np.full(q, 2 ** 21):  # 2 columns fit
        cards = np.asarray(cards, np.int64)
        batch = []
        for k in range(1, q + 1):
            for S in combinations(range(q), k):
                ok = (rows[uniques][:, list(S)] >= 0).all(axis=1)
                batch.append((S, ok & (rng.random(ok.size) < 0.8)))
        got = _unique_batch(batch, codes, count, cards, multi, uniques)
        for (S, ok), u in zip(batch, got):
            targets = uniques[ok]
            assert not u[~ok].any()
            u = u[ok]
            scratch = _unique_on(codes, count, np.asarray(S, np.int64), cards, multi, targets)
            np.testing.assert_array_equal(u, scratch)
            # the kernels count the multi rows and the targets only (in a search, every
            # other row of one record is alone on S or has a missing value there)
            R = rows[:, list(S)]
            counted = (R >= 0).all(axis=1) & np.isin(np.arange(len(rows)),
                                                     np.concatenate([multi, targets]))
            brute = [count[counted & (R == R[r]).all(axis=1)].sum() == 1 for r in targets]
            np.testing.assert_array_equal(u, np.asarray(brute, bool))


def _chunked_table(X, keys, missing, chunk_rows, start=0, stop=None):
    from sdcdist.metrics.risk.suda import _chunks_table, _merge_chunks, _table_chunk
    from sdcdist.parallel import map_reduce
    stop = len(X) if stop is None else stop
    return map_reduce(Runner(None), lambda a, b, Y, *r: _table_chunk(a + start, b + start, Y, *r),
                      _merge_chunks, [X], stop - start, chunk_rows=chunk_rows,
                      args=(keys, missing), aggregate=_chunks_table)


def test_chunk_table_equals_combo_table():
    """The one-pass packed tables of record chunks, merged, are combo_table's (without the
    inverse) for any chunking: with NaN and a missing code, with key spaces over int64 in
    a chunk or only once merged, and refusing a non-code alike."""
    from sdcdist.metrics.risk.suda import _table_chunk
    rng = np.random.default_rng(7)
    X = np.column_stack([_tie_heavy(rng, 500, 4), rng.integers(0, 3, 500)]).astype(float)
    X[rng.random(500) < 0.1, 1] = -999.0
    for keys, missing in (((0, 2, 3, 4), None), ((3, 1, 4), -999.0), ((2,), None)):
        for start, stop in ((0, 500), (17, 18), (40, 41), (3, 450)):
            block = X[start:stop][:, list(keys)]
            if missing is not None:
                block = np.where(block == missing, np.nan, block)
            want = combo_table(block)
            for chunk in (1000, 64, 7, 1):
                got = _chunked_table(X, keys, missing, chunk, start, stop)
                for k in ("rows", "count", "weight"):
                    np.testing.assert_array_equal(got[k], want[k])
                    assert got[k].dtype == want[k].dtype
    big = rng.integers(0, 3, (120, 3)).astype(float)
    big[:40, :2] *= [2.0 ** 40, 2.0 ** 24]          # this chunk's key space exceeds int64
    big[40:80, 1:] *= 2.0 ** 24                     # these two fit, not merged
    big[80:, 0] *= 2.0 ** 40
    big[::7, 1] = np.nan
    want = combo_table(big)
    for chunk in (120, 40, 13):
        got = _chunked_table(big, (0, 1, 2), None, chunk)
        np.testing.assert_array_equal(got["rows"], want["rows"])
        np.testing.assert_array_equal(got["count"], want["count"])
    got = _chunked_table(big[40:], (0, 1, 2), None, 40)
    np.testing.assert_array_equal(got["rows"], combo_table(big[40:])["rows"])
    X[3, 2] = 1.5
    with pytest.raises(SdcInputError, match="not codes 0, 1, 2"):
        _table_chunk(0, 500, X, (0, 2), None)


def test_code_check_counts_as_the_formula():
    from sdcdist.keytables import _not_codes
    rng = np.random.default_rng(3)
    X = rng.integers(0, 5, (200, 6)).astype(float)
    X[rng.random(X.shape) < 0.2] = np.nan
    X[5, 1], X[9, 1], X[2, 2], X[4, 3], X[6, 3] = 0.5, -1.0, np.inf, -np.inf, 2.0 ** 53
    X[:, 4] = np.nan
    X[:, 5] = -2.0
    with np.errstate(invalid="ignore"):
        ok = np.isnan(X) | ((X >= 0) & (X < 2.0 ** 53) & (X == np.floor(X)))
    np.testing.assert_array_equal(_not_codes(X), (~ok).sum(axis=0))
    np.testing.assert_array_equal(_not_codes(X[:, 1]), [(~ok[:, 1]).sum()])
    np.testing.assert_array_equal(_not_codes(X[:0]), np.zeros(6))


# -- invariance -------------------------------------------------------------------------

def _values(res):
    return {k: (r.value, json.dumps(r.info, sort_keys=True)) for k, r in res.items()}


def test_same_bits_for_any_chunking_and_batching():
    X = _codes(CASES["hh9"])
    keys = CASES["hh9"]["keys"]
    base = _values(measure(X, X, NAMES, columns=keys, categorical=keys))
    for chunk in (1000, 777):
        got = _values(measure(X, X, NAMES, columns=keys, categorical=keys,
                              options={"chunk_rows": chunk}))
        assert got == base
    t = combo_table(X)
    ref = msu_search(Runner(None), t["rows"], t["count"])
    for tasks in (2, 5, 40):
        s = msu_search(Runner(None), t["rows"], t["count"], tasks=tasks)
        np.testing.assert_array_equal(s["counts"], ref["counts"])
        np.testing.assert_array_equal(s["per_column"], ref["per_column"])


def test_bit_for_bit_with_two_workers(client):
    X = _codes(CASES["hh7_na"])
    keys = CASES["hh7_na"]["keys"]
    here = _values(measure(X, X, NAMES, columns=keys, categorical=keys))
    there = _values(measure(X, X, NAMES, columns=keys, categorical=keys, client=client,
                            options={"chunk_rows": 900}))
    assert here == there


# -- refusals ---------------------------------------------------------------------------

def test_refusals():
    X = _codes(CASES["hh7"])
    keys = CASES["hh7"]["keys"]
    with pytest.raises(SdcInputError, match=r"\['water'\] are both confidential and key"):
        measure(X, X, ["suda_mean"], columns=keys, categorical=keys, keysets=[keys],
                confidential=["water"])
    # the default key sets leave the confidential column out (no clash to refuse)
    r = measure(X, X, ["suda_mean"], columns=keys, categorical=keys, confidential=["water"])
    assert r["suda_mean"].info.get("keys", [c for c in keys if c != "water"]) == \
        [c for c in keys if c != "water"]
    with pytest.raises(SdcInputError, match="categorical"):
        measure(X, X, ["suda_mean"], columns=keys)
    for opt, bad, allowed in [("suda_dis_fraction", 0, "a number in (0, 1)"),
                              ("suda_dis_fraction", 1.0, "a number in (0, 1)"),
                              ("suda_max_size", 0, "an integer in [1, 64]"),
                              ("suda_original_scores", "yes", "true or false"),
                              ("suda_missing", "NA", "a number")]:
        with pytest.raises(SdcInputError) as e:
            measure(X, X, ["suda_mean"], columns=keys, categorical=keys,
                    options={opt: bad})
        assert f"The '{opt}' option must be" in str(e.value) and allowed in str(e.value)
        assert f"Got {bad!r} instead." in str(e.value)


def test_too_many_subsets_asks_for_a_maximum_size():
    rng = np.random.default_rng(3)
    X = rng.integers(0, 3, (50, 17)).astype(np.float64)
    cols = [f"k{j}" for j in range(17)]
    with pytest.raises(SdcInputError, match=r"at most 65535 key subsets\. Got 131071 .* "
                                            r"'suda_max_size' option to at most 8"):
        measure(X, X, ["suda_mean"], columns=cols, categorical=cols)
    res = measure(X, X, ["msu_total"], columns=cols, categorical=cols,
                  options={"suda_max_size": 2})
    np.testing.assert_array_equal(res["msu_total"].info["msu_by_size"]["2"],
                                  brute_msu(X, 2)[:, 1].sum())


def test_map_batches_keeps_item_order():
    from sdcdist.parallel import map_batches

    def double(batch):
        return [2 * x for x in batch]
    for tasks in (None, 1, 3, 50):
        assert map_batches(Runner(None), double, list(range(10)), tasks=tasks) == \
            [2 * x for x in range(10)]
    assert map_batches(Runner(None), double, []) == []


def test_registered_as_risk_metrics():
    for name in NAMES:
        m = REGISTRY[name]
        assert m.kind == "risk" and m.categorical and not m.same_shape and m.unit


def test_risk_without_metric_names_skips_suda_on_too_many_keys(run, tmp_path, rng):
    """`sdcdist risk` with its default metrics on 17 categorical keys: SUDA2 over every
    subset would be refused, so it is left out with a note (the other metrics run); named
    with --metric and a suda_max_size it runs."""
    cols = [f"k{i}" for i in range(17)]
    df = pd.DataFrame({c: rng.choice(["a", "b", "c"], 40) for c in cols})
    path = tmp_path / "cat.csv"
    df.to_csv(path, index=False)
    res = run("risk", path, path, "--local")
    assert res.exit_code == 0, res.output
    assert "17 categorical keys: skipping suda_share" in res.output
    assert "suda_max_size=" in res.output and "uniques" in res.output
    assert "skipping modrisk_tau1" in res.output      # 3^17 cells: more than a model fits
    res = run("risk", path, path, "--local", "--metric", "suda_share", "-o",
              "suda_max_size=2")
    assert res.exit_code == 0, res.output
    assert "suda_share" in res.output
