"""What keeps the service to its principals' own data and its own origin.

- :func:`check_data_path`: a spec's ``path`` (and every other field that names data,
  ``holdout`` ...) names a local file under the principal's
  own area ``<root>/files/<principal>/``; every URL protocol and fsspec chain
  (``local://``, ``simplecache::``, ``http://``, ``s3://`` ...) is refused, so a spec
  can neither read another principal's store nor make the service fetch an address.
- :class:`RequestGuard`: ASGI middleware. Checks ``Host`` against the addresses the
  service was bound to (DNS rebinding), refuses cross-site requests (``Origin``,
  ``Sec-Fetch-Site``), requires the per-start CSRF token on the state-changing requests
  a foreign page could send without a CORS preflight when there are no tokens, and sets
  the security headers of every answer.
- :class:`FailureLimiter`: wrong tokens per client address (:func:`client_key`: IPv6 per
  /64; 429 beyond the limit), counted exactly under concurrency. A valid token is checked
  first and always passes, whatever its address did.
- :func:`check_json_depth`, :func:`parse_last_event_id`: request parts that are refused
  with 422 before they reach a parser that would fail with a traceback.
"""

from __future__ import annotations

import json
import threading
import time
from collections import deque
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

from ..errors import SdcInputError, count_error, value_error
from ..text import MAX_LABEL_BYTES

__all__ = ["check_data_path", "principal_area", "RequestGuard", "FailureLimiter", "client_key",
           "hide_root",
           "check_json_depth", "parse_last_event_id", "CSRF_HEADER", "loopback_hosts",
           "MAX_PATH_CHARS"]

#: the header that carries the per-start CSRF token (no-token mode)
CSRF_HEADER = "x-sdcdist-csrf"

#: longest ``path`` a spec may give, and longest part of one (the file system's limits)
MAX_PATH_CHARS = 1024
MAX_NAME_BYTES = MAX_LABEL_BYTES

#: content types a foreign page can POST without a CORS preflight
_SIMPLE_TYPES = ("application/x-www-form-urlencoded", "multipart/form-data", "text/plain")

_CSP = ("default-src 'self'; script-src 'self' 'unsafe-inline'; style-src 'self' "
        "'unsafe-inline'; img-src 'self' data: blob:; connect-src 'self'; object-src "
        "'none'; base-uri 'none'; form-action 'self'; frame-ancestors 'none'")


def principal_area(root: Path, who: str) -> Path:
    """The folder under ``root`` whose files the principal ``who`` may name by ``path``."""
    return root / "files" / who


def allowed_url(url: str, prefixes: tuple[str, ...], who: str) -> bool:
    """Whether ``url`` is a Zarr store (``.zarr``) under one of the operator's
    ``--allow-url`` prefixes, with ``{principal}`` in a prefix standing for ``who``. No
    chain, no ``..`` segment, no query or fragment, and never a protocol that reads the
    service's own machine or fetches arbitrary addresses."""
    if "::" in url or "?" in url or "#" in url or "\\" in url:
        return False
    proto = url.split("://")[0].lower()
    if proto in ("file", "local", "memory", "simplecache", "filecache", "blockcache",
                 "cached", "reference", "dir", "zip", "tar", "libarchive", "ftp", "sftp",
                 "ssh", "http", "https", "data"):
        return False
    rest = url.split("://", 1)[1] if "://" in url else ""
    if any(part in ("..", ".") for part in rest.split("/")):
        return False
    if not url.rstrip("/").endswith(".zarr"):
        return False            # a store: sized from its metadata before it is read
    for prefix in prefixes:
        p = prefix.replace("{principal}", who)
        if url.startswith(p if p.endswith("/") else p + "/"):
            return True
    return False


