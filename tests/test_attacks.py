"""Singling out, linkability and inference (so_uni, so_multi, linkability, inference): within
anonymeter's intervals on a small mixed file, the pieces against brute-force numpy, the same
figures for any chunking and worker count, the control set of the audit, and the refusals."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
from scipy.stats import norm

from sdcdist.audit.run import load_data, split_control
from sdcdist.audit.spec import parse_spec
from sdcdist.data import Microdata
from sdcdist.errors import SdcInputError
from sdcdist.metrics import Inputs, measure
from sdcdist.metrics._registry import MeasureContext
from sdcdist.metrics.risk.attacks.kernels import EQ, GE, GT, ISNULL, LE, LT, NE, NOTNULL
from sdcdist.metrics.risk.attacks import (ATTACK_METRICS, control_correction, count_queries, gower_knn,
                                     risk_from_counts, success_rate)
from sdcdist.parallel import Runner

DATA = Path(__file__).resolve().parent / "data"
#: anonymeter 1.1.0's figures on tests/data/attacks_*.csv (300 attacks each), written by
#: tests/data/make_attacks_reference.py in the benchmark environment (not run by the tests)
REFERENCE = json.loads((DATA / "attacks_reference.json").read_text())
COLS = ["age", "income", "hours", "sex", "region"]
CATS = ["sex", "region"]


def _files() -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    frames = [pd.read_csv(DATA / f"attacks_{k}.csv") for k in ("original", "released", "control")]
    labels = {c: sorted(set().union(*(set(f[c]) for f in frames))) for c in CATS}
    out = []
    for f in frames:
        f = f.copy()
        for c in CATS:
            f[c] = f[c].map({v: i for i, v in enumerate(labels[c])})
        out.append(f[COLS].to_numpy(np.float64))
    return tuple(out)  # type: ignore[return-value]


CASES = {
    "so_uni": ("so_uni", {}),
    "so_multi": ("so_multi", {"so_n_cols": 3}),
    "linkability": ("linkability", {"link_aux": REFERENCE["linkability"]["aux"],
                                    "link_neighbors": REFERENCE["linkability"]["neighbors"]}),
    "inference_region": ("inference", {"infer_secret": "region"}),
    "inference_income": ("inference", {"infer_secret": "income"}),
}


@pytest.mark.parametrize("case", sorted(CASES))
def test_within_anonymeters_interval(case):
    """Each risk (and baseline) of sdcdist lies in the 95% interval anonymeter 1.1.0 gives on
    the same files with the same options. anonymeter's inference baseline is left out: its
    guesses are aligned to the targets by row label (``reindex_like``), so on a release
    whose rows keep the original's labels it guesses the target's own released value for
    the rows it happened to draw; sdcdist's baseline guesses a random released record's
    secret, as anonymeter's documentation describes it."""
    assert REFERENCE["tool"] == "anonymeter 1.1.0"
    O, S, C = _files()
    name, opts = CASES[case]
    res = measure(O, S, [name, name + "_lo", name + "_hi", name + "_base"], columns=COLS,
                  categorical=CATS, control=C, seed=1,
                  options={"attack_n": REFERENCE["n_attacks"], **opts})
    ref = REFERENCE[case]
    lo, hi = ref["ci"]
    assert lo <= res[name].value <= hi
    assert res[name + "_lo"].value <= res[name].value <= res[name + "_hi"].value
    if not case.startswith("inference"):
        blo, bhi = ref["baseline_ci"]
        assert blo <= res[name + "_base"].value <= bhi
    info = res[name].info
    assert info["n_attacks"][0] == REFERENCE["n_attacks"]
    if name == "inference":
        assert info["regression"] == (opts["infer_secret"] == "income")


def test_statistics_by_hand():
    """Wilson's score interval, the residual over the control and the bounds."""
    z = norm.ppf(0.975)
    rate, err = success_rate(200, 50, 0.95)
    assert rate == pytest.approx((50 + z * z / 2) / (200 + z * z), rel=1e-14)
    assert err == pytest.approx(z / (200 + z * z) * np.sqrt(50 * 150 / 200 + z * z / 4),
                                rel=1e-14)
    f = risk_from_counts((200, 200, 100), 50, 4, 10.0, 0.95)
    m, em = success_rate(200, 50, 0.95)
    c, ec = success_rate(100, 10.0, 0.95)
    r = (m - c) / (1 - c)
    e = np.sqrt((em / (1 - c)) ** 2 + (ec * (m - 1) / (1 - c) ** 2) ** 2)
    assert f["risk"] == pytest.approx(r, rel=1e-14)
    assert (f["lo"], f["hi"]) == pytest.approx((r - e, r + e), rel=1e-14)
    # bounded to [0, 1]: a control better attacked than the original gives 0
    g = risk_from_counts((100, 100, 100), 5, 5, 40.0, 0.95)
    assert g["risk"] == 0.0 and g["lo"] == 0.0 and g["hi"] >= 0.0
    # without a control set the risk is the main rate
    h = risk_from_counts((100, 100, None), 30, 5, None, 0.95)
    assert h["risk"] == pytest.approx(success_rate(100, 30, 0.95)[0])


