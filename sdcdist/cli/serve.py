"""Service command: ``serve`` runs the audit service (HTTP API and web page)."""

from __future__ import annotations

import ipaddress
import sys

import click

from ..errors import SdcInputError, empty_error, exclusive_error, value_error
from ._common import ClusterOptions, cluster, cluster_options, main

__all__ = ["serve", "uvicorn_config"]

_LOOPBACK = ("localhost",)


def _is_loopback(host: str) -> bool:
    if host in _LOOPBACK:
        return True
    try:
        return ipaddress.ip_address(host.strip("[]")).is_loopback
    except ValueError:
        return False


def _hash_token(ctx: click.Context, param: click.Parameter, value: str | None) -> None:
    """--hash-token NAME: print a tokens-file line for a fresh token (or one read from
    standard input when it is not a terminal) and exit."""
    if value is None or ctx.resilient_parsing:
        return
    from ..service.auth import PRINCIPAL_NAME, hash_token, new_token
    if not PRINCIPAL_NAME.match(value):
        raise click.BadParameter("a principal name is letters, digits and ._@- (at most "
                                 "64 characters)", ctx, param)
    given = None if sys.stdin is None or sys.stdin.isatty() else sys.stdin.readline().strip()
    token = given or new_token()
    method = "scrypt" if given else "sha256"    # chosen tokens get the slow hash
    if not given:
        click.echo(f"token for {value} (give it to them; only its hash is stored):\n{token}",
                   err=True)
    click.echo(f"{value} {hash_token(token, method=method)}")
    ctx.exit(0)


def check_forwarded(value: str | None) -> str | None:
    """``--forwarded-allow-ips``: a comma-separated list of proxy addresses or networks
    (``*`` trusts any peer: only behind a proxy that every connection passes)."""
    if value is None:
        return None
    items = [v.strip() for v in value.split(",") if v.strip()]
    for v in items:
        if v == "*":
            continue
        try:
            ipaddress.ip_network(v, strict=False)
        except ValueError:
            raise value_error("--forwarded-allow-ips", "the IP addresses or networks of your "
                              "reverse proxies, e.g. 10.0.0.5,10.0.1.0/24", v[:64]) from None
    if not items:
        raise empty_error("--forwarded-allow-ips", "give the addresses of your reverse proxies, "
                          "or leave the option out")
    return ",".join(items)


#: Seconds an idle client connection stays open (uvicorn's default is 5, the same as
#: httpx's pool: a client reusing a connection at that moment loses its request)
KEEP_ALIVE = 75


def uvicorn_config(asgi: object, *, host: str, port: int, certfile: str | None = None,
                   keyfile: str | None = None, forwarded_allow_ips: str | None = None
                   ) -> "object":
    """The uvicorn configuration of ``sdcdist serve``. ``X-Forwarded-For`` (and
    ``X-Forwarded-Proto``) are read only from the peers of ``forwarded_allow_ips``; with
    None (the default) never, whatever uvicorn's defaults or ``FORWARDED_ALLOW_IPS`` say:
    the address the wrong-token limiter counts is then the connection's own. An idle
    connection stays open :data:`KEEP_ALIVE` seconds: longer than clients and proxies keep
    theirs (5 s for ``sdcdist.connect``, 60 s for common load balancers), so a request a
    client sends on an idle connection never meets the server closing it ("Server
    disconnected")."""
    import uvicorn
    return uvicorn.Config(
        asgi, host=host, port=port, ssl_certfile=certfile, ssl_keyfile=keyfile,
        log_config=None, access_log=True, timeout_graceful_shutdown=5,
        timeout_keep_alive=KEEP_ALIVE,
        proxy_headers=forwarded_allow_ips is not None,
        forwarded_allow_ips=forwarded_allow_ips if forwarded_allow_ips is not None
        else "")


@main.command()
@click.option("--root", type=click.Path(file_okay=False), default=None,
              help="Folder of the service's state (SQLite), datasets and cubes; created if "
                   "missing. Required.")
@click.option("--host", default="127.0.0.1", show_default=True,
              help="Address to listen on (without --tokens: loopback only).")
