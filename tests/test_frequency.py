"""Frequency risk of categorical keys: uniques, kviol2/3/5, IR_mean, IR_max, ER."""

from __future__ import annotations

import math

import numpy as np
import pytest

from sdcdist import SdcInputError
from sdcdist.data import from_array
from sdcdist.keytables import combo_frequencies, combo_table, merge_tables
from sdcdist.metrics import measure
from sdcdist.metrics.risk.frequency import individual_risk

FREQ = ["uniques", "kviol2", "kviol3", "kviol5", "IR_mean", "IR_max", "ER"]

# keys (a, b) and a weight; classes: (0,0) x2, (0,1) x1, (1,1) x3, (2,0) x4
TABLE = np.array([
    [0, 0, 10.0], [0, 0, 30.0],
    [0, 1, 5.0],
    [1, 1, 20.0], [1, 1, 20.0], [1, 1, 20.0],
    [2, 0, 1.0], [2, 0, 1.0], [2, 0, 1.0], [2, 0, 1.0],
])


def _md(weighted: bool):
    roles = {"key": ["a", "b"], **({"weight": ["w"]} if weighted else {})}
    return from_array(TABLE, ["a", "b", "w"], roles=roles,
                      categories={"a": ["x", "y", "z"], "b": ["u", "v"]})


def _ir(f: int, F: float) -> float:
    """The Benedetti-Franconi estimate as sdcMicro's indivRisk (approx) writes it."""
    if F <= f:
        return 1.0 / f
    p = f / F
    if f == 1:
        return p / (1 - p) * math.log(1 / p)
    if f == 2:
        return p / (1 - p) - (p / (1 - p)) ** 2 * math.log(1 / p)
    return p / (f - (1 - p))


def test_frequency_metrics_unweighted_by_hand():
    md = _md(False)
    r = measure(md, md, FREQ)
    n = 10
    assert r["uniques"].value == pytest.approx(100 * 1 / n)          # the (0,1) record
    assert r["kviol2"].value == pytest.approx(100 * 1 / n)
    assert r["kviol3"].value == pytest.approx(100 * 3 / n)          # + the two (0,0)
    assert r["kviol5"].value == pytest.approx(100 * 10 / n)         # every class < 5
    # unweighted individual risk is 1 / f_k: ER = number of classes
    assert r["ER"].value == pytest.approx(4.0)
    assert r["IR_mean"].value == pytest.approx(0.4)
    assert r["IR_max"].value == pytest.approx(1.0)
    assert r["ER"].info == {"keys": ["a", "b"], "weighted": False}


def test_frequency_metrics_weighted_by_hand():
    md = _md(True)
    r = measure(md, md, FREQ)
    # sample counts are the same with a weight
    assert r["uniques"].value == pytest.approx(10.0)
    assert r["kviol3"].value == pytest.approx(30.0)
    # classes: (f, F) = (2, 40), (1, 5), (3, 60), (4, 4): the last has F <= f, risk 1/4
    p = 2 / 40
    r00 = p / (1 - p) - (p / (1 - p)) ** 2 * math.log(1 / p)
    r01 = 0.2 / 0.8 * math.log(5)
    r11 = 0.05 / (3 - 0.95)
    er = 2 * r00 + r01 + 3 * r11 + 4 * 0.25
    assert r["ER"].value == pytest.approx(er, rel=1e-12)
    assert r["IR_mean"].value == pytest.approx(er / 10, rel=1e-12)
    assert r["IR_max"].value == pytest.approx(max(r00, r01, r11, 0.25), rel=1e-12)
    assert r["ER"].info["weighted"] is True


