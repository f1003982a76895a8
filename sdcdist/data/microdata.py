"""In-memory microdata: the :class:`Microdata` record, its checks and fingerprints."""

from __future__ import annotations

import hashlib
import os
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from ..errors import bad_values_error, column_positions, value_error
from .validate import check_values

__all__ = ["Microdata", "align_categories", "from_array", "check_typed", "values_fingerprint",
           "file_sha256", "file_sha256_in_background", "is_store", "DEFAULT_CHUNK_ROWS"]

DEFAULT_CHUNK_ROWS = 65_536


@dataclass
class Microdata:
    """An in-memory microdata file.

    Attributes
    ----------
    values : ndarray, shape (n, m), float64
    columns : tuple of str, length m
    roles : dict
        ``{"key": [...], "confidential": [...], "weight": [...]}`` column names,
        possibly empty.
    sha256 : str or None
        Fingerprint of the source file (or of the values when built in memory).
    categories : dict
        ``{column: [label, ...]}`` for the categorical columns: their values are
        the codes 0..L-1 of these labels (NaN where missing); see
        :mod:`sdcdist.data.types`. Columns not listed are numeric.
    control : ndarray or None
        Records held out of masking (the audit's ``control`` share): the control
        set of the singling-out, linkability and inference attacks, shape
        ``(n_c, m)``; ``values`` then holds the other records.
    """

    values: np.ndarray
    columns: tuple[str, ...]
    roles: dict[str, list[str]] = field(default_factory=dict)
    sha256: str | None = None
    categories: dict[str, list[str]] = field(default_factory=dict)
    control: np.ndarray | None = None

    @property
    def categorical(self) -> list[str]:
        """Names of the categorical columns, in column order."""
        return [c for c in self.columns if c in self.categories]

    @property
    def weight(self) -> str | None:
        """The weight column's name, or None."""
        w = self.roles.get("weight") or []
        return w[0] if w else None

    @property
    def household(self) -> str | None:
        """The household id column's name, or None."""
        h = self.roles.get("household") or []
        return h[0] if h else None

    def select(self, names: Sequence[str]) -> "Microdata":
        """These columns only (roles and categories restricted to them)."""
        idx = self.column_index(names)
        keep = set(names)
        return Microdata(self.values[:, idx], tuple(names),
                         {r: [c for c in cs if c in keep] for r, cs in self.roles.items()},
                         self.sha256, {c: v for c, v in self.categories.items() if c in keep})

    @property
    def shape(self) -> tuple[int, int]:
        return self.values.shape  # type: ignore[return-value]

    def column_index(self, names: Sequence[str], *, what: str = "column") -> list[int]:
        """Positions of ``names``; unknown names raise and list the valid ones."""
        return column_positions(names, self.columns, what=what)


def align_categories(reference: Microdata, other: Microdata) -> tuple[Microdata, Microdata]:
    """Both files with the same codes for the same labels in their shared categorical columns.

    Each file read on its own codes its labels 0..L-1 in its own label order, so a
    released file that lacks a category (suppressed, PRAMed away) or holds new ones
    (another tool's release) would code the same label differently. The shared
    columns get one label list: ``reference``'s labels in its order, then the labels
    only ``other`` has (in label order); ``reference``'s codes never change, and
    ``other``'s are recoded (a monotone map when its labels are a subset, so content
    order is kept). Columns that are categorical in one file only are left alone.
    """
    from .types import label_order
    shared = [c for c in reference.categories if c in other.categories]
    if not shared:
        return reference, other
    ref_cats = dict(reference.categories)
    oth_cats = dict(other.categories)
    ref_vals = reference.values
    oth_vals = other.values
    for c in shared:
        a, b = list(ref_cats[c]), list(oth_cats[c])
        if a == b:
            continue
        known = set(a)
        union = a + label_order(x for x in b if x not in known)
        pos = {lab: i for i, lab in enumerate(union)}
        if union != a:
            ref_cats[c] = union                   # codes unchanged, labels appended
        lookup = np.array([pos[lab] for lab in b] + [np.nan], dtype=np.float64)
        j = other.columns.index(c)
        if oth_vals is other.values:
            oth_vals = oth_vals.copy()
        col = oth_vals[:, j]
        codes = np.where(np.isnan(col), len(b), col).astype(np.int64)
        oth_vals[:, j] = lookup[codes]
        oth_cats[c] = union
    ref = Microdata(ref_vals, reference.columns, reference.roles, reference.sha256, ref_cats)
    oth = Microdata(oth_vals, other.columns, other.roles, other.sha256, oth_cats)
    return ref, oth


