"""Store manifests: each store's metadata, layout and values, checked against what it holds.

Each store carries a manifest in its ``integrity`` attribute (:func:`seal`): the
SHA-256 of the other attributes (the metadata), the layout of its arrays and, for
datasets, the SHA-256 of the values (record order, float64 bytes); a cube's done
cells also keep the SHA-256 of their results, and :func:`open_cube
<sdcdist.cube.open_cube>` checks the chunks of every done cell (:func:`check_cube_cells`).
:func:`verify_store` checks all of it, with every chunk's CRC-32C
(:mod:`sdcdist.checksums`).
"""

from __future__ import annotations

import hashlib
import itertools
import json
import os
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from .checksums import (CorruptChunkError, chunk_key, chunk_text, is_checksum_error,
                        missing_error, read, stored_chunk_keys)
from .errors import SdcInputError, unreadable_error
from .roles import ROLES

__all__ = ["CorruptStoreError", "seal", "check_metadata", "ValuesDigest", "VerifyReport",
           "verify_store", "INTEGRITY_ATTR", "array_sha256", "cell_sha256", "cell_parts_sha256",
           "fixed_arrays_sha256", "CELL_ARRAYS", "CELL_DIGESTS", "RELEASE_FINGERPRINTS",
           "dataset_attr_problems", "code_problems", "malformed_error"]

#: The group attribute holding the manifest written by :func:`seal`.
INTEGRITY_ATTR = "integrity"
MANIFEST_VERSION = 1
#: The group attribute, written with every manifest, that says the store has one: a store
#: carrying it (or a cube recording the sdcdist version that wrote it: every released
#: version writes manifests) whose manifest is gone was edited, not written by an older
#: sdcdist.
MANIFEST_MARK = "manifest_version"


class CorruptStoreError(SdcInputError):
    """A store's metadata, record count or fingerprint disagrees with its manifest."""


class ValuesDigest:
    """SHA-256 of a float64 (n, m) array fed in record order, block by block."""

    def __init__(self) -> None:
        self._h = hashlib.sha256()

    def update(self, block: np.ndarray) -> None:
        self._h.update(np.ascontiguousarray(block, dtype=np.float64).tobytes())

    def hexdigest(self) -> str:
        return self._h.hexdigest()


def attrs_digest(attrs: Mapping[str, Any]) -> str:
    """SHA-256 of the canonical JSON of a group's attributes, the manifest left out."""
    rest = {k: v for k, v in attrs.items() if k != INTEGRITY_ATTR}
    text = json.dumps(rest, sort_keys=True, separators=(",", ":"), default=str)
    return hashlib.sha256(text.encode()).hexdigest()


def array_sha256(array: Any, key: Any = slice(None)) -> str:
    """SHA-256 of an array's values (``array[key]``): dtype, shape and content (numbers as
    their bytes, strings as UTF-8 JSON), so that any change of a stored value shows."""
    data = np.asarray(array[key])
    h = hashlib.sha256(f"{data.dtype.str if data.dtype != object else 'str'}:"
                       f"{list(data.shape)}:".encode())
    if data.dtype == object or data.dtype.kind in "UST":
        h.update(json.dumps([str(x) for x in data.ravel()]).encode())
    else:
        h.update(np.ascontiguousarray(data).tobytes())
    return h.hexdigest()


#: The arrays of a cube that hold one cell's results (written as cells finish); every
#: other array (the coordinates) is final when the cube is created.
CELL_ARRAYS = ("value", "keyset_value", "excluded", "flag")
#: Subgroup and array of a cube holding each cell's fingerprint (SHA-256, 32 bytes).
CELL_DIGESTS = "integrity/cells"


#: Array of a cube holding the fingerprint of each cell's masked file (the SHA-256 of
#: :func:`sdcdist.data.values_fingerprint`, 32 bytes per cell; zeros: not recorded).
#: Part of the cell's fingerprint when the cube has it (cubes written before it have not).
RELEASE_FINGERPRINTS = "release/fingerprint"


