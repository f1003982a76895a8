"""Run an audit: mask and measure every cell on a Dask cluster, writing the cube as cells finish.

Cells are spread by the cell executor of :mod:`sdcdist.parallel.cells`, in
one of two ways with bit-identical results:

- ``task`` cells (small files): a whole cell — mask, then every metric with
  the same blocked kernels run one after the other — is one task
  (:func:`cell_task`); many cells run at once on the cluster.
- ``distributed`` cells (large files): the masked file is one task, and each
  metric's chunk and pair-block tasks are spread over the cluster
  (:func:`cell_spread`); several cells are driven at once.

``cell_mode: auto`` (the default) picks ``task`` up to ``task_cell_limit``
records (20,000) and ``distributed`` above. Finished cells are written to the
Zarr cube immediately; a rerun of the same spec computes only the cells not
yet marked done.
"""

from __future__ import annotations

import json
import logging
import os
import shutil
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from .. import cube as cubemod
from ..data import Microdata, is_store, load_microdata, reference_file
from ..data.staging import check_replaceable
from ..data.synth import generate
from ..errors import SdcInputError, missing_file_error
from ..masking import check_data, get_method, method_options
from ..metrics import Inputs, MeasureContext, default_keysets, get_metric
from ..roles import key_role_error
from ..metrics._registry import stable_id
from ..options import OPTIONS
from ..parallel import CellExecutor, Runner, cell_mode
from ..storage import local_path
from .plan import Cell, plan_cells
from .spec import AuditSpec, DatasetSpec, check_files, load_spec, stored_spec

__all__ = ["run_audit", "load_dataset", "load_data", "AuditResult", "mask_cell", "measure_cell", "cell_task",
           "cell_spread", "run_cells", "TASK_CELL_LIMIT", "options_cell_mode",
           "spec_method_options", "library_versions", "input_paths", "spec_path"]

log = logging.getLogger(__name__)

#: records up to which ``cell_mode: auto`` runs a whole cell as one task
TASK_CELL_LIMIT = OPTIONS["task_cell_limit"].default   # declared in sdcdist.options


def options_cell_mode(options: dict[str, Any], n: int, *, cells: int | None = None,
                      workers: int = 1) -> str:
    """:func:`sdcdist.parallel.cell_mode` for a spec's ``options`` (``cell_mode`` and
    ``task_cell_limit``, their defaults when the spec leaves them out)."""
    return cell_mode(options.get("cell_mode", OPTIONS["cell_mode"].default), n,
                     limit=options.get("task_cell_limit", TASK_CELL_LIMIT), cells=cells,
                     workers=workers)


@dataclass
class AuditResult:
    """What a run did: where the cube is, how many cells it computed and skipped."""

    cube: str
    computed: int
    skipped: int
    total: int
    seconds: float
    mode: str


# ---------------------------------------------------------------------------
# data


def load_dataset(spec: AuditSpec, dataset: DatasetSpec | None = None) -> Microdata:
    """A dataset of the spec (default: the first) in memory, validated; columns and roles
    checked."""
    d = dataset if dataset is not None else spec.dataset
    if d.synthetic is not None:
        md = generate(d.synthetic["rows"], columns=d.synthetic["columns"],
                      seed=d.synthetic["seed"])
    elif d.reference is not None:
        md = load_microdata(reference_file(d.reference),
                            columns=list(d.columns) if d.columns else None,
                            categorical=list(d.categorical) if d.categorical else None,
                            allow_constant=True,
                            na_values=list(d.na_values) if d.na_values else None)
    else:
        path = spec_path(spec, d.path or "")
        if not is_store(path) and not Path(path).exists():
            raise missing_file_error("dataset file", d.path,
                                     "paths in a spec are relative to the spec file")
        md = load_microdata(path, columns=list(d.columns) if d.columns else None,
                            categorical=list(d.categorical) if d.categorical else None,
                            allow_constant=True,
                            na_values=list(d.na_values) if d.na_values else None)
    if d.columns and d.synthetic is not None:
        idx = md.column_index(d.columns)
        md = Microdata(md.values[:, idx], tuple(d.columns), {}, md.sha256)
    if d.categorical and d.synthetic is not None:
        raise SdcInputError("a synthetic dataset has numeric columns only; leave "
                            "'categorical' out of it")
    roles = {**md.roles, **d.roles}
    for r, cols in roles.items():
        md.column_index(cols, what=f"{r} column")
    if d.keys:
        md.column_index(d.keys, what="key column")
    out = Microdata(md.values, md.columns, roles, md.sha256, md.categories)
    from ..data.io import check_typed
    check_typed(out, f"dataset {d.name!r}")
    return out


