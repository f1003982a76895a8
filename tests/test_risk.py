"""Risk metrics: brute-force references, hand-computed cases, the papers' trends, bad input."""

from __future__ import annotations

import itertools

import numpy as np
import pytest
from scipy.stats import rankdata

from sdcdist.errors import SdcInputError
from sdcdist.masking import REGISTRY as MASKING
from sdcdist.metrics import measure
from sdcdist.metrics.content import row_hashes
from sdcdist.metrics.risk.interval import interval_counts
from sdcdist.metrics.risk.linkage import crl_links

LINKAGE = ["DLD", "DLD2", "DRL2", "PDL", "RR"]


# -- brute-force references (whole pair matrices, record by record) --------------------

def _colsum(Q, C, f):
    D = np.zeros((len(Q), len(C)))
    for j in range(Q.shape[1]):
        D += f(Q[:, j, None] - C[None, :, j])
    return D


def _expected_hits(D, truth, rank):
    """Expected share of rows whose true column is at position ``rank`` under random ties."""
    hits = 0.0
    for i, t in enumerate(truth):
        if t < 0:
            continue
        less = np.count_nonzero(D[i] < D[i, t])
        eq = np.count_nonzero(D[i] == D[i, t])
        if less <= rank < less + eq:
            hits += 1 / eq
    return 100.0 * hits / len(truth)


def _z(A):
    return (A - A.mean(axis=0)) / A.std(axis=0, ddof=1)


def _ranks(A, n_ref):
    R = rankdata(A, method="average", axis=0)
    return R if len(A) == n_ref else (R - 0.5) * (n_ref / len(A)) + 0.5


def reference(name, X, Y, keys, truth):
    """One key set (positions), masked->original truth (-1 = absent)."""
    A, B = X[:, keys], Y[:, keys]
    inv = np.full(len(X), -1)
    inv[truth[truth >= 0]] = np.flatnonzero(truth >= 0)
    if name in ("DLD", "DLD2"):
        D = _colsum(_z(B), _z(A), np.square)
        return _expected_hits(D, truth, 0 if name == "DLD" else 1)
    if name == "DRL2":
        sd = np.array([np.abs(A[:, j, None] - B[None, :, j]).std() for j in range(len(keys))])
        return _expected_hits(_colsum(B / sd, A / sd, np.abs), truth, 0)
    RA, RB = _ranks(A, len(X)), _ranks(B, len(X))
    if name == "PDL":
        D = np.zeros((len(X), len(Y)))
        for j in range(len(keys)):
            D = np.maximum(D, np.abs(RA[:, j, None] - RB[None, :, j]))
        return _expected_hits(D, inv, 0)
    if name == "RR":
        return float(np.mean(np.log1p(np.sqrt(_colsum(RA, RB, np.square).min(axis=1)))))
    raise KeyError(name)


def _datasets(rng):
    n = 40
    X = rng.standard_normal((n, 3)) * [1, 10, 100]
    yield "random", X, X + 0.4 * rng.standard_normal(X.shape) * [1, 10, 100], None
    T = rng.integers(0, 4, size=(n, 3)).astype(float)
    yield "ties", T, T + rng.integers(-1, 2, size=T.shape), None
    Xo = rng.standard_normal((50, 3))
    truth = rng.permutation(50)[:36]
    truth[::6] = -1                      # some released records are not in the intruder file
    Ym = Xo[np.maximum(truth, 0)] + 0.5 * rng.standard_normal((36, 3))
    yield "sizes", Xo, Ym, truth


@pytest.mark.parametrize("options", [{"block_rows": (9, 16)}, {"block_rows": (64, 30)},
                                     {"linkage_method": "brute", "block_rows": (13, 17)}, {}])
