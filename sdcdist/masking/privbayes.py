"""``privbayes``: PrivBayes (Zhang, Cormode, Procopiuc, Srivastava and Xiao 2017) as
DataSynthesizer's correlated-attribute mode implements it, with privacy budget ε.

- Attributes: numeric columns in ``synth_bins`` equal-width bins over [min, max] of
  their present values (a synthetic value is drawn uniformly inside its bin), a
  missing value a bin of its own; categorical columns by their codes, missing a
  category of its own.
- The network (ε/2): the first attribute at random (fully synthetic); then, d − 1
  times, the next (attribute, parent set of min(k, placed) placed attributes),
  k = ``synth_degree``, is drawn by the exponential mechanism on the mutual
  information I(X; Π) with DataSynthesizer's sensitivity S (the paper's, Lemma 1/2)
  and ε/2 split evenly over the choices: Pr ∝ exp(I / (2Δ)), Δ = (d − 1) S / (ε/2).
- The conditionals (ε/2): each joint table Pr[X, Π] as proportions plus Laplace
  noise of scale 2(d − k)/(n ε/2) on every cell (the first table covers the first
  attribute and its first k successors, the d − k − 1 others one attribute and its
  parents: d − k noisy tables); negative cells set to 0; each conditional normalised
  (uniform where all its cells are 0). Then ancestral sampling.
- ε = ∞: no noise, and each choice the pair of largest mutual information (the
  first in enumeration order on ties).
- Partially synthetic (``synth_columns``): the kept columns are placed first and are
  the possible parents; each replaced attribute is one choice and one noisy table
  (r of each: Δ = r S / (ε/2), Laplace scale 2r/(n ε/2)).

Counts are sums over fixed blocks of records (integers: exact in any order); tables
are refused beyond :data:`MAX_TABLE_CELLS` cells.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from itertools import combinations

import numpy as np

from ..errors import SdcInputError
from ._registry import register
from ._synth import (ColumnPlan, Streams, blocks, column_label, content_order, open_unit,
                     plan_columns)

__all__ = ["privbayes", "PrivBayesModel", "privbayes_fit", "privbayes_sample_block",
           "encode_columns", "check_table_size", "MAX_TABLE_CELLS", "sensitivity",
           "laplace_scale"]

#: the most cells of one joint table (k + 1 attributes): 2^24 cells of float64 are
#: 128 MiB, and a fit holds a few such tables at a time
MAX_TABLE_CELLS = 2**24


@dataclass
class Encoding:
    """How a column's values map to codes and back."""

    categorical: bool
    card: int
    missing: int = -1          # code of a missing value, -1: none
    low: float = 0.0           # numeric: the first bin's left edge
    width: float = 0.0         # numeric: the bins' width
    high: float = 0.0          # numeric: the largest present value


def encode_columns(X: np.ndarray, plan: ColumnPlan, bins: int,
                   columns: Sequence[str] | None = None
                   ) -> tuple[np.ndarray, list[int], list[Encoding]]:
    """(codes n x m int64, the number of codes of each column, the encodings)."""
    n, m = X.shape
    codes = np.zeros((n, m), dtype=np.int64)
    encs: list[Encoding] = []
    for j in range(m):
        x = X[:, j]
        nan = np.isnan(x)
        has_nan = bool(nan.any())
        if plan.is_cat(j):
            top = int(np.max(x[~nan])) + 1 if (~nan).any() else 0
            c = np.where(nan, top, x).astype(np.int64)
            e = Encoding(True, top + has_nan, top if has_nan else -1)
        elif not (~nan).any():
            c = np.zeros(n, dtype=np.int64)
            e = Encoding(False, 1, 0)
        else:
            lo, hi = float(np.min(x[~nan])), float(np.max(x[~nan]))
            w = (hi - lo) / bins
            if w > 0:
                b = np.floor((np.where(nan, lo, x) - lo) / w)
                b = np.clip(b, 0, bins - 1).astype(np.int64)
            else:
                b = np.zeros(n, dtype=np.int64)
            c = np.where(nan, bins, b)
            e = Encoding(False, bins + has_nan, bins if has_nan else -1, lo, w, hi)
        codes[:, j] = c
        encs.append(e)
    return codes, [e.card for e in encs], encs


