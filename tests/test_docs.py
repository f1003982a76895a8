"""The docs read the registries: the generated tables must be current."""

from __future__ import annotations

from pathlib import Path

from sdcdist import docs
from sdcdist.masking import REGISTRY as METHODS
from sdcdist.metrics import REGISTRY as METRICS
from sdcdist.options import OPTIONS

CATALOG = Path(__file__).resolve().parents[1] / "docs" / "catalog.md"


def test_catalog_tables_are_current():
    text = CATALOG.read_text()
    assert docs.render(text) == text, "run: python -m sdcdist.docs docs/catalog.md"
    for name in [*METHODS, *METRICS, *OPTIONS]:
        assert f"| `{name}` |" in text