def spec_path(spec: AuditSpec, path: str) -> str:
    """A data path of ``spec`` as a run opens it: a relative local path is relative to the
    spec file."""
    if "://" not in path and not Path(path).is_absolute():
        return str(Path(spec.base_dir) / path)
    return path


def input_paths(spec: AuditSpec) -> list[str]:
    """The files and stores a run of ``spec`` may read (its datasets' and holdouts'
    paths), for the check of what an output may replace."""
    return [spec_path(spec, p) for d in spec.datasets for p in (d.path, d.holdout)
            if p is not None]


def load_holdouts(spec: AuditSpec, data: list[tuple[Microdata, Any]]) -> dict[int, Microdata]:
    """The holdout file of each dataset that names one (``holdout:``), read as the dataset
    is (its columns, categorical columns and missing-value markers), categories coded as
    the dataset's. Nothing is read unless a metric of the spec compares with a holdout
    (a metric that declares the need ``holdout``): a holdout no metric needs is never
    opened."""
    from ..data import align_categories
    from ..metrics import needing
    out: dict[int, Microdata] = {}
    if not needing(spec.metrics, "holdout"):
        return out
    for i, (ds, (md, _)) in enumerate(zip(spec.datasets, data)):
        if ds.holdout is None:
            continue
        path = spec_path(spec, ds.holdout)
        if not is_store(path) and not Path(path).exists():
            raise missing_file_error("holdout file", ds.holdout,
                                     "paths in a spec are relative to the spec file")
        h = load_microdata(path, columns=list(md.columns),
                           categorical=list(ds.categorical) if ds.categorical else None,
                           allow_constant=True,
                           na_values=list(ds.na_values) if ds.na_values else None)
        wrong = sorted(set(h.categorical) ^ set(md.categorical))
        if wrong:
            raise SdcInputError(f"column(s) {wrong} of dataset {ds.name!r} are categorical in "
                                "one of the dataset and its holdout file and numeric in the "
                                "other; give both the same types")
        out[i] = align_categories(md, h)[1]
    return out


def load_data(spec: AuditSpec) -> list[tuple[Microdata, list[tuple[str, ...]]]]:
    """Every dataset of the spec, read and checked, with its key sets.

    Besides what :func:`load_dataset` checks, each method's parameters are checked
    against each dataset (:func:`sdcdist.masking.check_data`: ``k <= n/2``, enough
    records, no constant column where it matters), so that a run refuses them
    before it starts a cluster or creates a cube. Every file the spec names is checked
    first (:func:`~sdcdist.audit.spec.check_files`: a missing holdout file too).
    """
    check_files(spec)
    data = []
    for ds in spec.datasets:
        md = load_dataset(spec, ds)
        keysets = resolve_keysets(spec, md, ds)
        need = [k for k in spec.metrics
                if get_metric(k).needs_categorical]
        if need and not md.categories:
            raise SdcInputError(
                f"{', '.join(need)} measure categorical columns, and dataset {ds.name!r} "
                "has none: name its integer-coded categorical columns in the dataset's "
                "'categorical:' (text columns are categorical anyway)")
        _check_keys(spec, md, ds.name, keysets)
        _check_needs(spec, md, ds.name)
        md = split_control(md, spec.options.get("control"), spec.seed, len(data), ds.name)
        for ms in spec.methods:
            check_data(ms.name, md.values, ms.params,
                       spec_method_options(spec, md.columns, md.roles, ms.name,
                                       categorical=md.categories))
        data.append((md, keysets))
    return data