def cell_sha256(group: Any, cell: tuple[int, int, int, int]) -> bytes:
    """SHA-256 of one cell's stored results (value, keyset_value, excluded, flag and, in
    cubes that record it, the masked file's fingerprint), from a group or from the cell
    arrays already in memory (a mapping name -> numpy array: the same bytes)."""
    d, m, p, r = cell
    parts = {}
    for name in CELL_ARRAYS:
        if name in group:
            a = group[name]
            parts[name] = np.asarray(a[(d, m, p, slice(None), r) + (slice(None),) * (a.ndim - 5)])
    release = (np.asarray(group[RELEASE_FINGERPRINTS][d, m, p, r])
               if _has(group, RELEASE_FINGERPRINTS) else None)
    return cell_parts_sha256(parts, release)


def cell_parts_sha256(parts: Mapping[str, np.ndarray], release: np.ndarray | None) -> bytes:
    """:func:`cell_sha256` of one cell's stored arrays given as they are stored (``parts``:
    the arrays of :data:`CELL_ARRAYS` the cube has, each the cell's slice with its stored
    dtype; ``release``: the stored masked-file fingerprint, None in a cube without them)."""
    h = hashlib.sha256()
    for name in CELL_ARRAYS:
        if name in parts:
            h.update(name.encode())
            h.update(np.ascontiguousarray(parts[name]).tobytes())
    if release is not None:
        h.update(b"release_fingerprint")
        h.update(np.asarray(release, dtype=np.uint8).tobytes())
    return h.digest()


def _has(group: Any, name: str) -> bool:
    try:
        return name in group
    except Exception:                          # noqa: BLE001 - a damaged subgroup
        return False


def fixed_arrays_sha256(group: Any) -> dict[str, str]:
    """:func:`array_sha256` of every array of a cube that is final at creation."""
    return {name: array_sha256(a) for name, a in sorted(group.arrays())
            if name not in CELL_ARRAYS and name != "done"}


def array_layout(array: Any) -> dict[str, Any]:
    """Shape, chunk shape, dtype, codecs and the SHA-256 of the whole metadata document
    (its ``zarr.json``: attributes such as ``_FillValue`` or ``scale_factor`` included,
    which change what a reader decodes) of a Zarr array: what the manifest pins."""
    dims = getattr(array.metadata, "dimension_names", None)
    return {"shape": [int(i) for i in array.shape], "chunks": [int(i) for i in array.chunks],
            "dtype": str(array.dtype), "fill_value": str(array.fill_value),
            "dimension_names": [str(d) for d in dims] if dims else None,
            "codecs": [type(c).__name__ for c in getattr(array, "compressors", ())],
            "metadata_sha256": array_metadata_sha256(array)}


def array_metadata_sha256(array: Any) -> str:
    """SHA-256 of the canonical JSON of an array's metadata (its ``zarr.json``)."""
    text = json.dumps(array.metadata.to_dict(), sort_keys=True, separators=(",", ":"),
                      default=str)
    return hashlib.sha256(text.encode()).hexdigest()


def expects_manifest(group: Any) -> str | None:
    """Why ``group`` must carry a manifest (None: written before manifests existed).

    A store sealed by this version carries :data:`MANIFEST_MARK`; a cube records the
    sdcdist version that wrote it (``versions``: every released version writes
    manifests) and holds its cells' fingerprints (:data:`CELL_DIGESTS`).
    """
    attrs = dict(group.attrs)
    if MANIFEST_MARK in attrs:
        return f"it records a manifest format ({MANIFEST_MARK})"
    versions = attrs.get("versions")
    if isinstance(versions, str):
        try:
            versions = json.loads(versions)
        except ValueError:
            versions = None
    if isinstance(versions, Mapping) and "sdcdist" in versions:
        return f"it records sdcdist {str(versions['sdcdist'])[:20]}, which writes one"
    try:
        if CELL_DIGESTS.split("/")[0] in group:
            return "it holds cell fingerprints, which are written with one"
    except Exception:                          # noqa: BLE001 - damaged: reported elsewhere
        pass
    return None


def manifest_missing(group: Any) -> list[str]:
    """The problem of a group without its manifest that must have one (else empty)."""
    if isinstance(dict(group.attrs).get(INTEGRITY_ATTR), Mapping):
        return []
    why = expects_manifest(group)
    if why is None:
        return []
    return [f"its manifest (the {INTEGRITY_ATTR!r} attribute of the root zarr.json) is "
            f"missing, though {why}: its metadata was edited after it was written"]