def check_table_size(cards: Sequence[int], plan: ColumnPlan, bins: int, degree: int,
                     columns: Sequence[str] | None = None) -> None:
    """Refuse a fit whose joint tables (k + 1 attributes) could exceed MAX_TABLE_CELLS."""
    k = min(int(degree), plan.m - 1)
    top = sorted(range(plan.m), key=lambda j: -cards[j])[:k + 1]
    cells = math.prod(cards[j] for j in top)
    if cells > MAX_TABLE_CELLS:
        big = ", ".join(f"{column_label(j, columns)} ({cards[j]} values)" for j in top)
        raise SdcInputError(
            f"privbayes tables over k + 1 = {k + 1} attributes could hold {cells:,} cells, "
            f"beyond the bound of {MAX_TABLE_CELLS:,} cells (128 MiB of float64 each); the "
            f"largest domains are {big}. Lower the 'synth_bins' option (now {bins}) or the "
            f"'synth_degree' option (now {degree}), or recode the columns with the most "
            "categories.")


def sensitivity(n: int, child_card: int, parent_cards: Sequence[int]) -> float:
    """The sensitivity of the mutual information (PrivBayes Lemmas 1 and 2, as
    DataSynthesizer computes it): a binary child or a single binary parent, else."""
    if child_card == 2 or (len(parent_cards) == 1 and parent_cards[0] == 2):
        a = math.log(n) / n
        b = (n - 1) / n
        return a + b * math.log(n / (n - 1))
    a = (2 / n) * math.log((n + 1) / 2)
    b = (1 - 1 / n) * math.log(1 + 2 / (n - 1))
    return a + b


def laplace_scale(n: int, tables: int, epsilon: float) -> float:
    """Scale of the Laplace noise on each cell of a proportion table: 2 t / (n ε/2)."""
    if math.isinf(epsilon):
        return 0.0
    return 2.0 * tables / (n * epsilon / 2.0)


class _Counts:
    """Joint counts of attribute sets, summed over the fixed blocks (cached)."""

    def __init__(self, codes: np.ndarray, cards: Sequence[int]):
        self.n, self.cards = codes.shape[0], list(cards)
        # each column contiguous: a table reads k + 1 of them, not strided rows
        self.cols = [np.ascontiguousarray(codes[:, j]) for j in range(codes.shape[1])]
        self.cache: dict[tuple[int, ...], np.ndarray] = {}

    def table(self, attrs: Sequence[int]) -> np.ndarray:
        """Counts with one axis per attribute, in the order given."""
        key = tuple(sorted(attrs))
        if key not in self.cache:
            shape = [self.cards[a] for a in key]
            size = math.prod(shape)
            tot = np.zeros(size, dtype=np.int64)
            for a, e in blocks(self.n):
                idx = self.cols[key[0]][a:e].copy()
                for att in key[1:]:
                    idx *= self.cards[att]
                    idx += self.cols[att][a:e]
                tot += np.bincount(idx, minlength=size)
            self.cache[key] = tot.reshape(shape)
        T = self.cache[key]
        return np.transpose(T, [key.index(a) for a in attrs])


def mutual_information(T: np.ndarray) -> float:
    """I(X; Π) in nats from counts T with X on axis 0 and the parents on the others."""
    n = T.sum()
    P = T.reshape(T.shape[0], -1) / n
    px = P.sum(axis=1, keepdims=True)
    pp = P.sum(axis=0, keepdims=True)
    nz = P > 0
    return float(np.sum(P[nz] * np.log(P[nz] / (px @ pp)[nz])))


@dataclass
class PrivBayesModel:
    network: list[tuple[int, list[int]]]           # (child, parents) in sampling order
    root: int                                      # -1 when the kept columns are the roots
    root_dist: np.ndarray | None
    conditionals: list[np.ndarray] = field(default_factory=list)   # (prod parents, card)
    noisy: list[np.ndarray] = field(default_factory=list)          # noisy joint tables
    scale: float = 0.0


