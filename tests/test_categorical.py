"""Categorical columns: typed ingest, and the methods pram, pram_freq, pram_freq_inv, recode,
suppress."""

from __future__ import annotations

import re

import numpy as np
import pandas as pd
import pytest

from sdcdist import SdcInputError
from sdcdist.data import from_array, ingest, load_microdata, open_microdata
from sdcdist.masking import REGISTRY, method_options
from sdcdist.masking.pram import invariant_matrix, pram_freq_matrix, pram_matrix
from sdcdist.masking.recoding import recode_labels
from sdcdist.masking.suppression import frequencies_wildcard, suppress_greedy


# -- ingest ------------------------------------------------------------------------------

def test_text_column_is_categorical_and_integer_codes_are_declared(tmp_path):
    df = pd.DataFrame({"region": ["north", "south", "east", "north", "south"],
                       "age": [30, 41, 30, 9, 41], "income": [1.5, 2.0, 3.0, 4.0, 5.0]})
    src = tmp_path / "a.csv"
    df.to_csv(src, index=False)
    store = str(tmp_path / "a.zarr")
    ingest(src, store, categorical=["age"], chunk_rows=2)
    md = load_microdata(store)
    assert md.categories == {"region": ["east", "north", "south"], "age": ["9", "30", "41"]}
    np.testing.assert_array_equal(md.values[:, 0], [1, 2, 0, 1, 2])
    np.testing.assert_array_equal(md.values[:, 1], [1, 2, 1, 0, 2])
    np.testing.assert_array_equal(md.values[:, 2], df["income"])
    assert open_microdata(store).attrs["categories"]["age"] == ["9", "30", "41"]
    # the same from the CSV itself, and from Parquet
    assert load_microdata(src, categorical=["age"]).categories == md.categories
    df.to_parquet(tmp_path / "a.parquet")
    pq = load_microdata(tmp_path / "a.parquet", categorical=["age"])
    assert pq.categories == md.categories
    np.testing.assert_array_equal(pq.values, md.values)


def test_ingest_messages_name_the_column_never_a_value(tmp_path):
    df = pd.DataFrame({"town": ["Secretville", None, "Hush", "Hush"], "x": [1.0, 2, 3, 4],
                       "w": [1.0, 0.0, 2.0, 3.0]})
    src = tmp_path / "a.csv"
    df.to_csv(src, index=False)
    with pytest.raises(SdcInputError, match="Column 'x' of .* has 1 missing values") as e:
        ingest(src, str(tmp_path / "a0.zarr"), columns=["town", "x"], na_values=["3.0"])
    assert "Secretville" not in str(e.value) and "Hush" not in str(e.value)
    with pytest.raises(SdcInputError, match="Weight column 'w' has 1 values that are zero"):
        ingest(src, str(tmp_path / "b.zarr"), columns=["x", "w"], roles={"weight": ["w"]})
    df["town"] = df["town"].fillna("Hush")
    df.to_csv(src, index=False)
    with pytest.raises(SdcInputError, match="Weight column 'town' is categorical"):
        ingest(src, str(tmp_path / "c.zarr"), columns=["town", "x"], roles={"weight": ["town"]})
    with pytest.raises(SdcInputError, match="Unknown categorical column 'nope'"):
        ingest(src, str(tmp_path / "d.zarr"), categorical=["nope"])


# -- PRAM --------------------------------------------------------------------------------

def _codes(rng, n=400):
    a = rng.choice(4, n, p=[0.5, 0.3, 0.15, 0.05]).astype(float)
    b = rng.integers(0, 3, n).astype(float)
    x = rng.standard_normal(n)
    return np.column_stack([a, x, b])


@pytest.mark.parametrize("name", ["pram", "pram_freq", "pram_freq_inv"])
def test_pram_with_p_one_is_the_identity(rng, name):
    X = _codes(rng)
    Y = REGISTRY[name](X, 1.0, rng=rng, categorical=[0, 2])
    assert Y.tobytes() == X.tobytes()


def test_pram_keeps_the_numeric_columns_and_moves_categories(rng):
    X = _codes(rng)
    Y = REGISTRY["pram_freq"](X, 0.5, rng=np.random.default_rng(3), categorical=[0, 2])
    assert Y[:, 1].tobytes() == X[:, 1].tobytes()
    changed = (Y[:, [0, 2]] != X[:, [0, 2]]).mean()
    assert 0.3 < changed < 0.7
    assert set(np.unique(Y[:, 0])) <= {0.0, 1.0, 2.0, 3.0}


