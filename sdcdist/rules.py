"""Release rules (``DLD <= 5``, ``kviol3 <= 1``, ``ldiv_distinct >= 2``) and the
recommendation they lead to.

A rule is ``METRIC OP NUMBER`` with ``OP`` one of ``<=``, ``<``, ``>=``, ``>``, ``==``;
it is read here once (tokenised like :mod:`sdcdist.query`'s filters, never handed to
``eval``) and checked against the metrics known to sdcdist and to the cube.

How a cube is judged (what a data owner releasing one file needs):

* **Acceptable cell.** A cell is a (method, parameter); a release is one replicate of
  it. A cell is acceptable when *every* finished replicate meets *every* rule, so that
  whichever replicate is released meets them (a cell whose metric is NaN in some
  replicate, not measured, breaks the rule: it cannot be shown to meet it).
* **Loss.** The recommendation minimises one loss metric's replicate mean: ``--loss``,
  else ``IL_S2`` if the cube has it, else ``IL1s``, else the cube's first metric of kind
  ``loss`` (:func:`default_loss`). Among acceptable cells of equal loss, one that no
  other acceptable cell beats on risk (a cell of the Pareto front below), then the earlier
  in the cube (the spec's method order, then the smaller parameter).
* **Pareto front.** Acceptable cells that no other acceptable cell beats on the loss and
  on every risk metric named in the rules (replicate means, each metric's better
  direction); rules on non-risk metrics only: on their metrics.
* **None acceptable.** The *closest* cell is the one with the smallest total normalised
  violation: the sum over the rules of the worst replicate's shortfall ``max(0, gap)``
  divided by the metric's spread over the cube (largest minus smallest finished value;
  1 when the spread is 0), ``gap = value - bound`` for ``<``/``<=``, ``bound - value``
  for ``>``/``>=``, ``|value - bound|`` for ``==``; a NaN value counts 1 (the whole
  spread). Ties: smaller loss, then cube order.

>>> parse_rule("DLD <= 5", ["DLD", "IL1s"])
Rule(name='DLD', op='<=', bound=5.0)
>>> parse_rule("DLD = 5", ["DLD"])  # doctest: +ELLIPSIS
Traceback (most recent call last):
...
sdcdist.errors.SdcInputError: cannot read the rule 'DLD = 5': unexpected '=' at position 4. ...
"""

from __future__ import annotations

import json
import operator
import re
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import pandas as pd

from .errors import SdcInputError

__all__ = ["Rule", "parse_rule", "parse_rules", "spec_rules", "cube_rules", "judge",
           "recommend", "Recommendation", "default_loss", "OPS", "MAX_RULES"]

#: The comparison operators of a rule.
OPS: dict[str, Callable[[Any, Any], Any]] = {
    "<=": operator.le, "<": operator.lt, ">=": operator.ge, ">": operator.gt,
    "==": operator.eq}
#: At most this many rules (a spec or a command line).
MAX_RULES = 100

_HELP = ("A rule compares one metric with a number: METRIC OP NUMBER with OP one of "
         "<=, <, >=, >, == (e.g. DLD <= 5, ldiv_distinct >= 2).")
_TOKEN = re.compile(r"""
    (?P<ws>\s+)
  | (?P<num>[+-]?(?:\d+\.?\d*|\.\d+)(?:[eE][+-]?\d+)?)
  | (?P<name>[A-Za-z_][A-Za-z0-9_]*)
  | (?P<op><=|>=|==|<|>)
""", re.VERBOSE)


@dataclass(frozen=True)
class Rule:
    """``name op bound``: a metric and the bound it must meet."""

    name: str
    op: str
    bound: float

    def __str__(self) -> str:
        return f"{self.name} {self.op} {self.bound:g}"

    def holds(self, values: np.ndarray) -> np.ndarray:
        """Elementwise: the value meets the rule (NaN never does)."""
        v = np.asarray(values, dtype=float)
        return OPS[self.op](v, self.bound) & ~np.isnan(v)

    def gap(self, values: np.ndarray) -> np.ndarray:
        """How far each value is from meeting the rule (<= 0 where it is met, except for
        a strict bound hit exactly: 0)."""
        v = np.asarray(values, dtype=float)
        if self.op in ("<", "<="):
            return v - self.bound
        if self.op in (">", ">="):
            return self.bound - v
        return np.abs(v - self.bound)