def _greedy_network(counts: _Counts, plan: ColumnPlan, degree: int, epsilon: float,
                    n: int, rng: np.random.Generator) -> tuple[int, list[tuple[int, list[int]]]]:
    cards = counts.cards
    if plan.kept:
        V, rest, root = list(plan.kept), list(plan.replaced), -1
    else:
        root = plan.replaced[int(rng.integers(len(plan.replaced)))]
        V, rest = [root], [j for j in plan.replaced if j != root]
    choices = len(rest)
    mi_cache: dict[tuple[int, tuple[int, ...]], float] = {}
    network = []
    while rest:
        size = min(degree, len(V))
        cands = [(c, list(p)) for c in rest for p in combinations(V, size)]
        mi = np.empty(len(cands))
        for i, (c, p) in enumerate(cands):
            key = (c, tuple(sorted(p)))
            if key not in mi_cache:
                mi_cache[key] = mutual_information(counts.table([c, *p]))
            mi[i] = mi_cache[key]
        if math.isinf(epsilon):
            pick = int(np.argmax(mi))
        else:
            delta = np.array([choices * sensitivity(n, cards[c], [cards[a] for a in p])
                              / (epsilon / 2.0) for c, p in cands])
            s = mi / (2.0 * delta)
            w = np.exp(s - s.max())
            cum = np.cumsum(w)
            pick = int(min(np.searchsorted(cum, rng.random() * cum[-1], side="right"),
                           len(cands) - 1))
        c, p = cands[pick]
        network.append((c, p))
        V.append(c)
        rest.remove(c)
    return root, network


def _noisy(T: np.ndarray, n: int, scale: float, rng: np.random.Generator
           ) -> np.ndarray:
    P = T / n
    if scale > 0:
        P = P + rng.laplace(0.0, scale, size=P.shape)
    return np.maximum(P, 0.0)


def _conditional(J: np.ndarray) -> np.ndarray:
    """(parents..., child) proportions -> rows normalised (uniform where all zero)."""
    card = J.shape[-1]
    C = J.reshape(-1, card)
    s = C.sum(axis=1, keepdims=True)
    return np.where(s > 0, C / np.where(s > 0, s, 1.0), 1.0 / card)


def privbayes_fit(codes: np.ndarray, cards: Sequence[int], plan: ColumnPlan, epsilon: float,
                  degree: int, streams: Streams) -> PrivBayesModel:
    """Network and noisy conditionals from the block counts of ``codes``."""
    n = codes.shape[0]
    counts = _Counts(codes, cards)
    rng = streams.block(Streams.MODEL, 0)
    k = min(int(degree), plan.m - 1)
    root, network = _greedy_network(counts, plan, k, float(epsilon), n, rng)
    noise_rng = streams.block(Streams.MODEL, 1)
    model = PrivBayesModel(network, root, None)
    if root >= 0:
        first = [root] + [c for c, _ in network[:k]]
        tables = plan.m - len(plan.kept) - k if len(first) > 1 else 1
        tables = max(tables, 1)
        model.scale = laplace_scale(n, tables, float(epsilon))
        J0 = _noisy(counts.table(first), n, model.scale, noise_rng)
        model.noisy.append(J0)
        axes = list(range(J0.ndim))
        m0 = J0.sum(axis=tuple(axes[1:])) if J0.ndim > 1 else J0
        model.root_dist = m0 / m0.sum() if m0.sum() > 0 else np.full(m0.size, 1.0 / m0.size)
        for i, (c, p) in enumerate(network):
            if i < k:
                keep_axes = [first.index(a) for a in [*p, c]]
                drop = tuple(a for a in axes if a not in keep_axes)
                M = J0.sum(axis=drop) if drop else J0
                order = sorted(keep_axes)
                M = np.transpose(M, [order.index(a) for a in keep_axes])
            else:
                M = _noisy(counts.table([*p, c]), n, model.scale, noise_rng)
                model.noisy.append(M)
            model.conditionals.append(_conditional(M))
    else:
        model.scale = laplace_scale(n, len(network), float(epsilon))
        for c, p in network:
            M = _noisy(counts.table([*p, c]), n, model.scale, noise_rng)
            model.noisy.append(M)
            model.conditionals.append(_conditional(M))
    return model