def test_individual_risk_against_direct_computation(rng):
    n = 500
    codes = np.column_stack([rng.integers(0, 3, n), rng.integers(0, 4, n),
                             rng.integers(0, 5, n)]).astype(float)
    w = rng.uniform(0.5, 60, n)
    md = from_array(np.column_stack([codes, w]), ["a", "b", "c", "w"],
                    roles={"key": ["a", "b", "c"], "weight": ["w"]},
                    categories={"a": list("012"), "b": list("0123"), "c": list("01234")})
    r = measure(md, md, ["ER", "IR_max"], options={"chunk_rows": 37})
    # direct: for each record, its class by a loop over all records
    risks = []
    for i in range(n):
        same = (codes == codes[i]).all(axis=1)
        risks.append(_ir(int(same.sum()), float(w[same].sum())))
    assert r["ER"].value == pytest.approx(sum(risks), rel=1e-10)
    assert r["IR_max"].value == pytest.approx(max(risks), rel=1e-12)
    np.testing.assert_allclose(individual_risk(np.array([1.0, 2, 3, 3]),
                                               np.array([4.0, 9, 3, 7])),
                               [_ir(1, 4), _ir(2, 9), _ir(3, 3), _ir(3, 7)], rtol=1e-13)


def test_chunks_and_cluster_give_the_same_values(rng, client):
    n = 3000
    codes = np.column_stack([rng.integers(0, 30, n), rng.integers(0, 7, n)]).astype(float)
    w = rng.uniform(1, 50, n)
    md = from_array(np.column_stack([codes, w]), ["a", "b", "w"],
                    roles={"key": ["a", "b"], "weight": ["w"]},
                    categories={"a": [str(i) for i in range(30)], "b": list("0123456")})
    one = measure(md, md, FREQ, options={"chunk_rows": 10**6})
    many = measure(md, md, FREQ, options={"chunk_rows": 128}, client=client)
    for k in FREQ:
        assert many[k].value == pytest.approx(one[k].value, rel=1e-12), k


def test_missing_values_match_every_category():
    # (0, NaN) matches (0, 0) and (0, 1); (0,0) and (0,1) each also match it
    codes = np.array([[0, 0], [0, 1], [0, np.nan], [1, 1], [1, 1]], dtype=float)
    t = combo_table(codes)
    fk, _ = combo_frequencies(t)
    per_record = fk[t["inverse"]]
    np.testing.assert_array_equal(per_record, [2, 2, 3, 2, 2])
    # merged chunk tables give the same
    t1, t2 = combo_table(codes[:2]), combo_table(codes[2:])
    t1.pop("inverse"), t2.pop("inverse")
    fk2, _ = combo_frequencies(merge_tables(t1, t2))
    assert sorted(fk2) == sorted(fk)


def test_frequency_metric_bad_input(rng):
    X = TABLE.copy()
    X[3, 2] = 0.0
    md = from_array(X, ["a", "b", "w"], roles={"key": ["a", "b"]},
                    categories={"a": ["x", "y", "z"], "b": ["u", "v"]})
    with pytest.raises(SdcInputError, match=r"Weight column 'w' has 1 values that are zero"):
        measure(md, md, ["ER"], weight="w")
    with pytest.raises(SdcInputError, match=r"Weight column 'w' has 1 values that are zero"):
        from_array(X, ["a", "b", "w"], roles={"key": ["a", "b"], "weight": ["w"]},
                   categories={"a": ["x", "y", "z"], "b": ["u", "v"]})
    X[3, 2] = -2.0
    with pytest.raises(SdcInputError, match=r"negative"):
        measure(md, md, ["IR_mean"], weight="w")
    num = rng.standard_normal((20, 2))
    with pytest.raises(SdcInputError, match="uniques counts key combinations of categorical "
                                            "columns, and the file has none"):
        measure(num, num, ["uniques"])


def test_numeric_only_metric_refuses_a_categorical_key():
    md = _md(False)                     # w is a plain numeric column here, not the weight
    with pytest.raises(SdcInputError, match=r"GDBRL compares numeric values, and its key set "
                                            r"holds the categorical column\(s\) \['a'\]"):
        measure(md, md, ["GDBRL"], keysets=[["a", "w"]])
    with pytest.raises(SdcInputError, match=r"RR compares numeric values"):
        measure(md, md, ["RR"], keysets=[["w", "b"]])