def test_linkage_metrics_equal_brute_force(rng, client, options):
    keysets = [["V1"], ["V1", "V2"], ["V1", "V2", "V3"]]
    for label, X, Y, truth in _datasets(rng):
        t = truth if truth is not None else np.arange(len(Y))
        here = measure(X, Y, LINKAGE, keysets=keysets, truth=truth, options=options)
        there = measure(X, Y, LINKAGE, keysets=keysets, truth=truth, options=options,
                        client=client)
        for name in LINKAGE:
            assert here[name] == there[name], (label, name)
            ref = [reference(name, X, Y, list(range(len(k))), t) for k in keysets]
            assert here[name].per_keyset == pytest.approx(ref, abs=1e-9), (label, name)


def test_rank_metrics_use_all_columns_unless_key_sets_are_named(rng, client):
    import pickle

    from sdcdist.metrics import REGISTRY, default_keysets
    X = rng.standard_normal((60, 9)) * np.arange(1, 10)
    Y = X + 0.6 * rng.standard_normal(X.shape) * np.arange(1, 10)
    t = np.arange(60)
    cols = [f"V{j + 1}" for j in range(9)]
    assert {n for n, m in REGISTRY.items() if m.keyset_default == "all"} == {"RR", "PDL"}
    default = measure(X, Y, ["RR", "PDL", "DLD"])
    for name in ("RR", "PDL"):
        # one key set of all 9 columns (the default prefixes stop at 7)
        assert default[name].per_keyset is None
        assert default[name].value == pytest.approx(reference(name, X, Y, list(range(9)), t),
                                                    abs=1e-9)
        assert default[name].info["keys"] == cols
    assert len(default["DLD"].per_keyset) == 7
    # the default prefixes passed on purpose behave as no key sets; on a cluster too
    ks = default_keysets(cols)
    assert pickle.loads(pickle.dumps(ks)).given is False
    assert measure(X, Y, ["RR", "PDL", "DLD"], keysets=ks, client=client) == default
    # named key sets (even the same prefixes) are used as given, averaged
    named = measure(X, Y, ["RR", "PDL", "DLD"], keysets=[list(k) for k in ks])
    assert named["DLD"] == default["DLD"]
    for name in ("RR", "PDL"):
        ref = [reference(name, X, Y, list(range(len(k))), t) for k in ks]
        assert named[name].per_keyset == pytest.approx(ref, abs=1e-9)
        assert named[name].value == pytest.approx(np.mean(ref))
    # key columns declared by the caller: all of them, not the 7 first
    keys = cols[::-1]
    by_keys = measure(X, Y, ["RR"], keysets=default_keysets(cols, keys))["RR"]
    assert by_keys.info["keys"] == keys and by_keys.per_keyset is None
    assert by_keys.value == pytest.approx(default["RR"].value, abs=1e-12)


def test_linkage_results_do_not_depend_on_blocks(rng):
    _, X, Y, _ = list(_datasets(rng))[1]
    base = measure(X, Y, LINKAGE)
    for opts in ({"block_rows": (5, 3)}, {"linkage_method": "brute", "block_rows": (70, 9)}):
        assert measure(X, Y, LINKAGE, options=opts) == base


def test_dld_identity_and_permutation(rng):
    X = rng.standard_normal((500, 4))
    assert measure(X, X, ["DLD", "ID1"], keysets=[["V1", "V2", "V3", "V4"]])["DLD"].value == 100
    assert measure(X, X, ["ID1"])["ID1"].value == 100
    perm = rng.permutation(500)
    dld = measure(X, X[perm], ["DLD"], keysets=[["V1", "V2", "V3", "V4"]])["DLD"].value
    assert dld == 100 * np.count_nonzero(perm == np.arange(500)) / 500
    assert dld <= 100 * 5 / 500              # about 100/n (one fixed point expected)


# -- GDBRL ---------------------------------------------------------------------------