def _tie_heavy(n: int, seed: int) -> np.ndarray:
    rng = np.random.default_rng(seed)
    X = np.column_stack([rng.integers(0, 4, n), np.zeros(n), rng.integers(0, 6, n) / 2.0,
                         rng.integers(0, 3, n)]).astype(np.float64)
    X[rng.random(X.shape) < 0.08] = np.nan
    return X


def _ctx(A: np.ndarray, B: np.ndarray, **options) -> MeasureContext:
    return MeasureContext(Runner(None), A, B, inputs=Inputs(
        shape_original=A.shape, shape_masked=B.shape, columns=["a", "b", "c", "d"]),
        options=options or None)


def _brute_distance(T: np.ndarray, X: np.ndarray, is_cat: np.ndarray) -> np.ndarray:
    lo = np.fmin(np.nanmin(X, 0), np.nanmin(T, 0))
    hi = np.fmax(np.nanmax(X, 0), np.nanmax(T, 0))
    rng_ = np.where(hi - lo > 0, hi - lo, 1.0)
    D = np.zeros((T.shape[0], X.shape[0]))
    for c in range(T.shape[1]):
        t, x = T[:, c][:, None], X[:, c][None, :]
        both = np.isnan(t) & np.isnan(x)
        one = np.isnan(t) ^ np.isnan(x)
        if is_cat[c]:
            D += np.where(both, 0.0, np.where(one | (t != x), 1.0, 0.0))
        else:
            D += np.where(both, 1.0, np.where(one, np.inf, np.abs(t - x) / rng_[c]))
    return D


@pytest.mark.parametrize("k", [1, 4])
def test_nearest_neighbours_against_brute_force(k):
    """The k nearest by the mixed distance (ties, missing values, a one-category column)
    are those of the full distance matrix, for any block sizes."""
    X, T = _tie_heavy(230, 1), _tie_heavy(37, 2)
    is_cat = np.array([True, True, False, True])
    D = _brute_distance(T, X, is_cat)
    kth = np.sort(D, axis=1)[:, k - 1]
    got = []
    for br in (None, [5, 17], [37, 230], [1, 1000]):
        ctx = _ctx(T, X, **({"block_rows": br} if br else {}))
        idx = gower_knn(ctx, T, X, X.shape[0], [0, 1, 2, 3], is_cat, k, salt=9)
        assert idx.shape == (37, k)
        d = np.take_along_axis(D, idx, 1)
        # the k found are at most the k-th distance, and all nearer records are found
        assert np.all(d <= kth[:, None])
        assert all(set(np.flatnonzero(D[i] < kth[i])) <= set(idx[i]) for i in range(37))
        got.append(idx)
    assert all(np.array_equal(got[0], g) for g in got[1:])


def test_query_counts_against_brute_force():
    X = _tie_heavy(300, 3)
    rng = np.random.default_rng(5)
    nq = 120
    cols = np.column_stack([rng.integers(0, 4, nq), rng.integers(-1, 4, nq)])
    ops = rng.choice([EQ, NE, GT, LT, GE, LE, ISNULL, NOTNULL], size=(nq, 2))
    vals = rng.integers(0, 6, (nq, 2)) / 2.0
    keep = rng.random(300) < 0.8

    def brute(q: int) -> int:
        ok = keep.copy()
        for s in range(2):
            c = cols[q, s]
            if c < 0:
                continue
            x, v, o = X[:, c], vals[q, s], ops[q, s]
            with np.errstate(invalid="ignore"):
                m = {EQ: x == v, NE: (x != v) & ~np.isnan(x), GT: x > v, LT: x < v,
                     GE: x >= v, LE: x <= v, ISNULL: np.isnan(x), NOTNULL: ~np.isnan(x)}[o]
            ok &= m
        return int(ok.sum())
    want = np.array([brute(q) for q in range(nq)])
    q = {"cols": cols, "ops": ops, "vals": vals}
    from sdcdist.metrics.risk.attacks.kernels import count_kernel, count_numpy
    for cap in (0, 2):
        want_c = np.minimum(want, cap) if cap else want
        assert np.array_equal(count_kernel(X, keep, cols, ops, vals, cap), want_c)
        assert np.array_equal(count_numpy(X, keep, cols, ops, vals, cap), want_c)
    for chunk in (65536, 7, 1):
        ctx = _ctx(X, X, chunk_rows=chunk)
        got = count_queries(ctx, X, 300, keep, [0, 1, 2, 3], q, cap=0)
        assert np.array_equal(got, want)
        capped = count_queries(ctx, X, 300, keep, [0, 1, 2, 3], q, cap=2)
        assert np.array_equal(capped, np.minimum(want, 2))


