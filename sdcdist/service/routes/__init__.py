"""The routers of the service, one per resource, in the order the application mounts them.

Each module has ``router(svc) -> APIRouter`` over the shared state
(:class:`sdcdist.service.helpers.Service`):

- :mod:`.pages`: the web page ``/``, ``/v1/csrf``, ``/v1/health``;
- :mod:`.catalogue`: ``/v1/methods``, ``/v1/metrics``, ``/v1/presets``;
- :mod:`.datasets`: ``/v1/datasets`` (upload, list, show, delete, what applies to one);
- :mod:`.audits`: ``/v1/audits`` (submit, list, show, resume, cancel, events);
- :mod:`.results`: an audit's cube as records, query, report, plot, summary and zip, the
  release, the comparison of original and release, and the release report.
"""

from __future__ import annotations

from . import audits, catalogue, datasets, pages, results

#: mounted in this order
ROUTERS = (pages, catalogue, datasets, audits, results)

__all__ = ["ROUTERS"]