def check_allow_url(prefix: str) -> str:
    """An ``--allow-url`` prefix, checked: ``PROTOCOL://BUCKET/...`` of an object store."""
    if "://" not in prefix or "::" in prefix or not prefix.split("://", 1)[1].strip("/") \
            or not allowed_url(prefix.replace("{principal}", "p").rstrip("/") + "/x.zarr",
                               (prefix,), "p"):
        raise value_error("--allow-url", "an object-store prefix such as "
                          "'s3://bucket/{principal}/' (local, cached, chained and web protocols "
                          "cannot be allowed)", prefix)
    return prefix


def check_data_path(path: str, what: str, root: Path, who: str,
                    allow_urls: tuple[str, ...] = (), field: str = "path") -> None:
    """Refuse a spec's ``path`` (or any other field naming data, ``field``: see
    :data:`sdcdist.audit.spec.DATA_FIELDS`) unless it is a local path under ``who``'s own
    area, or a URL under one of ``allow_urls`` (the operator's ``--allow-url`` prefixes).

    Relative paths are relative to ``root``; ``..``, symbolic links and ``file://``
    URLs are resolved before the check. Any other protocol or fsspec chain is refused,
    naming the protocol but never the rest of the URL; no message names a server path.
    """
    from ..storage import check_url, local_path
    if "\x00" in path or any(ord(ch) < 32 for ch in path):
        raise value_error(f"{what}.{field}", "a plain file path",
                          got_text="a path with a control character (such as a NUL byte)")
    if len(path) > MAX_PATH_CHARS:
        raise count_error(f"{what}.{field}", f"at most {MAX_PATH_CHARS}", "characters",
                          len(path), "the service accepts no longer paths")
    area = principal_area(root, who)
    if "::" in path or "://" in path:
        check_url(path.split("::")[-1] if "::" in path else path, what=f"{what}.{field}")
        proto = path.split("::")[0].split("://")[0][:32]
        if allow_urls and allowed_url(path, allow_urls, who):
            return
        if "::" in path or proto.lower() != "file":
            raise SdcInputError(
                f"{what}.{field} uses the protocol {proto!r}{' in a chain' if '::' in path else ''}"
                "; through the service a spec names data only by 'dataset: {id: ...}' (an "
                f"upload of yours), by a local path under files/{who}/ in the service's "
                "root, or by a URL under a prefix the operator allowed (sdcdist serve "
                "--allow-url): other URLs and fsspec protocols are refused so that a spec "
                "cannot reach another principal's data or make the service fetch an "
                "address")
        path = local_path(path)
    if any(len(part.encode()) > MAX_NAME_BYTES for part in Path(path).parts):
        raise SdcInputError(f"{what}.{field} has a part longer than {MAX_NAME_BYTES} bytes; give "
                            "a shorter file name")
    p = Path(path)
    try:
        full = (p if p.is_absolute() else root / p).resolve()
    except (OSError, ValueError, RuntimeError):
        raise SdcInputError(f"{what}.{field} cannot be resolved to a file; give a plain path "
                            f"under files/{who}/") from None
    try:
        full.relative_to(root)
    except ValueError:
        raise SdcInputError(f"{what}.{field} is outside the service's root folder; upload the "
                            "file (POST /v1/datasets) and name it by 'dataset: {id: ...}'"
                            ) from None
    try:
        full.relative_to(area.resolve())
    except ValueError:
        raise SdcInputError(f"{what}.{field} points into the service's own files or another "
                            "principal's area; name an uploaded dataset by 'dataset: {id: "
                            f"...}}', or a file the operator placed under files/{who}/"
                            ) from None


def hide_root(text: str, root: Path) -> str:
    """``text`` with the service's root folder taken out of every path in it (``<root>/
    datasets/x.zarr`` becomes ``datasets/x.zarr``): what the service says names no
    absolute server path."""
    for r in {str(root), str(Path(root).resolve())}:
        if r and r != "/":
            text = text.replace(r.rstrip("/") + "/", "").replace(r, ".")
    return text


