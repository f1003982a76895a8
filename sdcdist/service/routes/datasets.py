"""Datasets: upload (validated as ``sdcdist ingest`` validates a file), list, show, delete.

No answer holds a record value: names, schemas, roles, counts and hashes only.
"""

from __future__ import annotations

import logging
import os
import shutil
from pathlib import Path
from typing import Any

from fastapi import APIRouter, Depends, File, Form, HTTPException, Query, Request, UploadFile

from ...errors import SdcInputError, empty_error, unreadable_error
from ...logs import event
from ..helpers import Service
from ..store import ACTIVE, new_id

#: files an upload may be (the formats `sdcdist ingest` reads)
UPLOAD_SUFFIXES = (".csv", ".csv.gz", ".tsv", ".txt", ".parquet", ".pq")

#: the fields of an upload's form, each at most once
UPLOAD_FIELDS = ("file", "name", "keys", "confidential", "columns", "categorical", "weight",
                 "household")

__all__ = ["router", "UPLOAD_FIELDS"]


#: What a blank text field of the upload should have held (a blank field is refused: it
#: would be read as absent, and the dataset stored without the role asked for).
_BLANK_FIX = {"weight": "give the sampling-weight column",
              "household": "give the household id column"}


async def _form_fields(request: Request) -> None:
    """Refuse (422) an upload form with a field the upload does not read, a field given
    twice (two files: only one would be stored) or a text field given blank."""
    from ...text import repeated
    form = await request.form()         # parsed once: FastAPI reads the same form
    got = [k for k, _ in form.multi_items()]
    unknown = sorted({k for k in got if k not in UPLOAD_FIELDS})
    if unknown:
        raise SdcInputError(f"the upload has unknown field(s) {[u[:64] for u in unknown[:5]]}; "
                            f"an upload's fields are {', '.join(UPLOAD_FIELDS)}")
    dup = repeated(got)
    if dup:
        raise SdcInputError(f"the upload gives field(s) {dup} more than once; give each "
                            "field once")
    for k, v in form.multi_items():
        if k == "name" and isinstance(v, str):
            from ...text import label
            from ..security import MAX_NAME_BYTES
            label(v, "The 'name' field", max_bytes=MAX_NAME_BYTES)   # "" is refused too
        elif k != "file" and isinstance(v, str) and not v.strip():
            raise empty_error(f"The {k!r} field", _BLANK_FIX.get(k, "give column names")
                              + ", or leave the field out")


def _json_safe(v: Any) -> Any:
    """``v`` with every NaN or infinity as null, at any depth."""
    import math
    if isinstance(v, dict):
        return {k: _json_safe(x) for k, x in v.items()}
    if isinstance(v, (list, tuple)):
        return [_json_safe(x) for x in v]
    if isinstance(v, float) and not math.isfinite(v):
        return None
    return v

log = logging.getLogger("sdcdist.service")


