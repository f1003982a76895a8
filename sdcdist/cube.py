"""The result cube: every measurement of an audit in one labelled xarray Dataset in Zarr.

Schema
------
Dimensions ``method``, ``param``, ``metric``, ``replicate`` and ``keyset``.

``value`` (method, param, metric, replicate), float64
    The measurement; NaN where a method has no such parameter value, where a
    deterministic method has no replicate > 0, or where a cell is not done yet.
``keyset_value`` (method, param, metric, replicate, keyset), float64
    Per-key-set detail of linkage metrics (``value`` is their mean).
``excluded`` (method, param, metric, replicate), int32
    Terms left out of an average (zero denominators); -1 where not measured.
``flag`` (method, param, metric, replicate), int8
    1 when an approximation or restriction was used (sparse assignment,
    blocking), 0 for the exact computation, -1 where not measured.
``done`` (method, param, replicate), int8
    1 once the cell's values are all written (what a resumed audit skips).
Coordinates: ``param_name`` (method) says what the parameter means;
``metric_kind`` (metric) is loss / utility / risk / score; ``ascending``
(metric) is 1 when rank 1 goes to the smallest value; ``keyset_columns``
(keyset) lists each key set's columns.
Every array is Zstandard-compressed and CRC-32C checksummed; :func:`open_cube`
reads all chunks once and reports a corrupted one (array and chunk) instead of
returning its bytes as numbers.
Attributes: ``spec`` (JSON), ``spec_sha256``, ``datasets`` (JSON fingerprints),
``versions`` (JSON), ``conventions`` (JSON), ``started``, ``finished``.

Methods are a dimension called ``method``, which is also the name of an
argument of :meth:`xarray.Dataset.sel`; :class:`Cube` makes
``cube.sel(method="rankswap", param=15, metric="DLD")`` select by label.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np
import pandas as pd
import xarray as xr

from . import integrity
from .errors import SdcInputError

__all__ = ["Cube", "open_cube", "create_cube", "write_cell", "done_cells", "cell_table",
           "CONVENTIONS"]

#: The decisions of CATALOG.md where the papers are ambiguous, recorded in every cube.
CONVENTIONS = {
    "standardisation": "DRL1: each file z-scored with its own column means and sds (ddof=1)",
    "ties": "t candidates tied at the best distance including the true record count 1/t",
    "keysets": "default key sets are the prefixes of sizes 1..min(7, p) of the key columns",
    "ID1": "ranks from a stable sort of the masked column, interval clamped to 1..n, "
           "bounds included, mean over p = 1..10 %",
    "IL1s": "mean (not sum) of |x - x'| / (sqrt(2) s_j), s_j the original sd (ddof=1)",
    "MV": "zero denominators left out of mean-variation averages, counted in 'excluded'",
    "mixnoise": "X' = X + sqrt(d) Y (not d Y), so Cov(X') = (1+d) Sigma",
    "mixnoise_scaled": "sign of the mean term as in the appendix of Yancey-Winkler-Creecy",
    "RR": "(1/n) sum log(1 + d), not (1/n) log sum d",
    "PRL": "l method on g(v) = sign(v) log(1 + |v|); t = 0.05; P(M) starts at "
           "min(nA, nB)/(nA nB)",
    "seeds": "SeedSequence(spec seed, spawn_key=(crc32(dataset), crc32(method), "
             "crc32(repr(param)), replicate)); metrics spawn (…, 1, crc32(metric))",
}

_FILL_METHODS = {"nearest", "pad", "ffill", "backfill", "bfill"}


class Cube(xr.Dataset):
    """An :class:`xarray.Dataset` whose ``sel(method=...)`` selects masking methods."""

    __slots__ = ()

    def sel(self, indexers: Mapping[Any, Any] | None = None, method: Any = None,
            tolerance: Any = None, drop: bool = False, **indexers_kwargs: Any) -> "Cube":
        labels = dict(indexers or {}, **indexers_kwargs)
        if method is not None and not (isinstance(method, str) and method in _FILL_METHODS):
            labels["method"] = method
            method = None
        return super().sel(labels, method=method, tolerance=tolerance, drop=drop)


def _as_cube(ds: xr.Dataset) -> Cube:
    return Cube(ds.data_vars, coords=ds.coords, attrs=ds.attrs)


def open_cube(url: str) -> Cube:
    """Open a cube lazily (Dask-backed) from a path or fsspec URL."""
    try:
        ds = xr.open_zarr(str(url), consolidated=False)
    except Exception as exc:
        raise SdcInputError(f"cannot open {str(url)!r} as an sdcdist cube "
                            f"({type(exc).__name__}); check the path") from None
    if "value" not in ds or "done" not in ds:
        raise SdcInputError(f"{str(url)!r} is a Zarr store but not an sdcdist cube")
    integrity.verify_group(str(url))  # small: a corrupted chunk is reported here
    return _as_cube(ds)


def create_cube(store: str, *, methods: Sequence[str], param_names: Sequence[str],
                params: Sequence[float], metrics: Sequence[str], metric_kinds: Sequence[str],
                ascending: Sequence[bool], replicates: int,
                keysets: Sequence[Sequence[str]], attrs: Mapping[str, Any]) -> None:
    """Write an empty cube (all NaN, nothing done) with its coordinates and attributes."""
    M, P, K, R, S = len(methods), len(params), len(metrics), replicates, max(len(keysets), 1)
    dims4 = ("method", "param", "metric", "replicate")
    ds = xr.Dataset(
        {
            "value": (dims4, np.full((M, P, K, R), np.nan)),
            "keyset_value": (dims4 + ("keyset",), np.full((M, P, K, R, S), np.nan)),
            "excluded": (dims4, np.full((M, P, K, R), -1, dtype=np.int32)),
            "flag": (dims4, np.full((M, P, K, R), -1, dtype=np.int8)),
            "done": (("method", "param", "replicate"), np.zeros((M, P, R), dtype=np.int8)),
        },
        coords={
            "method": _strings(methods), "param": np.asarray(params, dtype=np.float64),
            "metric": _strings(metrics), "replicate": np.arange(R),
            "keyset": np.arange(S),
            "param_name": ("method", _strings(param_names)),
            "metric_kind": ("metric", _strings(metric_kinds)),
            "ascending": ("metric", np.asarray(ascending, dtype=np.int8)),
            "keyset_columns": ("keyset", _strings([",".join(k) for k in keysets] or [""])),
        },
        attrs={k: (json.dumps(v, sort_keys=True) if not isinstance(v, str) else v)
               for k, v in attrs.items()},
    )
    encoding = {
        "value": {"chunks": (1, 1, K, 1)},
        "keyset_value": {"chunks": (1, 1, K, 1, S)},
        "excluded": {"chunks": (1, 1, K, 1)},
        "flag": {"chunks": (1, 1, K, 1)},
        "done": {"chunks": (1, 1, 1)},
    }
    for name in ds.variables:  # every array, coordinates too, is checksummed
        encoding.setdefault(name, {})["compressors"] = integrity.compressors()
    ds.to_zarr(store, mode="w-", encoding=encoding, consolidated=False)


def _strings(items: Sequence[str]) -> np.ndarray:
    """Object arrays of str: stored as Zarr variable-length UTF-8 strings."""
    return np.array([str(i) for i in items], dtype=object)


def _group(store: str, mode: str = "r+") -> Any:
    import zarr
    return zarr.open_group(store, mode=mode)


def write_cell(store: str | Any, m: int, p: int, r: int, *, values: np.ndarray,
               keyset_values: np.ndarray, excluded: np.ndarray, flags: np.ndarray) -> None:
    """Write one cell's metric vectors, then mark it done (so a kill never leaves it half)."""
    g = _group(store) if isinstance(store, str) else store
    g["value"][m, p, :, r] = values
    g["keyset_value"][m, p, :, r, :] = keyset_values
    g["excluded"][m, p, :, r] = excluded
    g["flag"][m, p, :, r] = flags
    g["done"][m, p, r] = 1


