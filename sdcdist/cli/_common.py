"""What every command shares: the group, failure handling, cluster handling, options.

Every command turns a user mistake (:class:`SdcInputError`) into a one-line
message on stderr and exit code 2; a lost scheduler or any other failure
into a one-line message and exit code 1. ``--log-format json`` makes every
log line a JSON object (see :mod:`sdcdist.logs`).

This module and the command modules import only the standard library and
click at import time, so ``sdcdist --help`` starts fast; each command
imports what it needs (numpy, Dask, ...) in its body.
"""

from __future__ import annotations

import contextlib
import functools
import logging
import os
import sys
import warnings
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import click

from ..errors import SdcInputError
from ..text import name_list, raised_where, redact, split_list, unique_slugs
from ._paths import PathOrURL, check_output, check_scheduler, distinct_outputs

__all__ = ["main", "EXIT_FAILURE", "EXIT_USER", "ClusterOptions", "cluster_options",
           "choose_where", "in_process_reason",
           "cluster", "make_security", "split_list", "parse_options", "names_option",
           "parse_method_options", "reader_categorical", "option_items", "json_flag", "echo_json",
           "table_outputs", "table_paths", "check_tables", "write_tables"]


log = logging.getLogger("sdcdist.cli")

#: Exit codes: 0 success, 1 failure (a bug, a lost cluster, storage down), 2 user error.
EXIT_FAILURE, EXIT_USER = 1, 2
#: Exit status after Ctrl-C (128 + SIGINT, as shells report it)
EXIT_INTERRUPTED = 130


# ---------------------------------------------------------------------------
# the group: failures -> one line and an exit code

def _lost_scheduler(exc: BaseException) -> bool:
    """Whether ``exc`` means the connection to the Dask scheduler broke."""
    from distributed.client import FutureCancelledError
    from distributed.comm.core import CommClosedError
    if isinstance(exc, FutureCancelledError):
        return "scheduler" in exc.reason  # scheduler-connection-lost, scheduler-close
    return isinstance(exc, CommClosedError) or (
        isinstance(exc, (TimeoutError, OSError)) and "scheduler" in str(exc).lower())


class SdcGroup(click.Group):
    """A click group that turns every failure into a one-line message and an exit code.

    :class:`SdcInputError` (the user's input) exits 2; a lost scheduler and any
    unexpected error exit 1. Messages never carry record values: an unexpected
    error shows its type and where it was raised (``--debug`` adds the
    traceback).
    """

    def invoke(self, ctx: click.Context) -> Any:
        try:
            return super().invoke(ctx)
        except SdcInputError as exc:
            from ..checksums import CorruptChunkError
            from ..integrity import CorruptStoreError
            damaged = isinstance(exc, (CorruptChunkError, CorruptStoreError))
            _log_failure(ctx, "damaged store" if damaged else "user error", exc)
            click.echo(f"Error: {redact(str(exc))}", err=True)
            # a damaged store exits 1, as `sdcdist verify` does; the user's input 2
            ctx.exit(EXIT_FAILURE if damaged else EXIT_USER)
        except BrokenPipeError:
            # the reader went away (`sdcdist risk ... | head`): stop quietly, as Unix tools do
            _quiet_stdout()
            ctx.exit(0)
        except KeyboardInterrupt:
            # Ctrl-C: one line, not click's "Aborted!" (the workers ignore it:
            # parallel.preload); an audit keeps every cell it wrote
            _log_failure(ctx, "interrupted", KeyboardInterrupt())
            # storage writes cut short leave asyncio tasks and coroutines that are collected
            # at exit ("Task was destroyed but it is pending!" from asyncio's logger,
            # "Exception ignored in: <coroutine ...>" with a traceback, "coroutine '...' was
            # never awaited" as a RuntimeWarning): not news
            logging.getLogger("asyncio").disabled = True
            sys.unraisablehook = lambda unraisable: None
            warnings.filterwarnings("ignore", message=r"coroutine '.*' was never awaited",
                                    category=RuntimeWarning)
            click.echo("Interrupted. An audit keeps the cells it has written: rerun the same "
                       "command to resume.", err=True)
            ctx.exit(EXIT_INTERRUPTED)
        except (click.exceptions.Exit, click.ClickException, click.Abort, SystemExit):
            raise
        except BaseException as exc:  # noqa: BLE001 - the command line's last line of defence
            if (ctx.obj or {}).get("debug"):
                import traceback
                traceback.print_exc()
            if _lost_scheduler(exc):
                _log_failure(ctx, "lost the scheduler", exc)
                click.echo("Error: lost the connection to the Dask scheduler "
                           f"({type(exc).__name__}); the cluster is gone or unreachable. "
                           "Cells already written are kept: rerun the same command against "
                           "a running cluster to resume.", err=True)
            elif _cancelled_reason(exc):
                _log_failure(ctx, "work lost on the cluster", exc)
                click.echo(f"Error: the cluster lost work ({_cancelled_reason(exc)}), e.g. every "
                           "worker holding some data died. Cells already written are kept: "
                           "rerun the same command to resume.", err=True)
            else:
                where = raised_where(exc)
                _log_failure(ctx, "unexpected failure", exc, where=where)
                click.echo(f"Error: unexpected failure ({type(exc).__name__} in {where}). "
                           "Rerun with 'sdcdist --debug ...' for the traceback and report it "
                           "if it persists.", err=True)
            ctx.exit(EXIT_FAILURE)