def _draw_rows(cond: np.ndarray, rows: np.ndarray, u: np.ndarray) -> np.ndarray:
    """Codes drawn from row ``rows[i]`` of ``cond`` with uniforms ``u`` (no n x L array)."""
    P, card = cond.shape
    G = np.cumsum(cond, axis=1)
    G[:, -1] = 1.0
    flat = (np.arange(P, dtype=np.float64)[:, None] + G).ravel()
    pos = np.searchsorted(flat, rows + u, side="right")
    return np.clip(pos - rows * card, 0, card - 1)


def privbayes_sample_block(model: PrivBayesModel, codes_b: np.ndarray, cards: Sequence[int],
                           encs: Sequence[Encoding], Xb: np.ndarray,
                           rng: np.random.Generator) -> np.ndarray:
    """The block with the replaced columns drawn (ancestral sampling, then decoding)."""
    nb = Xb.shape[0]
    syn = codes_b.copy()
    drawn = []
    if model.root >= 0:
        syn[:, model.root] = _draw_rows(model.root_dist[None, :], np.zeros(nb, np.int64),
                                        rng.random(nb))
        drawn.append(model.root)
    for (c, p), cond in zip(model.network, model.conditionals):
        idx = np.zeros(nb, dtype=np.int64)
        for a in p:
            idx = idx * cards[a] + syn[:, a]
        syn[:, c] = _draw_rows(cond, idx, rng.random(nb))
        drawn.append(c)
    out = Xb.copy()
    for j in sorted(drawn):
        e = encs[j]
        c = syn[:, j]
        if e.categorical:
            col = c.astype(np.float64)
        else:
            u = open_unit(rng, nb)
            col = np.minimum(e.low + (c + u) * e.width, e.high) if e.width > 0 else \
                np.full(nb, e.low)
        if e.missing >= 0:
            col[c == e.missing] = np.nan
        out[:, j] = col
    return out


@register("privbayes", param="epsilon", kind="float", low=0.0, high=math.inf, random=True,
          acts_on="mixed", open_low=True, infinite=True,
          allowed="a number > 0, or .inf (no noise: the non-private network)",
          options=("synth_columns", "synth_bins", "synth_degree", "columns"),
          description="PrivBayes (DataSynthesizer's correlated-attribute mode): a Bayesian "
                      "network of degree synth_degree chosen and its conditionals made with "
                      "privacy budget epsilon (half each); numeric columns in synth_bins bins",
          reference="Zhang, Cormode, Procopiuc, Srivastava and Xiao (2017); DataSynthesizer "
                    "(Ping, Stoyanovich and Howe 2017); [DTMS §6]")
def privbayes(X: np.ndarray, epsilon: float, *, rng: np.random.Generator,
              categorical: Sequence[int] = (), keep: Sequence[int] = (),
              columns: Sequence[str] | None = None,
              synth_columns: Sequence[str] | None = None,
              synth_bins: int = 20, synth_degree: int = 2,
              labels: Mapping[str, Sequence[str]] | None = None) -> np.ndarray:
    """PrivBayes release of ``X`` (n, m; categorical columns as codes, NaN missing).

    Parameters
    ----------
    epsilon : float > 0 or inf
        The privacy budget (half for the network, half for the conditionals).
    synth_columns : list of column names, optional
        The replaced columns (default all but ``keep``); the others are kept bit for bit.
    synth_bins : int
        Equal-width bins of each numeric column.
    synth_degree : int
        The most parents of an attribute (k).

    Returns
    -------
    ndarray (n, m)
    """
    plan = plan_columns("privbayes", X, categorical=categorical, keep=keep, columns=columns,
                        synth_columns=synth_columns)
    codes, cards, encs = encode_columns(X, plan, int(synth_bins), columns)
    check_table_size(cards, plan, int(synth_bins), int(synth_degree), columns)
    streams = Streams(rng)
    order = content_order(X)
    Xs, Cs = X[order], codes[order]
    model = privbayes_fit(Cs, cards, plan, float(epsilon), int(synth_degree), streams)
    out_s = np.empty_like(Xs)
    for b, (a, e) in enumerate(blocks(Xs.shape[0])):
        out_s[a:e] = privbayes_sample_block(model, Cs[a:e], cards, encs, Xs[a:e],
                                            streams.block(Streams.SYNTH, b))
    out = np.empty_like(X)
    out[order] = out_s
    out[:, list(plan.kept)] = X[:, list(plan.kept)]
    return out
