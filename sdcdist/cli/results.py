"""Result commands: ``report``, ``query`` and ``plot`` read a cube."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import click

from ..errors import SdcInputError
from ._common import check_tables, main, names_option, table_outputs, write_tables
from ._paths import FINITE, PathOrURL, check_output

__all__ = ["report", "query", "plot"]


def _datasets(cube: Any, dataset: str | None) -> list[str | None]:
    """The datasets to show one table each for: the one asked, else all (None: only one)."""
    from ..cube import dataset_names, select_dataset
    if dataset is not None:
        select_dataset(cube, dataset)      # checks the name
        return [dataset]
    names = dataset_names(cube)
    return [None] if len(names) == 1 or "dataset" not in cube.dims else list(names)


def _open(cube: str, use: str = "") -> Any:
    """An audit cube; ``use`` names what was asked (for the message on a calibration cube)."""
    from ..cube import open_cube
    if _is_calibration(cube):
        raise SdcInputError(
            f"{cube!r} is a calibration cube (from `sdcdist calibrate --out`), and {use} "
            "needs an audit cube (from `sdcdist audit`). A calibration cube is read by "
            "`sdcdist plot --kind curves` only; `sdcdist calibrate --csv/--markdown/--html` "
            "writes its table")
    c = open_cube(cube)
    progress = _progress(c)
    if progress is not None and progress[0] < progress[1]:
        click.echo(f"note: {cube} holds {progress[0]} of the {progress[1]} cells its audit "
                   "planned (it did not finish); what follows leaves the others out. Rerun the "
                   "same `sdcdist audit` command to compute them.", err=True)
    return c


def _progress(c: Any) -> tuple[int, int] | None:
    """(cells done, cells planned) of an open audit cube: the planned ones from the spec it
    records (each method's parameter values x replicates x datasets); None when it records
    none it can count."""
    import json

    import numpy as np
    try:
        raw = json.loads(c.attrs["spec"])
        values = sum(len(m["params"]) for m in raw["methods"])
        datasets = len(raw["datasets"]) if "datasets" in raw else 1
        planned = values * int(raw["replicates"]) * datasets
        done = int(np.count_nonzero(np.asarray(c["done"].values) == 1))
    except Exception:                          # noqa: BLE001 - an older or foreign cube
        return None
    return done, planned


def _is_calibration(cube: str) -> bool:
    import zarr
    try:
        return "calibrated_param" in zarr.open_group(cube, mode="r")
    except Exception:
        return False


def require_options(f: Any) -> Any:
    """Decorator: ``--require RULE`` (repeatable) and ``--loss METRIC``."""
    f = click.option("--loss", default=None, metavar="METRIC",
                     help="Loss measure of the recommendation (default: IL_S2, else IL1s, "
                          "else the cube's first loss metric).")(f)
    return click.option("--require", "require", multiple=True, metavar="RULE",
                        help="A release rule METRIC OP NUMBER (OP: <= < >= > ==), e.g. "
                             "'DLD <= 5'; repeatable, added to the spec's 'require:'. Each "
                             "cell is marked acceptable when every replicate meets every "
                             "rule, and the least-loss acceptable cell is recommended.")(f)


def _rules(c: Any, require: tuple[str, ...]) -> list[Any]:
    """The cube's spec rules plus ``--require``, read before anything is printed."""
    from ..rules import cube_rules
    return cube_rules(c, require)


def _recommendation(c: Any, rules: list[Any], loss: str | None, d: str | None,
                    table: Any) -> Any:
    """``table`` with acceptability columns, after printing the recommendation."""
    from ..report import with_rules
    from ..rules import recommend
    rec = recommend(c, rules, loss=loss, dataset=d)
    for line in rec.lines():
        click.echo(line)
    return with_rules(table, rec.table)


def _open_any(cube: str) -> Any:
    """An audit cube or a calibration cube."""
    from ..audit.calibrate import open_calibration
    return open_calibration(cube) if _is_calibration(cube) else _open(cube)


@main.command()
@click.argument("cube", type=PathOrURL("input", exists=False))
@click.option("--by", default=None,
              help="Metric to sort by, e.g. Score (rank 1 first); required without --chosen "
                   "(with it, default: the loss measure of the recommendation).")
@click.option("--metrics", "metric_list", default=None, metavar="A,B,...",
              help="Metrics to show (default: the parts of the score --by, else all).")
@click.option("--top", type=click.IntRange(1), default=None, help="Show only the best N cells.")
@click.option("--dataset", default=None,
              help="Dataset of a multi-dataset cube (default: one table per dataset).")
@require_options
@table_outputs
@click.option("--chosen", default=None, metavar="METHOD:PARAM[:REPLICATE]",
              help="The cell chosen for release: --html then writes the release report "
                   "(one self-contained HTML file) instead of the ranking table.")
@click.option("--variant", type=click.Choice(["internal", "external"]), default="internal",
              show_default=True,
              help="Release report: 'internal' lists the records of highest individual "
                   "risk; 'external' has no record-level content.")
@click.option("--spec", "spec_path", default=None, type=PathOrURL("input"),
              help="Release report: the spec file that made the cube (default: the copy "
                   "the cube records, its data paths relative to the current directory).")
@click.option("--overwrite", is_flag=True, help="Replace existing table files.")
def report(cube: str, by: str | None, metric_list: str | None, top: int | None,
           dataset: str | None, require: tuple[str, ...], loss: str | None,
           csv_out: str | None, markdown_out: str | None, html_out: str | None,
           chosen: str | None, variant: str, spec_path: str | None,
           overwrite: bool) -> None:
    """Print a ranking table like Table 2 of Domingo-Ferrer, Mateo-Sanz and Torra.

    Each cell's metrics (mean over replicates) and their ranks across all
    (method, param) cells; rank 1 is the lowest loss or the lowest risk; ties
    share the average rank; cells without a value get no rank.

    With rules (the spec's 'require:' and --require), each cell is marked
    acceptable or not with the rules it breaks, and the recommendation (the
    least-loss acceptable cell, the Pareto front of acceptable cells, or the
    closest cell when none is acceptable) is printed above the table.

    \b
    With --chosen METHOD:PARAM[:REPLICATE] and --html R.html, the release
    report: one self-contained HTML file (no network; plots embedded) with the
    data summary, the spec, conventions and rules, the ranking with
    acceptability, the recommended and chosen cells, the original against the
    released file, each risk family, and how to reproduce the release. The
    chosen cell's file is regenerated and checked against the cube's
    fingerprint first; on any refusal nothing is written.
    """
    from ..report import format_table, ranking_table
    if chosen is not None:
        _release_report(cube, chosen, variant, spec_path, by, dataset, require, loss,
                        html_out, csv_out, markdown_out, overwrite)
        return
    if by is None:
        raise SdcInputError("--by is missing: name the metric to sort by (e.g. --by Score), "
                            "or give --chosen METHOD:PARAM and --html R.html for the "
                            "release report")
    if variant != "internal" or spec_path is not None:
        raise SdcInputError("--variant and --spec belong to the release report; give "
                            "--chosen METHOD:PARAM and --html R.html with them")
    shown = names_option(metric_list, "--metrics", kind="metric")
    c = _open(cube, "`sdcdist report`")
    rules = _rules(c, require)
    if loss is not None or rules:
        from ..rules import default_loss
        default_loss(c, loss)                # checked before anything is printed
    names = _datasets(c, dataset)
    files = check_tables({"csv": csv_out, "md": markdown_out, "html": html_out}, names,
                         overwrite=overwrite, inputs=[cube])
    for d in names:
        table = ranking_table(c, by=by, metrics=shown, dataset=d)
        if len(names) > 1:
            click.echo(f"\n== dataset {d}")
        if rules:
            table = _recommendation(c, rules, loss, d, table)
        if top:
            table = table.head(top)
        click.echo(format_table(table))
        write_tables(table, files[d],
                     f"{Path(cube).name}: cells ranked by {by}" + (f" ({d})" if d else ""))


def _release_report(cube: str, chosen: str, variant: str, spec_path: str | None,
                    by: str | None, dataset: str | None, require: tuple[str, ...],
                    loss: str | None, html_out: str | None, csv_out: str | None,
                    markdown_out: str | None, overwrite: bool) -> None:
    """``report --chosen``: the release report to ``--html``."""
    if html_out is None:
        raise SdcInputError("--chosen writes the release report: give its file with "
                            "--html R.html")
    if csv_out or markdown_out or by:
        raise SdcInputError("--chosen writes the release report only (its ranking is by "
                            "the loss measure, --loss); leave out --by, --csv and "
                            "--markdown, or run `sdcdist report` a second time without "
                            "--chosen for the ranking tables")
    if "://" in html_out:
        raise SdcInputError(f"--html {html_out!r}: the release report is written to a "
                            "local file; give a local path")
    from ..releasereport import parse_chosen, write_report
    parse_chosen(chosen)                        # checked before anything is read
    check_output(html_out, what="--html", overwrite=overwrite, kind="file",
                 inputs=[cube, spec_path])
    _open(cube, "`sdcdist report --chosen`")
    from ..audit.spec import load_spec
    spec = load_spec(spec_path) if spec_path else None
    info = write_report(cube, html_out, chosen=chosen, variant=variant, require=require,
                        loss=loss, dataset=dataset, spec=spec)
    ch = info["chosen"]
    click.echo(f"{html_out}: {variant} release report of {ch['method']} {ch['param']:g} "
               f"replicate {ch['replicate']} ({info['bytes']} bytes; "
               + ("acceptable" if info["acceptable"] else "not acceptable")
               + f"; release fingerprint {info['fingerprint']} matches the cube)")


@main.command()
@click.argument("cube", type=PathOrURL("input", exists=False))
@click.option("--where", "where_", default=None, metavar="FILTER",
              help='Keep cells matching FILTER, e.g. "DLD < 5 and (IL < 20 or ID1 <= 40)": '
                   "comparisons of metric names with numbers joined by and/or.")
@click.option("--sort", default=None, metavar="METRIC", help="Sort by this metric, best first.")
@click.option("--top", type=click.IntRange(1), default=None, help="Show only the first N.")
@click.option("--metrics", "metric_list", default=None, metavar="A,B,...",
              help="Metrics to show (default: all).")
@click.option("--dataset", default=None,
              help="Dataset of a multi-dataset cube (default: each in turn).")
@require_options
@click.option("--acceptable", "only_acceptable", is_flag=True,
              help="Keep only the cells that meet every rule.")
@table_outputs
@click.option("--overwrite", is_flag=True, help="Replace existing table files.")
def query(cube: str, where_: str | None, sort: str | None, top: int | None,
          metric_list: str | None, dataset: str | None, require: tuple[str, ...],
          loss: str | None, only_acceptable: bool, csv_out: str | None,
          markdown_out: str | None, html_out: str | None, overwrite: bool) -> None:
    """Select cells of a cube by their metrics (means over replicates).

    The filter language is deliberately small: METRIC OP NUMBER (OP one of
    < <= > >= == !=), joined by and/or, with optional parentheses; anything
    else is refused. Rules (the spec's 'require:' and --require) mark each
    cell acceptable or not and print the recommendation; --acceptable keeps
    the acceptable cells only.
    """
    from ..cube import check_metrics
    from ..query import parse_where
    from ..query import query as run_query
    from ..report import format_table
    shown = names_option(metric_list, "--metrics", kind="metric")
    c = _open(cube, "`sdcdist query`")
    shown = shown or [str(m) for m in c["metric"].values]
    check_metrics(c, shown)
    if where_ is not None:
        parse_where(where_, [str(m) for m in c["metric"].values])
    rules = _rules(c, require)
    if only_acceptable and not rules:
        raise SdcInputError("--acceptable needs rules: give --require (e.g. --require "
                            "'DLD <= 5') or a spec with 'require:'")
    if loss is not None or rules:
        from ..rules import default_loss
        default_loss(c, loss)
    names = _datasets(c, dataset)
    files = check_tables({"csv": csv_out, "md": markdown_out, "html": html_out}, names,
                         overwrite=overwrite, inputs=[cube])
    for d in names:
        t = run_query(c, where_=where_, sort=sort, top=None if rules else top, dataset=d)
        t = t[["param_name", *shown]]
        if len(names) > 1:
            click.echo(f"\n== dataset {d}")
        if rules:
            t = _recommendation(c, rules, loss, d, t)
            if only_acceptable:
                t = t[t["acceptable"] == "yes"]
            if top:
                t = t.head(top)
        click.echo(format_table(t) if len(t) else "no cell matches")
        write_tables(t, files[d], f"{Path(cube).name}: query")


@main.command()
@click.argument("cube", type=PathOrURL("input", exists=False))
@click.option("--kind", type=click.Choice(["tradeoff", "curves", "ranks"]),
              default="tradeoff", show_default=True,
              help="tradeoff: --risk against --loss with the Pareto front; curves: --metric "
                   "against each method's parameter; ranks: heatmap of the ranks of --metrics.")
@click.option("--risk", default=None, help="tradeoff: metric for the y axis (e.g. DLD).")
@click.option("--loss", default=None, help="tradeoff: metric for the x axis (e.g. IL1s).")
@click.option("--metric", default=None, help="curves: the metric to plot (e.g. RR).")
@click.option("--target", type=FINITE, default=None, help="curves: draw this level.")
@click.option("--metrics", "metric_list", default=None, metavar="A,B,...",
              help="ranks: the metrics (default all).")
@click.option("--by", default=None, help="ranks: sort cells by this metric.")
@click.option("--top", type=click.IntRange(1), default=None, help="ranks: best N cells only.")
@click.option("--dataset", default=None, help="Dataset of a multi-dataset cube.")
@click.option("--out", required=True, type=PathOrURL("output"),
              help="Image to write (.png, .svg or .pdf).")
@click.option("--overwrite", is_flag=True, help="Replace an existing image.")
def plot(cube: str, kind: str, risk: str | None, loss: str | None, metric: str | None,
         target: float | None, metric_list: str | None, by: str | None, top: int | None,
         dataset: str | None, out: str, overwrite: bool) -> None:
    """Plot a cube: risk-loss trade-off, per-method curves, or a heatmap of ranks.

    CUBE may also be a calibration cube (from `sdcdist calibrate --out`) for
    --kind curves: its probes are drawn and the calibrated parameters marked.
    """
    if kind == "curves" and metric is None:
        raise SdcInputError("--kind curves needs --metric (e.g. --metric RR)")
    if kind == "tradeoff" and (risk is None or loss is None):
        raise SdcInputError("--kind tradeoff needs --risk and --loss (e.g. --risk DLD "
                            "--loss IL1s)")
    shown = names_option(metric_list, "--metrics", kind="metric")
    check_output(out, what="--out", overwrite=overwrite, inputs=[cube])
    from .. import report as rp
    c = _open_any(cube) if kind == "curves" else _open(cube, f"`sdcdist plot --kind {kind}`")
    if kind == "tradeoff":
        rp.plot_tradeoff(c, risk=risk, loss=loss, out=out, dataset=dataset)
    elif kind == "curves":
        rp.plot_risk_curves(c, metric=metric, out=out, target=target, dataset=dataset)
    else:
        rp.plot_rank_heatmap(c, out=out, metrics=shown, by=by, top=top, dataset=dataset)
    click.echo(f"plot written to {out}")