def test_losses_leave_categorical_columns_and_the_weight_out(rng):
    n = 40
    X = np.column_stack([rng.integers(0, 3, n), rng.standard_normal(n) + 5,
                         rng.uniform(1, 2, n)])
    md = from_array(X, ["a", "x", "w"], roles={"weight": ["w"]}, categories={"a": list("pqr")})
    Y = X.copy()
    Y[:, 1] += 0.1 * rng.standard_normal(n)
    mdy = from_array(Y, ["a", "x", "w"], roles={"weight": ["w"]},
                     categories={"a": list("pqr")})
    full = measure(md, mdy, ["IL1s"])["IL1s"].value
    alone = measure(X[:, [1]], Y[:, [1]], ["IL1s"])["IL1s"].value
    assert full == alone


def test_cli_risk_and_measure_report_frequency_metrics(run, tmp_path):
    import json

    import pandas as pd
    df = pd.DataFrame({"region": ["n", "s", "n", "e", "s", "n"], "sex": [1, 2, 1, 1, 2, 2],
                       "income": [1.0, 2.5, 3.0, 4.0, 5.5, 6.0],
                       "w": [10.0, 10, 20, 5, 5, 8]})
    src = tmp_path / "h.csv"
    df.to_csv(src, index=False)
    store = str(tmp_path / "h.zarr")
    out = run("ingest", str(src), store, "--categorical", "sex", "--keys", "region,sex",
              "--weight", "w")
    assert "2 categorical (region, sex)" in out.output
    res = run("risk", store, store, "--metric", "uniques,kviol2,ER", "--local")
    lines = {ln.split()[0]: float(ln.split()[1]) for ln in res.output.splitlines()[1:]}
    # classes: (n,1) x2, (s,2) x2, (e,1) x1, (n,2) x1
    assert lines["uniques"] == pytest.approx(100 * 2 / 6, rel=1e-5)
    res = run("measure", store, store, "--metric", "uniques,kviol3", "--json", "--local")
    got = json.loads(res.output)
    assert got["kviol3"]["value"] == pytest.approx(100.0) and got["kviol3"]["kind"] == "risk"


def test_categorical_losses_by_hand():
    A = np.array([[0, 0, 1.0], [0, 1, 2.0], [1, 1, 3.0], [1, 1, 4.0]])
    B = A.copy()
    B[1, 1] = 0.0            # (0,1) -> (0,0)
    B[2, 0] = np.nan         # suppressed
    cats = {"a": ["x", "y"], "b": ["u", "v"]}
    ma = from_array(A, ["a", "b", "x"], roles={"key": ["a", "b"]}, categories=cats)
    r = measure(ma, B, ["changed", "hellinger", "tvd"], categorical=["a", "b"])
    assert r["changed"].value == pytest.approx((1 / 4 + 1 / 4) / 2)
    assert r["changed"].info["per_column"] == {"a": 0.25, "b": 0.25}
    # tables: original (0,0) .25 (0,1) .25 (1,1) .5; masked (0,0) .5 (NaN,1) .25 (1,1) .25
    p = np.array([.25, .25, .5, 0])
    q = np.array([.5, 0, .25, .25])
    assert r["tvd"].value == pytest.approx(0.5 * np.abs(p - q).sum())
    assert r["hellinger"].value == pytest.approx(
        np.sqrt(0.5 * ((np.sqrt(p) - np.sqrt(q)) ** 2).sum()))
    same = measure(ma, ma, ["changed", "hellinger", "tvd"])
    assert [same[k].value for k in ("changed", "hellinger", "tvd")] == [0, 0, 0]


def test_audit_refuses_categorical_metrics_on_numeric_data():
    from sdcdist.audit import parse_spec
    from sdcdist.audit.run import load_data
    spec = parse_spec({"dataset": {"reference": "census"},
                       "methods": [{"name": "noise", "params": [0.1]}],
                       "metrics": ["IL1s", "ER", "tvd"]})
    with pytest.raises(SdcInputError, match=r"ER, tvd measure categorical columns, and "
                                            r"dataset 'census' has none"):
        load_data(spec)


