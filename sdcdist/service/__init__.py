"""The audit service of ``sdcdist serve``: an HTTP API, its state store, the web page.

===============  ==============================================================
module           what
===============  ==============================================================
``app``          the FastAPI application: routes under ``/v1``, errors, limits
``store``        SQLite (WAL) state under ``--root``: datasets, audits, cells
``jobs``         the queue: audits run by :func:`sdcdist.audit.run_audit` on one client
``auth``         hashed bearer tokens, one principal per line of ``--tokens``
``web``          the page at ``/`` (plain HTML and JavaScript)
``results``      the default risk-utility ranking, metric explanations, the answer cache
``schema``       each uploaded column's type and roles
``apidocs``      ``/docs`` without a CDN; the bearer scheme and error answers in OpenAPI
``accesslog``    one log event per request (plain ASGI middleware)
===============  ==============================================================

Nothing here starts a cluster: ``sdcdist serve`` (:mod:`sdcdist.cli.serve`)
owns the Dask client the jobs run on, as every command does.
"""
