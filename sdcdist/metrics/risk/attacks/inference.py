"""Inference (see :mod:`sdcdist.metrics.risk.attacks`): metric ``inference``.

Inference: the attacker knows a target's ``infer_aux`` columns, takes the secret
(``infer_secret``) of the nearest released record; right when equal (categorical
secret) or within the relative difference ``infer_tolerance`` of the guess
(numeric). Baseline: the secret of a random released record.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from ....errors import SdcInputError, column_positions
from ..._registry import MeasureContext
from .common import (attack_columns, attack_targets, file_order, gower_knn, register_attack,
                     risk_from_counts, take_rows)

__all__ = ["inference"]


def _guess_right(guess: np.ndarray, secret: np.ndarray, numeric: bool, tol: float
                 ) -> np.ndarray:
    both = np.isnan(guess) & np.isnan(secret)
    with np.errstate(all="ignore"):
        if numeric:
            ok = np.abs(guess - secret) <= tol * np.abs(guess + 1e-12)
        else:
            ok = guess == secret
    return both | ok


def inference(ctx: MeasureContext) -> dict[str, Any]:
    """The inference attack and its figures."""
    name = "inference"
    cols, _ = attack_columns(ctx, name)
    names = [ctx.columns[j] for j in cols]
    o = ctx.options
    secret = o["infer_secret"]
    if secret is None:
        conf = [c for c in ctx.confidential if c in ctx.columns]
        if not conf:
            raise SdcInputError(
                "inference guesses a secret column, and none is named; give infer_secret "
                "(an option) or a confidential column (the dataset's 'confidential' role)")
        secret = conf[0]
    spos = column_positions([secret], ctx.columns, what="infer_secret column",
                            where="the original file")[0]
    smpos = column_positions([secret], ctx.masked_columns, what="infer_secret column",
                             where="the masked file")[0]
    aux = o["infer_aux"]
    aux = [c for c in names if c != secret] if aux is None else (
        [aux] if isinstance(aux, str) else list(aux))
    if secret in aux:
        raise SdcInputError(f"the secret column {secret!r} is also among the inference "
                            "attacker's columns (infer_aux); leave it out of them")
    if not aux:
        raise SdcInputError("inference needs at least one column the attacker knows besides "
                            f"the secret {secret!r}; name infer_aux or attack_columns")
    apos = column_positions(aux, ctx.columns, what="infer_aux column", where="the original file")
    ampos = column_positions(aux, ctx.masked_columns, what="infer_aux column",
                             where="the masked file")
    iscat = np.array([c in set(ctx.categorical) for c in aux], np.bool_)
    numeric = secret not in set(ctx.categorical)
    tol = float(o["infer_tolerance"])
    n_o, n_s = ctx.shape_original[0], ctx.shape_masked[0]
    rng = ctx.rng(name)
    n_att = min(int(o["attack_n"]), n_o)
    n_base = min(n_s, n_att)
    order_m, ids = file_order(ctx, "masked")
    T = attack_targets(ctx, "original", n_o, n_base, [spos], rng)[:, 0]
    g = take_rows(ctx, ctx.masked, n_s, order_m[rng.choice(n_s, size=n_base, replace=False)],
                  [smpos])[:, 0]
    baseline = int(_guess_right(g, T, numeric, tol).sum())

    def attack(X: str, n: int, n_att_: int) -> int:
        T = attack_targets(ctx, X, n, n_att_, apos + [spos], rng)
        nn = gower_knn(ctx, T[:, :-1], ctx.masked, n_s, ampos, iscat, 1,
                       salt=int(rng.integers(2**63)), ids=ids)[:, 0]
        guess = take_rows(ctx, ctx.masked, n_s, order_m[nn], [smpos])[:, 0]
        return int(_guess_right(guess, T[:, -1], numeric, tol).sum())
    success = attack("original", n_o, n_att)
    control = n_c = None
    if ctx.control is not None:
        n_c = min(int(o["attack_n"]), ctx.shape_control[0])
        control = attack("control", ctx.shape_control[0], n_c)
    res = risk_from_counts((n_att, n_base, n_c), success, baseline, control,
                           float(o["attack_confidence"]))
    res.update(secret=secret, aux=aux, regression=numeric)
    return res


register_attack("inference", inference, needs={"confidential"},
                needs_unless={"confidential": "infer_secret"})
