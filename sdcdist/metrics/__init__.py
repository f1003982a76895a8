"""Information-loss, utility and disclosure-risk metrics, registered in :data:`REGISTRY`.

>>> from sdcdist.metrics import REGISTRY
>>> REGISTRY["DLD"].kind
'risk'
"""

from ._registry import (DEFAULT_OPTIONS, NEEDS, REGISTRY, MeasureContext, Metric, MetricResult,
                        companions, get_metric, is_companion, needing, preferred_loss,
                        preferred_score, register, score_weights)
from .keysets import KeySets, default_keysets
# the measures register on import; this order is the catalogue's
from .loss import infoloss  # noqa: F401,I001
from .risk import prl  # noqa: F401
from .loss import ranks  # noqa: F401
from .risk import linkage, interval  # noqa: F401
from . import scores  # noqa: F401
from .loss import propensity, emd  # noqa: F401
from .risk import frequency  # noqa: F401
from .loss import categorical  # noqa: F401
from .risk import attribute, suda, synthetic, cap, household, modrisk, attacks  # noqa: F401
from .loss import synthutility  # noqa: F401
from .measure import expand_requirements, measure, options_of
from .inputs import Inputs, Reason, applicable, default_metrics

__all__ = ["REGISTRY", "Metric", "MetricResult", "MeasureContext", "register", "get_metric",
           "measure", "default_keysets", "KeySets", "expand_requirements", "options_of",
           "DEFAULT_OPTIONS", "companions", "is_companion", "NEEDS", "needing",
           "score_weights", "preferred_score", "preferred_loss", "Inputs", "Reason", "applicable",
           "default_metrics"]
