"""Reading stores: a dataset's Zarr group, checked against its manifest, lazily or whole."""

from __future__ import annotations

import os
from collections.abc import Mapping
from typing import Any

import numpy as np

from .. import checksums, integrity
from ..errors import SdcInputError
from .staging import open_zarr_group

__all__ = ["StoredArray", "open_microdata", "store_group", "check_fingerprint"]

def store_group(store: str | os.PathLike) -> Any:
    """Open a dataset store; its metadata is checked against its manifest."""
    s = str(store)
    try:
        group = open_zarr_group(s, "r")
        group["values"]
    except Exception:
        damage = _damage(s)
        if damage:                     # a lost or truncated zarr.json: damage, not a typo
            raise integrity.metadata_error(s, damage) from None
        raise SdcInputError(f"{s!r} is not an sdcdist Zarr store (no 'values' array); "
                            "create one with 'sdcdist ingest'") from None
    problems = integrity.check_metadata(group, s)
    if problems:
        raise integrity.metadata_error(s, problems)
    malformed = integrity.dataset_attr_problems(dict(group.attrs), tuple(group["values"].shape))
    if malformed:
        raise integrity.malformed_error(s, malformed)
    return group


def _damage(store: str) -> list[str]:
    """What :func:`~sdcdist.integrity.verify_store` finds wrong with the metadata of a
    store that cannot be opened (a lost or truncated zarr.json), else nothing."""
    try:
        report = integrity.verify_store(store)
    except Exception:                          # noqa: BLE001 - not a store at all
        return []
    if report.kind not in ("zarr", "dataset"):
        return []
    return list(report.problems)


class StoredArray:
    """A Zarr-backed (n, m) array that tasks can slice by records.

    Pickles as its URL, so a task reads only the rows it needs from storage.
    """

    def __init__(self, url: str):
        self.url = str(url)
        self._arr = None
        self.shape = tuple(self._array().shape)

    def _array(self) -> Any:
        if self._arr is None:
            self._arr = store_group(self.url)["values"]
        return self._arr

    def __getitem__(self, key: Any) -> np.ndarray:
        return np.asarray(checksums.read(self._array(), key, store=self.url, name="values",
                                         complete=True), dtype=np.float64)

    def __getstate__(self) -> dict:
        return {"url": self.url, "shape": self.shape}

    def __setstate__(self, state: dict) -> None:
        self.url = state["url"]
        self.shape = state["shape"]
        self._arr = None

    def __len__(self) -> int:
        return self.shape[0]

    dtype = np.dtype(np.float64)

    @property
    def ndim(self) -> int:
        return len(self.shape)


def open_microdata(store_or_url: str | os.PathLike) -> Any:
    """Open a store lazily as a Dask-backed :class:`xarray.DataArray`.

    Dims ``(record, variable)``, coordinate ``variable`` = column names; the
    group attributes (roles, fingerprint, ...) are in ``.attrs``.
    """
    import dask.array as dsa
    import xarray as xr
    from dask.base import tokenize

    url = str(store_or_url)
    group = store_group(url)
    arr = group["values"]
    # chunks are read through StoredArray: checksums, missing chunks (no NaN fill)
    data = dsa.from_array(StoredArray(url), chunks=tuple(arr.chunks), asarray=False,
                          fancy=False, lock=False, meta=np.empty((0, 0), dtype=np.float64),
                          name="values-" + tokenize(url, group.attrs.get("integrity"),
                                                    group.attrs.get("sha256")))
    da = xr.DataArray(data, dims=("record", "variable"), name="values",
                      coords={"variable": list(group.attrs["columns"])})
    da.attrs.update(dict(group.attrs))
    return da


def check_fingerprint(group: Any, values: np.ndarray, store: str) -> None:
    """A fully read store's values must hash to the fingerprint sealed at write time."""
    manifest = group.attrs.get(integrity.INTEGRITY_ATTR)
    want = manifest.get("values", {}).get("sha256") if isinstance(manifest, Mapping) else None
    if want:
        digest = integrity.ValuesDigest()
        digest.update(values)
        if digest.hexdigest() != want:
            raise integrity.metadata_error(store, [
                "the values' fingerprint (SHA-256) differs from the one recorded when it was "
                "written"])
