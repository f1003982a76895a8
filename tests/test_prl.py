"""Probabilistic record linkage: kernels vs brute force, EM, PLD / PLD20 on reference data."""

import itertools

import numpy as np
import pytest

from sdcdist.data import from_array
from sdcdist.errors import SdcInputError
from sdcdist.linkage import prl
from sdcdist.linkage import truth_from_ids
from sdcdist.linkage.link import link_files
from sdcdist.linkage.prl import blocked_pattern_counts, probabilistic_linkage
from sdcdist.linkage.prl.em import _constrained_levels, _estep, _group_tables
from sdcdist.masking import REGISTRY as MASKING
from sdcdist.metrics import measure
from sdcdist.parallel import Runner


def _dense_counts(sparse, n_patterns):
    """Sparse pattern counts as a dense vector over all codes (small pattern spaces)."""
    out = np.zeros(int(n_patterns), dtype=np.int64)
    out[np.asarray(sparse[0], dtype=np.int64)] = sparse[1]
    return out


def _pattern_levels(cmp, codes=None):
    """Level of each column in each pattern code (every code by default), decoded digit by
    digit from the mixed radix."""
    codes = np.arange(cmp.n_patterns) if codes is None else np.asarray(codes, dtype=np.int64)
    out = np.empty((codes.size, len(cmp.levels)), dtype=np.int64)
    rest = codes.copy()
    for k, nl in enumerate(cmp.n_levels.tolist()):
        out[:, k] = rest % nl
        rest //= nl
    return out


def _files(rng, n_a=57, n_b=43, p=0.05):
    A = np.exp(rng.normal(size=(n_a, 4))) * np.array([1000.0, 10.0, 1.0, 1.0])
    A[:, 2] = rng.integers(0, 3, n_a)            # a categorical column
    A[::7, 3] = -A[::7, 3]                       # negatives and zeros
    A[::11, 3] = 0.0
    B = A[:n_b] * (1 + p * rng.normal(size=(n_b, 4)))
    B[:, 2] = A[:n_b, 2]
    return A, B


def _brute_levels(A, B, method, levels, categorical):
    """Comparison levels written straight from the CATALOG formula, pair by pair (n_b, n_a, K)."""
    out = np.zeros((B.shape[0], A.shape[0], A.shape[1]), dtype=np.int64)
    for k in range(A.shape[1]):
        a, b = A[:, k][None, :], B[:, k][:, None]
        if categorical[k]:
            out[:, :, k] = (a != b)
            continue
        if method == "l":
            a, b = np.sign(a) * np.log(1 + np.abs(a)), np.sign(b) * np.log(1 + np.abs(b))
        for t in levels[k]:
            out[:, :, k] += ~(np.abs(a - b) <= t * np.maximum(np.abs(a), 0.1))
    return out


@pytest.mark.parametrize("method,t", [("l", 0.05), ("d", 0.1), ("l", (0.02, 0.1, 0.3))])
def test_blocked_pattern_counts_equal_brute_force(rng, client, method, t):
    A, B = _files(rng)
    cat = [False, False, True, False]
    cmp = prl.comparison(4, method=method, t=t, categorical=cat)
    lv = _brute_levels(A, B, method, [np.atleast_1d(t)] * 4, cat)
    code = (lv * cmp.radix).sum(axis=2).ravel()
    expect = np.bincount(code, minlength=cmp.n_patterns)
    cols = (0, 1, 2, 3)
    for runner in (Runner(), Runner(client)):
        Ap = runner.task(prl.prepare_side, A, cols, cmp, side="a")
        Bp = runner.task(prl.prepare_side, B, cols, cmp, side="b")
        for rows in [(5, 7), (16, 43), (57, 43), (100, 100)] + \
                ([(1, 1)] if runner.client is None else []):
            got, n = blocked_pattern_counts(runner, Ap, Bp, 57, 43, cmp, rows=rows)
            np.testing.assert_array_equal(_dense_counts(got, cmp.n_patterns), expect)
            assert np.all(np.diff(got[0]) > 0) and np.all(got[1] > 0)
            assert n == 57 * 43
        # sorted neighbourhood with a window covering everything = all pairs
        got, n = blocked_pattern_counts(runner, Ap, Bp, 57, 43, cmp, rows=(8, 8),
                                        blocking=(0, 57))
        np.testing.assert_array_equal(_dense_counts(got, cmp.n_patterns), expect)
        got, n = blocked_pattern_counts(runner, Ap, Bp, 57, 43, cmp, rows=(8, 8),
                                        blocking=(0, 3))
        assert n <= 43 * 6 and got[1].sum() == n


def test_sparse_pattern_counts_many_levels(rng, monkeypatch):
    """13 columns x 4 levels (4^13 = 6.7e7 patterns): sparse counts equal brute-force codes;
    the hash-table kernel equals the dense-histogram kernel where both fit."""
    A = np.round(np.exp(rng.normal(size=(70, 13))), 1)
    A[rng.random(A.shape) < 0.3] = 0.0                    # zeros and repeated values
    B = A[:50] + 0.3 * rng.normal(size=(50, 13)) * A[:50].std(axis=0)
    levels = (0.05, 0.2, 0.5)
    cmp = prl.comparison(13, method="d", t=levels)
    assert cmp.n_patterns == 4 ** 13
    a = prl.prepare_side(A, tuple(range(13)), cmp, side="a")
    b = prl.prepare_side(B, tuple(range(13)), cmp, side="b")
    lv = _brute_levels(A, B, "d", [levels] * 13, [False] * 13)
    code = (lv * cmp.radix).sum(axis=2).ravel()
    expect = prl.sparse_counts(code)
    got = prl.pattern_counts(a, b, cmp)
    np.testing.assert_array_equal(got[0], expect[0])
    np.testing.assert_array_equal(got[1], expect[1])
    parts = [prl.pattern_counts({k: v[s:s + 9] for k, v in a.items()}, b, cmp)
             for s in range(0, 70, 9)]
    merged = prl.merge_counts(*parts)
    np.testing.assert_array_equal(merged[0], expect[0])
    np.testing.assert_array_equal(merged[1], expect[1])
    small = prl.comparison(5, method="d", t=levels)          # 4^5: dense histogram
    a5 = prl.prepare_side(A, tuple(range(5)), small, side="a")
    b5 = prl.prepare_side(B, tuple(range(5)), small, side="b")
    dense = prl.pattern_counts(a5, b5, small)
    monkeypatch.setattr(prl.patterns, "DENSE_PATTERN_SPACE", 1)       # force the hash table
    hashed = prl.pattern_counts(a5, b5, small)
    np.testing.assert_array_equal(dense[0], hashed[0])
    np.testing.assert_array_equal(dense[1], hashed[1])
    np.testing.assert_array_equal(_dense_counts(dense, small.n_patterns),
                                  np.bincount((lv[:, :, :5] * small.radix).sum(axis=2).ravel(),
                                              minlength=small.n_patterns))
    fit = prl.em(got, cmp, p_start=1 / 70, p_max=1 / 70)    # EM on the sparse counts
    assert len(fit.m) == 13 and all(x.size == 4 for x in fit.m)