#: How a dataset of a spec is given each role a metric may need.
_ROLE_FIX = {
    "confidential": "give it a 'confidential' role (roles: {confidential: [column, ...]} in "
                    "the spec's dataset, or ingest --confidential)",
    "household": "give it a 'household' role (roles: {household: [column]} in the spec's "
                 "dataset, or ingest --household)",
}


def _check_needs(spec: AuditSpec, md: Microdata, name: str) -> None:
    """Refuse, before a cluster starts, metrics that need a role the dataset does not give
    (:func:`~sdcdist.metrics.applicable`; a worker would refuse each cell)."""
    from ..metrics import applicable, expand_requirements
    from ..metrics.inputs import NEED_TEXT
    conf = [c for c in (md.roles.get("confidential") or []) if c in md.columns]
    inputs = Inputs.from_microdata(md, confidential=conf, holdout=True)
    need: dict[str, list[str]] = {}
    for m in expand_requirements(list(spec.metrics)):
        why = applicable(m, inputs, spec.options)
        if why is not None and why.need in _ROLE_FIX:
            need.setdefault(why.need, []).append(m)
    for role, names in need.items():
        raise SdcInputError(f"{', '.join(names)} need {NEED_TEXT[role][0]}, and dataset "
                            f"{name!r} names none: {_ROLE_FIX[role]}")


def split_control(md: Microdata, share: float | None, seed: int, d: int,
                  name: str) -> Microdata:
    """The dataset with a ``share`` of its records held out as the control set.

    The held-out records are drawn without replacement by a generator seeded from the
    spec's seed and the dataset's position (the same records on every run); the others,
    in their order, are what the audit masks and measures. With a household id column,
    whole households are held out (households in random order until the share is
    reached). ``share`` None: unchanged.
    """
    if share is None:
        return md
    n = md.values.shape[0]
    n_c = int(round(share * n))
    if n_c < 1 or n - n_c < 2:
        raise SdcInputError(
            f"The 'control' option holds out {n_c} of the {n} records of dataset {name!r}, "
            "leaving no control set or fewer than 2 records to mask; choose a share that "
            "leaves both (e.g. 0.2 on a larger file)")
    rng = np.random.default_rng(np.random.SeedSequence(seed, spawn_key=(d, stable_id("control"))))
    held = np.zeros(n, bool)
    if md.household is not None:
        # whole households: the first households of a random order, up to the share
        hid = md.values[:, md.columns.index(md.household)]
        _, inv, sizes = np.unique(hid, return_inverse=True, return_counts=True)
        order = rng.permutation(sizes.size)
        take = order[:int(np.searchsorted(np.cumsum(sizes[order]), n_c)) + 1]
        held[np.isin(inv.reshape(-1), take)] = True
        n_c = int(held.sum())
        if n - n_c < 2:
            raise SdcInputError(
                f"The 'control' option holds out {n_c} of the {n} records of dataset "
                f"{name!r} (whole households), leaving fewer than 2 to mask; choose a "
                "smaller share")
    else:
        held[rng.choice(n, size=n_c, replace=False)] = True
    return Microdata(np.ascontiguousarray(md.values[~held]), md.columns, md.roles, md.sha256,
                     md.categories, control=np.ascontiguousarray(md.values[held]))