@click.option("--port", type=click.IntRange(0, 65535), default=8000, show_default=True)
@click.option("--tokens", type=click.Path(exists=True, dir_okay=False), default=None,
              envvar="SDCDIST_TOKENS",
              help="File of hashed bearer tokens, one 'PRINCIPAL sha256:HEX' line each "
                   "(make lines with --hash-token). Without it every request is accepted "
                   "and the service listens on loopback only.")
@click.option("--certfile", type=click.Path(exists=True, dir_okay=False), default=None,
              help="TLS certificate (PEM): serve https.")
@click.option("--keyfile", type=click.Path(exists=True, dir_okay=False), default=None,
              help="TLS private key (PEM) of --certfile.")
@click.option("--max-upload", type=click.IntRange(1, 1 << 20), default=256,
              show_default=True, metavar="MIB", help="Largest dataset upload, in MiB (413 "
                                                     "above).")
@click.option("--max-audits", type=click.IntRange(1, 10_000), default=8, show_default=True,
              help="Audits one principal may have queued or running at once (429 above).")
@click.option("--max-columns", type=click.IntRange(1, 10**6), default=1000, show_default=True,
              help="Columns a dataset may have (an upload, or a spec's data; 413 above).")
@click.option("--max-rows", type=click.IntRange(3, 10**9), default=10**7, show_default=True,
              help="Records a dataset may have (for CSV: its lines; 413 above).")
@click.option("--max-data", type=click.IntRange(1, 1 << 20), default=1024,
              show_default=True, metavar="MIB",
              help="Largest dataset in memory, records x columns x 8 bytes (413 above).")
@click.option("--max-inflated", type=click.IntRange(1, 1 << 20), default=1024,
              show_default=True, metavar="MIB",
              help="Largest upload once decompressed (.csv.gz, Parquet; 413 above). "
                   "--max-upload counts the bytes sent.")
@click.option("--max-field", type=click.IntRange(1, 1 << 30), default=2**20,
              show_default=True, metavar="BYTES",
              help="Longest field of an uploaded CSV, default 1 MiB (its text, quotes included; "
                   "413 above), "
                   "checked while the bytes stream in, decompressed; lines may be 8 times "
                   "longer, Parquet pages and dictionaries 16 times.")
@click.option("--allow-url", "allow_url", multiple=True, metavar="PREFIX",
              help="A URL prefix a spec's dataset 'path' may name, e.g. "
                   "'s3://bucket/{principal}/' ({principal}: the requesting principal); "
                   "repeatable. Without it specs name uploads and files under "
                   "--root/files/<principal>/ only.")
@click.option("--forwarded-allow-ips", default=None, metavar="ADDRS",
              help="Comma-separated addresses or networks of reverse proxies whose "
                   "X-Forwarded-For (client address) and X-Forwarded-Proto headers are "
                   "believed. Off by default: the headers are ignored and each client is "
                   "the address of its connection (what the wrong-token limit counts).")
@click.option("--max-running", type=click.IntRange(1, 256), default=4, show_default=True,
              help="Audits run at once on the cluster (the others wait in the queue).")
@click.option("--hash-token", metavar="NAME", expose_value=False, is_eager=True,
              callback=_hash_token,
              help="Print a tokens-file line for principal NAME and exit: a fresh random "
                   "token is printed on stderr; a token piped on stdin is hashed instead.")
