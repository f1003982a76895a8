"""Audit commands: ``audit`` runs a spec, ``calibrate`` compares methods at equal risk."""

from __future__ import annotations

import logging
import sys
from typing import Any

import click

from ..errors import SdcInputError, exclusive_error, exists_error
from ._common import (ClusterOptions, check_tables, cluster, cluster_options, echo_json,
                      json_flag, main, option_items, parse_options, table_outputs,
                      write_tables)
from ._paths import FINITE, PathOrURL, check_output

__all__ = ["audit", "calibrate"]


@main.command()
@click.argument("spec", type=click.Path(exists=True, dir_okay=False))
@click.option("--out", required=True, type=PathOrURL("output"),
              help="Zarr cube to write: a path or an fsspec URL (s3://, gs://, file://).")
@click.option("--overwrite", is_flag=True,
              help="Discard an existing cube instead of resuming it (it is set aside "
                   "until the new run writes its first cell: a run that fails before "
                   "that leaves it in place).")
@click.option("--progress/--no-progress", default=None,
              help="Progress bar (default: when stderr is a terminal).")
@option_items
@json_flag
@cluster_options
def audit(spec: str, out: str, overwrite: bool, progress: bool | None,
          option_items: tuple[str, ...], as_json: bool, where: ClusterOptions) -> None:
    """Run an audit spec: mask every (method, param, replicate) cell, measure it.

    Cells are written to the cube as they finish. Running the same spec again
    computes only the missing cells; a different spec against an existing cube
    is refused (use another --out or --overwrite). If the cluster is lost the
    command exits 1 and a rerun against a new cluster resumes.
    """
    import time

    from ..audit import load_spec, run_audit
    from ..audit.run import input_paths, load_data
    from ..logs import event
    s = load_spec(spec, options=parse_options(option_items, scopes=("metric", "audit")))
    check_output(out, what="--out", kind="cube", exists_ok=True,
                 inputs=[spec, *input_paths(s)])
    data = load_data(s)     # the data and the parameters it bounds, before any cluster
    json_logs = (click.get_current_context().obj or {}).get("log_format") == "json"
    # in JSON mode stderr carries JSON lines only: the "cell written" lines are the progress
    show = (sys.stderr.isatty() if progress is None else progress) and not json_logs \
        and not as_json
    alog = logging.getLogger("sdcdist.audit")
    event(alog, "audit started", spec=s.name, spec_sha256=s.sha256[:12], cube=out,
          methods=len(s.methods), metrics=len(s.metrics), replicates=s.replicates)
    last = [time.perf_counter()]

    def on_cell(cell: Any) -> None:
        now = time.perf_counter()
        event(alog, "cell written", method=cell.method, param=cell.param,
              replicate=cell.replicate, seconds=round(now - last[0], 3))
        last[0] = now

    with cluster(where) as client:
        res = run_audit(s, out, client=client, overwrite=overwrite, progress=show,
                        on_cell=on_cell, data=data)
    event(alog, "audit finished", cube=res.cube, computed=res.computed, skipped=res.skipped,
          total=res.total, seconds=round(res.seconds, 2), mode=res.mode)
    if as_json:
        echo_json({"cube": res.cube, "computed": res.computed, "skipped": res.skipped,
                   "total": res.total, "seconds": round(res.seconds, 3), "mode": res.mode})
        return
    click.echo(f"{res.cube}: computed {res.computed} of {res.total} cells "
               f"({res.skipped} already in the cube) in {res.seconds:.1f} s "
               f"[{res.mode} cells]")


@main.command()
@click.argument("spec", type=click.Path(exists=True, dir_okay=False))
@click.option("--risk", "risk", default=None, metavar="METRIC",
              help="Compare at equal risk: the risk metric to calibrate (e.g. RR, DLD).")
@click.option("--utility", "utility", default=None, metavar="METRIC",
              help="Compare at equal utility: the utility/loss metric to calibrate (e.g. PS).")
@click.option("--target", type=FINITE, default=None, help="The level to reach (mean over "
              "replicates).")
@click.option("--require", "require", multiple=True, metavar="RULE",
              help="Instead of --risk/--utility and --target: a release rule METRIC OP "
                   "NUMBER (repeatable, added to the spec's 'require:'); per method, the "
                   "parameter that meets every rule with the least --loss.")
@click.option("--loss", default=None, metavar="METRIC",
              help="With rules: the loss to minimise (default IL_S2, else IL1s, else the "
                   "spec's first loss metric).")
@click.option("--tol", type=FINITE, default=None,
              help="Absolute tolerance on the mean (default 1 % of |target|).")
@click.option("--max-iter", type=click.IntRange(1, 200), default=20, show_default=True,
              help="Bisection rounds at most.")
@click.option("--out", default=None, type=PathOrURL("output"),
              help="Zarr store for the calibration cube.")
