"""Catalogue commands: ``methods`` and ``metrics`` list what can go in a spec."""

from __future__ import annotations

import click

from ._common import main

__all__ = ["methods", "metrics"]


@main.command()
@click.option("--markdown", is_flag=True, help="Print a Markdown table (for the docs).")
def methods(markdown: bool) -> None:
    """List the masking methods with their parameter and valid range."""
    if markdown:
        from ..docs import methods_table
        click.echo(methods_table())
        return
    from ..masking import REGISTRY
    for name, m in REGISTRY.items():
        rng = "-" if m.kind == "none" else f"{m.param}: {m.allowed_text()}"
        click.echo(f"{name:16s} {rng:42s} {m.description}")


@main.command()
@click.option("--markdown", is_flag=True, help="Print a Markdown table (for the docs).")
def metrics(markdown: bool) -> None:
    """List the metrics: kind, whether computed per key set, description."""
    if markdown:
        from ..docs import metrics_table
        click.echo(metrics_table())
        return
    from ..metrics import REGISTRY
    for name, m in REGISTRY.items():
        ks = "per key set" if m.keysets else ""
        click.echo(f"{name:12s} {m.kind:8s} {ks:12s} {m.description}")
