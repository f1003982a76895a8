"""PRAM as sdcMicro's ``pram`` (invariant, pd and alpha), its memory, and recode's bands.

Reference matrices: sdcMicro 5.8.1 (R), ``set.seed(42); pram(x, pd, alpha)`` on the factor
x = 5 x "a", 3 x "b", 1 x "c", 11 x "d", with ``attr(res, "pram_params")$x$Rs``; the diagonal of
P is the same draw, ``set.seed(42); runif(4, pd, 1)``.
"""

from __future__ import annotations

import tracemalloc

import numpy as np
import pandas as pd
import pytest

from sdcdist import SdcInputError
from sdcdist.data.refdata import reference_file
from sdcdist.masking import REGISTRY
from sdcdist.masking import pram as prammod
from sdcdist.masking.pram import invariant_matrix, pram_column, pram_matrix
from sdcdist.masking.recoding import recode_labels
from sdcdist.masking.suppression import frequencies_wildcard, suppress_greedy

FREQ = np.array([5.0, 3, 1, 11])
SDCMICRO_5_8_1 = [
    (0.8, 0.5, [0.98296120869927106, 0.98741508265957234, 0.8572279069572688, 0.96608952521346514],
     [[0.97380874023790687, 0.0039111570930618839, 0.0070228855290064137, 0.015257217140024855],
      [0.0065185951551031398, 0.96246803672317915, 0.0092166239391530888, 0.021796744182564571],
      [0.035114427645032073, 0.02764987181745927, 0.86000334597646733, 0.077232354561041272],
      [0.0069350987000112978, 0.0059445665952448839, 0.0070211231419128432, 0.98009921156283109]]),
    (0.6, 1, [0.96592241739854212, 0.97483016531914468, 0.71445581391453739, 0.93217905042693017],
     [[0.89822912534763077, 0.014968108215817831, 0.025879216650824793, 0.060923549785726436],
      [0.024946847026363048, 0.85763360652796938, 0.033870004267384936, 0.083549542178282574],
      [0.12939608325412397, 0.10161001280215479, 0.49375584324777355, 0.27523806069594764],
      [0.027692522629875663, 0.022786238775895248, 0.025021641881449785, 0.92449959671277926]]),
    (0.05, 0.7, [0.91906574132153762, 0.9402216426329687, 0.32183255804702637, 0.83892524476395924],
     [[0.84353818875356645, 0.02228609075836617, 0.033642447683077642, 0.10053327280498976],
      [0.037143484597276961, 0.79312543586918771, 0.044398672036306569, 0.12533240749722871],
      [0.16821223841538827, 0.13319601610891965, 0.38521620600193346, 0.31337553947375862],
      [0.045696942184086251, 0.034181565681062377, 0.028488685406705329, 0.89163280672814604]]),
]


@pytest.mark.parametrize("pd_, alpha, diag, Rs", SDCMICRO_5_8_1)
def test_transition_matrix_is_sdcmicros(pd_, alpha, diag, Rs):
    R = pram_matrix(FREQ, pd_, alpha, diag=np.array(diag))
    np.testing.assert_allclose(R, np.array(Rs), rtol=1e-12, atol=1e-15)


@pytest.mark.parametrize("diag", [[0.9, 0.8, 0.95, 0.85], [0.1, 0.9, 0.2, 0.05]])
def test_rows_without_the_matrix_equal_the_dense_construction(diag):
    """The rows the sampler uses (O(L) each) are those of alpha PQ + (1 - alpha) I, also when
    a diagonal entry is below 1/L (no mixture: rows one by one)."""
    d = np.array(diag)
    D, c, g = prammod._structure_sdcmicro(4, d)
    inv = prammod._Invariant(D, c, g, FREQ / FREQ.sum(), 0.7)
    P = np.diag(d) + np.outer((1 - d) / 3, np.ones(4)) - np.diag((1 - d) / 3)
    dense = invariant_matrix(P, FREQ, 0.7)
    np.testing.assert_allclose(np.array([inv.row(i) for i in range(4)]), dense, atol=1e-15)