def _check_keys(spec: AuditSpec, md: Microdata, name: str, keysets: Any) -> None:
    """What the metrics need of the key sets, checked against the dataset before a cluster
    starts (the metrics check it again on the workers, too late to say it plainly):
    categorical keys for the frequency metrics, the PRL blocking column in every key
    set."""
    cats = set(md.categories)
    need = [k for k in spec.metrics
            if get_metric(k).needs_categorical]
    if need and cats:
        cand = (list(dict.fromkeys(c for ks in keysets for c in ks))
                if spec.keysets != "prefixes" else
                list(getattr(keysets, "columns", ()) or md.columns))
        if not any(c in cats for c in cand):
            raise SdcInputError(
                f"{', '.join(need)} count key combinations of categorical key columns, and "
                f"none of the key columns of dataset {name!r} ({', '.join(cand)}) is "
                f"categorical; name categorical keys ('keysets', the dataset's 'keys' or its "
                f"key role), e.g. among: {', '.join(sorted(cats))}")
    blocking = spec.options.get("prl_blocking")
    users = [k for k in spec.metrics if "prl_blocking" in get_metric(k).options]
    if blocking is not None and users:
        col = blocking if isinstance(blocking, str) else str(blocking[0])
        if col not in md.columns:
            from ..errors import column_error
            raise column_error([col], md.columns, what="prl_blocking column",
                               where=f"dataset {name!r}")
        missing = [",".join(ks) for ks in keysets if col not in ks]
        if missing:
            raise SdcInputError(
                f"the prl_blocking column {col!r} is not in the key set(s) "
                f"{'; '.join(missing)} of dataset {name!r}; block on a column of every key "
                "set (e.g. the first key), or name key sets that all hold it")


def resolve_keysets(spec: AuditSpec, md: Microdata,
                    dataset: DatasetSpec | None = None, *,
                    constant: Sequence[bool] | None = None) -> list[tuple[str, ...]]:
    """The key sets of a dataset (the spec's, or prefixes of its keys), checked.

    ``constant`` says which of ``md``'s columns hold one value, for a caller that
    computed it chunk by chunk (``md`` then holds no records); None: from ``md.values``.
    """
    d = dataset if dataset is not None else spec.dataset
    w = md.weight
    h = md.household
    for col, role in ((h, "household"), (w, "weight")):
        if col is not None and col in (md.roles.get("key") or d.keys or ()):
            raise key_role_error(f"the keys of dataset {d.name!r}", col, role, "'keys'")
    if spec.keysets == "prefixes":
        # the sampling weight is never a linkage key (the key role cannot hold it); a
        # constant numeric column cannot link (standardisation): both left out, with a note
        from ..metrics._registry import constant_columns
        const = (list(constant) if constant is not None
                 else constant_columns(md.values, range(len(md.columns))))
        gone = [c for c, k in zip(md.columns, const) if k and c not in md.categories]
        base = [c for c in (md.roles.get("key") or d.keys or md.columns)
                if c not in (w, h) and c not in gone]
        if gone and any(c in gone for c in (md.roles.get("key") or d.keys or md.columns)):
            log.warning("dataset %r: constant column(s) %s left out of the default key sets: "
                        "linkage cannot use a column with one value", d.name, gone)
        if not base:
            raise SdcInputError(f"dataset {d.name!r} has no key column that can link (the "
                                f"weight and constant columns {gone} cannot): name key sets "
                                "or keys")
        return default_keysets(base)
    for ks in spec.keysets:
        md.column_index(ks, what="key set column")
        for col, role in ((h, "household"), (w, "weight")):
            if col is not None and col in ks:
                raise key_role_error(f"key set {list(ks)} of the spec (dataset {d.name!r})",
                                     col, role, "the key sets")
    return [tuple(k) for k in spec.keysets]


# ---------------------------------------------------------------------------
# the numpy side of a cell (runs on workers)


def spec_method_options(spec: AuditSpec, md_columns: tuple[str, ...], roles: dict,
                    name: str, *, categorical: Any = ()) -> dict[str, Any]:
    """The spec's options of method ``name``, plus the dataset's roles, column names and
    categorical columns for a method that takes them (built as ``sdcdist mask`` builds
    them)."""
    return method_options(name, columns=md_columns, roles=roles,
                          options=next(m.options for m in spec.methods if m.name == name),
                          categorical=categorical)