def test_gdbrl_is_the_optimal_assignment(rng):
    X = rng.standard_normal((7, 2))
    Y = X + 0.8 * rng.standard_normal(X.shape)
    D = np.sqrt(_colsum(_z(Y), _z(X), np.square))
    best = min(itertools.permutations(range(7)), key=lambda p: D[np.arange(7), p].sum())
    expect = 100 * np.count_nonzero(np.array(best) == np.arange(7)) / 7
    res = measure(X, Y, ["GDBRL"], keysets=[["V1", "V2"]])["GDBRL"]
    assert res.value == pytest.approx(expect) and res.flag == 0


def test_gdbrl_sparse_is_flagged_and_agrees_with_enough_candidates(rng, client):
    X = rng.standard_normal((120, 3))
    Y = X + 0.5 * rng.standard_normal(X.shape)
    # (one key column would have many equally optimal assignments: sums of |a - b|)
    ks = [["V1", "V2"], ["V1", "V2", "V3"]]
    dense = measure(X, Y, ["GDBRL"], keysets=ks)["GDBRL"]
    sparse = measure(X, Y, ["GDBRL"], client=client, keysets=ks,
                     options={"gdbrl_dense_max": 50, "gdbrl_candidates": 120})["GDBRL"]
    assert dense.flag == 0 and sparse.flag == 1
    assert sparse.per_keyset == pytest.approx(dense.per_keyset)
    few = measure(X, Y, ["GDBRL"], options={"gdbrl_dense_max": 50, "gdbrl_candidates": 3})
    assert few["GDBRL"].flag == 1 and 0 <= few["GDBRL"].value <= 100


def test_gdbrl_different_sizes_uses_truth(rng):
    from scipy.optimize import linear_sum_assignment
    X = rng.standard_normal((40, 2))
    truth = rng.permutation(40)[:30]
    truth[::5] = -1
    Y = X[np.maximum(truth, 0)] + 0.2 * rng.standard_normal((30, 2))
    r, c = linear_sum_assignment(np.sqrt(_colsum(_z(Y), _z(X), np.square)))
    expect = 100 * np.count_nonzero(truth[r] == c) / 30
    res = measure(X, Y, ["GDBRL"], keysets=[["V1", "V2"]], truth=truth)["GDBRL"]
    assert res.value == expect and 0 < expect < 100
    assert (res.info["matched"], res.info["unmatched"]) == (24, 6)


def test_a_truth_matching_no_record_is_refused(rng):
    """An all -1 truth made every linkage risk 0 with no error (issue 14, item 1)."""
    X = rng.standard_normal((20, 2))
    with pytest.raises(SdcInputError, match="matches no record"):
        measure(X, X, ["DLD", "IL1s"], truth=np.full(20, -1))
    with pytest.raises(SdcInputError, match="one row of the original file per masked record"):
        measure(X, X, ["DLD"], truth=np.zeros(3, dtype=int))
    res = measure(X, X, ["DLD", "IL1s"], truth=np.arange(20))
    assert res["DLD"].info["matched"] == 20 and "matched" not in res["IL1s"].info


# -- CRL -----------------------------------------------------------------------------

def test_crl_hand_computed():
    A = np.array([[1.0], [3.0], [2.0]])
    rng = np.random.default_rng(0)
    # negative correlation: B sorted descending
    assert crl_links(A, np.array([[30.0], [10.0], [20.0]]), np.array([[-1.0]]), rng).tolist() \
        == [0, 1, 2]
    # imperfect positive correlation: A ascending 0,2,1 against B ascending 0,1,2
    assert crl_links(A, np.array([[10.0], [20.0], [30.0]]), np.array([[0.5]]), rng).tolist() \
        == [0, 2, 1]
    # ties in the best pair are broken by the next pair (A's 2nd column, B's 1st)
    A2 = np.array([[1.0, 5.0], [1.0, 4.0], [2.0, 0.0]])
    B2 = np.array([[7.0, 0.0], [7.0, 1.0], [9.0, 2.0]])
    corr = np.array([[0.1, 0.9], [0.5, 0.2]])   # pairs by |corr|: (0,1), (1,0), (0,0), (1,1)
    # A by col 0 then col 1: rows 1 (1,4), 0 (1,5), 2; B by col 1: rows 0, 1, 2
    assert crl_links(A2, B2, corr, rng).tolist() == [1, 0, 2]


