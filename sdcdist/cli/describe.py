"""``sdcdist describe``: the data before masking."""

from __future__ import annotations

import click

from ._common import (echo_json, json_flag, main, names_option, reader_categorical,
                      role_options)
from ._paths import PathOrURL

__all__ = ["describe"]


@main.command()
@click.argument("data", type=PathOrURL("input"))
@click.option("--top", type=click.IntRange(0), default=10, show_default=True,
              help="How many records of highest individual risk to list (0: none).")
@role_options(keys="Key columns of the k-anonymity and individual-risk figures (default: "
                   "the store's key role, else every categorical column).",
              categorical=True, weight=True, na_values=True)
@json_flag
def describe(data: str, keys: str | None, top: int, categorical: str | None,
             weight: str | None, na_values: str | None, as_json: bool) -> None:
    """Describe DATA (CSV, Parquet or a Zarr store) before masking.

    \b
    Prints per-variable summaries (numeric: n, missing, mean, sd, quantiles;
    categorical: each category's frequency), the k-anonymity violations on the
    key columns (records and combinations with f_k < k for k = 2, 3, 5; a
    missing key value matches every category, as in the frequency risk
    metrics), the individual risk (sdcMicro's, weighted with --weight), and
    the records of highest individual risk: record numbers (1 = the first
    record) and key combinations. Those are the principal's own data: they go
    to stdout only, never to the logs. --json prints the same as JSON.
    """
    from ..data import load_microdata
    from ..describe import describe as run_describe
    from ..describe import describe_lines
    cats = names_option(categorical, "--categorical")
    md = load_microdata(data, allow_constant=True,
                        categorical=reader_categorical(data, cats),
                        na_values=na_values)
    d = run_describe(md, keys=names_option(keys, "--keys"), weight=weight, top=top)
    if as_json:
        echo_json(d)
        return
    for line in describe_lines(d):
        click.echo(line)
