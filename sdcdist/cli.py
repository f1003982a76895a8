"""The ``sdcdist`` command line.

Every command turns a user mistake (:class:`SdcInputError`) into a one-line
message on stderr and exit code 2; a lost scheduler or any other failure
into a one-line message and exit code 1. ``--log-format json`` makes every
log line a JSON object (see :mod:`sdcdist.logs`).
"""

from __future__ import annotations

import contextlib
import logging
import os
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import click

from .errors import SdcInputError

__all__ = ["main"]


log = logging.getLogger("sdcdist.cli")

#: Exit codes: 0 success, 1 failure (a bug, a lost cluster, storage down), 2 user error.
EXIT_FAILURE, EXIT_USER = 1, 2


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
            _log_failure(ctx, "user error", exc)
            click.echo(f"Error: {exc}", err=True)
            ctx.exit(EXIT_USER)
        except (click.exceptions.Exit, click.ClickException, click.Abort, SystemExit,
                KeyboardInterrupt):
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
                where = _where(exc)
                _log_failure(ctx, "unexpected failure", exc, where=where)
                click.echo(f"Error: unexpected failure ({type(exc).__name__} in {where}). "
                           "Rerun with 'sdcdist --debug ...' for the traceback and report it "
                           "if it persists.", err=True)
            ctx.exit(EXIT_FAILURE)


def _cancelled_reason(exc: BaseException) -> str:
    """Dask's reason for cancelling a future (a fixed phrase, never data), else ''."""
    from distributed.client import FutureCancelledError
    return exc.reason if isinstance(exc, FutureCancelledError) else ""


def _log_failure(ctx: click.Context, event: str, exc: BaseException, **fields: Any) -> None:
    """A structured record of a failure for log collectors (JSON logs only: in text mode
    the ``Error:`` line says it all)."""
    if (ctx.obj or {}).get("log_format") == "json":
        log.error(event, extra={"fields": {"kind": type(exc).__name__, **fields}})