def _quiet_stdout() -> None:
    """Point stdout at /dev/null so that flushing it at exit cannot fail again."""
    with contextlib.suppress(Exception):
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())


def _cancelled_reason(exc: BaseException) -> str:
    """Dask's reason for cancelling a future (a fixed phrase, never data), else ''."""
    from distributed.client import FutureCancelledError
    return exc.reason if isinstance(exc, FutureCancelledError) else ""


def _log_failure(ctx: click.Context, event: str, exc: BaseException, **fields: Any) -> None:
    """A structured record of a failure for log collectors (JSON logs only: in text mode
    the ``Error:`` line says it all)."""
    if (ctx.obj or {}).get("log_format") == "json":
        log.error(event, extra={"fields": {"kind": type(exc).__name__, **fields}})


@click.group(cls=SdcGroup, context_settings={"help_option_names": ["-h", "--help"],
                                            "max_content_width": 100})
@click.version_option(package_name="sdcdist")
@click.option("--log-format", type=click.Choice(["text", "json"]), default="text",
              envvar="SDCDIST_LOG_FORMAT", show_default=True,
              help="Log lines as text or as one JSON object per line (also "
                   "SDCDIST_LOG_FORMAT). Logs never contain record values.")
@click.option("--log-level", type=click.Choice(["debug", "info", "warning", "error"]),
              default=None, help="Default: info with --log-format json (one line per "
                                  "written cell), warning with text.")
@click.option("--debug", is_flag=True, help="Print the traceback of an unexpected failure.")
@click.pass_context
def main(ctx: click.Context, log_format: str, log_level: str | None, debug: bool) -> None:
    """sdcdist: information loss and disclosure risk of SDC masking methods, on Dask.

    \b
    A typical session:
      sdcdist synth --rows 100000 --out people.zarr     # or: sdcdist ingest file.csv ...
      sdcdist mask people.zarr -m micmul -p 3 --out masked.csv   # one masked file
      sdcdist audit spec.yaml --out cube.zarr            # mask x measure every cell
      sdcdist report cube.zarr --by DLD                  # ranking table
      sdcdist risk original.csv released.csv --keys AGE,INCOME   # one released file
      sdcdist plot cube.zarr --risk DLD --loss IL1s --out tradeoff.png

    `sdcdist methods` and `sdcdist metrics` list what can go in a spec.
    Exit codes: 0 success, 2 a problem with your input, 1 any other failure.
    """
    from ..logs import json_stderr, setup_logging
    level = (log_level or ("info" if log_format == "json" else "warning")).upper()
    ctx.obj = {"debug": debug, "log_format": log_format, "log_level": level}
    if log_format == "json":
        # every stderr line one JSON object: Error: lines, messages, warnings, tracebacks
        json_stderr()
    # Dask is imported by the commands that use it (see _take_over_dask_logs)
    setup_logging(log_format, level, import_dask="distributed" in sys.modules)


def _take_over_dask_logs() -> None:
    """Route Dask's logs through sdcdist's format, now that ``distributed`` is imported
    (importing it installs handlers of its own)."""
    from ..logs import setup_logging
    ctx = click.get_current_context(silent=True)
    obj = (ctx.obj if ctx is not None else None) or {}
    if "log_format" in obj:
        setup_logging(obj["log_format"], obj["log_level"])


# ---------------------------------------------------------------------------
# cluster handling (the CLI starts clusters; library functions never do)

