"""A small laboratory of probabilistic-linkage conventions, on the papers' masked Census files.

The published PLD column of Domingo-Ferrer, Mateo-Sanz and Torra (Table 2) and
the re-identification rates of Yancey, Winkler and Creecy (Table 2, used by
their Table 3) were made with the Census Bureau's matcher, whose settings the
papers leave open. This module re-implements the Fellegi-Sunter linkage of
:mod:`sdcdist.linkage.prl` in plain numpy on whole 1080 x 1080 pair matrices,
with every such choice a parameter (:class:`Convention`), so the scripts of
this folder can try many of them quickly:

- ``method``: comparison on raw values (``d``) or on ``sign(v) log(1 + |v|)`` (``l``);
- ``t``: the agreement tolerance;
- ``base``: whose value scales the tolerance, ``t max(|v|, 0.1)``: the original's
  (``a``, sdcdist), the masked one's (``b``), the larger or the smaller of the two;
- ``weights``: linear downweighting between agreement and disagreement weight (``interp``,
  YWC §3.4 and sdcdist) or the plain agree/disagree weight (``binary``);
- EM: ``p_max`` bound of P(M) at ``min(n_a, n_b) / N`` or none, the constraint
  ``m_agree >= u_agree`` on or off, ``m_start``, ``u_fixed`` (u = the level
  frequencies over all pairs, not re-estimated), ``p_fixed`` (P(M) kept at its start);
  ``m_oracle`` replaces EM by the agreement rates of the true pairs (m) and of all
  pairs (u), the parameters a perfect EM would find: an upper bound, not a convention;
  ``refit``: after EM, up to that many rounds of "classification EM" under the 1-1
  constraint: link 1-1 with the current weights, take m = the agreement rates among
  the linked pairs (u = all pairs), recompute the weights; stops when the links stop
  changing (no truth is used);
- ``assign``: exact 1-1 assignment maximising the total weight (``one2one``: sdcdist's
  own solver, so that tied optima pair records as sdcdist does), each
  masked record's best original (``best_b``), each original's best masked (``best_a``);
- ``count``: all pairs of the linkage (``all``), or only the "declared matches": pairs
  whose weight is positive (``w>0``) or whose match probability exceeds 1/2 (``p>0.5``).

:func:`masked_files` rebuilds the masked files of an example spec exactly as
the audit makes them (same seeds), so the results are those of the cube's
cells; :func:`sdcdist_pld` runs sdcdist's own PRL on them, which the default
convention here must reproduce (a check of this re-implementation).
"""

from __future__ import annotations

import sys
from dataclasses import dataclass, replace
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))

__all__ = ["Convention", "masked_files", "link", "sdcdist_pld", "census"]


def one2one(W: np.ndarray, order: tuple[np.ndarray, np.ndarray] | None = None
            ) -> tuple[np.ndarray, np.ndarray]:
    """The exact 1-1 assignment maximising the total weight, as sdcdist links densely.

    ``order``: :func:`content_orders` of the two files; ties between optimal
    assignments are then broken by the records' values, as sdcdist's PRL does.
    """
    from sdcdist.linkage.assignment import assign, assign_by_content
    if order is None:
        r, a, _ = assign(W, maximize=True, dense_limit=max(W.shape))
    else:
        r, a, _ = assign_by_content(W, order[0], order[1], maximize=True,
                                    dense_limit=max(W.shape))
    return r, a


def content_orders(X: np.ndarray, Xm: np.ndarray, keys: list[int], method: str
                   ) -> tuple[np.ndarray, np.ndarray]:
    """(masked, original) records in the value order sdcdist's PRL breaks ties by."""
    from sdcdist.linkage import prl
    from sdcdist.linkage.assignment import content_order
    cmp = prl.comparison(len(keys), method=method, t=0.05)
    a = prl.prepare_side(X, tuple(keys), cmp, side="a")["v"]
    b = prl.prepare_side(Xm, tuple(keys), cmp, side="b")["v"]
    return content_order(b), content_order(a)


@dataclass(frozen=True)
class Convention:
    method: str = "l"
    t: float = 0.05
    base: str = "a"            # a | b | max | min
    weights: str = "interp"    # interp | binary
    p_max: bool = True
    constrain: bool = True
    m_start: float = 0.9
    u_fixed: bool = False
    p_fixed: bool = False      # P(M) stays at min(n_a, n_b) / N
    m_oracle: bool = False     # m = agreement rates of the true pairs (not EM; an upper bound)
    refit: int = 0             # rounds of m re-estimated from the 1-1 linked pairs
    assign: str = "one2one"    # one2one | best_b | best_a
    count: str = "all"         # all | w>0 | p>0.5
    max_iter: int = 20000
    tol: float = 1e-10          # stop when no parameter's logarithm moves by tol or more
                                # (sdcdist's rule)
    stop: str = "param"         # param | loglik (relative change of the log-likelihood)

    def but(self, **kw) -> "Convention":
        return replace(self, **kw)


