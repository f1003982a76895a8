"""Probabilistic record linkage: kernels vs brute force, PLD / PLD20 on reference data (the
EM fit: tests/test_prl_em.py)."""

import threading

import numpy as np
import pytest

from sdcdist.data import from_array
from sdcdist.errors import SdcInputError
from sdcdist.linkage import prl
from sdcdist.linkage import truth_from_ids
from sdcdist.linkage.link import link_files
from sdcdist.linkage.prl import PRLSettings, blocked_pattern_counts, probabilistic_linkage
from sdcdist.linkage.prl.comparison import column_sd
from sdcdist.masking import REGISTRY as MASKING
from sdcdist.metrics import measure
from sdcdist.parallel import Runner


def _settings(**options):
    """PRL settings from registry options named without ``prl_`` (``em`` is ``prl_em``)."""
    return PRLSettings.from_options({"prl_" + k: v for k, v in options.items()})


def _dense_counts(sparse, n_patterns):
    """Sparse pattern counts as a dense vector over all codes (small pattern spaces)."""
    out = np.zeros(int(n_patterns), dtype=np.int64)
    out[np.asarray(sparse[0], dtype=np.int64)] = sparse[1]
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
    the sparse (sorted-codes) kernel equals the dense-histogram kernel where both fit."""
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
    monkeypatch.setattr(prl.patterns, "DENSE_PATTERN_SPACE", 1)       # force the sparse kernel
    hashed = prl.pattern_counts(a5, b5, small)
    np.testing.assert_array_equal(dense[0], hashed[0])
    np.testing.assert_array_equal(dense[1], hashed[1])
    np.testing.assert_array_equal(_dense_counts(dense, small.n_patterns),
                                  np.bincount((lv[:, :, :5] * small.radix).sum(axis=2).ravel(),
                                              minlength=small.n_patterns))
    fit = prl.em(got, cmp, p_start=1 / 70, p_max=1 / 70)    # EM on the sparse counts
    assert len(fit.m) == 13 and all(x.size == 4 for x in fit.m)


@pytest.mark.parametrize("value, holes", [(0.1, ()), (1 / 3, ()), (0.1, (4, 71, 998))])
def test_s_tolerances_of_a_constant_column_whose_sd_is_not_zero(value, holes):
    """Method s: a column constant in A is compared in units of 1, as one of copies of 0.5
    (sd exactly 0) always was; copies of 0.1 (computed sd about 1e-17) had tolerances of
    1e-18, so that a masked value one rounding away from 0.1 already disagreed."""
    rng = np.random.default_rng(8)
    A = np.c_[rng.standard_normal(1000), np.full(1000, value)]
    A[list(holes), 1] = np.nan
    assert column_sd(A)[1] > 0                      # what the sd test accepted
    cmp = prl.comparison(2)                             # the default: s, 0/0.1/0.25/0.5/1
    tol = prl.prepare_side(A, (0, 1), cmp, side="a")["tol"]
    A5 = A.copy()
    A5[:, 1] = np.where(np.isnan(A[:, 1]), np.nan, 0.5)
    assert tol.tobytes() == prl.prepare_side(A5, (0, 1), cmp, side="a")["tol"].tobytes()
    assert tol[0, 1].tolist() == cmp.flat_tolerances[1].tolist() == [0.0, 0.1, 0.25, 0.5, 1.0]
    # a column one ulp from constant is not constant: its own (tiny) sd is its unit
    A[:, 1] = np.where(np.arange(1000) % 2 == 0, 0.1, np.nextafter(0.1, 1.0))
    sd = column_sd(A)[1]
    assert 0 < sd < 1e-16
    assert prl.prepare_side(A, (0, 1), cmp, side="a")["tol"][0, 1, 1] == 0.1 * sd


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
        sparse = probabilistic_linkage(runner, A, B, 90, 70, (0, 1, 3), settings=_settings(
            dense_limit=10, top_c=90, block_rows=rows, unmatched=how))
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
    with pytest.raises(SdcInputError, match="Linkage must have at least 1 key column"):
        link_files(a, b, [])
    with pytest.raises(SdcInputError, match="must have at least 1 key column"):
        probabilistic_linkage(Runner(), A, B, 30, 20, ())
    for t in (0.0, -0.1, (0.1, 0.05)):
        with pytest.raises(SdcInputError, match="'prl_t' option"):
            link_files(a, b, ["x", "y"], settings=_settings(t=t))
    with pytest.raises(SdcInputError, match="must have at least 2 records. Got 1 instead"):
        probabilistic_linkage(Runner(), A, B[:1], 30, 1, (0, 1))
    with pytest.raises(SdcInputError, match="must have at least 2 records. Got 1 instead"):
        measure(A, B[:1], ["PLD"], keysets=[["V1", "V2"]])
    with pytest.raises(SdcInputError, match="'prl_method' option"):
        link_files(a, b, ["x"], settings=_settings(method="q"))
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
    assert "PLD" in res.output and "PLD_best" in res.output
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
    res = probabilistic_linkage(Runner(client), A, B, 57, 43, cols,
                                settings=_settings(method="l", t=0.05, dense_limit=5),
                                categorical=cat, blocking=(2, 0))
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
    base = probabilistic_linkage(runner, X, Y, 240, 240, (0,),
                                 settings=_settings(dense_limit=dense_limit),
                                 truth=np.arange(240))
    for seed in (1, 2):
        pb = np.random.default_rng(seed).permutation(240)
        pa = np.random.default_rng(seed + 10).permutation(240)
        truth = np.argsort(pa)[pb]                       # B row i is A row truth[i]
        got = probabilistic_linkage(runner, X[pa], Y[pb], 240, 240, (0,),
                                    settings=_settings(dense_limit=dense_limit), truth=truth)
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
        lk = probabilistic_linkage(Runner(), X, Y, n, n, tuple(range(5)),
                                   settings=_settings(weights=rule))
        assert r["PLD"].value == pytest.approx(100.0 * lk.correct / n)
        got[rule] = lk
    assert not np.array_equal(got["linear"].true_weight, got["step"].true_weight)
    # the same EM fit: the rule changes how weights are read, not the pattern counts
    np.testing.assert_array_equal(got["linear"].fit.m[0], got["step"].fit.m[0])


def test_merge_counts_equals_counting_the_concatenation():
    """merge_counts (sparse_counts of the parts together: a stable sort, counts summed per
    code) gives each code's total over all parts, counted here one entry at a time:
    increasing codes, zero sums dropped, int64."""
    for seed in range(300):
        r = np.random.default_rng(seed)
        parts = []
        for _ in range(int(r.integers(2, 6))):
            codes = r.integers(0, 40, int(r.integers(0, 25)))
            if r.random() < 0.5:
                codes = np.unique(codes)                # sparse_counts form: increasing
            parts.append((codes, r.integers(-3, 4, codes.size)))
        got = prl.merge_counts(*parts)
        total: dict[int, int] = {}
        for codes, counts in parts:
            for code, count in zip(codes.tolist(), counts.tolist()):
                total[code] = total.get(code, 0) + count
        kept = sorted(code for code, count in total.items() if count != 0)
        want = (np.array(kept, dtype=np.int64), np.array([total[k] for k in kept], dtype=np.int64))
        for g, w in zip(got, want):
            assert g.dtype == np.int64
            np.testing.assert_array_equal(g, w)


def _brute_best_link(X, Y, res, weights):
    """PLD_best by brute force: every pair's weight one at a time, rounded to the nearest
    multiple of 2**-24 nats; each B record counts 1/t when its true record (B row i is A row
    i) is among the t A records at its best rounded weight."""
    from sdcdist.linkage.prl.weights import weight_params
    cmp = prl.comparison(X.shape[1], prl.DEFAULTS.with_(weights=weights))
    a = prl.prepare_side(X, tuple(range(X.shape[1])), cmp, side="a")
    b = prl.prepare_side(Y, tuple(range(Y.shape[1])), cmp, side="b")
    wp = weight_params(res.fit, cmp)
    hits = 0.0
    for j in range(Y.shape[0]):
        w = np.array([prl.pair_weights(a, b, np.array([i]), np.array([j]), cmp, wp)[0]
                      for i in range(X.shape[0])])
        g = np.round(w * 2.0**24)
        best = np.flatnonzero(g == g.max())
        hits += (1.0 / best.size) if j in best else 0.0
    return hits


@pytest.mark.parametrize("weights", ["step", "linear"])
def test_pld_best_equals_brute_force_with_every_tie(weights):
    """Best-link scoring on a small tie-heavy file (integer keys, duplicated records, step
    weights tie across distinct records): the dense path, the sparse path whose top-c
    candidates all tie (ties recounted over all pairs) and shuffled files give the brute
    force's 1/t count; PLD itself is the 1-1 assignment's."""
    rng = np.random.default_rng(3)
    n_a, n_b = 40, 30
    X = rng.integers(0, 4, size=(n_a, 3)).astype(float)
    X[5:10] = X[0]                                   # six identical original records
    Y = X[:n_b] + rng.integers(-1, 2, size=(n_b, 3)) * (rng.random((n_b, 3)) < 0.3)
    runner = Runner(None)
    kw = dict(settings=_settings(weights=weights), truth=np.arange(n_b))
    dense = probabilistic_linkage(runner, X, Y, n_a, n_b, (0, 1, 2), **kw)
    want = _brute_best_link(X, Y, dense, weights)
    assert 0 < want < n_b and want != round(want)             # some ties split the credit
    assert dense.correct_best == pytest.approx(want, abs=1e-12)
    sparse = probabilistic_linkage(runner, X, Y, n_a, n_b, (0, 1, 2), truth=np.arange(n_b),
                                   settings=_settings(weights=weights, dense_limit=5, top_c=3))
    assert sparse.info["best_ties_recounted"] > 0
    assert sparse.correct_best == pytest.approx(want, abs=1e-12)
    pa, pb = np.random.default_rng(1).permutation(n_a), np.random.default_rng(2).permutation(n_b)
    truth = np.argsort(pa)[pb]
    for dl in (5000, 5):
        got = probabilistic_linkage(runner, X[pa], Y[pb], n_a, n_b, (0, 1, 2), truth=truth,
                                    settings=_settings(weights=weights, dense_limit=dl, top_c=3))
        assert got.correct_best == pytest.approx(want, abs=1e-12)


def test_pld_best_metric_beside_pld(census):
    """PLD_best is registered beside PLD, reads the same linkage and counts best links;
    PLD is still the 1-1 assignment's share."""
    X = census.values[:300, :5].astype(float)
    cols = list(census.columns[:5])
    Y = MASKING["noise"](X, np.sqrt(0.1), rng=np.random.default_rng(1))
    got = measure(X, Y, ["PLD", "PLD_best"], columns=cols, keysets=[cols])
    res = probabilistic_linkage(Runner(None), X, Y, 300, 300, tuple(range(5)))
    assert got["PLD"].value == pytest.approx(100 * res.correct / 300, abs=1e-12)
    assert got["PLD_best"].value == pytest.approx(100 * res.correct_best / 300, abs=1e-12)
    assert got["PLD_best"].value != got["PLD"].value
    assert got["PLD_best"].info["per_keyset_info"][0]["em_fit"] == "joint"