@dataclass(frozen=True)
class ClusterOptions:
    """Where a command computes: the cluster options it was given.

    Attributes
    ----------
    scheduler : str or None
        Address of an existing scheduler; None starts a LocalCluster.
    workers : int or None
        Worker processes of the local cluster (default: one per core).
    security : distributed.Security or None
        Mutual TLS from --tls-ca/--tls-cert/--tls-key (None: Dask's config applies).
    local : bool
        Compute in this process, without any cluster (``--local``).
    """

    scheduler: str | None = None
    workers: int | None = None
    security: Any = None
    local: bool = False


def cluster_options(f: Callable | None = None, *, local: bool = False) -> Any:
    """Decorator: the options choosing where a command computes.

    Adds --scheduler, --workers and the TLS files (and --local with
    ``local=True``); the command receives them as one keyword argument
    ``where`` (a :class:`ClusterOptions`) to hand to :func:`cluster`. A
    half-given TLS set is refused here, before the command reads any data.
    """
    if f is None:
        return functools.partial(cluster_options, local=local)

    @functools.wraps(f)
    def with_cluster(*args: Any, scheduler: str | None = None, workers: int | None = None,
                     tls_ca: str | None = None, tls_cert: str | None = None,
                     tls_key: str | None = None, local: bool = False, **kwargs: Any) -> Any:
        security = make_security(tls_ca, tls_cert, tls_key)
        check_scheduler(scheduler, security)
        opts = ClusterOptions(scheduler=scheduler, workers=workers, security=security,
                              local=local)
        return f(*args, where=opts, **kwargs)

    g: Any = with_cluster
    g = click.option("--tls-key", envvar="SDCDIST_TLS_KEY", default=None, metavar="PEM",
                     type=click.Path(exists=True, dir_okay=False),
                     help="This client's private key (also SDCDIST_TLS_KEY).")(g)
    g = click.option("--tls-cert", envvar="SDCDIST_TLS_CERT", default=None, metavar="PEM",
                     type=click.Path(exists=True, dir_okay=False),
                     help="This client's certificate, signed by the CA (also "
                          "SDCDIST_TLS_CERT).")(g)
    g = click.option("--tls-ca", envvar="SDCDIST_TLS_CA", default=None, metavar="PEM",
                     type=click.Path(exists=True, dir_okay=False),
                     help="CA certificate of the cluster: talk to the scheduler and workers "
                          "over tls:// with mutual authentication (also SDCDIST_TLS_CA; "
                          "without these options Dask's own distributed.comm.tls config "
                          "applies).")(g)
    g = click.option("--workers", type=click.IntRange(1, 512), default=None,
                     help="Worker processes of the local cluster (default: one per core).")(g)
    g = click.option("--scheduler", envvar="DASK_SCHEDULER_ADDRESS", default=None,
                     metavar="ADDRESS",
                     help="Use an existing Dask scheduler (e.g. tcp://host:8786 or "
                          "tls://host:8786) instead of starting a local cluster. Also read "
                          "from DASK_SCHEDULER_ADDRESS.")(g)
    if local:
        g = click.option("--local", is_flag=True,
                         help="Compute in this process, without a Dask cluster "
                              "(small files).")(g)
    return g


#: Below this many record pairs (original x masked) a pairwise metric finishes in this
#: process sooner than a local cluster starts and receives the data (seconds on any size).
IN_PROCESS_PAIRS = 10**8

#: Up to this many records (original + masked) the distance metrics of synthetic releases
#: (DCR, NNDR: a KD-tree over the reference file, n log n work, its queries on every core
#: of this process) finish in this process sooner than on a local cluster of its cores,
#: which starts, receives the files and answers the same queries one thread a task.
IN_PROCESS_INDEX_RECORDS = 4 * 10**6


def in_process_reason(metrics: Any, n_original: int, n_masked: int) -> str | None:
    """Why the work of ``metrics`` on these file sizes fits in this process, or None.

    Counting, one-pass and sorting metrics (frequency risk, losses, utilities) do
    work linear in the records, which takes less time in this process than
    starting a local cluster and shipping the data to it; linkage metrics (and
    linking) compare pairs of records and fit while the pairs are few.
    """
    from ..metrics import expand_requirements, get_metric
    names = expand_requirements(list(metrics))
    pairwise = [n for n in names if get_metric(n).keysets]
    indexed = [n for n in names if get_metric(n).index]
    if not pairwise and not indexed:
        return "the metrics read each record once"
    if n_original * n_masked <= IN_PROCESS_PAIRS:
        return f"{n_original} x {n_masked} record pairs are few"
    if not pairwise and n_original + n_masked <= IN_PROCESS_INDEX_RECORDS:
        return (f"the distance metrics search a KD-tree of {n_original + n_masked} records "
                "on every core here")
    return None


