"""Composite scores that weigh information loss against disclosure risk.

Each score is a registered metric of kind ``"score"`` whose ``requires`` lists
the metrics it combines; an audit measures those too, and the score reads
them from the cell's context with :meth:`MeasureContext.value`. Scores are
linear in their parts, so their mean over replicates is the score of the
replicate means.

- ``Score``  [DMT §5]  0.5 IL + 0.125 DLD + 0.125 PLD + 0.25 ID1
- ``Score2`` [DMT §6]  0.5 IL_S2 + 0.25 DLD + 0.125 ID1 + 0.125 ID2
- ``Ascore``, ``Dscore``, ``Sscore`` [YWC]  100 (s + r) / 2 with s = s0, s1, s2
  and r = PLD / 100; the ``_20`` variants take r = PLD20 / 100.
"""

from __future__ import annotations

from collections.abc import Mapping

from ._registry import MeasureContext, register

__all__ = ["SCORE_WEIGHTS", "weighted_score"]

#: name -> weights of the metrics combined (the score is their weighted sum).
SCORE_WEIGHTS: dict[str, Mapping[str, float]] = {
    "Score": {"IL": 0.5, "DLD": 0.125, "PLD": 0.125, "ID1": 0.25},
    "Score2": {"IL_S2": 0.5, "DLD": 0.25, "ID1": 0.125, "ID2": 0.125},
    # 100 (s + PLD/100) / 2 = 50 s + 0.5 PLD
    "Ascore": {"s0": 50.0, "PLD": 0.5},
    "Dscore": {"s1": 50.0, "PLD": 0.5},
    "Sscore": {"s2": 50.0, "PLD": 0.5},
    "Ascore_20": {"s0": 50.0, "PLD20": 0.5},
    "Dscore_20": {"s1": 50.0, "PLD20": 0.5},
    "Sscore_20": {"s2": 50.0, "PLD20": 0.5},
}

_DESCRIPTIONS = {
    "Score": ("0.5 IL + 0.125 DLD + 0.125 PLD + 0.25 ID1", "[DMT §5]"),
    "Score2": ("0.5 IL_S2 + 0.25 DLD + 0.125 ID1 + 0.125 ID2", "[DMT §6]"),
    "Ascore": ("100 (s0 + PLD/100) / 2", "[YWC]"),
    "Dscore": ("100 (s1 + PLD/100) / 2", "[YWC]"),
    "Sscore": ("100 (s2 + PLD/100) / 2", "[YWC]"),
    "Ascore_20": ("100 (s0 + PLD20/100) / 2", "[YWC §4.2]"),
    "Dscore_20": ("100 (s1 + PLD20/100) / 2", "[YWC §4.2]"),
    "Sscore_20": ("100 (s2 + PLD20/100) / 2", "[YWC §4.2]"),
}


def weighted_score(values: Mapping[str, float], name: str) -> float:
    """The score ``name`` from the values of its parts (a mapping metric -> value).

    >>> weighted_score({"IL": 10.0, "DLD": 4.0, "PLD": 2.0, "ID1": 40.0}, "Score")
    15.75
    """
    return sum(w * float(values[k]) for k, w in SCORE_WEIGHTS[name].items())


def _make(name: str) -> None:
    weights = SCORE_WEIGHTS[name]
    text, ref = _DESCRIPTIONS[name]

    def score(ctx: MeasureContext) -> float:
        return weighted_score({k: ctx.value(k) for k in weights}, name)

    score.__name__ = score.__qualname__ = f"score_{name}"
    score.__doc__ = f"{name} = {text} {ref}."
    # Score2 is what the service ranks by when nobody said how (sdcdist.service.results)
    register(name, kind="score", weights=weights, reference=ref, preferred=name == "Score2",
             unit="points (weighted sum of its parts)",
             description=f"composite score {text} (lower is better)")(score)


for _name in SCORE_WEIGHTS:
    _make(_name)