def mask_cell(X: np.ndarray, method: str, param: float, entropy: int,
              spawn_key: tuple[int, ...], options: dict[str, Any]) -> np.ndarray:
    """Task: the masked file of one cell."""
    rng = np.random.default_rng(np.random.SeedSequence(entropy, spawn_key=spawn_key))
    return get_method(method)(X, param, rng=rng, **options)


def measure_cell(runner: Runner, X: Any, Xm: Any, shape: tuple[int, int],
                 columns: tuple[str, ...], keysets: list[tuple[str, ...]],
                 metrics: tuple[str, ...], cell: Cell,
                 options: dict[str, Any], inputs: Inputs | None = None,
                 holdout: np.ndarray | None = None, control: np.ndarray | None = None
                 ) -> dict[str, np.ndarray]:
    """Every metric of one cell, as the vectors the cube stores.

    ``inputs``: the dataset's roles (:class:`~sdcdist.metrics.Inputs`; None: all numeric,
    no roles); ``holdout`` and ``control`` its holdout file and control set, when it has
    them.
    """
    inputs = (inputs if inputs is not None else Inputs()).replace(
        columns=tuple(columns), masked_columns=None, shape_original=shape, shape_masked=shape)
    H = holdout
    ctx = MeasureContext(runner, X, Xm, inputs=inputs, keysets=keysets, seed=cell.seed,
                         options=options, holdout=None if H is None else runner.share(H),
                         shape_holdout=None if H is None else H.shape,
                         control=None if control is None else runner.share(control),
                         shape_control=None if control is None else control.shape)
    K, S = len(metrics), max(len(keysets), 1)
    out = {"values": np.full(K, np.nan), "keyset_values": np.full((K, S), np.nan),
           "excluded": np.zeros(K, np.int32), "flags": np.zeros(K, np.int8)}
    for i, name in enumerate(metrics):
        res = ctx.measure(name)
        out["values"][i] = res.value
        if res.per_keyset is not None:
            out["keyset_values"][i, :len(res.per_keyset)] = res.per_keyset
        out["excluded"][i] = res.excluded
        out["flags"][i] = res.flag
    return out


def cell_task(X: np.ndarray, columns: tuple[str, ...], keysets: list[tuple[str, ...]],
              metrics: tuple[str, ...], cell: Cell, method_options: dict[str, Any],
              options: dict[str, Any], *inputs: Any) -> dict[str, np.ndarray]:
    """Task: a whole cell in one worker (mask, then every metric, in-process); ``inputs``:
    those of :func:`measure_cell` (the dataset's roles, holdout and control set)."""
    Xm = mask_cell(X, cell.method, cell.param, cell.entropy, cell.spawn_key, method_options)
    out = measure_cell(Runner(None), X, Xm, X.shape, columns, keysets, metrics, cell, options,
                       *inputs)
    out["release_fingerprint"] = cubemod.masked_fingerprint(Xm)
    return out


def cell_spread(runner: Runner, X: Any, shape: tuple[int, int], columns: tuple[str, ...],
                keysets: list[tuple[str, ...]], metrics: tuple[str, ...], cell: Cell,
                method_options: dict[str, Any], options: dict[str, Any],
                *inputs: Any) -> dict[str, np.ndarray]:
    """A cell whose tasks spread over the cluster: the masked file, then each metric's pieces."""
    Xm = runner.task(mask_cell, X, cell.method, cell.param, cell.entropy, cell.spawn_key,
                     method_options)
    fp = runner.task(cubemod.masked_fingerprint, Xm)
    out = measure_cell(runner, X, Xm, shape, columns, keysets, metrics, cell, options, *inputs)
    out["release_fingerprint"] = runner.result(fp)
    return out


def _inputs(md: Microdata, holdout: Microdata | None = None) -> tuple:
    """The dataset's roles (:class:`~sdcdist.metrics.Inputs`), its holdout file and its
    control set, for its metrics (empty: all numeric, no roles they read, no holdout)."""
    inputs = Inputs.from_microdata(md)
    if not (inputs.categorical or inputs.weight or inputs.confidential or inputs.household) \
            and holdout is None and md.control is None:
        return ()
    return (inputs, None if holdout is None else holdout.values, md.control)