def check_json_depth(text: str, limit: int) -> None:
    """Refuse JSON nested deeper than ``limit`` before it is parsed (strings skipped)."""
    depth = 0
    in_str = esc = False
    for ch in text:
        if in_str:
            if esc:
                esc = False
            elif ch == "\\":
                esc = True
            elif ch == '"':
                in_str = False
        elif ch == '"':
            in_str = True
        elif ch in "[{":
            depth += 1
            if depth > limit:
                raise SdcInputError(f"the spec is nested more than {limit} levels deep; a "
                                    "spec needs about five")
        elif ch in "]}":
            depth -= 1


def parse_last_event_id(value: str | None) -> int:
    """The ``Last-Event-ID`` header as a per-audit event number (0 without one)."""
    if value is None or not value.strip():
        return 0
    v = value.strip()
    if not v.isdigit() or len(v) > 18:
        raise value_error("Last-Event-ID", "the number of an event this stream sent (an "
                          "integer from 0 to 10^18)")
    return int(v)


def loopback_hosts(host: str, port: int = 0) -> tuple[str, ...]:
    """The host names (``Host`` without its port) a service bound to ``host`` answers:
    the address itself, and for a loopback address its other loopback names. Empty for
    a wildcard address (0.0.0.0, ::), where any name may reach it."""
    h = host.strip("[]")
    if h in ("0.0.0.0", "::", ""):
        return ()
    names = {h}
    import ipaddress
    try:
        if h == "localhost" or ipaddress.ip_address(h).is_loopback:
            names |= {"127.0.0.1", "localhost", "::1"}
    except ValueError:
        pass
    return tuple(sorted(f"[{n}]" if ":" in n else n for n in names))


def client_key(addr: str) -> str:
    """The unit wrong tokens are counted in: an IPv4 address, an IPv6 address's /64 (one
    host commonly holds a whole /64, so its addresses are one client), an IPv4-mapped
    IPv6 address as its IPv4 address; anything else (a Unix socket) as given."""
    import ipaddress
    try:
        ip = ipaddress.ip_address(addr.strip("[]").split("%")[0])
    except ValueError:
        return addr
    if isinstance(ip, ipaddress.IPv6Address):
        if ip.ipv4_mapped is not None:
            return str(ip.ipv4_mapped)
        return str(ipaddress.IPv6Network((ip, 64), strict=False))
    return str(ip)


class FailureLimiter:
    """At most ``limit`` failed authentications per client (:func:`client_key`) in
    ``window`` seconds.

    :meth:`fail` counts a failure and says whether it was one of the ``limit`` allowed
    (0: answer 401) or past them (the seconds to wait: answer 429, not counted); the test
    and the count happen under one lock, so however many wrong tokens arrive at once,
    exactly ``limit`` of them are attempts. :meth:`blocked` only reads."""

    def __init__(self, limit: int = 10, window: float = 60.0):
        self.limit, self.window = limit, window
        self._fails: dict[str, deque] = {}
        self._lock = threading.Lock()

    def _recent(self, key: str, now: float) -> deque:
        q = self._fails.setdefault(key, deque())
        while q and q[0] <= now - self.window:
            q.popleft()
        return q

    def blocked(self, addr: str) -> float:
        """Seconds until ``addr`` may fail again (0: it may)."""
        key, now = client_key(addr), time.monotonic()
        with self._lock:
            q = self._recent(key, now)
            if len(q) < self.limit:
                if not q:
                    self._fails.pop(key, None)
                return 0.0
            return max(0.0, q[0] + self.window - now)

    def fail(self, addr: str) -> float:
        """Record a wrong token from ``addr``: 0 if it was counted (within the limit),
        else the seconds to wait (past the limit: refused, not counted)."""
        key, now = client_key(addr), time.monotonic()
        with self._lock:
            q = self._recent(key, now)
            if len(q) >= self.limit:
                return max(1e-3, q[0] + self.window - now)
            q.append(now)
            if len(self._fails) > 10_000:           # bounded: forget the oldest addresses
                for k in list(self._fails)[:1000]:
                    if k != key:
                        del self._fails[k]
            return 0.0


