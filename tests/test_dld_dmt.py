"""The ``dmt`` convention of DLD/DLD2 (option ``dld``): brute force, Census Table 2, bad input."""

from __future__ import annotations

import json

import numpy as np
import pytest

from sdcdist.audit import parse_spec, run_audit
from sdcdist.cube import open_cube
from sdcdist.errors import SdcInputError
from sdcdist.masking import REGISTRY as MASKING
from sdcdist.metrics import measure

DMT = {"dld": "dmt"}


def reference_dmt(X, Y, keys, truth, rank):
    """DLD (rank 0) / DLD2 (rank 1) under ``dmt``, record by record.

    Raw key values, squared Euclidean distance, each ORIGINAL record (row of
    ``X``) against every MASKED record (row of ``Y``); a full hit when the
    original's true masked record can take place ``rank`` among the tied
    candidates. ``truth``: masked row -> original row (-1 = absent).
    Percent of the original records.
    """
    A, B = X[:, keys], Y[:, keys]
    inv = np.full(len(X), -1)
    inv[truth[truth >= 0]] = np.flatnonzero(truth >= 0)
    hits = 0
    for i in range(len(A)):
        t = inv[i]
        if t < 0:
            continue
        d = ((A[i] - B) ** 2).sum(axis=1)
        less = np.count_nonzero(d < d[t])
        eq = np.count_nonzero(d == d[t])
        hits += less <= rank < less + eq
    return 100.0 * hits / len(A)


def _tie_heavy(rng):
    """Microaggregated integer data (many tied records) in a few shapes."""
    n = 61                                       # k = 3, 4 do not divide n: a larger group
    X = rng.integers(0, 6, size=(n, 4)).astype(float)
    yield "micir", X, MASKING["micir"](X, 3, rng=rng), None
    yield "micz", X, MASKING["micz"](X, 4, rng=rng), None
    T = rng.integers(0, 3, size=(n, 4)).astype(float)
    yield "ties", T, T + rng.integers(-1, 2, size=T.shape), None
    Xo = rng.integers(0, 4, size=(50, 3)).astype(float)
    truth = rng.permutation(50)[:36]
    truth[::6] = -1                      # some released records are not in the intruder file
    Ym = Xo[np.maximum(truth, 0)] + rng.integers(-1, 2, size=(36, 3))
    yield "sizes", Xo, Ym, truth


@pytest.mark.parametrize("options", [{"block_rows": (7, 11)}, {"block_rows": (64, 5)},
                                     {"linkage_method": "brute", "block_rows": (13, 17)},
                                     {"linkage_method": "brute", "block_rows": (5, 3)}, {}])
def test_dmt_equals_brute_force(rng, client, options):
    opts = {**DMT, **options}
    for label, X, Y, truth in _tie_heavy(rng):
        keysets = [[f"V{j + 1}" for j in range(s)] for s in range(1, X.shape[1] + 1)]
        t = truth if truth is not None else np.arange(len(Y))
        here = measure(X, Y, ["DLD", "DLD2"], keysets=keysets, truth=truth, options=opts)
        # on the cluster for two of the files (a grouped masking, records absent from the
        # intruder file): the same tasks, and tiny blocks make thousands of them
        there = here if label in ("micz", "ties") else measure(
            X, Y, ["DLD", "DLD2"], keysets=keysets, truth=truth, options=opts, client=client)
        for rank, name in enumerate(("DLD", "DLD2")):
            assert here[name] == there[name], (label, name)
            ref = [reference_dmt(X, Y, list(range(len(k))), t, rank) for k in keysets]
            # hits are integer counts: the shares are exact, not approximately equal
            assert list(here[name].per_keyset) == ref, (label, name, options)