def census() -> tuple[np.ndarray, tuple[str, ...]]:
    from sdcdist.audit import load_spec
    from sdcdist.audit.run import load_dataset
    md = load_dataset(load_spec(ROOT / "examples" / "dmt_table2.yaml"))
    return np.asarray(md.values, dtype=np.float64), tuple(md.columns)


def masked_files(spec_name: str, cells: dict[str, list[float]] | None = None,
                 replicates: int | None = None):
    """Yield ``(method, param, replicate, X, Xm, columns)`` for the cells of an example spec."""
    from sdcdist.audit import load_spec
    from sdcdist.audit.plan import plan_cells
    from sdcdist.audit.run import load_dataset, mask_cell
    from sdcdist.masking import get_method
    spec = load_spec(ROOT / "examples" / f"{spec_name}.yaml")
    md = load_dataset(spec)
    X = np.asarray(md.values, dtype=np.float64)
    opts = {m.name: m.options for m in spec.methods}
    for cell in plan_cells(spec):
        if cells is not None and (cell.method not in cells or cells[cell.method] and not any(
                np.isclose(cell.param, p) for p in cells[cell.method])):
            continue
        if replicates is not None and cell.replicate >= replicates:
            continue
        meth = get_method(cell.method)
        mo = {k: v for k, v in opts[cell.method].items() if k in meth.options}
        Xm = mask_cell(X, cell.method, cell.param, cell.entropy, cell.spawn_key, mo)
        yield cell.method, cell.param, cell.replicate, X, np.asarray(Xm, float), md.columns


def _g(v: np.ndarray, method: str) -> np.ndarray:
    return np.sign(v) * np.log1p(np.abs(v)) if method == "l" else v


def _em(agree: list[np.ndarray], c: Convention) -> tuple[np.ndarray, np.ndarray, float]:
    """Binary-comparison EM on the agreement patterns; returns m, u (agreement
    probabilities per column) and P(M)."""
    K = len(agree)
    n_b, n_a = agree[0].shape
    N = float(n_a * n_b)
    code = np.zeros((n_b, n_a), dtype=np.int64)
    for k, a in enumerate(agree):
        code |= a.astype(np.int64) << k
    counts = np.bincount(code.ravel(), minlength=2 ** K).astype(float)
    pats = np.flatnonzero(counts)
    cnt = counts[pats]
    G = ((pats[:, None] >> np.arange(K)[None, :]) & 1).astype(bool)   # (P, K)
    u = np.array([a.mean() for a in agree])
    u = np.clip(u, 1e-9, 1 - 1e-9)
    m = np.full(K, c.m_start)
    p0 = min(n_a, n_b) / N
    hi = p0 if c.p_max else 1 - 1 / N
    p = p0
    last = None
    prev = np.r_[m, u, p]
    for _ in range(c.max_iter):
        lm = np.log(p) + np.where(G, np.log(m), np.log1p(-m)).sum(1)
        lu = np.log1p(-p) + np.where(G, np.log(u), np.log1p(-u)).sum(1)
        ll = float(np.dot(cnt, np.logaddexp(lm, lu)))
        g = np.exp(lm - np.logaddexp(lm, lu))
        cm, cu = cnt * g, cnt * (1 - g)
        sm, su = cm.sum(), cu.sum()
        if not c.p_fixed:
            p = float(np.clip(sm / N, 1 / N, hi))
        am = (cm[:, None] * G).sum(0) / max(sm, 1e-300)
        au = (cu[:, None] * G).sum(0) / max(su, 1e-300)
        if c.constrain:
            bad = am < (u if c.u_fixed else au)
            pooled = (cnt[:, None] * G).sum(0) / N
            am = np.where(bad, pooled, am)
            au = np.where(bad, pooled, au)
        m = np.clip(am, 1e-9, 1 - 1e-9)
        if not c.u_fixed:
            u = np.clip(au, 1e-9, 1 - 1e-9)
        now = np.r_[m, u, p]
        if c.stop == "param":
            if np.max(np.abs(np.log(now) - np.log(prev))) < c.tol:
                break
        elif last is not None and abs(ll - last) <= c.tol * abs(ll):
            break
        prev, last = now, ll
    return m, u, p


