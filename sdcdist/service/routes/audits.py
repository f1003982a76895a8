"""Audits: submit a spec, list, show, resume, cancel, and follow one (server-sent events).

A spec names its data by an uploaded dataset's id (:func:`resolve_spec` replaces it by
the stored path), ``reference``, ``synthetic``, or a ``path`` inside the principal's
area; every other field that names data (``holdout`` ...) is resolved the same way.
"""

from __future__ import annotations

import asyncio
import json
import logging
import time
from collections.abc import Mapping
from typing import Any

from fastapi import APIRouter, Depends, HTTPException, Request
from fastapi.responses import StreamingResponse

from ...errors import SdcInputError, empty_error, unreadable_error, value_error
from ...logs import event
from ..helpers import Service
from ..store import ACTIVE, Store, UploadsGone, audit_out, deleted_message, new_id

__all__ = ["router", "cancel_reason", "parse_body", "resolve_spec", "resolve_dataset",
           "resolve_field"]

log = logging.getLogger("sdcdist.service")


def router(svc: Service) -> APIRouter:
    """The routes of the audits (``/v1/audits``, ``/v1/audits/{id}``, its resume and events),
    on the shared state ``svc``."""
    r = APIRouter()
    store, config, runner = svc.store, svc.config, svc.runner
    Who = Depends(svc.principal)

    @r.post("/v1/audits", status_code=202, tags=["audits"],
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
        from ...audit import parse_spec, plan_cells
        from ...audit.spec import check_files
        from ..limits import check_holdouts, check_submission
        doc = parse_body(body, ctype)
        resolved = resolve_spec(doc, who, store, config.allow_urls)
        spec = parse_spec(resolved, base_dir=store.root)
        check_files(spec)                       # every file it names, read or not
        check_submission(spec, config.limits)   # against the data, in bounded memory
        check_holdouts(spec, config.limits)     # those a requested metric reads
        audit_id = new_id("au")
        try:
            added = store.add_audit(audit_id, who, name=spec.name, spec=spec.raw,
                                    cells_total=len(plan_cells(spec)), limit=config.max_audits)
        except UploadsGone as exc:              # deleted since the spec was read
            raise HTTPException(409, str(exc)) from None
        if not added:
            raise HTTPException(429, f"you have {config.max_audits} audits queued or "
                                     "running, the most this service allows at once; wait "
                                     "for one to finish or cancel one")
        event(log, "audit accepted", audit=audit_id, principal=who,
              cells=len(plan_cells(spec)))
        if runner is not None:
            runner.notify()
        return {"id": audit_id, "status": "queued"}

    @r.get("/v1/audits", tags=["audits"])
    def list_audits(who: str = Who) -> list[dict[str, Any]]:
        """Your audits, oldest first."""
        return [svc.shown(a) for a in store.audits(who)]

    @r.get("/v1/audits/{audit_id}", tags=["audits"])
    def get_audit(audit_id: str, who: str = Who) -> dict[str, Any]:
        """Status (queued, running, done, failed, cancelled), cells done of total, times,
        error, and a `note` when an active audit waits (e.g. the cluster has no
        workers)."""
        return svc.shown(svc.own_audit(audit_id, who))

    @r.post("/v1/audits/{audit_id}/resume", status_code=202, tags=["audits"])
    def resume(audit_id: str, who: str = Who) -> dict[str, Any]:
        """Put a failed or cancelled audit back in the queue: it resumes from its cube,
        computing only the cells not written yet (409 for an active or done audit, or
        one whose dataset was deleted; 429
        when you already have `--max-audits` audits queued or running)."""
        a = svc.own_audit(audit_id, who)
        outcome = store.requeue(audit_id, who, limit=config.max_audits)
        if outcome == "deleted":
            raise HTTPException(409, deleted_message(store.deleted_uploads(a["spec"], who)))
        if outcome == "limit":
            raise HTTPException(429, f"you have {config.max_audits} audits queued or "
                                     "running, the most this service allows at once; wait "
                                     "for one to finish or cancel one, then resume this one")
        if outcome != "queued":
            raise HTTPException(409, f"audit {audit_id!r} is {a['status']}; only a failed or "
                                     "cancelled audit can be resumed")
        event(log, "audit resumed", audit=audit_id, principal=who)
        if runner is not None:
            runner.notify()
        return svc.shown(svc.own_audit(audit_id, who))

    @r.delete("/v1/audits/{audit_id}", tags=["audits"])
    def cancel(audit_id: str, who: str = Who) -> dict[str, Any]:
        """Cancel a queued or running audit (the cells already written stay in its cube)."""
        svc.own_audit(audit_id, who)
        # the state is read and the cancel written in one transaction, so the reason
        # fits the state it ends (a queued audit cancelled here is never started)
        if store.cancel(audit_id, who, lambda row: cancel_reason(row, who)):
            if runner is not None:
                runner.cancel(audit_id)
            event(log, "audit cancelled", audit=audit_id, principal=who)
        return audit_out(svc.own_audit(audit_id, who))

    @r.get("/v1/audits/{audit_id}/events", tags=["audits"])
    async def events(audit_id: str, request: Request, who: str = Who) -> StreamingResponse:
        """Server-sent events: `cell` for each finished cell (ids 1, 2, ... within the
        audit), then one `status` when the audit ends. `Last-Event-ID` resumes after an
        event already seen."""
        from ..security import parse_last_event_id
        svc.own_audit(audit_id, who)
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

    return r


def cancel_reason(a: Mapping[str, Any], who: str) -> str:
    """What a cancelled audit says: who cancelled it, when, and what is kept."""
    when = time.strftime("%Y-%m-%d %H:%M:%SZ", time.gmtime())
    if a["status"] == "queued" and not a["cells_done"]:
        return f"cancelled by {who} at {when}, before it started; nothing was computed"
    # no count here: a cell in flight may still land; the audit's cells_done is the one
    # count (the cube's), shown beside this reason
    return (f"cancelled by {who} at {when} while running; the cells finished before it "
            "stopped stay in its cube and can be queried")


def parse_body(body: bytes, ctype: str) -> Any:
    """A spec from a request body: JSON by its content type, else YAML (as a spec file,
    :func:`sdcdist.yamlsafe.load_yaml`). Either way a key given twice in one mapping is
    refused."""
    from ...yamlsafe import load_yaml
    if not body.strip():
        raise empty_error("The request", "send the YAML or JSON of an audit spec (see "
                          "examples/demo.yaml)")
    try:
        text = body.decode("utf-8-sig")
    except UnicodeDecodeError:
        raise unreadable_error("an audit spec", "the request", "not UTF-8 text",
                               "send it as UTF-8") from None
    if "json" in ctype.lower():
        from ...limits import MAX_YAML_DEPTH
        from ..security import check_json_depth
        check_json_depth(text, MAX_YAML_DEPTH)
        try:
            return json.loads(text, object_pairs_hook=_no_duplicate_keys)
        except json.JSONDecodeError as exc:
            raise unreadable_error("JSON", "the spec", f"line {exc.lineno}, column "
                                   f"{exc.colno}: {exc.msg}", "send valid JSON") from None
    return load_yaml(text, what="the spec")


def _no_duplicate_keys(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
    """A JSON object, refused when it gives a key twice (as a YAML spec is)."""
    out: dict[str, Any] = {}
    for k, v in pairs:
        if k in out:
            raise SdcInputError(f"the spec gives the key {k[:64]!r} twice in one object; "
                                "give each key once")
        out[k] = v
    return out


def resolve_spec(doc: Any, who: str, store: Store, allow_urls: tuple[str, ...] = ()) -> Any:
    """The spec with every field that names data (:data:`sdcdist.audit.spec.DATA_FIELDS`:
    ``path``, ``holdout`` ...) of every dataset of ``dataset:`` and ``datasets:`` resolved
    by :func:`resolve_dataset`."""
    if not isinstance(doc, Mapping):
        return doc                       # parse_spec says what is wrong
    out = dict(doc)
    if isinstance(doc.get("dataset"), Mapping):
        out["dataset"] = resolve_dataset(doc["dataset"], "'dataset'", who, store,
                                          allow_urls)
    if isinstance(doc.get("datasets"), list):
        out["datasets"] = [resolve_dataset(d, f"datasets[{i}]", who, store, allow_urls)
                           if isinstance(d, Mapping) else d
                           for i, d in enumerate(doc["datasets"])]
    return out


def _own_upload(dataset_id: Any, what: str, who: str, store: Store) -> tuple[str, dict]:
    """The stored path (relative to the root) of ``who``'s upload ``dataset_id``."""
    dataset_id = str(dataset_id)
    row = store.dataset(dataset_id, who)
    if row is None:
        raise SdcInputError(f"{what} names dataset id {dataset_id[:64]!r}, which is not one "
                            "of your uploads; GET /v1/datasets lists them")
    return f"datasets/{dataset_id}.zarr", row


def resolve_field(value: Any, what: str, field: str, who: str, store: Store,
                  allow_urls: tuple[str, ...] = ()) -> Any:
    """One field that names data: ``{id: ...}`` (an upload of ``who``'s) becomes its stored
    path; anything else must pass :func:`sdcdist.service.security.check_data_path`."""
    from ..security import check_data_path
    if isinstance(value, Mapping):
        if set(value) != {"id"}:
            raise value_error(f"{what}.{field}", f"a path under files/{who}/ or {{id: ...}}, "
                              "the id of one of your uploads", got_text="another mapping")
        return _own_upload(value["id"], f"{what}.{field}", who, store)[0]
    if not isinstance(value, str):
        raise value_error(f"{what}.{field}", f"the path of a file under files/{who}/, or "
                          "{id: ...}, the id of one of your uploads",
                          got_text=f"a {type(value).__name__}")
    check_data_path(value, what, store.root, who, allow_urls, field=field)
    return value


def resolve_dataset(d: Mapping[str, Any], what: str, who: str, store: Store,
                    allow_urls: tuple[str, ...] = ()) -> dict:
    """One dataset mapping of a spec: ``id`` becomes the ``path`` of that upload of
    ``who``'s, and every field that names data
    (:data:`sdcdist.audit.spec.DATA_FIELDS`, read from the spec's schema so that a new
    one cannot bypass this) is resolved by :func:`resolve_field`."""
    from ...audit.spec import DATA_FIELDS
    d = dict(d)
    if "id" in d:
        if any(k in d for k in ("path", "synthetic", "reference")):
            raise SdcInputError(f"{what} has 'id' and another source; name the data by one "
                                "of 'id' (an uploaded dataset), 'reference' or 'synthetic'")
        d["path"], row = _own_upload(d.pop("id"), what, who, store)
        d.setdefault("name", row["name"])
        resolved = {"path"}
    else:
        resolved = set()
    for field in sorted(DATA_FIELDS - resolved):
        if field in d:
            d[field] = resolve_field(d[field], what, field, who, store, allow_urls)
    return d