def _error(text: str, what: str) -> SdcInputError:
    shown = repr(text) if len(text) <= 100 else f"{text[:100]!r}... ({len(text)} characters)"
    return SdcInputError(f"cannot read the rule {shown}: {what}. {_HELP}")


def parse_rule(text: Any, names: Sequence[str] | None = None, *,
               where: str = "") -> Rule:
    """Read one rule; ``names``: the metrics it may name (the cube's), None: any metric
    sdcdist knows. Raises :class:`SdcInputError` naming what is wrong."""
    if not isinstance(text, str):
        raise SdcInputError(f"a rule{where} must be text like 'DLD <= 5', got a "
                            f"{type(text).__name__}. {_HELP}")
    toks, pos = [], 0
    while pos < len(text):
        m = _TOKEN.match(text, pos)
        if m is None:
            raise _error(text, f"unexpected {text[pos]!r} at position {pos}")
        if m.lastgroup != "ws":
            toks.append((m.lastgroup, m.group(), pos))
        pos = m.end()
    want = [("name", "a metric name"),
            ("op", "a comparison operator (<=, <, >=, >, ==)"), ("num", "a number")]
    if not toks:
        raise _error(text, "it is empty")
    for i, (kind, what) in enumerate(want):
        if i >= len(toks):
            raise _error(text, f"it ends where {what} was expected")
        if toks[i][0] != kind:
            raise _error(text, f"expected {what} at position {toks[i][2]}, found "
                               f"{toks[i][1]!r}")
    if len(toks) > 3:
        raise _error(text, f"unexpected {toks[3][1]!r} at position {toks[3][2]} (one "
                           "comparison per rule; give several rules for several bounds)")
    name, op, num = toks[0][1], toks[1][1], float(toks[2][1])
    if not np.isfinite(num):
        raise _error(text, "the bound must be a finite number")
    _check_name(text, name, names)
    return Rule(name, op, num)


def _check_name(text: str, name: str, names: Sequence[str] | None) -> None:
    from .metrics import REGISTRY
    if name not in REGISTRY:
        from .errors import unknown_name_error
        raise SdcInputError(f"the rule {text!r} names no metric sdcdist knows: "
                            f"{unknown_name_error('metric', name, REGISTRY)}")
    if names is not None and name not in names:
        raise SdcInputError(f"the rule {text!r} names metric {name!r}, which this cube "
                            f"did not measure. Metrics in this cube: {', '.join(names)}.")


def parse_rules(texts: Iterable[Any], names: Sequence[str] | None = None, *,
                what: str = "--require") -> list[Rule]:
    """Read several rules (duplicates kept once, in order)."""
    texts = list(texts)
    if len(texts) > MAX_RULES:
        raise SdcInputError(f"{what} gives {len(texts)} rules, more than {MAX_RULES}; a "
                            "release is judged on a few bounds")
    out: list[Rule] = []
    for i, t in enumerate(texts):
        r = parse_rule(t, names, where=f" ({what} #{i + 1})")
        if r not in out:
            out.append(r)
    return out


def spec_rules(value: Any, metrics: Sequence[str]) -> list[str]:
    """The ``require:`` of a spec, checked: a list of rule texts on the spec's metrics
    (normalised to ``METRIC OP NUMBER``)."""
    if isinstance(value, str):
        value = [value]
    if not isinstance(value, list) or not value:
        from .errors import value_error
        raise value_error("'require'", "a non-empty list of rules like 'DLD <= 5'",
                          got_text=f"a {type(value).__name__}", hint=_HELP)
    rules = parse_rules(value, None, what="'require'")
    for r in rules:
        if r.name not in metrics:
            raise SdcInputError(f"the rule '{r}' in 'require' names metric {r.name!r}, which "
                                "the spec does not measure; add it to 'metrics' or drop the "
                                "rule")
    return [str(r) for r in rules]