def router(svc: Service) -> APIRouter:
    """The routes of the datasets (``/v1/datasets``), on the shared state ``svc``."""
    r = APIRouter()
    store, config = svc.store, svc.config
    Who = Depends(svc.principal)

    @r.post("/v1/datasets", status_code=201, tags=["datasets"],
            dependencies=[Depends(_form_fields)])
    def upload(file: UploadFile = File(..., description="CSV (.csv, .csv.gz, .tsv) or "
                                                          "Parquet file"),
               name: str | None = Form(None, description="Dataset name (default: the "
                                                        "file name without extension)"),
               keys: str | None = Form(None, description="Key columns, comma-separated"),
               confidential: str | None = Form(None, description="Confidential columns, "
                                                                 "comma-separated"),
               columns: str | None = Form(None, description="Keep only these columns"),
               categorical: str | None = Form(None, description="Integer-coded columns "
                                              "to store as categorical, comma-separated "
                                              "(text columns are categorical anyway)"),
               weight: str | None = Form(None, description="The sampling-weight column "
                                                           "(positive values)"),
               household: str | None = Form(None, description="The household id column "
                                            "(household risk; never a key, a weight or "
                                            "confidential)"),
               who: str = Who) -> dict[str, Any]:
        """Upload a dataset, validated exactly as `sdcdist ingest` validates a file. The
        answer lists each column's type (numeric or categorical) and roles in `schema`."""
        from ...text import CONTROL, label, name_list, slug
        from ...data import open_microdata
        from ...data.io import ingest
        from ..limits import TextScan, check_parquet, chunk_rows_for
        from ..subproc import run_child
        from ..security import MAX_NAME_BYTES
        filename = Path(file.filename or "upload.csv").name
        if len(filename.encode()) > MAX_NAME_BYTES or CONTROL.search(filename):
            raise SdcInputError(f"the file name is longer than {MAX_NAME_BYTES} bytes or holds "
                                "a control character; rename the file")
        if name is not None:
            label(name, "The 'name' field", max_bytes=MAX_NAME_BYTES)
        # the command line's name lists: refused when they name nothing or a name twice
        lists = {f: name_list(v, f"the {f!r} field")
                 for f, v in (("keys", keys), ("confidential", confidential),
                              ("columns", columns), ("categorical", categorical))}
        low = filename.lower()
        if not low.endswith(UPLOAD_SUFFIXES):
            raise unreadable_error("a data file", filename, "unknown format", "upload CSV "
                                   "(.csv, .csv.gz, .tsv) or Parquet (.parquet) files")
        ext = next(s for s in sorted(UPLOAD_SUFFIXES, key=len, reverse=True) if low.endswith(s))
        stem = slug(filename[:-len(ext)])[:100] or "data"
        dataset_id = new_id("ds")
        tmp = store.root / "tmp" / dataset_id
        tmp.mkdir(parents=True, mode=0o700)
        final = store.dataset_path(dataset_id)
        try:
            src = tmp / (stem + ext)
            parquet = low.endswith((".parquet", ".pq"))
            scan = None if parquet else TextScan(filename, config.limits)
            with open(os.open(src, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600), "wb") as f:
                # counted as it streams in: 413 at the first field, line, column or
                # decompressed byte past a limit, before the rest is stored or parsed
                while block := file.file.read(2**20):
                    f.write(block)
                    if scan is not None:
                        scan.feed(block)
            shape = check_parquet(src, config.limits) if parquet else scan.finish()
            roles = {}
            if lists["keys"] is not None:
                roles["key"] = lists["keys"]
            if lists["confidential"] is not None:
                roles["confidential"] = lists["confidential"]
            if weight and weight.strip():
                roles["weight"] = [weight.strip()]
            if household and household.strip():
                # ingest refuses it as a key, the weight or confidential, as the CLI's
                roles["household"] = [household.strip()]
            from ...data.io import DEFAULT_CHUNK_ROWS
            # in a child process that exits: its memory goes back to the system, and
            # a large allocation never holds the service's interpreter
            run_child(ingest, src, final, roles=roles, columns=lists["columns"],
                      categorical=lists["categorical"],
                      chunk_rows=chunk_rows_for(shape[1] if shape else 1, DEFAULT_CHUNK_ROWS))
            store.private(final)
            attrs = dict(open_microdata(final).attrs)
            ds_name = (name or stem).strip() or stem
            store.add_dataset(dataset_id, who, name=ds_name, filename=filename,
                              rows=int(attrs["n_records"]), columns=list(attrs["columns"]),
                              roles=dict(attrs.get("roles") or {}),
                              sha256=str(attrs["sha256"]))
        except BaseException:
            shutil.rmtree(final, ignore_errors=True)
            raise
        finally:
            shutil.rmtree(tmp, ignore_errors=True)
        event(log, "dataset uploaded", dataset=dataset_id, principal=who,
              rows=int(attrs["n_records"]), columns=len(attrs["columns"]))
        d = store.dataset(dataset_id, who)
        return {"id": dataset_id, "rows": d["rows"], "columns": d["columns"],
                "sha256": d["sha256"], "name": d["name"], "roles": d["roles"],
                "schema": svc.dataset_schema(dataset_id)}

    @r.get("/v1/datasets", tags=["datasets"])
    def list_datasets(who: str = Who) -> list[dict[str, Any]]:
        """Your datasets: names, schemas and roles (never values)."""
        return [{**d, "schema": svc.dataset_schema(d["id"])} for d in store.datasets(who)]

    @r.get("/v1/datasets/{dataset_id}", tags=["datasets"])
    def get_dataset(dataset_id: str, who: str = Who) -> dict[str, Any]:
        """One dataset's schema and roles (never values)."""
        d = svc.own_dataset(dataset_id, who)
        return {**d, "schema": svc.dataset_schema(dataset_id)}

    applicable_cache: dict[tuple[str, tuple[str, ...] | None], dict[str, Any]] = {}

    @r.get("/v1/datasets/{dataset_id}/applicable", tags=["datasets"])
    def applicable(dataset_id: str, keys: str | None = None,
                   who: str = Who) -> dict[str, Any]:
        """For every masking method and metric, null if it applies to this dataset, else
        why not: the metrics as `sdcdist.metrics.applicable` decides on the dataset's
        columns and roles with these key columns (`keys`, comma-separated; default: the
        dataset's key role), the methods by the columns they mask and their data checks.
        The page offers only what applies and shows the reason on hover."""
        from ...data import load_microdata
        from ...text import name_list
        from ..presets import applicability
        svc.own_dataset(dataset_id, who)
        listed = name_list(keys, "the 'keys' parameter")
        want = tuple(listed) if listed is not None else None
        key = (dataset_id, want)
        if key not in applicable_cache:
            md = load_microdata(str(store.dataset_path(dataset_id)))
            if want is not None:
                md.column_index(list(want), what="key column")
            if len(applicable_cache) > 64:
                applicable_cache.clear()
            applicable_cache[key] = applicability(md, want)
        return {"dataset": dataset_id, "keys": list(want) if want is not None else None,
                **applicable_cache[key]}

    @r.get("/v1/datasets/{dataset_id}/describe", tags=["datasets"])
    def describe_dataset(dataset_id: str, keys: str | None = None,
                         top: int = Query(10, ge=0, le=100),
                         who: str = Who) -> dict[str, Any]:
        """The data before masking, as `sdcdist describe`: per-variable summaries
        (numeric: mean, sd and quantiles, never a minimum or maximum; categorical: each
        category's count), and on the key columns (`keys`, default: the dataset's key
        role, else its categorical columns) the k-anonymity violations, the individual
        risk and the `top` records of highest risk (record numbers and key combinations:
        the owner's own data, answered to the owner and never logged)."""
        from ...data import load_microdata
        from ...describe import describe
        from ...text import name_list
        svc.own_dataset(dataset_id, who)
        want = name_list(keys, "the 'keys' parameter")
        md = load_microdata(str(store.dataset_path(dataset_id)))
        out = describe(md, keys=want, top=top)
        return {"dataset": dataset_id, **_json_safe(out)}

    @r.delete("/v1/datasets/{dataset_id}", tags=["datasets"])
    def delete_dataset(dataset_id: str, who: str = Who) -> dict[str, Any]:
        """Delete a dataset (refused while an audit of yours that uses it is active)."""
        svc.own_dataset(dataset_id, who)
        ref = f"datasets/{dataset_id}.zarr"
        # an audit still computing counts whatever its state says (a cancelled one stops
        # at its next cell)
        computing = set(svc.runner.running) if svc.runner is not None else set()
        outcome = store.delete_dataset(
            dataset_id, who, busy=lambda a: ref in a["spec"] and (
                a["status"] in ACTIVE or a["id"] in computing))
        if outcome == "used":
            raise HTTPException(409, f"dataset {dataset_id!r} is used by an audit that is "
                                     "queued or running (or, cancelled, still finishing its "
                                     "cell); cancel it or wait for it first")
        if outcome == "missing":                # deleted meanwhile by another request
            svc.own_dataset(dataset_id, who)
        shutil.rmtree(store.dataset_path(dataset_id), ignore_errors=True)
        event(log, "dataset deleted", dataset=dataset_id, principal=who)
        return {"id": dataset_id, "deleted": True}

    return r