def test_crl_without_shared_attributes(census):
    X = census.values
    cols = list(census.columns)
    ext, rel = [cols[3], cols[11]], [cols[6], cols[12]]     # v4, v12 vs v7, v13 [DTMS Table 2]
    Y = X[:, [6, 12]] + 0.01 * X[:, [6, 12]].std(axis=0) * np.random.default_rng(1) \
        .standard_normal((len(X), 2))
    opts = {"crl_external": ext, "crl_released": rel}
    res = measure(X, Y, ["CRL"], columns=cols, masked_columns=rel, options=opts, seed=3)["CRL"]
    assert 0 < res.value < 100
    # worst-case snooper on an unmasked copy of the same attributes re-identifies everyone
    same = measure(X, X[:, [3, 11]], ["CRL"], columns=cols, masked_columns=ext,
                   options={"crl_external": ext, "crl_released": ext})["CRL"]
    assert same.value == 100
    with pytest.raises(SdcInputError, match="both"):
        measure(X, Y, ["CRL"], columns=cols, masked_columns=rel,
                options={"crl_external": ext})
    with pytest.raises(SdcInputError, match="Unknown CRL column .nope. in the masked file"):
        measure(X, Y, ["CRL"], columns=cols, masked_columns=rel,
                options={"crl_external": ext, "crl_released": ["nope"]})


def test_crl_reference_on_keysets(rng):
    X = rng.standard_normal((50, 2))
    Y = X + 0.3 * rng.standard_normal(X.shape)
    res = measure(X, Y, ["CRL"], keysets=[["V1"]], seed=5)["CRL"]
    order_a, order_b = np.argsort(X[:, 0]), np.argsort(Y[:, 0])   # continuous: no ties
    links = np.empty(50, int)
    links[order_a] = order_b
    assert res.value == 100 * np.count_nonzero(links == np.arange(50)) / 50


# -- interval disclosure -------------------------------------------------------------

def test_id1_id2_sdid_brute_force(rng):
    X = rng.integers(0, 6, size=(40, 3)).astype(float)
    Y = X + rng.integers(-2, 3, size=X.shape)
    n = 40
    id1 = id2 = 0.0
    for p in range(1, 11):
        h = int(np.floor(p * n / 100))
        inside1 = inside2 = 0
        for j in range(3):
            # ties in content order: by a hash of the record's (original, masked) values
            tie = row_hashes(np.column_stack([X[:, j], Y[:, j]]))
            s = sorted(range(n), key=lambda i: (Y[i, j], int(tie[i])))
            rank = {i: r for r, i in enumerate(s)}
            sd = Y[:, j].std(ddof=1)
            for i in range(n):
                lo = Y[s[max(rank[i] - h, 0)], j]
                hi = Y[s[min(rank[i] + h, n - 1)], j]
                inside1 += lo <= X[i, j] <= hi
                inside2 += Y[i, j] - p * sd / 100 <= X[i, j] <= Y[i, j] + p * sd / 100
        id1 += 100 * inside1 / (3 * n) / 10
        id2 += 100 * inside2 / (3 * n) / 10
    out = measure(X, Y, ["ID1", "ID2"], options={"chunk_rows": 7})
    assert out["ID1"].value == pytest.approx(id1)
    assert out["ID2"].value == pytest.approx(id2)
    X = rng.standard_normal((60, 3))
    Y = X + 0.03 * rng.standard_normal(X.shape)
    k = 0.05 * Y.std(axis=0, ddof=1)
    sdid = np.mean(np.all(np.abs(X - Y) <= k, axis=1))
    assert 0 < sdid < 1
    assert measure(X, Y, ["SDID"], options={"chunk_rows": 7})["SDID"].value == sdid


