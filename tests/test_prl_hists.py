"""The rank kernel's uint16 counters are read sparsely (:func:`sparse_of_hists`): the
same codes and counts as adding them to the uint32 wraps and reading the sum."""

from __future__ import annotations

import numpy as np
import pytest

from sdcdist.linkage.prl import hists


@pytest.mark.parametrize("case", ["plain", "wrapped_to_zero", "flushed", "tail", "empty"])
@pytest.mark.parametrize("tell_pairs", [True, False])
def test_sparse_of_hists_equals_the_summed_histograms(case, tell_pairs):
    rng = np.random.default_rng(7)
    P = 4099 if case == "tail" else 4096
    h = np.zeros((1, P), dtype=np.uint32)
    h16 = np.zeros(P, dtype=np.uint16)
    total = np.zeros(0, dtype=np.int64)
    if case != "empty":
        codes = rng.integers(0, P, 300)
        np.add.at(h16, codes, rng.integers(1, 500, 300).astype(np.uint16))
        h16[P - 1] = 3                      # the last code (a tail past the last 4)
    h[0, 5] = 65536                         # a wrap whose counter is non-zero
    h16[5] = 2
    if case == "wrapped_to_zero":
        h[0, 17] = 2 * 65536                # wrapped to exactly 0: only h holds it
        h16[17] = 0
    if case == "flushed":
        total = np.zeros(P, dtype=np.int64)
        total[[3, 5, 4000]] = [10, 20, 30]  # 4000 counted only before the flush
        h16[4000] = 0
    pairs = int(h16.sum(dtype=np.int64) + h.sum(dtype=np.int64) + total.sum())
    ref_h = h.copy()
    ref_h[0] += h16
    want = hists.sparse_of_hist(total, ref_h)
    got = hists.sparse_of_hists(total, h, h16, pairs if tell_pairs else None)
    assert np.array_equal(got[0], want[0]) and np.array_equal(got[1], want[1])
    assert got[0].dtype == np.int64 and got[1].dtype == np.int64


def test_nonzero_u16_matches_flatnonzero():
    rng = np.random.default_rng(1)
    for P in (0, 1, 3, 4, 5, 1001):
        x = np.zeros(P, dtype=np.uint16)
        if P:
            x[rng.integers(0, P, max(1, P // 7))] = 1
        assert np.array_equal(hists.nonzero_u16(x), np.flatnonzero(x))


@pytest.mark.parametrize("P", [0, 5, 4099, 40_003])
def test_counters_read_and_zeroed_in_parts_on_threads(P, monkeypatch):
    """With a map (two threads) the counters are read in parts side by side: the same
    positions and counts as np.flatnonzero, whatever the parts hold (an empty part, the
    tail past the last whole word, a buffer that grows); read_hists adds the wraps and
    then zeroes exactly the counters and wraps it used."""
    from sdcdist.parallel import thread_pool
    monkeypatch.setattr(hists, "NONZERO_PMAP_MIN", 0)
    rng = np.random.default_rng(P)
    x = np.zeros(P, dtype=np.uint16)
    if P:
        x[rng.integers(P // 3, P, max(1, P // 5))] = rng.integers(1, 60_000, max(1, P // 5))
        x[-1] = 7
    with thread_pool(2) as pmap:
        for parts in (1, 3, 4, 7):
            monkeypatch.setattr(hists, "NONZERO_PARTS", parts)
            for expect in (0, P // 5):
                nz, c = hists.nonzero_u16(x, counts=True, expect=expect, pmap=pmap)
                assert np.array_equal(nz, np.flatnonzero(x)) and nz.dtype == np.int64
                assert np.array_equal(c, x[nz].astype(np.int64)) and c.dtype == np.int64
        monkeypatch.setattr(hists, "HIST_KEEP_MIN", 0)
        h = np.zeros((1, P), dtype=np.uint32)
        nz = np.flatnonzero(x)
        h[0, nz[::3]] = 65536 * rng.integers(1, 4, nz[::3].size)     # counters that wrapped
        want = x[nz].astype(np.int64) + h[0, nz]
        h16 = x.copy()
        got = hists.read_hists(np.zeros(0, dtype=np.int64), h, h16,
                               int(want.sum()), pmap=pmap)
    assert np.array_equal(got[0], nz) and np.array_equal(got[1], want)
    assert not h16.any() and not h.any()               # zeroed where used, kept
    hists.release_hists()