def test_weight_sums_are_exact_whatever_the_split(rng):
    """Each combination's weight sum is the correctly rounded exact sum of its weights
    (math.fsum), for any split of the records into merged tables, in any merge order, and
    F_k (missing values matching every category) sums exactly too."""
    n = 400
    codes = np.column_stack([rng.integers(0, 3, n), rng.integers(0, 2, n)]).astype(float)
    w = np.exp(rng.uniform(-30, 30, n)) * np.where(rng.random(n) < 0.1, -1.0, 1.0)
    w[:3] = [2.0 ** 60, 128.0, 2.0 ** -60]          # a tie broken by a tiny tail
    codes[:3] = 0
    whole = combo_table(codes, w)
    cls = whole["inverse"]
    want = [math.fsum(w[cls == u]) for u in range(whole["rows"].shape[0])]
    assert whole["weight"].tolist() == want
    for cuts in ([1], [7, 150, 399], list(range(10, n, 10))):
        parts = []
        for a, b in zip([0] + cuts, cuts + [n]):
            t = combo_table(codes[a:b], w[a:b])
            t.pop("inverse")
            parts.append(t)
        for order in (parts, parts[::-1]):
            m = merge_tables(*order[:1], merge_tables(*order[1:])) if len(order) > 1 \
                else order[0]
            assert m["weight"].tolist() == want
    # missing values: F_k of (0, NaN) is the exact sum over (0, 0), (0, 1) and (0, NaN)
    codes[rng.random(n) < 0.1, 1] = np.nan
    t = combo_table(codes, w)
    _, Fk = combo_frequencies(t)
    for u, row in enumerate(t["rows"]):
        match = ((codes[:, 0] == row[0]) & (np.isnan(codes[:, 1]) | (row[1] < 0) |
                                            (codes[:, 1] == row[1])))
        assert Fk[u] == math.fsum(w[match])


# a categorical key with a real category "-1" and missing values (empty cells); sdcMicro
# 5.8.1 measure_risk(d, keyVars = c("a", "b"), w = "w") on this file (read.csv: NA is
# missing, -1 a category) gives these figures (freqCalc's fk per record)
MINUS_ONE_CSV = """a,b,w
-1,0,10
-1,0,12.5
-1,1,3
0,0,7
0,0,8
,0,20
1,1,4
1,1,6
1,0,9
-1,,15
0,1,2.5
1,1,30
"""
SDCMICRO_MINUS_ONE = {"fk": [4, 4, 2, 3, 3, 7, 3, 3, 2, 5, 1, 3],
                      "IR_mean": 0.085936422641961385, "ER": 1.0312370717035366,
                      "IR_max": 0.61086048791610348}


def test_a_category_minus_one_is_no_missing_value(tmp_path):
    """A categorical value -1 is a category of its own, never the missing marker: read from
    a file it gets a code of its own and the frequency risks are sdcMicro's (which reads NA,
    not -1, as missing); an in-memory "code" -1 is refused instead of being counted as
    missing (it used to be, silently)."""
    from sdcdist.data import load_microdata
    path = tmp_path / "m.csv"
    path.write_text(MINUS_ONE_CSV)
    md = load_microdata(path, categorical=["a", "b"])
    assert md.categories["a"] == ["-1", "0", "1"]
    kw = {"keysets": [["a", "b"]], "weight": "w"}
    r = measure(md, md, ["IR_mean", "IR_max", "ER", "uniques"], **kw)
    for k in ("IR_mean", "IR_max", "ER"):
        assert r[k].value == pytest.approx(SDCMICRO_MINUS_ONE[k], rel=1e-14), k
    assert r["uniques"].value == pytest.approx(100 / 12)       # the record (0, 1)
    t = combo_table(md.values[:, :2])
    assert combo_frequencies(t)[0][t["inverse"]].tolist() == SDCMICRO_MINUS_ONE["fk"]
    raw = md.values.copy()
    raw[:, 0] -= 1                                   # the labels as numbers: -1, 0, 1, NaN
    with pytest.raises(SdcInputError, match="categorical column 'a' of the original file "
                                            "has 4 values that are not codes"):
        measure(raw, raw, ["IR_mean"], columns=list(md.columns), categorical=["a", "b"], **kw)
    with pytest.raises(SdcInputError, match="not codes 0, 1, 2"):
        combo_table(raw[:, :2])


