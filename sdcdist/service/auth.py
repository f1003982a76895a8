"""Bearer tokens of the service: a file of hashed tokens, one principal per line.

A line of the tokens file (``sdcdist serve --hash-token NAME`` prints one)::

    alice sha256:9f86d081884c7d659a2feaa0c55ad015a3bf4f1b2b0b822cd15d6c15b0f00a08
    bob   scrypt:16384:8:1:<salt hex>:<hash hex>

``sha256`` suits the random 256-bit tokens that ``--hash-token`` makes (no
dictionary to try); ``scrypt`` suits tokens people choose. Blank lines and
lines starting with ``#`` are ignored. The file never holds a token itself,
and a presented token is compared with :func:`hmac.compare_digest` against
every line, so the time taken does not tell which line came close.
"""

from __future__ import annotations

import hashlib
import hmac
import re
import secrets
from dataclasses import dataclass
from pathlib import Path

from ..errors import SdcInputError, count_error, unreadable_error, value_error

__all__ = ["Tokens", "hash_token", "new_token", "PRINCIPAL_NAME"]

#: a principal's name in a tokens file (``sdcdist serve --hash-token NAME`` checks it too)
PRINCIPAL_NAME = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._@-]{0,63}$")


def new_token() -> str:
    """A fresh random token (256 bits, URL-safe)."""
    return secrets.token_urlsafe(32)


def hash_token(token: str, *, method: str = "sha256") -> str:
    """The stored form of ``token``: ``sha256:HEX`` or ``scrypt:N:r:p:SALT:HEX``."""
    if method == "sha256":
        return "sha256:" + hashlib.sha256(token.encode()).hexdigest()
    if method == "scrypt":
        salt = secrets.token_bytes(16)
        n, r, p = 2**14, 8, 1
        h = hashlib.scrypt(token.encode(), salt=salt, n=n, r=r, p=p, dklen=32)
        return f"scrypt:{n}:{r}:{p}:{salt.hex()}:{h.hex()}"
    raise ValueError(method)


@dataclass(frozen=True)
class _Entry:
    principal: str
    method: str
    params: tuple[int, ...]
    salt: bytes
    digest: bytes

    def matches(self, token: str) -> bool:
        if self.method == "sha256":
            got = hashlib.sha256(token.encode()).digest()
        else:
            n, r, p = self.params
            got = hashlib.scrypt(token.encode(), salt=self.salt, n=n, r=r, p=p,
                                 dklen=len(self.digest), maxmem=256 * 2**20)
        return hmac.compare_digest(got, self.digest)


class Tokens:
    """The principals of a tokens file; :meth:`principal` maps a token to its owner."""

    def __init__(self, entries: list[_Entry]):
        self.entries = entries
        self._verified: dict[bytes, str] = {}     # sha256(token) -> principal (scrypt cache)

    @classmethod
    def load(cls, path: str | Path) -> "Tokens":
        path = Path(path)
        try:
            mode = path.stat().st_mode
        except OSError:
            mode = 0
        if mode & 0o022:
            # anyone who can write it can add a principal of their own
            raise SdcInputError(f"--tokens {path.name!r} can be written by other users "
                                f"(mode {mode & 0o777:o}); make it writable by its owner "
                                f"only: chmod go-w {path.name}")
        try:
            text = path.read_text(encoding="utf-8")
        except OSError as exc:
            raise unreadable_error("a token file (--tokens)", path, type(exc).__name__) from None
        entries = []
        for i, line in enumerate(text.splitlines(), 1):
            line = line.strip()
            if not line or line.startswith("#"):
                continue
            entries.append(_parse(line, path.name, i))
        if not entries:
            raise count_error(f"The token file (--tokens) {path.name!r}", "at least 1",
                              "token line", 0, "make lines with 'sdcdist serve --hash-token NAME'")
        return cls(entries)

    @property
    def principals(self) -> list[str]:
        return sorted({e.principal for e in self.entries})

    @property
    def slow(self) -> bool:
        """Whether some line is a slow (scrypt) hash."""
        return any(e.method != "sha256" for e in self.entries)

    def principal(self, token: str, *, slow: bool = True) -> str | None:
        """The principal whose token this is, else None. ``slow=False`` compares the
        ``sha256`` lines and the tokens verified before only (no scrypt)."""
        if not token or len(token) > 1024:
            return None
        key = hashlib.sha256(token.encode()).digest()
        cached = self._verified.get(key)
        found = None
        for e in self.entries:          # every line is compared: no early exit
            if e.method == "sha256":
                if hmac.compare_digest(key, e.digest) and found is None:
                    found = e.principal
            elif slow and cached is None and found is None and e.matches(token):
                found = e.principal
        if found is None and cached is not None:
            found = cached
        if found is not None:
            self._verified[key] = found
        return found


def _parse(line: str, name: str, lineno: int) -> _Entry:
    bad = value_error(f"Line {lineno} of --tokens {name!r}",
                      "'NAME sha256:HEX' or 'NAME scrypt:N:r:p:SALT:HEX'",
                      hint="Make lines with 'sdcdist serve --hash-token NAME'.")
    parts = line.split()
    if len(parts) != 2 or not PRINCIPAL_NAME.match(parts[0]):
        raise bad
    principal, stored = parts
    fields = stored.split(":")
    try:
        if fields[0] == "sha256" and len(fields) == 2 and len(fields[1]) == 64:
            return _Entry(principal, "sha256", (), b"", bytes.fromhex(fields[1]))
        if fields[0] == "scrypt" and len(fields) == 6:
            n, r, p = (int(x) for x in fields[1:4])
            return _Entry(principal, "scrypt", (n, r, p), bytes.fromhex(fields[4]),
                          bytes.fromhex(fields[5]))
    except ValueError:
        pass
    raise bad
