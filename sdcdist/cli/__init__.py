"""The ``sdcdist`` command line (click), one module per command group.

=============  ==========================================================
module         commands
=============  ==========================================================
``data``       ``ingest``, ``synth``, ``mask``
``catalog``    ``methods``, ``metrics``
``measure``    ``measure``
``risk``       ``risk``
``link``       ``link``
``audit``      ``audit``, ``calibrate``
``results``    ``report``, ``query``, ``plot``
``release``    ``release``
``describe``   ``describe`` (the data before masking)
``certs``      ``certs``
``verify``     ``verify``
``serve``      ``serve`` (the audit service; FastAPI and uvicorn load in its body)
``_paths``     path/URL arguments, output checks, redaction, safe file names
``_common``    the group, failure handling and exit codes, cluster options and the
               one cluster helper, shared option parsing
=============  ==========================================================

Importing this package loads only click and the standard library; every
command imports numpy, Dask and the rest in its body, so ``sdcdist --help``
starts fast. The CLI is the only place that starts clusters.
"""

from ._common import EXIT_FAILURE, EXIT_USER, main
from ._paths import StrictCommand

main.command_class = StrictCommand     # a single-value option given twice is refused
# each module registers its commands on ``main`` when imported
from . import audit, catalog, certs, data, describe, link, measure, release, results, risk, serve, verify  # noqa: F401, I001, E501

__all__ = ["main", "EXIT_FAILURE", "EXIT_USER"]