class RequestGuard:
    """ASGI middleware; see the module docstring.

    Parameters
    ----------
    app : the ASGI application
    hosts : the host names (``Host`` without port) to accept (empty: any)
    csrf : the per-start token required, with no tokens file, on state-changing requests
        that a foreign page could send without a preflight, and the sign that ``Origin``
        must match ``Host`` (None: neither, as with bearer tokens)
    """

    def __init__(self, app: Any, hosts: tuple[str, ...] = (), csrf: str | None = None):
        self.app = app
        self.hosts = {h.lower() for h in hosts}
        self.csrf = csrf

    async def __call__(self, scope: Any, receive: Any, send: Any) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        headers = {k.decode("latin-1").lower(): v.decode("latin-1")
                   for k, v in scope.get("headers") or []}
        why = self._refuse(scope, headers)
        if why is not None:
            status, detail = why
            body = json.dumps({"detail": detail}).encode()
            await send({"type": "http.response.start", "status": status,
                        "headers": [(b"content-type", b"application/json"),
                                    (b"content-length", str(len(body)).encode()),
                                    *_security_headers(scope.get("path", ""))]})
            await send({"type": "http.response.body", "body": body})
            return
        path = scope.get("path", "")

        async def with_headers(msg: Any) -> None:
            if msg["type"] == "http.response.start":
                extra = _security_headers(path)
                names = {k for k, _ in extra}
                kept = [(k, v) for k, v in msg.get("headers") or []
                        if k.lower() not in names]
                msg = {**msg, "headers": kept + extra}
            await send(msg)
        await self.app(scope, receive, with_headers)

    def _refuse(self, scope: Any, headers: dict[str, str]) -> tuple[int, str] | None:
        host = headers.get("host", "").lower()
        name = host[:host.find("]") + 1] if host.startswith("[") else host.split(":")[0]
        if self.hosts and name not in self.hosts:
            return 421, ("this service does not answer for that host name; use the address "
                         "it listens on")
        method = scope.get("method", "GET")
        changing = method not in ("GET", "HEAD", "OPTIONS")
        path = scope.get("path", "")
        api = path.startswith("/v1/") and path != "/v1/health"
        site = headers.get("sec-fetch-site", "")
        origin = headers.get("origin")
        if changing or api:
            if site in ("cross-site", "same-site"):
                return 403, "cross-site requests are refused"
            # without tokens (loopback, no proxy) the Origin must be this very address;
            # with tokens a forged request lacks the bearer token, and a proxy may have
            # rewritten Host, so Origin is not compared there
            if self.csrf is not None and origin is not None and (
                    origin == "null" or urlsplit(origin).netloc.lower() != host):
                return 403, "cross-origin requests are refused"
        if changing and self.csrf is not None:
            ctype = headers.get("content-type", "").split(";")[0].strip().lower()
            simple = method == "POST" and (ctype in _SIMPLE_TYPES or not ctype)
            if simple and headers.get(CSRF_HEADER) != self.csrf:
                return 403, ("this request needs the header X-Sdcdist-Csrf with the token "
                             "of GET /v1/csrf (the page sends it; a spec may instead be "
                             "sent as application/json or application/yaml)")
        return None


def _security_headers(path: str) -> list[tuple[bytes, bytes]]:
    docs = path.startswith(("/docs", "/redoc"))
    out = [(b"x-frame-options", b"DENY"), (b"x-content-type-options", b"nosniff"),
           (b"referrer-policy", b"no-referrer"),
           (b"content-security-policy", b"frame-ancestors 'none'" if docs
            else _CSP.encode())]
    if path == "/" or (path.startswith("/v1/") and path != "/v1/health"):
        out.append((b"cache-control", b"no-store"))
    return out
