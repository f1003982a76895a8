"""Ranking tables (text, CSV, Markdown, HTML) and plots (PNG, SVG) from a cube."""

from __future__ import annotations

import html
import json
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
import xarray as xr

from .cube import (Cube, cell_table, check_metrics, metric_ascending, pareto_mask, ranks,
                   select_dataset)
from .errors import SdcInputError, empty_error, unknown_name_error, value_error

__all__ = ["ranking_table", "add_scores", "with_scores", "format_table", "markdown_table",
           "html_table", "html_fragment", "write_table", "cell_label", "plot_tradeoff",
           "plot_risk_curves", "plot_rank_heatmap", "with_rules"]

#: Image formats the plots write (by the extension of ``out``).
IMAGE_FORMATS = (".png", ".svg", ".pdf")


def _metrics_for(cube: xr.Dataset, by: str, metrics: Sequence[str] | None) -> list[str]:
    """The metrics of a ranking table: the given ones, else the parts of the score ``by``
    (Table 2 shows IL, DLD, PLD, ID1 beside Score), else every metric of the cube; each
    with the companions the cube has (``so_uni_lo``, ``so_uni_hi``, ``so_uni_base``:
    :func:`sdcdist.metrics.companions`); ``by`` and its companions are not among them."""
    from .metrics import score_weights
    SCORE_WEIGHTS = score_weights()
    have = [str(m) for m in cube["metric"].values]
    if metrics:
        out = list(metrics)
    elif by in SCORE_WEIGHTS and all(k in have for k in SCORE_WEIGHTS[by]):
        out = list(SCORE_WEIGHTS[by])
    else:
        out = [m for m in have if m != by]
    from .metrics import companions
    mine = set(companions(by).values())
    return [m for m in _with_companions(out, have) if m != by and m not in mine]


def _with_companions(names: Sequence[str], have: Sequence[str]) -> list[str]:
    """``names`` with the companions among ``have`` of each, right after it."""
    from .metrics import companions
    out: list[str] = []
    for n in names:
        if n not in out:
            out.append(n)
        for c in companions(n, have).values():
            if c not in out and c not in names:
                out.append(c)
    return out


def _ranked(name: str) -> bool:
    """Whether a ranking table ranks ``name``: every metric but a companion (an interval
    bound or a baseline is read beside its metric, not ranked on its own)."""
    from .metrics import is_companion
    return not is_companion(name)


def add_scores(cube: xr.Dataset, names: Sequence[str] | None = None) -> xr.Dataset:
    """The cube with scores computed from its own cells added as metrics (in memory).

    For cubes measured without the scores but with their parts: each score is
    the weighted sum of its parts in every (method, param, replicate) cell.
    Scores whose parts are missing are skipped (named ones raise), as are
    scores the cube already has.

    >>> from sdcdist.cube import example_cube
    >>> import xarray as xr
    >>> cube = example_cube()
    >>> parts = xr.concat([cube["value"].sel(metric="DLD").expand_dims(metric=[k])
    ...                    for k in ("IL", "PLD", "ID1")], "metric")
    >>> cube = cube.drop_vars(["metric_kind", "ascending"]).reindex(
    ...     metric=["DLD", "IL1s", "IL", "PLD", "ID1"])
    >>> cube["value"].loc[{"metric": ["IL", "PLD", "ID1"]}] = parts
    >>> with_score = add_scores(cube, ["Score"])   # every part is 7 here; weights sum to 1
    >>> float(with_score.sel(method="noise", param=0.1, metric="Score")["value"][0])
    7.0
    """
    from .metrics import score_weights
    SCORE_WEIGHTS = score_weights()
    have = [str(m) for m in cube["metric"].values]
    wanted = list(names) if names is not None else list(SCORE_WEIGHTS)
    new = []
    for n in wanted:
        if n not in SCORE_WEIGHTS:
            raise unknown_name_error("score", n, SCORE_WEIGHTS)
        missing = [k for k in SCORE_WEIGHTS[n] if k not in have]
        if n in have:
            continue
        if missing:
            if names is not None:
                raise SdcInputError(f"the cube has no {', '.join(missing)}, which {n} is "
                                    f"computed from; measure them (add {n} to the spec's "
                                    "metrics)")
            continue
        new.append(n)
    if not new:
        return cube
    v = cube["value"]
    v = v.drop_vars([c for c in v.coords if c != "metric" and "metric" in v[c].dims])
    extra = xr.concat([sum(w * v.sel(metric=k, drop=True)
                           for k, w in SCORE_WEIGHTS[n].items()).expand_dims(metric=[n])
                       for n in new], "metric")
    extra = extra.transpose(*v.dims)
    coords = {"metric": have + new}
    out = cube[["value", "done"]].drop_vars(["metric_kind", "ascending"], errors="ignore")
    out = out.reindex(coords)
    out["value"] = xr.concat([v, extra], "metric")
    for c, fill in (("metric_kind", "score"), ("ascending", 1)):
        if c in cube.coords:
            vals = list(np.asarray(cube[c].values)) + [fill] * len(new)
            out = out.assign_coords({c: ("metric", np.asarray(
                vals, dtype=cube[c].dtype if c == "ascending" else object))})
    return Cube(out.data_vars, coords=out.coords, attrs=out.attrs)