def test_indexed_query_counts_against_brute_force():
    """The counts through each chunk's index (rows sorted by each column, a query reading
    only the range of its most selective term), summed over chunks by map_chunks and
    reduce_chunks, equal brute force for every operator, missing values, -0.0, a NaN
    comparison value and queries of no narrowing term."""
    from sdcdist.metrics.risk.attacks.kernels import count_indexed, query_index
    from sdcdist.parallel import map_chunks, reduce_chunks
    X = _tie_heavy(300, 3)
    X[::17, 1] = -0.0
    rng = np.random.default_rng(6)
    nq = 300
    cols = np.column_stack([rng.integers(0, 4, nq), rng.integers(-1, 4, nq),
                            rng.integers(-1, 4, nq)])
    ops = rng.choice([EQ, NE, GT, LT, GE, LE, ISNULL, NOTNULL], size=(nq, 3))
    vals = rng.integers(-1, 6, (nq, 3)) / 2.0
    vals[::29, 0] = np.nan
    cols[::31] = -1
    keep = rng.random(300) < 0.8
    with np.errstate(invalid="ignore"):
        ok = np.broadcast_to(keep, (nq, 300)).copy()
        for s in range(3):
            x = X[:, cols[:, s]].T                      # (nq, 300), ignored where cols < 0
            v, o = vals[:, s:s + 1], ops[:, s:s + 1]
            m = np.select([o == EQ, o == NE, o == GT, o == LT, o == GE, o == LE, o == ISNULL],
                          [x == v, (x != v) & ~np.isnan(x), x > v, x < v, x >= v, x <= v,
                           np.isnan(x)], ~np.isnan(x))
            ok &= m | (cols[:, s:s + 1] < 0)
    want = ok.sum(axis=1)
    for cap in (0, 2):
        want_c = np.minimum(want, cap) if cap else want
        assert np.array_equal(count_indexed(query_index(X, keep), cols, ops, vals, cap), want_c)
    q = {"cols": cols, "ops": ops, "vals": vals}
    from sdcdist.metrics.risk.attacks.singling_out import _add_counts, _chunk_index, _index_counts
    for chunk in (65536, 7, 1):
        runner = Runner(None)
        states = map_chunks(runner, _chunk_index, [X], 300, chunk_rows=chunk,
                            args=(keep, [0, 1, 2, 3]))
        for cap in (0, 2):
            got = reduce_chunks(runner, _index_counts, _add_counts, states, args=(q, cap))["n"]
            assert np.array_equal(got, np.minimum(want, cap) if cap else want), (chunk, cap)
        got = count_queries(_ctx(X, X, chunk_rows=chunk), X, 300, keep, [0, 1, 2, 3], q, cap=0,
                            indexed=True)
        assert np.array_equal(got, want)


def test_multivariate_figures_unchanged():
    """so_multi's figures on a mixed file with missing values, as the query counter before
    the per-chunk index gave them (same seed, same bits), with the records the queries are
    drawn from taken in content order."""
    X, S, C = _mixed(2000, 3)
    names = ["so_multi", "so_multi_lo", "so_multi_hi", "so_multi_base"]
    r = measure(X, S, names, control=C, options={"attack_n": 60, "chunk_rows": 300}, **KW)
    assert [r[k].value for k in names] == [0.46392058823172483, 0.33480818708221516,
                                           0.5930329893812345, 0.06141353099964193]
    info = r["so_multi"].info
    assert (info["attempts"], info["successes"], info["control_unscaled"],
            info["distinct_released"]) == (3000, 29, 5, 1146)


def test_control_correction_is_anonymeters_model():
    """Equal sizes need no correction; a control half the size of the original scales its
    successes by model(n_ori) / model(n_control) of the fitted singling-out model."""
    rng = np.random.default_rng(0)
    matches = rng.integers(1, 4, 300)
    assert control_correction(matches, 2000, 2000) == pytest.approx(1.0, rel=1e-6)
    corr = control_correction(matches, 1000, 2000)
    assert 0 < corr < 1   # fewer queries single out in a larger file