def test_pld_leaves_a_named_constant_key_out_with_a_note():
    from sdcdist.metrics import measure
    from sdcdist.metrics.risk.prl import em_note
    rng = np.random.default_rng(0)
    X = np.column_stack([rng.normal(size=30), rng.normal(size=30), np.full(30, 2021.0)])
    Y = X + np.column_stack([rng.normal(scale=0.3, size=(30, 2)), np.zeros(30)])
    a = measure(X, Y, ["PLD", "PLD20"], columns=["A", "B", "C"], keysets=[["A", "B", "C"]])
    b = measure(X, Y, ["PLD", "PLD20"], columns=["A", "B", "C"], keysets=[["A", "B"]])
    for name in ("PLD", "PLD20"):
        assert a[name].value == b[name].value
        assert a[name].info["per_keyset_info"][0]["constant_keys_left_out"] == ["C"]
        assert "constant key column(s) ['C'] left out" in em_note(name, a[name])
        assert a[name].info["per_keyset_info"][0]["em_loglik"] == \
            b[name].info["per_keyset_info"][0]["em_loglik"]
    with pytest.raises(SdcInputError, match="are constant in the original file \\(every key of the key set\\)"):
        measure(X, Y, ["PLD"], columns=["A", "B", "C"], keysets=[["C"]])


