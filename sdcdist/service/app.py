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

import json
import logging
import secrets
from collections.abc import Mapping
from typing import Any

from fastapi import FastAPI, Request
from fastapi.exceptions import RequestValidationError
from fastapi.responses import JSONResponse, Response
from starlette.requests import ClientDisconnect

from ..errors import SdcInputError
from ..logs import event
from .accesslog import AccessLog
from .apidocs import install as install_docs
from .config import ServiceConfig
from .helpers import Service, version
from .jobs import JobRunner
from .routes import ROUTERS
from .security import RequestGuard
from .store import Store

__all__ = ["create_app", "ServiceConfig"]

log = logging.getLogger("sdcdist.service")


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


def create_app(config: ServiceConfig, runner: JobRunner | None = None,
               store: Store | None = None) -> FastAPI:
    """The ASGI application. ``runner`` runs the audits (None: submissions only queue).

    The routes live in :mod:`sdcdist.service.routes`, one router per resource, on the
    state they share (:class:`sdcdist.service.helpers.Service`, ``app.state.service``).
    """
    store = store or Store(config.root)
    app = FastAPI(
        title="sdcdist audit service",
        version=version(),
        description="Submit, follow and query audits of statistical disclosure control "
                    "methods. Authenticate with `Authorization: Bearer TOKEN`.",
        docs_url=None, redoc_url=None,        # /docs is served here, without a CDN
    )
    install_docs(app, auth=config.tokens is not None)
    # no tokens: a foreign page's simple POSTs must carry this per-start token
    csrf = secrets.token_urlsafe(32)
    svc = Service(config, store, runner, csrf)
    app.state.service = svc
    app.state.store = store
    app.state.runner = runner
    app.state.config = config
    app.state.csrf = csrf
    app.state.results = svc.results
    app.add_middleware(RequestGuard, hosts=config.hosts,
                       csrf=csrf if config.tokens is None else None)
    _install_error_handlers(app)
    # method, path, status, principal, duration: GETs at debug level, changes at info
    app.add_middleware(AccessLog)
    for routes in ROUTERS:
        app.include_router(routes.router(svc))
    return app


def _install_error_handlers(app: FastAPI) -> None:
    """A user mistake is a 422 with the command line's one-line message (URL user-info
    redacted, the service's root folder taken out of its paths); a malformed request
    names the parameter, never the value sent."""
    @app.exception_handler(SdcInputError)
    async def _input_error(request: Request, exc: SdcInputError) -> JSONResponse:
        from ..text import redact
        from .security import hide_root
        return JSONResponse({"detail": hide_root(redact(str(exc)),
                                                 request.app.state.config.root)},
                            status_code=422)

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
        from ..text import raised_where
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
              where=raised_where(exc), path=request.url.path)
        return JSONResponse({"detail": f"unexpected failure ({type(exc).__name__}); the "
                                       "service log says where"}, status_code=500)
