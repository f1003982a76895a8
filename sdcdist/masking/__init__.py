"""Masking methods: one module per family, all registered in :data:`REGISTRY`.

>>> from sdcdist.masking import REGISTRY
>>> REGISTRY["rankswap"].param
'p'
"""

from ._registry import REGISTRY, MaskingMethod, get_method, options_of, register
from ._roles import method_options, missing_roles
from ._checks import check_data
# modules register their methods on import; this order is the catalogue's (`sdcdist methods`)
from . import (noise, swapping, microaggregation, resampling,  # noqa: F401, I001
               compression, distribution, synthetic, pram, recoding, suppression,
               copula, cart, privbayes)

__all__ = ["REGISTRY", "MaskingMethod", "get_method", "register", "method_options", "options_of",
           "missing_roles", "check_data"]