def test_hand_computed_comparison():
    # d method, t = 0.1: tolerance = 0.1 * max(|a|, 0.1)
    A = np.array([[10.0], [0.0], [-5.0]])
    B = np.array([[10.9], [0.011], [-5.6]])
    cmp = prl.comparison(1, method="d", t=0.1)
    a = prl.prepare_side(A, (0,), cmp, side="a")
    b = prl.prepare_side(B, (0,), cmp, side="b")
    # diagonal: |0.9| <= 1 agree; |0.011| <= 0.01 no; |0.6| <= 0.5 no
    lo, hi, idx = np.arange(3), np.arange(3) + 1, np.arange(3)
    codes, counts = prl.pattern_counts(a, b, cmp, lo=lo, hi=hi, aidx=idx)
    assert list(codes) == [0, 1] and list(counts) == [1, 2]
    # weights: w = max(w_agr - (w_agr - w_dis) d / tol, w_dis)
    fit = prl.EMResult([np.array([0.9, 0.1])], [np.array([0.1, 0.9])], 0.01, 0.0, 1, True)
    wp = prl.weight_params(fit, cmp)
    wa, wd = np.log(9.0), np.log(1 / 9.0)
    w = prl.pair_weights(a, b, np.arange(3), np.arange(3), cmp, wp)
    np.testing.assert_allclose(w, [wa - (wa - wd) * 0.9, wd, wd], rtol=1e-12)


@pytest.mark.parametrize("levels", [1, 3])
def test_em_recovers_latent_model(levels):
    """Pattern counts drawn from known m, u, P(M) (binary or 3-level comparisons)."""
    rng = np.random.default_rng(3)
    cmp = prl.comparison(8, t=0.05 if levels == 1 else tuple(0.05 * np.arange(1, levels)))
    if levels == 1:
        m0 = np.array([0.95, 0.9, 0.85, 0.8, 0.9, 0.95, 0.85, 0.9])
        u0 = np.array([0.05, 0.1, 0.02, 0.2, 0.3, 0.1, 0.15, 0.05])
        m, u = np.column_stack([m0, 1 - m0]), np.column_stack([u0, 1 - u0])
    else:
        m = np.array([[.9, .07, .03], [.85, .1, .05], [.8, .12, .08], [.9, .05, .05],
                      [.75, .15, .1], [.9, .05, .05], [.85, .1, .05], [.8, .15, .05]])
        u = np.array([[.05, .15, .8], [.1, .2, .7], [.02, .08, .9], [.2, .3, .5],
                      [.3, .3, .4], [.1, .1, .8], [.15, .25, .6], [.05, .2, .75]])
    n = 10_000                                      # two files of n records: N = n^2 pairs
    pM, N = 0.8 / n, n * n                          # 8000 matches (P(M) <= min(n, n) / N)
    lev = _pattern_levels(cmp)
    pm = np.prod([m[k][lev[:, k]] for k in range(8)], axis=0)
    pu = np.prod([u[k][lev[:, k]] for k in range(8)], axis=0)
    counts = rng.multinomial(N, pM * pm + (1 - pM) * pu)
    fit = prl.em(counts, cmp, p_start=1 / n, p_max=1 / n)
    assert fit.converged and fit.iterations > 2
    np.testing.assert_allclose(np.array(fit.m), m, atol=0.02)
    np.testing.assert_allclose(np.array(fit.u), u, atol=0.001)
    assert fit.p == pytest.approx(pM, rel=0.05)
    assert np.all(np.diff(fit.history) >= -1e-6 * abs(fit.history[-1]))  # EM never goes down


def test_em_guards_keep_weights_finite():
    cmp = prl.comparison(2, t=0.05)
    counts = np.array([10, 0, 0, 10_000])         # perfect separation: m, u hit 0/1
    fit = prl.em(counts, cmp, p_start=0.001)
    wp = prl.weight_params(fit, cmp)
    assert np.all(np.isfinite(wp.w_agr)) and np.all(np.isfinite(wp.w_dis))
    assert fit.clipped > 0 and 0 < fit.p < 1


def test_topc_blocks_equal_dense(rng, client):
    A, B = _files(rng, 80, 60, p=0.2)
    cmp = prl.comparison(4, categorical=[False, False, True, False])
    a = prl.prepare_side(A, (0, 1, 2, 3), cmp, side="a")
    b = prl.prepare_side(B, (0, 1, 2, 3), cmp, side="b")
    fit = prl.em(prl.pattern_counts(a, b, cmp), cmp, p_start=1 / 80)
    wp = prl.weight_params(fit, cmp)
    W = prl.dense_weights(a, b, cmp, wp)
    c = 7
    full = prl.topc_block(a, b, cmp, wp, c)
    order = np.array([np.lexsort((np.arange(80), -row))[:c] for row in W])
    np.testing.assert_array_equal(full["idx"], order)
    parts = [prl.topc_block({k: v[s:s + 13] for k, v in a.items()}, b, cmp, wp, c, a0=s)
             for s in range(0, 80, 13)]
    merged = prl.merge_topc(*parts)
    np.testing.assert_array_equal(merged["idx"], full["idx"])
    np.testing.assert_array_equal(merged["w"], full["w"])


@pytest.mark.parametrize("use_client", [False, True])
def test_sparse_linkage_equals_dense_and_blocks(rng, client, use_client):
    A, B = _files(rng, 90, 70, p=0.03)
    runner = Runner(client if use_client else None)
    dense = probabilistic_linkage(runner, A, B, 90, 70, (0, 1, 3))
    assert dense.info["assignment"] == "dense" and dense.flag == 0
    for rows, how in [((16, 16), "row_floor"), ((90, 7), None)]:
        sparse = probabilistic_linkage(runner, A, B, 90, 70, (0, 1, 3), dense_limit=10,
                                       top_c=90, block_rows=rows, unmatched=how)
        assert sparse.info["assignment"].startswith("sparse") and sparse.flag == 1
        np.testing.assert_array_equal(sparse.cols_a, dense.cols_a)
        np.testing.assert_array_equal(sparse.weights, dense.weights)
        assert sparse.correct == dense.correct and sparse.correct20 == dense.correct20
    blocked = probabilistic_linkage(runner, A, B, 90, 70, (0, 1, 3), blocking=(0, 5))
    assert blocked.flag == 1 and blocked.info["pairs_compared"] <= 70 * 10
    assert "sorted neighbourhood" in blocked.info["blocking"]


def test_pld20_precision_cutoff():
    # sorted weights 9 8 7 6 5 4 3 2 1 0 with correct = 1 1 0 0 0 0 0 0 0 1
    w = np.arange(10.0)[::-1]
    correct = np.zeros(10, bool)
    correct[[0, 1, 9]] = True
    # precision at k: 1, 1, .67, .5, .4, .33, .29, .25, .22, .3 -> last k with >= .2 is 10
    assert prl.precision_cutoff(w, correct) == 3
    correct[9] = False
    assert prl.precision_cutoff(w, correct) == 2   # k = 9 (precision 2/9 >= .2)
    assert prl.precision_cutoff(w, correct, 0.3) == 2
    assert prl.precision_cutoff(w, np.zeros(10, bool)) == 0