def with_scores(cube: xr.Dataset, names: Sequence[str]) -> xr.Dataset:
    """``cube`` plus the scores among ``names`` it lacks, computed from its cells."""
    from .metrics import score_weights
    SCORE_WEIGHTS = score_weights()
    have = {str(m) for m in cube["metric"].values}
    missing = [n for n in names if n in SCORE_WEIGHTS and n not in have]
    return add_scores(cube, missing) if missing else cube


def ranking_table(cube: xr.Dataset, *, by: str, metrics: Sequence[str] | None = None,
                  dataset: str | None = None) -> pd.DataFrame:
    """Cells sorted by ``by`` with each metric's rank across all (method, param) cells.

    Like Table 2 of Domingo-Ferrer, Mateo-Sanz and Torra: metrics are averaged
    over replicates first; rank 1 = lowest loss / lowest risk (for metrics with
    ``ascending = 0``, such as RR, rank 1 is the largest value); ties get the
    average rank; NaN cells get no rank. ``metrics`` defaults to the parts of
    the score ``by`` (IL, DLD, PLD, ID1 for ``Score``), else all metrics.
    A metric's companions in the cube (the bounds ``_lo``, ``_hi`` of an attack's
    confidence interval and its baseline ``_base``) come along as columns
    without a rank of their own; the bounds are the means of the replicates'
    bounds.

    Returns
    -------
    pandas.DataFrame
        Index (method, param); columns ``param_name``, the metrics, ``by`` (and its
        companions), then ``"<metric> rank"`` for each (companions excepted) and
        ``"<by> rank"``; sorted by ``by`` (best first, NaN last).
    """
    cube = with_scores(cube, [by, *(metrics or [])])
    shown = _metrics_for(cube, by, metrics)
    check_metrics(cube, [by, *shown])
    table = cell_table(cube, dataset=dataset)
    if table.empty:
        raise empty_error("The cube", "it has no finished cells yet: run the audit first")
    from .metrics import companions
    by_parts = [c for c in companions(by, [str(m) for m in cube["metric"].values]).values()
                if c not in shown]
    ranked = [m for m in shown if _ranked(m)] + [by]
    rk = ranks(cube, ranked, dataset=dataset)
    out = pd.DataFrame(index=table.index)
    out["param_name"] = table["param_name"]
    out["replicates"] = table["replicates"]
    for m in [*shown, by, *by_parts]:
        out[m] = table[m]
    for m in ranked:
        out[f"{m} rank"] = rk[m]
    return out.sort_values([f"{by} rank"], kind="stable", na_position="last")


def with_rules(table: pd.DataFrame, judged: pd.DataFrame) -> pd.DataFrame:
    """``table`` (index method, param) with the columns ``acceptable`` ("yes"/"no") and
    ``breaks`` (the rules a cell breaks, with its worst replicate's value) of
    :func:`sdcdist.rules.judge`'s table."""
    out = table.copy()
    j = judged.reindex(out.index)
    out["acceptable"] = ["yes" if a is True else "no" for a in j["acceptable"].tolist()]
    out["breaks"] = j["breaks"].fillna("").tolist()
    return out