def test_dmt_differs_from_the_default_where_it_should(rng):
    # ties: a microaggregated single key ties every record of a group; catalog counts 1/t,
    # dmt a full hit
    X = np.repeat(np.arange(10.0), 3)[:, None] + rng.integers(0, 2, size=(30, 1)) * 0.25
    Y = MASKING["micir"](X, 3, rng=rng)
    cat = measure(X, Y, ["DLD"], keysets=[["V1"]])["DLD"].value
    dmt = measure(X, Y, ["DLD"], keysets=[["V1"]], options=DMT)["DLD"].value
    assert dmt == pytest.approx(reference_dmt(X, Y, [0], np.arange(30), 0))
    assert dmt > cat
    # scale: raw values let the widest column decide, the standardised default does not
    Z = rng.standard_normal((40, 2)) * [1.0, 1000.0]
    W = Z + rng.standard_normal(Z.shape) * [0.01, 100.0]
    raw = measure(Z, W, ["DLD"], keysets=[["V1", "V2"]], options=DMT)["DLD"].value
    assert raw == reference_dmt(Z, W, [0, 1], np.arange(40), 0)
    assert raw < measure(Z, W, ["DLD"], keysets=[["V1", "V2"]])["DLD"].value


@pytest.mark.parametrize("method, k, paper", [("micir", 3, 97.39), ("micz", 5, 4.03)])
def test_census_reproduces_table2(census, method, k, paper):
    X = census.values
    Y = MASKING[method](X, k, rng=np.random.default_rng(0))    # deterministic
    r = measure(X, Y, ["DLD"], columns=census.columns, options=DMT)["DLD"]
    assert len(r.per_keyset) == 7                       # prefixes 1..7, as in dmt_table2.yaml
    assert round(r.value, 2) == paper


def test_unknown_convention_is_refused(rng, run, tmp_path):
    X = rng.standard_normal((20, 2))
    with pytest.raises(SdcInputError,
                       match=r"The 'dld' option must be one of 'catalog', 'dmt'. "
                             r"Got 'DMT' instead."):
        measure(X, X, ["DLD"], options={"dld": "DMT"})
    doc = {"name": "t", "seed": 1, "dataset": {"reference": "census", "columns": ["AGI", "FICA"]},
           "methods": [{"name": "micir", "params": [3]}], "metrics": ["DLD"]}
    with pytest.raises(SdcInputError, match=r"The 'dld' option must be one of 'catalog', 'dmt'"):
        parse_spec({**doc, "options": {"dld": "paper"}})
    np.savetxt(tmp_path / "a.csv", X, delimiter=",", header="V1,V2", comments="")
    res = run("risk", tmp_path / "a.csv", tmp_path / "a.csv", "--metric", "DLD", "-o", "dld=nope",
              "--local")
    assert res.exit_code != 0 and "must be one of 'catalog', 'dmt'" in res.output


def test_spec_and_cli_accept_dmt_and_the_cube_records_it(tmp_path, run, census):
    doc = {"name": "t", "seed": 1,
           "dataset": {"reference": "census", "columns": list(census.columns[:3])},
           "methods": [{"name": "micir", "params": [3]}], "metrics": ["DLD", "DLD2"]}
    cubes = {}
    for conv in ("catalog", "dmt"):
        out = str(tmp_path / f"{conv}.zarr")
        run_audit(parse_spec({**doc, "options": {"dld": conv}}), out)
        cubes[conv] = open_cube(out)
        assert json.loads(cubes[conv].attrs["conventions"])["DLD"].startswith(conv + ":")
    X = census.values[:, :3]
    Y = MASKING["micir"](X, 3, rng=np.random.default_rng(0))
    want = measure(X, Y, ["DLD"], columns=census.columns[:3], options=DMT)["DLD"].value
    got = float(cubes["dmt"].sel(metric="DLD")["value"].values.ravel()[0])
    assert got == want != float(cubes["catalog"].sel(metric="DLD")["value"].values.ravel()[0])
    # the command line: -o dld=dmt
    names = ",".join(census.columns[:3])
    np.savetxt(tmp_path / "o.csv", X, delimiter=",", header=names, comments="")
    np.savetxt(tmp_path / "m.csv", Y, delimiter=",", header=names, comments="")
    res = run("risk", tmp_path / "o.csv", tmp_path / "m.csv", "--metric", "DLD", "-o", "dld=dmt",
              "--local")
    assert res.exit_code == 0, res.output
    assert f"{want:.4f}" in res.output