def compare(X: np.ndarray, Xm: np.ndarray, keys: list[int], c: Convention):
    """Per key column: |difference| (n_b, n_a), tolerance, agreement, under ``c``'s
    method, t and base."""
    A = _g(X[:, keys], c.method)
    B = _g(Xm[:, keys], c.method)
    D, T, agree = [], [], []
    for k in range(len(keys)):
        d = np.abs(B[:, k][:, None] - A[:, k][None, :])
        ba = np.maximum(np.abs(A[:, k]), 0.1)[None, :]
        bb = np.maximum(np.abs(B[:, k]), 0.1)[:, None]
        base = {"a": ba, "b": bb, "max": np.maximum(ba, bb), "min": np.minimum(ba, bb)}[c.base]
        tol = c.t * base
        D.append(d)
        T.append(tol)
        agree.append(d <= tol)
    return D, T, agree


def pair_weights(D, T, agree, m, u, c: Convention) -> np.ndarray:
    wa = np.log(m / u)
    wd = np.log((1 - m) / (1 - u))
    W = np.zeros_like(D[0])
    for k in range(len(D)):
        if c.weights == "interp":
            W += np.maximum(wa[k] - (wa[k] - wd[k]) * D[k] / T[k], wd[k])
        else:
            W += np.where(agree[k], wa[k], wd[k])
    return W


def weights(X: np.ndarray, Xm: np.ndarray, keys: list[int], c: Convention,
            order: tuple[np.ndarray, np.ndarray] | None = None) -> tuple[np.ndarray, float]:
    """Pair weights, shape (n_b, n_a) (rows = masked records), and the log prior odds."""
    D, T, agree = compare(X, Xm, keys, c)
    m, u, p = _em(agree, c)
    if c.m_oracle:
        m = np.clip([np.diag(a).mean() for a in agree], 1e-9, 1 - 1e-9)
        u = np.clip([a.mean() for a in agree], 1e-9, 1 - 1e-9)
    W = pair_weights(D, T, agree, m, u, c)
    if c.refit:
        W = refit(D, T, agree, W, c, order)
    return W, float(np.log(p) - np.log1p(-p))


def refit(D, T, agree, W, c: Convention, order=None) -> np.ndarray:
    """``c.refit`` rounds of m from the 1-1 linked pairs (see the module docstring)."""
    u = np.clip([a.mean() for a in agree], 1e-9, 1 - 1e-9)
    prev = None
    for _ in range(c.refit):
        r, a = one2one(W, order)
        if prev is not None and np.array_equal(a, prev):
            break
        prev = a
        m = np.clip([ag[r, a].mean() for ag in agree], 1e-9, 1 - 1e-9)
        W = pair_weights(D, T, agree, m, u, c)
    return W


def score(W: np.ndarray, lpo: float, c: Convention,
          order: tuple[np.ndarray, np.ndarray] | None = None) -> float:
    """Share of masked records whose linked original is their own (row j <-> row j)."""
    n_b, n_a = W.shape
    if c.assign == "one2one":
        r, a = one2one(W, order)
    elif c.assign == "best_b":
        r = np.arange(n_b)
        a = np.argmax(W, axis=1)
    elif c.assign == "best_a":
        a = np.arange(n_a)
        r = np.argmax(W, axis=0)
    else:
        raise ValueError(c.assign)
    w = W[r, a]
    keep = np.ones(r.size, bool)
    if c.count == "w>0":
        keep = w > 0
    elif c.count == "p>0.5":
        keep = w + lpo > 0
    return float(np.count_nonzero((r == a) & keep)) / n_b


def link(X: np.ndarray, Xm: np.ndarray, keys: list[int], c: Convention) -> float:
    """Share of masked records correctly re-identified (0..1) under convention ``c``;
    the true original of masked row j is row j."""
    order = content_orders(X, Xm, keys, c.method)
    W, lpo = weights(X, Xm, keys, c, order)
    return score(W, lpo, c, order)


def sdcdist_pld(X: np.ndarray, Xm: np.ndarray, keys: list[int],
                options: dict | None = None) -> float:
    """sdcdist's own PRL (dense path) on the same files, with registry options
    (``{"prl_t": 0.05}``): share of correct pairs."""
    from sdcdist.linkage.prl import PRLSettings, probabilistic_linkage
    from sdcdist.parallel import Runner
    r = probabilistic_linkage(Runner(None), X, Xm, X.shape[0], Xm.shape[0], tuple(keys),
                              settings=PRLSettings.from_options(options))
    return r.correct / r.n_b