def values_fingerprint(values: np.ndarray) -> str:
    """SHA-256 of a float64 array's bytes (C order) and shape."""
    h = hashlib.sha256(repr(values.shape).encode())
    h.update(np.ascontiguousarray(values, dtype=np.float64).tobytes())
    return h.hexdigest()


def from_array(values: np.ndarray, columns: Sequence[str] | None = None, *,
               roles: Mapping[str, Sequence[str]] | None = None,
               allow_constant: bool = False,
               categories: Mapping[str, Sequence[str]] | None = None) -> Microdata:
    """Validate an in-memory array and wrap it as :class:`Microdata` (a copy).

    ``categories`` maps categorical columns to their labels; their values must
    then be the codes 0..L-1.
    """
    values = np.array(values, dtype=np.float64, copy=True)
    if values.ndim != 2:
        raise value_error("microdata", "2-D (records x variables)",
                          got_text=f"shape {values.shape}")
    if columns is None:
        columns = [f"V{j + 1}" for j in range(values.shape[1])]
    columns = tuple(str(c) for c in columns)
    check_values(values, columns, "the array", allow_constant=allow_constant)
    md = Microdata(values, columns, {k: list(v) for k, v in (roles or {}).items()},
                   values_fingerprint(values),
                   {str(k): [str(x) for x in v] for k, v in (categories or {}).items()})
    check_typed(md, "the array")
    return md


def check_typed(md: Microdata, source: str = "the data") -> None:
    """Check roles and categorical codes of in-memory microdata (names only in messages)."""
    from .types import check_household_ids, check_roles, check_weights
    column_positions(list(md.categories), md.columns, what="categorical column")
    check_roles(md.columns, md.roles, md.categories, source=source)
    for c, labels in md.categories.items():
        x = md.values[:, md.columns.index(c)]
        ok = np.isnan(x) | ((x >= 0) & (x < len(labels)) & (x == np.floor(x)))
        if not ok.all():
            raise bad_values_error(c, int((~ok).sum()), "non-code",
                                   f"a categorical column holds the codes 0..{len(labels) - 1} "
                                   f"of its {len(labels)} categories", where=source)
    if md.weight is not None:
        check_weights(md.values[:, md.columns.index(md.weight)], md.weight)
    if md.household is not None and md.household in md.columns:
        check_household_ids(md.values[:, md.columns.index(md.household)], md.household,
                            source)


def file_sha256(path: str | os.PathLike) -> str:
    h = hashlib.sha256()
    with open(path, "rb") as f:
        for block in iter(lambda: f.read(1 << 20), b""):
            h.update(block)
    return h.hexdigest()


def file_sha256_in_background(path: str | os.PathLike) -> Callable[[], str]:
    """Start hashing a file on a thread (hashlib releases the GIL) while it is parsed;
    call the result to wait for the digest (an error reading the file is raised then)."""
    import threading
    out: dict[str, Any] = {}

    def run() -> None:
        try:
            out["digest"] = file_sha256(path)
        except BaseException as exc:      # handed to the caller
            out["error"] = exc

    thread = threading.Thread(target=run, name="sdcdist-sha256", daemon=True)
    thread.start()

    def result() -> str:
        thread.join()
        if "error" in out:
            raise out["error"]
        return out["digest"]
    return result


def is_store(path: str | os.PathLike) -> bool:
    """Whether ``path`` names a Zarr store (a ``.zarr`` path or URL, or a Zarr folder)."""
    s = str(path).rstrip("/")
    if s.endswith(".zarr") or "://" in s:
        return True
    p = Path(s)
    return p.is_dir() and (p / "zarr.json").exists()
