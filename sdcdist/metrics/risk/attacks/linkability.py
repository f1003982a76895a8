"""Linkability (see :mod:`sdcdist.metrics.risk.attacks`): metric ``linkability``.

Linkability: each target record is split into the columns of the attacker's two
files (``link_aux``); each half finds its ``link_neighbors`` nearest released
records; a link succeeds when the two sets share a record. Baseline: two random
sets of released records.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from ....errors import column_positions, count_error
from ..._registry import MeasureContext
from .common import (attack_columns, attack_targets, file_order, gower_knn, register_attack,
                     risk_from_counts)

__all__ = ["linkability"]


def linkability(ctx: MeasureContext) -> dict[str, Any]:
    """The linkability attack and its figures."""
    name = "linkability"
    cols, is_cat = attack_columns(ctx, name)
    names = [ctx.columns[j] for j in cols]
    aux = ctx.options["link_aux"]
    if aux is None:
        if len(names) < 2:
            raise count_error("The attack columns of linkability", "at least 2", "columns",
                              f"1 ({names})", "it splits them in the attacker's two files: name "
                              "more attack_columns")
        h = len(names) // 2
        aux = [names[:h], names[h:]]
    aux = [list(a) if not isinstance(a, str) else [a] for a in aux]
    pos = [column_positions(a, ctx.columns, what="link_aux column", where="the original file")
           for a in aux]
    mpos = [column_positions(a, ctx.masked_columns, what="link_aux column",
                             where="the masked file") for a in aux]
    cat = set(ctx.categorical)
    iscat = [np.array([a in cat for a in part], np.bool_) for part in aux]
    o = ctx.options
    k = int(o["link_neighbors"])
    n_o, n_s = ctx.shape_original[0], ctx.shape_masked[0]
    rng = ctx.rng(name)
    n_att = min(int(o["attack_n"]), n_o)
    k_eff = min(k, n_s)

    ids = file_order(ctx, "masked")[1]

    def attack(X: str, n: int, n_att_: int) -> int:
        allpos = sorted(set(pos[0]) | set(pos[1]))
        T = attack_targets(ctx, X, n, n_att_, allpos, rng)
        where = {p: i for i, p in enumerate(allpos)}
        idx = [gower_knn(ctx, T[:, [where[p] for p in pos[s]]], ctx.masked, n_s, mpos[s],
                         iscat[s], k_eff, salt=int(rng.integers(2**63)), ids=ids)
               for s in (0, 1)]
        return _links(idx[0], idx[1])
    base_rows = [np.array([rng.choice(n_s, size=k_eff, replace=False) for _ in range(n_att)])
                 .reshape(n_att, k_eff) for _ in (0, 1)]
    baseline = _links(*base_rows)
    success = attack("original", n_o, n_att)
    control = None
    n_c = None
    if ctx.control is not None:
        n_c = min(int(o["attack_n"]), ctx.shape_control[0])
        control = attack("control", ctx.shape_control[0], n_c)
    res = risk_from_counts((n_att, n_att, n_c), success, baseline, control,
                           float(o["attack_confidence"]))
    res.update(aux=aux, neighbors=k_eff)
    return res


def _links(a: np.ndarray, b: np.ndarray) -> int:
    """Targets whose two neighbour sets share a record."""
    return int(sum(bool(set(x.tolist()) & set(y.tolist())) for x, y in zip(a, b)))


register_attack("linkability", linkability)