def seal(group: Any, *, values_sha256: str | None = None, **extra: Any) -> dict[str, Any]:
    """Write the manifest of a group (after its attributes and arrays are final).

    For a dataset (an array ``values``) it pins the layout, the record count
    and ``values_sha256`` (see :class:`ValuesDigest`); for other groups (cubes)
    the layout of every array (kept from ``extra["arrays"]`` when resealing
    after an attribute update); for every store the SHA-256 of the other
    attributes.
    """
    manifest: dict[str, Any] = {"version": MANIFEST_VERSION, **extra}
    if group.attrs.get(MANIFEST_MARK) != MANIFEST_VERSION:
        group.attrs[MANIFEST_MARK] = MANIFEST_VERSION
    if "values" in group:
        arr = group["values"]
        manifest["values"] = {**array_layout(arr), "sha256": values_sha256}
    elif "arrays" not in manifest:
        manifest["arrays"] = {name: array_layout(a) for name, a in sorted(group.arrays())}
    manifest["attrs_sha256"] = attrs_digest(dict(group.attrs))
    group.attrs[INTEGRITY_ATTR] = manifest
    return manifest


def check_metadata(group: Any, store: str) -> list[str]:
    """Problems of a group's metadata against its manifest (empty when fine or unsealed)."""
    attrs = dict(group.attrs)
    manifest = attrs.get(INTEGRITY_ATTR)
    if not isinstance(manifest, Mapping):
        return manifest_missing(group)
    problems = []
    if manifest.get("attrs_sha256") != attrs_digest(attrs):
        problems.append("its attributes (zarr.json) changed after it was written (checksum "
                        "mismatch)")
    if "values" in manifest and "values" in group:
        arr = group["values"]
        want = {k: v for k, v in manifest["values"].items() if k != "sha256"}
        have = array_layout(arr)
        for k in _changed(want, have):
            problems.append(f"the {k} of the array 'values' is not the one written (array "
                            "metadata changed)")
        n = attrs.get("n_records")
        if isinstance(n, int) and n != int(arr.shape[0]):
            problems.append("its record count disagrees with the array's length")
    if isinstance(manifest.get("arrays"), Mapping):
        present = dict(group.arrays())
        for name, want in sorted(manifest["arrays"].items()):
            if name not in present:
                problems.append(f"the array {name!r} is missing (its zarr.json was removed)")
                continue
            have = array_layout(present[name])
            changed = _changed(want, have)
            if changed:
                problems.append(f"the {', '.join(changed)} of the array {name!r} is not the "
                                "one written (array metadata changed)")
    return problems


def dataset_attr_problems(attrs: Mapping[str, Any], shape: tuple[int, ...]) -> list[str]:
    """What is malformed in a dataset store's attributes, against the shape of its array
    ``values`` (empty when they are well-formed): ``columns`` a list of distinct names,
    one per column; ``n_records`` (when given) the array's length; ``roles`` a mapping of
    known roles to lists of those names; ``categories`` a mapping of those names to lists
    of labels. A sealed store's manifest pins its attributes; an unsealed one (written
    before manifests) is read only when these hold, since a reader trusts them."""
    n = int(shape[0]) if shape else 0
    m = int(shape[1]) if len(shape) > 1 else 1

    def bad(name: str, why: str) -> str:
        return f"the store's attribute {name!r} is malformed: {why}"

    def names(v: Any) -> bool:
        return isinstance(v, list) and all(isinstance(c, str) for c in v)

    out = []
    cols = attrs.get("columns")
    if cols is None:
        out.append(bad("columns", "it is missing"))
    elif not names(cols) or len(set(cols)) != len(cols):
        out.append(bad("columns", "it must be a list of distinct column names"))
        cols = None
    elif len(cols) != m:
        out.append(bad("columns", f"it names {len(cols)} columns, the array 'values' has {m}"))
    nrec = attrs.get("n_records")
    if nrec is not None:
        if not isinstance(nrec, int) or isinstance(nrec, bool):
            out.append(bad("n_records", "it must be the number of records (an integer)"))
        elif nrec != n:
            out.append(bad("n_records", f"it says {nrec} records, the array 'values' "
                                        f"holds {n}"))
    known = set(cols or ())
    roles = attrs.get("roles", {})
    if not isinstance(roles, Mapping) or not all(
            r in ROLES and names(v) and set(v) <= known for r, v in roles.items()):
        out.append(bad("roles", f"it must map roles ({', '.join(ROLES)}) to lists of the "
                                "store's column names"))
    cats = attrs.get("categories", {})
    if not isinstance(cats, Mapping) or not all(
            c in known and names(v) for c, v in cats.items()):
        out.append(bad("categories", "it must map the store's categorical columns to lists "
                                     "of their labels"))
    return out