def cube_rules(cube: Any, extra: Iterable[str] = ()) -> list[Rule]:
    """The rules of a cube's spec (``require:``) followed by ``extra`` (``--require``),
    each checked against the cube's metrics."""
    names = [str(m) for m in cube["metric"].values]
    try:
        spec = json.loads(cube.attrs.get("spec", "{}"))
    except (TypeError, ValueError):
        spec = {}
    texts = list(spec.get("require") or []) if isinstance(spec, dict) else []
    rules = parse_rules(texts, names, what="the spec's 'require'") if texts else []
    for r in parse_rules(list(extra), names):
        if r not in rules:
            rules.append(r)
    return rules


def default_loss(cube: Any, loss: str | None = None) -> str:
    """The loss measure of a recommendation: ``loss`` if given (a metric of the cube),
    else the registry's preferred loss among the cube's metrics (IL_S2, then IL1s:
    :func:`sdcdist.metrics.preferred_loss`), else the cube's first metric of kind loss."""
    names = [str(m) for m in cube["metric"].values]
    if loss is not None:
        if loss not in names:
            raise SdcInputError(f"the cube has no metric {loss!r} (--loss). Metrics in this "
                                f"cube: {', '.join(names)}.")
        return loss
    from .metrics import preferred_loss
    pref = preferred_loss(names)
    if pref is not None:
        return pref
    kinds = [str(k) for k in cube["metric_kind"].values]
    for n, k in zip(names, kinds):
        if k == "loss":
            return n
    raise SdcInputError("the cube has no loss metric to recommend by; name one with --loss "
                        f"(metrics in this cube: {', '.join(names)})")


def _cells(cube: Any, dataset: str | None) -> tuple[Any, list[tuple[int, int]]]:
    from .cube import select_dataset
    c = select_dataset(cube, dataset)
    done = np.asarray(c["done"].values)
    cells = [(mi, pi) for mi in range(done.shape[0]) for pi in range(done.shape[1])
             if done[mi, pi].any()]
    if not cells:
        raise SdcInputError("the cube has no finished cells yet; run the audit first")
    return c, cells


def judge(cube: Any, rules: Sequence[Rule], *, dataset: str | None = None,
          loss: str | None = None) -> pd.DataFrame:
    """Each finished (method, param) cell judged against ``rules``.

    Returns
    -------
    pandas.DataFrame
        Index (method, param); ``acceptable`` (bool), ``breaks`` (the broken rules with
        the worst replicate's value, ``""`` when acceptable), ``violation`` (the total
        normalised violation, 0 when acceptable), ``loss`` (the loss metric's replicate
        mean) and ``order`` (the cell's position in the cube).
    """
    c, cells = _cells(cube, dataset)
    metrics = [str(m) for m in c["metric"].values]
    value = np.asarray(c["value"].values, dtype=float)          # (M, P, K, R)
    done = np.asarray(c["done"].values) == 1                    # (M, P, R)
    lname = default_loss(c, loss)
    li = metrics.index(lname)
    spread = {}
    for r in rules:
        k = metrics.index(r.name)
        vals = value[:, :, k, :][done]
        vals = vals[np.isfinite(vals)]
        s = float(vals.max() - vals.min()) if vals.size else 0.0
        spread[r.name] = s if s > 0 else 1.0
    rows = []
    for order, (mi, pi) in enumerate(cells):
        reps = done[mi, pi]
        broken, total = [], 0.0
        for r in rules:
            v = value[mi, pi, metrics.index(r.name), reps]
            ok = r.holds(v)
            if not ok.all():
                g = r.gap(v)
                worst_gap = np.where(np.isnan(g), np.inf, g).max()
                total += (1.0 if not np.isfinite(worst_gap)
                          else max(0.0, float(worst_gap)) / spread[r.name])
                bad = v[~ok]
                shown = "NaN" if np.isnan(bad).any() else \
                    f"{float(bad[np.argmax(r.gap(bad))]):.4g}"
                broken.append(f"{r} (worst replicate {shown})")
        lv = value[mi, pi, li, reps]
        rows.append({"method": str(c["method"].values[mi]),
                     "param": float(c["param"].values[pi]),
                     "acceptable": not broken, "breaks": "; ".join(broken),
                     "violation": total,
                     "loss": float(np.nanmean(lv)) if np.isfinite(lv).any() else np.nan,
                     "order": order})
    return pd.DataFrame(rows).set_index(["method", "param"])


