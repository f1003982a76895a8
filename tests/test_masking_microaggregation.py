"""Microaggregation: group sizes, means, MDAV's grouping by hand, and each variant's grouping."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings, strategies as st

from sdcdist import SdcInputError
from sdcdist.masking import REGISTRY
from sdcdist.masking.microaggregation import mdav_groups

METHODS = ["micmul", "mic2mul", "mic3mul", "mic4mul", "micir", "micz", "micpcp"]


def _call(name, X, k):
    return REGISTRY[name].func(X, k, rng=None, return_groups=True)


def _sizes_ok(labels, k):
    for j in range(labels.shape[1]):
        counts = np.bincount(labels[:, j])
        assert counts.min() >= k and counts.max() <= 2 * k - 1, (j, counts.min(), counts.max())


@pytest.mark.parametrize("name", METHODS)
@pytest.mark.parametrize("n,k", [(60, 3), (61, 3), (97, 5), (40, 10), (23, 4)])
def test_group_sizes_and_means(name, n, k):
    rng = np.random.default_rng(n * 100 + k)
    X = np.exp(rng.standard_normal((n, 7)) @ rng.standard_normal((7, 7))) * 100
    Y, labels = _call(name, X, k)
    assert labels.shape == X.shape
    _sizes_ok(labels, k)
    # values are the group means, so the column means are kept (to rounding)
    np.testing.assert_allclose(Y.mean(axis=0), X.mean(axis=0), rtol=1e-12)
    for j in range(X.shape[1]):
        for g in np.unique(labels[:, j]):
            sel = labels[:, j] == g
            assert np.all(Y[sel, j] == Y[sel, j][0])
            assert np.isclose(Y[sel, j][0], X[sel, j].mean(), rtol=1e-13)
    # the registry path gives the same file
    assert np.array_equal(REGISTRY[name](X, k, rng=np.random.default_rng(0)), Y)


@settings(max_examples=40, deadline=None)
@given(n=st.integers(4, 80), k=st.integers(2, 8), p=st.integers(1, 4), seed=st.integers(0, 2**31),
       ties=st.booleans())
def test_mdav_sizes_property(n, k, p, seed, ties):
    rng = np.random.default_rng(seed)
    Z = rng.standard_normal((n, p))
    if ties:
        Z = np.round(Z)            # many exactly tied distances
    if 2 * k > n:
        k = n // 2
    labels = mdav_groups(Z, k)
    counts = np.bincount(labels)
    assert counts.sum() == n and counts.min() >= k and counts.max() <= 2 * k - 1


def test_mdav_hand_example():
    # k = 2, nine points in the plane.
    #   all 9: centroid (37/9, 23/9); farthest r = record 4 (10, 1), sq. dist 37.1.
    #   farthest from r: records 0 (0, 0) and 2 (0, 2), both at 101 -> lowest record: s = 0.
    #   group r: {4, 3} (3 is at 2); group s: {0, 1} (1 is at 1).
    #   5 left < 3k = 6, >= 2k = 4: centroid of {2,5,6,7,8} = (3.4, 4.4); farthest is 2
    #   (17.32); its nearest is 8 (3, 2) at 9 -> group {2, 8}; the rest {5, 6, 7} last.
    P = np.array([[0, 0], [1, 0], [0, 2], [9, 0], [10, 1], [4, 6], [5, 7], [5, 5], [3, 2]],
                 dtype=float)
    assert mdav_groups(P, 2).tolist() == [1, 1, 2, 0, 0, 3, 3, 3, 2]
    # micmul z-scores first: scaling a column changes nothing, and the means replace values
    X = P * np.array([1000.0, 0.01])
    Y = REGISTRY["micmul"](X, 2, rng=None)
    Zs = (P - P.mean(0)) / P.std(0, ddof=1)
    lab = mdav_groups(Zs, 2)
    for g in range(lab.max() + 1):
        np.testing.assert_allclose(Y[lab == g], np.tile(X[lab == g].mean(0), (np.sum(lab == g), 1)))


def test_mdav_one_dimensional_hand_example():
    # 1-D, k = 3: centroid 11; farthest from it: 0 and 22 tie -> record 0; s = 22.
    # groups {0,1,2} and {22,21,20}; 3 left < 2k -> one last group.
    x = np.array([0, 1, 2, 10, 11, 12, 20, 21, 22], dtype=float)[:, None]
    assert mdav_groups(x, 3).tolist() == [0, 0, 0, 2, 2, 2, 1, 1, 1]


def test_micir_hand_example_and_independence(rng):
    x = np.array([5.0, 1, 4, 2, 3, 9, 7])
    # sorted 1 2 3 | 4 5 7 9 (the 7 mod 3 = 1 left over joins the last group)
    X = np.column_stack([x, x[::-1] * 10])
    Y, labels = _call("micir", X, 3)
    assert Y[:, 0].tolist() == [6.25, 2, 6.25, 2, 2, 6.25, 6.25]
    assert Y[:, 1].tolist() == (np.array([6.25, 6.25, 2, 2, 6.25, 2, 6.25]) * 10).tolist()
    # each column is grouped on its own: its result ignores every other column
    Z = rng.standard_normal((50, 4))
    Y1 = REGISTRY["micir"](Z, 4, rng=None)
    Z2 = Z.copy()
    Z2[:, 1:] = rng.permutation(Z2[:, 1:])
    assert np.array_equal(REGISTRY["micir"](Z2, 4, rng=None)[:, 0], Y1[:, 0])


def _runs_are_consecutive(labels, score):
    order = np.argsort(score, kind="stable")
    seq = labels[order]
    assert np.all(np.diff(seq) >= 0)       # groups are consecutive runs in the projection order


@pytest.mark.parametrize("k", [2, 3, 7])
def test_micz_groups_consecutively_in_zscore_order(small, k):
    X = small
    Y, labels = _call("micz", X, k)
    assert np.all(labels == labels[:, :1])
    z = ((X - X.mean(0)) / X.std(0, ddof=1)).sum(1)
    _runs_are_consecutive(labels[:, 0], z)
    _sizes_ok(labels, k)


@pytest.mark.parametrize("k", [2, 3, 7])
def test_micpcp_groups_consecutively_in_first_component_order(small, k):
    X = small
    Y, labels = _call("micpcp", X, k)
    Z = (X - X.mean(0)) / X.std(0, ddof=1)
    _, _, Vt = np.linalg.svd(Z - Z.mean(0), full_matrices=False)
    v = Vt[0] if Vt[0][np.argmax(np.abs(Vt[0]))] > 0 else -Vt[0]
    _runs_are_consecutive(labels[:, 0], Z @ v)
    _sizes_ok(labels, k)


@pytest.mark.parametrize("width", [2, 3, 4])
def test_block_mdav_never_mixes_blocks(rng, width):
    name = f"mic{width}mul"
    n, m = 90, 13
    X = np.exp(rng.standard_normal((n, m)) @ rng.standard_normal((m, m)) * 0.5)
    Y, labels = _call(name, X, 3)
    blocks = [list(range(a, min(a + width, m))) for a in range(0, m, width)]
    assert blocks[-1] == list(range(width * (m // width), m))   # remainder block
    for cols in blocks:
        assert np.all(labels[:, cols] == labels[:, cols[:1]])    # one grouping per block
        # the grouping is MDAV on this block alone (z-scored with X's moments)
        Zb = (X[:, cols] - X[:, cols].mean(0)) / X[:, cols].std(0, ddof=1)
        assert np.array_equal(labels[:, cols[0]], mdav_groups(Zb, 3))
        # changing the other columns changes nothing in this block
        X2 = X.copy()
        others = [j for j in range(m) if j not in cols]
        X2[:, others] = rng.permutation(X2[:, others])
        assert np.array_equal(REGISTRY[name](X2, 3, rng=None)[:, cols], Y[:, cols])


def test_micmul_is_mdav_on_all_columns(small):
    _, labels = _call("micmul", small, 3)
    Z = (small - small.mean(0)) / small.std(0, ddof=1)
    assert np.array_equal(labels[:, 0], mdav_groups(Z, 3))
    assert np.all(labels == labels[:, :1])


@pytest.mark.parametrize("name", METHODS)
@pytest.mark.parametrize("k", [1, 31, 0, -3])
def test_bad_k(name, small, k):
    with pytest.raises(SdcInputError, match=rf"The 'k' parameter of {name} must be an integer "
                                            r"in \[2, n/2\]"):
        REGISTRY[name](small, k, rng=None)     # small has 60 records: k = 30 is the largest


def test_k_half_of_n_is_allowed(small):
    _, labels = _call("micmul", small, 30)
    assert sorted(np.bincount(labels[:, 0])) == [30, 30]


def _mdav_literal(Z, k):
    """MDAV written as the catalogue says it, with Python lists (slow, small n only)."""
    n = Z.shape[0]
    labels = [-1] * n
    left = list(range(n))

    def sq(i, pt):
        return sum((Z[i, j] - pt[j]) ** 2 for j in range(Z.shape[1]))

    def farthest(pt):
        return max(left, key=lambda i: (sq(i, pt), -i))

    def group(centre, g):
        near = sorted((i for i in left if i != centre), key=lambda i: (sq(i, Z[centre]), i))
        for i in [centre] + near[:k - 1]:
            labels[i] = g
            left.remove(i)

    g = 0
    while len(left) >= 3 * k:
        r = farthest(Z[left].mean(0))
        s = max(left, key=lambda i: (sq(i, Z[r]), -i))
        group(r, g)
        group(s, g + 1)
        g += 2
    if len(left) >= 2 * k:
        group(farthest(Z[left].mean(0)), g)
        g += 1
    for i in list(left):
        labels[i] = g
    return labels


@pytest.mark.parametrize("seed,n,p,k", [(0, 150, 3, 3), (1, 97, 2, 4), (2, 120, 5, 2),
                                        (3, 64, 1, 5)])
def test_mdav_matches_literal_reference(seed, n, p, k):
    Z = np.random.default_rng(seed).standard_normal((n, p))
    before = Z.copy()
    assert mdav_groups(Z, k).tolist() == _mdav_literal(Z, k)
    assert np.array_equal(Z, before)                # works on its own copy
    Zf = np.asfortranarray(Z)                       # Z.T of this is C-contiguous already
    assert mdav_groups(Zf, k).tolist() == _mdav_literal(Z, k)
    assert np.array_equal(Zf, before)


# -- the left-over group (option leftover) --------------------------------------------

def _group_sizes_in_order(labels, score):
    seq = labels[np.argsort(score, kind="stable")]
    _, first = np.unique(seq, return_index=True)
    bounds = np.sort(first)
    return np.diff(np.append(bounds, len(seq))).tolist()


@pytest.mark.parametrize("name", ["micir", "micz", "micpcp"])
def test_leftover_end_is_the_default_and_unchanged(name, rng):
    X = rng.standard_normal((23, 3))
    default = REGISTRY[name](X, 5, rng=rng)
    end, lab = REGISTRY[name](X, 5, rng=rng, leftover="end", return_groups=True)
    np.testing.assert_array_equal(default, end)
    # as before the option existed: the 3 left over join the last group in sorted order
    if name == "micir":
        assert _group_sizes_in_order(lab[:, 0], X[:, 0]) == [5, 5, 5, 8]
    assert sorted(np.unique(lab[:, 0], return_counts=True)[1].tolist()) == [5, 5, 5, 8]


def test_leftover_middle_hand_example():
    x = np.arange(11.0)[::-1].copy()           # n = 11, k = 2: q = 5 groups, 1 left over
    y, lab = REGISTRY["micir"](x[:, None], 2, rng=None, leftover="middle",
                               return_groups=True)
    # sorted order 0..10 in q = 5 groups; group (5 - 1) // 2 = 2 (from 0), the third, takes
    # the left-over record: {0,1} {2,3} {4,5,6} {7,8} {9,10}
    assert _group_sizes_in_order(lab[:, 0], x) == [2, 2, 3, 2, 2]
    np.testing.assert_array_equal(y[:, 0], np.array(
        [9.5, 9.5, 7.5, 7.5, 5.0, 5.0, 5.0, 2.5, 2.5, 0.5, 0.5]))
    # a divisible n: no left-over, both choices agree
    X = np.arange(12.0)[:, None]
    np.testing.assert_array_equal(REGISTRY["micz"](X, 3, rng=None, leftover="middle"),
                                  REGISTRY["micz"](X, 3, rng=None))


@pytest.mark.parametrize("name", ["micir", "micz", "micpcp"])
def test_leftover_is_a_declared_method_option(name, small):
    from sdcdist.masking import options_of as for_method
    from sdcdist.options import validate_method_options
    assert "leftover" in [o.name for o in for_method(name)]
    assert validate_method_options(REGISTRY[name], {"leftover": "middle"}) == \
        {"leftover": "middle"}
    with pytest.raises(SdcInputError, match="The 'leftover' option .*must be one of 'end', "
                                            "'middle'. Got 'centre' instead."):
        validate_method_options(REGISTRY[name], {"leftover": "centre"})
    with pytest.raises(SdcInputError, match="must be one of 'end', 'middle'"):
        REGISTRY[name](small, 3, rng=None, leftover="centre")


def test_census_leftover_middle_reproduces_table2_k7(census):
    from sdcdist.metrics import measure
    X = census.values
    got = [round(measure(X, REGISTRY[m](X, 7, rng=None, leftover="middle"), ["DLD"],
                         columns=census.columns, options={"dld": "dmt"})["DLD"].value, 2)
           for m in ("micir", "micz", "micpcp")]
    assert got == [97.80, 4.27, 3.99]        # the paper: 97.79, 4.27, 4.02


def test_leftover_in_a_spec():
    from sdcdist.audit import parse_spec
    doc = {"name": "t", "seed": 1, "dataset": {"reference": "census"}, "metrics": ["DLD"],
           "methods": [{"name": "micz", "params": [7], "options": {"leftover": "middle"}}]}
    assert parse_spec(doc).methods[0].options == {"leftover": "middle"}
    doc["methods"][0]["options"] = {"leftover": "start"}
    with pytest.raises(SdcInputError, match="must be one of 'end', 'middle'. Got 'start'"):
        parse_spec(doc)
    doc["methods"] = [{"name": "micmul", "params": [7], "options": {"leftover": "middle"}}]
    with pytest.raises(SdcInputError, match="leftover"):
        parse_spec(doc)
