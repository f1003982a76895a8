"""Information-loss, utility and disclosure-risk metrics, registered in :data:`REGISTRY`.

>>> from sdcdist.metrics import REGISTRY
>>> REGISTRY["DLD"].kind
'risk'
"""

from ._registry import (DEFAULT_OPTIONS, NEEDS, REGISTRY, MeasureContext, Metric, MetricResult,
                        companions, get_metric, is_companion, needing, register)
from .keysets import KeySets, default_keysets
from . import infoloss, prl, ranks, risk, scores, utility, frequency, attribute, suda, synthetic  # noqa: F401
from . import household, modrisk, attacks, synthutility  # noqa: F401,E402  (register metrics)
from .measure import expand_requirements, measure, options_of

__all__ = ["REGISTRY", "Metric", "MetricResult", "MeasureContext", "register", "get_metric",
           "measure", "default_keysets", "KeySets", "expand_requirements", "options_of",
           "DEFAULT_OPTIONS", "companions", "is_companion", "NEEDS", "needing"]