@click.option("--overwrite", is_flag=True, help="Replace an existing --out.")
@table_outputs
@option_items
@json_flag
@cluster_options
def calibrate(spec: str, risk: str | None, utility: str | None, target: float | None,
              require: tuple[str, ...], loss: str | None, tol: float | None, max_iter: int,
              out: str | None, overwrite: bool,
              csv_out: str | None, markdown_out: str | None, html_out: str | None,
              option_items: tuple[str, ...], as_json: bool, where: ClusterOptions) -> None:
    """Compare methods at equal risk (or equal utility), as Domingo-Ferrer, Ricci and Soria.

    For each method of SPEC, its `params` are a coarse grid: the target is
    bracketed there, then found by bisection (continuous parameters, each probe
    averaged over the spec's replicates) or as the nearest feasible value
    (integer parameters). The spec's metrics are measured at the calibrated
    parameters and the methods ranked by them. A method that never reaches the
    target is reported as unreachable with the range it reaches. ``-o
    KEY=VALUE`` sets one of the spec's top-level ``options``.
    """
    from pathlib import Path

    from ..audit import load_spec
    from ..audit.run import input_paths, load_data
    from ..audit.calibrate import STATUS, calibrate as run_calibrate, check_request
    from ..report import format_table
    s = None
    if require or (risk is None and utility is None and target is None):
        s = load_spec(spec, options=parse_options(option_items, scopes=("metric", "audit")))
    if require or (s is not None and s.require):
        if risk is not None or utility is not None or target is not None or out is not None:
            raise SdcInputError("calibrating to rules (--require, or the spec's 'require:') "
                                "takes no --risk, --utility, --target or --out; give either "
                                "rules or a target")
        _calibrate_rules(s, require, loss, max_iter, csv_out, markdown_out, html_out,
                         overwrite, as_json, where, spec_path=spec)
        return
    if (risk is None) == (utility is None):
        raise exclusive_error(["--risk METRIC", "--utility METRIC", "--require RULE"],
                              "exactly one")
    if target is None:
        raise SdcInputError("--target is needed with --risk/--utility")
    s = load_spec(spec, options=parse_options(option_items, scopes=("metric", "audit")))
    inputs = [spec, *input_paths(s)]
    tables = check_tables({"csv": csv_out, "md": markdown_out, "html": html_out}, [None],
                          overwrite=overwrite, inputs=inputs, others=[("--out", out)])[None]
    check_output(out, what="--out", kind="calibration", overwrite=overwrite, inputs=inputs)
    mode, metric = ("risk", risk) if risk else ("utility", utility)
    check_request(s, metric, mode, target)
    if out is not None and not overwrite and Path(out).exists():
        raise exists_error("--out", out)
    data = load_data(s)     # the data and the parameters it bounds, before any cluster

    def said(stage: str, n: int) -> None:
        if as_json:
            return
        what = "parameter(s) measured with every metric" if stage == "final" else "probe(s)"
        click.echo(f"{stage}: {n} {what} x replicates", err=True)
    with cluster(where) as client:
        res = run_calibrate(s, metric=metric, target=target, mode=mode, out=out,
                            client=client, tol=tol, max_iter=max_iter, overwrite=overwrite,
                            on_round=said, data=data)
    t = res.table
    tol_used = tol if tol is not None else (0.01 * abs(target) if target else 1e-3)
    write_tables(t, tables, f"methods at {metric} = {target:g}", quiet=as_json)
    if as_json:
        echo_json({"metric": metric, "target": target, "tolerance": tol_used,
                   "probes": res.probes, "seconds": round(res.seconds, 3),
                   "out": out, "table": t.reset_index().to_dict(orient="records")})
        return
    click.echo(f"{metric} = {target:g} (tolerance {tol_used:.3g}, mean over up to "
               f"{s.replicates} replicate(s)); {res.probes} masked files in "
               f"{res.seconds:.1f} s")
    click.echo(format_table(t, digits=4))
    for st in sorted(set(t["status"]) - {"ok"}):
        click.echo(f"  {st}: {STATUS[st]}")
    if out:
        click.echo(f"calibration cube written to {out}", err=True)


def _calibrate_rules(s: Any, require: tuple[str, ...], loss: str | None, max_iter: int,
                     csv_out: str | None, markdown_out: str | None, html_out: str | None,
                     overwrite: bool, as_json: bool, where: ClusterOptions, *,
                     spec_path: str) -> None:
    """``calibrate --require``: per method, the least-loss parameter meeting the rules
    (``spec_path``: the spec file, an input no table may replace)."""
    from ..audit.calibrate import calibrate_rules
    from ..audit.run import input_paths, load_data
    from ..report import format_table
    from ..rules import parse_rules
    parse_rules([*s.require, *require], list(s.metrics))      # refused before any work
    tables = check_tables({"csv": csv_out, "md": markdown_out, "html": html_out}, [None],
                          overwrite=overwrite, inputs=[spec_path, *input_paths(s)])[None]
    data = load_data(s)

    def said(stage: str, n: int) -> None:
        if not as_json:
            click.echo(f"{stage}: {n} probe(s) x replicates", err=True)
    with cluster(where) as client:
        res = calibrate_rules(s, require, loss=loss, client=client, max_iter=max_iter,
                              on_round=said, data=data)
    t = res.table
    title = f"least {t.attrs['loss']} meeting {', '.join(t.attrs['rules'])}"
    write_tables(t, tables, title, quiet=as_json)
    if as_json:
        echo_json({"loss": t.attrs["loss"], "rules": t.attrs["rules"], "probes": res.probes,
                   "seconds": round(res.seconds, 3),
                   "table": t.reset_index().to_dict(orient="records")})
        return
    click.echo(f"{title} (every replicate must meet every rule); {res.probes} masked files "
               f"in {res.seconds:.1f} s")
    click.echo(format_table(t.reset_index(level="dataset")
                            if t.index.get_level_values("dataset").nunique() > 1
                            else t.droplevel("dataset"), digits=4))