def test_sdid_hand_computed():
    X = np.array([[1.0, 10.0], [2.0, 20.0], [3.0, 30.0], [4.0, 40.0]])
    Y = X.copy()
    Y[1, 0] += 0.1        # s'_1 ≈ 1.29, k s' ≈ 0.065 < 0.1: record 2 is out
    Y[2, 1] += 0.5        # s'_2 ≈ 12.9, k s' ≈ 0.65 > 0.5: record 3 stays in
    assert measure(X, Y, ["SDID"])["SDID"].value == 0.75


def test_interval_sd_is_the_same_float_in_every_row_order():
    """ID2's and SDID's sd of the masked column is summed over its sorted values: a plain sd
    over the rows in file order moves in its last bit with the order (it does on this file),
    and with it which values fall on an interval's bound."""
    rng = np.random.default_rng(2)
    X = rng.normal(size=(50, 1)) * 1e3 + 1 / 3
    Y = X + rng.normal(size=X.shape)
    ps = tuple(float(p) for p in range(1, 11))
    ref = interval_counts(0, 0, X, Y, ps)
    plain_moved = 0
    for _ in range(10):
        p = rng.permutation(50)
        plain_moved += Y[p, 0].std(ddof=1) != Y[:, 0].std(ddof=1)
        got = interval_counts(0, 0, X[p], Y[p], ps)
        assert got["sd"].tobytes() == ref["sd"].tobytes()
        assert np.array_equal(got["id2"], ref["id2"])
    assert plain_moved > 0
    assert ref["sd"][0] == pytest.approx(Y[:, 0].std(ddof=1), rel=1e-14)


# -- the papers' trends --------------------------------------------------------------

@pytest.mark.slow
@pytest.mark.parametrize("method,params", [("rankswap", [1, 5, 10, 15, 20]),
                                           ("noise", [0.01, 0.05, 0.1, 0.15, 0.2])])
def test_census_dld_decreases_with_masking_strength(census, client, method, params):
    X = census.values
    means = []
    for p in params:
        vals = [measure(X, MASKING[method](X, p, rng=np.random.default_rng(r)), ["DLD"],
                        columns=census.columns, client=client)["DLD"].value for r in range(3)]
        means.append(np.mean(vals))
    assert all(a > b for a, b in zip(means, means[1:])), means


# -- bad input -----------------------------------------------------------------------

def test_bad_inputs(rng):
    X = rng.standard_normal((30, 3))
    with pytest.raises(SdcInputError, match="share no key columns"):
        measure(X, X, ["DLD"], columns=["a", "b", "c"], masked_columns=["x", "y", "z"])
    with pytest.raises(SdcInputError, match="Unknown key set column .c. in the masked file"):
        measure(X, X[:, :2], ["DLD"], columns=["a", "b", "c"], masked_columns=["a", "b"],
                keysets=[["a", "c"]])
    with pytest.raises(SdcInputError, match="empty key set"):
        measure(X, X, ["DRL2"], keysets=[[]])
    C = X.copy()
    C[:, 1] = 7.0
    for name in ["DLD", "DRL2", "PDL", "RR", "GDBRL"]:
        with pytest.raises(SdcInputError, match="constant"):
            measure(C, C + 1, [name], keysets=[["V1", "V2"]])
    with pytest.raises(SdcInputError, match="linkage_method"):
        measure(X, X, ["DLD"], options={"linkage_method": "annoy"})
    with pytest.raises(SdcInputError, match="record by record"):
        measure(X, X[:20], ["ID1"])


def _with_constant(value, n=1000, seed=5):
    """Two files whose key column 'b' holds copies of ``value`` in the original (computed
    sd about 1e-17, not 0: an sd test accepted it) and real values in the masked file."""
    r = np.random.default_rng(seed)
    X = r.standard_normal((n, 3))
    X[:, 1] = value
    assert 0 < X[:, 1].std(ddof=1) < 1e-15
    Y = X + 0.1 * r.standard_normal(X.shape)
    return X, Y


