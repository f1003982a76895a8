"""Linkage kernels and drivers: blocked results equal the brute-force numpy computation."""

from __future__ import annotations

import numpy as np
import pytest

from sdcdist.linkage import kernels
from sdcdist.linkage.drivers import distance_link_counts, row_truth
from sdcdist.parallel import Runner


def brute_force_credit(Q, C, truth):
    """Expected nearest / second-nearest hits under random tie-breaking, all pairs at once."""
    D = kernels.sq_distances(Q, C)
    first = second = 0.0
    for i in range(Q.shape[0]):
        t = truth[i]
        if t < 0:
            continue
        less = np.count_nonzero(D[i] < D[i, t])
        eq = np.count_nonzero(D[i] == D[i, t])
        # the true record's position is uniform in less+1 .. less+eq
        if less == 0:
            first += 1 / eq
        if less <= 1 < less + eq:
            second += 1 / eq
    return first, second


def _data(rng, n_q, n_c, ties):
    if ties:
        C = rng.integers(0, 3, size=(n_c, 2)).astype(float)
        Q = C[np.arange(n_q) % n_c] + rng.integers(-1, 2, size=(n_q, 2))
    else:
        C = rng.standard_normal((n_c, 3))
        Q = C[np.arange(n_q) % n_c] + 0.5 * rng.standard_normal((n_q, 3))
    return Q, C


@pytest.mark.parametrize("ties", [False, True])
@pytest.mark.parametrize("blocks", [(1, 1), (7, 13), (50, 200), (1000, 1000)])
def test_blocked_equals_brute_force(rng, ties, blocks):
    Q, C = _data(rng, 120, 150, ties)
    truth = row_truth(120, 150)
    ref = brute_force_credit(Q, C, truth)
    out = distance_link_counts(Runner(), Q, C, 120, 150, Q.shape[1], block_rows=blocks)
    assert out["first"] == pytest.approx(ref[0], abs=1e-12)
    assert out["second"] == pytest.approx(ref[1], abs=1e-12)


def test_blocked_on_cluster_is_bit_identical(rng, client):
    Q, C = _data(rng, 90, 80, True)
    truth = row_truth(90, 80)              # the last 10 masked records have no true record
    ref = distance_link_counts(Runner(), Q, C, 90, 80, 2, block_rows=(1000, 1000))
    for blocks in [(9, 11), (30, 7), (90, 80)]:
        out = distance_link_counts(Runner(client), Q, C, 90, 80, 2, block_rows=blocks)
        assert out == ref
    assert ref["first"] == pytest.approx(brute_force_credit(Q, C, truth)[0], abs=1e-12)


def test_merge_top2_is_order_free(rng):
    D = rng.integers(0, 4, size=(30, 40)).astype(float)
    whole = kernels.block_top2(D)
    parts = [kernels.block_top2(D[:, s]) for s in (slice(0, 9), slice(9, 25), slice(25, 40))]
    for merged in (kernels.merge_top2(*parts), kernels.merge_top2(parts[2], parts[0], parts[1]),
                   kernels.merge_top2(kernels.merge_top2(parts[0], parts[1]), parts[2])):
        for k in whole:
            assert np.array_equal(whole[k], merged[k]), k