def _where(exc: BaseException) -> str:
    """``file:line`` where ``exc`` was raised, and the innermost sdcdist frame if elsewhere."""
    import traceback
    frames = traceback.extract_tb(exc.__traceback__)
    if not frames:
        return "?"
    pkg = os.path.dirname(os.path.abspath(__file__))
    ours = [f for f in frames if os.path.abspath(f.filename).startswith(pkg + os.sep)]
    last = frames[-1]
    where = f"{os.path.basename(last.filename)}:{last.lineno}"
    if ours and ours[-1] is not last:
        where += f", called from {os.path.relpath(ours[-1].filename, os.path.dirname(pkg))}" \
                 f":{ours[-1].lineno}"
    return where


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
      sdcdist mask people.zarr -m micmul -p 3 -o masked.csv   # one masked file
      sdcdist audit spec.yaml --out cube.zarr            # mask x measure every cell
      sdcdist report cube.zarr --by DLD                  # ranking table
      sdcdist risk original.csv released.csv --keys AGE,INCOME   # one released file
      sdcdist plot cube.zarr --risk DLD --loss IL1s -o tradeoff.png

    `sdcdist methods` and `sdcdist metrics` list what can go in a spec.
    Exit codes: 0 success, 2 a problem with your input, 1 any other failure.
    """
    from .logs import setup_logging
    ctx.obj = {"debug": debug, "log_format": log_format}
    setup_logging(log_format, (log_level or ("info" if log_format == "json" else "warning"))
                  .upper())


# ---------------------------------------------------------------------------
# cluster handling (the CLI starts clusters; library functions never do)

def scheduler_option(f: Any) -> Any:
    """Options choosing the cluster: --scheduler, --workers and the TLS files.

    The decorated command receives ``scheduler``, ``workers`` and ``security``
    (a :class:`distributed.Security` or None) to hand to :func:`cluster_client`.
    """
    import functools

    @functools.wraps(f)
    def with_security(*args: Any, tls_ca: str | None = None, tls_cert: str | None = None,
                      tls_key: str | None = None, **kwargs: Any) -> Any:
        return f(*args, security=make_security(tls_ca, tls_cert, tls_key), **kwargs)
    return _cluster_options(with_security)


def _cluster_options(f: Any) -> Any:
    f = click.option("--tls-key", envvar="SDCDIST_TLS_KEY", default=None, metavar="PEM",
                     type=click.Path(exists=True, dir_okay=False),
                     help="This client's private key (also SDCDIST_TLS_KEY).")(f)
    f = click.option("--tls-cert", envvar="SDCDIST_TLS_CERT", default=None, metavar="PEM",
                     type=click.Path(exists=True, dir_okay=False),
                     help="This client's certificate, signed by the CA (also "
                          "SDCDIST_TLS_CERT).")(f)
    f = click.option("--tls-ca", envvar="SDCDIST_TLS_CA", default=None, metavar="PEM",
                     type=click.Path(exists=True, dir_okay=False),
                     help="CA certificate of the cluster: talk to the scheduler and workers "
                          "over tls:// with mutual authentication (also SDCDIST_TLS_CA; "
                          "without these options Dask's own distributed.comm.tls config "
                          "applies).")(f)
    f = click.option("--workers", type=click.IntRange(1, 512), default=None,
                     help="Worker processes of the local cluster (default: one per core).")(f)
    f = click.option("--scheduler", envvar="DASK_SCHEDULER_ADDRESS", default=None,
                     metavar="ADDRESS",
                     help="Use an existing Dask scheduler (e.g. tcp://host:8786 or "
                          "tls://host:8786) instead of starting a local cluster. Also read "
                          "from DASK_SCHEDULER_ADDRESS.")(f)
    return f


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


@contextlib.contextmanager
def cluster_client(scheduler: str | None, workers: int | None, quiet: bool = False,
                   security: Any = None) -> Iterator[Any]:
    """A Client on ``scheduler``, or on a LocalCluster sized to this machine.

    With ``security`` every connection is ``tls://`` and mutually authenticated.
    """
    from distributed import Client, LocalCluster
    if scheduler:
        if security is not None and scheduler.startswith("tcp://"):
            raise SdcInputError(f"--tls-* options were given but the scheduler address "
                                f"{scheduler!r} is tcp://; use tls://{scheduler[6:]}")
        kwargs = {"security": security} if security is not None else {}
        try:
            client = Client(scheduler, timeout="20s", **kwargs)
        except (OSError, TimeoutError) as exc:
            raise SdcInputError(f"cannot reach the Dask scheduler at {scheduler!r} "
                                f"({type(exc).__name__}); check the address, and for a "
                                "tls:// scheduler the --tls-* certificates") from None
        cluster = None
    else:
        n = workers or max(1, os.cpu_count() or 1)
        extra = {"security": security, "protocol": "tls://"} if security is not None else {}
        cluster = LocalCluster(n_workers=n, threads_per_worker=1, processes=True,
                               dashboard_address=":0", silence_logs=logging.ERROR, **extra)
        client = Client(cluster, **({"security": security} if security is not None else {}))
    if not quiet:
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
        if cluster is not None:
            cluster.close()


# ---------------------------------------------------------------------------
# data

@main.command()
@click.argument("source", type=click.Path(dir_okay=False))
@click.argument("store")
@click.option("--columns", default=None, metavar="A,B,...",
              help="Keep only these columns (comma-separated), e.g. to leave out text columns.")
@click.option("--keys", default=None, metavar="A,B,...",
              help="Columns an intruder may know (key role), in linkage order.")
@click.option("--confidential", default=None, metavar="A,B,...",
              help="Confidential columns (role used by the IPSO methods).")
@click.option("--chunk-rows", type=click.IntRange(1), default=65_536, show_default=True,
              help="Records per Zarr chunk.")
@click.option("--overwrite", is_flag=True, help="Replace an existing store.")
def ingest(source: str, store: str, columns: str | None, keys: str | None,
           confidential: str | None, chunk_rows: int, overwrite: bool) -> None:
    """Validate a CSV or Parquet file and store it as Zarr.

    Non-numeric columns, missing or infinite values, constant columns, fewer
    than 3 records and duplicate names are refused with a message saying which
    column and how to fix it. The source is never modified, an existing store
    is never replaced without --overwrite, and a failed ingest leaves nothing.
    """
    from .data import ingest as do_ingest, open_microdata
    roles = {}
    if keys:
        roles["key"] = _split(keys)
    if confidential:
        roles["confidential"] = _split(confidential)
    do_ingest(source, store, chunk_rows=chunk_rows, overwrite=overwrite, roles=roles,
              columns=_split(columns) if columns else None)
    da = open_microdata(store)
    click.echo(f"{store}: {da.shape[0]} records x {da.shape[1]} variables "
               f"(sha256 {da.attrs['sha256'][:12]}...)")


def _split(s: str) -> list[str]:
    return [c.strip() for c in s.split(",") if c.strip()]


@main.command()
@click.option("--rows", type=click.IntRange(3), required=True, help="Number of records.")
@click.option("--columns", type=click.IntRange(1, 13), default=8, show_default=True,
              help="Number of variables (income and tax items, age, hours).")
@click.option("--seed", type=click.IntRange(0), default=0, show_default=True)
@click.option("--out", required=True, help="Zarr store to write (or .csv / .parquet).")
@click.option("--chunk-rows", type=click.IntRange(1), default=65_536, show_default=True)
@click.option("--overwrite", is_flag=True, help="Replace an existing output.")
def synth(rows: int, columns: int, seed: int, out: str, chunk_rows: int,
          overwrite: bool) -> None:
    """Write a synthetic income/tax-like file: skewed, correlated, zeros, outliers.

    Zarr output is written chunk by chunk, so memory stays at about one chunk
    whatever --rows is.
    """
    from .data import synth as s, write_microdata
    if out.lower().endswith((".csv", ".parquet", ".pq")):
        write_microdata(s.generate(rows, columns=columns, seed=seed), out, overwrite=overwrite)
    else:
        s.write_synthetic(out, rows, columns=columns, seed=seed, chunk_rows=chunk_rows,
                          overwrite=overwrite, progress=sys.stderr.isatty())
    click.echo(f"{out}: {rows} records x {columns} variables (seed {seed})")


@main.command()
@click.argument("data")
@click.option("-m", "--method", required=True,
              help="Masking method (see `sdcdist methods`), e.g. micmul.")
@click.option("-p", "--param", type=float, default=None,
              help="The method's parameter (e.g. k for micmul); omit for methods without one.")
@click.option("--seed", type=click.IntRange(0), default=0, show_default=True,
              help="Seed of the random generator (same seed, same output).")
@click.option("-o", "--out", required=True,
              help="Masked file to write: .csv, .parquet, else a Zarr store.")
@click.option("--keys", default=None, metavar="A,B,...",
              help="IPSO: the quasi-identifier columns (key role) to replace; default: the "
                   "dataset's key role.")
@click.option("--confidential", default=None, metavar="A,B,...",
              help="IPSO: the confidential columns (regressors); default: the dataset's "
                   "confidential role.")
@click.option("--overwrite", is_flag=True, help="Replace an existing output.")
def mask(data: str, method: str, param: float | None, seed: int, out: str, keys: str | None,
         confidential: str | None, overwrite: bool) -> None:
    """Mask DATA (a Zarr store, CSV or Parquet file) with one method and write the result.

    \b
    Examples:
      sdcdist mask people.zarr --method micmul --param 3 -o masked.parquet
      sdcdist mask people.csv --method ipso_c --confidential WAGES,TAXINC \\
          --keys FEDTAX,FICA -o synthetic.csv

    The random generator is numpy's default_rng(--seed). Column names and roles
    are kept; a Zarr output also records the method, parameter and seed.
    """
    import numpy as np

    from .data import Microdata, load_microdata, write_microdata
    from .masking import get_method
    meth = get_method(method)
    if param is None:
        if meth.kind != "none":
            raise SdcInputError(f"{meth.name} needs --param: its {meth.param!r} parameter "
                                f"must be {meth.allowed_text()}")
        param = 0.0
    elif meth.kind == "int" and float(param).is_integer():
        param = int(param)
    md = load_microdata(data)
    roles = {r: list(c) for r, c in md.roles.items()}
    if keys:
        roles["key"] = _split(keys)
    if confidential:
        roles["confidential"] = _split(confidential)
    for cols in roles.values():
        md.column_index(cols, what="role column")
    options: dict[str, Any] = {}
    if "roles" in meth.options:
        missing = [flag for flag, r in (("--confidential", "confidential"), ("--keys", "key"))
                   if not roles.get(r)]
        if missing:
            raise SdcInputError(f"{meth.name} needs the roles of the columns: pass "
                                f"{' and '.join(missing)} (comma-separated column names), or "
                                f"ingest the data with those roles")
        options["roles"] = {r: roles[r] for r in ("confidential", "key") if roles.get(r)}
        options["columns"] = list(md.columns)
    info: dict[str, Any] = {}
    if "info" in meth.options:
        options["info"] = info
    masked = meth(md.values, param, rng=np.random.default_rng(seed), **options)
    attrs = {"masking": {"method": meth.name, "param_name": meth.param, "param": param,
                         "seed": seed, "source_sha256": md.sha256}}
    if "family" in info:
        attrs["masking"]["family"] = dict(zip(md.columns, info["family"]))
    write_microdata(Microdata(masked, md.columns, roles), out, overwrite=overwrite,
                    attrs=attrs)
    shown = "" if meth.kind == "none" else f" {meth.param}={param:g}"
    click.echo(f"{out}: {md.shape[0]} records x {md.shape[1]} variables masked with "
               f"{meth.name}{shown} (seed {seed})")
    if "family" in info:
        click.echo("fitted families: " + ", ".join(
            f"{c}={f}" for c, f in zip(md.columns, info["family"])))


# ---------------------------------------------------------------------------
# registries

@main.command()
@click.option("--markdown", is_flag=True, help="Print a Markdown table (for the docs).")
def methods(markdown: bool) -> None:
    """List the masking methods with their parameter and valid range."""
    from .masking import REGISTRY
    if markdown:
        from .docs import methods_table
        click.echo(methods_table())
        return
    for name, m in REGISTRY.items():
        rng = "-" if m.kind == "none" else f"{m.param}: {m.allowed_text()}"
        click.echo(f"{name:16s} {rng:42s} {m.description}")


@main.command()
@click.option("--markdown", is_flag=True, help="Print a Markdown table (for the docs).")
def metrics(markdown: bool) -> None:
    """List the metrics: kind, whether computed per key set, description."""
    from .metrics import REGISTRY
    if markdown:
        from .docs import metrics_table
        click.echo(metrics_table())
        return
    for name, m in REGISTRY.items():
        ks = "per key set" if m.keysets else ""
        click.echo(f"{name:12s} {m.kind:8s} {ks:12s} {m.description}")


# ---------------------------------------------------------------------------
# disclosure risk of one released file

def _parse_options(items: tuple[str, ...]) -> dict[str, Any]:
    import yaml
    out: dict[str, Any] = {}
    for item in items:
        key, sep, value = item.partition("=")
        if not sep or not key.strip():
            raise SdcInputError(f"--option takes KEY=VALUE (e.g. crl_external=[V4,V12]); "
                                f"got {item!r}")
        out[key.strip()] = yaml.safe_load(value)
    return out


def _load_with_id(path: str, id_column: str | None, what: str) -> tuple[Any, Any]:
    from .data import Microdata, load_microdata
    md = load_microdata(path, allow_constant=True)
    if id_column is None:
        return md, None
    if id_column not in md.columns:
        raise SdcInputError(f"the identifier column {id_column!r} is not in the {what} file. "
                            f"Valid columns: {', '.join(md.columns)}.")
    j = md.columns.index(id_column)
    keep = [i for i in range(len(md.columns)) if i != j]
    return (Microdata(md.values[:, keep], tuple(md.columns[i] for i in keep), md.roles,
                      md.sha256), md.values[:, j])


@main.command()
@click.argument("original", type=click.Path(exists=True))
@click.argument("masked", type=click.Path(exists=True))
@click.option("--metric", "-m", "metric_names", multiple=True, metavar="NAME[,NAME...]",
              help="Risk metrics to compute (repeatable; default: every risk metric).")
@click.option("--keys", default=None, metavar="A,B,...",
              help="Key columns in linkage order; key sets are their prefixes of sizes "
                   "1..7 (default: the columns both files share).")
@click.option("--keyset", "keysets", multiple=True, metavar="A,B,...",
              help="One explicit key set (repeatable; replaces the prefixes of --keys).")
@click.option("--id", "id_column", default=None, metavar="COLUMN",
              help="Identifier column present in both files: the truth of which released "
                   "record is which person. Without it, row order is the truth.")
@click.option("--option", "-o", "option_items", multiple=True, metavar="KEY=VALUE",
              help="Metric option, e.g. gdbrl_dense_max=2000 or "
                   "crl_external=[V4,V12] crl_released=[V7,V13] (repeatable).")
@click.option("--seed", type=click.IntRange(0), default=0, show_default=True,
              help="Seeds the random tie-breaking of CRL.")
@click.option("--local", is_flag=True,
              help="Compute in this process, without a Dask cluster (small files).")
@scheduler_option
def risk(original: str, masked: str, metric_names: tuple[str, ...], keys: str | None,
         keysets: tuple[str, ...], id_column: str | None, option_items: tuple[str, ...],
         seed: int, local: bool, scheduler: str | None, workers: int | None,
         security: Any) -> None:
    """Disclosure risk of MASKED (the released file) against ORIGINAL (the intruder's file).

    The two files may differ in size and in which records and columns they
    hold; linkage uses the key columns both have. Prints one line per metric
    (mean over key sets) and the value for each key set.
    """
    from .metrics import REGISTRY, default_keysets, get_metric, measure
    names = [n for item in metric_names for n in _split(item)] or \
        [n for n, m in REGISTRY.items() if m.kind == "risk"]
    for n in names:
        if get_metric(n).kind != "risk":
            risky = ", ".join(k for k, m in REGISTRY.items() if m.kind == "risk")
            raise SdcInputError(f"{n!r} is a {get_metric(n).kind} metric; `sdcdist risk` "
                                f"computes risk metrics: {risky}")
    a, id_a = _load_with_id(original, id_column, "original")
    b, id_b = _load_with_id(masked, id_column, "masked")
    if not metric_names and a.shape != b.shape:
        skip = [n for n in names if get_metric(n).same_shape]
        names = [n for n in names if n not in skip]
        click.echo(f"files differ in shape: skipping {', '.join(skip)} (they compare the "
                   "files record by record)", err=True)
    truth = None
    if id_column is not None:
        from .linkage import truth_from_ids
        truth = truth_from_ids(id_a, id_b)
    if keysets:
        ks = [_split(k) for k in keysets]
    elif keys:
        ks = default_keysets(_split(keys))
    else:
        ks = None
    opts = _parse_options(option_items)
    common = dict(columns=a.columns, masked_columns=b.columns, keysets=ks, seed=seed,
                  options=opts, truth=truth)
    if local:
        res = measure(a.values, b.values, names, **common)
    else:
        with cluster_client(scheduler, workers, quiet=True, security=security) as client:
            res = measure(a.values, b.values, names, client=client, **common)
    click.echo(f"original {a.shape[0]} x {a.shape[1]}, masked {b.shape[0]} x {b.shape[1]}, "
               f"truth: {'column ' + repr(id_column) if id_column else 'row order'}")
    for n in names:
        r = res[n]
        extra = " (approximate: sparse candidates)" if r.flag else ""
        click.echo(f"{n:8s} {r.value:12.6g}{extra}")
        if r.per_keyset and len(r.per_keyset) > 1:
            labels = ks or default_keysets([c for c in a.columns if c in b.columns])
            for v, k in zip(r.per_keyset, labels):
                click.echo(f"  {','.join(k):30s} {v:12.6g}")


# ---------------------------------------------------------------------------
# one pair of files

def _open_input(path: str, what: str) -> tuple[Any, tuple[str, ...]]:
    """A Zarr store as a lazily read array (tasks read their own rows), else loaded."""
    from pathlib import Path

    from .data import StoredArray, is_store, load_microdata, open_microdata
    if is_store(path):
        return StoredArray(path), tuple(str(c) for c in open_microdata(path).attrs["columns"])
    if not Path(path).exists():
        raise SdcInputError(f"the {what} file {path!r} does not exist; give a CSV, Parquet "
                            f"file or an sdcdist Zarr store")
    md = load_microdata(path, allow_constant=True)
    return md.values, md.columns


@main.command("measure")
@click.argument("original")
@click.argument("masked")
@click.option("--metric", "-m", "metric_names", multiple=True, metavar="NAME[,NAME...]",
              help="Metric(s) to compute (repeat or comma-separate). Default: every "
                   "information-loss and utility metric. `sdcdist metrics` lists them.")
@click.option("--keyset", multiple=True, metavar="A,B,...",
              help="A key set for linkage-risk metrics (repeatable; default: prefixes of "
                   "the columns of sizes 1..7).")
@click.option("--seed", type=click.IntRange(0), default=0, show_default=True,
              help="Seed of the random tie-breaking and k-means starts.")
@click.option("--chunk-rows", type=click.IntRange(1), default=None,
              help="Records per reduction chunk (default 65536).")
@click.option("--json", "as_json", is_flag=True, help="Print JSON instead of a table.")
@click.option("--local", is_flag=True,
              help="Compute in this process, without a Dask cluster (small files).")
@scheduler_option
def measure_cmd(original: str, masked: str, metric_names: tuple[str, ...],
                keyset: tuple[str, ...], seed: int, chunk_rows: int | None, as_json: bool,
                local: bool, scheduler: str | None, workers: int | None,
                security: Any) -> None:
    """Measure information loss, utility (and risk) of MASKED against ORIGINAL.

    Both files must have the same records in the same order and the same
    columns. Files are CSV, Parquet or sdcdist Zarr stores (read chunk by
    chunk by the workers). Prints one line per metric with the number of
    terms left out of a mean variation (zero denominators) and a flag for
    approximations; --json prints the same as a JSON object.
    """
    import json

    from .metrics import REGISTRY, get_metric, measure
    names = [n for arg in metric_names for n in _split(arg)] or \
        [n for n, m in REGISTRY.items() if m.kind in ("loss", "utility")]
    for n in names:
        get_metric(n)
    A, cols_a = _open_input(original, "original")
    B, cols_b = _open_input(masked, "masked")
    if cols_a != cols_b:
        raise SdcInputError(f"the masked file's columns {list(cols_b)} differ from the original "
                            f"file's {list(cols_a)}; both files need the same columns in the "
                            f"same order")
    options = {"chunk_rows": chunk_rows} if chunk_rows else {}
    keysets = [_split(k) for k in keyset] or None
    kw = dict(columns=list(cols_a), keysets=keysets, seed=seed, options=options)
    if local:
        res = measure(A, B, names, **kw)
    else:
        with cluster_client(scheduler, workers, quiet=True, security=security) as client:
            res = measure(A, B, names, client=client, **kw)
    if as_json:
        out = {n: {"value": None if r.value != r.value else r.value, "kind": REGISTRY[n].kind,
                   "excluded": r.excluded, "flag": r.flag,
                   **({"per_keyset": list(r.per_keyset)} if r.per_keyset else {})}
               for n, r in res.items()}
        click.echo(json.dumps(out, indent=2))
        return
    click.echo(f"{'metric':10s} {'kind':8s} {'value':>14s} {'excluded':>9s} {'flag':>5s}")
    for n, r in res.items():
        click.echo(f"{n:10s} {REGISTRY[n].kind:8s} {r.value:14.6g} {r.excluded:9d} {r.flag:5d}")


# ---------------------------------------------------------------------------
# audits

@main.command()
@click.argument("spec", type=click.Path(exists=True, dir_okay=False))
@click.option("--out", required=True,
              help="Zarr cube to write: a path or an fsspec URL (s3://, gs://, file://).")
@click.option("--overwrite", is_flag=True,
              help="Discard an existing cube instead of resuming it.")
@click.option("--progress/--no-progress", default=None,
              help="Progress bar (default: when stderr is a terminal).")
@scheduler_option
def audit(spec: str, out: str, overwrite: bool, progress: bool | None, scheduler: str | None,
          workers: int | None, security: Any) -> None:
    """Run an audit spec: mask every (method, param, replicate) cell, measure it.

    Cells are written to the cube as they finish. Running the same spec again
    computes only the missing cells; a different spec against an existing cube
    is refused (use another --out or --overwrite). If the cluster is lost the
    command exits 1 and a rerun against a new cluster resumes.
    """
    import time

    from .audit import load_spec, run_audit
    from .logs import event
    from .storage import check_url
    s = load_spec(spec)
    check_url(out, what="--out")
    show = sys.stderr.isatty() if progress is None else progress
    alog = logging.getLogger("sdcdist.audit")
    event(alog, "audit started", spec=s.name, spec_sha256=s.sha256[:12], cube=out,
          methods=len(s.methods), metrics=len(s.metrics), replicates=s.replicates)
    last = [time.perf_counter()]

    def on_cell(cell: Any) -> None:
        now = time.perf_counter()
        event(alog, "cell written", method=cell.method, param=cell.param,
              replicate=cell.replicate, seconds=round(now - last[0], 3))
        last[0] = now

    with cluster_client(scheduler, workers, security=security) as client:
        res = run_audit(s, out, client=client, overwrite=overwrite, progress=show,
                        on_cell=on_cell)
    event(alog, "audit finished", cube=res.cube, computed=res.computed, skipped=res.skipped,
          total=res.total, seconds=round(res.seconds, 2), mode=res.mode)
    click.echo(f"{res.cube}: computed {res.computed} of {res.total} cells "
               f"({res.skipped} already in the cube) in {res.seconds:.1f} s "
               f"[{res.mode} cells]")


def _write_tables(table: Any, outputs: dict[str, str | None], title: str,
                  dataset: str | None, several: bool) -> None:
    from .report import write_table
    for path in outputs.values():
        if not path:
            continue
        if several and dataset:
            stem, dot, ext = path.rpartition(".")
            path = f"{stem}-{dataset}.{ext}" if dot else f"{path}-{dataset}"
        write_table(table, path, title=title)
        click.echo(f"table written to {path}", err=True)


def _datasets(cube: Any, dataset: str | None) -> list[str | None]:
    from .cube import dataset_names, select_dataset
    if dataset is not None:
        select_dataset(cube, dataset)      # checks the name
        return [dataset]
    names = dataset_names(cube)
    return [None] if len(names) == 1 or "dataset" not in cube.dims else list(names)


def table_outputs(f: Any) -> Any:
    for opt, what in (("html", "HTML"), ("markdown", "Markdown"), ("csv", "CSV")):
        f = click.option(f"--{opt}", f"{opt}_out", default=None, metavar="FILE",
                         help=f"Also write the table as {what}.")(f)
    return f


@main.command()
@click.option("--out", "out_dir", required=True, type=click.Path(file_okay=False),
              help="Directory for ca.crt and <role>.crt / <role>.key.")
@click.option("--host", "hosts", multiple=True, metavar="NAME",
              help="DNS name or IP for the certificates' SubjectAltName (repeatable; "
                   "default localhost and 127.0.0.1).")
@click.option("--days", type=click.IntRange(1), default=30, show_default=True)
@click.option("--overwrite", is_flag=True, help="Replace existing files.")
def certs(out_dir: str, hosts: tuple[str, ...], days: int, overwrite: bool) -> None:
    """Create a CA and scheduler/worker/client certificates for a test cluster.

    \b
    Then, e.g.:
      dask scheduler --protocol tls --tls-ca-file DIR/ca.crt \\
          --tls-cert DIR/scheduler.crt --tls-key DIR/scheduler.key
      dask worker tls://HOST:8786 --tls-ca-file DIR/ca.crt \\
          --tls-cert DIR/worker.crt --tls-key DIR/worker.key
      sdcdist audit spec.yaml --out cube.zarr --scheduler tls://HOST:8786 \\
          --tls-ca DIR/ca.crt --tls-cert DIR/client.crt --tls-key DIR/client.key

    The CA's private key is not kept. For production use your own CA.
    """
    from .certs import make_certs
    paths = make_certs(out_dir, hosts=hosts or ("localhost", "127.0.0.1"), days=days,
                       overwrite=overwrite)
    for name, p in paths.items():
        click.echo(f"{name:16s} {p}")


@main.command()
@click.argument("cube")
@click.option("--by", required=True, help="Metric to sort by, e.g. Score (rank 1 first).")
@click.option("--metrics", "metric_list", default=None, metavar="A,B,...",
              help="Metrics to show (default: the parts of the score --by, else all).")
@click.option("--top", type=click.IntRange(1), default=None, help="Show only the best N cells.")
@click.option("--dataset", default=None,
              help="Dataset of a multi-dataset cube (default: one table per dataset).")
@table_outputs
def report(cube: str, by: str, metric_list: str | None, top: int | None, dataset: str | None,
           csv_out: str | None, markdown_out: str | None, html_out: str | None) -> None:
    """Print a ranking table like Table 2 of Domingo-Ferrer, Mateo-Sanz and Torra.

    Each cell's metrics (mean over replicates) and their ranks across all
    (method, param) cells; rank 1 is the lowest loss or the lowest risk; ties
    share the average rank; cells without a value get no rank.
    """
    from .cube import open_cube
    from .report import format_table, ranking_table
    c = open_cube(cube)
    names = _datasets(c, dataset)
    for d in names:
        table = ranking_table(c, by=by, metrics=_split(metric_list) if metric_list else None,
                              dataset=d)
        if top:
            table = table.head(top)
        if len(names) > 1:
            click.echo(f"\n== dataset {d}")
        click.echo(format_table(table))
        _write_tables(table, {"csv": csv_out, "md": markdown_out, "html": html_out},
                      f"{Path(cube).name}: cells ranked by {by}" + (f" ({d})" if d else ""),
                      d, len(names) > 1)


@main.command()
@click.argument("cube")
@click.option("--where", "where_", default=None, metavar="FILTER",
              help='Keep cells matching FILTER, e.g. "DLD < 5 and (IL < 20 or ID1 <= 40)": '
                   "comparisons of metric names with numbers joined by and/or.")
@click.option("--sort", default=None, metavar="METRIC", help="Sort by this metric, best first.")
@click.option("--top", type=click.IntRange(1), default=None, help="Show only the first N.")
@click.option("--metrics", "metric_list", default=None, metavar="A,B,...",
              help="Metrics to show (default: all).")
@click.option("--dataset", default=None,
              help="Dataset of a multi-dataset cube (default: each in turn).")
@table_outputs
def query(cube: str, where_: str | None, sort: str | None, top: int | None,
          metric_list: str | None, dataset: str | None, csv_out: str | None,
          markdown_out: str | None, html_out: str | None) -> None:
    """Select cells of a cube by their metrics (means over replicates).

    The filter language is deliberately small: METRIC OP NUMBER (OP one of
    < <= > >= == !=), joined by and/or, with optional parentheses; anything
    else is refused.
    """
    from .cube import check_metrics, open_cube
    from .query import query as run_query
    from .report import format_table
    c = open_cube(cube)
    shown = _split(metric_list) if metric_list else [str(m) for m in c["metric"].values]
    check_metrics(c, shown)
    names = _datasets(c, dataset)
    for d in names:
        t = run_query(c, where_=where_, sort=sort, top=top, dataset=d)
        t = t[["param_name", *shown]]
        if len(names) > 1:
            click.echo(f"\n== dataset {d}")
        click.echo(format_table(t) if len(t) else "no cell matches")
        _write_tables(t, {"csv": csv_out, "md": markdown_out, "html": html_out},
                      f"{Path(cube).name}: query", d, len(names) > 1)


@main.command()
@click.argument("spec", type=click.Path(exists=True, dir_okay=False))
@click.option("--risk", "risk", default=None, metavar="METRIC",
              help="Compare at equal risk: the risk metric to calibrate (e.g. RR, DLD).")
@click.option("--utility", "utility", default=None, metavar="METRIC",
              help="Compare at equal utility: the utility/loss metric to calibrate (e.g. PS).")
@click.option("--target", type=float, required=True, help="The level to reach (mean over "
              "replicates).")
@click.option("--tol", type=float, default=None,
              help="Absolute tolerance on the mean (default 1 %% of |target|).")
@click.option("--max-iter", type=click.IntRange(1, 200), default=20, show_default=True,
              help="Bisection rounds at most.")
@click.option("--out", default=None, help="Zarr store for the calibration cube.")
@click.option("--overwrite", is_flag=True, help="Replace an existing --out.")
@table_outputs
@scheduler_option
def calibrate(spec: str, risk: str | None, utility: str | None, target: float,
              tol: float | None, max_iter: int, out: str | None, overwrite: bool,
              csv_out: str | None, markdown_out: str | None, html_out: str | None,
              scheduler: str | None, workers: int | None, security: Any) -> None:
    """Compare methods at equal risk (or equal utility), as Domingo-Ferrer, Ricci and Soria.

    For each method of SPEC, its `params` are a coarse grid: the target is
    bracketed there, then found by bisection (continuous parameters, each probe
    averaged over the spec's replicates) or as the nearest feasible value
    (integer parameters). The spec's metrics are measured at the calibrated
    parameters and the methods ranked by them. A method that never reaches the
    target is reported as unreachable with the range it reaches.
    """
    from .audit import load_spec
    from .audit.calibrate import STATUS, calibrate as run_calibrate, check_request
    from .report import format_table
    if (risk is None) == (utility is None):
        raise SdcInputError("give exactly one of --risk METRIC or --utility METRIC")
    s = load_spec(spec)
    mode, metric = ("risk", risk) if risk else ("utility", utility)
    check_request(s, metric, mode, target)

    def said(stage: str, n: int) -> None:
        what = "parameter(s) measured with every metric" if stage == "final" else "probe(s)"
        click.echo(f"{stage}: {n} {what} x replicates", err=True)
    with cluster_client(scheduler, workers, security=security) as client:
        res = run_calibrate(s, metric=metric, target=target, mode=mode, out=out,
                            client=client, tol=tol, max_iter=max_iter, overwrite=overwrite,
                            on_round=said)
    t = res.table
    tol_used = tol if tol is not None else (0.01 * abs(target) if target else 1e-3)
    click.echo(f"{metric} = {target:g} (tolerance {tol_used:.3g}, mean over up to "
               f"{s.replicates} replicate(s)); {res.probes} masked files in "
               f"{res.seconds:.1f} s")
    click.echo(format_table(t, digits=4))
    for st in sorted(set(t["status"]) - {"ok"}):
        click.echo(f"  {st}: {STATUS[st]}")
    _write_tables(t, {"csv": csv_out, "md": markdown_out, "html": html_out},
                  f"methods at {metric} = {target:g}", None, False)
    if out:
        click.echo(f"calibration cube written to {out}", err=True)


@main.command()
@click.argument("cube")
@click.option("--kind", type=click.Choice(["tradeoff", "curves", "ranks"]),
              default="tradeoff", show_default=True,
              help="tradeoff: --risk against --loss with the Pareto front; curves: --metric "
                   "against each method's parameter; ranks: heatmap of the ranks of --metrics.")
@click.option("--risk", default=None, help="tradeoff: metric for the y axis (e.g. DLD).")
@click.option("--loss", default=None, help="tradeoff: metric for the x axis (e.g. IL1s).")
@click.option("--metric", default=None, help="curves: the metric to plot (e.g. RR).")
@click.option("--target", type=float, default=None, help="curves: draw this level.")
@click.option("--metrics", "metric_list", default=None, metavar="A,B,...",
              help="ranks: the metrics (default all).")
@click.option("--by", default=None, help="ranks: sort cells by this metric.")
@click.option("--top", type=click.IntRange(1), default=None, help="ranks: best N cells only.")
@click.option("--dataset", default=None, help="Dataset of a multi-dataset cube.")
@click.option("-o", "--out", required=True, help="Image to write (.png, .svg or .pdf).")
def plot(cube: str, kind: str, risk: str | None, loss: str | None, metric: str | None,
         target: float | None, metric_list: str | None, by: str | None, top: int | None,
         dataset: str | None, out: str) -> None:
    """Plot a cube: risk-loss trade-off, per-method curves, or a heatmap of ranks.

    CUBE may also be a calibration cube (from `sdcdist calibrate --out`) for
    --kind curves: its probes are drawn and the calibrated parameters marked.
    """
    from . import report as rp
    if kind == "curves" and metric is None:
        raise SdcInputError("--kind curves needs --metric (e.g. --metric RR)")
    if kind == "tradeoff" and (risk is None or loss is None):
        raise SdcInputError("--kind tradeoff needs --risk and --loss (e.g. --risk DLD "
                            "--loss IL1s)")
    c = _open_any(cube) if kind == "curves" else _open(cube)
    if kind == "tradeoff":
        rp.plot_tradeoff(c, risk=risk, loss=loss, out=out, dataset=dataset)
    elif kind == "curves":
        rp.plot_risk_curves(c, metric=metric, out=out, target=target, dataset=dataset)
    else:
        rp.plot_rank_heatmap(c, out=out, metrics=_split(metric_list) if metric_list else None,
                             by=by, top=top, dataset=dataset)
    click.echo(f"plot written to {out}")


def _open(cube: str) -> Any:
    from .cube import open_cube
    return open_cube(cube)


def _open_any(cube: str) -> Any:
    """An audit cube or a calibration cube."""
    import zarr
    from .audit.calibrate import open_calibration
    try:
        is_cal = "calibrated_param" in zarr.open_group(cube, mode="r")
    except Exception:
        is_cal = False
    return open_calibration(cube) if is_cal else _open(cube)


# ---------------------------------------------------------------------------
# linkage

def _tolerances(text: str) -> float | list[float]:
    try:
        ts = [float(x) for x in _split(text)]
    except ValueError:
        raise SdcInputError(f"The 't' parameter of prl must be a number or a comma-separated "
                            f"list of increasing numbers > 0. Got {text!r} instead.") from None
    if not ts:
        raise SdcInputError("The 't' parameter of prl must be a number > 0. Got nothing instead.")
    return ts[0] if len(ts) == 1 else ts


def _blocking(text: str | None) -> tuple[str, int] | None:
    if not text:
        return None
    col, _, width = text.rpartition(":")
    if not col or not width.isdigit() or int(width) < 1:
        raise SdcInputError(f"--block-on must be COLUMN:HALF_WINDOW (e.g. AGI:50). "
                            f"Got {text!r} instead.")
    return col, int(width)


@main.command()
@click.argument("original", type=click.Path(exists=True))
@click.argument("masked", type=click.Path(exists=True))
@click.option("--keys", required=True, metavar="A,B,...",
              help="Key columns compared (present in both files).")
@click.option("--method", type=click.Choice(["prl"]), default="prl", show_default=True,
              help="Linkage method: prl = probabilistic record linkage (Fellegi-Sunter, EM).")
@click.option("--id", "id_column", default=None, metavar="COLUMN",
              help="Identifier column in both files: gives the truth, adds 'correct' and PLD.")
@click.option("--compare", type=click.Choice(["l", "d"]), default="l", show_default=True,
              help="Numeric comparison on log-like g(v) (l) or on raw values (d).")
@click.option("--t", "t_text", default="0.05", show_default=True, metavar="T[,T2,...]",
              help="Relative tolerance; several increasing values give multi-level comparisons.")
@click.option("--categorical", default=None, metavar="A,B,...",
              help="Key columns compared by equality.")
@click.option("--top-c", type=click.IntRange(1), default=20, show_default=True,
              help="Candidates kept per masked record for the sparse assignment.")
@click.option("--dense-limit", type=click.IntRange(1), default=5000, show_default=True,
              help="Largest file solved by the dense exact assignment.")
@click.option("--block-on", default=None, metavar="COLUMN:HALF_WINDOW",
              help="Sorted-neighbourhood blocking (compares fewer pairs; default all pairs).")
@click.option("-o", "--out", required=True, help="Parquet file for the linked pairs.")
@click.option("--overwrite", is_flag=True, help="Replace an existing output file.")
@scheduler_option
def link(original: str, masked: str, keys: str, method: str, id_column: str | None,
         compare: str, t_text: str, categorical: str | None, top_c: int, dense_limit: int,
         block_on: str | None, out: str, overwrite: bool, scheduler: str | None,
         workers: int | None, security: Any) -> None:
    """Link each record of MASKED to at most one record of ORIGINAL and write the pairs.

    Both files are CSV, Parquet or Zarr stores and may differ in size (e.g. an
    external file covering part of the population). The output has one row per
    linked pair: row_b (MASKED), row_a (ORIGINAL), weight, match_probability
    and, with --id, id_b, id_a, correct and true_weight. Records left without a
    partner are not listed.
    """
    from .data import load_microdata
    from .linkage.link import link_files
    if not out.lower().endswith((".parquet", ".pq")):
        raise SdcInputError(f"the pairs are written as Parquet; give an output ending in "
                            f".parquet (got {out!r})")
    if os.path.exists(out) and not overwrite:
        raise SdcInputError(f"{out!r} exists; use --overwrite to replace it")
    A = load_microdata(original)
    B = load_microdata(masked)
    with cluster_client(scheduler, workers, quiet=True, security=security) as client:
        res = link_files(A, B, _split(keys), id_column=id_column,
                         categorical=_split(categorical) if categorical else (),
                         method=compare, t=_tolerances(t_text), top_c=top_c,
                         dense_limit=dense_limit, blocking=_blocking(block_on), client=client)
    res.pairs.to_parquet(out, index=False)
    info = res.result.info
    click.echo(f"{out}: {len(res.pairs)} linked pairs of {B.shape[0]} masked records; "
               f"{info['pairs_compared']} pairs compared, {info['assignment']} assignment, "
               f"blocking {info['blocking']}, EM {info['em_iterations']} iterations "
               f"(log-likelihood {info['em_loglik']:.6g}), P(M) {info['p_match']:.3g}")
    if res.pld is not None:
        click.echo(f"PLD {res.pld:.2f}  PLD20 {res.pld20:.2f}")


if __name__ == "__main__":  # pragma: no cover
    main()