def cell_label(method: str, param_name: str, param: float) -> str:
    """``"rankswap p=15"``; methods without a parameter print their name alone."""
    if param_name == "none":
        return method
    return f"{method} {param_name}=" + ("-" if pd.isna(param) else f"{param:g}")


def _display(df: pd.DataFrame, digits: int) -> pd.DataFrame:
    """The table as text cells; a metric whose interval bounds are columns too is shown
    as ``value [lo, hi]`` (the bound columns dropped)."""
    from .metrics import companions
    show = df.reset_index()
    show.insert(0, "cell", [cell_label(m, n, p) for m, n, p in
                            zip(show["method"], show["param_name"], show["param"])])
    show = show.drop(columns=["method", "param", "param_name", "replicates"],
                     errors="ignore")
    merged = {}
    for c in show.columns:
        parts = companions(c, list(show.columns)) if not c.endswith(" rank") else {}
        if "lo" in parts and "hi" in parts and show[c].dtype.kind == "f" and not any(
                f"{parts[b]} rank" in show.columns for b in ("lo", "hi")):
            merged[c] = (parts["lo"], parts["hi"])
    for c in show.columns:
        if c.endswith(" rank"):
            show[c] = show[c].map(lambda v: "" if pd.isna(v) else f"{v:g}")
        elif c in merged:
            lo, hi = merged[c]
            show[c] = [_interval(v, a, b, digits) for v, a, b in
                       zip(show[c], show[lo], show[hi])]
        elif show[c].dtype.kind == "f":
            show[c] = show[c].map(lambda v: _number(v, digits))
    show = show.drop(columns=[b for pair in merged.values() for b in pair])
    return show.rename(columns={c: f"{c} [lo, hi]" for c in merged})


def _interval(v: float, lo: float, hi: float, digits: int) -> str:
    """``"0.42 [0.35, 0.49]"``; the value alone where a bound is missing."""
    if pd.isna(lo) or pd.isna(hi):
        return _number(v, digits)
    return f"{_number(v, digits)} [{_number(lo, digits)}, {_number(hi, digits)}]"


def _number(v: float, digits: int) -> str:
    """Fixed decimals, but small non-zero values (propensity scores) in scientific form."""
    if pd.isna(v):
        return "NaN"
    if v != 0 and abs(v) < 10.0 ** (1 - digits):
        return f"{v:.{max(digits - 1, 1)}e}"
    return f"{v:.{digits}f}"


def format_table(df: pd.DataFrame, *, digits: int = 2) -> str:
    """A plain-text rendering of a ranking table for the terminal."""
    return _display(df, digits).to_string(index=False)


def markdown_table(df: pd.DataFrame, *, digits: int = 2) -> str:
    """The table as GitHub-flavoured Markdown."""
    show = _display(df, digits)
    cols = list(show.columns)
    lines = ["| " + " | ".join(cols) + " |",
             "|" + "|".join("---" if c == "cell" else "---:" for c in cols) + "|"]
    for row in show.itertuples(index=False):
        lines.append("| " + " | ".join(str(v).replace("|", "\\|") for v in row) + " |")
    return "\n".join(lines) + "\n"


def html_fragment(df: pd.DataFrame, *, digits: int = 2) -> str:
    """The table as an HTML ``<table>`` element (for a page of one's own)."""
    return _display(df, digits).to_html(index=False, border=0, classes="sdcdist")


def html_table(df: pd.DataFrame, *, digits: int = 2, title: str = "") -> str:
    """The table as a standalone HTML page."""
    body = html_fragment(df, digits=digits)
    t = html.escape(title)
    return ("<!DOCTYPE html>\n<html><head><meta charset=\"utf-8\">"
            f"<title>{t}</title><style>table.sdcdist{{border-collapse:collapse;"
            "font-family:sans-serif;font-size:13px}table.sdcdist td,table.sdcdist th"
            "{padding:2px 8px;text-align:right}table.sdcdist td:first-child{text-align:left}"
            "table.sdcdist tr:nth-child(even){background:#f3f3f3}</style></head><body>"
            f"<h3>{t}</h3>\n{body}\n</body></html>\n")


