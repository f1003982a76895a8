"""The release: one cell's masked file, regenerated from the cube's spec and seeds, checked
against the fingerprint the audit recorded, written chunk by chunk and moved into place.

The file is the one ``sdcdist mask`` writes with the cell's seed (``--seed ENTROPY
--spawn-key K1,K2,K3,K4``, both printed by :func:`release` and stored in
:class:`Release`): the same method, parameter, options, roles and categories, and the same
writer. Before anything is written:

* the cube is opened (its integrity checked: a tampered cube is refused);
* the cell must be in the cube and finished, and the cube must hold its masked-file
  fingerprint (cubes written before fingerprints were recorded cannot be released: their
  files cannot be checked);
* the dataset read from the spec must be the audit's (its SHA-256 is the one the cube
  recorded);
* the regenerated masked file's fingerprint must equal the recorded one (else another
  sdcdist version, library or platform gave other numbers: nothing is written).

With the spec's ``control`` option the audit masked the records left after the control
share was held out; the release is that masked file (the held-out records are not in it,
and ``sdcdist mask`` on the whole file is then not the same file).
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from .errors import SdcInputError, exists_error

__all__ = ["Release", "plan_release", "release"]


@dataclass
class Release:
    """A cell chosen for release, checked and ready to write (:func:`plan_release`)."""

    dataset: str
    method: str
    param: float
    replicate: int
    entropy: int
    spawn_key: tuple[int, ...]
    fingerprint: str                # hex SHA-256 of the masked values (the cube's)
    records: int
    columns: tuple[str, ...]
    values: np.ndarray
    categories: dict[str, list[str]]

    def mask_command(self, data: str = "DATA") -> str:
        """The equivalent ``sdcdist mask`` command line."""
        return (f"sdcdist mask {data} --method {self.method} --param {self.param:g} "
                f"--seed {self.entropy} --spawn-key {','.join(map(str, self.spawn_key))}")

    def as_dict(self) -> dict[str, Any]:
        return {"dataset": self.dataset, "method": self.method, "param": self.param,
                "replicate": self.replicate, "seed": self.entropy,
                "spawn_key": list(self.spawn_key), "fingerprint": self.fingerprint,
                "records": self.records, "variables": len(self.columns)}


def _index(labels: list[Any], want: Any, what: str, cells: str) -> int:
    if want not in labels:
        raise SdcInputError(f"the cube has no {what} {want!r}, so that cell is not in the "
                            f"cube. Finished cells: {cells}.")
    return labels.index(want)


def _cells_text(methods: list[str], params: list[float], done: np.ndarray) -> str:
    have = [f"{methods[m]} {params[p]:g} replicate {r}"
            for m, p, r in zip(*np.nonzero(done == 1))]
    if not have:
        return "none"
    return ", ".join(have[:12]) + (f" and {len(have) - 12} more" if len(have) > 12 else "")


def plan_release(cube: str, *, method: str, param: float, replicate: int = 0,
                 dataset: str | None = None, spec: Any = None,
                 out: str | None = None) -> Release:
    """Regenerate and check a cell's masked file (nothing is written).

    Parameters
    ----------
    cube : the path of an audit cube
    method, param, replicate : the cell
    dataset : str, optional
        For cubes of several datasets.
    spec : AuditSpec, optional
        The spec that made the cube (its SHA-256 must be the cube's); default: the copy the
        cube records, its data paths read relative to the current directory.
    out : str, optional
        The file the release is to be written to: refused before the data are read when
        it is (or holds) the cube or a file the spec reads
        (:func:`~sdcdist.data.staging.check_replaceable`).

    Raises
    ------
    SdcInputError
        The cell is not in the cube or not finished, the cube records no fingerprint, the
        data or the regenerated file differ from the audit's (a tampered cube raises
        :class:`~sdcdist.integrity.CorruptStoreError`).
    """
    from .audit.plan import cell_seed
    from .audit.run import load_dataset, spec_method_options, split_control
    from .audit.spec import parse_spec
    from .cube import masked_fingerprint, open_cube, open_group, release_fingerprint
    from .masking import get_method
    c = open_cube(cube, squeeze=False)          # integrity checked here
    datasets = [str(d) for d in np.atleast_1d(c["dataset"].values)]
    methods = [str(m) for m in c["method"].values]
    params = [float(p) for p in c["param"].values]
    done = np.asarray(c["done"].values)
    if dataset is None:
        if len(datasets) > 1:
            raise SdcInputError(f"the cube holds {len(datasets)} datasets "
                                f"({', '.join(datasets)}); choose one (--dataset)")
        dataset = datasets[0]
    d = _index(datasets, dataset, "dataset", ", ".join(datasets))
    cells = _cells_text(methods, params, done[d])
    m = _index(methods, method, "method", cells)
    p = _index(params, float(param), "param value", cells)
    if not (0 <= replicate < done.shape[3]) or done[d, m, p, replicate] != 1:
        raise SdcInputError(f"the cell {method} {float(param):g} replicate {replicate} is not "
                            f"a finished cell of the cube. Finished cells: {cells}.")
    want = release_fingerprint(open_group(cube, "r"), d, m, p, replicate)
    if want is None:
        raise SdcInputError(
            f"the cube records no fingerprint of the masked file of {method} {float(param):g} "
            f"replicate {replicate} (written by an older sdcdist), so a regenerated file "
            "could not be checked against what the audit measured; rerun the audit "
            "(sdcdist audit SPEC --out NEW.zarr) to release from it")
    if spec is None:
        stored = json.loads(c.attrs.get("spec", "{}"))
        try:
            spec = parse_spec(stored, base_dir=Path.cwd())
        except SdcInputError as exc:
            raise SdcInputError(f"the spec recorded in the cube cannot be used as it is ({exc}); "
                                "pass the spec file that made the cube (--spec)") from None
    elif spec.sha256 != c.attrs.get("spec_sha256"):
        raise SdcInputError("the spec given is not the one that made the cube (its SHA-256 "
                            "differs from the cube's spec_sha256); pass the spec file the "
                            "audit ran")
    if out is not None:
        from .audit.run import input_paths
        from .data.staging import check_replaceable
        check_replaceable(out, what="release", kind="file",
                          inputs=[cube, *input_paths(spec)])
    ds = next(x for x in spec.datasets if x.name == dataset)
    md = load_dataset(spec, ds)
    recorded = json.loads(c.attrs.get("datasets", "[]"))
    rec = next((x for x in recorded if x.get("name") == dataset), {})
    if rec.get("sha256") and rec.get("sha256") != md.sha256:
        raise SdcInputError(f"the data of dataset {dataset!r} are not those the audit read "
                            "(their SHA-256 differs from the one the cube recorded); give the "
                            "spec whose dataset names the audited file (--spec)")
    md = split_control(md, spec.options.get("control"), spec.seed, d, ds.name)
    meth = get_method(method)
    options = spec_method_options(spec, md.columns, md.roles, meth.name,
                                  categorical=md.categories)
    info: dict[str, Any] = {}
    if "info" in meth.options:
        options["info"] = info
    entropy, key = cell_seed(spec.seed, dataset, meth.name, float(param), replicate)
    rng = np.random.default_rng(np.random.SeedSequence(entropy, spawn_key=key))
    values = meth(md.values, float(param), rng=rng, **options)
    del md.values
    have = masked_fingerprint(values)
    if have != want:
        raise SdcInputError(
            f"the regenerated masked file of {method} {float(param):g} replicate {replicate} "
            f"is not the one the audit measured (fingerprint {have.hex()[:16]}... instead of "
            f"{want.hex()[:16]}...): this sdcdist, its libraries or this machine compute "
            "other numbers than those that wrote the cube. Nothing was written; release "
            "with the versions the cube records (its 'versions' attribute), or rerun the "
            "audit here")
    categories = {**md.categories, **info.get("categories", {})}
    return Release(dataset, meth.name, float(param), int(replicate), int(entropy),
                   tuple(int(k) for k in key), have.hex(), int(values.shape[0]),
                   tuple(md.columns), values, categories)


def release(cube: str, out: str, *, method: str, param: float, replicate: int = 0,
            dataset: str | None = None, spec: Any = None, overwrite: bool = False,
            chunk_rows: int | None = None) -> Release:
    """Write a cell's masked file to ``out`` (``.csv`` or ``.parquet``), checked against the
    cube's fingerprint, chunk by chunk under a temporary name moved into place."""
    from .data import DEFAULT_CHUNK_ROWS
    from .data.io import write_table_file
    low = str(out).lower()
    if not low.endswith((".csv", ".parquet", ".pq")):
        raise SdcInputError(f"the release {str(out)!r} must be a .csv or .parquet file")
    if Path(out).exists() and not overwrite:
        raise exists_error("release", str(out))
    r = plan_release(cube, method=method, param=param, replicate=replicate, dataset=dataset,
                     spec=spec, out=str(out))
    write_table_file(r.values, r.columns, r.categories, out, overwrite=overwrite,
                     chunk_rows=chunk_rows or DEFAULT_CHUNK_ROWS)
    return r
