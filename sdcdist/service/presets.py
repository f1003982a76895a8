"""The page's presets by data type: a short, sensible starting set of methods and metrics.

A preset is data: rules over what the registries declare, never a list of metric names
(``tests/test_layers.py``). Methods are picked by the columns they mask (``acts_on``) and
by family (the module a method is defined in), the first method of each family in
registry order; metrics by the score the service ranks by (``preferred``), by kind and
by family (the module a metric is defined in), the first ``per_family`` of each.
Only what :func:`resolve` finds in the registries is offered, so a preset never names
something that does not exist, and what cannot apply to the chosen data is left out by
the page (``/v1/datasets/{id}/applicable``).

The starting grid of a method with a parameter (:func:`start_grid`) is spread over the
low end of its declared range: three values of a random method's strength, two of a
group size.

:func:`applicability` says, for one dataset, why each method and metric cannot apply (or
None): the metrics through :func:`sdcdist.metrics.applicable` on the dataset's
:class:`~sdcdist.metrics.Inputs`, the masking methods through their declared columns
(``acts_on``) and data checks (:func:`sdcdist.masking.check_data`). The reasons name
columns, roles and counts, never a record's value.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any

__all__ = ["PRESETS", "Preset", "resolve", "start_grid", "applicability"]


@dataclass(frozen=True)
class Preset:
    """One preset: which methods (``acts_on`` and families) and metrics it starts with."""

    name: str
    label: str
    help: str
    acts_on: tuple[str, ...]
    families: tuple[str, ...] = ()          # method modules; empty: every family
    preferred_score: bool = False           # the score the service ranks by (its parts too)
    metric_families: tuple[str, ...] = ()   # metric modules (kinds risk/loss/utility)
    per_family: int = 3
    #: starting values where the spread of the declared range is not what a first audit
    #: compares (PRAM's pd: the probability a category is kept is drawn in [pd, 1];
    #: sdcMicro's default is 0.8)
    grids: dict[str, list[float]] = field(default_factory=dict)


#: The presets, in the order the page shows them.
PRESETS: tuple[Preset, ...] = (
    Preset("numeric", "Numeric data",
           "every column a number (incomes, ages, measurements): additive noise, rank "
           "swapping and microaggregation, judged by the default risk-utility score",
           acts_on=("numeric",), families=("noise", "swapping", "microaggregation"),
           preferred_score=True),
    Preset("categorical", "Categorical keys",
           "the keys are categories (region, sex, age group): PRAM and local "
           "suppression, judged by k-anonymity, individual risk and what changed",
           acts_on=("categorical",), families=("pram", "suppression"),
           metric_families=("risk.frequency", "loss.categorical"),
           grids={"pram": [0.6, 0.8, 0.9]}),
    Preset("mixed", "Mixed data",
           "numeric columns and categorical keys: noise and microaggregation on the numbers, "
           "PRAM on the categories, the default score and frequency risk",
           acts_on=("numeric", "categorical"), families=("noise", "microaggregation", "pram"),
           preferred_score=True, metric_families=("risk.frequency",), per_family=2,
           grids={"pram": [0.6, 0.8, 0.9]}),
    Preset("synthetic", "Synthetic data",
           "a synthetic file in place of the original: the generators, judged by "
           "distance to the closest record and by their utility",
           acts_on=("mixed",), metric_families=("risk.synthetic", "loss.quality"),
           per_family=2),
)


def _family(func: Any, root: str) -> str:
    return func.__module__.removeprefix(root)


def start_grid(method: Any) -> list[float]:
    """The starting parameter values of a method with a parameter: a random method's three
    strengths at 5, 10 and 20 % of its range (up to 1; 2, 5 and 10 % of a range up to 100,
    a percentage), a privacy budget's 0.1, 1 and 10, an integer parameter's two or three
    smallest useful values; [] for a method without."""
    if method.kind == "none":
        return []
    low, high = float(method.low), float(method.high)
    if method.kind == "int":
        start = low if not getattr(method, "open_low", False) else low + 1
        if math.isinf(high) or high - start > 100:
            # a group size: the smallest and a larger one
            return [start + 1, start + 3]
        step = max(1.0, round((high - start) / 10))
        return [start + step * i for i in range(3) if start + step * i <= high]
    if getattr(method, "infinite", False):  # a privacy budget: three orders of magnitude
        return [0.1, 1.0, 10.0]
    top = high if math.isfinite(high) and high <= 100 else 1.0
    span = top - low
    if top > 1.0:                           # a percentage (rank swapping's p)
        return [float(f"{low + span * f:.2g}") for f in (0.02, 0.05, 0.1)]
    return [float(f"{max(low, span * f):.2g}") for f in (0.05, 0.1, 0.2)]


def resolve() -> list[dict[str, Any]]:
    """The presets as the page reads them: name, label, help, the methods each starts with
    (name and starting values) and its metrics."""
    from ..masking import REGISTRY as METHODS
    from ..metrics import family_metrics, preferred_score
    out = []
    for p in PRESETS:
        seen: set[str] = set()
        methods: dict[str, list[float]] = {}
        for n, m in METHODS.items():
            fam = _family(m.func, "sdcdist.masking.")
            if m.acts_on not in p.acts_on or m.steps or fam in seen:
                continue
            if p.families and fam not in p.families:
                continue
            seen.add(fam)
            methods[n] = list(p.grids.get(n) or start_grid(m))
        metrics = [preferred_score()] if p.preferred_score else []
        metrics += family_metrics(p.metric_families, p.per_family)
        out.append({"name": p.name, "label": p.label, "help": p.help,
                    "methods": methods, "metrics": metrics})
    return out


def _method_reason(name: str, m: Any, md: Any) -> str | None:
    from ..errors import SdcInputError
    from ..masking import check_data, method_options
    skip = set(md.categorical) | {c for c in (md.weight, md.household) if c}
    if m.acts_on == "numeric" and not m.steps and \
            not [c for c in md.columns if c not in skip]:
        return (f"no numeric column to mask ({name} masks numeric columns only; this "
                "dataset's columns are all categorical or roles it never masks)")
    grid = start_grid(m)
    try:
        check_data(name, md.values, grid[:1] or [0.0],
                   method_options(name, columns=md.columns, roles=md.roles,
                                  categorical=md.categories))
    except SdcInputError as exc:
        return str(exc)
    except Exception as exc:            # noqa: BLE001 - a check that cannot run says so
        return f"its data check cannot run on this dataset ({type(exc).__name__})"
    return None


def applicability(md: Any, keys: Any = None) -> dict[str, dict[str, str | None]]:
    """``{"methods": {name: reason or None}, "metrics": {name: reason or None}}`` for the
    dataset ``md`` (a :class:`~sdcdist.data.Microdata`) with key columns ``keys`` (None:
    its key role). A score (or any metric computed from others) does not apply when one
    of its parts does not."""
    from ..masking import REGISTRY as METHODS
    from ..metrics import applicability
    from ..metrics.inputs import Inputs
    conf = [c for c in (md.roles.get("confidential") or []) if c in md.columns]
    use = list(keys) if keys is not None else list(md.roles.get("key") or [])
    inputs = Inputs.from_microdata(md, confidential=conf, keys=tuple(use),
                                   shape_original=md.values.shape,
                                   shape_masked=md.values.shape)
    methods = {n: _method_reason(n, m, md) for n, m in METHODS.items()}
    metrics = {n: (str(r) if r is not None else None) for n, r in applicability(inputs).items()}
    return {"methods": methods, "metrics": metrics}
