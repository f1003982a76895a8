"""Large work arrays kept between PRL calls of the same size: the counting kernel's
histograms (:mod:`.hists`) and the dense path's grid of every pair's weight
(:mod:`.blocks`). Mapping the pages of a fresh array of a hundred megabytes costs more than
the kernels that fill it (10-100 ms a call, more when the kernel must compact memory for
huge pages); a kept array is mapped once per process.

Each kept entry serves one call at a time (:func:`take` removes it, :func:`keep` puts it
back), so concurrent calls never share an array. :func:`release` drops them all.
"""

from __future__ import annotations

import threading
from typing import Any

__all__ = ["take", "keep", "release", "kept_keys"]

_KEPT: dict[tuple, Any] = {}
_LOCK = threading.Lock()


def take(key: tuple) -> Any:
    """The array (or tuple of arrays) kept under ``key``, removed from the store; ``None``
    when there is none."""
    with _LOCK:
        return _KEPT.pop(key, None)


def keep(key: tuple, value: Any) -> None:
    """Keep ``value`` under ``key`` for the next :func:`take` (one per key: a second one is
    dropped)."""
    with _LOCK:
        _KEPT.setdefault(key, value)


def release() -> None:
    """Drop every kept array (their memory goes back at once)."""
    with _LOCK:
        _KEPT.clear()


def kept_keys() -> list[tuple]:
    """The keys held now (for tests and diagnostics)."""
    with _LOCK:
        return list(_KEPT)
