"""Masking methods: one module per family, all registered in :data:`REGISTRY`.

>>> from sdcdist.masking import REGISTRY
>>> REGISTRY["rankswap"].param
'p'
"""

from ._registry import REGISTRY, MaskingMethod, get_method, register
from . import (compression, distribution, microaggregation, noise, resampling,  # noqa: F401
               swapping, synthetic)  # (modules register their methods)

__all__ = ["REGISTRY", "MaskingMethod", "get_method", "register"]
