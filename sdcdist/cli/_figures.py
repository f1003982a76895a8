"""How the figures of ``risk`` and ``measure`` are shown beside their values: an
attack's confidence interval and baseline, and why a figure is undefined."""

from __future__ import annotations

from typing import Any

import click

__all__ = ["interval_figures", "interval_text", "undefined_figures", "note_undefined"]


def interval_figures(name: str, res: Any) -> dict[str, Any]:
    """The confidence interval and baseline of an interval metric (the attacks: their
    ``lo``, ``hi`` and ``baseline``, kept in the result's detail) for JSON output:
    ``{"interval": [lo, hi], "baseline": b}``; empty for other metrics."""
    from ..metrics import companions
    if not companions(name) or "lo" not in res.info or "hi" not in res.info:
        return {}
    out: dict[str, Any] = {"interval": [float(res.info["lo"]), float(res.info["hi"])]}
    if "baseline" in res.info:
        out["baseline"] = float(res.info["baseline"])
    return out


def interval_text(name: str, res: Any) -> str:
    """``"  [0.012, 0.061], baseline 0.019"`` for an interval metric, else empty."""
    f = interval_figures(name, res)
    if not f:
        return ""
    lo, hi = f["interval"]
    base = f", baseline {f['baseline']:.4g}" if "baseline" in f else ""
    return f"  [{lo:.4g}, {hi:.4g}]{base}"


def undefined_figures(name: str, res: Any) -> dict[str, Any]:
    """``{"undefined": reason}`` for a NaN figure, for JSON output
    (:func:`~sdcdist.metrics.measure.undefined_reason`); empty for a figure with a value."""
    from ..metrics.measure import undefined_reason
    why = undefined_reason(name, res)
    return {"undefined": why} if why else {}


def note_undefined(results: dict[str, Any]) -> None:
    """A note on stderr for each NaN figure of ``results`` (name -> result), saying why
    (:func:`~sdcdist.metrics.measure.undefined_note`)."""
    from ..metrics.measure import undefined_note
    for name, res in results.items():
        note = undefined_note(name, res)
        if note:
            click.echo(note, err=True)