def test_identity_and_permutation(census):
    X = census.values[:, :6]
    cols = census.columns[:6]
    r = measure(X, X.copy(), ["PLD", "PLD20"], columns=cols)
    assert r["PLD"].value == 100.0 and r["PLD20"].value == 100.0
    assert r["PLD"].info["per_keyset_info"][0]["assignment"] == "dense"
    perm = np.random.default_rng(0).permutation(X.shape[0])
    r = measure(X, X[perm], ["PLD"], columns=cols, keysets=[cols[:3], cols])
    n = X.shape[0]
    fixed = 100.0 * np.count_nonzero(perm == np.arange(n)) / n
    assert r["PLD"].value == pytest.approx(fixed)       # only fixed points are "correct"
    assert r["PLD"].value <= 100.0 * 5 / n


def test_pld_falls_with_noise_and_tracks_dld(census):
    X = census.values
    cols = census.columns
    grid = [("noise", p) for p in (0.01, 0.05, 0.1, 0.3, 0.8)] + \
           [("rankswap", p) for p in (1, 5, 10, 20)]
    pld, dld = [], []
    for i, (name, p) in enumerate(grid):
        Y = MASKING[name](X, p, rng=np.random.default_rng(100 + i))
        r = measure(X, Y, ["PLD", "DLD"], columns=cols)
        pld.append(r["PLD"].value)
        dld.append(r["DLD"].value)
    noise = pld[:5]
    # falls with the noise; between the two smallest amounts it may stand still (ties
    # between equally likely links are broken by value: a point or so either way)
    assert all(a > b - 1.0 for a, b in zip(noise, noise[1:])), noise
    assert noise[1] > noise[2] > noise[3] > noise[4], noise
    corr = np.corrcoef(dld, pld)[0, 1]
    assert corr > 0.9, (corr, pld, dld)


def test_external_file_and_identifier(rng, client):
    A, _ = _files(rng, 120, 10)
    ids = rng.permutation(1000)[:120].astype(float)
    A = np.column_stack([ids, A])
    sub = rng.permutation(120)[:50]                 # B covers part of A, shuffled, + strangers
    B = A[sub].copy()
    B[:, 1:] *= 1 + 0.01 * rng.normal(size=(50, 4))
    B[:, 3] = A[sub, 3]
    B[:5, 0] = 5000 + np.arange(5)                  # 5 records not in A
    a = from_array(A, ["id", "x", "y", "c", "z"])
    b = from_array(B[:, [4, 3, 2, 1, 0]], ["z", "c", "y", "x", "id"])
    out = link_files(a, b, ["x", "y", "c", "z"], id_column="id", categorical=["c"],
                     client=client)
    tr = truth_from_ids(A[:, 0], B[:, 0])
    assert np.all(tr[:5] == -1) and np.all(A[tr[5:], 0] == B[5:, 0])
    df = out.pairs
    assert set(df.columns) >= {"row_b", "row_a", "weight", "match_probability", "correct"}
    assert df["match_probability"].between(0, 1).all()
    assert out.pld == pytest.approx(100.0 * df["correct"].sum() / 50)
    assert out.pld >= 80.0 and out.pld <= 90.0        # the 5 strangers cannot be re-identified
    assert (out.matched, out.unmatched) == (45, 5)
    # measure() with an explicit truth gives the same PLD
    r = measure(A[:, 1:], B[:, 1:], ["PLD"], columns=["x", "y", "c", "z"],
                keysets=[["x", "y", "c", "z"]], truth=tr, client=client)
    assert r["PLD"].value == pytest.approx(out.pld, abs=100 / 50 * 3)
    assert r["PLD"].info["matched"] == 45 and r["PLD"].info["unmatched"] == 5


def test_identifiers_that_never_match_are_refused(rng):
    """Disjoint identifiers used to give PLD 0 with no error (issue 14, item 1)."""
    A, B = _files(rng, 30, 30)
    ids = np.arange(30.0)
    a = from_array(np.column_stack([ids, A]), ["id", "x", "y", "c", "z"])
    b = from_array(np.column_stack([ids + 1000, B]), ["id", "x", "y", "c", "z"])
    with pytest.raises(SdcInputError, match="identifier column 'id' matches no record") as e:
        link_files(a, b, ["x", "y"], id_column="id")
    assert "--id" in str(e.value) and "1000" not in str(e.value)
    assert link_files(a, b, ["x", "y"]).matched is None      # no identifier: row order


def test_bad_inputs(rng):
    A, B = _files(rng, 30, 20)
    a = from_array(A, ["x", "y", "c", "z"])
    b = from_array(B[:, :3], ["x", "y", "c"])
    with pytest.raises(SdcInputError, match="Unknown key column .z. in the masked file"):
        link_files(a, b, ["x", "z"])
    with pytest.raises(SdcInputError, match="no key columns"):
        link_files(a, b, [])
    with pytest.raises(SdcInputError, match="at least one key column"):
        probabilistic_linkage(Runner(), A, B, 30, 20, ())
    for t in (0.0, -0.1, (0.1, 0.05)):
        with pytest.raises(SdcInputError, match="'prl_t' option"):
            link_files(a, b, ["x", "y"], t=t)
    with pytest.raises(SdcInputError, match="1 record"):
        probabilistic_linkage(Runner(), A, B[:1], 30, 1, (0, 1))
    with pytest.raises(SdcInputError, match="1 record"):
        measure(A, B[:1], ["PLD"], keysets=[["V1", "V2"]])
    with pytest.raises(SdcInputError, match="'prl_method' option"):
        link_files(a, b, ["x"], method="q")
    ids = np.arange(30.0)
    ids[1] = ids[0]
    dup = from_array(np.column_stack([ids, A]), ["id", "x", "y", "c", "z"])
    with pytest.raises(SdcInputError, match="identifiers must be unique"):
        link_files(dup, from_array(np.column_stack([ids[:20], B]),
                                   ["id", "x", "y", "c", "z"]), ["x"], id_column="id")


def test_cli_link(tmp_path, rng, client):
    import pandas as pd
    from click.testing import CliRunner

    from sdcdist.cli import main
    A, B = _files(rng, 40, 30, p=0.01)
    ids = np.arange(100, 140, dtype=float)
    pd.DataFrame(np.column_stack([ids, A]), columns=["id", "x", "y", "c", "z"]) \
        .to_csv(tmp_path / "a.csv", index=False)
    pd.DataFrame(np.column_stack([ids[:30][::-1], B[::-1]]),
                 columns=["id", "x", "y", "c", "z"]).to_csv(tmp_path / "b.csv", index=False)
    out = tmp_path / "pairs.parquet"
    args = ["link", str(tmp_path / "a.csv"), str(tmp_path / "b.csv"), "--keys", "x,y,c,z",
            "--categorical", "c", "--id", "id", "--method", "prl", "--out", str(out),
            "--scheduler", client.scheduler.address]
    res = CliRunner().invoke(main, args)
    assert res.exit_code == 0, res.output
    df = pd.read_parquet(out)
    assert len(df) == 30 and df["correct"].mean() > 0.8
    assert (df["id_a"] == df["id_b"]).tolist() == df["correct"].tolist()
    assert "PLD" in res.output
    res = CliRunner().invoke(main, args)                 # exists, no --overwrite
    assert res.exit_code == 2 and "--overwrite" in res.output
    res = CliRunner().invoke(main, args[:3] + ["--keys", "x,w", "--out", str(tmp_path / "p.parquet"),
                                               "--scheduler", client.scheduler.address])
    assert res.exit_code == 2 and "Unknown key column 'w'" in res.output
    # --weights: the step reading gives its own weights; a bad value is a usage error
    step = tmp_path / "step.parquet"
    res = CliRunner().invoke(main, args[:-4] + ["--weights", "step", "--out", str(step),
                                                "--scheduler", client.scheduler.address])
    assert res.exit_code == 0, res.output
    assert not np.array_equal(pd.read_parquet(step)["true_weight"], df["true_weight"])
    res = CliRunner().invoke(main, args[:-4] + ["--weights", "cubic", "--out", str(step)])
    assert res.exit_code == 2 and "--weights" in res.output


