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


def test_attack_docs_state_the_z_the_code_uses():
    """The Wilson intervals' z: the two-sided quantile (1.96 at 0.95), in code and docs."""
    import math

    from sdcdist.metrics.risk.attacks import success_rate
    n = 1000.0
    rate, _ = success_rate(n, 0.0, 0.95)        # (z²/2) / (n + z²)
    z = math.sqrt(2 * rate * n / (1 - 2 * rate))
    assert abs(z - 1.959963984540054) < 1e-9
    doc = (Path(__file__).resolve().parents[1] / "docs" / "catalog.md").read_text()
    assert "0.95 gives z = 1.96" in doc
    assert "probit of `attack_confidence` (0.95)" not in doc


def test_catalog_names_the_content_order_the_code_uses():
    """CATALOG allows sorted key values or a 64-bit hash; docs/catalog.md says the hash,
    and the content order is indeed a function of a 64-bit hash of the values alone."""
    import numpy as np

    from sdcdist.linkage.assignment import content_order
    doc = (Path(__file__).resolve().parents[1] / "docs" / "catalog.md").read_text()
    assert "sdcdist uses the hash: splitmix64" in " ".join(doc.split())
    V = np.array([[3.0, 1.0], [1.0, 2.0], [2.0, 0.0], [0.0, 5.0]])
    order = content_order(V)
    assert not np.array_equal(V[order], V[np.lexsort(V.T[::-1])])   # not the sorted order
    perm = np.array([2, 0, 3, 1])
    assert np.array_equal(V[perm][content_order(V[perm])], V[order])
