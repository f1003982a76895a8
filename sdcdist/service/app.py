"""The HTTP API of ``sdcdist serve`` (FastAPI): datasets, audits, cubes, the web page.

Every route under ``/v1`` needs ``Authorization: Bearer TOKEN`` when the
service has a tokens file; each dataset and audit belongs to the principal of
the token that created it, and another principal gets 404 for it. The same
functions as the command line do the work: uploads are validated by
:func:`sdcdist.data.ingest`, specs by :func:`sdcdist.audit.parse_spec` and
:func:`sdcdist.audit.run.load_data`, queries by :mod:`sdcdist.query`, tables
and plots by :mod:`sdcdist.report`. A user mistake is a 422 with the same
one-line message as the command line. No response or log line holds a record
value: schemas, counts, hashes and metric values only.
"""

from __future__ import annotations

import asyncio
import json
import logging
import math
import os
import shutil
import threading
import time
import zipfile
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from fastapi import Depends, FastAPI, File, Form, HTTPException, Query, Request, UploadFile
from fastapi.exceptions import RequestValidationError
from fastapi.responses import (FileResponse, HTMLResponse, JSONResponse, PlainTextResponse,
                               Response, StreamingResponse)
from starlette.background import BackgroundTask
from starlette.requests import ClientDisconnect

from ..errors import SdcInputError
from ..logs import event
from .auth import Tokens
from .accesslog import AccessLog
from .apidocs import install as install_docs
from .jobs import JobRunner
from .limits import Limits
from .results import BALANCED, ResultCache, balanced_table, default_ranking, metric_info
from .schema import column_schema
from .security import FailureLimiter, RequestGuard
from .store import ACTIVE, Store, audit_out, new_id

__all__ = ["create_app", "ServiceConfig"]

log = logging.getLogger("sdcdist.service")

#: files an upload may be (the formats `sdcdist ingest` reads)
UPLOAD_SUFFIXES = (".csv", ".csv.gz", ".tsv", ".txt", ".parquet", ".pq")


@dataclass(frozen=True)
class ServiceConfig:
    """What ``sdcdist serve`` was given.

    Attributes
    ----------
    root : folder of the state (SQLite), the datasets and the cubes
    tokens : the tokens file's principals, or None (no authentication, loopback only)
    max_upload : largest upload in bytes (413 above)
    max_spec : largest spec in bytes (413 above)
    max_audits : audits a principal may have queued or running at once (429 above)
    limits : columns, records and bytes a dataset may have (:mod:`.limits`, 413 above)
    hosts : the ``Host`` header values answered (empty: any; ``sdcdist serve`` sets the
        address it listens on)
    allow_urls : URL prefixes a spec's ``path`` may name (``{principal}`` stands for the
        principal); none by default
    """

    root: Path
    tokens: Tokens | None = None
    max_upload: int = 256 * 2**20
    max_spec: int = 2**20
    max_audits: int = 8
    limits: Limits = Limits()
    hosts: tuple[str, ...] = ()
    allow_urls: tuple[str, ...] = ()


class BodyLimit:
    """ASGI middleware: a request body above the route's limit is refused with 413,
    from its Content-Length when it has one, else while it is read."""

    def __init__(self, app: Any, limits: list[tuple[str, str, int, str]]):
        self.app = app
        self.limits = limits       # (method, path prefix, bytes, what)

    def _limit(self, scope: Mapping[str, Any]) -> tuple[int, str] | None:
        for method, prefix, n, what in self.limits:
            if scope.get("method") == method and scope.get("path", "").rstrip("/") == prefix:
                return n, what
        return None

    async def __call__(self, scope: Any, receive: Any, send: Any) -> None:
        lim = self._limit(scope) if scope["type"] == "http" else None
        if lim is None:
            await self.app(scope, receive, send)
            return
        limit, what = lim
        length = dict(scope.get("headers") or []).get(b"content-length")
        if length is not None and length.isdigit() and int(length) > limit:
            await _too_large(send, limit, what)
            return
        seen = 0
        answered = False

        async def counted() -> Any:
            # past the limit: answer 413 here, and tell the app the client went away
            nonlocal seen, answered
            msg = await receive()
            if msg["type"] == "http.request":
                seen += len(msg.get("body", b""))
                if seen > limit:
                    if not answered:
                        answered = True
                        await _too_large(send, limit, what)
                    return {"type": "http.disconnect"}
            return msg

        async def guarded(msg: Any) -> None:
            if not answered:             # the app's own answer after a 413 is dropped
                await send(msg)
        try:
            await self.app(scope, counted, guarded)
        except Exception:
            if not answered:
                raise