def write_table(df: pd.DataFrame, path: str | Path, *, digits: int = 2,
                title: str = "") -> str:
    """Write a table as CSV, Markdown or HTML by the extension of ``path``."""
    path = str(path)
    ext = Path(path).suffix.lower()
    if ext == ".csv":
        df.to_csv(path)
    elif ext in (".md", ".markdown"):
        Path(path).write_text(markdown_table(df, digits=digits))
    elif ext in (".html", ".htm"):
        Path(path).write_text(html_table(df, digits=digits, title=title))
    else:
        raise value_error("The extension of a table file", "one of .csv, .md, .html",
                          ext or "no extension")
    return path


# ---------------------------------------------------------------------------
# plots


def _figure(out: str) -> Any:
    if Path(str(out)).suffix.lower() not in IMAGE_FORMATS:
        raise value_error("The extension of a plot file", f"one of {', '.join(IMAGE_FORMATS)}",
                          Path(str(out)).suffix or "no extension")
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    return plt


def _save(plt: Any, fig: Any, out: str) -> str:
    fig.tight_layout()
    fig.savefig(str(out))
    plt.close(fig)
    return str(out)


def plot_tradeoff(cube: xr.Dataset, *, risk: str, loss: str, out: str,
                  title: str | None = None, dataset: str | None = None) -> str:
    """Scatter of ``risk`` against ``loss`` per method (replicate means), Pareto front marked.

    Any pair of metrics works; each metric's ``ascending`` coordinate says which
    end is better when the front is found. A metric with a confidence interval in the
    cube (``so_uni`` with ``so_uni_lo`` and ``so_uni_hi``) is drawn with error bars
    (the mean of the replicates' bounds). Writes PNG, SVG or PDF by the
    extension of ``out``; returns ``out``.
    """
    plt = _figure(out)
    check_metrics(cube, [risk, loss])
    table = cell_table(cube, dataset=dataset)
    if table.empty:
        raise empty_error("The cube", "it has no finished cells yet: run the audit first")
    t = table.reset_index()
    asc = metric_ascending(cube)
    front = pareto_mask(t[risk].to_numpy() * (1 if asc[risk] else -1),
                        t[loss].to_numpy() * (1 if asc[loss] else -1))
    have = [str(m) for m in cube["metric"].values]
    fig, ax = plt.subplots(figsize=(7, 5), dpi=120)
    for method, g in t.groupby("method", sort=False):
        g = g.sort_values("param")
        line, = ax.plot(g[loss], g[risk], "o-", label=method, alpha=0.8, ms=4)
        xerr, yerr = _interval_errors(g, loss, have), _interval_errors(g, risk, have)
        if xerr is not None or yerr is not None:
            ax.errorbar(g[loss], g[risk], xerr=xerr, yerr=yerr, fmt="none",
                        ecolor=line.get_color(), alpha=0.6, capsize=2, lw=1)
        if g["param_name"].iloc[0] != "none":
            for _, row in g.iterrows():
                ax.annotate(f"{row['param']:g}", (row[loss], row[risk]), fontsize=8,
                            xytext=(3, 3), textcoords="offset points")
    f = t[front].sort_values(loss)
    ax.plot(f[loss], f[risk], "k--", lw=1, label="Pareto front")
    ax.scatter(f[loss], f[risk], s=120, facecolors="none", edgecolors="k")
    _mark_better_corner(ax, left=asc[loss], bottom=asc[risk])
    ax.set_xlabel(_axis_label(loss, asc[loss]))
    ax.set_ylabel(_axis_label(risk, asc[risk]))
    ax.set_title(title or f"{risk} against {loss}")
    if _interval_errors(t, risk, have) is not None or _interval_errors(t, loss, have) is not None:
        ax.text(0.99, 0.01, "bars: confidence interval (mean of the replicates' bounds)",
                transform=ax.transAxes, ha="right", va="bottom", fontsize=7, color="grey")
    ax.grid(alpha=0.3)
    ax.legend(fontsize=8, ncol=2)
    return _save(plt, fig, out)


def _interval_errors(t: pd.DataFrame, metric: str, have: Sequence[str]
                     ) -> np.ndarray | None:
    """Error bars (2 x rows: below, above) of ``metric`` from its confidence interval
    bounds (``<metric>_lo``, ``<metric>_hi``) when the cube has them, else None."""
    from .metrics import companions
    parts = companions(metric, have)
    if "lo" not in parts or "hi" not in parts:
        return None
    v = t[metric].to_numpy(float)
    lo, hi = t[parts["lo"]].to_numpy(float), t[parts["hi"]].to_numpy(float)
    return np.vstack([np.clip(v - lo, 0, None), np.clip(hi - v, 0, None)])