def test_plain_em_at_its_limit_says_what_to_do():
    from sdcdist.metrics import measure
    from sdcdist.metrics.risk.prl import em_note
    rng = np.random.default_rng(0)
    X = rng.normal(size=(30, 2))
    Y = X + rng.normal(scale=0.3, size=(30, 2))
    for acc, words in ((False, "plain EM (prl_em accelerate: false) converges linearly"),
                       (True, "raise prl_em max_iter")):
        r = measure(X, Y, ["PLD"], columns=["A", "B"], keysets=[["A", "B"]],
                    options={"prl_em": {"max_iter": 3, "accelerate": acc}})["PLD"]
        assert r.flag and words in em_note("PLD", r)


def test_pld_best_with_exact_blocks_counts_ties_within_the_block():
    """Under blocking, best link is over the compared pairs only: the brute force over the
    pairs of each block (ties recounted there when all top-c candidates tie)."""
    from sdcdist.linkage.prl.weights import weight_params
    rng = np.random.default_rng(5)
    n_a, n_b = 40, 30
    X = rng.integers(0, 3, size=(n_a, 3)).astype(float)
    X[:, 0] = np.arange(n_a) % 4                                  # the block key
    Y = X[:n_b] + np.c_[np.zeros(n_b), rng.integers(-1, 2, size=(n_b, 2))
                        * (rng.random((n_b, 2)) < 0.3)]
    res = probabilistic_linkage(Runner(None), X, Y, n_a, n_b, (0, 1, 2),
                                settings=_settings(weights="step", dense_limit=5, top_c=2),
                                categorical=[True, False, False], blocking=(0, 0),
                                truth=np.arange(n_b))
    cmp = prl.comparison(3, prl.DEFAULTS.with_(weights="step"),
                         categorical=[True, False, False])
    a = prl.prepare_side(X, (0, 1, 2), cmp, side="a")
    b = prl.prepare_side(Y, (0, 1, 2), cmp, side="b")
    wp = weight_params(res.fit, cmp)
    want = 0.0
    for j in range(n_b):
        ia = np.flatnonzero(X[:, 0] == Y[j, 0])
        g = np.round(prl.pair_weights(a, b, ia, np.full(ia.size, j), cmp, wp) * 2.0**24)
        best = ia[g == g.max()]
        want += (1.0 / best.size) if j in best else 0.0
    assert res.info["best_ties_recounted"] > 0 and want != round(want)
    assert res.correct_best == pytest.approx(want, abs=1e-12)