def test_pld_in_an_audit_spec(tmp_path):
    from sdcdist.audit import run_audit
    from sdcdist.audit.spec import parse_spec
    from sdcdist.cube import open_cube
    spec = parse_spec({
        "name": "prl", "seed": 1,
        "dataset": {"name": "s", "synthetic": {"rows": 300, "columns": 4, "seed": 2}},
        "methods": [{"name": "noise", "params": [0.01, 0.5]}],
        "metrics": ["PLD", "PLD20"], "replicates": 1,
        "options": {"prl_top_c": 5, "prl_dense_limit": 100, "prl_t": 0.05}})
    res = run_audit(spec, tmp_path / "c.zarr")
    assert res.computed == 2
    cube = open_cube(str(tmp_path / "c.zarr"))
    v = cube["value"].sel({"method": "noise", "metric": "PLD", "replicate": 0}).values
    assert v[0] > v[1] >= 0                       # p = 0.01 re-identifies more than 0.5
    assert np.all(cube["flag"].sel({"method": "noise", "replicate": 0}).values == 1)  # sparse


def test_cli_link_and_risk_report_partial_identifier_overlap(tmp_path, rng):
    """A partial overlap is printed and stored with the pairs; none is exit 2 (issue 14, 1)."""
    import json

    import pandas as pd
    import pyarrow.parquet as pq
    from click.testing import CliRunner

    from sdcdist.cli import main
    A, B = _files(rng, 40, 30, p=0.01)
    ids = np.arange(100, 140, dtype=float)
    idb = ids[:30].copy()
    idb[:6] += 1000                                        # 6 released records not in A
    pd.DataFrame(np.column_stack([ids, A]), columns=["id", "x", "y", "c", "z"]) \
        .to_csv(tmp_path / "a.csv", index=False)
    pd.DataFrame(np.column_stack([idb, B]), columns=["id", "x", "y", "c", "z"]) \
        .to_csv(tmp_path / "b.csv", index=False)
    out = tmp_path / "pairs.parquet"
    res = CliRunner().invoke(main, ["link", str(tmp_path / "a.csv"), str(tmp_path / "b.csv"),
                                    "--keys", "x,y,z", "--id", "id", "--out", str(out), "--local"])
    assert res.exit_code == 0, res.output
    assert "24 of 30 masked records have one in the original file" in res.output
    meta = json.loads(pq.read_schema(out).metadata[b"sdcdist"])
    assert (meta["matched"], meta["unmatched"]) == (24, 6)
    res = CliRunner().invoke(main, ["risk", str(tmp_path / "a.csv"), str(tmp_path / "b.csv"),
                                    "--metric", "DLD", "--id", "id", "--local"])
    assert res.exit_code == 0, res.output
    assert "24 of 30 masked records have an identifier" in res.output
    pd.DataFrame(np.column_stack([idb + 5000, B]), columns=["id", "x", "y", "c", "z"]) \
        .to_csv(tmp_path / "c.csv", index=False)
    for cmd in (["risk", "--metric", "DLD"],
                ["link", "--keys", "x,y", "--out", str(tmp_path / "q.parquet")]):
        res = CliRunner().invoke(main, cmd[:1] + [str(tmp_path / "a.csv"), str(tmp_path / "c.csv")]
                                 + cmd[1:] + ["--id", "id", "--local"])
        assert res.exit_code == 2 and "matches no record" in res.output, res.output


def _numpy_constrained_mstep(a, b):
    """max sum a ln m + sum b ln u s.t. cumsum(m) >= cumsum(u) below the last level, by
    brute force over the sets of cuts where the constraint holds with equality: such
    cuts tie m's and u's mass on each piece, which then splits in proportion to a and b."""
    L = a.size
    best, arg = -np.inf, None
    for mask in itertools.product([False, True], repeat=L - 1):
        seg = np.concatenate([[0], np.cumsum(mask)])           # piece of each level
        As, Bs = np.bincount(seg, a), np.bincount(seg, b)
        w = (As + Bs) / (a.sum() + b.sum())
        with np.errstate(divide="ignore", invalid="ignore"):
            m = np.where(As[seg] > 0, w[seg] * a / As[seg], w[seg] * b / Bs[seg])
            u = np.where(Bs[seg] > 0, w[seg] * b / Bs[seg], m)
        m, u = np.nan_to_num(m), np.nan_to_num(u)
        if np.any(np.cumsum(m)[:-1] < np.cumsum(u)[:-1] - 1e-13):
            continue
        with np.errstate(divide="ignore"):
            f = np.sum(a[a > 0] * np.log(m[a > 0])) + np.sum(b[b > 0] * np.log(u[b > 0]))
        if f > best:
            best, arg = f, (m, u)
    return arg