def code_problems(categories: Mapping[str, list], columns: list[str],
                  column: Any) -> list[str]:
    """Categorical columns of a dataset store (``categories``, well-formed) holding values
    that are not codes of their labels; ``column(j)`` reads column ``j``'s values. Counts
    only, never the values."""
    out = []
    for c, labels in categories.items():
        x = np.asarray(column(columns.index(c)), dtype=np.float64)
        with np.errstate(invalid="ignore"):
            ok = np.isnan(x) | ((x >= 0) & (x < len(labels)) & (x == np.floor(x)))
        if not ok.all():
            out.append(f"the store's attribute 'categories' is malformed: column {c!r} has "
                       f"{int((~ok).sum())} values that are not codes of its {len(labels)} "
                       "labels (a numeric column declared categorical)")
    return out


def malformed_error(store: str, problems: list[str]) -> SdcInputError:
    """The error of a dataset store whose attributes are malformed
    (:func:`dataset_attr_problems`)."""
    return SdcInputError(f"Cannot read the store {store!r}: {'; '.join(problems)}; "
                         "re-ingest the source (sdcdist ingest).")


_LAYOUT_WORDS = {"metadata_sha256": "metadata (zarr.json)"}


def _changed(want: Mapping[str, Any], have: Mapping[str, Any]) -> list[str]:
    """The layout entries that differ; the whole document's checksum only when nothing
    more specific (shape, fill value...) explains the change."""
    changed = [k for k in want if want[k] != have.get(k)]
    named = [k for k in changed if k != "metadata_sha256"]
    return named or [_LAYOUT_WORDS.get(k, k) for k in changed]


def check_cube_fingerprints(group: Any, store: str) -> None:
    """Raise :class:`CorruptStoreError` if a sealed cube's coordinates or a done cell's
    results differ from the fingerprints written with them (what ``verify`` checks),
    so that nothing reads a tampered cube's values."""
    manifest = dict(group.attrs).get(INTEGRITY_ATTR)
    if not isinstance(manifest, Mapping):
        return                                 # unsealed: check_metadata decided
    done = np.asarray(read(group["done"], store=store, name="done"))
    cells = [tuple(int(i) for i in c) for c in np.argwhere(done == 1)]
    report = VerifyReport(store, "cube")
    _check_fingerprints(group, manifest, cells, report)
    if report.problems:
        raise metadata_error(store, report.problems)


def metadata_error(store: str, problems: list[str]) -> CorruptStoreError:
    return CorruptStoreError(
        f"{store!r} is corrupted: {'; '.join(problems)}. Restore the store from a copy, or "
        "recreate it (sdcdist ingest / rerun the audit with --overwrite).")


# ---------------------------------------------------------------------------
# verify


@dataclass
class VerifyReport:
    """What :func:`verify_store` found.

    Attributes
    ----------
    store : str
    kind : {"dataset", "cube", "calibration", "zarr"}
    ok : bool
        No problem found.
    problems : list of str
        One line each (store parts and chunk indices, never values).
    checked : dict
        Counts of what was checked (arrays, chunks, records, done cells...).
    sealed : bool
        Whether the store has a manifest (stores written by older versions
        have none: only their chunk checksums and presence can be checked).
    """

    store: str
    kind: str
    problems: list[str] = field(default_factory=list)
    checked: dict[str, Any] = field(default_factory=dict)
    sealed: bool = False
    notes: list[str] = field(default_factory=list)

    @property
    def ok(self) -> bool:
        return not self.problems

    def raise_if_bad(self) -> None:
        """Raise :class:`CorruptStoreError` listing the problems, if any."""
        if self.problems:
            raise CorruptStoreError(f"{self.store!r} failed verification: "
                                    + "; ".join(self.problems))

    def lines(self) -> list[str]:
        """Human-readable summary, one fact per line."""
        head = f"{self.store}: {self.kind}, " + ("OK" if self.ok else
                                                   f"{len(self.problems)} problem(s)")
        facts = [f"  {k}: {v}" for k, v in self.checked.items()]
        if (not self.sealed and self.checked
                and not any(INTEGRITY_ATTR in p for p in self.problems)):
            facts.append("  no manifest (written by an older sdcdist): metadata and "
                         "fingerprint not checked")
        facts += [f"  {n}" for n in self.notes]
        return [head] + facts + [f"  problem: {p}" for p in self.problems]