def choose_where(opts: ClusterOptions, reason: str | None) -> ClusterOptions:
    """The default (no --scheduler, --workers or --local): compute in this process when
    ``reason`` says the work fits, and say so on stderr and in the log; else unchanged."""
    if opts.local or opts.scheduler or opts.workers or opts.security is not None \
            or reason is None:
        return opts
    log.info("in-process", extra={"fields": {"reason": reason}})
    if _ctx_obj().get("log_format") != "json":
        click.echo(f"computing in this process ({reason}: faster than starting a local "
                   "cluster); --workers N starts one", err=True)
    return ClusterOptions(local=True)


#: seconds a command waits for a --scheduler to connect and answer
SCHEDULER_TIMEOUT = 20.0


def _scheduler_answers(address: str, security: Any, timeout: float) -> bool:
    """Whether the scheduler at ``address`` completes Dask's handshake within ``timeout``
    + 1 seconds (False: it accepted the connection and never answered).

    ``distributed.Client(address, timeout=...)`` bounds the TCP connect but not the
    handshake that follows, so a listener that accepts and stays silent (another
    service's port, a stopped process) holds it for ever. The handshake is tried here
    first, in its own thread and event loop with a hard bound one second past Dask's own
    connect timeout, so a refused connection or a TLS failure still raises Dask's
    ``OSError`` / ``TimeoutError`` as the Client would.
    """
    import asyncio
    import threading

    from distributed.comm import connect
    args = security.get_connection_args("client") if security is not None else {}
    outcome: list[BaseException | None] = []

    decided = threading.Event()

    async def probe() -> None:
        try:
            comm = await asyncio.wait_for(connect(address, timeout=timeout, **args),
                                          timeout + 1)
        except asyncio.TimeoutError:
            outcome.append(asyncio.TimeoutError())
            decided.set()
            return
        except BaseException as exc:     # handed to the caller's thread
            outcome.append(exc)
            decided.set()
            return
        outcome.append(None)
        decided.set()
        await comm.close()

    def attempt() -> None:
        # the answer is handed over as soon as it is known (``decided``): the clean-up of
        # an abandoned connect (Dask's handshake tasks) may take longer and is left to
        # this daemon thread, so the command fails within its timeout
        with contextlib.suppress(BaseException):
            asyncio.run(probe())
        decided.set()

    thread = threading.Thread(target=attempt, name="sdcdist-scheduler-probe", daemon=True)
    thread.start()
    decided.wait(timeout + 2)
    if not outcome or isinstance(outcome[0], asyncio.TimeoutError):
        return False
    if outcome[0] is not None:
        raise outcome[0]
    return True


