"""The API's own documentation: what ``/openapi.json`` declares and the page at ``/docs``.

``/docs`` is one self-contained HTML page rendered on the server from the OpenAPI
document (no script, no stylesheet or font from anywhere else), so it works on a
machine without internet access, as a service in a closed network usually is.

:func:`complete` adds what FastAPI cannot infer to the OpenAPI document: the
bearer-token scheme (on every route that needs a token) and the error answers
each route can give (401, 404, 409, 413, 422, 429), all ``{"detail": "..."}``.
"""

from __future__ import annotations

import html
import json
from typing import Any

__all__ = ["complete", "render", "install", "ERRORS"]

#: status -> what it means in this service
ERRORS = {
    "401": "No token, or a token this service does not know (`WWW-Authenticate: Bearer`).",
    "404": "No such dataset or audit of yours (another principal's does not exist for you).",
    "409": "Not now: the audit has not written its cube yet, the dataset is used by an "
           "active audit, or the audit's dataset was deleted (a release, comparison, "
           "release report or resume needs it).",
    "413": "The upload or spec is larger than this service accepts.",
    "422": "The request is invalid: the one-line message names the culprit and the fix.",
    "429": "Too many requests: you have the most active audits this service allows, or "
           "too many failed token attempts came from your address.",
}

_ERROR_SCHEMA = {"type": "object", "required": ["detail"],
                 "properties": {"detail": {"type": "string"}}, "title": "Error"}


def _errors_for(path: str, method: str) -> list[str]:
    """The error statuses of one operation."""
    if path == "/v1/health":
        return []
    out = ["401", "422", "429"]
    if "{audit_id}" in path or "{dataset_id}" in path:
        out.append("404")
    if (path.startswith("/v1/audits/{audit_id}/") and path != "/v1/audits/{audit_id}/events"
            or path == "/v1/datasets/{dataset_id}" and method == "delete"):
        out.append("409")
    if method == "post" and path in ("/v1/datasets", "/v1/audits"):
        out.append("413")
    return sorted(out)


def complete(doc: dict[str, Any], *, auth: bool = True) -> dict[str, Any]:
    """``doc`` with the bearer scheme and the error answers of every operation."""
    comps = doc.setdefault("components", {})
    comps.setdefault("schemas", {})["Error"] = _ERROR_SCHEMA
    comps["securitySchemes"] = {"bearer": {
        "type": "http", "scheme": "bearer",
        "description": "`Authorization: Bearer TOKEN`, a token from the service's tokens "
                       "file (`sdcdist serve --hash-token NAME`)"
                       + ("" if auth else "; this service runs without tokens (loopback "
                                          "only), so any or no token is accepted")}}
    for path, ops in doc.get("paths", {}).items():
        for method, op in ops.items():
            if not isinstance(op, dict):
                continue
            codes = _errors_for(path, method)
            if path.startswith("/v1/") and path != "/v1/health":
                op["security"] = [{"bearer": []}]
            resp = op.setdefault("responses", {})
            for code in codes:
                resp[code] = {"description": ERRORS[code], "content": {"application/json": {
                    "schema": {"$ref": "#/components/schemas/Error"}}}}
    return doc


_CSS = """body{font-family:system-ui,sans-serif;max-width:1000px;margin:1.5em auto;padding:0 1em;
color:#222}h1{font-size:1.4em}h2{font-size:1.15em;margin-top:1.6em;border-bottom:1px solid #ddd}
.op{border:1px solid #ddd;border-radius:4px;margin:.7em 0;padding:.4em .8em}
.m{display:inline-block;min-width:4.5em;font-weight:bold;font-family:monospace}
.get{color:#1f6feb}.post{color:#2e7d32}.delete{color:#c33}.put,.patch{color:#9a6700}
code,pre{font-size:12px}pre{background:#f6f8fa;padding:.5em;overflow:auto}
table{border-collapse:collapse;font-size:13px;margin:.3em 0}td,th{padding:2px 8px;
border-bottom:1px solid #eee;text-align:left;vertical-align:top}small{color:#666}"""


def _e(v: Any) -> str:
    return html.escape(str(v))


def _schema_text(s: Any, doc: dict[str, Any]) -> str:
    if not isinstance(s, dict):
        return ""
    if "$ref" in s:
        return s["$ref"].rsplit("/", 1)[-1]
    if "anyOf" in s:
        return " or ".join(_schema_text(x, doc) for x in s["anyOf"])
    if s.get("type") == "array":
        return f"list of {_schema_text(s.get('items', {}), doc)}"
    return str(s.get("type", "object"))