def _all_positions(array: Any) -> list[tuple[int, ...]]:
    grid = [max(1, -(-n // c)) if n else 0 for n, c in zip(array.shape, array.chunks)]
    return list(itertools.product(*(range(g) for g in grid)))


def _check_chunks(array: Any, store: str, name: str, report: VerifyReport,
                  required: list[tuple[int, ...]] | None,
                  digest: ValuesDigest | None = None) -> bool:
    """Checksum every stored chunk of ``array``; report missing ``required`` ones.

    With ``digest`` (a 2-D array chunked along rows only) the chunks are fed to it in
    record order; returns whether the digest saw every chunk.
    """
    positions = _all_positions(array)
    present = stored_chunk_keys(array)
    bad, undecodable = [], []
    complete = True
    for pos in positions:
        if chunk_key(array, pos) not in present:
            complete = False
            continue
        region = tuple(slice(i * c, min((i + 1) * c, n))
                       for i, c, n in zip(pos, array.chunks, array.shape))
        try:
            data = array[region]
        except Exception as exc:               # noqa: BLE001 - one chunk alone: damage
            # a checksum failure, or bytes the array's (edited) metadata cannot decode
            (bad if is_checksum_error(exc) else undecodable).append(pos)
            complete = False
            continue
        if digest is not None and complete:
            digest.update(data)
    report.checked["chunks"] = report.checked.get("chunks", 0) + len(present)
    if bad:
        report.problems.append(f"chunk(s) {chunk_text(bad)} of {name!r} failed the CRC-32C "
                               "checksum")
    if undecodable:
        report.problems.append(f"chunk(s) {chunk_text(undecodable)} of {name!r} cannot be "
                               "decoded with the array's metadata (its zarr.json edited: data "
                               "type, chunk shape or codecs; or the chunks replaced)")
    if required:
        gone = [pos for pos in required if chunk_key(array, pos) not in present]
        if gone:
            report.problems.append(f"chunk(s) {chunk_text(gone)} of {name!r} are missing")
    return complete


def _verify_dataset(group: Any, store: str, report: VerifyReport,
                    source: str | os.PathLike | None) -> None:
    arr = group["values"]
    attrs = dict(group.attrs)
    manifest = attrs.get(INTEGRITY_ATTR)
    report.sealed = isinstance(manifest, Mapping)
    report.problems += check_metadata(group, store)
    want = manifest.get("values", {}).get("sha256") if report.sealed else None
    by_rows = arr.ndim == 2 and int(arr.chunks[1]) >= int(arr.shape[1])
    digest = ValuesDigest() if want and by_rows else None
    seen_all = _check_chunks(arr, store, "values", report, _all_positions(arr), digest)
    report.checked["records"] = int(arr.shape[0])
    report.checked["variables"] = int(arr.shape[1]) if arr.ndim > 1 else 1
    if not any("record count" in p for p in report.problems):
        report.problems += dataset_attr_problems(attrs, tuple(arr.shape))
    if not report.problems and not report.sealed and arr.ndim == 2:
        report.problems += code_problems(attrs.get("categories", {}), attrs["columns"],
                                         lambda j: read(arr, (slice(None), j), store=store,
                                                        name="values", complete=True))
    if report.problems:
        return
    if want:
        if digest is None or not seen_all:       # chunked across columns: a second pass
            digest = ValuesDigest()
            rows = max(1, int(arr.chunks[0]))
            for start in range(0, int(arr.shape[0]), rows):
                digest.update(read(arr, slice(start, start + rows), store=store,
                                   name="values", complete=True))
        same = digest.hexdigest() == want
        if not same:
            report.problems.append("the values' fingerprint (SHA-256) differs from the one "
                                   "recorded when the store was written")
        report.checked["fingerprint"] = "matches" if same else "differs"
    if source is not None:
        h = hashlib.sha256()
        try:
            with open(source, "rb") as f:
                for block in iter(lambda: f.read(1 << 20), b""):
                    h.update(block)
        except OSError as exc:
            raise unreadable_error("the source file", os.path.basename(str(source)),
                                   type(exc).__name__) from None
        if attrs.get("sha256") != h.hexdigest():
            report.problems.append(f"the source file {os.path.basename(str(source))!r} is not "
                                   "the one this store was ingested from (SHA-256 differs)")
        else:
            report.checked["source"] = "sha256 matches"


def _sealed_cube(group: Any) -> bool:
    manifest = dict(group.attrs).get(INTEGRITY_ATTR)
    return isinstance(manifest, Mapping) and manifest.get("cells") == "complete"


def _cell_pos(array: Any, cell: tuple[int, ...]) -> tuple[int, ...]:
    d, m, p, r = cell
    return (d, m, p, 0, r) + ((0,) * (array.ndim - 5))


def _required_chunks(group: Any, cells: list[tuple[int, ...]]) -> dict[str, list]:
    """Chunk positions that must exist in a cube sealed with ``cells: "complete"``.

    ``value`` and ``keyset_value`` of every done cell (:func:`~sdcdist.cube.write_cell`
    stores them even when all NaN; nothing else writes them), and every chunk of
    ``flag`` and ``excluded`` (written in full, as -1, when the cube is created).
    Older cubes carry no such promise: nothing is required.
    """
    if not _sealed_cube(group):
        return {}
    out: dict[str, list] = {}
    for name in ("value", "keyset_value"):
        if name in group:
            out[name] = [_cell_pos(group[name], c) for c in cells]
    for name in ("flag", "excluded"):
        if name in group:
            out[name] = _all_positions(group[name])
    return out


def _unmarked_cells(group: Any, done: np.ndarray) -> list[tuple[int, ...]]:
    """Cells of a sealed cube with stored values but not marked done.

    A kill between a cell's values and its done mark, or a done mark reset by
    hand (to recompute the cell), or a lost ``done`` chunk: a resumed audit
    recomputes such cells, so they are reported, not refused.
    """
    if not _sealed_cube(group) or "value" not in group:
        return []
    value = group["value"]
    present = stored_chunk_keys(value)
    return [tuple(int(i) for i in pos) for pos in np.argwhere(done != 1)
            if chunk_key(value, _cell_pos(value, tuple(int(i) for i in pos))) in present]


def _verify_cube(group: Any, store: str, report: VerifyReport) -> None:
    manifest = dict(group.attrs).get(INTEGRITY_ATTR)
    report.sealed = isinstance(manifest, Mapping)
    report.problems += check_metadata(group, store)
    done_arr = group["done"]
    try:
        done = np.asarray(read(done_arr, store=store, name="done"))
    except CorruptChunkError:
        done = None       # its chunks are reported below; the cells cannot be checked
    if done is not None:
        cells = [tuple(int(i) for i in c) for c in np.argwhere(done == 1)]
        report.checked["done cells"] = len(cells)
        report.checked["cells"] = int(done.size)
        required = _required_chunks(group, cells)
    else:
        cells, required = [], {}
    for name, array in sorted(group.arrays()):
        _check_chunks(array, store, name, report, required.get(name))
    if report.sealed:
        _check_fingerprints(group, manifest, cells, report)
    if done is not None:
        unmarked = _unmarked_cells(group, done)
        if unmarked:          # a resumed audit recomputes them; not damage by itself
            report.checked["cells written but not marked done"] = len(unmarked)


def _check_fingerprints(group: Any, manifest: Mapping[str, Any], cells: list,
                        report: VerifyReport, *, cube: bool = True) -> None:
    """The coordinates' and each done cell's values against the fingerprints written with
    them (cubes written before fingerprints have none: said in the report)."""
    fixed = manifest.get("arrays_sha256")
    if isinstance(fixed, Mapping):
        arrays = dict(group.arrays())
        for name, want in sorted(fixed.items()):
            if name not in arrays:
                continue                       # reported by check_metadata
            try:
                have = array_sha256(arrays[name])
            except Exception:                  # noqa: BLE001 - a damaged chunk, reported
                continue
            if have != want:
                report.problems.append(f"the values of the array {name!r} differ from those "
                                       "written (fingerprint mismatch)")
        report.checked["arrays fingerprinted"] = len(fixed)
    elif not cube:
        report.notes.append("no fingerprints (written by an older sdcdist): values checked "
                            "against their chunk checksums only")
    if not cube:
        return
    if manifest.get("cell_digests") != CELL_DIGESTS:
        report.notes.append("no cell fingerprints (written by an older sdcdist): the cells' "
                            "values were checked against their chunk checksums only")
        return
    try:
        digests = group[CELL_DIGESTS]
    except KeyError:
        report.problems.append(f"the cell fingerprints ({CELL_DIGESTS}) are missing")
        return
    methods = _labels(group, "method")
    unsigned, changed = [], []
    try:                                       # each array read once, not once per cell
        whole = {name: np.asarray(group[name][...]) for name in CELL_ARRAYS if name in group}
        if _has(group, RELEASE_FINGERPRINTS):
            whole[RELEASE_FINGERPRINTS] = np.asarray(group[RELEASE_FINGERPRINTS][...])
        all_digests = np.asarray(digests[...], dtype=np.uint8)
    except Exception:                          # noqa: BLE001 - reported by the chunk checks
        whole, all_digests = None, None        # a damaged chunk: cell by cell below
    unreadable = []
    for cell in cells:
        try:
            if whole is not None:
                want = bytes(all_digests[cell])
                have = cell_sha256(whole, cell)
            else:
                want = bytes(np.asarray(digests[cell], dtype=np.uint8))
                have = cell_sha256(group, cell)
        except Exception:                      # noqa: BLE001 - a damaged or undecodable
            unreadable.append(cell)            # chunk (the chunk checks say which)
            continue
        if not any(want):
            unsigned.append(cell)
        elif want != have:
            changed.append(cell)

    def where(cs: list) -> str:
        text = ", ".join(f"{methods[c[1]] if c[1] < len(methods) else c[1]} param #{c[2]} "
                         f"replicate {c[3]}" + (f" (dataset #{c[0]})" if c[0] else "")
                         for c in cs[:5])
        return text + (f" and {len(cs) - 5} more" if len(cs) > 5 else "")
    if changed:
        report.problems.append(f"the results of {len(changed)} cell(s) differ from those "
                               f"written (fingerprint mismatch): {where(changed)}")
    if unsigned:
        report.problems.append(f"{len(unsigned)} cell(s) are marked done but were never "
                               f"written (no fingerprint; the done mark changed): "
                               f"{where(unsigned)}")
    if unreadable:
        report.problems.append(f"the results of {len(unreadable)} cell(s) cannot be read to "
                               f"check their fingerprints: {where(unreadable)}")
    report.checked["cell fingerprints"] = "match" if not (changed or unsigned or unreadable) \
        else "differ"


def _labels(group: Any, name: str) -> list[str]:
    try:
        return [str(x) for x in np.asarray(group[name][:])]
    except Exception:                          # noqa: BLE001
        return []


def check_cube_cells(group: Any, store: str) -> None:
    """Raise :class:`~sdcdist.checksums.MissingChunkError` if a done cell of a cube lost a chunk."""
    done_arr = group["done"]
    done = np.asarray(read(done_arr, store=store, name="done"))
    cells = [tuple(int(i) for i in c) for c in np.argwhere(done == 1)]
    for name, positions in _required_chunks(group, cells).items():
        array = group[name]
        present = stored_chunk_keys(array)
        gone = [pos for pos in positions if chunk_key(array, pos) not in present]
        if gone:
            raise missing_error(store, name, gone)


def _json_ok(path: str) -> bool:
    try:
        with open(path, "rb") as f:
            json.loads(f.read())
        return True
    except (OSError, ValueError):
        return False


def _zarr_below(store: str, depth: int = 3) -> bool:
    """Whether a folder holds Zarr metadata below its top (a store that lost its root)."""
    base = os.path.abspath(store).rstrip(os.sep).count(os.sep)
    for here, dirs, files in os.walk(store):
        if "zarr.json" in files and os.path.abspath(here) != os.path.abspath(store):
            return True
        if os.path.abspath(here).count(os.sep) - base >= depth:
            dirs[:] = []
    return False


def _unreadable_members(store: str, depth: int = 3) -> list[str]:
    """The members (paths inside ``store``) whose zarr.json does not parse."""
    out = []
    base = os.path.abspath(store).rstrip(os.sep).count(os.sep)
    for here, dirs, files in os.walk(store):
        dirs.sort()
        if "zarr.json" in files and not _json_ok(os.path.join(here, "zarr.json")):
            out.append(os.path.relpath(here, store).replace(os.sep, "/"))
        if os.path.abspath(here).count(os.sep) - base >= depth or "c" in dirs and \
                "zarr.json" in files:
            dirs[:] = [d for d in dirs if d != "c"]
    return out


def verify_store(path: str | os.PathLike, *,
                 source: str | os.PathLike | None = None) -> VerifyReport:
    """Check a dataset store or a result cube completely; never raises for damage.

    Dataset stores (an array ``values``): every chunk present and passing its
    CRC-32C checksum, the metadata against the manifest (attributes checksum,
    shape, chunks, codecs), the record count, and the values' SHA-256
    fingerprint recorded at write time; with ``source``, also that the file
    hashes to the SHA-256 recorded at ingest. Cubes (``value`` and ``done``):
    every stored chunk's checksum, the attributes checksum, and that every
    done cell has all its chunks. Other Zarr groups (calibration cubes):
    every stored chunk's checksum.

    Parameters
    ----------
    path : path or URL
        The store.
    source : path, optional
        The CSV/Parquet file a dataset store was ingested from.

    Returns
    -------
    VerifyReport
        ``report.ok``, ``report.problems`` (one line each, no values),
        ``report.lines()`` for printing; ``report.raise_if_bad()``.

    Raises
    ------
    SdcInputError
        ``path`` is not a Zarr group, or ``source`` is given for a cube.
    """
    import zarr

    store = str(path)
    try:
        group = zarr.open_group(store, mode="r")
        list(group.keys())                     # every member's zarr.json is parsed here
    except Exception:
        local = "://" not in store
        root = os.path.join(store, "zarr.json")
        report = VerifyReport(store, "zarr")
        if local and os.path.isfile(root) and not _json_ok(root):
            # a Zarr store whose root metadata is damaged (truncated, overwritten)
            report.problems.append("its root metadata (zarr.json) cannot be read (damaged or "
                                   "truncated)")
            return report
        if local and os.path.isdir(store) and not os.path.exists(root) and _zarr_below(store):
            report.problems.append("its root metadata (zarr.json) is missing (deleted, or "
                                   "never copied), though its arrays are there")
            return report
        bad = _unreadable_members(store) if local else []
        if bad:
            report.problems.append(f"the metadata (zarr.json) of {', '.join(map(repr, bad))} "
                                   "cannot be read (damaged or truncated)")
            return report
        raise SdcInputError(f"{store!r} is not a Zarr store; give the path of a dataset "
                            "store (sdcdist ingest) or a cube (sdcdist audit)") from None
    if "values" in group:
        report = VerifyReport(store, "dataset")
        _verify_dataset(group, store, report, source)
        return report
    if source is not None:
        raise SdcInputError("The 'source' parameter of verify_store applies to dataset "
                            f"stores only; {store!r} is not one.")
    if "value" in group and "done" in group:
        report = VerifyReport(store, "cube")
        _verify_cube(group, store, report)
        return report
    kind = "calibration" if "calibrated_param" in group else "zarr"
    report = VerifyReport(store, kind)
    report.sealed = isinstance(dict(group.attrs).get(INTEGRITY_ATTR), Mapping)
    report.problems += check_metadata(group, store)
    arrays = sorted(group.arrays())
    if not arrays:
        raise SdcInputError(f"{store!r} holds no arrays; it is not an sdcdist store")
    for name, array in arrays:
        _check_chunks(array, store, name, report, None)
    if report.sealed:
        _check_fingerprints(group, dict(group.attrs)[INTEGRITY_ATTR], [], report, cube=False)
    return report
