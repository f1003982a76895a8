"""JPEG masking: near-lossless at q = 100, loss growing as q falls, strips exact."""

from __future__ import annotations

import numpy as np
import pytest

from sdcdist import SdcInputError
from sdcdist.masking import REGISTRY
from sdcdist.masking import compression


def test_q100_within_quantisation(census):
    X = census.values
    Y = REGISTRY["jpeg"](X, 100, rng=None)
    step = (X.max(0) - X.min(0)) / 255
    # 8-bit rounding (half a level) plus the DCT's own rounding at q = 100 (one level)
    assert np.all(np.abs(Y - X) <= 1.5 * step * (1 + 1e-12))
    # values land on the 256-level grid of each column
    g = (Y - X.min(0)) / step
    np.testing.assert_allclose(g, np.rint(g), atol=1e-6)
    assert np.all(Y.min(0) >= X.min(0) - 1e-9 * np.abs(X).max())


def test_mse_grows_as_quality_falls(census):
    X = census.values
    mse = [np.mean((REGISTRY["jpeg"](X, q, rng=None) - X) ** 2) for q in (100, 90, 50, 10)]
    assert mse[0] < mse[1] < mse[2] < mse[3]


def test_strips_decode_as_one_image(monkeypatch, rng):
    # tall files are coded in strips (JPEG images are at most 65500 pixels high);
    # JPEG codes 8 x 8 blocks independently, so strips must give the same pixels
    img = np.cumsum(rng.integers(-3, 4, (1000, 13)), axis=0).clip(0, 255).astype(np.uint8)
    whole = compression.jpeg_roundtrip(img, 50)
    monkeypatch.setattr(compression, "MAX_STRIP_ROWS", 496)
    assert np.array_equal(compression.jpeg_roundtrip(img, 50), whole)
    assert compression.MAX_STRIP_ROWS % 8 == 0


def test_constant_column_rejected(small):
    X = small.copy()
    X[:, 2] = 7.0
    with pytest.raises(SdcInputError, match=r"Column\(s\) \[3\] are constant in the array given to jpeg \(1-based"):
        REGISTRY["jpeg"](X, 50, rng=None)


@pytest.mark.parametrize("q", [0, 101, 50.5])
def test_bad_q(small, q):
    with pytest.raises(SdcInputError, match=r"The 'q' parameter of jpeg must be an integer in "
                                            r"\[1, 100\]"):
        REGISTRY["jpeg"](small, q, rng=None)
