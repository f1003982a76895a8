"""The service's access log as plain ASGI middleware (no per-request task or stream copy).

One ``request`` event per answered request: method, path (never the query string,
which may carry filters), status, principal and duration. GET and HEAD are logged at
debug level (the page polls every second), requests that change something at info.
"""

from __future__ import annotations

import logging
import time
from typing import Any

from ..logs import event

__all__ = ["AccessLog"]

log = logging.getLogger("sdcdist.service")


class AccessLog:
    """ASGI middleware writing one log event per HTTP request."""

    def __init__(self, app: Any):
        self.app = app

    async def __call__(self, scope: Any, receive: Any, send: Any) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        level = logging.DEBUG if scope.get("method") in ("GET", "HEAD") else logging.INFO
        if not log.isEnabledFor(level):
            await self.app(scope, receive, send)
            return
        t0 = time.perf_counter()
        status = [500]

        async def sent(msg: Any) -> None:
            if msg["type"] == "http.response.start":
                status[0] = msg["status"]
            await send(msg)
        try:
            await self.app(scope, receive, sent)
        finally:
            state = scope.get("state") or {}
            event(log, "request", level, method=scope.get("method"), path=scope.get("path"),
                  status=status[0], principal=state.get("principal"),
                  ms=round(1000 * (time.perf_counter() - t0), 1))
