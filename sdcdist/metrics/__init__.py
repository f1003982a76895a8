"""Information-loss, utility and disclosure-risk metrics, registered in :data:`REGISTRY`.

>>> from sdcdist.metrics import REGISTRY
>>> REGISTRY["DLD"].kind
'risk'
"""

from ._registry import (DEFAULT_OPTIONS, NEEDS, REGISTRY, MeasureContext, Metric, MetricResult,
                        companions, family_metrics, get_metric, is_companion, needing,
                        preferred_loss, preferred_score, register, score_weights)
from .keysets import KeySets, default_keysets
from .measure import expand_requirements, measure, options_of
from .inputs import Inputs, Reason, applicability, applicable, default_metrics

#: The modules that register metrics, imported on demand (``REGISTRY`` calls :func:`_load`):
#: all of them for a listing or a name not in :data:`_DECLARED`; this order is the
#: catalogue's
_MODULES = ("loss.infoloss", "risk.prl", "loss.ranks", "risk.linkage", "risk.interval", "scores",
            "loss.propensity", "loss.emd", "risk.frequency", "loss.categorical",
            "risk.attribute", "risk.suda", "risk.synthetic", "risk.cap", "risk.household",
            "risk.modrisk", "risk.attacks", "loss.pmse", "loss.quality",
            "loss.regression")
#: metric names -> the one module that declares them, for the names whose look-up need not
#: import the rest (tests/test_metrics_lazy.py checks each entry)
_DECLARED = {n: "risk.frequency" for n in ("uniques", "kviol2", "kviol3", "kviol5", "IR_mean",
                                      "IR_max", "ER")}


def _load(name: object = None) -> None:
    """Import the module declaring metric ``name`` (every metric module when ``name`` is
    None or not in :data:`_DECLARED`). ``REGISTRY`` calls it under its lock, once at a
    time; it stops calling once every module is imported."""
    import importlib
    one = _DECLARED.get(name) if isinstance(name, str) else None
    if one is not None:
        importlib.import_module(f"{__name__}.{one}")
        if dict.__contains__(REGISTRY, name):
            return                              # the rest stays unimported
    for mod in _MODULES:
        importlib.import_module(f"{__name__}.{mod}")
    # the listing in module order whatever was imported first (a metric's place in it,
    # e.g. in docs/catalog.md, must not depend on which look-up came first)
    items = sorted(dict.items(REGISTRY), key=lambda kv: _rank(kv[1].func.__module__))
    dict.clear(REGISTRY)
    dict.update(REGISTRY, items)
    REGISTRY.loader = None


def _rank(module: str) -> int:
    """The place in :data:`_MODULES` of the module (or package) that holds ``module``."""
    rel = module[len(__name__) + 1:]
    for i, m in enumerate(_MODULES):
        if rel == m or rel.startswith(m + "."):
            return i
    return len(_MODULES)


def __getattr__(name: str) -> object:
    # ``sdcdist.metrics.loss`` and the like without importing them first
    if name in {m.split(".")[0] for m in _MODULES}:
        import importlib
        return importlib.import_module(f"{__name__}.{name}")
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


REGISTRY.loader = _load  # type: ignore[attr-defined]

__all__ = ["REGISTRY", "Metric", "MetricResult", "MeasureContext", "register", "get_metric",
           "measure", "default_keysets", "KeySets", "expand_requirements", "options_of",
           "DEFAULT_OPTIONS", "companions", "is_companion", "NEEDS", "needing",
           "score_weights", "preferred_score", "preferred_loss", "family_metrics", "Inputs",
           "Reason", "applicable", "applicability",
           "default_metrics"]