def test_pram_matrices():
    f = np.array([50.0, 30, 15, 5])
    P = pram_freq_matrix(f, 0.6)
    np.testing.assert_allclose(P.sum(axis=1), 1)
    np.testing.assert_allclose(np.diag(P), 0.6)
    # off the diagonal: in proportion to the other categories' frequencies
    assert P[0, 1] / P[0, 2] == pytest.approx(30 / 15)
    R = invariant_matrix(P, f)
    pi = f / f.sum()
    np.testing.assert_allclose(pi @ R, pi, atol=1e-14)
    np.testing.assert_allclose(R.sum(axis=1), 1)
    assert (R >= 0).all()


def test_invariant_pram_keeps_expected_frequencies(rng):
    X = _codes(rng, 300)
    f = np.bincount(X[:, 0].astype(int), minlength=4)
    counts = np.array([np.bincount(REGISTRY["pram_freq_inv"](
        X, 0.4, rng=np.random.default_rng(s), categorical=[0])[:, 0].astype(int),
        minlength=4) for s in range(200)])
    mean = counts.mean(axis=0)
    se = counts.std(axis=0, ddof=1) / np.sqrt(counts.shape[0])
    assert (np.abs(mean - f) <= 3 * se).all(), (mean, f, se)


# -- recode ------------------------------------------------------------------------------

def test_recode_into_bands_and_by_mapping(rng):
    ages = np.array([3, 7, 12, 24, 25, 29, 31, 64])
    labels = [str(a) for a in sorted(set(ages))]
    X = np.column_stack([[labels.index(str(a)) for a in ages], np.arange(8.0)]).astype(float)
    info = {}
    Y = REGISTRY["recode"](X, 5, rng=rng, categorical=[0], columns=["age", "x"],
                           labels={"age": labels}, info=info)
    new = info["categories"]["age"]
    got = [new[int(c)] for c in Y[:, 0]]
    assert got == ["[0,5)", "[5,10)", "[10,15)", "[20,25)", "[25,30)", "[25,30)", "[30,35)",
                   "[60,65)"]
    assert Y[:, 1].tobytes() == X[:, 1].tobytes()
    info = {}
    Y = REGISTRY["recode"](X, 0, rng=rng, categorical=[0], columns=["age", "x"],
                           labels={"age": labels},
                           mapping={"age": {"3": "child", "7": "child", "12": "child"}},
                           info=info)
    new = info["categories"]["age"]
    assert [new[int(c)] for c in Y[:3, 0]] == ["child"] * 3
    assert [new[int(c)] for c in Y[3:, 0]] == [str(a) for a in ages[3:]]


def test_recode_refuses_an_unknown_category(rng):
    X = np.array([[0, 1.0], [1, 2.0], [1, 3.0]])
    with pytest.raises(SdcInputError, match=r"recode mapping of column 'sex' names 1 "
                                            r"category the column does not have") as e:
        REGISTRY["recode"](X, 0, rng=rng, categorical=[0], columns=["sex", "x"],
                           labels={"sex": ["f", "m"]}, mapping={"sex": {"x_secret": "f"}})
    assert "x_secret" not in str(e.value)


@pytest.mark.parametrize("new", [None, "", "  ", True, ["f"], {"a": "f"}])
def test_recode_refuses_a_new_label_that_is_no_label(rng, new):
    """A category mapped to null, an empty text, a list ... was accepted and became the
    category 'None', '' or "['f']" (the spec path refuses it too: test_options)."""
    X = np.array([[0, 1.0], [1, 2.0], [1, 3.0]])
    with pytest.raises(SdcInputError, match=r"recode mapping of column 'sex' gives 1 "
                                            r"category no usable new label") as e:
        REGISTRY["recode"](X, 0, rng=rng, categorical=[0], columns=["sex", "x"],
                           labels={"sex": ["f", "m"]}, mapping={"sex": {"m": new}})
    assert "'m'" not in str(e.value)


# -- suppress ----------------------------------------------------------------------------

def _anonymous(codes, k):
    fk, _ = frequencies_wildcard(codes)
    return (fk >= k).all()