@contextlib.contextmanager
def cluster(opts: ClusterOptions, *, quiet: bool = False) -> Iterator[Any]:
    """The Dask client a command computes with: the only place the CLI starts a cluster.

    A Client on ``opts.scheduler``, else on a LocalCluster sized to this machine
    (``opts.workers`` processes); with ``opts.security`` every connection is
    ``tls://`` and mutually authenticated. For ``opts.local`` it yields None:
    library functions take ``client=None`` as "compute in this process", so
    every command reads::

        with cluster(where, quiet=True) as client:
            res = measure(..., client=client)

    ``quiet`` leaves out the dashboard address on stderr.
    """
    if opts.local:
        yield None
        return
    from distributed import Client, LocalCluster
    _take_over_dask_logs()
    scheduler, security = opts.scheduler, opts.security
    if scheduler:
        if security is not None and scheduler.startswith("tcp://"):
            raise SdcInputError(f"--tls-* options were given but the scheduler address "
                                f"{scheduler!r} is tcp://; use tls://{scheduler[6:]}")
        kwargs = {"security": security} if security is not None else {}
        try:
            if not _scheduler_answers(scheduler, security, SCHEDULER_TIMEOUT):
                raise SdcInputError(
                    f"cannot reach the Dask scheduler at {scheduler!r}: it accepted the "
                    f"connection but did not answer within {SCHEDULER_TIMEOUT + 1:g} s (not a "
                    "Dask scheduler, or a stuck one); check the address (the scheduler's host "
                    "and port, 8786 by default), and for a tls:// scheduler the --tls-* "
                    "certificates")
            client = Client(scheduler, timeout=f"{SCHEDULER_TIMEOUT:g}s", **kwargs)
        except (OSError, TimeoutError) as exc:
            raise SdcInputError(f"cannot reach the Dask scheduler at {scheduler!r} "
                                f"({type(exc).__name__}); check the address, and for a "
                                "tls:// scheduler the --tls-* certificates") from None
        local_cluster = None
    else:
        n = opts.workers or max(1, os.cpu_count() or 1)
        _quiet_resource_tracker()
        extra = {"security": security, "protocol": "tls://"} if security is not None else {}
        import dask.config

        from ..parallel import WORKER_CONFIG
        obj = _ctx_obj()
        logcfg = {"sdcdist.log-format": obj.get("log_format", "text"),
                  "sdcdist.log-level": "WARNING",
                  # no statistical profiler in the workers (parallel.WORKER_CONFIG)
                  **WORKER_CONFIG,
                  # the SIMD pins, set before each worker process starts (sdcdist.simd)
                  "distributed.nanny.pre-spawn-environ": {
                      **(dask.config.get("distributed.nanny.pre-spawn-environ") or {}),
                      **worker_env()}}
        with dask.config.set(logcfg):   # handed to the workers: they log in this format
            # the dashboard on loopback only: it has no authentication
            local_cluster = LocalCluster(n_workers=n, threads_per_worker=1, processes=True,
                                         dashboard_address="127.0.0.1:0",
                                         silence_logs=logging.ERROR,
                                         preload=["sdcdist.logs",
                                                  "sdcdist.parallel.preload"], **extra)
        client = Client(local_cluster,
                        **({"security": security} if security is not None else {}))
    json_logs = _ctx_obj().get("log_format") == "json"
    if not quiet and not json_logs:   # JSON mode: the "connected" line carries the link
        click.echo(f"Dask dashboard: {client.dashboard_link}", err=True)
    log.info("connected", extra={"fields": {"scheduler": client.scheduler.address,
                                            "dashboard": client.dashboard_link,
                                            "workers": len(client.scheduler_info().get(
                                                "workers", {}))}})
    try:
        yield client
    finally:
        with contextlib.suppress(Exception):
            client.close(timeout=10)
        if local_cluster is not None:
            local_cluster.close()


def note_skipped(skipped: dict) -> None:
    """A note on stderr for each reason a command left default metrics out
    (:func:`~sdcdist.metrics.inputs.applicable_split`), but for the quiet ones (an input
    nobody gave, a metric computed only when named)."""
    for why, gone in skipped.items():
        if not why.quiet:
            click.echo(why.note(gone), err=True)


def worker_env() -> dict[str, str]:
    """The SIMD pins a worker process gets (:mod:`sdcdist.simd`), as this process has them.

    ``import sdcdist`` put them into this process's environment (merged with the user's
    own); they are handed to each worker explicitly, before it starts, whatever the
    multiprocessing method.
    """
    from ..simd import PIN_ENV
    return {k: os.environ.get(k, v) for k, v in PIN_ENV.items()}


#: The resource tracker of multiprocessing warns at shutdown about semaphores that the
#: worker processes of a LocalCluster leave to it ("leaked semaphore objects to clean up");
#: it cleans them up itself, and its warning, written straight to the inherited stderr,
#: would break JSON-mode stderr. It runs as a process of its own, started with this
#: interpreter's -W options, so the filter goes there.
_TRACKER_FILTER = "ignore::UserWarning:multiprocessing.resource_tracker"


def _quiet_resource_tracker() -> None:
    """Start multiprocessing's resource tracker, if not running, with its warnings off."""
    if _TRACKER_FILTER not in sys.warnoptions:
        sys.warnoptions.append(_TRACKER_FILTER)
    with contextlib.suppress(Exception):
        from multiprocessing import resource_tracker
        resource_tracker.ensure_running()


def _ctx_obj() -> dict[str, Any]:
    """The group's settings (log format and level, debug), or {} outside a command."""
    ctx = click.get_current_context(silent=True)
    return (ctx.obj if ctx is not None else None) or {}


def make_security(tls_ca: str | None, tls_cert: str | None, tls_key: str | None) -> Any:
    """A :class:`distributed.Security` from the three files, or None (Dask config applies)."""
    given = [x is not None for x in (tls_ca, tls_cert, tls_key)]
    if not any(given):
        return None
    if not all(given):
        missing = [n for n, g in zip(("--tls-ca", "--tls-cert", "--tls-key"), given) if not g]
        raise SdcInputError(f"TLS needs all of --tls-ca, --tls-cert and --tls-key; missing "
                            f"{', '.join(missing)} (make a test set with 'sdcdist certs')")
    from distributed import Security
    return Security(tls_ca_file=tls_ca, tls_client_cert=tls_cert, tls_client_key=tls_key,
                    tls_scheduler_cert=tls_cert, tls_scheduler_key=tls_key,
                    tls_worker_cert=tls_cert, tls_worker_key=tls_key,
                    require_encryption=True)