def _axis_label(metric: str, ascending: bool) -> str:
    """``"DLD (% of records, lower is better)"``: the unit from the metric registry."""
    from .metrics import REGISTRY
    m = REGISTRY.get(metric)
    unit = f"{m.unit}, " if m is not None and m.unit else ""
    return f"{metric} ({unit}{'lower' if ascending else 'higher'} is better)"


def _mark_better_corner(ax: Any, *, left: bool, bottom: bool) -> None:
    """Shade the corner of the plot where both measures are best and label it."""
    x, y = (0.0 if left else 1.0), (0.0 if bottom else 1.0)
    w, h = 0.16, 0.16
    ax.add_patch(_rectangle()((x - (0 if left else w), y - (0 if bottom else h)),
                                        w, h, transform=ax.transAxes, color="#2e9b4f",
                                        alpha=0.15, lw=0, zorder=0))
    ax.annotate("better", xy=(x + (0.015 if left else -0.015), y + (0.02 if bottom else -0.02)),
                xytext=(x + (0.2 if left else -0.2), y + (0.2 if bottom else -0.2)),
                xycoords="axes fraction", textcoords="axes fraction", color="#1b6e36",
                fontsize=8, ha="center", va="center",
                arrowprops={"arrowstyle": "->", "color": "#1b6e36", "lw": 1.2})


def _rectangle() -> Any:
    from matplotlib.patches import Rectangle
    return Rectangle


