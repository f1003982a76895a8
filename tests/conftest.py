"""Shared fixtures: a seeded generator, small data, the reference files, one cluster."""

from __future__ import annotations

import gc
import logging
import os

import dask.config
import numpy as np
import pytest

from sdcdist.data import load_microdata, reference_file
from sdcdist.parallel import WORKER_CONFIG

# every cluster of the tests without the workers' statistical profiler, as sdcdist's own
# (sdcdist.parallel.WORKER_CONFIG: sampling the threads' frames can crash CPython 3.11)
dask.config.set(WORKER_CONFIG)


#: The files run first, then the longest files, longest first (measured: a minute or more
#: each on two cores). ``make test`` runs whole files in two processes (``--dist loadfile``
#: with ``--no-loadscope-reorder``), taking them in this order, so no long file is left to
#: run alone at the end; every other file keeps its place after them.
#: The first two compile most of the package's numba kernels, one in each test process,
#: into numba's on-disk cache; the cluster files after them then load the kernels instead
#: of compiling each of them in several worker processes at once. A fresh clone starts with
#: an empty cache: its suite took 1,030 s (29.1 CPU-minutes) with the cluster files first,
#: 901 s (23.6) with these two first; with the cache filled, 819-839 s (21.1-21.8).
COMPILE_FILES_FIRST = ("test_prl_kernel.py", "test_metrics_contract.py")
LONG_FILES_FIRST = COMPILE_FILES_FIRST + (
    "test_cluster.py", "test_planted_value.py", "test_examples.py", "test_study.py",
    "test_hardening_cluster.py", "test_service.py", "test_prl_count.py",
    "test_service_durable.py", "test_prl.py", "test_dld_dmt.py", "test_audit.py",
    "test_deploy.py", "test_cli_startup.py", "test_risk_models_reports.py",
    "test_service_web.py", "test_linkage.py", "test_service_memory.py",
)


def pytest_collection_modifyitems(config, items):
    rank = {name: i for i, name in enumerate(LONG_FILES_FIRST)}
    items.sort(key=lambda item: rank.get(item.path.name, len(rank)))   # stable


@pytest.fixture
def rng() -> np.random.Generator:
    return np.random.default_rng(20260101)


@pytest.fixture
def small(rng) -> np.ndarray:
    """60 x 4 correlated, skewed data without ties."""
    z = rng.standard_normal((60, 4)) @ np.array([[1, .5, .2, 0], [0, 1, .3, .1],
                                                  [0, 0, 1, .4], [0, 0, 0, 1.]])
    return np.exp(z) * np.array([1000, 50, 10, 1])


@pytest.fixture(scope="session")
def census():
    """The CASC Census reference file (1080 x 13, shipped in the package) as Microdata."""
    return load_microdata(reference_file("census"))


@pytest.fixture(scope="session")
def tarragona():
    return load_microdata(reference_file("tarragona"))


class _UnretrievedFutures(logging.Handler):
    """Records asyncio's "exception was never retrieved" reports, with the running test."""

    def __init__(self):
        super().__init__(logging.ERROR)
        self.seen: list[str] = []

    def emit(self, record: logging.LogRecord) -> None:
        msg = record.getMessage()
        if "never retrieved" in msg:
            # The report comes when the future is collected, which may be during a later
            # test than the one that dropped it; the future's repr and the exception's
            # type say where it came from.
            where = os.environ.get("PYTEST_CURRENT_TEST", "between tests")
            exc = record.exc_info[1] if record.exc_info else None
            if isinstance(exc, TimeoutError) and str(exc) == "Timeout":
                # tornado's gen.with_timeout sets this bare message on its own result
                # future when its deadline passes after the coroutine awaiting it is gone.
                # Only distributed's internals use it here (e.g. its batched-send loop
                # waits on a tornado Event with a deadline): a cluster closed inside such
                # a wait drops the future. Seen about once in ten runs of the cluster and
                # audit tests, which close many clusters. Teardown noise of the library,
                # never a task of ours.
                return
            origin = f" [{type(exc).__module__}.{type(exc).__name__}: {exc}]" if exc else ""
            self.seen.append(f"{where}: {' | '.join(msg.splitlines()[:3])}{origin}")


@pytest.fixture(scope="session", autouse=True)
def no_unretrieved_futures():
    """Fails the session if any event loop (an in-process cluster's, a client's) dropped a
    future whose exception nobody read: a teardown that leaks a failed task. Set up first,
    so it is torn down after every other session fixture (the shared cluster included)."""
    handler = _UnretrievedFutures()
    log = logging.getLogger("asyncio")
    log.addHandler(handler)
    yield handler
    gc.collect()
    log.removeHandler(handler)
    assert not handler.seen, "asyncio futures failed and were never awaited:\n" + "\n".join(
        handler.seen)


@pytest.fixture(scope="session")
def client():
    """One in-process cluster of 2 workers for the whole session."""
    from distributed import Client, LocalCluster
    cluster = LocalCluster(n_workers=2, threads_per_worker=1, processes=False,
                           dashboard_address=":0")
    c = Client(cluster)
    yield c
    c.close()
    cluster.close()


@pytest.fixture
def run():
    """``run(*args)``: the ``sdcdist`` command in this process (click's runner); exceptions
    other than the command's own exits propagate."""
    from click.testing import CliRunner

    from sdcdist.cli import main
    runner = CliRunner()

    def invoke(*args):
        return runner.invoke(main, [str(a) for a in args], catch_exceptions=False)
    return invoke