@dataclass
class Recommendation:
    """What :func:`recommend` found."""

    loss: str
    rules: list[Rule]
    table: pd.DataFrame                  # judge()'s table
    recommended: tuple[str, float] | None
    closest: tuple[str, float] | None
    front: list[tuple[str, float]] = field(default_factory=list)
    front_metrics: list[str] = field(default_factory=list)

    def lines(self) -> list[str]:
        """The recommendation as text lines."""
        rules = ", ".join(map(str, self.rules)) or "(none)"
        n_ok = int(self.table["acceptable"].sum())
        out = [f"rules: {rules}; {n_ok} of {len(self.table)} cells acceptable (every "
               "replicate must meet every rule)"]
        if self.recommended is not None:
            m, p = self.recommended
            out.append(f"recommended: {m} {p:g} (least {self.loss} among acceptable cells, "
                       f"{self.table.loc[(m, p), 'loss']:.4g})")
            front = ", ".join(f"{a} {b:g}" for a, b in self.front)
            out.append(f"Pareto front of acceptable cells ({self.loss} vs "
                       f"{', '.join(self.front_metrics)}): {front}")
        else:
            m, p = self.closest
            row = self.table.loc[(m, p)]
            out.append(f"no cell is acceptable; closest: {m} {p:g} (total normalised "
                       f"violation {row['violation']:.4g}; breaks {row['breaks']})")
        return out

    def as_dict(self) -> dict[str, Any]:
        def cell(c: tuple[str, float] | None) -> Any:
            return None if c is None else {"method": c[0], "param": c[1]}
        return {"loss": self.loss, "rules": [str(r) for r in self.rules],
                "recommended": cell(self.recommended), "closest": cell(self.closest),
                "front": [cell(c) for c in self.front], "front_metrics": self.front_metrics,
                "acceptable": [cell(i) for i, ok in self.table["acceptable"].items() if ok]}


def recommend(cube: Any, rules: Sequence[Rule], *, loss: str | None = None,
              dataset: str | None = None) -> Recommendation:
    """The least-loss acceptable cell, the Pareto front of the acceptable cells, or (none
    acceptable) the closest cell; the rules of the module docstring."""
    from .cube import metric_ascending, pareto_front
    t = judge(cube, rules, dataset=dataset, loss=loss)
    c, _ = _cells(cube, dataset)
    lname = default_loss(c, loss)
    asc = metric_ascending(c)
    kinds = dict(zip([str(m) for m in c["metric"].values],
                     [str(k) for k in c["metric_kind"].values]))
    named = list(dict.fromkeys(r.name for r in rules))
    risks = [n for n in named if kinds.get(n) == "risk" and n != lname] or \
        [n for n in named if n != lname]
    lossv = t["loss"].to_numpy(float)
    ok = t["acceptable"].to_numpy(bool)
    order = t["order"].to_numpy(int)
    key_loss = np.where(np.isnan(lossv), np.inf, lossv * (1 if asc[lname] else -1))
    if ok.any():
        idx = np.flatnonzero(ok)
        from .cube import cell_table
        means = cell_table(c).reindex(t.index)
        pts = [key_loss[idx]] + [means[n].to_numpy(float)[idx] * (1 if asc[n] else -1)
                                 for n in risks]
        front_mask = pareto_front(np.column_stack(pts))
        fidx = idx[front_mask]
        fidx = fidx[np.lexsort((order[fidx], key_loss[fidx]))]
        # the least loss; among equal losses a cell of the front (lower risk), then the
        # earlier in the cube; the front is empty only when risks are NaN
        best = fidx[0] if fidx.size else idx[np.lexsort((order[idx], key_loss[idx]))[0]]
        return Recommendation(lname, list(rules), t, t.index[best], None,
                              [t.index[i] for i in fidx], risks)
    viol = t["violation"].to_numpy(float)
    closest = np.lexsort((order, key_loss, viol))[0]
    return Recommendation(lname, list(rules), t, None, t.index[closest], [], risks)