def render(doc: dict[str, Any]) -> str:
    """The OpenAPI document as one HTML page (no scripts, no external resources)."""
    info = doc.get("info", {})
    out = [f"<!DOCTYPE html><html lang=\"en\"><head><meta charset=\"utf-8\"><title>"
           f"{_e(info.get('title', 'API'))}</title><style>{_CSS}</style></head><body>",
           f"<h1>{_e(info.get('title', ''))} <small>{_e(info.get('version', ''))}</small></h1>",
           f"<p>{_e(info.get('description', ''))}</p>",
           "<p><small>Machine-readable: <a href=\"openapi.json\">/openapi.json</a>. "
           "The web page: <a href=\"./\">/</a>.</small></p>"]
    schemes = doc.get("components", {}).get("securitySchemes", {})
    if schemes:
        out.append("<h2>Authentication</h2><ul>")
        for name, s in schemes.items():
            out.append(f"<li><b>{_e(name)}</b> ({_e(s.get('type'))} {_e(s.get('scheme', ''))}"
                       f"): {_e(s.get('description', ''))}</li>")
        out.append("</ul>")
    out.append("<h2>Errors</h2><p>Every error answer is JSON <code>{\"detail\": \"...\"}"
               "</code>, one line that never holds a record value.</p><table>")
    for code, what in ERRORS.items():
        out.append(f"<tr><td><b>{code}</b></td><td>{_e(what)}</td></tr>")
    out.append("</table>")
    groups: dict[str, list[tuple[str, str, dict]]] = {}
    for path, ops in doc.get("paths", {}).items():
        for method, op in ops.items():
            if isinstance(op, dict):
                groups.setdefault((op.get("tags") or ["other"])[0], []).append(
                    (path, method, op))
    for tag, ops in groups.items():
        out.append(f"<h2 id=\"{_e(tag)}\">{_e(tag)}</h2>")
        for path, method, op in ops:
            out.append(f"<div class=\"op\" id=\"{_e(op.get('operationId', ''))}\">"
                       f"<span class=\"m {_e(method)}\">{_e(method.upper())}</span> "
                       f"<code>{_e(path)}</code> "
                       f"{'<small>(needs a token)</small>' if op.get('security') else ''}"
                       f"<div><b>{_e(op.get('summary', ''))}</b></div>")
            if op.get("description"):
                out.append(f"<pre>{_e(op['description'])}</pre>")
            params = op.get("parameters") or []
            if params:
                out.append("<table><tr><th>parameter</th><th>in</th><th>type</th>"
                           "<th>required</th><th></th></tr>")
                for p in params:
                    out.append(f"<tr><td><code>{_e(p.get('name'))}</code></td>"
                               f"<td>{_e(p.get('in'))}</td>"
                               f"<td>{_e(_schema_text(p.get('schema'), doc))}</td>"
                               f"<td>{'yes' if p.get('required') else ''}</td>"
                               f"<td>{_e(p.get('description', ''))}</td></tr>")
                out.append("</table>")
            body = op.get("requestBody", {}).get("content", {})
            if body:
                out.append("<div>Body: " + ", ".join(f"<code>{_e(k)}</code>" for k in body)
                           + "</div>")
                for k, v in body.items():
                    ref = v.get("schema", {}).get("$ref")
                    if ref:
                        s = doc["components"]["schemas"][ref.rsplit("/", 1)[-1]]
                        out.append("<table>")
                        for name, f in s.get("properties", {}).items():
                            out.append(f"<tr><td><code>{_e(name)}</code></td>"
                                       f"<td>{_e(_schema_text(f, doc))}</td>"
                                       f"<td>{_e(f.get('description', ''))}</td></tr>")
                        out.append("</table>")
            resp = op.get("responses", {})
            out.append("<div><small>Answers: " + ", ".join(
                f"<b title=\"{_e(r.get('description', ''))}\">{_e(c)}</b>"
                for c, r in resp.items()) + "</small></div></div>")
    out.append(f"<h2>OpenAPI</h2><details><summary>the whole document</summary><pre>"
               f"{_e(json.dumps(doc, indent=1))}</pre></details></body></html>")
    return "\n".join(out)


def install(app: Any, *, auth: bool) -> None:
    """Serve ``/docs`` (this module's page) and a completed ``/openapi.json`` on ``app``
    (a FastAPI application made with ``docs_url=None, redoc_url=None``)."""
    from fastapi.openapi.utils import get_openapi
    from fastapi.responses import HTMLResponse

    def openapi() -> dict[str, Any]:
        if app.openapi_schema is None:
            app.openapi_schema = complete(get_openapi(
                title=app.title, version=app.version, description=app.description,
                routes=app.routes), auth=auth)
        return app.openapi_schema

    app.openapi = openapi

    @app.get("/docs", response_class=HTMLResponse, include_in_schema=False)
    def docs() -> HTMLResponse:
        return HTMLResponse(render(app.openapi()))