@pytest.mark.parametrize("value", [0.1, 1 / 3])
def test_linkage_refuses_a_constant_key_column_whose_sd_is_not_zero(value):
    X, Y = _with_constant(value)
    cols = ["a", "b", "c"]
    for name in ["DLD", "DLD2", "DRL2", "PDL", "RR", "GDBRL"]:
        for A, B, what in ((X, Y, "original file"), (Y, X, "masked file")):
            with pytest.raises(SdcInputError, match=rf"Column\(s\) \['b'\] are constant "
                               rf"in the {what}; linkage cannot use a constant key column"):
                measure(A, B, [name], columns=cols, keysets=[["a", "b"]])
    # CRL without shared attributes checks each column of either side alone
    for A, B, what in ((X, Y, "original file"), (Y, X, "masked file")):
        with pytest.raises(SdcInputError, match=rf"Column\(s\) \['b'\] are constant in the {what}; "
                           "correlation linkage"):
            measure(A, B, ["CRL"], columns=cols,
                    options={"crl_external": ["a", "b"], "crl_released": ["b", "c"]})


def test_risk_command_refuses_a_constant_key_column_whose_sd_is_not_zero(tmp_path):
    """Through the CLI: exit code 2, the column named, no value printed."""
    import pandas as pd
    from click.testing import CliRunner

    from sdcdist.cli import main
    X, Y = _with_constant(0.1, seed=6)
    for M, f in ((X, "o.csv"), (Y, "m.csv")):
        pd.DataFrame(M, columns=["a", "b", "c"]).to_csv(tmp_path / f, index=False)
    res = CliRunner().invoke(main, ["risk", str(tmp_path / "o.csv"), str(tmp_path / "m.csv"),
                                    "--metric", "DLD", "--keyset", "a,b", "--local"])
    assert res.exit_code == 2, res.output
    assert "Column(s) ['b'] are constant in the original file" in res.output
    assert "0.1" not in res.output


def test_risk_command_refuses_identifiers_that_never_match(tmp_path, rng):
    """``risk --id`` on files whose identifiers do not overlap exited 0 with DLD 0."""
    import pandas as pd
    from click.testing import CliRunner

    from sdcdist.cli import main
    X = rng.standard_normal((40, 2))
    pd.DataFrame(np.c_[np.arange(40) + 500, X], columns=["pid", "A", "B"]).to_csv(
        tmp_path / "o.csv", index=False)
    pd.DataFrame(np.c_[np.arange(40) + 9000, X], columns=["pid", "A", "B"]).to_csv(
        tmp_path / "m.csv", index=False)
    res = CliRunner().invoke(main, ["risk", str(tmp_path / "o.csv"), str(tmp_path / "m.csv"),
                                    "--id", "pid", "--metric", "DLD", "--local"])
    assert res.exit_code == 2, res.output
    assert "matches no record" in res.output and "9000" not in res.output


def test_default_key_sets_leave_the_confidential_columns_out(run, tmp_path):
    rng = np.random.default_rng(3)
    X = np.column_stack([rng.integers(0, 2, 60), rng.integers(0, 2, 60), np.arange(60) % 57])
    cols, cats = ["A", "B", "C"], ["A", "B", "C"]
    conf = measure(X, X, ["uniques"], columns=cols, categorical=cats, confidential=["C"])
    keys = measure(X, X, ["uniques"], columns=cols, categorical=cats, keysets=[["A", "B"]])
    both = measure(X, X, ["uniques"], columns=cols, categorical=cats)
    assert conf["uniques"].value == keys["uniques"].value == 0
    assert both["uniques"].value > 0            # C is a key when nobody says otherwise
    # the command line reads the store's roles: its key role, else all but confidential
    from sdcdist.data import ingest
    import pandas as pd
    pd.DataFrame(X, columns=cols).to_csv(tmp_path / "x.csv", index=False)
    ingest(tmp_path / "x.csv", tmp_path / "x.zarr", categorical=cats,
           roles={"confidential": ["C"]})
    res = run("risk", tmp_path / "x.zarr", tmp_path / "x.zarr", "--metric", "uniques",
              "--local", "--json")
    assert res.exit_code == 0, res.output
    import json
    assert json.loads(res.output)["metrics"]["uniques"]["value"] == 0


