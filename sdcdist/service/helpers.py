"""What every router of the service shares: who is asking, what they own, cubes and answers.

One :class:`Service` per application (``app.state.service``), built by
:func:`sdcdist.service.app.create_app`:

- :meth:`Service.principal`: the principal of a request's bearer token (the ``Who``
  dependency of every route under ``/v1``), with the failure limiter of wrong tokens;
- :meth:`Service.own_dataset`, :meth:`Service.own_audit`: a principal's own rows, 404
  for anyone else's;
- :meth:`Service.loaded_cube`: an audit's cube in memory, once per state of the audit;
- :meth:`Service.cached`: an answer from the cache of answers, else made in a thread;
- :meth:`Service.dataset_schema`, :meth:`Service.shown`: the views of a dataset and of an
  audit that the routes return;

and the JSON helpers of the answers (:func:`json_answer`, :func:`records`,
:func:`clean`).
"""

from __future__ import annotations

import asyncio
import json
import math
import threading
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from fastapi import HTTPException, Request
from fastapi.responses import Response

from .config import ServiceConfig
from .results import ResultCache
from .schema import column_schema
from .security import FailureLimiter
from .store import Store, audit_out

if TYPE_CHECKING:  # pragma: no cover - for type checkers
    from .jobs import JobRunner

__all__ = ["Service", "clean", "records", "json_answer", "version", "NO_CUBE_YET"]

#: the answer while an audit has not written its cube
NO_CUBE_YET = ("the audit has not written its cube yet; wait until it runs "
               "(GET /v1/audits/{id} shows its status)")

#: cubes kept in memory (the most recently used)
CUBES_KEPT = 16


def clean(v: Any) -> Any:
    """JSON-safe: NaN and infinities become null."""
    if isinstance(v, float) and not math.isfinite(v):
        return None
    return v


def records(df: Any) -> list[dict[str, Any]]:
    """A pandas table (index method, param) as JSON records."""
    t = df.reset_index()
    return [{k: clean(v.item() if hasattr(v, "item") else v) for k, v in row.items()}
            for row in t.to_dict(orient="records")]


def json_answer(obj: Any) -> tuple[bytes, str]:
    """``obj`` as compact JSON bytes and its media type (an answer of the cache)."""
    return (json.dumps(obj, separators=(",", ":"), allow_nan=False).encode(),
            "application/json")


def version() -> str:
    from .. import __version__
    return __version__


