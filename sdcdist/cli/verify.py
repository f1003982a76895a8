"""``sdcdist verify``: check a dataset store or a cube for damage."""

from __future__ import annotations

import click

from ._common import EXIT_FAILURE, main
from ._paths import PathOrURL

__all__ = ["verify"]


@main.command()
@click.argument("store", type=PathOrURL("input"))
@click.option("--source", default=None, type=PathOrURL("input"), metavar="FILE",
              help="Dataset stores: also check that FILE is the CSV/Parquet file the store "
                   "was ingested from (its SHA-256).")
def verify(store: str, source: str | None) -> None:
    """Check every chunk, the metadata, the record count and the fingerprint of STORE.

    STORE is a dataset store (`sdcdist ingest`, `synth`, `mask`), an audit cube
    or a calibration cube. Prints what was checked; exit 0 when the store is
    intact, 1 when it is damaged (each problem on a line starting with
    "corrupt:"), 2 when STORE is not an sdcdist store.
    """
    from ..integrity import verify_store
    report = verify_store(store, source=source)
    for line in report.lines():
        click.echo(line)
    if not report.ok:
        for p in report.problems:
            click.echo(f"corrupt: {p}", err=True)
        raise SystemExit(EXIT_FAILURE)
