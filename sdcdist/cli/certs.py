"""``sdcdist certs``: a CA and certificates for a TLS test cluster."""

from __future__ import annotations

import click

from ..certs import MAX_DAYS
from ._common import main
from ._paths import PathOrURL, check_host, check_output

__all__ = ["certs"]


@main.command()
@click.option("--out", "out_dir", required=True, type=PathOrURL("output"),
              help="Directory for ca.crt and <role>.crt / <role>.key.")
@click.option("--host", "hosts", multiple=True, metavar="NAME",
              help="DNS name or IP for the certificates' SubjectAltName (repeatable; "
                   "default localhost and 127.0.0.1).")
@click.option("--days", type=click.IntRange(1, MAX_DAYS), default=30, show_default=True,
              help="Validity of the certificates from now, in days (at most ten years).")
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
    names = [check_host(h) for h in hosts] or ["localhost", "127.0.0.1"]
    check_output(out_dir, what="--out", kind="dir")
    from ..certs import make_certs
    paths = make_certs(out_dir, hosts=names, days=days,
                       overwrite=overwrite)
    for name, p in paths.items():
        click.echo(f"{name:16s} {p}")