def run_cells(executor: CellExecutor, cells: list[Cell], data: list[tuple[Microdata, list]],
              method_options: dict[tuple[int, str], dict[str, Any]], metrics: tuple[str, ...],
              options: dict[str, Any], *, mode: str,
              on_done: Callable[[Cell, dict[str, np.ndarray]], None],
              holdouts: dict[int, Microdata] | None = None) -> None:
    """Mask and measure ``cells``; ``on_done(cell, result)`` as each finishes.

    The input of a cell is ``executor.inputs[cell.d]``; ``data[d]`` is (Microdata,
    key sets) of dataset ``d``; ``method_options`` is keyed by (dataset, method).
    The audit and the calibration both run their cells here. ``holdouts``: the holdout
    file of each dataset that has one (:func:`load_holdouts`).
    """
    holdouts = holdouts or {}

    def whole_args(c: Cell) -> tuple:
        md, keysets = data[c.d]
        return (md.columns, keysets, metrics, c, method_options[c.d, c.method], options,
                *_inputs(md, holdouts.get(c.d)))

    def spread(runner: Runner, X: Any, c: Cell) -> dict[str, np.ndarray]:
        md, keysets = data[c.d]
        return cell_spread(runner, X, md.values.shape, md.columns, keysets, metrics, c,
                           method_options[c.d, c.method], options,
                           *_inputs(md, holdouts.get(c.d)))
    executor.run(cells, mode=mode, input_of=lambda c: c.d, whole=cell_task,
                 whole_args=whole_args, spread=spread, on_done=on_done)


# ---------------------------------------------------------------------------
# the driver


def library_versions() -> dict[str, str]:
    """The installed versions of sdcdist and the libraries a cube's numbers depend on."""
    import importlib.metadata as md
    out = {}
    for pkg in ("sdcdist", "numpy", "scipy", "pandas", "dask", "distributed", "zarr", "xarray",
                "numba"):
        try:
            out[pkg] = md.version(pkg)
        except md.PackageNotFoundError:
            pass
    return out


def _prepare_cube(spec: AuditSpec, out: str, data: list[tuple[Microdata, list]],
                  overwrite: bool, holdouts: dict[int, Microdata] | None = None) -> bool:
    """Create the cube, or check that an existing one was made by this spec from this data.

    An existing local cube without any finished cell holds nothing to resume (a
    run that failed before its first cell): it is replaced, whatever spec made it.
    Returns whether this call created the cube.
    """
    fingerprints = [{"name": ds.name, "sha256": md.sha256, "shape": list(md.values.shape),
                     "columns": list(md.columns)} for ds, (md, _) in zip(spec.datasets, data)]
    for i, h in (holdouts or {}).items():
        fingerprints[i]["holdout"] = {"sha256": h.sha256, "shape": list(h.values.shape)}
    exists = Path(out).exists() if "://" not in out else _remote_exists(out)
    if "://" not in out:
        check_replaceable(out, what="cube", kind="cube", inputs=input_paths(spec))
    if exists and not overwrite and "://" not in out and _no_done_cell(out):
        overwrite = True
    if exists and overwrite:
        if "://" in out:
            raise SdcInputError("--overwrite works on local cubes only; delete the remote "
                                "cube first")
        shutil.rmtree(out)
        exists = False
    if exists:
        cube = cubemod.open_cube(out)
        if cube.attrs.get("spec_sha256") != spec.sha256:
            old = json.loads(cube.attrs.get("spec", "{}"))
            new = stored_spec(spec.raw)
            diff = sorted(k for k in set(old) | set(new) if old.get(k) != new.get(k))
            raise SdcInputError(
                f"the cube {out!r} was made by a different spec (differences in: "
                f"{', '.join(diff) or 'the spec'}); write to another --out, or pass "
                "--overwrite to discard it")
        old_fp = json.loads(cube.attrs.get("datasets", "[]"))
        for o, f in zip(old_fp, fingerprints):
            if o.get("sha256") != f["sha256"] or o.get("holdout") != f.get("holdout"):
                raise SdcInputError(f"the cube {out!r} was made from different data (the "
                                    f"SHA-256 of dataset {f['name']!r} differs); write to "
                                    "another --out, or --overwrite")
        return False
    metrics = [get_metric(k) for k in spec.metrics]
    cubemod.create_cube(
        out, methods=[m.name for m in spec.methods],
        param_names=[get_method(m.name).param for m in spec.methods],
        params=spec.param_grid(), metrics=list(spec.metrics),
        metric_kinds=[m.kind for m in metrics], ascending=[m.ascending for m in metrics],
        replicates=spec.replicates, datasets=[d.name for d in spec.datasets],
        keysets={d.name: ks for d, (_, ks) in zip(spec.datasets, data)},
        attrs={"spec": stored_spec(spec.raw), "spec_sha256": spec.sha256, "datasets": fingerprints,
               "versions": library_versions(), "conventions": cubemod.conventions(spec.options),
               "started": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
               "title": f"sdcdist audit {spec.name!r}"})
    return True