@pytest.mark.parametrize("k", [2, 3, 5])
def test_suppress_reaches_k_anonymity_within_the_bound(rng, k):
    n = 300
    codes = np.column_stack([rng.integers(0, 12, n), rng.integers(0, 4, n),
                             rng.integers(0, 2, n)]).astype(float)
    out, total, unsafe = suppress_greedy(codes, k)
    assert _anonymous(out, k)
    fk0, _ = frequencies_wildcard(codes)
    assert unsafe == int((fk0 < k).sum()) > 0
    changed = np.isnan(out) & ~np.isnan(codes)
    assert total == int(changed.sum()) <= codes.shape[1] * unsafe
    # only records unsafe at the start lose values, and kept values are unchanged
    assert not changed[fk0 >= k].any()
    keep = ~np.isnan(out)
    assert (out[keep] == codes[keep]).all()
    # through the registry, on a file with a numeric column
    X = np.column_stack([codes, rng.standard_normal(n)])
    info = {}
    Y = REGISTRY["suppress"](X, k, rng=rng, categorical=[0, 1, 2], info=info)
    assert Y[:, 3].tobytes() == X[:, 3].tobytes()
    assert info["suppressed"] <= info["bound"]


def test_suppress_k_larger_than_n(rng):
    X = np.array([[0, 1.0], [1, 2.0], [1, 3.0]])
    with pytest.raises(SdcInputError, match=r"The 'k' parameter of suppress must be an "
                                            r"integer in \[2, n\] with n = 3 records. Got 4"):
        REGISTRY["suppress"](X, 4, rng=rng, categorical=[0])


def test_categorical_methods_need_categorical_columns(rng):
    X = rng.standard_normal((10, 2))
    with pytest.raises(SdcInputError, match="pram masks categorical columns, and the file "
                                            "has none"):
        REGISTRY["pram"](X, 0.5, rng=rng)
    with pytest.raises(SdcInputError, match=r"\['x'\] are numeric"):
        REGISTRY["pram"](np.column_stack([X, np.zeros(10)]), 0.5, rng=rng, categorical=[2],
                         columns=["x", "y", "c"], variables=["x"])


def test_method_options_default_to_the_categorical_keys(rng):
    md = from_array(np.column_stack([rng.integers(0, 3, 50), rng.integers(0, 3, 50),
                                     rng.standard_normal(50)]), ["a", "b", "x"],
                    roles={"key": ["b"]}, categories={"a": list("pqr"), "b": list("pqr")})
    opts = method_options("pram", columns=md.columns, roles=md.roles,
                          categorical=md.categories)
    Y = REGISTRY["pram"](md.values, 0.0, rng=rng, **opts)
    assert Y[:, 0].tobytes() == md.values[:, 0].tobytes()        # a: not a key, kept
    assert (Y[:, 1] != md.values[:, 1]).any()


# -- pipelines ---------------------------------------------------------------------------

def test_pipeline_applies_its_steps_with_one_generator(rng):
    from sdcdist.masking import get_method
    X = np.column_stack([rng.integers(0, 20, 200), rng.standard_normal(200) + 10,
                         rng.integers(0, 3, 200)]).astype(float)
    labels = {"age": [str(i) for i in range(20)], "sex": ["1", "2", "3"]}
    common = {"categorical": [0, 2], "columns": ["age", "inc", "sex"], "labels": labels}
    pipe = get_method("recode+noise")
    assert pipe.param == "p" and pipe.random and pipe.steps == ("recode", "noise")
    got = pipe(X, 0.1, rng=np.random.default_rng(5),
               recode={"w": 5, "variables": ["age"]}, **common)
    g = np.random.default_rng(5)
    step = REGISTRY["recode"](X, 5, rng=g, variables=["age"], **common)
    want = REGISTRY["noise"](step, 0.1, rng=g, categorical=[0, 2])
    assert got.tobytes() == want.tobytes()
    assert got[:, 2].tobytes() == X[:, 2].tobytes()
    with pytest.raises(SdcInputError, match=r"step recode of pipeline recode\+noise needs its "
                                            r"'w' parameter"):
        pipe(X, 0.1, rng=rng, **common)
    with pytest.raises(SdcInputError, match="Unknown masking method 'nois'"):
        get_method("recode+nois")


