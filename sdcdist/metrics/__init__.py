"""Information-loss, utility and disclosure-risk metrics, registered in :data:`REGISTRY`.

>>> from sdcdist.metrics import REGISTRY
>>> REGISTRY["DLD"].kind
'risk'
"""

from ._registry import (DEFAULT_OPTIONS, NEEDS, REGISTRY, MeasureContext, Metric, MetricResult,
                        companions, get_metric, is_companion, needing, register)
from .keysets import KeySets, default_keysets
from .measure import expand_requirements, measure, options_of

#: The modules that register metrics, imported on demand (``REGISTRY`` calls :func:`_load`):
#: all of them for a listing or a name not in :data:`_DECLARED`
_MODULES = ("infoloss", "prl", "ranks", "risk", "scores", "utility", "frequency", "attribute",
            "suda", "synthetic", "household", "modrisk", "attacks")
#: metric names -> the one module that declares them, for the names whose look-up need not
#: import the rest (tests/test_metrics_lazy.py checks each entry)
_DECLARED = {n: "frequency" for n in ("uniques", "kviol2", "kviol3", "kviol5", "IR_mean",
                                      "IR_max", "ER")}


def _load(name: object = None) -> None:
    """Import the module declaring metric ``name`` (every metric module when ``name`` is
    None or not in :data:`_DECLARED`)."""
    import importlib
    if REGISTRY.loader is None:
        return
    REGISTRY.loader = None                      # no re-entry while the modules register
    one = _DECLARED.get(name) if isinstance(name, str) else None
    try:
        if one is not None:
            importlib.import_module(f"{__name__}.{one}")
            if dict.__contains__(REGISTRY, name):
                REGISTRY.loader = _load         # the rest stays unimported
                return
        for mod in _MODULES:
            importlib.import_module(f"{__name__}.{mod}")
        # the listing in module order whatever was imported first (a metric's place in it,
        # e.g. in docs/catalog.md, must not depend on which look-up came first)
        rank = {m: i for i, m in enumerate(_MODULES)}
        items = sorted(dict.items(REGISTRY), key=lambda kv: rank.get(
            kv[1].func.__module__[len(__name__) + 1:].split(".")[0], len(rank)))
        dict.clear(REGISTRY)
        dict.update(REGISTRY, items)
    except BaseException:
        REGISTRY.loader = _load
        raise


def __getattr__(name: str) -> object:
    # ``sdcdist.metrics.infoloss`` and the like without importing them first
    if name in _MODULES:
        import importlib
        return importlib.import_module(f"{__name__}.{name}")
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


REGISTRY.loader = _load  # type: ignore[attr-defined]

__all__ = ["REGISTRY", "Metric", "MetricResult", "MeasureContext", "register", "get_metric",
           "measure", "default_keysets", "KeySets", "expand_requirements", "options_of",
           "DEFAULT_OPTIONS", "companions", "is_companion", "NEEDS", "needing"]
