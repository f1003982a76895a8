"""What ``sdcdist serve`` was given: :class:`ServiceConfig` (read by the app and its routers)."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from .auth import Tokens
from .limits import Limits

__all__ = ["ServiceConfig"]


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