def _mixed(n: int = 400, seed: int = 0) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    rng = np.random.default_rng(seed)
    X = np.column_stack([rng.integers(0, 5, n), np.zeros(n), rng.normal(size=n).round(1),
                         rng.integers(0, 4, n)]).astype(float)
    X[rng.random(X.shape) < 0.05] = np.nan
    S = X.copy()
    S[:, 2] += rng.normal(0, 0.1, n).round(1)
    S[rng.random(S.shape) < 0.03] = np.nan
    return X, S, _tie_heavy(100, seed + 1)


KW = dict(columns=["a", "b", "c", "d"], categorical=["a", "b", "d"], confidential=["d"],
          seed=4)


def test_same_figures_for_any_chunking():
    X, S, C = _mixed()
    names = list(ATTACK_METRICS)
    base = {"attack_n": 80, "link_neighbors": 3}
    r0 = measure(X, S, names, control=C, options=base, **KW)
    r1 = measure(X, S, names, control=C, options={**base, "chunk_rows": 7,
                                                  "block_rows": [5, 13]}, **KW)
    for k in names:
        assert r0[k].value == r1[k].value, k
        assert r0[k].info == r1[k].info, k
    assert 0 <= r0["so_multi"].value <= 1


@pytest.mark.slow
def test_same_figures_on_a_cluster(client):
    X, S, C = _mixed(300, 2)
    names = ["so_multi", "linkability", "inference_base", "so_uni_hi"]
    opts = {"attack_n": 60, "chunk_rows": 50, "block_rows": [16, 64]}
    here = measure(X, S, names, control=C, options=opts, **KW)
    there = measure(X, S, names, control=C, options=opts, client=client, **KW)
    for k in names:
        assert here[k].value == there[k].value, k


def test_audit_holds_out_the_control_share():
    doc = {"name": "t", "seed": 3, "dataset": {"name": "d", "synthetic":
                                                {"rows": 200, "columns": 3, "seed": 1}},
           "methods": [{"name": "noise", "params": [0.1]}], "metrics": ["linkability"],
           "options": {"control": 0.25}}
    (md, _), = load_data(parse_spec(doc))
    assert md.values.shape == (150, 3) and md.control.shape == (50, 3)
    (md2, _), = load_data(parse_spec(doc))
    assert np.array_equal(md.control, md2.control)
    doc.pop("options")
    (full, _), = load_data(parse_spec(doc))
    both = np.concatenate([md.values, md.control])
    assert np.array_equal(np.sort(both, axis=0), np.sort(full.values, axis=0))
    assert full.control is None


@pytest.mark.parametrize("share", [0, 1, 0.0, 1.0, -0.2, 1.5, "half"])
def test_control_share_of_0_or_1_is_refused(share):
    doc = {"name": "t", "seed": 3, "dataset": {"name": "d", "synthetic":
                                                {"rows": 50, "columns": 3, "seed": 1}},
           "methods": [{"name": "noise", "params": [0.1]}], "metrics": ["linkability"],
           "options": {"control": share}}
    with pytest.raises(SdcInputError, match="'control' option must be .* strictly between "
                                            "0 and 1"):
        parse_spec(doc)


def test_control_share_leaving_no_record_is_refused():
    md = Microdata(np.arange(12.0).reshape(4, 3), ("a", "b", "c"))
    with pytest.raises(SdcInputError, match="'control' option holds out 0 of the 4 records"):
        split_control(md, 0.1, 1, 0, "d")


def test_inference_refusals():
    X, S, C = _mixed(100)
    with pytest.raises(SdcInputError, match="secret column 'd' is also among"):
        measure(X, S, ["inference"], control=C, options={"infer_aux": ["a", "d"]}, **KW)
    kw = {**KW, "confidential": []}
    with pytest.raises(SdcInputError, match="needs confidential columns .*none is named; "
                                            "give them .*or set the option infer_secret"):
        measure(X, S, ["inference"], control=C, **kw)
    with pytest.raises(SdcInputError, match="Unknown infer_secret column 'zz'"):
        measure(X, S, ["inference"], control=C, options={"infer_secret": "zz"}, **KW)
    with pytest.raises(SdcInputError, match="control set has 2 columns"):
        measure(X, S, ["inference"], control=C[:, :2], **KW)


def test_no_record_value_in_the_figures():
    """The figures' detail holds counts, rates and names, never a record value."""
    X, S, C = _mixed(200)
    X[:, 2] += 12345.678
    S[:, 2] += 12345.678
    res = measure(X, S, ["so_uni", "so_multi", "linkability", "inference"], control=C,
                  options={"attack_n": 40}, **KW)
    text = json.dumps({k: r.info for k, r in res.items()}, default=str)
    assert "12345" not in text and "1234" not in text


