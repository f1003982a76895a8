"""Local suppression: k-anonymity on arbitrary inputs, a give-back pass that leaves nothing
restorable, and the indexed pass against the plain scan it replaces (bit for bit)."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import sdcdist.masking.suppression as sup
from sdcdist.masking.suppression import frequencies_wildcard, suppress_greedy


def _scan_give_back(orig, out, k, order):
    """The give-back pass as a plain scan over all n records per suppressed value (the
    previous implementation, O(n q) per value): the reference for the indexed pass."""
    n, q = out.shape
    sup = np.argwhere(np.isnan(out) & ~np.isnan(orig))
    if sup.shape[0] == 0:
        return
    fk = frequencies_wildcard(out)[0].astype(np.int64)
    rank = np.empty(q, dtype=np.int64)
    rank[order] = np.arange(q)
    sup = sup[np.lexsort((sup[:, 0], -rank[sup[:, 1]]))]
    for r, j in sup:
        row = out[r]
        match = np.ones(n, dtype=bool)
        for jj in range(q):
            if jj != j and not np.isnan(row[jj]):
                col = out[:, jj]
                match &= np.isnan(col) | (col == row[jj])
        v = orig[r, j]
        col = out[:, j]
        keep = match & (np.isnan(col) | (col == v))
        nk = int(keep.sum())
        if nk < k:
            continue
        lost = match & ~keep
        if lost.any() and int(fk[lost].min()) - 1 < k:
            continue
        fk[lost] -= 1
        out[r, j] = v
        fk[r] = nk


def _reference(codes, k, importance=None):
    orig = np.array(codes, dtype=np.float64)
    order = sup._suppression_order(orig, importance)
    out, _ = sup._greedy(orig, k, order)
    greedy = int((np.isnan(out) & ~np.isnan(orig)).sum())
    _scan_give_back(orig, out, k, order)
    return out, greedy


def _random_file(rng, n, levels, missing=0.0):
    X = np.column_stack([rng.integers(0, L, n) for L in levels]).astype(float)
    if missing:
        X[rng.random(X.shape) < missing] = np.nan
    return X


def _check(X, out, total, unsafe, k):
    """k-anonymity (missing as wildcard), only NaN added, safe records untouched, bound."""
    fk, _ = frequencies_wildcard(out)
    assert fk.min() >= k
    keep = ~np.isnan(out)
    assert (out[keep] == X[keep]).all()
    added = np.isnan(out) & ~np.isnan(X)
    assert total == int(added.sum()) <= X.shape[1] * unsafe
    fk0, _ = frequencies_wildcard(X)
    assert unsafe == int((fk0 < k).sum())
    assert not added[fk0 >= k].any()


@st.composite
def _files(draw):
    n = draw(st.integers(3, 60))
    q = draw(st.integers(1, 4))
    levels = draw(st.lists(st.integers(1, 5), min_size=q, max_size=q))
    seed = draw(st.integers(0, 2**32 - 1))
    missing = draw(st.sampled_from([0.0, 0.0, 0.1, 0.3]))
    k = draw(st.integers(2, min(5, n)))
    imp = draw(st.permutations(list(range(1, q + 1))) | st.none())
    return _random_file(np.random.default_rng(seed), n, levels, missing), k, imp


@pytest.mark.slow
@settings(max_examples=25, deadline=None)
@given(_files())
def test_k_anonymity_and_the_same_result_as_the_scan(case):
    X, k, imp = case
    out, total, unsafe = suppress_greedy(X, k, importance=imp)
    _check(X, out, total, unsafe, k)
    ref, _ = _reference(X, k, imp)
    assert out.tobytes() == ref.tobytes()


def _restorable(X, out, k):
    """(record, key) of every suppressed value that could be given back alone."""
    found = []
    for r, j in np.argwhere(np.isnan(out) & ~np.isnan(X)):
        Y = out.copy()
        Y[r, j] = X[r, j]
        if frequencies_wildcard(Y)[0].min() >= k:
            found.append((int(r), int(j)))
    return found


@pytest.mark.parametrize("seed", range(4))
def test_nothing_left_suppressed_that_could_be_given_back(seed):
    """Brute force: restore each suppressed value alone and recount every record."""
    rng = np.random.default_rng(seed)
    n = int(rng.integers(30, 80))
    X = _random_file(rng, n, (6, 4, 3, 2), missing=0.05 * (seed % 2))
    k = 2 + seed % 3
    out, total, unsafe = suppress_greedy(X, k)
    _check(X, out, total, unsafe, k)
    assert total > 0
    assert _restorable(X, out, k) == []
    # the greedy result alone is not maximal: the pass did something
    order = sup._suppression_order(X, None)
    greedy, _ = sup._greedy(X, k, order)
    assert _restorable(X, greedy, k) != []


@pytest.mark.parametrize("k, imp", [(2, None), (3, [5, 4, 3, 2, 1]), (5, [2, 5, 1, 4, 3])])
def test_indexed_pass_equals_the_scan_with_missing_values_and_importance(k, imp):
    rng = np.random.default_rng(k)
    X = _random_file(rng, 250, (12, 7, 5, 3, 2), missing=0.03)
    out, total, unsafe = suppress_greedy(X, k, importance=imp)
    ref, greedy = _reference(X, k, imp)
    assert out.tobytes() == ref.tobytes()
    assert total < greedy
    _check(X, out, total, unsafe, k)


@pytest.mark.slow
def test_sparse_file_beyond_the_old_cap_gets_its_values_back():
    """A sparse file where n x (values the greedy step suppresses) exceeds 2e7: the plain
    scan was skipped there and the greedy result stood; the indexed pass runs (and gives
    what the scan gives, bit for bit)."""
    rng = np.random.default_rng(1)
    X = _random_file(rng, 3000, (8,) * 7)
    ref, greedy = _reference(X, 3)
    assert X.shape[0] * greedy > 2e7
    out, total, unsafe = suppress_greedy(X, 3)
    assert out.tobytes() == ref.tobytes()
    assert total < greedy / 3
    _check(X, out, total, unsafe, 3)


def test_records_with_every_key_missing_and_one_key():
    X = np.array([[np.nan, np.nan], [0, 1], [0, 1], [1, 0], [2, 2], [2, 2]], dtype=float)
    out, total, unsafe = suppress_greedy(X, 3)
    _check(X, out, total, unsafe, 3)
    assert out.tobytes() == _reference(X, 3)[0].tobytes()
    Z = np.array([[0], [0], [1], [2], [2], [2]], dtype=float)
    out, total, unsafe = suppress_greedy(Z, 2)
    _check(Z, out, total, unsafe, 2)
    assert total == 1 and np.isnan(out[2, 0])


@pytest.mark.parametrize("k, sdcmicro", [(3, 293), (5, 500)])
def test_household_with_sdcmicros_importance(k, sdcmicro):
    """sdcMicro's default importance given explicitly (fewest categories most important,
    ties in column order): no more values than sdcMicro 5.8.1's localSuppression."""
    import pandas as pd
    from sdcdist.data import reference_file
    keys = ["urbrur", "roof", "walls", "water", "electcon", "relat", "sex"]
    df = pd.read_csv(reference_file("household"))
    X = np.column_stack([pd.factorize(df[c], sort=True)[0] for c in keys]).astype(float)
    imp = [1, 5, 3, 6, 4, 7, 2]                    # by 2, 5, 3, 8, 3, 9, 2 categories
    out, total, unsafe = suppress_greedy(X, k, importance=imp)
    _check(X, out, total, unsafe, k)
    assert total <= sdcmicro
