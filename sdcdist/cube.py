"""The result cube: every measurement of an audit in one labelled xarray Dataset in Zarr.

Schema
------
Dimensions ``dataset``, ``method``, ``param``, ``metric``, ``replicate`` and
``keyset``.

``value`` (dataset, method, param, metric, replicate), float64
    The measurement; NaN where a method has no such parameter value, where a
    deterministic method has no replicate > 0, or where a cell is not done yet.
``keyset_value`` (dataset, method, param, metric, replicate, keyset), float64
    Per-key-set detail of linkage metrics (``value`` is their mean). NaN for
    ``RR`` and ``PDL`` when the key sets are the default prefixes: those link
    on all key columns as one key set, which ``value`` holds.
``excluded`` (dataset, method, param, metric, replicate), int32
    Terms left out of an average (zero denominators); -1 where not measured.
``flag`` (dataset, method, param, metric, replicate), int8
    1 when an approximation or restriction was used (sparse assignment,
    blocking), 0 for the exact computation, -1 where not measured. For PS
    and PS2, 1 when the fit did not converge or separated the files
    completely (U = 0.25 is then a supremum; see ``CONVENTIONS["flag"]``).
``done`` (dataset, method, param, replicate), int8
    1 once the cell's values are all written (what a resumed audit skips).
``release/fingerprint`` (dataset, method, param, replicate, 32), uint8, a Zarr array
    outside the xarray view: the SHA-256 of each cell's masked file
    (:func:`masked_fingerprint`), zeros where not recorded; part of the cell's
    fingerprint; ``sdcdist release`` checks the file it regenerates against it.
Coordinates: ``param_name`` (method) says what the parameter means;
``metric_kind`` (metric) is loss / utility / risk / score; ``ascending``
(metric) is 1 when rank 1 goes to the smallest value; ``keyset_columns``
(dataset, keyset) lists each key set's columns.
Every array is Zstandard-compressed and CRC-32C checksummed; :func:`open_cube`
reads all chunks once and reports a corrupted one (array and chunk) instead of
returning its bytes as numbers.

A cube of a single dataset opens (:func:`open_cube`) with ``dataset`` as a
scalar coordinate, so its variables have the dimensions they always had and
``cube.sel(method="rankswap", param=15, metric="DLD").mean("replicate")`` is
a single number; a cube of several datasets keeps the ``dataset`` dimension
(``cube.sel(dataset="census", ...)``).
Attributes: ``spec`` (JSON), ``spec_sha256``, ``datasets`` (JSON fingerprints), ``code_paths``
(JSON: the distinct SIMD code paths of the processes that computed it, ``sdcdist.simd``),
``versions`` (JSON), ``conventions`` (JSON), ``started``, ``finished``.

Methods are a dimension called ``method``, which is also the name of an
argument of :meth:`xarray.Dataset.sel`; :class:`Cube` makes
``cube.sel(method="rankswap", param=15, metric="DLD")`` select by label, and so
do its variables (:class:`CubeArray`: ``cube["value"].sel(method="rankswap")``,
``cube.value.sel(...)``). A cube opened with plain xarray (``xr.open_zarr``)
selects methods with the dict form, ``.sel({"method": "rankswap"})`` or
``.loc[{"method": "rankswap"}]``.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np
import pandas as pd
import xarray as xr

from . import checksums, integrity
from .conventions import (CONVENTIONS, CRL_CORRELATIONS, DLD_CONVENTIONS, DLD_DISTANCES,
                          PRL_COUNTING, PRL_FITS, conventions)
from .errors import SdcInputError, empty_error, unknown_name_error, unreadable_error

__all__ = ["Cube", "CubeArray", "open_cube", "create_cube", "write_cell", "CellWriter",
           "done_cells",
           "cell_table",
           "select_dataset", "dataset_names", "ranks", "best", "pareto", "at_risk",
           "crossing", "pareto_front", "metric_ascending", "CONVENTIONS", "DLD_CONVENTIONS",
           "DLD_DISTANCES", "CRL_CORRELATIONS", "PRL_COUNTING",
           "conventions", "as_cube", "open_group", "PRL_FITS", "masked_fingerprint",
           "release_fingerprint"]

_FILL_METHODS = {"nearest", "pad", "ffill", "backfill", "bfill"}


def _method_labels(obj: Any, indexers: Mapping[Any, Any] | None, method: Any,
                   indexers_kwargs: dict[str, Any]) -> tuple[dict[Any, Any], Any]:
    """``sel``'s arguments with ``method=`` read as the ``method`` dimension's labels when
    the object has that dimension (xarray's fill methods keep their meaning otherwise)."""
    labels = dict(indexers or {}, **indexers_kwargs)
    if method is not None and "method" in obj.dims and not (
            isinstance(method, str) and method in _FILL_METHODS
            and method not in set(map(str, obj["method"].values))):
        labels["method"] = method
        method = None
    return labels, method


class CubeArray(xr.DataArray):
    """A variable of a :class:`Cube` (``cube["value"]``, ``cube.value``): an
    :class:`xarray.DataArray` whose ``sel(method=...)`` selects masking methods too."""

    __slots__ = ()

    def sel(self, indexers: Mapping[Any, Any] | None = None, method: Any = None,
            tolerance: Any = None, drop: bool = False,
            **indexers_kwargs: Any) -> "CubeArray":
        labels, method = _method_labels(self, indexers, method, indexers_kwargs)
        return super().sel(labels, method=method, tolerance=tolerance, drop=drop)


class Cube(xr.Dataset):
    """An :class:`xarray.Dataset` whose ``sel(method=...)`` selects masking methods; its
    variables (``cube["value"]``, ``cube.value``) are :class:`CubeArray`, which do too."""

    __slots__ = ()

    def sel(self, indexers: Mapping[Any, Any] | None = None, method: Any = None,
            tolerance: Any = None, drop: bool = False, **indexers_kwargs: Any) -> "Cube":
        labels, method = _method_labels(self, indexers, method, indexers_kwargs)
        return super().sel(labels, method=method, tolerance=tolerance, drop=drop)

    def __getitem__(self, key: Any) -> Any:
        out = super().__getitem__(key)
        if isinstance(out, xr.DataArray) and not isinstance(out, CubeArray):
            out = CubeArray(out)
        return out


def as_cube(ds: xr.Dataset) -> Cube:
    """``ds`` (a cube opened or built with plain xarray) as a :class:`Cube`, whose ``sel``
    takes ``method=`` as a label."""
    return Cube(ds.data_vars, coords=ds.coords, attrs=ds.attrs)


def open_cube(url: str, *, squeeze: bool = True) -> Cube:
    """Open a cube lazily from a path or fsspec URL.

    Its arrays are read in this process when their values are needed, not through Dask:
    with a distributed ``Client`` active in the session, Dask would send the cluster a task
    per chunk (a cube keeps one chunk per cell), and a report on a small cube would take
    seconds instead of a fraction of one.

    With ``squeeze`` (the default) a cube of one dataset opens with
    ``dataset`` as a scalar coordinate instead of a dimension of length 1.
    """
    try:
        ds = xr.open_zarr(str(url), consolidated=False, chunks=None)
    except Exception as exc:
        damage = _damaged_metadata(str(url))
        if damage:
            raise integrity.metadata_error(str(url), damage) from None
        raise unreadable_error("an sdcdist cube", url, type(exc).__name__) from None
    if "value" not in ds or "done" not in ds:
        problems = integrity.check_metadata(open_group(str(url), "r"), str(url))
        if problems:                # a cube whose array lost its zarr.json: damage
            raise integrity.metadata_error(str(url), problems)
        raise SdcInputError(f"{str(url)!r} is a Zarr store but not an sdcdist cube")
    group = open_group(str(url), "r")
    # the metadata first: an array whose zarr.json was edited (data type, chunk shape,
    # codecs) may not decode at all, and its manifest says what changed
    problems = integrity.check_metadata(group, str(url))
    if problems:
        raise integrity.metadata_error(str(url), problems)
    checksums.verify_group(str(url))  # small: a corrupted chunk is reported here
    integrity.check_cube_cells(group, str(url))   # a done cell's lost chunk is not NaN
    integrity.check_cube_fingerprints(group, str(url))   # nor a changed value read
    if squeeze and "dataset" in ds.dims and ds.sizes["dataset"] == 1:
        ds = ds.isel(dataset=0)
    return as_cube(ds)


def _damaged_metadata(url: str) -> list[str]:
    """What :func:`~sdcdist.integrity.verify_store` finds wrong with a store's metadata
    when it cannot be opened at all (a truncated or lost zarr.json), else nothing."""
    try:
        report = integrity.verify_store(url)
    except Exception:                          # noqa: BLE001 - not a store: the caller says
        return []
    return list(report.problems)


def create_cube(store: str, *, methods: Sequence[str], param_names: Sequence[str],
                params: Sequence[float], metrics: Sequence[str], metric_kinds: Sequence[str],
                ascending: Sequence[bool], replicates: int,
                keysets: Sequence[Sequence[str]] | Mapping[str, Sequence[Sequence[str]]],
                attrs: Mapping[str, Any], datasets: Sequence[str] = ("data",)) -> None:
    """Write an empty cube (all NaN, nothing done) with its coordinates and attributes.

    ``keysets`` is one list of key sets for every dataset, or a mapping
    dataset name -> its key sets.
    """
    ks = {d: [list(k) for k in (keysets[d] if isinstance(keysets, Mapping) else keysets)]
          for d in datasets}
    D, M, P, K, R = len(datasets), len(methods), len(params), len(metrics), replicates
    S = max([len(v) for v in ks.values()] + [1])
    columns = np.array([[",".join(k) for k in ks[d]] + [""] * (S - len(ks[d]))
                        for d in datasets], dtype=object)
    dims5 = ("dataset", "method", "param", "metric", "replicate")
    ds = xr.Dataset(
        {
            "value": (dims5, np.full((D, M, P, K, R), np.nan)),
            "keyset_value": (dims5 + ("keyset",), np.full((D, M, P, K, R, S), np.nan)),
            "excluded": (dims5, np.full((D, M, P, K, R), -1, dtype=np.int32)),
            "flag": (dims5, np.full((D, M, P, K, R), -1, dtype=np.int8)),
            "done": (("dataset", "method", "param", "replicate"),
                     np.zeros((D, M, P, R), dtype=np.int8)),
        },
        coords={
            "dataset": _strings(datasets),
            "method": _strings(methods), "param": np.asarray(params, dtype=np.float64),
            "metric": _strings(metrics), "replicate": np.arange(R),
            "keyset": np.arange(S),
            "param_name": ("method", _strings(param_names)),
            "metric_kind": ("metric", _strings(metric_kinds)),
            "ascending": ("metric", np.asarray(ascending, dtype=np.int8)),
            "keyset_columns": (("dataset", "keyset"), columns),
        },
        attrs={k: (json.dumps(v, sort_keys=True) if not isinstance(v, str) else v)
               for k, v in attrs.items()},
    )
    encoding = {
        "value": {"chunks": (1, 1, 1, K, 1)},
        "keyset_value": {"chunks": (1, 1, 1, K, 1, S)},
        "excluded": {"chunks": (1, 1, 1, K, 1)},
        "flag": {"chunks": (1, 1, 1, K, 1)},
        "done": {"chunks": (1, 1, 1, 1)},
    }
    for name in ds.variables:  # every array, coordinates too, is checksummed
        encoding.setdefault(name, {})["compressors"] = checksums.compressors()
    ds.to_zarr(store, mode="w-", encoding=encoding, consolidated=False)
    g = open_group(store)
    # each cell's fingerprint, written with the cell (zeros: not written)
    g.create_array(integrity.CELL_DIGESTS, shape=(D, M, P, R, 32), chunks=(1, 1, 1, 1, 32),
                   dtype="uint8", fill_value=0, compressors=checksums.compressors())
    # each cell's masked-file fingerprint (zeros: not recorded), part of the cell's digest
    g.create_array(integrity.RELEASE_FINGERPRINTS, shape=(D, M, P, R, 32),
                   chunks=(1, 1, 1, 1, 32), dtype="uint8", fill_value=0,
                   compressors=checksums.compressors())
    integrity.seal(g, cells="complete", arrays_sha256=integrity.fixed_arrays_sha256(g),
                   cell_digests=integrity.CELL_DIGESTS)


def _strings(items: Sequence[str]) -> np.ndarray:
    """Object arrays of str: stored as Zarr variable-length UTF-8 strings."""
    return np.array([str(i) for i in items], dtype=object)


def open_group(store: str, mode: str = "r+") -> Any:
    """The cube's root Zarr group (``mode`` ``"r"`` to read, ``"r+"`` to write cells)."""
    import zarr
    return zarr.open_group(store, mode=mode)


def write_cell(store: str | Any, m: int, p: int, r: int, *, values: np.ndarray,
               keyset_values: np.ndarray, excluded: np.ndarray, flags: np.ndarray,
               d: int = 0, release_fingerprint: bytes | np.ndarray | None = None) -> None:
    """Write one cell's metric vectors, then mark it done (so a kill never leaves it half).

    ``d``, ``m``, ``p``, ``r`` index the dataset, method, parameter and replicate.
    ``release_fingerprint``: the SHA-256 (32 bytes) of the cell's masked file
    (:func:`masked_fingerprint`), recorded so that ``sdcdist release`` can check the
    file it regenerates. A writer of many cells keeps a :class:`CellWriter` instead.
    """
    CellWriter(open_group(store) if isinstance(store, str) else store).write(
        m, p, r, values=values, keyset_values=keyset_values, excluded=excluded, flags=flags,
        d=d, release_fingerprint=release_fingerprint)


class CellWriter:
    """Writes cells into one open cube (:func:`write_cell`, cell after cell): its arrays
    opened once (each opening reads the array's metadata), and each cell's fingerprint
    computed from the very arrays written (their stored dtypes and shapes), not read back.

    Parameters
    ----------
    group : zarr.Group
        The cube's root group, open for writing (:func:`open_group`).
    """

    def __init__(self, group: Any):
        def arr(name: str) -> Any:
            # every chunk of a done cell is stored, even an all-NaN one, so that a missing
            # chunk is detected as corruption (integrity.check_cube_cells), never read as NaN
            return group[name].with_config({"write_empty_chunks": True})
        self.arrays = {name: arr(name) for name in (*integrity.CELL_ARRAYS, "done")}
        self.release = arr(integrity.RELEASE_FINGERPRINTS) \
            if integrity.RELEASE_FINGERPRINTS in group else None
        manifest = group.attrs.get(integrity.INTEGRITY_ATTR)
        self.digests = arr(integrity.CELL_DIGESTS) if isinstance(manifest, Mapping) \
            and manifest.get("cell_digests") == integrity.CELL_DIGESTS else None

    def write(self, m: int, p: int, r: int, *, values: np.ndarray,
              keyset_values: np.ndarray, excluded: np.ndarray, flags: np.ndarray,
              d: int = 0, release_fingerprint: bytes | np.ndarray | None = None) -> None:
        """:func:`write_cell` (the same arguments) into this writer's cube."""
        a = self.arrays
        ks = np.asarray(keyset_values, dtype=a["keyset_value"].dtype)
        parts = {"value": np.asarray(values, dtype=a["value"].dtype),
                 "excluded": np.asarray(excluded, dtype=a["excluded"].dtype),
                 "flag": np.asarray(flags, dtype=a["flag"].dtype)}
        a["value"][d, m, p, :, r] = parts["value"]
        a["keyset_value"][d, m, p, :, r, :ks.shape[1]] = ks
        if ks.shape[1] == a["keyset_value"].shape[5]:   # the cell's whole slice
            parts["keyset_value"] = ks
        a["excluded"][d, m, p, :, r] = parts["excluded"]
        a["flag"][d, m, p, :, r] = parts["flag"]
        release = None
        if self.release is not None and release_fingerprint is not None:
            release = np.frombuffer(bytes(np.asarray(release_fingerprint, dtype=np.uint8))
                                    if not isinstance(release_fingerprint, bytes)
                                    else release_fingerprint, dtype=np.uint8)
            self.release[d, m, p, r] = release
        if self.digests is not None:
            # the fingerprint of what is stored now, before the done mark (a kill in between
            # leaves a cell that is recomputed on resume, never one marked done unsigned);
            # what this call did not write whole (narrower key-set values, a fingerprint
            # not given) is read back
            cell = (d, m, p, r)
            if "keyset_value" not in parts:
                parts["keyset_value"] = np.asarray(a["keyset_value"][d, m, p, :, r, :])
            if self.release is not None and release is None:
                release = np.asarray(self.release[cell])
            digest = np.frombuffer(integrity.cell_parts_sha256(parts, release), dtype=np.uint8)
            self.digests[cell] = digest
        a["done"][d, m, p, r] = 1


def masked_fingerprint(values: np.ndarray, *, chunk_rows: int = 65_536) -> bytes:
    """The fingerprint a cube records of a cell's masked file: the SHA-256 of its shape and
    float64 values in C order (:func:`sdcdist.data.values_fingerprint`, as bytes), hashed
    ``chunk_rows`` records at a time (no copy of the whole file)."""
    import hashlib
    h = hashlib.sha256(repr(values.shape).encode())
    for i in range(0, values.shape[0], chunk_rows):
        h.update(np.ascontiguousarray(values[i:i + chunk_rows], dtype=np.float64).tobytes())
    return h.digest()


def release_fingerprint(store: str | Any, d: int, m: int, p: int, r: int) -> bytes | None:
    """The masked-file fingerprint a cube recorded for a cell, or None (a cube written
    before fingerprints were recorded, or a cell without one)."""
    g = open_group(store, "r") if isinstance(store, str) else store
    try:
        if integrity.RELEASE_FINGERPRINTS not in g:
            return None
    except Exception:                          # noqa: BLE001
        return None
    fp = bytes(np.asarray(g[integrity.RELEASE_FINGERPRINTS][d, m, p, r], dtype=np.uint8))
    return fp if any(fp) else None


def done_cells(store: str) -> np.ndarray:
    """The ``done`` array (dataset, method, param, replicate) as int8."""
    return np.asarray(open_group(store, "r")["done"][:])


def set_attrs(store: str, **attrs: Any) -> None:
    g = open_group(store)
    g.attrs.update({k: (json.dumps(v, sort_keys=True) if not isinstance(v, str) else v)
                    for k, v in attrs.items()})
    manifest = g.attrs.get(integrity.INTEGRITY_ATTR)
    if isinstance(manifest, Mapping):          # keep the metadata checksum current
        integrity.seal(g, **{k: v for k, v in manifest.items()
                             if k not in ("version", "attrs_sha256", "values")})


# ---------------------------------------------------------------------------
# selecting and tabulating


def dataset_names(cube: xr.Dataset) -> list[str]:
    """The datasets of a cube (one name for a single-dataset cube)."""
    if "dataset" not in cube.coords:
        return [str(d.get("name", "data")) for d in json.loads(cube.attrs.get("datasets", "[]"))
                ] or ["data"]
    return [str(d) for d in np.atleast_1d(cube["dataset"].values)]


def select_dataset(cube: xr.Dataset, dataset: str | None = None) -> xr.Dataset:
    """The part of ``cube`` for one dataset (no ``dataset`` dimension).

    ``dataset`` may be omitted when the cube has a single dataset.
    """
    names = dataset_names(cube)
    if "dataset" not in cube.dims:
        if dataset is not None and dataset not in names:
            raise unknown_name_error("dataset", dataset, names)
        return cube
    if dataset is None:
        if len(names) > 1:
            raise SdcInputError(f"the cube holds {len(names)} datasets ({', '.join(names)}); "
                                "choose one (dataset=... / --dataset)")
        dataset = names[0]
    if dataset not in names:
        raise unknown_name_error("dataset", dataset, names)
    out = cube.sel(dataset=dataset)
    return as_cube(out) if not isinstance(out, Cube) else out


def check_metrics(cube: xr.Dataset, names: Sequence[str]) -> None:
    """Raise :class:`SdcInputError` naming a metric the cube does not have."""
    have = [str(m) for m in cube["metric"].values]
    for n in names:
        if n not in have:
            raise unknown_name_error("metric", n, have)


def metric_ascending(cube: xr.Dataset) -> dict[str, bool]:
    """metric -> True when its smallest value is best (lowest loss / lowest risk)."""
    return dict(zip([str(m) for m in cube["metric"].values],
                    [bool(a) for a in np.asarray(cube["ascending"].values)]))


def cell_table(cube: xr.Dataset, *, dataset: str | None = None,
               reduce: str = "mean") -> pd.DataFrame:
    """One row per (method, param) cell that has values: metrics averaged over replicates.

    Parameters
    ----------
    cube : the result cube
    dataset : str, optional
        Which dataset (needed only when the cube holds several).
    reduce : {"mean", "median"}
        How replicates are combined.

    Returns
    -------
    pandas.DataFrame
        Index (method, param); columns the metrics; plus ``param_name`` and
        ``replicates`` (how many replicates were averaged).
    """
    cube = select_dataset(cube, dataset)
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


def _table(cube: xr.Dataset, dataset: str | None, names: Sequence[str]) -> pd.DataFrame:
    check_metrics(cube, names)
    t = cell_table(cube, dataset=dataset)
    if t.empty:
        raise empty_error("The cube", "it has no finished cells yet: run the audit first")
    return t


# ---------------------------------------------------------------------------
# query helpers


def ranks(cube: xr.Dataset, metrics: Sequence[str] | None = None, *,
          dataset: str | None = None) -> pd.DataFrame:
    """Each metric's rank across all (method, param) cells (replicate means).

    Rank 1 is the lowest loss / lowest risk (the largest value for metrics with
    ``ascending = 0``, such as RR); ties share the average rank; cells where a
    metric is NaN get no rank and do not count.

    Returns
    -------
    pandas.DataFrame
        Index (method, param); one column of ranks per metric.

    Examples
    --------
    >>> cube = example_cube()
    >>> ranks(cube, ["DLD", "IL1s"])
                       DLD  IL1s
    method   param
    noise    0.1       3.0   2.0
             0.2       1.5   4.0
    rankswap 5.0       4.0   1.0
             10.0      1.5   3.0
    """
    names = list(metrics) if metrics else [str(m) for m in cube["metric"].values]
    t = _table(cube, dataset, names)
    asc = metric_ascending(cube)
    return pd.DataFrame({m: t[m].rank(ascending=asc[m], method="average", na_option="keep")
                         for m in names}, index=t.index)


def best(cube: xr.Dataset, by: str, *, n: int | None = 5, per_method: bool = False,
         dataset: str | None = None) -> pd.DataFrame:
    """The best cells by metric ``by`` (replicate means), best first.

    Parameters
    ----------
    by : str
        A metric of the cube; its ``ascending`` coordinate says which end is best.
    n : int or None
        How many rows to return (``None``: all).
    per_method : bool
        Keep only each method's best parameter.

    Returns
    -------
    pandas.DataFrame
        The rows of :func:`cell_table`, sorted (NaN last).

    Examples
    --------
    >>> best(example_cube(), "DLD", n=2)[["DLD", "IL1s"]]
                     DLD  IL1s
    method   param
    noise    0.2     2.0   0.4
    rankswap 10.0    2.0   0.3
    >>> best(example_cube(), "IL1s", per_method=True)[["IL1s"]]
                    IL1s
    method   param
    rankswap 5.0     0.1
    noise    0.1     0.2
    """
    t = _table(cube, dataset, [by])
    t = t.sort_values(by, ascending=metric_ascending(cube)[by], kind="stable",
                      na_position="last")
    if per_method:
        t = t[~t.index.get_level_values("method").duplicated()]
    return t if n is None else t.head(n)


def pareto(cube: xr.Dataset, *, risk: str, loss: str,
           dataset: str | None = None) -> pd.DataFrame:
    """The cells no other cell beats on both ``risk`` and ``loss``, by increasing loss.

    Each metric's ``ascending`` coordinate gives its better direction (for RR,
    a larger value is safer).

    Examples
    --------
    >>> pareto(example_cube(), risk="DLD", loss="IL1s")[["DLD", "IL1s"]]
                     DLD  IL1s
    method   param
    rankswap 5.0     9.0   0.1
    noise    0.1     8.0   0.2
    rankswap 10.0    2.0   0.3
    """
    t = _table(cube, dataset, [risk, loss])
    asc = metric_ascending(cube)
    r = t[risk].to_numpy() * (1 if asc[risk] else -1)
    lo = t[loss].to_numpy() * (1 if asc[loss] else -1)
    front = pareto_mask(r, lo)
    return t[front].sort_values(loss, ascending=asc[loss], kind="stable")


def pareto_mask(risk: np.ndarray, loss: np.ndarray) -> np.ndarray:
    """Boolean mask of the points no other point beats on both (lower is better)."""
    risk = np.asarray(risk, dtype=float)
    loss = np.asarray(loss, dtype=float)
    ok = np.isfinite(risk) & np.isfinite(loss)
    front = np.zeros(len(risk), dtype=bool)
    for i in np.flatnonzero(ok):
        dominated = ok & (risk <= risk[i]) & (loss <= loss[i]) & \
            ((risk < risk[i]) | (loss < loss[i]))
        front[i] = not dominated.any()
    return front


def pareto_front(points: np.ndarray) -> np.ndarray:
    """Boolean mask of the rows of ``points`` (n x k, lower is better in every column)
    that no other row beats: as good in every column and better in one. Rows with a
    non-finite entry are never on the front; equal rows are all on it.

    >>> pareto_front(np.array([[1., 3.], [2., 2.], [2., 3.], [1., 3.]])).tolist()
    [True, True, False, True]
    """
    pts = np.asarray(points, dtype=float)
    if pts.ndim == 1:
        pts = pts[:, None]
    ok = np.isfinite(pts).all(axis=1)
    front = np.zeros(len(pts), dtype=bool)
    for i in np.flatnonzero(ok):
        dominated = ok & (pts <= pts[i]).all(axis=1) & (pts < pts[i]).any(axis=1)
        front[i] = not dominated.any()
    return front


def crossing(params: np.ndarray, values: np.ndarray, target: float
             ) -> tuple[int, int] | None:
    """Where a curve sampled at sorted ``params`` meets ``target``.

    Returns ``(i, i)`` when ``values[i] == target``, ``(i, i + 1)`` for the
    first neighbouring pair whose values straddle the target (NaN points
    skipped), or ``None`` when the curve never reaches it.

    >>> crossing(np.array([1., 2., 3.]), np.array([9., 5., 1.]), 4.0)
    (1, 2)
    >>> crossing(np.array([1., 2.]), np.array([9., 5.]), 1.0) is None
    True
    """
    idx = [i for i in range(len(params)) if np.isfinite(values[i])]
    for a, b in zip(idx, idx[1:] + [None]):
        if values[a] == target:
            return a, a
        if b is not None and (values[a] - target) * (values[b] - target) < 0:
            return a, b
    return None


def at_risk(cube: xr.Dataset, metric: str, level: float, *,
            dataset: str | None = None) -> pd.DataFrame:
    """Each method at the risk (or any metric) ``level``, interpolated on the cube's grid.

    For each method, the first pair of neighbouring parameters whose mean
    ``metric`` straddles ``level`` is found and every metric is interpolated
    linearly between the two cells (an exact grid hit is taken as it is).
    Methods whose curve never reaches ``level`` get NaN and status
    ``"unreachable"`` with the range they do reach. This reuses the audit's
    cells; ``sdcdist calibrate`` finds the parameter with new probes instead.

    Returns
    -------
    pandas.DataFrame
        Index method; columns ``param_name``, ``param``, ``status``, ``reach``
        and every metric.

    Examples
    --------
    >>> at_risk(example_cube(), "DLD", 5.0)[["param", "status", "DLD", "IL1s"]].round(3)
              param status  DLD   IL1s
    method
    noise     0.150     ok  5.0  0.300
    rankswap  7.857     ok  5.0  0.214
    >>> at_risk(example_cube(), "DLD", 20.0)[["status", "reach"]]
                   status   reach
    method
    noise     unreachable    2..8
    rankswap  unreachable    2..9
    """
    t = _table(cube, dataset, [metric])
    metrics = [str(m) for m in cube["metric"].values]
    rows = []
    for method, g in t.groupby(level="method", sort=False):
        g = g.droplevel("method").sort_index()
        ps, vs = g.index.to_numpy(float), g[metric].to_numpy(float)
        row: dict[str, Any] = {"method": method, "param_name": g["param_name"].iloc[0]}
        hit = crossing(ps, vs, level)
        fin = vs[np.isfinite(vs)]
        row["reach"] = f"{fin.min():.4g}..{fin.max():.4g}" if fin.size else "no values"
        if hit is None:
            row.update({"param": np.nan, "status": "unreachable"},
                       **{m: np.nan for m in metrics})
        else:
            a, b = hit
            w = 0.0 if a == b else (level - vs[a]) / (vs[b] - vs[a])
            row.update({"param": ps[a] + w * (ps[b] - ps[a]), "status": "ok"},
                       **{m: g[m].iloc[a] + w * (g[m].iloc[b] - g[m].iloc[a])
                          for m in metrics})
        rows.append(row)
    return pd.DataFrame(rows).set_index("method")[
        ["param_name", "param", "status", "reach", *metrics]]


def example_cube() -> Cube:
    """A tiny in-memory cube (two methods x two parameters, 2 replicates) for the examples.

    >>> cube = example_cube()
    >>> float(cube.sel(method="rankswap", param=10, metric="DLD")["value"].mean("replicate"))
    2.0
    """
    # (method, param) -> (DLD, IL1s); replicate 1 repeats replicate 0 up to +-1 on DLD
    cells = {("noise", 0.1): (8.0, 0.2), ("noise", 0.2): (2.0, 0.4),
             ("rankswap", 5.0): (9.0, 0.1), ("rankswap", 10.0): (2.0, 0.3)}
    params = [0.1, 0.2, 5.0, 10.0]
    value = np.full((2, 4, 2, 2), np.nan)
    done = np.zeros((2, 4, 2), np.int8)
    for (m, p), (dld, il) in cells.items():
        mi, pi = ["noise", "rankswap"].index(m), params.index(p)
        value[mi, pi, :, 0] = (dld - 1, il)
        value[mi, pi, :, 1] = (dld + 1, il)
        done[mi, pi] = 1
    dims = ("method", "param", "metric", "replicate")
    ds = xr.Dataset({"value": (dims, value), "done": (("method", "param", "replicate"), done)},
                    coords={"method": ["noise", "rankswap"], "param": params,
                            "metric": ["DLD", "IL1s"], "replicate": [0, 1],
                            "dataset": "example", "param_name": ("method", ["p", "p"]),
                            "metric_kind": ("metric", ["risk", "loss"]),
                            "ascending": ("metric", np.array([1, 1], np.int8))})
    return as_cube(ds)