async def _too_large(send: Any, limit: int, what: str) -> None:
    body = json.dumps({"detail": f"the {what} is larger than this service accepts "
                                 f"({_size(limit)}); make it smaller or ask the operator "
                                 "to raise the limit"}).encode()
    await send({"type": "http.response.start", "status": 413,
                "headers": [(b"content-type", b"application/json"),
                            (b"content-length", str(len(body)).encode()),
                            (b"connection", b"close")]})
    await send({"type": "http.response.body", "body": body})


def _size(n: int) -> str:
    return f"{n / 2**20:g} MiB" if n >= 2**20 else f"{n} bytes"


def _clean(v: Any) -> Any:
    """JSON-safe: NaN and infinities become null."""
    if isinstance(v, float) and not math.isfinite(v):
        return None
    return v


def _records(df: Any) -> list[dict[str, Any]]:
    """A pandas table (index method, param) as JSON records."""
    t = df.reset_index()
    return [{k: _clean(v.item() if hasattr(v, "item") else v) for k, v in row.items()}
            for row in t.to_dict(orient="records")]


def create_app(config: ServiceConfig, runner: JobRunner | None = None,
               store: Store | None = None) -> FastAPI:
    """The ASGI application. ``runner`` runs the audits (None: submissions only queue)."""
    store = store or Store(config.root)
    app = FastAPI(
        title="sdcdist audit service",
        version=_version(),
        description="Submit, follow and query audits of statistical disclosure control "
                    "methods. Authenticate with `Authorization: Bearer TOKEN`.",
        docs_url=None, redoc_url=None,        # /docs is served here, without a CDN
    )
    install_docs(app, auth=config.tokens is not None)
    app.state.store = store
    app.state.runner = runner
    app.state.config = config
    # no tokens: a foreign page's simple POSTs must carry this per-start token
    import secrets
    csrf = secrets.token_urlsafe(32)
    app.state.csrf = csrf
    app.add_middleware(RequestGuard, hosts=config.hosts,
                       csrf=csrf if config.tokens is None else None)
    failures = FailureLimiter()
    plot_lock = threading.Lock()        # matplotlib's pyplot is not thread-safe

    # -- errors --------------------------------------------------------------------
    @app.exception_handler(SdcInputError)
    async def _input_error(request: Request, exc: SdcInputError) -> JSONResponse:
        from ..text import redact
        return JSONResponse({"detail": redact(str(exc))}, status_code=422)

    @app.exception_handler(RequestValidationError)
    async def _bad_request(request: Request, exc: RequestValidationError) -> JSONResponse:
        # one line naming the parameter; never the value that was sent
        parts = []
        for e in exc.errors():
            loc = ".".join(str(x) for x in e.get("loc", ()) if x not in ("query", "body"))
            parts.append(f"{loc or 'the request'}: {e.get('msg', 'invalid')}")
        return JSONResponse({"detail": "; ".join(parts) or "invalid request"},
                            status_code=422)

    @app.exception_handler(ClientDisconnect)
    async def _gone(request: Request, exc: ClientDisconnect) -> Response:
        # the client went away (or its body passed the limit, answered 413 already)
        return Response(status_code=400)

    @app.exception_handler(Exception)
    async def _unexpected(request: Request, exc: Exception) -> JSONResponse:
        from ..text import raised_where as _where
        from .jobs import disk_full
        if disk_full(exc):
            event(log, "disk full", logging.ERROR, kind=type(exc).__name__,
                  path=request.url.path)
            return JSONResponse({"detail": "the service's disk is full; nothing was stored. "
                                           "Try again once the operator has freed space"},
                                status_code=507)
        # the type and where it was raised, as the command line says it: a message
        # or a traceback's locals could hold data
        event(log, "unexpected failure", logging.ERROR, kind=type(exc).__name__,
              where=_where(exc), path=request.url.path)
        return JSONResponse({"detail": f"unexpected failure ({type(exc).__name__}); the "
                                       "service log says where"}, status_code=500)

    # method, path, status, principal, duration: GETs at debug level, changes at info
    app.add_middleware(AccessLog)

    # -- who is asking --------------------------------------------------------------
    def principal(request: Request) -> str:
        if config.tokens is None:
            request.state.principal = "local"
            return "local"
        header = request.headers.get("authorization", "")
        scheme, _, token = header.partition(" ")
        if scheme.lower() != "bearer" or not token.strip():
            raise HTTPException(401, "this service needs a token: send the header "
                                     "'Authorization: Bearer TOKEN'",
                                headers={"WWW-Authenticate": "Bearer"})
        addr = request.client.host if request.client else "?"
        wait = failures.blocked(addr)
        if wait:
            raise HTTPException(429, "too many wrong tokens from this address; try again "
                                     f"in {math.ceil(wait)} s",
                                headers={"Retry-After": str(math.ceil(wait))})
        who = config.tokens.principal(token.strip())
        if who is None:
            failures.failed(addr)
            raise HTTPException(401, "the token is not valid for this service",
                                headers={"WWW-Authenticate": "Bearer"})
        request.state.principal = who
        return who

    Who = Depends(principal)

    def own_dataset(dataset_id: str, who: str) -> dict[str, Any]:
        d = store.dataset(dataset_id, who)
        if d is None:
            raise HTTPException(404, f"no dataset {dataset_id!r}")
        return d

    def own_audit(audit_id: str, who: str) -> dict[str, Any]:
        a = store.audit(audit_id, who)
        if a is None:
            raise HTTPException(404, f"no audit {audit_id!r}")
        return a

    cubes: dict[str, tuple[tuple, Any]] = {}        # audit -> (state key, loaded cube)
    cube_locks: dict[str, threading.Lock] = {}
    cubes_lock = threading.Lock()

    def loaded_cube(audit_id: str, who: str, *, squeeze: bool = True) -> Any:
        """The audit's cube in memory, opened (and integrity-checked) once per state of
        the audit: a finished audit's cube is read from disk once, a running one's again
        after each new cell. The 16 most recently used cubes are kept."""
        from ..cube import as_cube, open_cube
        a = own_audit(audit_id, who)
        path = store.cube_path(audit_id)
        if not path.exists():
            raise HTTPException(409, "the audit has not written its cube yet; wait until it "
                                     "runs (GET /v1/audits/{id} shows its status)")
        key = (a["status"], a["cells_done"], a["runs"])
        with cubes_lock:
            lock = cube_locks.setdefault(audit_id, threading.Lock())
        with lock:
            hit = cubes.get(audit_id)
            if hit is None or hit[0] != key:
                import xarray as xr
                open_cube(str(path), squeeze=False)      # its checks: integrity, metadata
                # read whole arrays at once: much faster than Dask's chunk-by-chunk tasks
                cube = as_cube(xr.open_zarr(str(path), consolidated=False,
                                             chunks=None).load())
                with cubes_lock:
                    cubes.pop(audit_id, None)
                    cubes[audit_id] = (key, cube)
                    while len(cubes) > 16:
                        cubes.pop(next(iter(cubes)))
            else:
                cube = hit[1]
        if squeeze and cube.sizes["dataset"] == 1:
            return as_cube(cube.isel(dataset=0))
        return cube

    def open_audit_cube(audit_id: str, who: str) -> Any:
        return loaded_cube(audit_id, who)

    results = ResultCache()
    app.state.results = results
    schemas: dict[str, list[dict[str, Any]]] = {}

    async def cached(audit_id: str, who: str, what: tuple, make: Any) -> Response:
        """A result from the cache of answers, keyed by the audit's state (which changes
        with every cell it writes), else made by ``make() -> (bytes, media type)`` in a
        worker thread. A cached answer costs one indexed read of the state database."""
        a = own_audit(audit_id, who)
        key = (audit_id, a["status"], a["cells_done"], a["runs"], *what)
        hit = results.get(key)
        if hit is None:
            if not store.cube_path(audit_id).exists():
                raise HTTPException(409, "the audit has not written its cube yet; wait until "
                                         "it runs (GET /v1/audits/{id} shows its status)")
            hit = await asyncio.to_thread(results.get_or_make, key, make)
        return Response(hit[0], media_type=hit[1])

    def dataset_schema(dataset_id: str) -> list[dict[str, Any]]:
        """Each column's type and roles (a dataset never changes once stored)."""
        if dataset_id not in schemas:
            from ..data import open_microdata
            schemas[dataset_id] = column_schema(open_microdata(
                store.dataset_path(dataset_id)).attrs)
        return schemas[dataset_id]

    # -- the page and health ------------------------------------------------------------
    @app.get("/", response_class=HTMLResponse, include_in_schema=False)
    def page() -> HTMLResponse:
        from .web import PAGE
        # the page sends this token in the X-Sdcdist-Csrf header (see security.py)
        return HTMLResponse(PAGE.replace(
            "<head>", f'<head><meta name="sdcdist-csrf" content="{csrf}">', 1))

    @app.get("/v1/csrf", tags=["service"])
    def csrf_token(who: str = Who) -> dict[str, Any]:
        """The token to send in the `X-Sdcdist-Csrf` header of an upload (multipart) or
        another POST of a form's content type, when the service runs without tokens.
        Another site's page cannot read it."""
        return {"header": "X-Sdcdist-Csrf", "token": csrf}

    @app.get("/v1/health", tags=["service"])
    def health() -> dict[str, Any]:
        """Liveness: no authentication, no data."""
        return {"status": "ok", "version": _version(),
                "auth": "bearer" if config.tokens is not None else "none"}

    # -- catalogue ---------------------------------------------------------------------
    @app.get("/v1/methods", tags=["catalogue"])
    def methods(who: str = Who) -> list[dict[str, Any]]:
        """The masking methods a spec may name (the registry of `sdcdist methods`)."""
        from ..masking import REGISTRY
        from ..masking import options_of as for_method
        return [{"name": n, "param": m.param, "kind": m.kind,
                 "range": None if m.kind == "none" else m.allowed_text(),
                 "low": None if m.kind == "none" else _clean(float(m.low)),
                 "high": None if m.kind == "none" else _clean(float(m.high)),
                 "random": bool(m.random), "description": m.description,
                 "options": [o.name for o in for_method(n) if o.spec]}
                for n, m in REGISTRY.items()]

    @app.get("/v1/metrics", tags=["catalogue"])
    def metrics(who: str = Who) -> list[dict[str, Any]]:
        """The metrics a spec may name (the registry of `sdcdist metrics`), each with its
        unit and which end is better."""
        from ..metrics import REGISTRY
        return [{"name": n, "kind": m.kind, "per_keyset": bool(m.keysets),
                 "ascending": bool(m.ascending), "requires": list(m.requires or ()),
                 "unit": m.unit, "lower_is_better": bool(m.ascending),
                 "description": m.description, "reference": m.reference}
                for n, m in REGISTRY.items()]

    # -- datasets ------------------------------------------------------------------------
    @app.post("/v1/datasets", status_code=201, tags=["datasets"])
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
               who: str = Who) -> dict[str, Any]:
        """Upload a dataset, validated exactly as `sdcdist ingest` validates a file. The
        answer lists each column's type (numeric or categorical) and roles in `schema`."""
        from ..text import split_list
        from ..text import slug
        from ..data import ingest, open_microdata
        from .limits import chunk_rows_for, scan_upload
        from .security import MAX_NAME_BYTES
        filename = Path(file.filename or "upload.csv").name
        if len(filename.encode()) > MAX_NAME_BYTES or any(ord(c) < 32 for c in filename):
            raise SdcInputError(f"the file name is longer than {MAX_NAME_BYTES} bytes or holds "
                                "a control character; rename the file")
        low = filename.lower()
        if not low.endswith(UPLOAD_SUFFIXES):
            raise SdcInputError(f"cannot tell the format of {filename!r}; upload CSV (.csv, "
                                ".csv.gz, .tsv) or Parquet (.parquet) files")
        ext = next(s for s in sorted(UPLOAD_SUFFIXES, key=len, reverse=True) if low.endswith(s))
        stem = slug(filename[:-len(ext)])[:100] or "data"
        dataset_id = new_id("ds")
        tmp = store.root / "tmp" / dataset_id
        tmp.mkdir(parents=True, mode=0o700)
        final = store.dataset_path(dataset_id)
        try:
            src = tmp / (stem + ext)
            with open(os.open(src, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600), "wb") as f:
                shutil.copyfileobj(file.file, f, 2**20)
            shape = scan_upload(src, config.limits)
            roles = {}
            if keys:
                roles["key"] = split_list(keys)
            if confidential:
                roles["confidential"] = split_list(confidential)
            if weight and weight.strip():
                roles["weight"] = [weight.strip()]
            from ..data.io import DEFAULT_CHUNK_ROWS
            ingest(src, final, roles=roles, columns=split_list(columns) if columns else None,
                   categorical=split_list(categorical) if categorical else None,
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
                "schema": dataset_schema(dataset_id)}

    @app.get("/v1/datasets", tags=["datasets"])
    def list_datasets(who: str = Who) -> list[dict[str, Any]]:
        """Your datasets: names, schemas and roles (never values)."""
        return [{**d, "schema": dataset_schema(d["id"])} for d in store.datasets(who)]

    @app.get("/v1/datasets/{dataset_id}", tags=["datasets"])
    def get_dataset(dataset_id: str, who: str = Who) -> dict[str, Any]:
        """One dataset's schema and roles (never values)."""
        d = own_dataset(dataset_id, who)
        return {**d, "schema": dataset_schema(dataset_id)}

    @app.delete("/v1/datasets/{dataset_id}", tags=["datasets"])
    def delete_dataset(dataset_id: str, who: str = Who) -> dict[str, Any]:
        """Delete a dataset (refused while an audit of yours that uses it is active)."""
        own_dataset(dataset_id, who)
        ref = f"datasets/{dataset_id}.zarr"
        if any(ref in a["spec"] for a in store.audits(who) if a["status"] in ACTIVE):
            raise HTTPException(409, f"dataset {dataset_id!r} is used by an audit that is "
                                     "queued or running; cancel it or wait for it first")
        store.delete_dataset(dataset_id, who)
        shutil.rmtree(store.dataset_path(dataset_id), ignore_errors=True)
        event(log, "dataset deleted", dataset=dataset_id, principal=who)
        return {"id": dataset_id, "deleted": True}

    # -- audits -----------------------------------------------------------------------------
    @app.post("/v1/audits", status_code=202, tags=["audits"],
              openapi_extra={"requestBody": {"required": True, "content": {
                  "application/yaml": {"schema": {"type": "string"}},
                  "application/json": {"schema": {"type": "object"}}}}})
    async def submit(request: Request, who: str = Who) -> dict[str, Any]:
        """Submit an audit spec (YAML or JSON) naming its data by `dataset: {id: ...}`
        (an uploaded dataset), `reference`, `synthetic`, or a `path` inside the root."""
        body = await request.body()
        return await asyncio.to_thread(_submit, body,
                                       request.headers.get("content-type", ""), who)

    def _submit(body: bytes, ctype: str, who: str) -> dict[str, Any]:
        from ..audit import parse_spec, plan_cells
        from .limits import check_submission
        doc = _parse_body(body, ctype)
        resolved = _resolve(doc, who, store, config.allow_urls)
        spec = parse_spec(resolved, base_dir=store.root)
        check_submission(spec, config.limits)   # against the data, in bounded memory
        audit_id = new_id("au")
        if not store.add_audit(audit_id, who, name=spec.name, spec=spec.raw,
                               cells_total=len(plan_cells(spec)), limit=config.max_audits):
            raise HTTPException(429, f"you have {config.max_audits} audits queued or "
                                     "running, the most this service allows at once; wait "
                                     "for one to finish or cancel one")
        event(log, "audit accepted", audit=audit_id, principal=who,
              cells=len(plan_cells(spec)))
        if runner is not None:
            runner.notify()
        return {"id": audit_id, "status": "queued"}

    def shown(a: dict[str, Any]) -> dict[str, Any]:
        out = audit_out(a)
        out["note"] = runner.note(a) if runner is not None else None
        return out

    @app.get("/v1/audits", tags=["audits"])
    def list_audits(who: str = Who) -> list[dict[str, Any]]:
        """Your audits, oldest first."""
        return [shown(a) for a in store.audits(who)]

    @app.get("/v1/audits/{audit_id}", tags=["audits"])
    def get_audit(audit_id: str, who: str = Who) -> dict[str, Any]:
        """Status (queued, running, done, failed, cancelled), cells done of total, times,
        error, and a `note` when an active audit waits (e.g. the cluster has no
        workers)."""
        return shown(own_audit(audit_id, who))

    @app.post("/v1/audits/{audit_id}/resume", status_code=202, tags=["audits"])
    def resume(audit_id: str, who: str = Who) -> dict[str, Any]:
        """Put a failed or cancelled audit back in the queue: it resumes from its cube,
        computing only the cells not written yet (409 for an active or done audit)."""
        a = own_audit(audit_id, who)
        if not store.requeue(audit_id, who):
            raise HTTPException(409, f"audit {audit_id!r} is {a['status']}; only a failed or "
                                     "cancelled audit can be resumed")
        event(log, "audit resumed", audit=audit_id, principal=who)
        if runner is not None:
            runner.notify()
        return shown(own_audit(audit_id, who))

    @app.delete("/v1/audits/{audit_id}", tags=["audits"])
    def cancel(audit_id: str, who: str = Who) -> dict[str, Any]:
        """Cancel a queued or running audit (the cells already written stay in its cube)."""
        a = own_audit(audit_id, who)
        if a["status"] in ACTIVE:
            store.finish(audit_id, "cancelled", cancel_reason(a, who))
            if runner is not None:
                runner.cancel(audit_id)
            event(log, "audit cancelled", audit=audit_id, principal=who)
        return audit_out(own_audit(audit_id, who))

    @app.get("/v1/audits/{audit_id}/events", tags=["audits"])
    async def events(audit_id: str, request: Request, who: str = Who) -> StreamingResponse:
        """Server-sent events: `cell` for each finished cell (ids 1, 2, ... within the
        audit), then one `status` when the audit ends. `Last-Event-ID` resumes after an
        event already seen."""
        from .security import parse_last_event_id
        own_audit(audit_id, who)
        after = parse_last_event_id(request.headers.get("last-event-id"))

        async def stream() -> Any:
            last = after
            while True:
                a = await asyncio.to_thread(store.audit, audit_id)
                rows = await asyncio.to_thread(store.cells, audit_id, last)
                for c in rows:
                    last = c["n"]          # numbered within this audit
                    data = {"dataset": c["dataset"], "method": c["method"],
                            "param": c["param"], "replicate": c["replicate"],
                            "run": c["run"]}
                    yield f"id: {last}\nevent: cell\ndata: {json.dumps(data)}\n\n"
                if a is None or a["status"] not in ACTIVE:
                    out = audit_out(a) if a else {"status": "deleted"}
                    yield f"event: status\ndata: {json.dumps(out)}\n\n"
                    return
                if await request.is_disconnected():
                    return
                yield ": keep-alive\n\n" if not rows else ""
                await asyncio.sleep(0.3)

        return StreamingResponse(stream(), media_type="text/event-stream",
                                 headers={"Cache-Control": "no-cache"})

    @app.get("/v1/audits/{audit_id}/cube", tags=["results"])
    def cube_records(audit_id: str, method: list[str] | None = Query(None),
                     param: list[float] | None = Query(None),
                     metric: list[str] | None = Query(None),
                     dataset: list[str] | None = Query(None),
                     who: str = Who) -> dict[str, Any]:
        """The finished cells as labelled records {dataset, method, param, replicate,
        metric, value}; filters may repeat (`?metric=DLD&metric=IL1s`) or list
        comma-separated names."""
        import numpy as np

        from ..errors import check_choice
        c = _open_unsqueezed(audit_id, who)
        names = {k: [str(x) for x in np.atleast_1d(c[k].values)]
                 for k in ("dataset", "method", "metric")}
        params = [float(p) for p in c["param"].values]

        def pick(kind: str, asked: list[str] | None) -> list[int]:
            if not asked:
                return list(range(len(names[kind])))
            flat = [x.strip() for a in asked for x in a.split(",") if x.strip()]
            return [names[kind].index(check_choice(kind, x, names[kind])) for x in flat]
        di, mi, ki = pick("dataset", dataset), pick("method", method), pick("metric", metric)
        if param:
            bad = [p for p in param if p not in params]
            if bad:
                raise SdcInputError(f"the cube has no param value {bad[0]:g}. Values in this "
                                    f"cube: {', '.join(f'{p:g}' for p in params)}.")
            pi = [params.index(p) for p in param]
        else:
            pi = list(range(len(params)))
        value = np.asarray(c["value"].values)      # (dataset, method, param, metric, rep)
        done = np.asarray(c["done"].values)        # (dataset, method, param, rep)
        out = []
        for d in di:
            for m in mi:
                for p in pi:
                    for r in np.flatnonzero(done[d, m, p]):
                        for k in ki:
                            out.append({"dataset": names["dataset"][d],
                                        "method": names["method"][m], "param": params[p],
                                        "replicate": int(r), "metric": names["metric"][k],
                                        "value": _clean(float(value[d, m, p, k, r]))})
        a = store.audit(audit_id)
        return {"audit": audit_id, "status": a["status"], "records": out}

    def _open_unsqueezed(audit_id: str, who: str) -> Any:
        return loaded_cube(audit_id, who, squeeze=False)

    @app.get("/v1/audits/{audit_id}/query", tags=["results"])
    async def query(audit_id: str, where: str | None = None, sort: str | None = None,
              top: int | None = Query(None, ge=1), metrics: str | None = None,
              dataset: str | None = None, who: str = Who) -> Response:
        """Cells (replicate means) matching a filter, as `sdcdist query`: `where` compares
        metric names with numbers joined by and/or (`DLD < 5 and IL1s < 20`)."""
        from ..text import split_list
        from ..cube import check_metrics
        from ..query import query as run_query

        def make() -> tuple[bytes, str]:
            c = open_audit_cube(audit_id, who)
            t = run_query(c, where_=where, sort=sort, top=top, dataset=dataset)
            if metrics:
                shown = split_list(metrics)
                check_metrics(c, shown)
                t = t[["param_name", "replicates", *shown]]
            return _json({"audit": audit_id, "rows": _records(t) if len(t) else []})
        return await cached(audit_id, who, ("query", where, sort, top, metrics, dataset), make)

    @app.get("/v1/audits/{audit_id}/report", tags=["results"])
    async def report(audit_id: str, by: str | None = Query(
                   None, description="A metric or score to rank by, or `balanced`; default: "
                                     "Score2 when the cube has its parts, else another "
                                     "score, else `balanced` (the mean of the risk rank and "
                                     "the loss rank)"),
               format: str = "csv",
               metrics: str | None = None, top: int | None = Query(None, ge=1),
               dataset: str | None = None, who: str = Who) -> Response:
        """The ranking table of `sdcdist report`, as csv, md, html or json (which also says
        what it was ranked by and why, and explains each metric: unit, which end is
        better, definition)."""
        from ..text import split_list
        from ..errors import check_choice
        from ..report import html_table, markdown_table, ranking_table
        check_choice("format", format, ["csv", "md", "html", "json"])

        def make() -> tuple[bytes, str]:
            c = open_audit_cube(audit_id, who)
            default = default_ranking(c)
            use = by or default["by"]
            chosen = default if use == default["by"] else None
            if use == BALANCED:
                kinds = dict(zip([str(m) for m in c["metric"].values],
                                 [str(k) for k in c["metric_kind"].values]))
                names = split_list(metrics) if metrics else list(kinds)
                t = balanced_table(c, risks=[m for m in names if kinds.get(m) == "risk"],
                                   losses=[m for m in names
                                           if kinds.get(m) in ("loss", "utility")],
                                   dataset=dataset)
            else:
                t = ranking_table(c, by=use, metrics=split_list(metrics) if metrics else None,
                                  dataset=dataset)
            if top:
                t = t.head(top)
            if format == "csv":
                return t.to_csv().encode(), "text/csv; charset=utf-8"
            if format == "md":
                return markdown_table(t).encode(), "text/markdown; charset=utf-8"
            if format == "html":
                a = store.audit(audit_id)
                return (html_table(t, title=f"{a['name']}: cells ranked by {use}").encode(),
                        "text/html; charset=utf-8")
            shown = [col for col in t.columns if col not in ("param_name", "replicates")
                     and not col.endswith(" rank")]
            return _json({"audit": audit_id, "by": use, "default": by is None,
                          "why": chosen["why"] if chosen else None,
                          "warning": chosen["warning"] if chosen else None,
                          "risk": chosen["risk"] if chosen else None,
                          "loss": chosen["loss"] if chosen else None,
                          "metrics": metric_info([m for m in shown if m != BALANCED]),
                          "rows": _records(t)})
        return await cached(audit_id, who, ("report", by, format, metrics, top, dataset), make)

    @app.get("/v1/audits/{audit_id}/plot", tags=["results"],
             response_class=Response, responses={200: {"content": {"image/png": {}}}})
    async def plot(audit_id: str, kind: str = "tradeoff", risk: str | None = None,
             loss: str | None = None, metric: str | None = None,
             target: float | None = None, metrics: str | None = None,
             by: str | None = None, top: int | None = Query(None, ge=1),
             dataset: str | None = None, who: str = Who) -> Response:
        """A PNG plot as `sdcdist plot`: tradeoff (risk against loss, the better corner
        marked; default: the risk and loss measures of the default ranking, e.g. DLD and
        IL_S2 for Score2), curves (a metric against each parameter) or ranks (heatmap)."""
        from ..errors import check_choice
        check_choice("kind", kind, ["tradeoff", "curves", "ranks"])
        return await cached(audit_id, who, ("plot", kind, risk, loss, metric, target, metrics, by,
                                      top, dataset),
                      lambda: _plot(audit_id, who, kind, risk, loss, metric, target, metrics,
                                    by, top, dataset))

    def _plot(audit_id: str, who: str, kind: str, risk: str | None, loss: str | None,
              metric: str | None, target: float | None, metrics: str | None,
              by: str | None, top: int | None, dataset: str | None) -> tuple[bytes, str]:
        from .. import report as rp
        from ..text import split_list
        c = open_audit_cube(audit_id, who)
        tmp = store.root / "tmp" / f"{new_id('plot')}.png"
        try:
            with plot_lock:
                if kind == "tradeoff":
                    # the measures of the default ranking's table, so plot and table agree
                    default = default_ranking(c)
                    risk = risk or default["risk"]
                    loss = loss or default["loss"]
                    if risk is None or loss is None:
                        raise SdcInputError("kind=tradeoff needs risk=METRIC and loss=METRIC "
                                            "(the cube has no default pair)")
                    rp.plot_tradeoff(c, risk=risk, loss=loss, out=str(tmp), dataset=dataset)
                elif kind == "curves":
                    if metric is None:
                        raise SdcInputError("kind=curves needs metric=NAME (e.g. metric=DLD)")
                    rp.plot_risk_curves(c, metric=metric, out=str(tmp), target=target,
                                        dataset=dataset)
                else:
                    rp.plot_rank_heatmap(c, out=str(tmp), metrics=split_list(metrics)
                                         if metrics else None, by=by, top=top,
                                         dataset=dataset)
            data = tmp.read_bytes()
        finally:
            tmp.unlink(missing_ok=True)
        return data, "image/png"

    @app.get("/v1/audits/{audit_id}/summary", tags=["results"])
    async def summary(audit_id: str, who: str = Who) -> Response:
        """What the cube holds and how the page shows it: its datasets, its metrics (kind,
        unit, which end is better, definition) and the default ranking (what it ranks by,
        why, and the risk and loss measures of its trade-off plot)."""
        import numpy as np

        def make() -> tuple[bytes, str]:
            c = loaded_cube(audit_id, who, squeeze=False)
            names = [str(m) for m in c["metric"].values]
            a = store.audit(audit_id)
            return _json({"audit": audit_id, "status": a["status"],
                          "datasets": [str(d) for d in np.atleast_1d(c["dataset"].values)],
                          "methods": [str(m) for m in c["method"].values],
                          "metrics": metric_info(names),
                          "ranking": default_ranking(c)})
        return await cached(audit_id, who, ("summary",), make)

    @app.get("/v1/audits/{audit_id}/cube.zarr.zip", tags=["results"],
             response_class=FileResponse)
    def cube_zip(audit_id: str, who: str = Who) -> FileResponse:
        """The cube itself, a zipped Zarr store (open it with `sdcdist.connect(...).cube()`,
        or unzip it and use `sdcdist.cube.open_cube`)."""
        own_audit(audit_id, who)
        path = store.cube_path(audit_id)
        if not path.exists():
            raise HTTPException(409, "the audit has not written its cube yet")
        tmp = store.root / "tmp" / f"{new_id('zip')}.zip"
        with zipfile.ZipFile(tmp, "w", zipfile.ZIP_STORED) as z:
            for f in sorted(path.rglob("*")):
                if f.is_file():
                    z.write(f, f.relative_to(path).as_posix())
        return FileResponse(tmp, media_type="application/zip",
                            filename=f"{audit_id}.zarr.zip",
                            background=BackgroundTask(tmp.unlink, missing_ok=True))

    return app