@pytest.mark.parametrize("diag", [[0.9, 0.8, 0.95, 0.85], [0.1, 0.9, 0.2, 0.05]])
def test_sampled_transitions_follow_the_matrix(diag):
    """Both samplers (mixture, rows one by one) draw each category's row of Rs."""
    d = np.array(diag)
    D, c, g = prammod._structure_sdcmicro(4, d)
    inv = prammod._Invariant(D, c, g, FREQ / FREQ.sum(), 0.7)
    R = inv.matrix()
    m = 40_000
    codes = np.repeat(np.arange(4), m)
    new = inv.sample(codes, np.random.default_rng(5))
    for i in range(4):
        obs = np.bincount(new[codes == i], minlength=4) / m
        se = np.sqrt(R[i] * (1 - R[i]) / m) + 1e-12
        assert (np.abs(obs - R[i]) < 5 * se).all(), (i, obs, R[i])


def _household() -> np.ndarray:
    df = pd.read_csv(reference_file("household"))
    cols = ["urbrur", "roof", "water", "relat"]
    X = np.column_stack([pd.factorize(df[c], sort=True)[0] for c in cols]).astype(float)
    return X


@pytest.mark.slow
def test_pram_keeps_expected_counts_on_household():
    """200 replicates of pram (pd = 0.8, alpha = 0.5, sdcMicro's defaults) on household's
    urbrur, roof, water and relat: every category's mean count within 4 standard errors of
    the original count (the frequency construction, pram_freq, shifts urbrur's by ~650)."""
    X = _household()
    reps = 200
    for j in range(X.shape[1]):
        L = int(X[:, j].max()) + 1
        f = np.bincount(X[:, j].astype(int), minlength=L)
        counts = np.array([np.bincount(pram_column(X[:, j], 0.8, rng=np.random.default_rng(s))
                                       .astype(int), minlength=L) for s in range(reps)])
        se = counts.std(axis=0, ddof=1) / np.sqrt(reps)
        z = (counts.mean(axis=0) - f) / np.where(se > 0, se, 1.0)
        assert (np.abs(z) < 4).all(), (j, z)
        assert ((se > 0) | (counts.mean(axis=0) == f)).all()


def test_pd_is_the_least_share_kept():
    """pram's pd bounds the share kept below: at pd = 0.8, alpha = 1, at most ~20 % change."""
    X = _household()
    Y = REGISTRY["pram"](X, 0.8, rng=np.random.default_rng(1), categorical=[0, 1, 2, 3],
                         alpha=1.0)
    assert ((Y != X).mean(axis=0) < 0.22).all()


def test_pram_memory_is_linear_with_many_categories():
    """100,000 categories at 200,000 records: no L x L or n x L array (was a MemoryError)."""
    rng = np.random.default_rng(0)
    x = rng.integers(0, 100_000, 200_000).astype(float)
    x[:5] = np.nan
    tracemalloc.start()
    y = pram_column(x, 0.8, rng=rng)
    peak = tracemalloc.get_traced_memory()[1]
    tracemalloc.stop()
    assert peak < 60e6, peak
    assert np.isnan(y[:5]).all() and not np.isnan(y[5:]).any()
    assert 0.05 < (y[5:] != x[5:]).mean() < 0.2


def test_rows_one_by_one_are_refused_past_the_bound(monkeypatch):
    monkeypatch.setattr(prammod, "ROW_BY_ROW_LIMIT", 3)
    x = np.repeat(np.arange(4.0), 10)
    # pd = 0: some diagonal entries fall below 1/L = 0.25 for this seed
    assert (prammod.pram_diagonal(4, 0.0, np.random.default_rng(2)) < 0.25).any()
    with pytest.raises(SdcInputError, match="refused beyond 3 categories.*raise pd"):
        pram_column(x, 0.0, rng=np.random.default_rng(2))