# -- the frequency risks read only their columns: the same output as a whole read ----------

_FREQ = "uniques,kviol2,kviol3,kviol5,IR_mean,IR_max,ER"

#: the cells of an unused numeric column, and what a whole read makes of them
_UNUSED = {"clean": None, "typo": "abc", "underscore": "1_000", "nan": "nan", "missing": "",
           "inf": "inf", "quoted": '"5"', "huge": "1e999", "padded": " 7"}


def _freq_file(path, x_cell=None, w_cell=None, text_col=False, n=40):
    """k0,k1 (integer-coded keys), w (weight), x and y (numbers no frequency metric reads);
    record 7's x and w replaced by the given cells (text_col: x holds labels)."""
    rng = np.random.default_rng(5)
    lines = ["k0,k1,w,x,y"]
    for i in range(n):
        x = f"lab{i % 3}" if text_col else f"{rng.normal(100, 10):.3f}"
        w = f"{rng.uniform(1, 9):.6f}"
        if i == 6:
            x = x if x_cell is None else x_cell
            w = w if w_cell is None else w_cell
        lines.append(f"{i % 3},{i % 4},{w},{x},{i}")
    path.write_text("\n".join(lines) + "\n")
    return path


def _both_ways(monkeypatch, *args):
    """The command's (exit code, stdout, stderr) with its reading of the key columns only,
    then with every column read (as before that reading existed)."""
    from click.testing import CliRunner

    import sdcdist.cli.risk as risk_cli
    from sdcdist.cli import main
    args = [str(a) for a in args]
    fast = CliRunner().invoke(main, args)
    with monkeypatch.context() as m:
        m.setattr(risk_cli, "_read_columns", lambda *a: None)
        whole = CliRunner().invoke(main, args)
    return ((fast.exit_code, fast.stdout, fast.stderr),
            (whole.exit_code, whole.stdout, whole.stderr))


@pytest.mark.parametrize("case", sorted(_UNUSED))
def test_frequency_risk_reading_only_its_columns_prints_and_refuses_the_same(
        tmp_path, monkeypatch, case):
    """``risk --metric uniques,... --keys`` leaves the values of the columns no frequency
    metric reads unread when they are plain numbers, and reads the whole file otherwise:
    stdout, stderr and the exit code are those of a whole read, for a typo, ``1_000``,
    ``nan``, an empty cell, an infinity or a quoted cell in an unused column."""
    import sdcdist.data.io as dio
    seen = []
    real = dio._load_read_columns

    def spy(*a, **k):
        md = real(*a, **k)
        seen.append(None if md is None else md.columns)
        return md
    monkeypatch.setattr(dio, "_load_read_columns", spy)
    f = _freq_file(tmp_path / "f.csv", _UNUSED[case])
    base = ["risk", f, f, "--metric", _FREQ, "--keys", "k0,k1", "--categorical", "k0,k1",
            "--weight", "w", "--local"]
    fast, whole = _both_ways(monkeypatch, *base)
    assert fast == whole
    refused = case in ("typo", "underscore", "nan", "missing", "inf", "huge")
    assert (fast[0] == 2) == refused and fast[0] in (0, 2), fast
    if not refused:
        assert "original 40 x 5, masked 40 x 5" in fast[1]
    else:
        assert "'x'" in fast[2] and "record" in fast[2]     # the column and its records
    # the columns read: the keys and the weight when x is plain numbers, else all
    assert seen[0] == ("k0", "k1", "w") if case == "clean" else \
        (seen[0] is None or case == "padded")
    fast, whole = _both_ways(monkeypatch, *base, "--json")
    assert fast == whole