@cluster_options
def serve(root: str | None, host: str, port: int, tokens: str | None, certfile: str | None,
          keyfile: str | None, max_upload: int, max_audits: int, max_columns: int,
          max_rows: int, max_data: int, max_inflated: int, max_field: int,
          allow_url: tuple[str, ...], forwarded_allow_ips: str | None, max_running: int,
          where: ClusterOptions) -> None:
    """Run the audit service: an HTTP API (/v1, OpenAPI at /openapi.json, docs at /docs)
    and a web page (/) in front of one Dask cluster.

    \b
    Examples:
      sdcdist serve --root /srv/sdcdist                      # this machine only
      sdcdist serve --hash-token alice >> tokens.txt
      sdcdist serve --root /srv/sdcdist --tokens tokens.txt --host 0.0.0.0 \\
          --certfile cert.pem --keyfile key.pem --scheduler tls://dask:8786

    State lives in SQLite under --root; a restarted service resumes the audits
    that were running from their cubes. Audits run on a local cluster started
    here, or on --scheduler.
    """
    if root is None:
        raise SdcInputError("serve needs --root DIR, the folder of its state, datasets and "
                            "cubes")
    if (certfile is None) != (keyfile is None):
        raise exclusive_error(["--certfile", "--keyfile"], "all")
    from pathlib import Path

    from ..service.auth import Tokens
    if Path(root).exists() and not Path(root).is_dir():
        raise value_error("--root", "a folder (created if missing), not a file", root)
    principals = Tokens.load(tokens) if tokens else None
    from ..service.security import check_allow_url
    for prefix in allow_url:
        check_allow_url(prefix)
    forwarded_allow_ips = check_forwarded(forwarded_allow_ips)
    if principals is None and not _is_loopback(host):
        raise SdcInputError(f"--host {host} without --tokens would let anyone who reaches "
                            "this machine use the service; give --tokens FILE (make lines "
                            "with 'sdcdist serve --hash-token NAME') or listen on 127.0.0.1")
    import uvicorn

    from ..limits import MAX_SPEC_BYTES
    from ..service.app import ServiceConfig, create_app
    from ..service.jobs import JobRunner
    from ..service.limits import Limits
    from ..service.security import loopback_hosts
    from ..service.store import Store
    import os
    os.umask(0o077)          # what the service writes (uploads, cubes) is this user's only
    store = Store(root)
    config = ServiceConfig(root=Path(root).resolve(), tokens=principals,
                           max_upload=max_upload * 2**20, max_spec=MAX_SPEC_BYTES,
                           max_audits=max_audits,
                           limits=Limits(max_columns=max_columns, max_rows=max_rows,
                                         max_data=max_data * 2**20,
                                         max_inflated=max_inflated * 2**20,
                                         max_field=max_field),
                           # without tokens: DNS rebinding is the way in, so only the
                           # bound (loopback) names; with tokens any name may reach it
                           hosts=loopback_hosts(host, port) if principals is None else (),
                           allow_urls=tuple(allow_url))
    scheme = "https" if certfile else "http"
    if principals is None:
        click.echo("no --tokens: every request is accepted, so the service listens on "
                   f"{host} (this machine) only", err=True)
    else:
        click.echo(f"{len(principals.principals)} principal(s) from {Path(tokens).name}",
                   err=True)
    with cluster(where) as client:
        runner = JobRunner(store, client, max_running=max_running)
        app = create_app(config, runner, store)
        from ..service.app import BodyLimit
        asgi = BodyLimit(app, [("POST", "/v1/datasets", config.max_upload, "upload"),
                               ("POST", "/v1/audits", config.max_spec, "spec")])
        runner.start()
        server = uvicorn.Server(uvicorn_config(
            asgi, host=host, port=port, certfile=certfile, keyfile=keyfile,
            forwarded_allow_ips=forwarded_allow_ips))
        # --port 0: the system picks a free port; bound here, so that the line below
        # names the port the service answers on
        sock = _bind_any_port(host) if port == 0 else None
        shown = sock.getsockname()[1] if sock is not None else port
        click.echo(f"sdcdist service on {scheme}://{host}:{shown}/ (API docs at /docs, "
                   f"state in {config.root})", err=True)
        try:
            server.run(sockets=[sock] if sock is not None else None)
        finally:
            runner.shutdown()
            if sock is not None:
                sock.close()


def _bind_any_port(host: str) -> "object":
    """A TCP socket bound to ``host`` on a port the system picks (``--port 0``)."""
    import socket
    h = host.strip("[]")
    sock = socket.socket(socket.AF_INET6 if ":" in h else socket.AF_INET)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    try:
        sock.bind((h, 0))
    except OSError as exc:
        sock.close()
        raise SdcInputError(f"cannot listen on {host} ({exc.strerror}); give an address of "
                            "this machine (--host)") from None
    return sock