@pytest.mark.parametrize("k", [1, 3])
def test_knn_kernel_is_the_exact_top_k(k):
    """The kernel (which stops adding up a row's distance once it exceeds the k-th nearest)
    returns, bit for bit, the k smallest (distance, tie key) of the full distance matrix
    added up column by column in the same order."""
    from sdcdist.metrics.risk.attacks.kernels import knn_kernel
    from sdcdist.metrics.content import _mix_np

    X, T = _tie_heavy(300, 5), _tie_heavy(40, 6)
    X[:, 2] = np.where(np.isnan(X[:, 2]), np.nan, X[:, 2] + np.arange(300) / 7.0)
    is_cat = np.array([True, True, False, True])
    inv = np.array([1.0, 1.0, 1 / 3.7, 1.0])
    a_off, b_off, salt = 11, 1000, np.uint64(12345)
    D, Tk, Ix = knn_kernel(T, X, inv, is_cat, k, a_off, b_off, salt)
    d = np.zeros((T.shape[0], X.shape[0]))
    for c in range(4):
        t, x = T[:, c][:, None], X[:, c][None, :]
        both, one = np.isnan(t) & np.isnan(x), np.isnan(t) ^ np.isnan(x)
        if is_cat[c]:
            d = d + np.where(both, 0.0, np.where(one | (t != x), 1.0, 0.0))
        else:
            with np.errstate(invalid="ignore"):
                d = d + np.where(both, 1.0, np.where(one, np.inf, np.abs(t - x) * inv[c]))
    with np.errstate(over="ignore"):
        rows = np.arange(T.shape[0], dtype=np.uint64) + np.uint64(a_off)
        hi = _mix_np(salt ^ _mix_np(rows + np.uint64(0x9E3779B97F4A7C15)))
        key = _mix_np(hi[:, None] ^ (np.arange(X.shape[0], dtype=np.uint64) + np.uint64(b_off)))
    for i in range(T.shape[0]):
        o = np.lexsort((key[i], d[i]))[:k]
        assert np.array_equal(Ix[i], o + b_off)
        assert np.array_equal(D[i], d[i, o]) and np.array_equal(Tk[i], key[i, o])


def test_nearest_neighbour_figures_unchanged():
    """linkability, inference and so_uni on a mixed file with missing values, as before the
    kernel stopped adding up distances early and the probit came from scipy.special (same
    seed, same bits), with targets and guesses drawn in content order and ties broken by
    the released records' positions in it."""
    X, S, C = _mixed(2000, 3)
    want = {"linkability": ([0.0, 0.0, 0.03315792719758922,
                             0.022909064767763554], {"link_neighbors": 3}),
            "inference": ([0.07471526452350526, 0.0, 0.22750951747998566,
                           0.2853090791454936], {}),
            "so_uni": ([0.048827690241424734, 0.0, 0.10559246804263758,
                        0.022909064767763554], {})}
    for a, (fig, extra) in want.items():
        names = [a, a + "_lo", a + "_hi", a + "_base"]
        r = measure(X, S, names, control=C, options={"attack_n": 80, "chunk_rows": 300,
                                                     "block_rows": [16, 300], **extra}, **KW)
        assert [r[n].value for n in names] == fig, a


def test_so_uni_falls_back_to_the_stated_scale_when_the_control_fit_does_not_converge(
        monkeypatch):
    from sdcdist.metrics.risk.attacks import singling_out
    X, S, _ = _mixed()
    C = X[:150]                       # a control that some queries single out in
    ok = measure(X, S, ["so_uni"], control=C, options={"attack_n": 60}, **KW)["so_uni"]
    assert ok.flag == 0 and "control_scale" not in ok.info

    def no_convergence(*a, **k):
        raise RuntimeError("Optimal parameters not found: The maximum number of function "
                           "evaluations is exceeded.")
    monkeypatch.setattr(singling_out, "_fit", no_convergence)
    r = measure(X, S, ["so_uni", "so_uni_hi"], control=C, options={"attack_n": 60}, **KW)
    info = r["so_uni"].info
    assert r["so_uni"].flag == 1 and r["so_uni_hi"].flag == 1
    assert "did not converge" in info["control_scale"]
    assert info["control_unscaled"] > 0 and ok.info["control_correction"] != 1.0
    assert info["control_correction"] == (info["distinct_control"] + 1.0) / (
        info["distinct_original"] + 1.0)
    assert np.isfinite(r["so_uni"].value)