# ---------------------------------------------------------------------------
# option values

def names_option(value: str | Sequence[str] | None, what: str, *, kind: str = "column"
                 ) -> list[str] | None:
    """The names given to list option ``what`` (a repeatable one's values together): None
    when not given; refused when empty (``--categorical ''``) or when a name comes twice
    (``--keys r,r``, ``--metric DLD --metric DLD``). ``kind``: what the names are
    (:func:`sdcdist.text.name_list`, the rule the service shares)."""
    return name_list(value, what, kind=kind)


def reader_categorical(path: str, cats: Sequence[str] | None) -> list[str] | None:
    """The ``--categorical`` columns to hand the reader of ``path``
    (:func:`sdcdist.data.load_microdata`): a CSV or Parquet file's columns to read as
    categories; None for a store, which records its own."""
    from ..data import is_store
    return list(cats) if cats and not is_store(path) else None


def parse_options(items: tuple[str, ...], *, scopes: tuple[str, ...] = ("metric",)
                  ) -> dict[str, Any]:
    """Repeated ``KEY=VALUE`` options (``-o/--option``), each VALUE read as YAML with a
    spec's rules and checked against the option registry; a key given twice is refused.
    Every command reads its options through this one parser."""
    from ..options import read_items, validate
    return validate(read_items(items), scopes=scopes, what="--option")


def parse_method_options(meth: Any, items: tuple[str, ...]) -> dict[str, Any]:
    """``-o/--option KEY=VALUE`` of a masking method (a pipeline: a step's options), read
    by the same parser as every other command's and checked against the registry."""
    from ..options import read_items, validate_method_options
    given = read_items(items)
    if meth.steps:
        from ..masking._registry import check_pipeline_options
        return check_pipeline_options(meth, given)
    return validate_method_options(meth, given)


def option_items(f: Any = None, *, examples: str = "chunk_rows=4096 or crl_external=[V4,V12]",
                 which: str = "the option registry") -> Any:
    """Decorator: ``-o/--option KEY=VALUE`` (repeatable), received as ``option_items``;
    bare (``@option_items``) or with the command's own ``examples`` and the options it
    takes (``which``)."""
    def deco(g: Any) -> Any:
        return click.option("--option", "-o", "option_items", multiple=True,
                            metavar="KEY=VALUE",
                            help=f"A computation option, checked against {which} "
                                 "(`sdcdist metrics` / `sdcdist methods` list them), e.g. "
                                 f"{examples} (repeatable; each key once).")(g)
    return deco if f is None else deco(f)


def json_flag(f: Any) -> Any:
    """Decorator: ``--json``, received as ``as_json``."""
    return click.option("--json", "as_json", is_flag=True,
                        help="Print the result as one JSON object on stdout.")(f)


def echo_json(obj: Any) -> None:
    """``obj`` as indented JSON on stdout (NaN as null)."""
    import json
    import math

    def clean(v: Any) -> Any:
        if isinstance(v, float) and not math.isfinite(v):
            return None
        if isinstance(v, dict):
            return {str(k): clean(x) for k, x in v.items()}
        if isinstance(v, (list, tuple)):
            return [clean(x) for x in v]
        if hasattr(v, "item") and getattr(v, "ndim", 1) == 0:
            return clean(v.item())
        return v
    click.echo(json.dumps(clean(obj), indent=2))


# ---------------------------------------------------------------------------
# table outputs (report, query, calibrate)

#: Help of ``--na-values`` (every command that reads CSV or Parquet files).
NA_VALUES_HELP = ("Cells of CSV/Parquet inputs that mean 'missing' besides empty cells "
                  "(comma-separated, e.g. NA,-99). By default only an empty cell is missing; "
                  "labels are kept verbatim.")