def _no_done_cell(out: str) -> bool:
    """Whether ``out`` is an sdcdist cube in which no cell is marked done."""
    try:
        if "spec_sha256" not in cubemod.open_group(out, "r").attrs:
            return False
        done = cubemod.done_cells(out)
    except Exception:   # not a cube, or unreadable: open_cube says why below
        return False
    return not np.asarray(done).any()


def _remote_exists(url: str) -> bool:
    try:
        cubemod.open_cube(url)
        return True
    except SdcInputError:
        return False


def run_audit(spec: AuditSpec | str | Path, out: str | Path, *, client: Any = None,
              overwrite: bool = False, progress: bool = False,
              on_cell: Callable[[Cell], None] | None = None,
              data: list[tuple[Microdata, list]] | None = None) -> AuditResult:
    """Run (or resume) an audit and write its cube.

    Parameters
    ----------
    spec : AuditSpec or path to a YAML spec
    out : path or URL of the Zarr cube
    client : distributed.Client, optional
        The cluster to run on; ``None`` runs every task in this process.
    overwrite : bool
        Discard an existing cube instead of resuming it.
    progress : bool
        Show a progress bar on stderr.
    on_cell : callable, optional
        Called with each cell after it is written.
    data : list, optional
        The spec's datasets as :func:`load_data` returns them (read again if not
        given).

    A run that fails before its first cell is written removes the cube it
    created (a cube that existed before the run is kept).

    Returns
    -------
    AuditResult
    """
    t0 = time.perf_counter()
    if not isinstance(spec, AuditSpec):
        spec = load_spec(spec)
    out = local_path(str(out))
    if data is None:
        data = load_data(spec)
    holdouts = load_holdouts(spec, data)
    # --overwrite of a cube that holds finished cells: the old cube is set aside, not
    # deleted, until the new run has written a cell; a run that fails before (a cell's
    # input refused, an interrupt) puts it back, so a failed overwrite loses nothing
    aside = _set_aside(spec, out) if overwrite else None
    written = [0]
    try:
        created = _prepare_cube(spec, out, data, overwrite, holdouts)
        try:
            return _run(spec, out, data, client, progress, on_cell, t0, written, holdouts)
        except BaseException:
            if created and not written[0] and "://" not in out:
                shutil.rmtree(out, ignore_errors=True)
            raise
    except BaseException:
        if aside is not None and not written[0] and not Path(out).exists():
            os.replace(aside, out)
            aside = None
        raise
    finally:
        if aside is not None:
            shutil.rmtree(aside, ignore_errors=True)


