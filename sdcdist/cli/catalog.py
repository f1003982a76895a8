"""Catalogue commands: ``methods`` and ``metrics`` list what can go in a spec."""

from __future__ import annotations

import click

from ._common import main

__all__ = ["methods", "metrics"]


@main.command()
@click.argument("names", nargs=-1, metavar="[METHOD]...")
@click.option("--markdown", is_flag=True, help="Print a Markdown table (for the docs).")
def methods(names: tuple[str, ...], markdown: bool) -> None:
    """List the masking methods with their parameter and valid range.

    With METHOD names: each one's parameter, range, description and the options a
    spec may give it (``methods: [{name: ..., options: {...}}]``).
    """
    if names:
        from ..masking import get_method
        from ..masking import options_of as for_method
        for name in names:
            m = get_method(name)
            rng = "no parameter" if m.kind == "none" else f"{m.param}: {m.allowed_text()}"
            click.echo(f"{m.name}: {m.description}\n  parameter  {rng}")
            for o in for_method(m.name):
                if o.spec:
                    click.echo(f"  option     {o.summary()}")
        return
    if markdown:
        from ..docs import methods_table
        click.echo(methods_table())
        return
    from ..masking import REGISTRY
    for name, m in REGISTRY.items():
        rng = "-" if m.kind == "none" else f"{m.param}: {m.allowed_text()}"
        click.echo(f"{name:16s} {rng:42s} {m.description}")


@main.command()
@click.argument("names", nargs=-1, metavar="[METRIC]...")
@click.option("--markdown", is_flag=True, help="Print a Markdown table (for the docs).")
def metrics(names: tuple[str, ...], markdown: bool) -> None:
    """List the metrics: kind, whether computed per key set, description.

    With METRIC names: each one's description, reference, the metrics it is
    computed from and the options that change how it is computed (a spec's
    ``options:``, or ``--option KEY=VALUE`` of ``risk``/``measure``).
    """
    if names:
        from ..metrics import get_metric
        from ..metrics import options_of as for_metric
        for name in names:
            m = get_metric(name)
            click.echo(f"{m.name} ({m.kind}{', per key set' if m.keysets else ''}): "
                       f"{m.description} {m.reference}".rstrip())
            if m.requires:
                click.echo(f"  computed from  {', '.join(m.requires)}")
            for o in for_metric(m.name):
                click.echo(f"  option  {o.summary()}")
        return
    if markdown:
        from ..docs import metrics_table
        click.echo(metrics_table())
        return
    from ..metrics import REGISTRY
    for name, m in REGISTRY.items():
        ks = "per key set" if m.keysets else ""
        click.echo(f"{name:12s} {m.kind:8s} {ks:12s} {m.description}")