#: The standard help of each role flag (:func:`role_options`), in the order the flags are
#: listed; a command may give its own help for a flag that means more (or less) there.
ROLE_HELP: dict[str, str] = {
    "keys": "Key columns in linkage order; key sets are their prefixes of sizes 1..7, and the "
            "frequency risk metrics count the combinations of the categorical ones (default: "
            "the store's key role, else the columns both files share).",
    "keyset": "One explicit key set (repeatable; replaces the prefixes of --keys).",
    "confidential": "Confidential columns of the attribute-disclosure metrics (l-diversity, "
                    "t-closeness, beta-likeness, delta-disclosure), cap and the inference "
                    "attack (default: the store's confidential role).",
    "household": "Household id column of the household risk metrics (HR_*; default: the "
                 "store's household role); never a linkage key.",
    "categorical": "Integer-coded columns of CSV/Parquet inputs to read as categorical (a "
                   "Zarr store records its own).",
    "weight": "Sampling-weight column for the frequency risk metrics (default: the store's "
              "weight role).",
    "na_values": NA_VALUES_HELP,
}

#: Each role flag's click declaration: (flag names, metavar, extra keywords).
_ROLE_FLAG: dict[str, tuple[tuple[str, ...], str, dict[str, Any]]] = {
    "keys": (("--keys",), "A,B,...", {}),
    "keyset": (("--keyset", "keysets"), "A,B,...", {"multiple": True}),
    "confidential": (("--confidential",), "A,B,...", {}),
    "household": (("--household",), "COLUMN", {}),
    "weight": (("--weight",), "COLUMN", {}),
    "categorical": (("--categorical",), "A,B,...", {}),
    "na_values": (("--na-values", "na_values"), "A,B,...", {}),
}


def role_options(f: Any = None, /, **flags: Any) -> Any:
    """Decorator: the role flags of a command, the one place every command takes them from.

    Bare (``@role_options``): every flag of :data:`ROLE_HELP` (``--keys``, ``--keyset``
    (repeatable), ``--confidential``, ``--household``, ``--weight``, ``--categorical``,
    ``--na-values``), received as ``keys``, ``keysets``, ``confidential``, ``household``,
    ``weight``, ``categorical``, ``na_values`` and turned into one
    :class:`~sdcdist.metrics.Inputs` by :func:`flag_inputs`.

    Called (``@role_options(keys=True, weight="...", keyset=False)``): a flag named True
    takes its standard help, a string its own help, a dict the keywords of
    :func:`click.option` (``{"help": ..., "required": True}``); a flag not named (or
    False) is not taken, unless no flag is named at all.
    """
    if f is None:
        return lambda g: role_options(g, **flags)
    unknown = set(flags) - set(ROLE_HELP)
    if unknown:
        raise ValueError(f"unknown role flag(s) {sorted(unknown)}; one of {list(ROLE_HELP)}")
    chosen = flags or dict.fromkeys(ROLE_HELP, True)
    for name in reversed(list(ROLE_HELP)):
        how = chosen.get(name, False)
        if how is False or how is None:
            continue
        decls, metavar, extra = _ROLE_FLAG[name]
        kw: dict[str, Any] = {"default": None, "metavar": metavar, "help": ROLE_HELP[name],
                              **extra}
        if isinstance(how, str):
            kw["help"] = how
        elif isinstance(how, Mapping):
            kw.update(how)
        if kw.get("multiple") or kw.get("required"):
            kw.pop("default", None)
        f = click.option(*decls, **kw)(f)
    return f


def flag_inputs(columns: Sequence[str], masked_columns: Sequence[str], *,
                categorical: Sequence[str], roles: Sequence[Mapping[str, Any]],
                keys: str | None, keysets: Sequence[str], confidential: str | None,
                household: str | None, weight: str | None,
                key_role: bool = True,
                categories: Sequence[Mapping[str, Sequence[str]]] = ()) -> Any:
    """The :class:`~sdcdist.metrics.Inputs` of a command from its role flags
    (:func:`role_options`), each flag winning over the files' roles (``roles``: the masked
    file's, then the original's), the named columns checked to be in the masked file.
    ``key_role``: the original's key role gives the key columns when no key is named;
    ``categories``: the files' category labels (``{column: labels}``), whose counts are the
    declared levels of the categorical columns."""
    from ..errors import column_positions
    from ..metrics import Inputs
    from ..metrics.inputs import declared_categories

    def role(name: str) -> list:
        return next((list(r.get(name) or []) for r in roles if r.get(name)), [])

    key_list = names_option(keys, "--keys")
    named = [names_option(k, "--keyset") for k in keysets]
    from ..metrics.keysets import check_distinct
    check_distinct(named, what="--keyset: key sets")
    conf = names_option(confidential, "--confidential") or role("confidential")
    if household is not None and not household.strip():
        raise SdcInputError("--household was given without a name; give the household id "
                            "column, or leave --household out")
    household = household or (role("household") or [None])[0]
    weight = weight or (role("weight") or [None])[0]
    for cols, what in ((conf, "confidential column"),
                       ([household] if household is not None else [], "household id column"),
                       ([weight] if weight is not None else [], "weight column")):
        if cols:
            column_positions(cols, masked_columns, what=what, where="the masked file")
    if not named and not key_list and key_role:
        # the store's key role, else every shared column but the weight, the household
        # id and the confidential columns (measure's default)
        key_list = [c for c in (roles[-1].get("key") or []) if c in masked_columns]
    return Inputs(columns=tuple(columns), masked_columns=tuple(masked_columns),
                  categorical=tuple(categorical), weight=weight, confidential=tuple(conf),
                  household=household, keys=tuple(key_list or ()),
                  keysets=named or None, n_categories=declared_categories(categories))


