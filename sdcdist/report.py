"""Ranking tables and plots from a cube."""

from __future__ import annotations

from collections.abc import Sequence
import numpy as np
import pandas as pd
import xarray as xr

from .cube import cell_table
from .errors import SdcInputError

__all__ = ["ranking_table", "format_table", "pareto_front", "plot_tradeoff"]


def _check_metrics(cube: xr.Dataset, names: Sequence[str]) -> None:
    have = [str(m) for m in cube["metric"].values]
    for n in names:
        if n not in have:
            raise SdcInputError(f"the cube has no metric {n!r}. Metrics in this cube: "
                                f"{', '.join(have)}.")


def ranking_table(cube: xr.Dataset, *, by: str, metrics: Sequence[str] | None = None
                  ) -> pd.DataFrame:
    """Cells sorted by ``by`` with each metric's rank across all (method, param) cells.

    Metrics are averaged over replicates first. Rank 1 = lowest loss / lowest
    risk (for metrics with ``ascending = 0``, such as RR, rank 1 is the
    largest value); ties get the average rank; NaN cells get no rank.
    Like Table 2 of Domingo-Ferrer, Mateo-Sanz and Torra.

    Returns
    -------
    pandas.DataFrame
        Index (method, param); for each metric ``M`` the columns ``M`` and
        ``M rank``; sorted by ``by`` (best first).
    """
    metrics = list(metrics) if metrics else [str(m) for m in cube["metric"].values]
    _check_metrics(cube, [by, *metrics])
    if by not in metrics:
        metrics = [by, *metrics]
    table = cell_table(cube)
    if table.empty:
        raise SdcInputError("the cube has no finished cells yet; run the audit first")
    asc = dict(zip([str(m) for m in cube["metric"].values],
                   [bool(a) for a in cube["ascending"].values]))
    out = pd.DataFrame(index=table.index)
    out["param_name"] = table["param_name"]
    for m in metrics:
        out[m] = table[m]
        out[f"{m} rank"] = table[m].rank(ascending=asc[m], method="average", na_option="keep")
    return out.sort_values(f"{by} rank", kind="stable")


def format_table(df: pd.DataFrame, *, digits: int = 3) -> str:
    """A plain-text rendering of a ranking table for the terminal."""
    show = df.reset_index()
    show["param"] = [f"{n}={p:g}" if n != "none" else "-"
                     for n, p in zip(show["param_name"], show["param"])]
    show = show.drop(columns=["param_name"])
    for c in show.columns:
        if c.endswith(" rank"):
            show[c] = show[c].map(lambda v: "" if pd.isna(v) else f"{v:g}")
        elif show[c].dtype.kind == "f":
            show[c] = show[c].map(lambda v: "NaN" if pd.isna(v) else f"{v:.{digits}g}")
    return show.to_string(index=False)


def pareto_front(risk: np.ndarray, loss: np.ndarray) -> np.ndarray:
    """Boolean mask of the points no other point beats on both risk and loss (lower is better)."""
    risk = np.asarray(risk, dtype=float)
    loss = np.asarray(loss, dtype=float)
    ok = np.isfinite(risk) & np.isfinite(loss)
    front = np.zeros(len(risk), dtype=bool)
    for i in np.flatnonzero(ok):
        dominated = ok & (risk <= risk[i]) & (loss <= loss[i]) & \
            ((risk < risk[i]) | (loss < loss[i]))
        front[i] = not dominated.any()
    return front


def plot_tradeoff(cube: xr.Dataset, *, risk: str, loss: str, out: str,
                  title: str | None = None) -> str:
    """Scatter of risk against loss per method (mean over replicates), Pareto front marked.

    Writes PNG or SVG by the extension of ``out``; returns ``out``.
    """
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    _check_metrics(cube, [risk, loss])
    table = cell_table(cube)
    if table.empty:
        raise SdcInputError("the cube has no finished cells yet; run the audit first")
    t = table.reset_index()
    asc = dict(zip([str(m) for m in cube["metric"].values],
                   [bool(a) for a in cube["ascending"].values]))
    r = t[risk].to_numpy() if asc[risk] else -t[risk].to_numpy()
    front = pareto_front(r, t[loss].to_numpy())
    fig, ax = plt.subplots(figsize=(7, 5), dpi=120)
    for method, g in t.groupby("method", sort=False):
        g = g.sort_values("param")
        ax.plot(g[loss], g[risk], "o-", label=method, alpha=0.8)
        for _, row in g.iterrows():
            ax.annotate(f"{row['param']:g}", (row[loss], row[risk]), fontsize=7,
                        xytext=(3, 3), textcoords="offset points")
    f = t[front].sort_values(loss)
    ax.plot(f[loss], f[risk], "k--", lw=1, label="Pareto front")
    ax.scatter(f[loss], f[risk], s=120, facecolors="none", edgecolors="k")
    ax.set_xlabel(f"{loss} (information loss)")
    ax.set_ylabel(f"{risk} (disclosure risk)")
    ax.set_title(title or f"{risk} against {loss}")
    ax.grid(alpha=0.3)
    ax.legend(fontsize=8)
    fig.tight_layout()
    fig.savefig(out)
    plt.close(fig)
    return out

