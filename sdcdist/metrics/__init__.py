"""Information-loss, utility and disclosure-risk metrics, registered in :data:`REGISTRY`.

>>> from sdcdist.metrics import REGISTRY
>>> REGISTRY["DLD"].kind
'risk'
"""

from ._registry import (DEFAULT_OPTIONS, NEEDS, REGISTRY, MeasureContext, Metric, MetricResult,
                        companions, get_metric, is_companion, needing, preferred_score,
                        register, score_weights)
from .keysets import KeySets, default_keysets
from . import infoloss, prl, ranks, risk, scores, utility, frequency, attribute, suda, synthetic  # noqa: F401
from . import household, modrisk, attacks  # noqa: F401,E402  (register metrics)
from .measure import expand_requirements, measure, options_of
from .inputs import Inputs, Reason, applicable, default_metrics

__all__ = ["REGISTRY", "Metric", "MetricResult", "MeasureContext", "register", "get_metric",
           "measure", "default_keysets", "KeySets", "expand_requirements", "options_of",
           "DEFAULT_OPTIONS", "companions", "is_companion", "NEEDS", "needing",
           "score_weights", "preferred_score", "Inputs", "Reason", "applicable",
           "default_metrics"]