class Service:
    """The state a running service shares between its routers.

    Parameters
    ----------
    config : ServiceConfig
    store : Store
        The SQLite state and the folders under ``config.root``.
    runner : JobRunner or None
        Runs the audits (None: submissions only queue).
    csrf : str
        The per-start token a page's simple POSTs carry when there are no tokens.
    """

    def __init__(self, config: ServiceConfig, store: Store, runner: JobRunner | None,
                 csrf: str):
        self.config = config
        self.store = store
        self.runner = runner
        self.csrf = csrf
        self.failures = FailureLimiter()
        self._slow_lock = threading.Lock()
        self.plot_lock = threading.Lock()      # matplotlib's pyplot is not thread-safe
        self.results = ResultCache()
        self._cubes: dict[str, tuple[tuple, Any]] = {}   # audit -> (state key, cube)
        self._cube_locks: dict[str, threading.Lock] = {}
        self._cubes_lock = threading.Lock()
        self._schemas: dict[str, list[dict[str, Any]]] = {}

    # -- who is asking ------------------------------------------------------------------
    def principal(self, request: Request) -> str:
        """The principal of the request's bearer token ("local" without a tokens file);
        401 without a valid token, 429 for a wrong one after too many wrong ones from
        its address (:class:`.security.FailureLimiter`). A valid token always passes."""
        tokens = self.config.tokens
        if tokens is None:
            request.state.principal = "local"
            return "local"
        header = request.headers.get("authorization", "")
        scheme, _, token = header.partition(" ")
        if scheme.lower() != "bearer" or not token.strip():
            raise HTTPException(401, "this service needs a token: send the header "
                                     "'Authorization: Bearer TOKEN'",
                                headers={"WWW-Authenticate": "Bearer"})
        # the token first: a valid one always passes, whatever its address did before
        token = token.strip()
        addr = request.client.host if request.client else "?"
        who = tokens.principal(token, slow=False)
        if who is None and tokens.slow:
            if self.failures.blocked(addr):
                with self._slow_lock:    # a blocked address's guesses: one scrypt at a time
                    who = tokens.principal(token)
            else:
                who = tokens.principal(token)
        if who is None:
            wait = self.failures.fail(addr)
            if wait:
                raise HTTPException(429, "too many wrong tokens from this address; try "
                                         f"again in {math.ceil(wait)} s",
                                    headers={"Retry-After": str(math.ceil(wait))})
            raise HTTPException(401, "the token is not valid for this service",
                                headers={"WWW-Authenticate": "Bearer"})
        request.state.principal = who
        return who

    # -- what they own ------------------------------------------------------------------
    def own_dataset(self, dataset_id: str, who: str) -> dict[str, Any]:
        d = self.store.dataset(dataset_id, who)
        if d is None:
            raise HTTPException(404, f"no dataset {dataset_id!r}")
        return d

    def own_audit(self, audit_id: str, who: str) -> dict[str, Any]:
        a = self.store.audit(audit_id, who)
        if a is None:
            raise HTTPException(404, f"no audit {audit_id!r}")
        return a

    def shown(self, a: dict[str, Any]) -> dict[str, Any]:
        """An audit as the routes show it, with the runner's note on a waiting audit."""
        out = audit_out(a)
        out["note"] = self.runner.note(a) if self.runner is not None else None
        return out

    def dataset_schema(self, dataset_id: str) -> list[dict[str, Any]]:
        """Each column's type and roles (a dataset never changes once stored)."""
        if dataset_id not in self._schemas:
            from ..data import open_microdata
            self._schemas[dataset_id] = column_schema(open_microdata(
                self.store.dataset_path(dataset_id)).attrs)
        return self._schemas[dataset_id]

    # -- cubes and answers --------------------------------------------------------------
    def loaded_cube(self, audit_id: str, who: str, *, squeeze: bool = True) -> Any:
        """The audit's cube in memory, opened (and integrity-checked) once per state of
        the audit: a finished audit's cube is read from disk once, a running one's again
        after each new cell. The :data:`CUBES_KEPT` most recently used cubes are kept."""
        from ..cube import as_cube, open_cube
        a = self.own_audit(audit_id, who)
        path = self.store.cube_path(audit_id)
        if not path.exists():
            raise HTTPException(409, NO_CUBE_YET)
        key = (a["status"], a["cells_done"], a["runs"])
        with self._cubes_lock:
            lock = self._cube_locks.setdefault(audit_id, threading.Lock())
        with lock:
            hit = self._cubes.get(audit_id)
            if hit is None or hit[0] != key:
                # its checks (integrity, metadata), then every array read at once
                cube = open_cube(str(path), squeeze=False).load()
                with self._cubes_lock:
                    self._cubes.pop(audit_id, None)
                    self._cubes[audit_id] = (key, cube)
                    while len(self._cubes) > CUBES_KEPT:
                        self._cubes.pop(next(iter(self._cubes)))
            else:
                cube = hit[1]
        if squeeze and cube.sizes["dataset"] == 1:
            return as_cube(cube.isel(dataset=0))
        return cube

    async def cached(self, audit_id: str, who: str, what: tuple,
                     make: Callable[[], tuple[bytes, str]]) -> Response:
        """A result from the cache of answers, keyed by the audit's state (which changes
        with every cell it writes), else made by ``make() -> (bytes, media type)`` in a
        worker thread. A cached answer costs one indexed read of the state database."""
        a = self.own_audit(audit_id, who)
        key = (audit_id, a["status"], a["cells_done"], a["runs"], *what)
        hit = self.results.get(key)
        if hit is None:
            if not self.store.cube_path(audit_id).exists():
                raise HTTPException(409, NO_CUBE_YET)
            hit = await asyncio.to_thread(self.results.get_or_make, key, make)
        return Response(hit[0], media_type=hit[1])