def test_identification_check_starts_once_the_auction_has_set_its_prices(rng, monkeypatch,
                                                                          client):
    """In one process the identification check waits for the dense assignment's auction
    (which uses every core) and runs beside the exact solve after it; the same result as
    with the check beside the whole assignment (run with a client it starts at once)."""
    import sdcdist.linkage.assignment.auction as auction
    import sdcdist.linkage.prl.driver as driver
    monkeypatch.setattr(auction, "AUCTION_MIN", 50)          # the auction on 120 records
    events = []
    start, check = auction.auction_start, driver.identify
    monkeypatch.setattr(auction, "auction_start",
                        lambda *a, **k: (events.append("auction"), start(*a, **k),
                                         events.append("prices"))[1])
    monkeypatch.setattr(driver, "identify",
                        lambda *a: (events.append("check"), check(*a))[1])
    A = rng.normal(size=(120, 4))
    B = A + rng.normal(scale=0.3, size=A.shape)
    out = probabilistic_linkage(Runner(None), A, B, 120, 120, (0, 1, 2, 3))
    assert events == ["auction", "prices", "check"]
    assert out.info["em_identified"] is not None
    # the check beside the whole assignment (the gate opened at once): the same linkage
    along = driver.alongside
    monkeypatch.setattr(driver, "alongside",
                        lambda side, main, **kw: along(side, lambda go: (go(), main(go))[1],
                                                       **kw))
    ref = probabilistic_linkage(Runner(None), A, B, 120, 120, (0, 1, 2, 3))
    assert np.array_equal(ref.cols_a, out.cols_a) and np.array_equal(ref.weights, out.weights)
    assert (ref.correct, ref.info["em_info_ratio"]) == (out.correct, out.info["em_info_ratio"])
    # with a client the assignment runs on a worker: the check starts before it is sent
    monkeypatch.setattr(driver, "alongside", along)
    checked = threading.Event()
    monkeypatch.setattr(driver, "identify", lambda *a: (checked.set(), check(*a))[1])
    remote = Runner(client)
    call = remote.call
    sent = []
    remote.call = lambda fn, *a, **k: (fn.__name__ == "_dense_assign"
                                       and sent.append(checked.wait(20)), call(fn, *a, **k))[1]
    far = probabilistic_linkage(remote, A, B, 120, 120, (0, 1, 2, 3))
    assert sent == [True]
    assert np.array_equal(far.cols_a, out.cols_a) and far.correct == out.correct
