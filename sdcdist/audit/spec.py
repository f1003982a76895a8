"""Audit specs: a YAML file naming the data, the methods and grids, the metrics.

Example::

    name: demo
    seed: 20261126
    dataset:
      name: incomes
      synthetic: {rows: 5000, columns: 8, seed: 7}   # or  path: data.zarr / data.csv
                                                    # or  reference: census
      keys: [WAGES, BUSINC, INTINC]                 # optional: key columns for linkage
    methods:
      - {name: noise, params: [0.05, 0.1, 0.2]}
      - {name: rankswap, params: [5, 10, 15]}
    replicates: 2
    metrics: [IL1s, DLD, ID1]
    keysets: prefixes        # or a list of column lists
    options: {chunk_rows: 65536}   # see sdcdist.options (docs/catalog.md, "Options")

Several datasets: ``datasets:`` with a list of such mappings (each with its
own ``name``); the cube gains a ``dataset`` dimension. ``reference: census``
(or ``tarragona``, ``household``) reads a reference file shipped with sdcdist
through :func:`sdcdist.data.reference_file`.
``path`` may be an fsspec URL (``s3://bucket/data.zarr``); credentials never
go in a spec (a credential-like key is refused, see :mod:`sdcdist.storage`).

Every field of a dataset mapping says whether its value names data (a file or URL the
audit reads); :data:`DATA_FIELDS` (``path``, ``holdout``) is read from that, and the
service resolves and checks each of them (:mod:`sdcdist.service.routes.audits`).

Validation raises :class:`SdcInputError` naming the culprit: unknown keys,
method or metric names (with the valid ones), out-of-range parameters,
unknown or ill-typed options (top-level ``options`` and each method's
``options``, checked against their declarations in :mod:`sdcdist.options`),
unknown columns.

A column named twice in one key set (or in ``columns``, ``keys`` or a role)
is refused. A spec is UTF-8 YAML read by :class:`sdcdist.yamlsafe.SpecLoader`: no anchors
or aliases, no duplicate keys, ``5e-2`` is a number (YAML 1.2). What it may
ask for is bounded (:mod:`sdcdist.limits`): at most
:data:`~sdcdist.limits.MAX_CELLS` cells (datasets x replicates x parameter
values), :data:`~sdcdist.limits.MAX_REPLICATES` replicates, and a
``synthetic`` dataset of at most 13 columns that fits in
:data:`~sdcdist.limits.MAX_MEMORY_BYTES`.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Mapping
from dataclasses import dataclass, field, fields
from pathlib import Path
from typing import Any

from .. import options as optionsmod
from ..errors import (SdcInputError, check_choice, missing_file_error, unknown_keys_error,
                      unreadable_error, value_error)
from ..masking import get_method
from ..metrics import companions, expand_requirements, get_metric
from ..metrics.keysets import check_distinct
from ..storage import refuse_credentials
from ..text import label, repeated
from .. import limits

__all__ = ["AuditSpec", "DatasetSpec", "MethodSpec", "load_spec", "parse_spec",
           "read_spec_text", "DATA_FIELDS", "stored_spec", "LABEL_OPTIONS", "check_files"]

#: Method options whose values are category labels of the data (``recode``'s
#: ``mapping``): a cube records their SHA-256, never the labels (:func:`stored_spec`).
LABEL_OPTIONS = ("mapping",)


def stored_spec(raw: Any) -> Any:
    """The spec as a cube records it: every option that holds category labels
    (:data:`LABEL_OPTIONS`, at any depth) replaced by ``{"sha256": ...}`` of its canonical
    JSON, so that a cube never carries values of the data (the spec's own SHA-256,
    ``spec_sha256``, still pins the whole spec)."""
    if isinstance(raw, Mapping):
        out = {}
        for k, v in raw.items():
            if k in LABEL_OPTIONS and v is not None:
                text = json.dumps(v, sort_keys=True, separators=(",", ":"), default=str)
                out[k] = {"sha256": hashlib.sha256(text.encode()).hexdigest()}
            else:
                out[k] = stored_spec(v)
        return out
    if isinstance(raw, (list, tuple)):
        return [stored_spec(v) for v in raw]
    return raw

_TOP = {"name", "seed", "dataset", "datasets", "methods", "replicates", "metrics", "keysets",
        "options", "description", "require"}
_SOURCES = ("path", "synthetic", "reference")
_METHOD = {"name", "params", "options"}


def _f(names_data: bool, default: Any = None, factory: Any = None) -> Any:
    """A field of a dataset mapping; ``names_data``: its value names a file or URL the
    audit reads (the service resolves and checks every such field, see
    :data:`DATA_FIELDS`). Every field must say, so a new one cannot be forgotten."""
    meta = {"names_data": names_data}
    if factory is not None:
        return field(default_factory=factory, metadata=meta)
    return field(default=default, metadata=meta)


@dataclass(frozen=True)
class DatasetSpec:
    name: str = field(metadata={"names_data": False})
    #: the data: a CSV, Parquet or Zarr file, or an fsspec URL
    path: str | None = _f(True)
    synthetic: dict[str, int] | None = _f(False)
    reference: str | None = _f(False)     # a file shipped with sdcdist, named by a word
    columns: tuple[str, ...] | None = _f(False)
    keys: tuple[str, ...] | None = _f(False)
    roles: dict[str, list[str]] = _f(False, factory=dict)
    categorical: tuple[str, ...] | None = _f(False)
    #: cells that mean "missing" besides empty cells (CSV and Parquet files)
    na_values: tuple[str, ...] | None = _f(False)
    #: a holdout file (records of the population the masked files are not made from)
    holdout: str | None = _f(True)


def _schema_fields() -> tuple[set[str], frozenset[str]]:
    names, data = set(), set()
    for f in fields(DatasetSpec):
        if "names_data" not in f.metadata:      # pragma: no cover - a programming error
            raise TypeError(f"DatasetSpec.{f.name} does not say whether it names data")
        names.add(f.name)
        if f.metadata["names_data"]:
            data.add(f.name)
    return names, frozenset(data)


#: the keys of a dataset mapping, and those whose value names data (a file or URL the
#: audit reads: ``path``, ``holdout``); both read from :class:`DatasetSpec`'s fields
_DATASET, DATA_FIELDS = _schema_fields()


@dataclass(frozen=True)
class MethodSpec:
    name: str
    params: tuple[float, ...]
    options: dict[str, Any] = field(default_factory=dict)


@dataclass(frozen=True)
class AuditSpec:
    """A validated audit spec. ``raw`` is the normalised dict that the cube stores."""

    name: str
    seed: int
    datasets: tuple[DatasetSpec, ...]
    methods: tuple[MethodSpec, ...]
    replicates: int
    metrics: tuple[str, ...]
    keysets: Any
    options: dict[str, Any]
    raw: dict[str, Any]
    base_dir: str = "."
    #: the release rules (``require:``), each ``METRIC OP NUMBER`` (:mod:`sdcdist.rules`)
    require: tuple[str, ...] = ()

    @property
    def dataset(self) -> DatasetSpec:
        """The first (for most specs the only) dataset."""
        return self.datasets[0]

    @property
    def sha256(self) -> str:
        return hashlib.sha256(json.dumps(self.raw, sort_keys=True).encode()).hexdigest()

    def param_grid(self) -> list[float]:
        """The union of all parameter values, sorted (the cube's ``param`` coordinate)."""
        return sorted({p for m in self.methods for p in m.params})


def _unknown_keys(what: str, d: Mapping[str, Any], allowed: set[str]) -> None:
    bad = sorted(set(d) - allowed, key=str)
    if bad:
        raise unknown_keys_error(what, bad, allowed)


def _int(what: str, v: Any, low: int, high: int | None = None, why: str = "") -> int:
    if isinstance(v, bool) or not isinstance(v, int) or v < low or \
            (high is not None and v > high):
        rng = f">= {low}" if high is None else f"in [{low}, {high}]"
        raise value_error(what, f"an integer {rng}{why}", v)
    return v


def _str_list(what: str, v: Any) -> tuple[str, ...]:
    if not isinstance(v, (list, tuple)) or not all(isinstance(x, str) for x in v):
        raise value_error(what, "a list of column names", v)
    dup = sorted(repeated(v))
    if dup:
        raise SdcInputError(f"{what} ({', '.join(v)}) names column(s) {dup} more than once; "
                            "list each column once")
    return tuple(v)


def parse_spec(doc: Mapping[str, Any], *, base_dir: str | Path = ".") -> AuditSpec:
    """Validate a spec dict (as loaded from YAML) into an :class:`AuditSpec`."""
    if not isinstance(doc, Mapping):
        raise value_error("the audit spec", "a mapping (YAML keys and values)",
                          got_text=f"a {type(doc).__name__}")
    refuse_credentials(doc)
    _unknown_keys("the spec", doc, _TOP)
    for req in ("methods", "metrics"):
        if req not in doc:
            raise SdcInputError(f"the spec has no {req!r}; see examples/demo.yaml")
    name = doc.get("name", "audit")
    if isinstance(name, (int, float)) and not isinstance(name, bool):
        name = str(name)                # YAML reads `name: 2024` as a number
    name = label(name, "The spec's 'name'")
    seed = _int("'seed'", doc.get("seed", 0), 0)
    replicates = _int("'replicates'", doc.get("replicates", 1), 1, limits.MAX_REPLICATES,
                      " (more replicates no longer move their mean)")

    if ("dataset" in doc) == ("datasets" in doc):
        raise SdcInputError("the spec needs exactly one of 'dataset' (a mapping) or "
                            "'datasets' (a list of mappings)")
    if "dataset" in doc:
        datasets = (_dataset(doc["dataset"], "'dataset'"),)
    else:
        if not isinstance(doc["datasets"], list) or not doc["datasets"]:
            raise value_error("'datasets'", "a non-empty list of dataset mappings")
        datasets = tuple(_dataset(d, f"datasets[{i}]") for i, d in enumerate(doc["datasets"]))
        names = [d.name for d in datasets]
        dup = sorted(repeated(names))
        if dup:
            raise SdcInputError(f"dataset name(s) {dup} used twice in 'datasets'; give each "
                                "dataset its own 'name'")

    if not isinstance(doc["methods"], list) or not doc["methods"]:
        raise value_error("'methods'", "a non-empty list of {name, params}")
    methods = []
    seen = set()
    for i, m in enumerate(doc["methods"]):
        if isinstance(m, str):
            m = {"name": m}
        if not isinstance(m, Mapping) or "name" not in m:
            raise value_error(f"methods[{i}]", "a mapping with a 'name'")
        _unknown_keys(f"methods[{i}]", m, _METHOD)
        meth = get_method(m["name"])
        if meth.name in seen:
            raise SdcInputError(f"method {meth.name!r} is listed twice; put all its parameter "
                                "values in one 'params' list")
        seen.add(meth.name)
        params = m.get("params", [0] if meth.kind == "none" else None)
        if params is None:
            raise SdcInputError(f"methods[{i}] ({meth.name}) needs 'params', a list of values "
                                f"for {meth.param!r}: {meth.allowed_text()}")
        if not isinstance(params, list) or not params:
            params = [params]
        checked = tuple(sorted({meth.check_param(p) for p in params}))
        if meth.steps:
            from ..masking._registry import check_pipeline_options
            mopts = check_pipeline_options(meth, m.get("options"))
        else:
            mopts = optionsmod.validate_method_options(meth, m.get("options"))
        methods.append(MethodSpec(meth.name, checked, mopts))

    metrics = doc["metrics"]
    if isinstance(metrics, str):
        metrics = [metrics]
    if not isinstance(metrics, list) or not metrics:
        raise value_error("'metrics'", "a non-empty list of metric names")
    for k in metrics:
        get_metric(k)
    dup = repeated(metrics)
    if dup:
        raise SdcInputError(f"'metrics' names {dup} more than once; list each metric once")
    metrics = tuple(with_companions(expand_requirements(metrics)))
    from ..metrics import needing
    need = needing(metrics, "holdout")
    lacking = [d.name for d in datasets if d.holdout is None]
    if need and lacking:
        raise SdcInputError(f"{', '.join(need)} compare the masked files with a holdout file, "
                            f"and dataset(s) {lacking} name none; give each dataset a "
                            "'holdout:' (a file of records with the dataset's columns that "
                            "were not masked), or leave these metrics out")
    _check_cells(datasets, methods, replicates)
    require: list[str] = []
    if "require" in doc:
        from ..rules import spec_rules
        require = spec_rules(doc["require"], metrics)

    keysets = doc.get("keysets", "prefixes")
    if keysets != "prefixes":
        if not isinstance(keysets, list) or not keysets:
            raise value_error("'keysets'", "'prefixes' or a non-empty list of column lists")
        keysets = [list(_str_list(f"key set {i + 1}", k)) for i, k in enumerate(keysets)]
        if any(len(k) == 0 for k in keysets):
            raise SdcInputError("an empty key set was given; every key set needs at least "
                                "one column")
        check_distinct(keysets, what="'keysets': key sets")

    options = optionsmod.validate(doc.get("options"), what="'options'")

    raw = {"name": name, "seed": seed, "replicates": replicates,
           "methods": [{"name": m.name, "params": list(m.params), "options": m.options}
                       for m in methods],
           "metrics": list(metrics), "keysets": keysets, "options": options}
    if require:           # only when given: the SHA-256 of a spec without rules is unchanged
        raw["require"] = require
    if "dataset" in doc:
        raw["dataset"] = _raw_dataset(datasets[0])
    else:
        raw["datasets"] = [_raw_dataset(d) for d in datasets]
    return AuditSpec(name, seed, datasets, tuple(methods), replicates, metrics, keysets,
                     options, raw, str(base_dir), tuple(require))


def _dataset(d: Any, what: str) -> DatasetSpec:
    """Validate one dataset mapping."""
    if not isinstance(d, Mapping):
        raise value_error(what, "a mapping with 'path', 'synthetic' or 'reference'")
    if "id_column" in d:
        raise SdcInputError(
            f"{what} has 'id_column', which an audit does not use: it masks each dataset "
            "itself, record by record, so the row order is the truth of which masked record "
            "is whose. Leave the identifier out of the data ('columns' lists the columns to "
            "use); to measure the risk of an existing release against an external file by "
            "an identifier, use `sdcdist risk --id` or `sdcdist link --id`")
    _unknown_keys(what, d, _DATASET)
    if sum(k in d for k in _SOURCES) != 1:
        raise SdcInputError(f"{what} needs exactly one of 'path' (a CSV, Parquet or Zarr "
                            "file), 'synthetic' ({rows, columns, seed}) or 'reference' "
                            "(census or tarragona)")
    if "path" in d and (not isinstance(d["path"], str) or not d["path"].strip()):
        # a null or empty path would name the file 'None' or the spec's own folder
        raise value_error("'" + what.strip("'") + ".path'", "the path of a CSV, Parquet or Zarr file "
                          "(relative to the spec's folder)", d["path"])
    synthetic = None
    if "synthetic" in d:
        s = d["synthetic"]
        if not isinstance(s, Mapping):
            raise value_error(f"'{what}.synthetic'", "a mapping {rows, columns, seed}")
        _unknown_keys(f"{what}.synthetic", s, {"rows", "columns", "seed"})
        columns = _int(f"{what}.synthetic.columns", s.get("columns", 8), 1,
                       limits.MAX_COLUMNS, " (the generator has 13 variables)")
        rows = limits.check_rows(s.get("rows", 1000), columns=columns,
                                 what=f"{what}.synthetic.rows", in_memory=True)
        synthetic = {"rows": rows, "columns": columns,
                     "seed": _int(f"{what}.synthetic.seed", s.get("seed", 0), 0)}
    reference = None
    if "reference" in d:
        from ..data.refdata import REFERENCE_FILES
        reference = check_choice("reference", str(d["reference"]), REFERENCE_FILES)
    roles = d.get("roles") or {}
    if not isinstance(roles, Mapping):
        raise SdcInputError(f"{what}.roles must map role names to lists of columns")
    name = d.get("name", reference or "data")
    if isinstance(name, (int, float)) and not isinstance(name, bool):
        name = str(name)                # YAML reads `name: 2024` as a number
    return DatasetSpec(
        name=label(name, f"The 'name' of {what}"),
        path=str(d["path"]) if "path" in d else None, synthetic=synthetic,
        reference=reference,
        columns=_str_list(f"{what}.columns", d["columns"]) if "columns" in d else None,
        keys=_str_list(f"{what}.keys", d["keys"]) if "keys" in d else None,
        roles={str(k): list(_str_list(f"{what}.roles.{k}", v)) for k, v in roles.items()},
        categorical=_str_list(f"{what}.categorical", d["categorical"])
        if "categorical" in d else None,
        na_values=_na_values(f"{what}.na_values", d["na_values"]) if "na_values" in d else None,
        holdout=_holdout(d, what))


def _holdout(d: Mapping[str, Any], what: str) -> str | None:
    if "holdout" not in d:
        return None
    h = d["holdout"]
    if not isinstance(h, str) or not h:
        raise value_error(f"{what}.holdout", "the path of a CSV, Parquet or Zarr file", h)
    if "path" not in d:
        raise SdcInputError(f"{what} has a 'holdout' but no 'path': a holdout is a file of "
                            "records held out of a dataset read from a file; give the "
                            "dataset's 'path' too, or leave 'holdout' out")
    return h


#: How a message names the file of each field of :data:`DATA_FIELDS`.
_FILE_WHAT = {"path": "dataset file", "holdout": "holdout file"}


def check_files(spec: AuditSpec) -> None:
    """Refuse a spec naming a local file or store that does not exist or cannot be read:
    every field that names data (:data:`DATA_FIELDS`: ``path``, ``holdout``) of every
    dataset, relative to the spec's folder, whether or not a metric reads it. Run with the
    spec, before any data is read or a cluster started; URLs are checked when read.

    Raises
    ------
    SdcInputError
        :func:`~sdcdist.errors.missing_file_error` or
        :func:`~sdcdist.errors.unreadable_error`, naming the file as the spec gives it.
    """
    import os
    for d in spec.datasets:
        for name in sorted(DATA_FIELDS):
            given = getattr(d, name)
            if given is None or "://" in given or "::" in given:
                continue
            what = _FILE_WHAT.get(name, f"{name!r} file")
            p = Path(given) if Path(given).is_absolute() else Path(spec.base_dir) / given
            if not p.exists():
                raise missing_file_error(what, given, "paths in a spec are relative to the "
                                         "spec file")
            mode = os.R_OK | os.X_OK if p.is_dir() else os.R_OK
            if not os.access(p, mode):
                raise unreadable_error(f"the {what} of dataset {d.name!r}", given,
                                       "permission denied", "check its permissions")


def _na_values(what: str, v: Any) -> tuple[str, ...]:
    """Missing-value markers: a list of texts (numbers are taken as written)."""
    from ..data.parse import missing_markers
    if not isinstance(v, (list, tuple)) or not all(
            isinstance(x, (str, int, float)) and not isinstance(x, bool) for x in v):
        raise value_error(what, "a list of missing-value markers, e.g. [NA, '-99']", v)
    return tuple(sorted(missing_markers([str(x) for x in v])))


def _check_cells(datasets: tuple[DatasetSpec, ...], methods: list[MethodSpec],
                 replicates: int) -> None:
    """Refuse a spec with more than :data:`sdcdist.limits.MAX_CELLS` cells."""
    values = sum(len(m.params) for m in methods)
    cells = len(datasets) * replicates * values
    if cells > limits.MAX_CELLS:
        raise SdcInputError(
            f"the spec asks for {cells} cells ({len(datasets)} dataset(s) x {replicates} "
            f"replicate(s) x {values} parameter value(s) over all methods), more than the "
            f"{limits.MAX_CELLS} an audit may have (each cell masks and measures a whole "
            "file); use fewer parameter values or replicates, or split the spec")


def _raw_dataset(d: DatasetSpec) -> dict[str, Any]:
    return {k: v for k, v in {
        "name": d.name, "path": d.path, "synthetic": d.synthetic, "reference": d.reference,
        "columns": list(d.columns) if d.columns else None,
        "keys": list(d.keys) if d.keys else None,
        "roles": d.roles or None,
        "categorical": list(d.categorical) if d.categorical else None,
        "na_values": list(d.na_values) if d.na_values else None,
        "holdout": d.holdout}.items() if v is not None}


def read_spec_text(path: str | Path) -> str:
    """The text of a spec file: UTF-8 (a byte-order mark is allowed), at most
    :data:`sdcdist.limits.MAX_SPEC_BYTES`.

    Raises
    ------
    SdcInputError
        If the file is missing, a folder, unreadable, too large or not UTF-8.
    """
    path = Path(path)
    try:
        with path.open("rb") as f:
            data = f.read(limits.MAX_SPEC_BYTES + 1)
    except FileNotFoundError:
        raise missing_file_error("spec file", path) from None
    except IsADirectoryError:
        raise SdcInputError(f"spec file {str(path)!r} is a folder; give the YAML file "
                            "itself") from None
    except PermissionError:
        raise SdcInputError(f"spec file {str(path)!r} cannot be read (permission denied); "
                            "check its permissions") from None
    if len(data) > limits.MAX_SPEC_BYTES:
        raise SdcInputError(f"spec file {path.name!r} is larger than "
                            f"{limits.MAX_SPEC_BYTES // 2**20} MiB; a spec names the data "
                            "and the methods, it does not hold data")
    try:
        return data.decode("utf-8-sig")
    except UnicodeDecodeError as exc:
        line = data[:exc.start].count(b"\n") + 1
        raise SdcInputError(f"spec file {path.name!r} is not UTF-8 text (byte {exc.start + 1}, "
                            f"line {line}); save it as UTF-8") from None


def load_spec(path: str | Path, *, options: Mapping[str, Any] | None = None) -> AuditSpec:
    """Read and validate a YAML spec file.

    The file is read by :func:`read_spec_text` and parsed by
    :func:`sdcdist.yamlsafe.load_yaml` (no anchors or aliases, YAML 1.2 floats),
    then validated by :func:`parse_spec`. ``options`` (the command line's
    ``-o KEY=VALUE``) set top-level ``options`` over the file's: the spec that
    runs, and that the cube records, holds them.
    """
    from ..yamlsafe import load_yaml
    path = Path(path)
    doc = load_yaml(read_spec_text(path), what=f"spec file {path.name!r}")
    if options and isinstance(doc, Mapping):
        base = doc.get("options")
        if base is not None and not isinstance(base, Mapping):
            optionsmod.validate(base, what="'options'")      # the standard refusal
        doc = {**doc, "options": {**(base or {}), **options}}
    return parse_spec(doc, base_dir=path.resolve().parent)


def with_companions(names: list[str]) -> list[str]:
    """``names`` with each metric's companions (the bounds of its confidence interval and
    its baseline: ``so_uni_lo``, ``so_uni_hi``, ``so_uni_base`` after ``so_uni``) right
    after it, unless named already: a cube records an interval metric with its interval.

    >>> with_companions(["DLD", "so_uni"])
    ['DLD', 'so_uni', 'so_uni_lo', 'so_uni_hi', 'so_uni_base']
    """
    out: list[str] = []
    for n in names:
        if n not in out:
            out.append(n)
        for c in companions(n).values():
            if c not in out and c not in names:
                out.append(c)
    return out
