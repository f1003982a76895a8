"""What the service shows of a cube: the default ranking, metric explanations, a cache.

The default ranking
-------------------
A release decision weighs disclosure risk against information loss, so the
service never ranks by a loss (or a risk) alone unless asked to. When a
request does not say ``by``, cells are ranked by the first of these that the
cube has, or has every part of (:func:`default_ranking`):

1. ``Score2`` [DMT §6]: 0.5 IL_S2 + 0.25 DLD + 0.125 ID1 + 0.125 ID2. Half
   information loss, half disclosure risk, every part on the same 0-100 scale,
   and each part cheap to measure (no probabilistic linkage); it is the score
   the demo and ``make demo`` rank by.
2. Any other registered score (``Score``, the [YWC] scores), in registry order.
3. ``balanced``: the mean of a cell's two ranks, its mean rank over the cube's
   risk metrics and its mean rank over its loss and utility metrics (rank 1 =
   lowest). Ranks need no common scale, so any risk metric and any loss metric
   combine, and a cell is good only if it is good on both sides.

A cube with no risk metric (or no loss metric) can only be ranked on one side;
the ranking then says so in ``warning``.

The trade-off plot of a ranking uses its loss part (``IL_S2`` for Score2, the
first loss metric for ``balanced``) and its heaviest risk part, so the plot and
the table speak of the same measures.

The cache
---------
:class:`ResultCache` keeps finished responses (JSON, CSV, PNG) keyed by the
audit, its state (status, cells written, runs: it changes with every cell the
audit writes) and the request, so a finished cube is computed once per
question and then answered from memory.
"""

from __future__ import annotations

import threading
from collections import OrderedDict
from collections.abc import Callable, Sequence
from typing import Any

import numpy as np
import pandas as pd

__all__ = ["default_ranking", "balanced_table", "metric_info", "ResultCache", "BALANCED",
           "PREFERRED_SCORE"]

#: the ``by`` of the rank-balanced ranking (not a metric: a way to rank)
BALANCED = "balanced"


def __getattr__(name: str) -> Any:
    # the score ranked by when the cube has it (see the module docstring for why): the one
    # the metric registry marks preferred, read when asked for (importing this module
    # does not import the metrics)
    if name == "PREFERRED_SCORE":
        from ..metrics import preferred_score
        return preferred_score()
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


def _kinds(cube: Any) -> dict[str, str]:
    return dict(zip([str(m) for m in cube["metric"].values],
                    [str(k) for k in cube["metric_kind"].values]))


def metric_info(names: Sequence[str]) -> list[dict[str, Any]]:
    """Name, kind, unit, which end is better and the description of each metric, from the
    metric registry (names it does not know get their name only)."""
    from ..metrics import REGISTRY
    out = []
    for n in names:
        m = REGISTRY.get(n)
        if m is None:
            out.append({"name": n, "kind": None, "unit": "", "lower_is_better": True,
                        "description": "", "reference": ""})
            continue
        out.append({"name": n, "kind": m.kind, "unit": m.unit,
                    "lower_is_better": bool(m.ascending), "description": m.description,
                    "reference": m.reference})
    return out


def default_ranking(cube: Any) -> dict[str, Any]:
    """How to rank ``cube`` when nobody said: ``{by, risk, loss, parts, why, warning}``.

    ``by`` is a metric (a score) or :data:`BALANCED`; ``risk`` and ``loss`` are the
    metrics of the trade-off plot; ``parts`` the metrics shown beside ``by``.
    """
    from ..metrics import REGISTRY, preferred_score, score_weights
    SCORE_WEIGHTS = score_weights()
    kinds = _kinds(cube)
    have = set(kinds)
    first = preferred_score()
    scores = [first, *[s for s in SCORE_WEIGHTS if s != first]]
    for s in scores:
        parts = list(SCORE_WEIGHTS[s])
        if all(p in have for p in parts):            # the cube has it, or computes it
            w = SCORE_WEIGHTS[s]
            risks = sorted((p for p in parts if REGISTRY[p].kind == "risk"),
                           key=lambda p: -w[p])
            losses = [p for p in parts if REGISTRY[p].kind in ("loss", "utility")]
            return {"by": s, "risk": risks[0] if risks else None,
                    "loss": losses[0] if losses else None, "parts": parts,
                    "why": f"{s} = {REGISTRY[s].description.removeprefix('composite score ')}"
                           f"; {_share(w, 'risk')} of its weight on disclosure risk, "
                           f"{_share(w, 'loss')} on information loss",
                    "warning": None}
        if s in have:        # a score without its parts in the cube: still a score
            return {"by": s, "risk": None, "loss": None, "parts": [], "why":
                    f"{s}: {REGISTRY[s].description}" if s in REGISTRY else s,
                    "warning": None}
    from ..metrics import is_companion
    # an interval bound or a baseline is read beside its risk, never ranked on its own
    risks = [m for m, k in kinds.items() if k == "risk" and not is_companion(m)]
    losses = [m for m, k in kinds.items() if k in ("loss", "utility")]
    warning = None
    if not risks or not losses:
        side = "disclosure risk" if not risks else "information loss"
        warning = (f"this audit measured no {side} metric, so its ranking weighs only one "
                   f"side; add a {side} metric (or {preferred_score()}) to the spec")
    return {"by": BALANCED, "risk": risks[0] if risks else None,
            "loss": losses[0] if losses else None, "parts": [*losses, *risks],
            "why": "balanced: the mean of each cell's mean rank over the risk metrics ("
                   + (", ".join(risks) or "none") + ") and its mean rank over the loss "
                   "metrics (" + (", ".join(losses) or "none") + "); rank 1 is best",
            "warning": warning}


