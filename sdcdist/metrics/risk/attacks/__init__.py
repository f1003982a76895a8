"""The three criteria of the Article 29 Working Party: singling out, linkability and
inference, each measured by an attack on the released (masked) file, as anonymeter
(Giomi et al., 2023) defines them.

Three sets of records take part: the original records that were masked (``ori``,
the context's original file), the released file (``syn``, the masked file) and the
control set (``control``): original records held out of what was masked (the
audit's ``control`` share, or ``measure(..., control=...)``). Each attack is run

- against ``ori`` (the main attack: its success rate r_main over n attacks);
- as a baseline that guesses at random (r_base);
- against the control set (r_control), whose records the release cannot reveal:
  what the attacker gets right there comes from what the data say about everyone.

A success rate is the Wilson score estimate (k + z²/2) / (n + z²) with error
z / (n + z²) sqrt(k (n - k) / n + z²/4), z = probit((1 + c) / 2) the two-sided normal
quantile of the confidence level c (option ``attack_confidence``: 0.95 gives z = 1.96). The risk is the residual (r_main - r_control) /
(1 - r_control), its error propagated from both, bounded to [0, 1] with its
interval; without a control set the risk is r_main. Each attack registers four
metrics: the risk (``so_uni``, ``so_multi``, ``linkability``, ``inference``), the
bounds of its interval (``_lo``, ``_hi``) and the baseline's risk (``_base``); a
risk below its baseline means the attack did no better than guessing.

One module per attack (:mod:`.singling_out`, :mod:`.linkability`, :mod:`.inference`),
each registering its metrics on import, and what they share in :mod:`.common`.

Work on the cluster: counts of queries over record chunks (exact integer sums; each
chunk is indexed once, its rows sorted by each column, and a query tests only the rows
of its most selective term: :func:`map_chunks`, :func:`reduce_chunks`),
nearest-neighbour searches as blocks of targets x released rows (:func:`pairwise_reduce`),
each block keeping its k nearest by (distance, tie key): any chunking and worker count gives
the same figures, bit for bit. Singling out works on
distinct records (a record's 64-bit hash of its values; the first of equal records
is kept).
"""

from .common import (ATTACK_METRICS, ATTACKS, bound_risk, gower_knn, residual,  # noqa: F401
                     risk_from_counts, success_rate)
# each attack registers its four metrics on import; this order is the catalogue's
from . import singling_out, linkability, inference  # noqa: F401,E402,I001
from .singling_out import ControlFitError, control_correction, count_queries  # noqa: E402

__all__ = ["ATTACKS", "ATTACK_METRICS", "ControlFitError", "success_rate", "residual",
           "bound_risk", "risk_from_counts", "gower_knn", "count_queries", "control_correction"]