def test_rounded_digits_give_the_exact_sums_of_the_bit_digits(rng):
    """The weight sums' digits taken by rounding (the fast path) normalise to the same
    expansion as the bit-by-bit digits, and their floats are the exact sums (fsum):
    values just below and at limb boundaries, signs mixed, magnitudes 2**-900 to 2**900
    (beyond the rounding's limbs: the bit digits), and raw tables of both kinds merged."""
    from sdcdist import keytables as K
    n = 300
    edges = [2.0 ** (24 * k) * s for k in (-2, 0, 1, 2) for s in (1.0, 1 - 2.0 ** -53)]
    sets = {
        "survey": rng.uniform(1.0, 500.0, n),
        "edges": rng.choice(edges, n) * rng.choice([-1.0, 1.0], n),
        "wide": np.exp(rng.uniform(-60, 60, n)) * rng.choice([-1.0, 1.0], n),
        "extreme": np.exp2(rng.uniform(-900, 900, n).round()) * rng.uniform(1, 2, n),
    }
    for label, w in sets.items():
        inv = rng.integers(0, 7, n)
        lo_limbs = []
        for add in ("rounded", "bits"):
            ex = K.exact_group_sums(w, inv, 7, normalise=False)
            d = np.zeros_like(ex["digits"])
            if add == "bits" or not K._add_rounded_digits(w, inv, ex["lo"], d):
                d[:] = 0
                K._add_digits(w.view(np.int64), inv, ex["lo"], d)
            lo_limbs.append(K._normalise({"lo": ex["lo"], "digits": d, "special": None}))
        a, b = lo_limbs
        assert a["lo"] == b["lo"] and np.array_equal(a["digits"], b["digits"]), label
        got = K.exact_to_float(a).tolist()
        assert got == [math.fsum(w[inv == g]) for g in range(7)], label
    # a chunk table of rounded digits merged with one of bit digits
    w = sets["wide"]
    codes = rng.integers(0, 3, (n, 1)).astype(float)
    t1 = K.combo_table(codes[:150], w[:150], rounded=False)
    t2 = K.combo_table(codes[150:], w[150:], rounded=False)
    ex = t2["exact"]
    d = np.zeros_like(ex["digits"])
    K._add_digits(w[150:].view(np.int64), t2["inverse"], ex["lo"], d)
    t2["exact"] = {**ex, "digits": d}
    t1.pop("inverse"), t2.pop("inverse")
    whole = K.combo_table(codes, w)
    assert K.merge_tables(t1, t2)["weight"].tolist() == whole["weight"].tolist()


def test_in_process_tables_of_any_size_give_the_same_bits(rng, monkeypatch):
    """In this process the key tables are built on pieces of LOCAL_ROWS records (not of
    chunk_rows): pieces of 13 records merged, or one table, give the same bits."""
    import sdcdist.metrics.risk.frequency as freq
    n = 300
    codes = np.column_stack([rng.integers(0, 4, n), rng.integers(0, 3, n)]).astype(float)
    codes[rng.random(n) < 0.05, 1] = np.nan
    w = rng.uniform(1, 50, n) * np.where(rng.random(n) < 0.1, 1e7, 1.0)
    X = np.column_stack([codes, w])
    kw = {"columns": ["a", "b", "w"], "categorical": ["a", "b"], "weight": "w",
          "keysets": [["a", "b"]], "options": {"chunk_rows": 7}}
    one = measure(X, X, FREQ, **kw)
    monkeypatch.setattr(freq, "LOCAL_ROWS", 13)
    many = measure(X, X, FREQ, **kw)
    assert [one[k].value for k in FREQ] == [many[k].value for k in FREQ]