def cancel_reason(a: Mapping[str, Any], who: str) -> str:
    """What a cancelled audit says: who cancelled it, when, and what is kept."""
    when = time.strftime("%Y-%m-%d %H:%M:%SZ", time.gmtime())
    if a["status"] == "queued" and not a["cells_done"]:
        return f"cancelled by {who} at {when}, before it started; nothing was computed"
    if not a["cells_done"]:
        return f"cancelled by {who} at {when} while running, before any cell had finished"
    return (f"cancelled by {who} at {when} while running; the {a['cells_done']} cells "
            "finished before that stay in its cube and can be queried")


def _json(obj: Any) -> tuple[bytes, str]:
    return (json.dumps(obj, separators=(",", ":"), allow_nan=False).encode(),
            "application/json")


def _version() -> str:
    from .. import __version__
    return __version__


def _parse_body(body: bytes, ctype: str) -> Any:
    """A spec from a request body: JSON by its content type, else YAML (as a spec file)."""
    from ..yamlsafe import load_yaml
    if not body.strip():
        raise SdcInputError("the request has no spec; send the YAML or JSON of an audit spec "
                            "(see examples/demo.yaml)")
    try:
        text = body.decode("utf-8-sig")
    except UnicodeDecodeError:
        raise SdcInputError("the spec is not UTF-8 text; send it as UTF-8") from None
    if "json" in ctype.lower():
        from ..limits import MAX_YAML_DEPTH
        from .security import check_json_depth
        check_json_depth(text, MAX_YAML_DEPTH)
        try:
            return json.loads(text)
        except json.JSONDecodeError as exc:
            raise SdcInputError(f"the spec is not valid JSON (line {exc.lineno}, column "
                                f"{exc.colno}: {exc.msg})") from None
    return load_yaml(text, what="the spec")