def test_pipeline_in_a_spec_is_checked():
    from sdcdist.audit.spec import parse_spec
    doc = {"dataset": {"reference": "household",
                       "columns": ["urbrur", "sex", "age", "income", "sampling_weight"],
                       "categorical": ["urbrur", "sex", "age"],
                       "roles": {"key": ["urbrur", "sex", "age"],
                                 "weight": ["sampling_weight"]}},
           "methods": [{"name": "recode+noise", "params": [0.1],
                        "options": {"recode": {"w": 5, "variables": ["age"]}}}],
           "metrics": ["uniques"]}
    spec = parse_spec(doc)
    assert spec.methods[0].options == {"recode": {"w": 5.0, "variables": ["age"]}}
    doc["methods"][0]["options"] = {"recode": {"variables": ["age"]}}
    with pytest.raises(SdcInputError, match="needs its 'w' parameter"):
        parse_spec(doc)
    doc["methods"][0]["options"] = {"recode": {"w": 5, "bogus": 1}}
    with pytest.raises(SdcInputError, match="Unknown recode option 'bogus'"):
        parse_spec(doc)


def test_pram_categories_are_the_declared_ones_not_the_largest_code_plus_one(monkeypatch):
    from sdcdist.masking import get_method
    from sdcdist.masking import pram as prammod
    d = np.array([0.8, 0.7, 0.9, 0.75])
    # an empty category counts wherever its code stands: renumbering it moves nothing
    A = prammod.pram_matrix([50, 30, 0, 20], 0.5, diag=d)
    B = prammod.pram_matrix([50, 30, 20, 0], 0.5, diag=d[[0, 1, 3, 2]])
    np.testing.assert_allclose(A[np.ix_([0, 1, 3, 2], [0, 1, 3, 2])], B, atol=1e-15)
    seen = []
    real = prammod.pram_diagonal
    monkeypatch.setattr(prammod, "pram_diagonal",
                        lambda L, pd, rng: seen.append(L) or real(L, pd, rng))
    labels = {"a": ["w", "x", "y", "z"]}
    for codes in ([0, 1, 2], [0, 1, 3], [0, 2, 3]):      # the empty one last, inside, ...
        X = np.array(codes * 20, dtype=np.float64)[:, None]
        opts = method_options("pram", columns=["a"], roles={}, categorical=labels)
        assert opts["labels"] == labels
        opts.pop("categorical")
        for name in ("pram", "pram_freq_inv"):
            REGISTRY[name](X, 0.5, rng=np.random.default_rng(0), categorical=[0], **opts)
        get_method("recode+pram")(X, 0.5, rng=np.random.default_rng(0), categorical=[0],
                               **{**opts, "recode": {"w": 0, "mapping": {"a": {"w": "x"}}}})
    assert seen == [4] * 6     # pram, and pram after a recode that keeps the 4 labels


def test_recode_bands_hold_labels_of_any_magnitude_exactly():
    """A category labelled 1e300 in bands of width 1: its band's bounds are written in full
    (301 digits; 200-digit arithmetic raised 'unexpected failure'), and distinct labels
    still land in distinct bands; bounds that would need more than BAND_DIGITS digits are
    refused with a message that gives no label."""
    target, labels = recode_labels(["1e300", "5", "7", "-1e300"], 1.0)
    new = [labels[t] for t in target]
    assert new[0] == "[1" + "0" * 300 + ",1" + "0" * 299 + "1)"
    assert new[3] == "[-1" + "0" * 300 + ",-" + "9" * 300 + ")"
    assert new[1:3] == ["[5,6)", "[7,8)"]
    # bounds of more than 28 digits were rounded when written: two bands shared one name
    a, b = "12345678901234567890123456789", "12345678901234567890123456790"
    target, labels = recode_labels([a, b], 1.0)
    assert [labels[t] for t in target] == [f"[{a},{b})", f"[{b},{b[:-1]}1)"]
    with pytest.raises(SdcInputError, match="more than 2,000 digits for column 'K'") as e:
        recode_labels(["1e999999", "5"], 1.0, column="K")
    assert "999999" not in str(e.value)


@pytest.mark.parametrize("name, value, bound", [("recode", 1e15, "[0, 1e12]"),
                                                ("cart", 10 ** 10, "[1, 10^9]")])
def test_a_parameter_past_its_upper_bound_is_told_the_bound(name, value, bound):
    """The refusal states the range that refuses the value (it said ">= 0" or ">= 1" of a
    value far above 0 or 1, and the bound was written nowhere)."""
    with pytest.raises(SdcInputError, match=re.escape(bound)):
        REGISTRY[name].check_param(value)
