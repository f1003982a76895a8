"""Attribute disclosure: what the key combination of a released record tells about its
confidential values.

An intruder who knows a person's key values (the quasi-identifiers) finds the
person's equivalence class in the release: the records sharing that key
combination. Even without knowing which record is the person's, the class's
confidential values may disclose the person's value (every record of the class
has the same diagnosis) or shift the intruder's belief far from what the whole
file says (t-closeness, β-likeness, δ-disclosure). All measures are computed on
the masked (released) file, per equivalence class of the categorical key
columns (those of the frequency metrics), for each confidential column:

- ``ldiv_distinct``: number of distinct values in the class (distinct l-diversity);
- ``ldiv_entropy``: exp(H), H = -Σ q log q the entropy of the class's values
  (entropy l-diversity);
- ``ldiv_recursive``: for the constant c (option ``ldiv_c``), the largest l such
  that the class is recursive (c, l)-diverse, r_1 < c (r_l + ... + r_m) with
  r_1 >= r_2 >= ... the class's value counts (1 for a class of one value), as
  sdcMicro's ``ldiversity``;
- ``cl_c``: the smallest integer c for which the class is recursive (c, l)-diverse
  at l = the file's ``ldiv_distinct``: floor(r_1 / (r_l + ... + r_m)) + 1;
- ``tclose``: the earth mover's distance between the class's distribution q and
  the file's p of the column: ordered distance
  (1 / (m - 1)) Σ_i |Σ_{j<=i} (q_j - p_j)| over the m distinct values of the file
  in increasing order for numeric (and ``tclose_ordered``) columns; equal distance
  ½ Σ_j |q_j - p_j| for nominal (categorical) columns;
- ``beta_basic``: max over the class's values of (q_j - p_j) / p_j;
- ``beta_enhanced``: min(β_c, -log p_min), the class's basic β capped by -log of
  the rarest value's share in the file (its maximum over the classes is pycanon's
  enhanced β); the class fails an enhanced threshold β when one of its values has
  (q_j - p_j) / p_j > min(β, -log p_j) (Cao and Karras);
- ``delta_disc``: max over the class's values of |log(q_j / p_j)| (values absent
  from the class are not counted, as pycanon).

The file's figure is the worst class (the minimum for the l-diversities, the
maximum for the others) over every confidential column, as pycanon reports it
(pycanon's entropy l is the integer part of ``ldiv_entropy``). Each ``*_fail``
metric is the % of classes that fail the threshold (options ``ldiv_l``,
``tclose_t``, ``likeness_beta``, ``privacy_delta``) on at least one confidential column.

Missing values: a missing key value is a category of its own (records suppressed
in the same key positions with the same other values form one class; no
wildcard); a record whose confidential value is missing is left out of that
column's distributions (it discloses nothing), and a class none of whose values
is known is not judged on that column (counted in ``excluded``).

Map / combine / aggregate over record chunks: each chunk returns, for each
confidential column, the table of its distinct (key combination, value) pairs
and their record counts (:func:`~sdcdist.keytables.pair_table`); tables are merged
(:func:`~sdcdist.keytables.merge_pairs`, exact integer counts, sorted, so any chunking
gives the same table); the client
computes the measures from the merged table (:func:`class_measures`). Memory is
one chunk plus that table.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np

from ...errors import SdcInputError, column_positions
from ...keytables import merge_pairs, pair_table, unique_rows
from ...parallel import map_reduce
from .._registry import REGISTRY, MeasureContext, MetricResult, get_metric, register
from ..categorical_keys import frequency_keys

__all__ = ["needs_confidential", "class_measures",
           "attribute_summary", "confidential_columns", "MEASURES"]

#: measure -> (best-is-largest, threshold option or None, unit, description)
MEASURES: dict[str, tuple[bool, str | None, str, str]] = {
    "ldiv_distinct": (True, "ldiv_l", "distinct values",
                      "distinct l-diversity: fewest distinct confidential values in a key "
                      "class"),
    "ldiv_entropy": (True, "ldiv_l", "effective number of values (exp of entropy)",
                     "entropy l-diversity: smallest exp(entropy) of the confidential values "
                     "of a key class"),
    "ldiv_recursive": (True, "ldiv_l", "l (values)",
                       "recursive (c,l)-diversity: smallest, over key classes, of the largest "
                       "l with r_1 < c (r_l + ... + r_m) (c = ldiv_c; sdcMicro's ldiversity)"),
    "cl_c": (False, None, "c (integer)",
             "recursive (c,l)-diversity: smallest integer c for which every key class is "
             "(c,l)-diverse at l = ldiv_distinct"),
    "tclose": (False, "tclose_t", "earth mover's distance (0 to 1)",
               "t-closeness: largest earth mover's distance between a key class's confidential "
               "values and the file's (ordered for numeric/ordinal, equal distance for "
               "nominal)"),
    "beta_basic": (False, "likeness_beta", "relative gain in belief",
                   "basic beta-likeness: largest (q - p)/p of a confidential value in a key "
                   "class against the file"),
    "beta_enhanced": (False, "likeness_beta", "relative gain in belief",
                      "enhanced beta-likeness: basic beta capped by -log of the rarest value's "
                      "share (pycanon's figure); fails where (q - p)/p > min(beta, -log p)"),
    "delta_disc": (False, "privacy_delta", "log ratio",
                   "delta-disclosure privacy: largest |log(q/p)| of a confidential value "
                   "present in a key class"),
}


# -- the chunk tables -----------------------------------------------------------------------

def _chunk_pairs(start: int, stop: int, X: Any, keys: Sequence[int],
                 conf: Sequence[int]) -> dict[int, dict[str, Any]]:
    block = np.asarray(X[start:stop], dtype=np.float64)
    k = block[:, list(keys)]
    return {j: pair_table(k, block[:, j]) for j in conf}


# -- the measures of one column ---------------------------------------------------------

def _ordered_emd(cls: np.ndarray, vid: np.ndarray, cnt: np.ndarray, size: np.ndarray,
                 P: np.ndarray, n_classes: int) -> np.ndarray:
    """Σ_i |Q_c(i) - P(i)| over the value indices i = 0..m-2 for each class c.

    ``cls``, ``vid`` (value index) sorted by class then value, ``cnt`` the pair counts,
    ``size`` the class sizes, ``P`` the file's cumulative shares (m,). Q_c, the class's
    cumulative share, is constant between the class's values, so each such segment is
    summed in closed form with the prefix sums of the non-decreasing P.
    """
    m = P.size
    SP = np.concatenate([[0.0], np.cumsum(P[:m - 1])])        # SP[i] = Σ_{j<i} P_j
    first = np.r_[True, cls[1:] != cls[:-1]]
    last = np.r_[cls[1:] != cls[:-1], True]
    start = np.maximum.accumulate(np.where(first, np.arange(cls.size), 0))
    ccnt = np.cumsum(cnt)                                      # exact: integer counts
    Q = (ccnt - (ccnt[start] - cnt[start])) / size[cls]
    # the segment of pair k: value indices [vid_k, vid_{k+1}) (the class's last: to m - 1)
    s = vid
    e = np.where(last, m - 1, np.r_[vid[1:], 0])
    t = np.clip(np.searchsorted(P[:m - 1], Q, side="left"), s, e)
    body = ((t - s) * Q - (SP[t] - SP[s])) + ((SP[e] - SP[t]) - (e - t) * Q)
    out = np.bincount(cls, weights=body, minlength=n_classes)
    out[cls[first]] += SP[vid[first]]                          # before the class's first value
    return out


def _within(cls: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """For pairs sorted by class: whether each starts its class, the index of its class's
    first and last pair."""
    first = np.r_[True, cls[1:] != cls[:-1]]
    idx = np.arange(cls.size)
    start = np.maximum.accumulate(np.where(first, idx, 0))
    gid = np.cumsum(first) - 1
    ends = np.flatnonzero(np.r_[cls[1:] != cls[:-1], True])
    return first, start, ends[gid]


def class_measures(cls: np.ndarray, value: np.ndarray, count: np.ndarray, n_classes: int,
                   *, ordered: bool, c: float) -> dict[str, np.ndarray]:
    """Every measure of each class, for one confidential column.

    Parameters
    ----------
    cls : int ndarray (N,)
        Class of each (class, value) pair, sorted by class then value.
    value : float ndarray (N,)
    count : int ndarray (N,)
        Records of the pair (>= 1).
    n_classes : int
        Classes (those without a pair get NaN).
    ordered : bool
        Ordered EMD (numeric, ordinal) or equal-distance EMD (nominal) for ``tclose``.
    c : float
        The c of ``ldiv_recursive``.

    Returns
    -------
    dict of str -> ndarray (n_classes,)
        The measures of :data:`MEASURES` (``cl_c`` at the column's smallest distinct
        l; NaN when that is 1) and ``known`` (the class has a known value); per pair
        (N,): ``rel`` = (q - p)/p, ``neglogp`` = -log p, ``cls``.
    """
    cnt = count.astype(np.float64)
    uval, vid = np.unique(value, return_inverse=True)
    vid = vid.reshape(-1)
    m = uval.size
    pc = np.bincount(vid, weights=cnt, minlength=m)
    p = pc / cnt.sum()
    size = np.bincount(cls, weights=cnt, minlength=n_classes)
    known = size > 0
    q = cnt / size[cls]
    nan = np.full(n_classes, np.nan)

    def class_max(vals: np.ndarray) -> np.ndarray:
        r = np.full(n_classes, -np.inf)
        np.maximum.at(r, cls, vals)
        return np.where(known, r, np.nan)

    distinct = np.bincount(cls, minlength=n_classes).astype(np.float64)
    H = -np.bincount(cls, weights=q * np.log(q), minlength=n_classes)
    res = {"known": known, "ldiv_distinct": np.where(known, distinct, np.nan),
           "ldiv_entropy": np.where(known, np.exp(H), np.nan)}
    # each class's counts in decreasing order r_1 >= r_2 >= ..., and their tails
    # r_l + ... + r_m (exact: integer counts)
    order = np.lexsort((-cnt, cls))
    cs, r = cls[order], cnt[order]
    _, start, end = _within(cs)
    rank = np.arange(r.size) - start + 1
    cr = np.cumsum(r)
    tail = cr[end] - cr + r
    r1 = r[start]
    ok = (rank >= 2) & (c * tail > r1)
    res["ldiv_recursive"] = np.where(
        known, 1.0 + np.bincount(cs, weights=ok.astype(np.float64), minlength=n_classes),
        np.nan)
    l_file = int(np.nanmin(res["ldiv_distinct"])) if known.any() else 0
    res["cl_c"] = nan.copy()
    if l_file >= 2:
        at = rank == l_file
        res["cl_c"][cs[at]] = np.floor(r1[at] / tail[at]) + 1.0
    if m <= 1:
        res["tclose"] = np.where(known, 0.0, np.nan)
    elif ordered:
        P = np.cumsum(pc) / cnt.sum()
        res["tclose"] = np.where(
            known, _ordered_emd(cls, vid, cnt, size, P, n_classes) / (m - 1), np.nan)
    else:
        # ½ Σ_j |q_j - p_j|: the class's values, plus p_j of the values it lacks
        d = np.bincount(cls, weights=np.abs(q - p[vid]) - p[vid], minlength=n_classes)
        res["tclose"] = np.where(known, 0.5 * (d + 1.0), np.nan)
    rel = (q - p[vid]) / p[vid]
    res["beta_basic"] = class_max(rel)
    res["beta_enhanced"] = np.minimum(res["beta_basic"], -np.log(p.min()))
    res["delta_disc"] = class_max(np.abs(np.log(q / p[vid])))
    res.update(rel=rel, neglogp=-np.log(p[vid]), cls=cls)
    return res


def attribute_summary(tables: dict[str, dict[str, Any]], *, ordered: Sequence[str],
                      c: float, thresholds: dict[str, float]) -> dict[str, Any]:
    """Every attribute-disclosure metric from the merged tables ``{column: table}``.

    Returns ``{metric: value}`` for the measures and their ``_fail`` shares (%), plus
    ``per_column`` (each column's file figures), ``classes`` and ``excluded`` (class and
    column pairs without a known value).
    """
    cols = list(tables)
    allrows = np.concatenate([tables[col]["rows"] for col in cols])
    if allrows.shape[0] == 0:
        raise SdcInputError("the confidential column(s) " f"{cols} have no known value in the "
                            "released file; attribute disclosure needs at least one")
    urows, inv = unique_rows(allrows)
    n_classes = urows.shape[0]
    off = np.cumsum([0] + [tables[col]["rows"].shape[0] for col in cols])
    fails = {name: np.zeros(n_classes, bool) for name, v in MEASURES.items() if v[1]}
    out: dict[str, Any] = {}
    per_column: dict[str, dict[str, float]] = {}
    excluded = 0
    for i, col in enumerate(cols):
        t = tables[col]
        cls = inv[off[i]:off[i + 1]]
        res = class_measures(cls, t["value"], t["count"], n_classes, ordered=col in ordered,
                             c=c)
        known = res["known"]
        excluded += int((~known).sum())
        figs = {}
        for name, (larger_safe, thr, _, _) in MEASURES.items():
            v = res[name][known]
            v = v[~np.isnan(v)]
            figs[name] = float(v.min() if larger_safe else v.max()) if v.size else np.nan
            if thr is None:
                continue
            x0 = thresholds[thr]
            if name == "beta_enhanced":
                bad = res["rel"] > np.minimum(x0, res["neglogp"])
                f = np.zeros(n_classes, bool)
                f[res["cls"][bad]] = True
            elif larger_safe:
                f = known & (res[name] < x0)
            else:
                f = known & (res[name] > x0)
            fails[name] |= f
        figs["missing"] = int(t["missing"])
        per_column[col] = figs
    for name, (larger_safe, thr, _, _) in MEASURES.items():
        vals = [per_column[col][name] for col in cols]
        vals = [v for v in vals if not np.isnan(v)]
        out[name] = (min(vals) if larger_safe else max(vals)) if vals else float("nan")
        if thr is not None:
            out[name + "_fail"] = 100.0 * float(fails[name].sum()) / n_classes
    out.update(per_column=per_column, classes=n_classes, excluded=excluded)
    return out


# -- the metrics --------------------------------------------------------------------------

def needs_confidential(name: str, options: Any = None) -> bool:
    """Whether metric ``name`` reads the confidential columns (and refuses a file without
    one) with these ``options``: it declares the need ``confidential`` and no option it
    names stands for it (the inference attack's ``infer_secret``)."""
    from .._registry import needing
    return name in REGISTRY and bool(needing([name], "confidential", options))


def confidential_columns(ctx: MeasureContext, name: str, keys: Sequence[str]
                         ) -> tuple[str, ...]:
    """The confidential columns of the masked file (refused: none, or one that is a key)."""
    conf = tuple(c for c in ctx.confidential if c in ctx.masked_columns)
    if not conf:
        raise SdcInputError(
            f"{name} measures what a key class discloses about confidential columns, and none "
            "is named; give them (--confidential, confidential=[...], or the dataset's "
            "'confidential' role)")
    both = [c for c in conf if c in keys]
    if both:
        raise SdcInputError(
            f"column(s) {both} are both confidential and key columns of {name}; an attribute "
            "cannot be disclosed by itself: leave it out of the keys or of the confidential "
            "columns")
    if ctx.weight in conf:
        raise SdcInputError(f"the weight column {ctx.weight!r} is named confidential; leave "
                            "it out of the confidential columns")
    return conf


def _summary(ctx: MeasureContext, name: str) -> tuple[dict[str, Any], tuple, tuple]:
    keys = frequency_keys(ctx, name)
    conf = confidential_columns(ctx, name, keys)
    ordered = ctx.options["tclose_ordered"]
    if ordered is not None:
        column_positions(ordered, conf, what="tclose_ordered column",
                         where="the confidential columns")
    ordered = set(ordered or ()) | {c for c in conf if c not in ctx.categorical}
    kpos = tuple(column_positions(keys, ctx.masked_columns, what="key column",
                                  where="the masked file"))
    cpos = tuple(column_positions(conf, ctx.masked_columns, what="confidential column",
                                  where="the masked file"))
    thresholds = {o: float(ctx.options[o])
                  for o in ("ldiv_l", "tclose_t", "likeness_beta", "privacy_delta")}
    c = float(ctx.options["ldiv_c"])

    def compute() -> dict[str, Any]:
        t = map_reduce(ctx.runner, _chunk_pairs, merge_pairs, [ctx.masked],
                       ctx.shape_masked[0], chunk_rows=int(ctx.options["chunk_rows"]),
                       args=(kpos, cpos))
        tables = {ctx.masked_columns[j]: t[j] for j in cpos}
        return attribute_summary(tables, ordered=sorted(ordered), c=c, thresholds=thresholds)
    key = ("attribute", keys, conf, tuple(sorted(ordered)), c, tuple(sorted(thresholds.items())))
    return ctx.cached(key, compute), keys, conf


_OPTIONS = ("chunk_rows", "ldiv_l", "ldiv_c", "tclose_t", "likeness_beta", "privacy_delta",
            "tclose_ordered")
_REF = {"ldiv": "Machanavajjhala et al. (2007); sdcMicro ldiversity; pycanon",
        "cl_c": "Machanavajjhala et al. (2007); pycanon recursive_c_l_diversity",
        "tclose": "Li, Li and Venkatasubramanian (2007); pycanon t_closeness",
        "beta": "Cao and Karras (2012); pycanon",
        "delta": "Brickell and Shmatikov (2008); pycanon delta_disclosure"}


def _register(name: str, larger_safe: bool, thr: str | None, unit: str, desc: str) -> None:
    ref = next(v for k, v in _REF.items() if name.startswith(k))

    def func(ctx: MeasureContext) -> MetricResult:
        s, keys, conf = _summary(ctx, name)
        info = {"keys": list(keys), "confidential": list(conf), "classes": s["classes"],
                "per_column": {c: s["per_column"][c][name] for c in conf},
                "missing_values": {c: s["per_column"][c]["missing"] for c in conf}}
        if name == "cl_c" and np.isnan(s[name]):
            info["undefined"] = (
                "on every confidential column some key class holds a single value (l = 1), "
                "and recursive (c, l)-diversity at l = 1 defines no c (ldiv_distinct is 1)")
        return MetricResult(s[name], excluded=s["excluded"], info=info)
    register(name, kind="risk", same_shape=False, categorical=True, ascending=not larger_safe,
             needs=("confidential",), options=_OPTIONS, unit=unit, reference=ref,
             description=desc + " (released file; worst confidential column)")(func)
    if thr is None:
        return

    def fail(ctx: MeasureContext) -> MetricResult:
        s, keys, conf = _summary(ctx, name + "_fail")
        return MetricResult(s[name + "_fail"], excluded=s["excluded"],
                            info={"keys": list(keys), "confidential": list(conf),
                                  "classes": s["classes"], "threshold": thr})
    what = {"ldiv_l": "l-diversity below l = ldiv_l",
            "tclose_t": "an EMD above t = tclose_t",
            "likeness_beta": "beta above likeness_beta",
            "privacy_delta": "delta above privacy_delta"}[thr]
    register(name + "_fail", kind="risk", same_shape=False, categorical=True,
             needs=("confidential",), options=_OPTIONS, unit="% of key classes", reference=ref,
             description=f"% of key classes failing {name} ({what}) on a confidential "
                         "column")(fail)


for _name, _spec in MEASURES.items():
    _register(_name, *_spec)