def _resolve(doc: Any, who: str, store: Store, allow_urls: tuple[str, ...] = ()) -> Any:
    """The spec with each `dataset: {id: ...}` replaced by its stored path, and each
    `path` checked to stay inside the root."""
    if not isinstance(doc, Mapping):
        return doc                       # parse_spec says what is wrong
    out = dict(doc)
    if isinstance(doc.get("dataset"), Mapping):
        out["dataset"] = _resolve_dataset(doc["dataset"], "'dataset'", who, store,
                                          allow_urls)
    if isinstance(doc.get("datasets"), list):
        out["datasets"] = [_resolve_dataset(d, f"datasets[{i}]", who, store, allow_urls)
                           if isinstance(d, Mapping) else d
                           for i, d in enumerate(doc["datasets"])]
    return out


def _resolve_dataset(d: Mapping[str, Any], what: str, who: str, store: Store,
                     allow_urls: tuple[str, ...] = ()) -> dict:
    d = dict(d)
    if "id" in d:
        if any(k in d for k in ("path", "synthetic", "reference")):
            raise SdcInputError(f"{what} has 'id' and another source; name the data by one "
                                "of 'id' (an uploaded dataset), 'reference' or 'synthetic'")
        dataset_id = str(d.pop("id"))
        row = store.dataset(dataset_id, who)
        if row is None:
            raise SdcInputError(f"{what} names dataset id {dataset_id!r}, which is not one "
                                "of your uploads; GET /v1/datasets lists them")
        d["path"] = f"datasets/{dataset_id}.zarr"
        d.setdefault("name", row["name"])
        return d
    if "path" in d:
        from .security import check_data_path
        check_data_path(str(d["path"]), what, store.root, who, allow_urls)
    return d