def _numpy_em(codes, counts, nl, radix, p_start, p_max, m_start=0.9, eps=1e-9, tol=1e-10,
              max_iter=20000):
    """Winkler's constrained EM written independently, vectorised numpy (CATALOG.md):
    P(M) <= p_max; per column, cumulative agreement m >= u at every tolerance (the
    constrained maximum of the M-step when the plain one violates it); probabilities
    clipped to [eps, 1 - eps] and renormalised; stop when no parameter's logarithm moves
    by tol or more."""
    c = counts.astype(float)
    N = c.sum()
    K = len(nl)
    lev = (codes[:, None] // radix[None, :]) % nl[None, :]
    onehot = [np.eye(nl[k])[lev[:, k]] for k in range(K)]          # (P, L_k)

    def clip(x):
        y = np.clip(x, eps, 1 - eps)
        return y / y.sum()

    freq = [c @ onehot[k] / N for k in range(K)]
    u = [clip(f) for f in freq]
    m = []
    for k in range(K):                   # m_start on the closest level that occurs
        mk = np.full(nl[k], (1 - m_start) / (nl[k] - 1))
        mk[np.argmax(freq[k] > 0)] = m_start
        m.append(mk)
    p = min(p_start, p_max)
    for it in range(1, max_iter + 1):
        a = np.log(p) + sum(onehot[k] @ np.log(m[k]) for k in range(K))
        b = np.log1p(-p) + sum(onehot[k] @ np.log(u[k]) for k in range(K))
        g = 1 / (1 + np.exp(b - a))
        cm, cu = c * g, c * (1 - g)
        new_p = min(max(cm.sum() / N, 1 / N), p_max)
        new_m, new_u = [], []
        for k in range(K):
            bm, bu = cm @ onehot[k], cu @ onehot[k]
            fm, fu = bm / cm.sum(), bu / cu.sum()
            if np.any(np.cumsum(fm)[:-1] < np.cumsum(fu)[:-1]):
                fm, fu = _numpy_constrained_mstep(bm, bu)
            new_m.append(clip(fm))
            new_u.append(clip(fu))
        change = max([abs(np.log(new_p) - np.log(p))]
                     + [np.abs(np.log(x) - np.log(y)).max() for x, y in zip(new_m, m)]
                     + [np.abs(np.log(x) - np.log(y)).max() for x, y in zip(new_u, u)])
        p, m, u = new_p, new_m, new_u
        if change < tol:
            return m, u, p, it, True
    return m, u, p, max_iter, False


@pytest.mark.parametrize("method,levels", [("l", 0.05), ("l", (0.02, 0.1, 0.4)),
                                           ("s", (0.0, 0.1, 0.25, 0.5, 1.0))])
def test_constrained_em_equals_independent_numpy(census, method, levels):
    """Census with additive noise (variance 0.1 var, seed 1): m, u and P(M) to 1e-8."""
    X = census.values[:, :7].astype(float)
    Y = MASKING["noise"](X, np.sqrt(0.1), rng=np.random.default_rng(1))
    cmp = prl.comparison(7, method=method, t=levels)
    a = prl.prepare_side(X, tuple(range(7)), cmp, side="a")
    b = prl.prepare_side(Y, tuple(range(7)), cmp, side="b")
    codes, counts = prl.pattern_counts(a, b, cmp)
    n = X.shape[0]
    cap = n / (n * n)
    fit = prl.em((codes, counts), cmp, p_start=cap, p_max=cap)           # SQUAREM
    plain = prl.em((codes, counts), cmp, p_start=cap, p_max=cap, accelerate=False)
    m, u, p, it, ok = _numpy_em(codes, counts, cmp.n_levels, cmp.radix, cap, cap)
    assert fit.converged and plain.converged and ok and abs(plain.iterations - it) <= 1
    assert plain.iterations > 5 and fit.iterations <= plain.iterations
    for f in (fit, plain):
        assert abs(f.p - p) < 1e-8 and f.p <= cap
        for k in range(7):
            np.testing.assert_allclose(f.m[k], m[k], rtol=0, atol=1e-8)
            np.testing.assert_allclose(f.u[k], u[k], rtol=0, atol=1e-8)
            assert np.all(np.cumsum(f.m[k])[:-1] >= np.cumsum(f.u[k])[:-1] - 1e-12)
    assert np.all(np.diff(plain.history) >= -1e-9 * abs(plain.history[-1]))
    assert fit.loglik >= max(fit.history) - 1e-9 * abs(fit.loglik)


@pytest.mark.parametrize("p_noise", [0.4, 0.5])
def test_em_modes_reach_the_same_fixed_point_of_the_weights(census, p_noise):
    """Census with noise, 4 keys: the weights are logarithms, so the EM stops on the change
    of the parameters' logarithms; an absolute test let SQUAREM stop while a probability
    near the 1e-9 floor still moved (level weights 1.3 and 0.8 away from plain EM's)."""
    X = census.values[:, :4].astype(float)
    Y = MASKING["noise"](X, p_noise, rng=np.random.default_rng(1))
    cmp = prl.comparison(4)
    a = prl.prepare_side(X, tuple(range(4)), cmp, side="a")
    b = prl.prepare_side(Y, tuple(range(4)), cmp, side="b")
    counts = prl.pattern_counts(a, b, cmp)
    cap = 1.0 / X.shape[0]
    fast = prl.em(counts, cmp, p_start=cap, p_max=cap)
    plain = prl.em(counts, cmp, p_start=cap, p_max=cap, accelerate=False)
    assert fast.converged and plain.converged and fast.iterations < plain.iterations
    assert abs(np.log(fast.p) - np.log(plain.p)) < 1e-6
    for f, g in zip(prl.weight_params(fast, cmp).w_level, prl.weight_params(plain, cmp).w_level):
        np.testing.assert_allclose(f, g, rtol=0, atol=1e-6)
    for k in range(4):
        np.testing.assert_allclose(np.log(fast.m[k]), np.log(plain.m[k]), rtol=0, atol=1e-6)
        np.testing.assert_allclose(np.log(fast.u[k]), np.log(plain.u[k]), rtol=0, atol=1e-6)


def _latent_counts(seed, K=7, n=1000):
    """Sparse pattern counts of n x n pairs from a known 5-level model on K columns."""
    rng = np.random.default_rng(seed)
    cmp = prl.comparison(K, t=(0.1, 0.25, 0.5, 1.0), method="s")
    m = rng.dirichlet([8, 3, 2, 1, 1], K)
    u = rng.dirichlet([1, 2, 3, 5, 20], K)
    n_m = n                                         # one match per record
    lev_m = np.stack([rng.choice(5, n_m, p=m[k]) for k in range(K)], axis=1)
    lev_u = np.stack([rng.choice(5, n * n - n_m, p=u[k]) for k in range(K)], axis=1)
    codes = np.concatenate([lev_m, lev_u]) @ cmp.radix
    uniq, counts = np.unique(codes, return_counts=True)
    return cmp, (uniq, counts), 1.0 / n


@pytest.mark.parametrize("fix_u", [False, True])
def test_squarem_reaches_the_plain_em_fixed_point(fix_u):
    """SQUAREM stops on the same rule (a plain EM step moves nothing by 1e-10) at the same
    fixed point as plain EM, with fewer EM-map evaluations, and is deterministic."""
    cmp, counts, cap = _latent_counts(5)
    kw = dict(p_start=cap, p_max=cap, fix_u=fix_u)
    fast = prl.em(counts, cmp, **kw)
    plain = prl.em(counts, cmp, accelerate=False, **kw)
    assert fast.converged and plain.converged
    assert fast.iterations < plain.iterations and len(fast.history) == fast.iterations
    assert abs(fast.p - plain.p) < 1e-8
    for k in range(len(fast.m)):
        np.testing.assert_allclose(fast.m[k], plain.m[k], rtol=0, atol=1e-8)
        np.testing.assert_allclose(fast.u[k], plain.u[k], rtol=0, atol=1e-8)
    assert fast.loglik >= plain.loglik - 1e-10 * abs(plain.loglik)
    # at the same budget of EM-map evaluations the accelerated fit is at least as likely
    budget = prl.em(counts, cmp, accelerate=False, max_iter=fast.iterations, **kw)
    assert not budget.converged and fast.loglik >= budget.loglik
    # bit-identical across calls
    again = prl.em(counts, cmp, **kw)
    assert again.p == fast.p and again.history == fast.history
    for k in range(len(fast.m)):
        np.testing.assert_array_equal(again.m[k], fast.m[k])
        np.testing.assert_array_equal(again.u[k], fast.u[k])


def test_em_log_likelihood_matches_direct_evaluation():
    """The E-step's log-likelihood (products of odds, softplus) equals the mixture
    likelihood summed directly, also where odds leave the double range."""
    cmp, (codes, counts), cap = _latent_counts(7, K=6, n=400)
    fit = prl.em((codes, counts), cmp, p_start=cap, p_max=cap, max_iter=7)
    lev = _pattern_levels(cmp, codes)
    lm = np.log(fit.p) + sum(np.log(fit.m[k])[lev[:, k]] for k in range(6))
    lu = np.log1p(-fit.p) + sum(np.log(fit.u[k])[lev[:, k]] for k in range(6))
    assert fit.loglik == pytest.approx(float(np.dot(counts, np.logaddexp(lm, lu))), rel=1e-12)
    # odds beyond the double range (m/u = 1e200 per column): the E-step goes through logs
    K = 3
    cmp3 = prl.comparison(K, t=(0.1, 0.5))
    codes3 = np.arange(cmp3.n_patterns)
    c3 = np.arange(1, codes3.size + 1, dtype=float)
    lev3 = _pattern_levels(cmp3, codes3)
    m = np.tile([1 - 2e-200, 1e-200, 1e-200], (K, 1))
    u = np.tile([1e-200, 0.5, 0.5 - 1e-200], (K, 1))
    T = np.stack([np.bincount(lev3[:, k], weights=c3, minlength=3) for k in range(K)])
    idx, clev = _group_tables(codes3, cmp3.n_levels, cmp3.radix)
    J = clev.shape[0]
    bm = np.zeros((K, 3))
    sm, ll = _estep(idx, c3, clev, cmp3.n_levels, m, u, 0.01, T, c3.sum(), bm,
                        np.zeros((K, 3)), np.zeros(J), np.zeros(J), np.zeros(J))
    lm = np.log(0.01) + sum(np.log(m[k])[lev3[:, k]] for k in range(K))
    lu = np.log(0.99) + sum(np.log(u[k])[lev3[:, k]] for k in range(K))
    g = 1 / (1 + np.exp(lu - lm))
    assert ll == pytest.approx(float(np.dot(c3, np.logaddexp(lm, lu))), rel=1e-12)
    assert sm == pytest.approx(float(np.dot(c3, g)), rel=1e-12)
    for k in range(K):
        np.testing.assert_allclose(bm[k], np.bincount(lev3[:, k], weights=c3 * g, minlength=3),
                                   rtol=1e-12)


def test_capped_em_is_flagged(census, tmp_path):
    X = census.values[:300, :5].astype(float)
    Y = MASKING["noise"](X, np.sqrt(0.1), rng=np.random.default_rng(1))
    ok = probabilistic_linkage(Runner(), X, Y, 300, 300, tuple(range(5)))
    assert ok.fit.converged and ok.flag == 0 and ok.info["em_converged"]
    capped = probabilistic_linkage(Runner(), X, Y, 300, 300, tuple(range(5)),
                                   em_options={"max_iter": 3})
    assert not capped.fit.converged and capped.fit.iterations == 3 and capped.flag == 1
    cols = [f"V{i}" for i in range(5)]
    r = measure(X, Y, ["PLD"], columns=cols, keysets=[cols],
                options={"prl_em": {"max_iter": 3}})
    assert r["PLD"].flag == 1 and r["PLD"].info["per_keyset_info"][0]["em_converged"] is False
    import pandas as pd
    from click.testing import CliRunner

    from sdcdist.cli import main
    pd.DataFrame(X, columns=cols).to_csv(tmp_path / "a.csv", index=False)
    pd.DataFrame(Y, columns=cols).to_csv(tmp_path / "b.csv", index=False)
    res = CliRunner().invoke(main, ["link", str(tmp_path / "a.csv"), str(tmp_path / "b.csv"),
                                    "--keys", ",".join(cols), "--em", "{max_iter: 3}",
                                    "--out", str(tmp_path / "p.parquet"), "--local"])
    assert res.exit_code == 0, res.output
    assert "EM did not converge within 3 iterations" in res.output
    # the former flag names its replacement
    res = CliRunner().invoke(main, ["link", str(tmp_path / "a.csv"), str(tmp_path / "b.csv"),
                                    "--keys", ",".join(cols), "--em-max-iter", "3",
                                    "--out", str(tmp_path / "q.parquet"), "--local"])
    assert res.exit_code == 2 and "--em '{max_iter: N}'" in res.output
    assert not (tmp_path / "q.parquet").exists()


def test_bad_comparisons_are_clear_input_errors():
    with pytest.raises(SdcInputError, match="'prl_method' option must be one of"):
        prl.comparison(3, method="jaro")
    with pytest.raises(SdcInputError, match="increasing tolerances"):
        prl.comparison(3, method="s", t=(0.1, 0.5, 0.25))
    with pytest.raises(SdcInputError, match="increasing tolerances"):
        prl.comparison(3, method="s", t=(0.1, 0.1))
    with pytest.raises(SdcInputError, match="at most 15 tolerances"):
        prl.comparison(3, method="s", t=tuple(0.1 * np.arange(1, 18)))
    with pytest.raises(SdcInputError, match="comparison patterns"):
        prl.comparison(40, method="s", t=tuple(0.1 * np.arange(1, 10)))   # 10^40 patterns
    with pytest.raises(SdcInputError, match="only the first may be 0"):
        prl.comparison(2, method="s", t=0.0)
    from sdcdist.metrics import measure
    X = np.random.default_rng(0).normal(size=(20, 2))
    for opts in ({"prl_method": "jaro"}, {"prl_t": [0.5, 0.1]}):
        with pytest.raises(SdcInputError, match="prl_"):
            measure(X, X, ["PLD"], options=opts)


def test_exact_blocks_on_a_categorical_key_equal_brute_force(rng, client):
    """Half window 0: only pairs with the same category are compared; a masked record whose
    category is missing (suppressed) or absent from the original file meets none."""
    A, B = _files(rng)
    A[:, 2] = rng.integers(0, 4, A.shape[0])
    B[:, 2] = rng.integers(0, 5, B.shape[0])          # category 4 never occurs in A
    B[::7, 2] = np.nan                                   # suppressed
    cat = [False, False, True, False]
    cmp = prl.comparison(4, method="l", t=0.05, categorical=cat)
    lv = _brute_levels(A, B, "l", [np.atleast_1d(0.05)] * 4, cat)
    code = (lv * cmp.radix).sum(axis=2)                  # (n_b, n_a)
    same = B[:, 2][:, None] == A[:, 2][None, :]          # NaN equals nothing
    expect = np.bincount(code[same], minlength=cmp.n_patterns)
    cols = (0, 1, 2, 3)
    for runner in (Runner(), Runner(client)):
        Ap = runner.task(prl.prepare_side, A, cols, cmp, side="a")
        Bp = runner.task(prl.prepare_side, B, cols, cmp, side="b")
        for rows in [(8, 8), (57, 43)]:
            got, n = blocked_pattern_counts(runner, Ap, Bp, 57, 43, cmp, rows=rows,
                                            blocking=(2, 0))
            np.testing.assert_array_equal(_dense_counts(got, cmp.n_patterns), expect)
            assert n == same.sum()
    res = probabilistic_linkage(Runner(client), A, B, 57, 43, cols, method="l", t=0.05,
                                categorical=cat, blocking=(2, 0), dense_limit=5)
    assert "exact blocks on key 2" in res.info["blocking"] and res.flag == 1
    assert np.all(A[res.cols_a, 2] == B[res.rows_b, 2])  # every link within its block
    unlinkable = np.isnan(B[:, 2]) | (B[:, 2] == 4)
    assert not np.isin(np.flatnonzero(unlinkable), res.rows_b).any()


def test_exact_blocks_from_spec_option_and_cli(tmp_path, rng, client, run):
    from sdcdist.options import validate
    assert validate({"prl_blocking": "region"})["prl_blocking"] == "region"
    with pytest.raises(SdcInputError, match="prl_blocking"):
        validate({"prl_blocking": ["region", 0]})
    n = 120
    X = np.column_stack([rng.normal(size=(n, 2)), rng.integers(0, 3, n)])
    Y = X + np.c_[rng.normal(0, 0.05, (n, 2)), np.zeros(n)]
    cols = ["x", "y", "region"]
    pd = pytest.importorskip("pandas")
    pd.DataFrame(X, columns=cols).assign(id=np.arange(n)).to_csv(tmp_path / "a.csv",
                                                                 index=False)
    pd.DataFrame(Y, columns=cols).assign(id=np.arange(n)).to_csv(tmp_path / "b.csv",
                                                                 index=False)
    base = ["link", str(tmp_path / "a.csv"), str(tmp_path / "b.csv"), "--keys", "x,y,region",
            "--categorical", "region", "--id", "id", "--scheduler", client.scheduler.address]
    r = run(*base, "--block-on", "region", "--out", str(tmp_path / "p.parquet"))
    assert r.exit_code == 0, r.output
    assert "exact blocks on key 2" in r.output
    links = pd.read_parquet(tmp_path / "p.parquet")
    assert (X[links["row_a"], 2] == Y[links["row_b"], 2]).all()
    r = run(*base, "--block-on", "region:0", "--out", str(tmp_path / "q.parquet"))
    assert r.exit_code == 2 and "--block-on" in r.output and "prl_blocking" in r.output


@pytest.mark.parametrize("dense_limit", [5000, 10])
def test_pld_does_not_depend_on_record_order(census, dense_limit):
    """Tied optimal assignments are broken by the records' values, not their positions.

    On one key column nearly every weight ties; a solver that breaks ties by
    position pairs B row i with A row i whenever it can, which "re-identifies"
    most records of files kept in the same order and almost none of shuffled ones.
    """
    from sdcdist.parallel import Runner
    X = np.round(np.random.default_rng(4).normal(size=(240, 1)), 6)     # distinct values
    Y = MASKING["noise"](X, 0.01, rng=np.random.default_rng(5))
    runner = Runner(None)
    base = probabilistic_linkage(runner, X, Y, 240, 240, (0,), dense_limit=dense_limit,
                                 truth=np.arange(240))
    for seed in (1, 2):
        pb = np.random.default_rng(seed).permutation(240)
        pa = np.random.default_rng(seed + 10).permutation(240)
        truth = np.argsort(pa)[pb]                       # B row i is A row truth[i]
        got = probabilistic_linkage(runner, X[pa], Y[pb], 240, 240, (0,),
                                    dense_limit=dense_limit, truth=truth)
        assert got.correct == base.correct
        assert np.isclose(got.weights.sum(), base.weights.sum())


def _numpy_column_weight(d, tol, wl, rule):
    """Independent reading of one multi-level column's weights: tolerances ``tol`` (n, L)
    per pair, level weights ``wl`` (L + 1,). ``step``: the weight of the pair's level;
    ``linear``: np.interp through the levels' middles (the last level at its lower end),
    an exact-agreement level (tol 0) a point of its own."""
    n, L = tol.shape
    out = np.empty(n)
    for q in range(n):
        t = tol[q]
        lev = L if np.isnan(d[q]) else int(np.count_nonzero(d[q] > t))
        if rule == "step" or lev == L:
            out[q] = wl[lev]
            continue
        first = 1 if t[0] == 0 else 0
        if lev < first:
            out[q] = wl[0]
            continue
        lower = np.r_[0.0, t[:-1]]
        mids = np.r_[(lower + t) / 2, t[-1]][first:]
        out[q] = np.interp(d[q], mids, wl[first:])
    return out


@pytest.mark.parametrize("rule", ["linear", "step"])
@pytest.mark.parametrize("method,t", [("s", (0, 0.1, 0.25, 0.5, 1)), ("l", (0.02, 0.05, 0.2)),
                                      ("d", (0, 0.3))])
def test_level_weights_equal_independent_numpy(method, t, rule):
    """Every weight reader (pair by pair, dense rows, top-c) against numpy on random pairs,
    with repeated values, exact zeros, differences on a tolerance and NaN; a binary and a
    categorical column keep their own rules."""
    rng = np.random.default_rng(11)
    n_a, n_b, K = 60, 45, 4
    A = np.round(rng.normal(3, 2, (n_a, K)), 1)
    A[::5, 0] = 0.0
    B = np.round(A[rng.integers(0, n_a, n_b)] + rng.normal(0, 0.3, (n_b, K)), 1)
    B[::7] = A[:n_b:7]                              # exact agreement
    A[:, 3] = rng.integers(0, 3, n_a)
    B[:, 3] = rng.integers(0, 3, n_b)
    B[3, 1] = np.nan
    levels = [t, t, (t[-1],), ()]
    cat = [False, False, False, True]
    cmp = prl.comparison(K, method=method, t=levels[:3] + [(0.1,)], categorical=cat,
                         weights=rule)
    nl = cmp.n_levels
    m = [np.sort(rng.dirichlet(np.ones(x)))[::-1] for x in nl]
    u = [np.sort(rng.dirichlet(np.ones(x))) for x in nl]
    m[1] = rng.dirichlet(np.ones(nl[1]))            # not monotone: followed as it is
    wp = prl.weight_params(prl.EMResult(m, u, 0.01, 0.0, 1, True), cmp)
    cols = tuple(range(K))
    a = prl.prepare_side(A, cols, cmp, side="a")
    if method != "l":
        B[1, 0] = a["tol"][0, 0, 1]                 # A[0, 0] = 0: a difference on a tolerance
    b = prl.prepare_side(B, cols, cmp, side="b")
    ia, jb = np.meshgrid(np.arange(n_a), np.arange(n_b), indexing="xy")
    ia, jb = ia.ravel(), jb.ravel()                 # B-major: dense rows
    expect = np.zeros(ia.size)
    for k in cols:
        d = np.abs(a["v"][ia, k] - b["v"][jb, k])
        tol = a["tol"][ia, k, :nl[k] - 1]
        wl = np.log(m[k]) - np.log(u[k])
        if cat[k]:
            expect += np.where(d == 0, wl[0], wl[1])
        elif nl[k] == 2:                            # binary: d/l downweighting
            x = wl[0] - (wl[0] - np.log((1 - m[k][0]) / (1 - u[k][0]))) * d / tol[:, 0]
            expect += np.where(np.isnan(x), wl[1], np.maximum(x, np.log((1 - m[k][0])
                                                                        / (1 - u[k][0]))))
        else:
            expect += _numpy_column_weight(d, tol, wl, rule)
    assert method == "l" or np.any(a["tol"][ia, 0, 1] == np.abs(a["v"][ia, 0] - b["v"][jb, 0]))
    got = prl.pair_weights(a, b, ia, jb, cmp, wp)
    np.testing.assert_allclose(got, expect, rtol=1e-12, atol=1e-12)
    dense = prl.dense_weights(a, b, cmp, wp)
    np.testing.assert_array_equal(dense.ravel(), got)       # bit-identical readers
    top = prl.topc_block(a, b, cmp, wp, 5)
    best = np.sort(dense, axis=1)[:, ::-1][:, :5]
    np.testing.assert_array_equal(top["w"], best)
    if rule == "linear" and method == "s":
        # between two levels' middles the weight is strictly between their weights
        mids = 0.5 * (a["tol"][0, 0, 1] + a["tol"][0, 0, 2]), 0.5 * (a["tol"][0, 0, 2]
                                                                     + a["tol"][0, 0, 3])
        x = np.array([[mids[0] + 0.5 * (mids[1] - mids[0]) + A[0, 0]] + [np.nan] * 3])
        bx = prl.prepare_side(x, cols, cmp, side="b")
        w0 = prl.pair_weights(a, bx, [0], [0], cmp, wp)[0]
        wl = wp.w_level[0]
        rest = wp.w_level[1, -1] + wp.w_dis[2] + wp.w_level[3, 1]
        assert w0 - rest == pytest.approx(0.5 * (wl[2] + wl[3]), rel=1e-9)


def test_weight_rule_is_a_clear_input_error():
    with pytest.raises(SdcInputError, match="The 'prl_weights' option must be one of "
                                            "'linear', 'step'. Got 'cubic' instead."):
        prl.comparison(3, weights="cubic")
    X = np.random.default_rng(0).normal(size=(20, 2))
    with pytest.raises(SdcInputError, match="prl_weights"):
        measure(X, X, ["PLD"], options={"prl_weights": "cubic"})
    # the rule only matters for multi-level numeric columns
    assert list(prl.comparison(3, method="l", t=0.05, weights="linear").rule) == [0, 0, 0]
    assert list(prl.comparison(2, categorical=[True, False]).rule) == [1, 2]
    assert list(prl.comparison(2, weights="step").rule) == [1, 1]


def test_weight_rule_option_reaches_the_linkage(census):
    """prl_weights (spec option) and weights= (library) give the same linkage; on Census
    noise the two readings of the default levels link differently."""
    X = census.values[:, :5]
    cols = census.columns[:5]
    Y = MASKING["noise"](X, np.sqrt(0.1), rng=np.random.default_rng(1))
    n = X.shape[0]
    got = {}
    for rule in ("linear", "step"):
        r = measure(X, Y, ["PLD"], columns=cols, keysets=[list(cols)],
                    options={"prl_weights": rule})
        lk = probabilistic_linkage(Runner(), X, Y, n, n, tuple(range(5)), weights=rule)
        assert r["PLD"].value == pytest.approx(100.0 * lk.correct / n)
        got[rule] = lk
    assert not np.array_equal(got["linear"].true_weight, got["step"].true_weight)
    # the same EM fit: the rule changes how weights are read, not the pattern counts
    np.testing.assert_array_equal(got["linear"].fit.m[0], got["step"].fit.m[0])


def test_constrained_mstep_is_the_exact_constrained_maximum(rng):
    """The M-step of a column under cumulative m >= u is the constrained maximum of the
    expected complete-data log-likelihood (checked against SLSQP), the plain one when
    that is feasible, and the pooled frequencies only when every cut is active."""
    from scipy.optimize import minimize
    for trial in range(12):
        L = int(rng.integers(2, 6))
        a = rng.gamma(1.0, 1.0, L) * 50
        b = rng.gamma(1.0, 1.0, L) * 5000
        if trial % 3 == 0:
            a = a[::-1].copy()               # matches at the far levels: violated
        m, u = np.zeros(L), np.zeros(L)
        t = a + b
        active = _constrained_levels(a, b, L, m, u, a.sum(), b.sum(), t, t.sum())
        assert np.isclose(m.sum(), 1) and np.isclose(u.sum(), 1)
        assert np.all(np.cumsum(m)[:-1] >= np.cumsum(u)[:-1] - 1e-12)
        ref = _numpy_constrained_mstep(a, b)
        if not active:
            assert ref is not None
        if np.all(np.cumsum(a / a.sum())[:-1] >= np.cumsum(b / b.sum())[:-1]):
            assert not active
            np.testing.assert_allclose(m, a / a.sum(), rtol=1e-12)
            continue
        assert active
        np.testing.assert_allclose(m, ref[0], rtol=0, atol=1e-12)
        np.testing.assert_allclose(u, ref[1], rtol=0, atol=1e-12)

        def f(x):
            return -(a @ np.log(x[:L]) + b @ np.log(x[L:])) / (a.sum() + b.sum())
        cons = [{"type": "eq", "fun": lambda x: x[:L].sum() - 1},
                {"type": "eq", "fun": lambda x: x[L:].sum() - 1},
                {"type": "ineq", "fun": lambda x: np.cumsum(x[:L] - x[L:])[:-1]}]
        x0 = np.r_[t, t] / t.sum()
        opt = minimize(f, x0, constraints=cons, bounds=[(1e-12, 1)] * (2 * L), method="SLSQP",
                       options={"ftol": 1e-14, "maxiter": 500})
        assert f(np.r_[m, u]) <= opt.fun + 1e-9                # at least as good as SLSQP
        np.testing.assert_allclose(np.r_[m, u], opt.x, atol=1e-4)


def test_em_with_a_partly_active_constraint_converges_to_one_fixed_point():
    """A column whose matches sit at its second level violates m >= u at the first cut
    only: the EM keeps that cut active (m and u tie there) and the other levels free;
    plain EM, SQUAREM and the numpy reference reach the same point (all-or-nothing
    pooling of such a column made plain EM cycle on large files)."""
    rng = np.random.default_rng(11)
    K, n = 6, 800
    cmp = prl.comparison(K, t=(0.1, 0.25, 0.5, 1.0), method="s")
    m = rng.dirichlet([8, 3, 2, 1, 1], K)
    u = rng.dirichlet([1, 2, 3, 5, 20], K)
    m[0] = [0.02, 0.7, 0.15, 0.08, 0.05]
    u[0] = [0.1, 0.1, 0.2, 0.3, 0.3]
    lev_m = np.stack([rng.choice(5, n, p=m[k]) for k in range(K)], axis=1)
    lev_u = np.stack([rng.choice(5, n * n - n, p=u[k]) for k in range(K)], axis=1)
    codes, counts = np.unique(np.concatenate([lev_m, lev_u]) @ cmp.radix, return_counts=True)
    cap = 1.0 / n
    fast = prl.em((codes, counts), cmp, p_start=cap, p_max=cap)
    plain = prl.em((codes, counts), cmp, p_start=cap, p_max=cap, accelerate=False)
    rm, ru, rp, it, ok = _numpy_em(codes, counts, cmp.n_levels, cmp.radix, cap, cap)
    assert fast.converged and plain.converged and ok and fast.constrained > 0
    assert fast.iterations < plain.iterations
    for f in (fast, plain):
        assert abs(f.p - rp) < 1e-8
        for k in range(K):
            np.testing.assert_allclose(f.m[k], rm[k], rtol=0, atol=1e-8)
            np.testing.assert_allclose(f.u[k], ru[k], rtol=0, atol=1e-8)
    cm, cu = np.cumsum(fast.m[0])[:-1], np.cumsum(fast.u[0])[:-1]
    assert abs(cm[0] - cu[0]) < 1e-8 and np.all(cm[1:] > cu[1:] + 1e-3)