def plot_risk_curves(cube: xr.Dataset, *, metric: str, out: str,
                     methods: Sequence[str] | None = None, target: float | None = None,
                     title: str | None = None, dataset: str | None = None) -> str:
    """Each method's ``metric`` against its parameter (like Figure 1 of Domingo-Ferrer,
    Ricci and Soria): one panel per method, the mean over replicates with a band of
    ±1 sd, and ``target`` as a horizontal line. A metric with a confidence interval
    in the cube (``so_uni`` with ``so_uni_lo``, ``so_uni_hi``) gets error bars from
    the mean of the replicates' bounds.

    ``cube`` may also be a calibration cube (:mod:`sdcdist.audit.calibrate`): the
    curves are then its probes and the calibrated parameters are marked.
    """
    if target is not None and not np.isfinite(target):
        raise value_error("the 'target' of a curves plot", "a finite number", target)
    plt = _figure(out)
    calibration = "calibrated_param" in cube
    if calibration:
        info = json.loads(cube.attrs["calibration"])
        if metric != info["metric"]:
            raise SdcInputError(f"this calibration cube holds probes of {info['metric']!r}, "
                                f"not {metric!r}")
        target = info["target"] if target is None else target
        names = [str(d) for d in np.atleast_1d(cube["dataset"].values)]
        if dataset is None and len(names) > 1:
            raise SdcInputError(f"the cube holds datasets {', '.join(names)}; choose one")
        cube = cube.sel(dataset=dataset or names[0]) if "dataset" in cube.dims else cube
    else:
        check_metrics(cube, [metric])
        cube = select_dataset(cube, dataset)
    all_methods = [str(m) for m in cube["method"].values]
    methods = list(methods) if methods else all_methods
    bad = [m for m in methods if m not in all_methods]
    if bad:
        raise unknown_name_error("method", bad[0], all_methods)
    bounds: tuple[str, ...] = ()
    if not calibration:
        from .metrics import companions
        parts = companions(metric, [str(m) for m in cube["metric"].values])
        if "lo" in parts and "hi" in parts:
            bounds = (parts["lo"], parts["hi"])
    n = len(methods)
    cols = min(n, 4)
    rows = -(-n // cols)
    fig, axes = plt.subplots(rows, cols, figsize=(3.2 * cols, 2.6 * rows), dpi=120,
                             sharey=True, squeeze=False)
    for ax, m in zip(axes.flat, methods):
        mi = all_methods.index(m)
        pname = str(cube["param_name"].values[mi])
        if calibration:
            ps = cube["probe_param"].values[mi]
            vs = cube["probe_value"].values[mi]
            ok = np.isfinite(ps)
            order = np.argsort(ps[ok])
            ax.plot(ps[ok][order], vs[ok][order], "o-", ms=3)
            cp = float(cube["calibrated_param"].values[mi])
            if np.isfinite(cp):
                ach = "achieved_risk" if "achieved_risk" in cube else "achieved_utility"
                ax.plot([cp], [float(cube[ach].values[mi])], "r*", ms=10,
                        label=f"{pname}={cp:.4g}")
                ax.legend(fontsize=7)
            else:
                ax.text(0.5, 0.9, str(cube["status"].values[mi]), transform=ax.transAxes,
                        ha="center", fontsize=8, color="r")
        else:
            v = cube["value"].isel(method=mi).sel(metric=metric).load()
            done = cube["done"].isel(method=mi).load().values.sum(axis=-1) > 0
            ps = cube["param"].values[done]
            mean = v.mean("replicate", skipna=True).values[done]
            sd = v.std("replicate", skipna=True).values[done]
            if ps.size:
                line, = ax.plot(ps, mean, "o-", ms=3)
                ax.fill_between(ps, mean - sd, mean + sd, alpha=0.2)
                if bounds:
                    lo, hi = (cube["value"].isel(method=mi).sel(metric=b).load()
                              .mean("replicate", skipna=True).values[done] for b in bounds)
                    ax.errorbar(ps, mean, yerr=np.vstack([np.clip(mean - lo, 0, None),
                                                          np.clip(hi - mean, 0, None)]),
                                fmt="none", ecolor=line.get_color(), capsize=2, lw=1)
        if target is not None:
            ax.axhline(target, color="grey", ls=":", lw=1)
        ax.set_title(m, fontsize=9)
        ax.set_xlabel(pname, fontsize=8)
        ax.grid(alpha=0.3)
    for ax in list(axes.flat)[n:]:
        ax.axis("off")
    for ax in axes[:, 0]:
        ax.set_ylabel(metric)
    fig.suptitle(title or f"{metric} against each method's parameter"
                 + (" (bars: confidence interval)" if bounds else ""), fontsize=10)
    return _save(plt, fig, out)


def plot_rank_heatmap(cube: xr.Dataset, *, out: str, metrics: Sequence[str] | None = None,
                      by: str | None = None, top: int | None = None,
                      title: str | None = None, dataset: str | None = None) -> str:
    """Heatmap of each metric's rank (rows: cells, best by ``by`` first; columns: metrics).

    Rank 1 (best) is dark; cells with no value are blank. Without ``metrics``, every
    metric of the cube but the companions (interval bounds, baselines).
    """
    plt = _figure(out)
    cube = with_scores(cube, [*(metrics or []), *([by] if by else [])])
    names = list(metrics) if metrics else [str(m) for m in cube["metric"].values
                                           if _ranked(str(m))]
    if by is not None and by not in names:
        names = [by, *names]
    rk = ranks(cube, names, dataset=dataset)
    if by is not None:
        rk = rk.sort_values(by, kind="stable", na_position="last")
    if top:
        rk = rk.head(top)
    t = cell_table(cube, dataset=dataset)
    labels = [cell_label(m, t.loc[(m, p), "param_name"], p) for m, p in rk.index]
    fig, ax = plt.subplots(figsize=(1.0 + 0.7 * len(names), 1.2 + 0.18 * len(rk)), dpi=120)
    im = ax.imshow(rk.to_numpy(float), aspect="auto", cmap="viridis_r",
                   interpolation="nearest")
    ax.set_xticks(range(len(names)), names, rotation=45, ha="right", fontsize=8)
    ax.set_yticks(range(len(rk)), labels, fontsize=6 if len(rk) > 40 else 8)
    if len(rk) * len(names) <= 400:
        for i, j in np.ndindex(len(rk), len(names)):
            v = rk.iat[i, j]
            if np.isfinite(v):
                ax.text(j, i, f"{v:g}", ha="center", va="center", fontsize=6, color="w")
    fig.colorbar(im, ax=ax, label="rank (1 = best)")
    ax.set_title(title or ("ranks" + (f", sorted by {by}" if by else "")), fontsize=10)
    return _save(plt, fig, out)
