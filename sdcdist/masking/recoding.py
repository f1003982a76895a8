"""Global recoding of categorical columns (column selection in :mod:`.categorical`).

- ``recode`` (parameter w, the band width; 0: the mapping only): global
  recoding. The ``mapping`` option renames categories per column (several
  into one); then, for w > 0, categories whose labels are numbers are grouped
  into bands ``[origin + i w, origin + (i + 1) w)``. New categories get codes
  after the existing ones (labels in ``info["categories"]``).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from decimal import Decimal, InvalidOperation, localcontext
from typing import Any

import numpy as np

from ..errors import SdcInputError
from ._registry import register
from .categorical import category_codes, masked_columns

__all__ = ["recode_labels", "recode", "BAND_DIGITS"]


def _decimal(x: Any) -> Decimal:
    """A label or an option as an exact decimal (a float by its shortest repr: 0.1 is 0.1)."""
    return Decimal(repr(float(x))) if isinstance(x, float) else Decimal(str(x).strip())


#: Most digits a band's bounds may need (:func:`_band_digits`): labels such as 1e300 in
#: bands of width 1 write every digit of their band's bounds
BAND_DIGITS = 2000


def _band_digits(nums: Sequence[Decimal], w: Decimal, origin: Decimal) -> int:
    """Digits that hold every band bound of ``nums`` exactly: from the largest power of ten
    among the labels, the width and the origin down to the smallest digit any of them has."""
    xs = [x for x in (*nums, w, origin) if x != 0]
    if not xs:
        return 1
    return (max(x.adjusted() for x in xs) - min(x.as_tuple().exponent for x in xs)  # type: ignore[operator]
            + 4)


def _band_label(v: Decimal, w: Decimal, origin: Decimal, digits: int = 200) -> str:
    """``[lo,hi)`` with lo = origin + floor((v - origin) / w) w, in exact decimal arithmetic
    (``digits``: :func:`_band_digits`, at least 200), written in full (no exponent, no
    rounding: distinct bands never share a name)."""
    with localcontext() as ctx:
        ctx.prec = max(200, digits)
        lo = origin + ((v - origin) // w - (1 if (v - origin) % w < 0 else 0)) * w
        hi = lo + w
        # written in the same context: normalize() rounds to the context's precision
        return f"[{_plain(lo)},{_plain(hi)})"


def _plain(d: Decimal) -> str:
    s = format(d.normalize(), "f")
    return "0" if s in ("-0", "") else s


def recode_labels(labels: Sequence[str], w: float, *, mapping: Mapping[str, str] | None = None,
                  origin: float = 0.0, column: str = "") -> tuple[np.ndarray, list[str]]:
    """Where each code goes, and the labels after recoding.

    Returns
    -------
    target : ndarray of int, shape (L,)
        New code of each old code.
    labels : list of str
        The old labels followed by the new ones (codes of new labels come after).

    Raises
    ------
    SdcInputError
        A mapping naming a category the column does not have, or bands on
        labels that are not numbers.
    """
    labels = [str(x) for x in labels]
    unusable = [k for k, v in (mapping or {}).items()
                if v is None or isinstance(v, (bool, list, tuple, dict)) or not str(v).strip()]
    if unusable:
        raise SdcInputError(f"the recode mapping of column {column!r} gives {len(unusable)} "
                            f"categor{'y' if len(unusable) == 1 else 'ies'} no usable new "
                            "label (null, empty, true/false, a list or a mapping); give each "
                            "a non-empty text or a number")
    mapping = {str(k): str(v) for k, v in (mapping or {}).items()}
    unknown = [k for k in mapping if k not in set(labels)]
    if unknown:
        raise SdcInputError(f"the recode mapping of column {column!r} names {len(unknown)} "
                            f"categor{'y' if len(unknown) == 1 else 'ies'} the column does not "
                            f"have (it has {len(labels)}); map only existing categories")
    new = [mapping.get(x, x) for x in labels]
    if w > 0:
        try:
            nums = [_decimal(x) for x in new]
            if not all(x.is_finite() for x in nums):
                raise InvalidOperation
        except (InvalidOperation, ValueError):
            raise SdcInputError(f"recode into bands needs numeric categories, and column "
                                f"{column!r} has categories that are not numbers; give a "
                                "'mapping' instead (w = 0)") from None
        wd, od = _decimal(float(w)), _decimal(float(origin))
        digits = _band_digits(nums, wd, od)
        if digits > BAND_DIGITS:
            raise SdcInputError(f"recode into bands of width {w:g} would write band bounds of "
                                f"more than {BAND_DIGITS:,} digits for column {column!r}: its "
                                "categories span too many orders of magnitude for that width; "
                                "choose a wider band (w), or map the categories (the "
                                "'mapping' option) first")
        new = [_band_label(v, wd, od, digits) for v in nums]
    out = list(labels)
    index = {x: i for i, x in enumerate(out)}
    target = np.empty(len(labels), dtype=np.int64)
    for i, lab in enumerate(new):
        if lab == labels[i]:
            target[i] = i
            continue
        if lab not in index:
            index[lab] = len(out)
            out.append(lab)
        target[i] = index[lab]
    return target, out


def _check_recode_data(X: np.ndarray, params: Sequence[float], *, method: str,
                       categorical: Sequence[int], options: Mapping[str, Any],
                       **_: Any) -> None:
    """Data check of recode: deterministic and one pass over the data, so it is run, and
    what depends on the labels (bands on text, a mapping naming an absent category) is
    refused before an audit starts rather than on a worker."""
    from ._registry import get_method
    meth = get_method(method)
    rng = np.random.default_rng(0)
    own = {k: v for k, v in options.items() if k != "info"}
    for p in params:
        meth(X, p, rng=rng, categorical=list(categorical), **own)


@register("recode", param="w", kind="float", low=0.0, high=1e12, random=False,
          acts_on="categorical", data_check=_check_recode_data,
          options=("variables", "columns", "roles", "mapping", "origin", "labels", "info"),
          allowed="a band width in [0, 1e12] (0: the mapping only)",
          description="global recoding of categorical columns: a mapping of categories, "
                      "then numeric categories into bands of width w",
          reference="Willenborg and de Waal (2001)")
def recode(X: np.ndarray, w: float, *, rng: np.random.Generator,
           categorical: Sequence[int] = (), variables: Sequence[str] | None = None,
           columns: Sequence[str] | None = None,
           roles: Mapping[str, Sequence[int]] | None = None,
           mapping: Mapping[str, Mapping[str, str]] | None = None, origin: float = 0.0,
           labels: Mapping[str, Sequence[str]] | None = None,
           info: dict | None = None) -> np.ndarray:
    """Global recoding. ``labels``: each categorical column's labels (default: the codes
    as labels). Returns (n, m); new category labels in ``info["categories"]``."""
    out = X.copy()
    cols = list(columns) if columns else [f"V{j + 1}" for j in range(X.shape[1])]
    mapping = dict(mapping or {})
    targets = masked_columns("recode", X, categorical, variables, columns, roles)
    if mapping:
        from ..errors import column_positions
        pos = column_positions(list(mapping), cols, what="column",
                               where="the 'mapping' option of recode")
        bad = [cols[j] for j in pos if j not in set(targets)]
        if bad:
            raise SdcInputError(f"the recode mapping names {bad}, which recode does not mask "
                                "(list them in 'variables', and declare them categorical)")
    if w == 0 and not mapping:
        raise SdcInputError("recode with w = 0 needs a 'mapping' (else nothing changes); "
                            "give a band width w > 0 or a mapping")
    new_labels: dict[str, list[str]] = {}
    for j in targets:
        name = cols[j]
        c, ok, L = category_codes(X[:, j])
        labs = list((labels or {}).get(name) or [str(i) for i in range(L)])
        if name not in mapping and w == 0:
            continue
        target, labs2 = recode_labels(labs, w, mapping=mapping.get(name), origin=origin,
                                      column=name)
        out[ok, j] = target[c[ok]].astype(np.float64)
        new_labels[name] = labs2
    if info is not None:
        info["categories"] = new_labels
    return out