def _share(weights: Any, side: str) -> str:
    from ..metrics import REGISTRY
    tot = sum(abs(v) for v in weights.values())
    part = sum(abs(v) for k, v in weights.items()
               if (REGISTRY[k].kind == "risk") == (side == "risk"))
    if tot == 0:
        return "none"
    return f"{100 * part / tot:.0f} %"


def balanced_table(cube: Any, *, risks: Sequence[str], losses: Sequence[str],
                   dataset: str | None = None) -> pd.DataFrame:
    """A ranking table (as :func:`sdcdist.report.ranking_table`) by :data:`BALANCED`:
    the mean of the mean risk rank and the mean loss rank (one side alone when the other
    has no metric). Sorted best first."""
    from ..cube import cell_table, ranks
    from ..errors import SdcInputError, empty_error
    shown = [*losses, *risks]
    if not shown:
        raise SdcInputError("the cube has no risk or loss metric to rank by")
    table = cell_table(cube, dataset=dataset)
    if table.empty:
        raise empty_error("The cube", "it has no finished cells yet: run the audit first")
    rk = ranks(cube, shown, dataset=dataset)
    sides = [rk[list(s)].mean(axis=1, skipna=True) for s in (risks, losses) if s]
    score = sum(sides) / len(sides)
    out = pd.DataFrame(index=table.index)
    out["param_name"] = table["param_name"]
    out["replicates"] = table["replicates"]
    for m in shown:
        out[m] = table[m]
    out[BALANCED] = score
    for m in shown:
        out[f"{m} rank"] = rk[m]
    out[f"{BALANCED} rank"] = score.rank(method="average", na_option="keep")
    return out.sort_values([f"{BALANCED} rank"], kind="stable", na_position="last")


class ResultCache:
    """A thread-safe LRU of computed responses, bounded in entries and bytes.

    Keys are tuples that start with the audit id; :meth:`get_or_make` computes a
    missing entry once even when several requests ask for it at the same time.
    """

    def __init__(self, *, entries: int = 512, max_bytes: int = 64 * 2**20):
        self.entries, self.max_bytes = entries, max_bytes
        self._d: OrderedDict[tuple, tuple[bytes, str]] = OrderedDict()
        self._bytes = 0
        self._lock = threading.Lock()
        self._making: dict[tuple, threading.Lock] = {}
        self.hits = self.misses = 0

    def get(self, key: tuple) -> tuple[bytes, str] | None:
        with self._lock:
            v = self._d.get(key)
            if v is not None:
                self._d.move_to_end(key)
                self.hits += 1
            return v

    def put(self, key: tuple, value: tuple[bytes, str]) -> None:
        size = len(value[0])
        if size > self.max_bytes // 4:
            return                            # too big to be worth keeping
        with self._lock:
            old = self._d.pop(key, None)
            if old is not None:
                self._bytes -= len(old[0])
            self._d[key] = value
            self._bytes += size
            while len(self._d) > self.entries or self._bytes > self.max_bytes:
                _, v = self._d.popitem(last=False)
                self._bytes -= len(v[0])

    def get_or_make(self, key: tuple, make: Callable[[], tuple[bytes, str]]
                    ) -> tuple[bytes, str]:
        hit = self.get(key)
        if hit is not None:
            return hit
        with self._lock:
            lock = self._making.setdefault(key, threading.Lock())
        with lock:
            hit = self.get(key)
            if hit is None:
                with self._lock:
                    self.misses += 1
                hit = make()
                self.put(key, hit)
        with self._lock:
            self._making.pop(key, None)
        return hit

    def drop(self, audit_id: str) -> None:
        """Forget an audit's entries (its state changed or it was deleted)."""
        with self._lock:
            for k in [k for k in self._d if k and k[0] == audit_id]:
                self._bytes -= len(self._d.pop(k)[0])


def finite(v: Any) -> Any:
    """JSON-safe numbers: NaN and infinities become None."""
    if isinstance(v, (float, np.floating)) and not np.isfinite(v):
        return None
    return v
