"""The web page, the CSRF token of form posts and the liveness check (no data)."""

from __future__ import annotations

from typing import Any

from fastapi import APIRouter, Depends
from fastapi.responses import HTMLResponse

from ..helpers import Service, version

__all__ = ["router"]


def router(svc: Service) -> APIRouter:
    """The routes of the page and of the service itself (``/``, ``/v1/csrf``, ``/v1/health``),
    on the shared state ``svc``."""
    r = APIRouter()
    config = svc.config
    Who = Depends(svc.principal)

    @r.get("/", response_class=HTMLResponse, include_in_schema=False)
    def page() -> HTMLResponse:
        from ..web import PAGE
        # the page sends this token in the X-Sdcdist-Csrf header (see security.py)
        return HTMLResponse(PAGE.replace(
            "<head>", f'<head><meta name="sdcdist-csrf" content="{svc.csrf}">', 1))

    @r.get("/v1/csrf", tags=["service"])
    def csrf_token(who: str = Who) -> dict[str, Any]:
        """The token to send in the `X-Sdcdist-Csrf` header of an upload (multipart) or
        another POST of a form's content type, when the service runs without tokens.
        Another site's page cannot read it."""
        return {"header": "X-Sdcdist-Csrf", "token": svc.csrf}

    @r.get("/v1/health", tags=["service"])
    async def health() -> dict[str, Any]:
        """Liveness: no authentication, no data."""
        # on the event loop itself, not the worker threads: answered while every thread
        # is busy (uploads being stored and scanned), as long as the loop turns
        return {"status": "ok", "version": version(),
                "auth": "bearer" if config.tokens is not None else "none"}

    return r