def table_outputs(f: Any) -> Any:
    """Decorator: --csv, --markdown and --html FILE, received as csv_out, markdown_out,
    html_out."""
    for opt, what in (("html", "HTML"), ("markdown", "Markdown"), ("csv", "CSV")):
        f = click.option(f"--{opt}", f"{opt}_out", default=None, metavar="FILE",
                         type=PathOrURL("output"),
                         help=f"Also write the table as {what} (missing folders are "
                              "created; an existing file needs --overwrite).")(f)
    return f


def table_paths(outputs: dict[str, str | None],
                datasets: list[str | None]) -> dict[str | None, dict[str, str]]:
    """The files each dataset's table goes to: with several datasets, the dataset's name,
    made safe for a file name (:func:`~sdcdist.text.slug`), goes into each name."""
    several = len(datasets) > 1
    slugs = unique_slugs([str(d) for d in datasets if d is not None]) if several else {}
    out: dict[str | None, dict[str, str]] = {}
    for d in datasets:
        paths = {}
        for kind, path in outputs.items():
            if not path:
                continue
            if several and d is not None:
                tag = slugs[str(d)]
                stem, dot, ext = path.rpartition(".")
                if dot and os.sep not in ext and "/" not in ext:
                    path = f"{stem}-{tag}.{ext}"
                else:
                    path = f"{path}-{tag}"
            paths[kind] = path
        out[d] = paths
    return out


def check_tables(outputs: dict[str, str | None], datasets: list[str | None], *,
                 overwrite: bool, inputs: Sequence[str | None] = (),
                 others: Sequence[tuple[str, str | None]] = ()
                 ) -> dict[str | None, dict[str, str]]:
    """:func:`table_paths`, each checked as an output before anything is printed
    (``inputs``: what the command reads, which no table may replace); two outputs at one
    path (two tables, or a table and one of the command's ``others`` (option, path)) are
    refused first (:func:`~._paths.distinct_outputs`)."""
    opt = {"csv": "--csv", "md": "--markdown", "html": "--html"}
    planned = table_paths(outputs, datasets)
    distinct_outputs([*others, *((opt.get(kind, "--" + kind), path)
                                 for paths in planned.values() for kind, path in paths.items())])
    for paths in planned.values():
        for kind, path in paths.items():
            check_output(path, what=opt.get(kind, "--" + kind), overwrite=overwrite,
                         inputs=inputs)
    return planned


def write_tables(table: Any, paths: dict[str, str], title: str, *,
                 quiet: bool = False) -> None:
    """Write ``table`` to each of ``paths`` (from :func:`check_tables`)."""
    from ..report import write_table
    for path in paths.values():
        write_table(table, path, title=title)
        if not quiet:
            click.echo(f"table written to {path}", err=True)


def check_same_types(cat_a: list[str], cat_b: list[str], cols_b: Any, original: str,
                     masked: str, cols_a: Any = None) -> None:
    """Refuse a column that is categorical in one file and numeric in the other (names only).

    Only columns both files hold are compared (``cols_a``: the original's columns; a
    column one file lacks is no type clash).
    """
    from pathlib import Path
    shared = set(cols_b) if cols_a is None else set(cols_b) & set(cols_a)
    only_a = [c for c in cat_a if c in shared and c not in cat_b]
    only_b = [c for c in cat_b if c in shared and c not in cat_a]
    for cols, a, b in ((only_a, original, masked), (only_b, masked, original)):
        if cols:
            raise SdcInputError(
                f"column(s) {cols} are categorical (text, or declared) in "
                f"{Path(a).name!r} but numeric in {Path(b).name!r}; a column has one type in "
                "both files: fix the text values, or declare the column categorical for both "
                "(--categorical)")
