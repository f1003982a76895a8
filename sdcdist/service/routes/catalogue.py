"""The catalogue: the masking methods and the metrics a spec may name (the registries)."""

from __future__ import annotations

from typing import Any

from fastapi import APIRouter, Depends

from ..helpers import Service, clean

__all__ = ["router"]


def router(svc: Service) -> APIRouter:
    """The routes of the catalogue (``/v1/methods``, ``/v1/metrics``, ``/v1/presets``),
    on the shared state ``svc``."""
    r = APIRouter()
    Who = Depends(svc.principal)

    @r.get("/v1/methods", tags=["catalogue"])
    def methods(who: str = Who) -> list[dict[str, Any]]:
        """The masking methods a spec may name (the registry of `sdcdist methods`)."""
        from ...masking import REGISTRY
        from ...masking import options_of as for_method
        return [{"name": n, "param": m.param, "kind": m.kind,
                 "range": None if m.kind == "none" else m.allowed_text(),
                 "low": None if m.kind == "none" else clean(float(m.low)),
                 "high": None if m.kind == "none" else clean(float(m.high)),
                 "random": bool(m.random), "description": m.description,
                 "acts_on": m.acts_on,
                 "options": [o.name for o in for_method(n) if o.spec]}
                for n, m in REGISTRY.items()]

    @r.get("/v1/metrics", tags=["catalogue"])
    def metrics(who: str = Who) -> list[dict[str, Any]]:
        """The metrics a spec may name (the registry of `sdcdist metrics`), each with its
        unit, which end is better, the inputs it needs besides the two files (``needs``:
        a holdout file, confidential columns, a household id) and whether it is computed
        only when named (``by_name``), so that a form offers what applies, and the score
        ranked by by default (``preferred``), which the web page starts with."""
        from ...metrics import REGISTRY
        return [{"name": n, "kind": m.kind, "per_keyset": bool(m.keysets),
                 "ascending": bool(m.ascending), "requires": list(m.requires or ()),
                 "needs": sorted(m.needs), "by_name": bool(m.by_name),
                 "preferred": bool(m.preferred), "part_of": m.part_of or None,
                 "unit": m.unit, "lower_is_better": bool(m.ascending),
                 "description": m.description, "reference": m.reference}
                for n, m in REGISTRY.items()]

    @r.get("/v1/presets", tags=["catalogue"])
    def presets(who: str = Who) -> list[dict[str, Any]]:
        """The page's presets by data type (numeric, categorical keys, mixed, synthetic):
        the methods each starts with (and their starting values) and its metrics, picked
        by what the registries declare (`sdcdist.service.presets`)."""
        from ..presets import resolve
        return resolve()

    return r