def _set_aside(spec: AuditSpec, out: str) -> str | None:
    """Move a local cube with finished cells that --overwrite replaces to a sibling path
    (returned; None when there is nothing to keep: no such cube, no finished cell, or a
    remote one, which _prepare_cube refuses to overwrite)."""
    if "://" in out or not Path(out).exists():
        return None
    check_replaceable(out, what="cube", kind="cube", inputs=input_paths(spec))
    try:
        if _no_done_cell(out):
            return None
    except Exception:                     # noqa: BLE001 - unreadable: keep it all the same
        pass
    aside = f"{out.rstrip('/')}.replaced-{os.getpid()}"
    if Path(aside).exists():
        shutil.rmtree(aside)
    os.replace(out, aside)
    return aside


def _run(spec: AuditSpec, out: str, data: list, client: Any, progress: bool,
         on_cell: Callable[[Cell], None] | None, t0: float, written: list[int],
         holdouts: dict[int, Microdata] | None = None) -> AuditResult:
    cells = plan_cells(spec)
    done = cubemod.done_cells(out)
    if done.ndim != 4:
        raise SdcInputError(f"the cube {out!r} predates the dataset dimension and cannot be "
                            "resumed; write to another --out, or pass --overwrite")
    todo = [c for c in cells if not done[c.d, c.m, c.p, c.replicate]]
    options = dict(spec.options)
    mode = options_cell_mode(options, max(md.values.shape[0] for md, _ in data), cells=len(todo),
                     workers=Runner(client).n_workers)
    _record_code_paths(out, Runner(client))
    writer = cubemod.CellWriter(cubemod.open_group(out))
    bar = _bar(len(todo), progress)

    def write(cell: Cell, res: dict[str, np.ndarray]) -> None:
        writer.write(cell.m, cell.p, cell.replicate, d=cell.d, **res)
        written[0] += 1
        bar(1)
        if on_cell is not None:
            on_cell(cell)

    if todo:
        need = sorted({c.d for c in todo})
        executor = CellExecutor(Runner(client), {d: data[d][0].values for d in need})
        mopts = {(d, m.name): spec_method_options(spec, data[d][0].columns, data[d][0].roles,
                                              m.name, categorical=data[d][0].categories)
                 for d in need for m in spec.methods}
        run_cells(executor, todo, data, mopts, spec.metrics, options, mode=mode,
                  on_done=write, holdouts=holdouts)
    cubemod.set_attrs(out, finished=time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()))
    return AuditResult(out, len(todo), len(cells) - len(todo), len(cells),
                       time.perf_counter() - t0, mode)


def _record_code_paths(out: str, runner: Runner) -> None:
    """Add the SIMD code paths of this process and of every worker to the cube's
    ``code_paths`` attribute (a JSON list of the distinct ones, kept over resumed runs);
    warn when one is not the pinned AVX2 level (:mod:`sdcdist.simd`)."""
    import warnings

    from ..simd import SimdWarning, code_paths
    try:
        seen = json.loads(cubemod.open_group(out, "r").attrs.get("code_paths", "[]"))
    except (ValueError, TypeError):
        seen = []
    for p in runner.everywhere(code_paths):
        if p not in seen:
            seen.append(p)
    cubemod.set_attrs(out, code_paths=seen)
    other = [p for p in seen if not p.get("pinned")]
    if other:
        warnings.warn(f"{len(other)} of the processes computing this cube ran SIMD code paths "
                      "other than the pinned AVX2 ones (numpy "
                      f"{other[0].get('numpy_simd')}, BLAS "
                      f"{[b.get('architecture') for b in other[0].get('blas', [])]}): its "
                      "numbers may "
                      "differ in their last bits from a cube computed elsewhere; the cube's "
                      "'code_paths' attribute lists them. Start the workers with "
                      "`python -m sdcdist.simd --env` in their environment", SimdWarning,
                      stacklevel=3)


def _bar(total: int, show: bool) -> Callable[[int], None]:
    if not show or total == 0:
        return lambda k: None
    import click
    bar = click.progressbar(length=total, label="cells", file=None, show_pos=True,
                            show_eta=True)
    bar.__enter__()
    state = {"n": 0}

    def update(k: int) -> None:
        bar.update(k)
        state["n"] += k
        if state["n"] >= total:
            bar.__exit__(None, None, None)
    return update