def test_frequency_risk_reading_only_its_columns_other_outcomes(tmp_path, monkeypatch):
    """The same output as a whole read: a typo in the weight and in an unused column (the
    first one named), a missing weight, a text column left unused, a key the file lacks
    (the message lists every column), an identifier column, JSON output, two files."""
    f = _freq_file
    cases = [
        (f(tmp_path / "a.csv", "abc", "xyz"), []),
        (f(tmp_path / "b.csv", None, ""), []),
        (f(tmp_path / "c.csv", text_col=True), []),
        (f(tmp_path / "d.csv"), ["--json"]),
        (f(tmp_path / "e.csv"), ["--id", "y"]),
    ]
    for path, extra in cases:
        args = ["risk", path, path, "--metric", _FREQ, "--keys", "k0,k1", "--categorical",
                "k0,k1", "--weight", "w", "--local", *extra]
        fast, whole = _both_ways(monkeypatch, *args)
        assert fast == whole, (path.name, fast, whole)
    good = f(tmp_path / "g.csv")
    for keys in ("k0,k9", "k0,k1"):
        for other in (good, f(tmp_path / "h.csv", "abc")):
            args = ["risk", good, other, "--metric", _FREQ, "--keys", keys,
                    "--categorical", "k0,k1", "--weight", "w", "--local"]
            fast, whole = _both_ways(monkeypatch, *args)
            assert fast == whole, (keys, other.name, fast, whole)


def test_probabilistic_linkage_finds_the_key_columns_by_name_in_the_masked_file():
    """The masked file may hold its columns in another order, or without a column the
    original has: PLD, PLD20 and PLD_best link on the key columns by name, as the distance
    linkage does (the original's positions were used in the masked file: a silently wrong
    PLD with the columns reordered, a crash with one missing)."""
    rng = np.random.default_rng(0)
    n = 300
    X = np.column_stack([rng.normal(size=n), rng.normal(size=n) * 3,
                         rng.integers(0, 50, n).astype(float), rng.normal(size=n)])
    Y = X + rng.normal(size=X.shape) * np.array([0.3, 0.9, 5, 0.3])
    cols, ks, names = ["a", "b", "c", "d"], [["a", "b", "d"]], ["PLD", "PLD20", "PLD_best"]
    ref = measure(X[:, [0, 1, 3]], Y[:, [0, 1, 3]], names, columns=["a", "b", "d"],
                  keysets=ks)
    for perm in ([3, 2, 1, 0], [3, 1, 0]):            # reordered; reordered without c
        got = measure(X, Y[:, perm], names, columns=cols,
                      masked_columns=[cols[j] for j in perm], keysets=ks)
        assert [got[m].value for m in names] == [ref[m].value for m in names], perm


def test_record_by_record_metrics_refuse_a_truth_that_pairs_rows_otherwise():
    """ID1, ID2 and SDID compare masked row i with original row i: under a truth (--id)
    that pairs the records otherwise they are refused, where they silently compared the
    wrong records (a shuffled masked file dropped ID1 from 95 to 24); under the identity
    truth they compute as without one."""
    rng = np.random.default_rng(2)
    X = rng.normal(size=(80, 3))
    Y = X + rng.normal(size=X.shape) * 0.1
    names = ["ID1", "ID2", "SDID"]
    plain = measure(X, Y, names)
    same = measure(X, Y, names, truth=np.arange(80))
    assert [same[n].value for n in names] == [plain[n].value for n in names]
    s = rng.permutation(80)
    with pytest.raises(SdcInputError, match="ID1, ID2, SDID compare the files record by "
                                            "record"):
        measure(X, Y[s], names, truth=s)
    assert measure(X, Y[s], ["DLD"], truth=s)["DLD"].value == \
        measure(X, Y, ["DLD"], truth=np.arange(80))["DLD"].value
