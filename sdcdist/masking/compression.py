"""Lossy compression: the file as a grayscale image, through baseline JPEG and back."""

from __future__ import annotations

import io

import numpy as np
from PIL import Image

from ._columns import check_not_constant
from ._registry import register

__all__ = ["jpeg", "jpeg_roundtrip", "MAX_STRIP_ROWS"]

#: JPEG images are at most 65500 pixels high (libjpeg); taller files are coded in strips of this
#: many rows. It is a multiple of 8, and JPEG codes each 8 x 8 block on its own, so the
#: strips decode exactly as one tall image would.
MAX_STRIP_ROWS = 65496


def jpeg_roundtrip(img: np.ndarray, quality: int) -> np.ndarray:
    """Encode an 8-bit grayscale image (h, w) as baseline JPEG at ``quality`` and decode it."""
    out = np.empty_like(img)
    for a in range(0, img.shape[0], MAX_STRIP_ROWS):
        strip = np.ascontiguousarray(img[a:a + MAX_STRIP_ROWS])
        buf = io.BytesIO()
        Image.fromarray(strip).save(buf, format="JPEG", quality=int(quality),
                                              optimize=False, progressive=False)
        buf.seek(0)
        with Image.open(buf) as im:
            out[a:a + strip.shape[0]] = np.asarray(im.convert("L"))
    return out


def _check_jpeg_data(X: np.ndarray, params: object, **_: object) -> None:
    """Data check of jpeg: no constant column."""
    check_not_constant(X, "jpeg", "jpeg maps each column's range [min, max] onto 0..255")


@register("jpeg", param="q", kind="int", low=1, high=100, random=False,
          allowed="an integer in [1, 100]", data_check=_check_jpeg_data,
          description="lossy compression: the file as a grayscale image (columns scaled to "
                      "0..255) through baseline JPEG at quality q",
          reference="[DMT §2]")
def jpeg(X: np.ndarray, q: int, *, rng: np.random.Generator | None = None) -> np.ndarray:
    """JPEG masking (Domingo-Ferrer and Torres).

    The file is a grayscale image with records as rows (file order) and
    variables as columns; each column is mapped linearly from [min, max] to
    0..255 and rounded, coded as baseline JPEG at quality q (Pillow),
    decoded and mapped back to [min, max].

    Parameters
    ----------
    X : ndarray, shape (n, m)
        Original data. Not modified. No column may be constant.
    q : int
        JPEG quality, 1 (most loss) .. 100.
    rng : ignored (the method is deterministic)

    Returns
    -------
    ndarray, shape (n, m)
        Values on the grid min + g (max - min)/255, g = 0..255, per column.

    Raises
    ------
    SdcInputError
        If a column is constant.
    """
    check_not_constant(X, "jpeg", "jpeg maps each column's range [min, max] onto 0..255")
    lo = X.min(axis=0)
    span = X.max(axis=0) - lo
    img = np.rint((X - lo) / span * 255.0).astype(np.uint8)
    dec = jpeg_roundtrip(img, q)
    return lo + dec.astype(np.float64) / 255.0 * span