def done_cells(store: str) -> np.ndarray:
    """The ``done`` array (method, param, replicate) as int8."""
    return np.asarray(_group(store, "r")["done"][:])


def set_attrs(store: str, **attrs: Any) -> None:
    g = _group(store)
    g.attrs.update({k: (json.dumps(v, sort_keys=True) if not isinstance(v, str) else v)
                    for k, v in attrs.items()})


def cell_table(cube: xr.Dataset, *, reduce: str = "mean") -> pd.DataFrame:
    """One row per (method, param) cell that has values: metrics averaged over replicates.

    Returns
    -------
    pandas.DataFrame
        Index (method, param); columns the metrics; plus ``param_name`` and
        ``replicates`` (how many replicates were averaged).
    """
    v = cube["value"].load()
    agg = v.mean("replicate", skipna=True) if reduce == "mean" else v.median("replicate")
    reps = cube["done"].sum("replicate").load()
    rows = []
    for mi, m in enumerate(cube["method"].values):
        for pi, p in enumerate(cube["param"].values):
            n = int(reps.values[mi, pi])
            if n == 0:
                continue
            row = {"method": str(m), "param": float(p),
                   "param_name": str(cube["param_name"].values[mi]), "replicates": n}
            for ki, k in enumerate(cube["metric"].values):
                row[str(k)] = float(agg.values[mi, pi, ki])
            rows.append(row)
    df = pd.DataFrame(rows)
    if df.empty:
        return df
    return df.set_index(["method", "param"])