def test_alpha_is_checked():
    X = np.repeat(np.arange(3.0), 4)[:, None]
    with pytest.raises(SdcInputError, match="'alpha' parameter of pram"):
        REGISTRY["pram"](X, 0.8, rng=np.random.default_rng(0), categorical=[0], alpha=1.5)


# -- recode bands ---------------------------------------------------------------------------

def test_float_labels_land_in_their_band():
    _, labs = recode_labels(["0.3", "0.7", "-0.25", "0.1"], 0.1)
    assert labs[4:] == ["[0.3,0.4)", "[0.7,0.8)", "[-0.3,-0.2)", "[0.1,0.2)"]
    _, labs = recode_labels(["0.3", "1.0"], 0.1, origin=0.05)
    assert labs[2:] == ["[0.25,0.35)", "[0.95,1.05)"]


def test_large_labels_get_distinct_band_names():
    labels = [str(v) for v in range(1234567, 1234571)]
    target, labs = recode_labels(labels, 1)
    assert len(set(target)) == 4
    assert labs[4:] == ["[1234567,1234568)", "[1234568,1234569)", "[1234569,1234570)",
                        "[1234570,1234571)"]
    target, labs = recode_labels(["1e7", "10000001"], 1)
    assert labs[2:] == ["[10000000,10000001)", "[10000001,10000002)"]


def test_non_finite_labels_are_refused():
    with pytest.raises(SdcInputError, match="needs numeric categories"):
        recode_labels(["1", "nan"], 1)


# -- local suppression ----------------------------------------------------------------------

# sdcMicro 5.8.1, localSuppression(df, keyVars = HH_KEYS, k = k) on household with the keys as
# factors (default importance): values suppressed.
SDCMICRO_5_8_1_SUPPRESSED = {3: 293, 5: 500}
HH_KEYS = ["urbrur", "roof", "walls", "water", "electcon", "relat", "sex"]


@pytest.mark.parametrize("k", [3, 5])
def test_suppression_no_more_than_sdcmicro_on_household(k):
    df = pd.read_csv(reference_file("household"))
    X = np.column_stack([pd.factorize(df[c], sort=True)[0] for c in HH_KEYS]).astype(float)
    info: dict = {}
    Y = REGISTRY["suppress"](X, k, rng=np.random.default_rng(0),
                             categorical=list(range(len(HH_KEYS))), info=info)
    assert info["suppressed"] == int(np.isnan(Y).sum())
    assert info["suppressed"] <= SDCMICRO_5_8_1_SUPPRESSED[k]
    fk, _ = frequencies_wildcard(Y)
    assert fk.min() >= k
    # records that start safe are untouched
    fk0, _ = frequencies_wildcard(X)
    assert (Y[fk0 >= k] == X[fk0 >= k]).all()


def test_suppression_gives_back_values_not_needed():
    """Two records differ from a class of 3 in one key each: the greedy step suppresses a
    key of theirs per round; the give-back keeps only what k = 3 needs."""
    X = np.array([[0, 0, 0]] * 3 + [[0, 0, 1], [0, 1, 0]], dtype=float)
    out, total, unsafe = suppress_greedy(X, 3)
    fk, _ = frequencies_wildcard(out)
    assert fk.min() >= 3 and unsafe == 2
    assert total == 2                      # one value each, the one that differs
    assert np.isnan(out[3, 2]) and np.isnan(out[4, 1])


def test_importance_orders_the_keys():
    X = np.array([[0, 0]] * 3 + [[1, 1]], dtype=float)
    out, total, _ = suppress_greedy(X, 2, importance=[1, 2])   # key 2 suppressed first
    assert total == 2            # {1, 1} alone: one key is not enough, both go
    with pytest.raises(SdcInputError, match="'importance' option of suppress must be the integers"):
        suppress_greedy(X, 2, importance=[1, 1])
