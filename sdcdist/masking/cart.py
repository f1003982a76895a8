"""``cart``: sequential CART synthesis (Reiter 2005), as synthpop's default ``syn()``.

The replaced columns are visited in the sequence ``synth_order`` (default the file's
order). Column j of the sequence is predicted from the kept columns and the columns
before it (screened as below) by a CART tree fitted once on the ORIGINAL records
(scikit-learn's DecisionTreeClassifier, Gini, for a categorical column;
DecisionTreeRegressor, least squares, for a numeric one), grown as rpart grows synthpop's trees: at least
``minbucket`` records a leaf, a node split only when it holds at least 3 x minbucket
records (rpart's minsplit when minbucket alone is given), a split kept only when it
lowers the impurity by complexity 1e-8 of the root's, depth at most 30, no pruning.
Each synthetic record is dropped down the tree with its already synthetic predictors
and takes the value of an original record drawn uniformly from that leaf (donor
sampling, no smoothing). The first replaced column, when nothing is kept, is a
bootstrap sample of its original values (a tree with one leaf).

A numeric column with missing values is visited twice: its missing indicator (a
classification tree on the same predictors), then its value, fitted on the records
where it is present and drawn for the synthetic records whose indicator says present.
A categorical column's missing value is a category of its own. Predictors with
missing values go down scikit-learn's trees by its missing-value rule.

Predictors are screened before each fit as synthpop's default ``syn()`` screens them
(its ``remove.lindep.syn``, part of the model CATALOG names): left out are the predictors
with variance <= 1e-5, those correlated >= 0.99999 with the response, and then, while
the smallest eigenvalue of the kept predictors' correlation matrix is below 1e-5 of the
largest, the predictor with the largest absolute loading on its eigenvector (the first
in the file's order among equal loadings). Categorical columns enter as their codes,
as synthpop enters a factor's level numbers; the screen reads the records where the
response and every predictor are present. On Census, where PTOTVAL = PEARNVAL +
POTHVAL exactly, PTOTVAL is left out of every tree that has the other two.

Differences from rpart that remain: scikit-learn splits a categorical predictor on
its codes as ordered numbers (rpart on subsets of categories), and thresholds are
compared in float32.

The trees are fitted in threads (they are independent: each on original records, with
its own seed), and the blocks drawn in threads: the same bits for any number of them.
"""

from __future__ import annotations

import os
from collections.abc import Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass

import numpy as np

from ..errors import SdcInputError
from ._registry import register
from ._synth import (ColumnPlan, Streams, blocks, check_order, column_label, content_order,
                     plan_columns)

__all__ = ["cart", "CartStep", "cart_fit", "cart_sample_block", "screen_predictors",
           "check_float32", "COMPLEXITY", "MAX_DEPTH", "LINDEP_EPS", "LINDEP_MAXCOR",
           "FLOAT32_MAX"]

#: rpart's cp as synthpop sets it
COMPLEXITY = 1e-8
#: rpart's maxdepth default
MAX_DEPTH = 30
#: synthpop's remove.lindep.syn: least variance, and least eigenvalue ratio, of a predictor set
LINDEP_EPS = 1e-5
#: synthpop's remove.lindep.syn: a predictor correlated this much with the response is left out
LINDEP_MAXCOR = 0.99999

#: Largest magnitude of a numeric value cart reads: scikit-learn's trees hold their
#: predictors in float32, beyond which a value is infinite to them
FLOAT32_MAX = float(np.finfo(np.float32).max)


def check_float32(X: np.ndarray, plan: ColumnPlan, columns: Sequence[str] | None) -> None:
    """Refuse the numeric columns of ``X`` holding a value beyond :data:`FLOAT32_MAX` in
    magnitude (each enters the trees of the columns after it as a predictor), by name,
    before any tree is grown."""
    big = [j for j in range(plan.m) if not plan.is_cat(j)
           and bool(np.any(np.abs(X[:, j]) > FLOAT32_MAX))]
    if big:
        names = ", ".join(column_label(j, columns) for j in big[:10])
        raise SdcInputError(
            f"cart cannot use column(s) {names}: they hold values beyond +-3.4e38, which "
            "the CART trees (scikit-learn's, in float32) cannot split on; rescale them "
            "(e.g. express them in larger units) or keep them out of the file.")


def screen_predictors(P: np.ndarray, y: np.ndarray) -> np.ndarray:
    """Which predictors synthpop's ``remove.lindep.syn`` keeps (a boolean per column).

    Parameters
    ----------
    P : ndarray (n, k)
        The predictors on the records of the fit (categorical columns as codes, NaN missing).
    y : ndarray (n,)
        The response.

    Returns
    -------
    keep : ndarray (k,) of bool
        False for a predictor with variance (ddof 1) <= :data:`LINDEP_EPS`, one whose
        correlation with ``y`` is >= :data:`LINDEP_MAXCOR`, and, while the smallest
        eigenvalue of the kept predictors' correlation matrix is below
        :data:`LINDEP_EPS` times the largest, the one with the largest absolute loading on
        that eigenvalue's eigenvector (the first among equal loadings). Computed on the
        records where ``y`` and every predictor are present; a correlation that is not
        defined (a constant response) leaves nothing out.
    """
    P = np.asarray(P, dtype=np.float64)
    y = np.asarray(y, dtype=np.float64)
    k = P.shape[1]
    present = ~np.isnan(y) & ~np.isnan(P).any(axis=1)
    P, y = P[present], y[present]
    n = P.shape[0]
    if k == 0 or n < 2:
        return np.ones(k, dtype=bool)
    Pc = P - P.mean(axis=0)
    ss = np.einsum("ij,ij->j", Pc, Pc)
    keep = ss / (n - 1) > LINDEP_EPS
    yc = y - y.mean()
    sy = float(np.sqrt(yc @ yc))
    if sy > 0:
        with np.errstate(invalid="ignore", divide="ignore"):
            r = (Pc.T @ yc) / (np.sqrt(ss) * sy)
        keep &= ~(r >= LINDEP_MAXCOR)
    idx = np.flatnonzero(keep)
    while idx.size > 1:
        sd = np.sqrt(ss[idx])
        C = (Pc[:, idx].T @ Pc[:, idx]) / np.outer(sd, sd)
        w, V = np.linalg.eigh((C + C.T) / 2.0)        # ascending eigenvalues
        if w[0] / w[-1] >= LINDEP_EPS:
            break
        idx = np.delete(idx, int(np.argmax(np.abs(V[:, 0]))))
    out = np.zeros(k, dtype=bool)
    out[idx] = True
    return out


@dataclass
class CartStep:
    """One visit: the column, what is drawn (``ind``: missing indicator, ``val``: value),
    its predictors, its tree (None: one leaf) and the donors of each leaf."""

    column: int
    kind: str
    predictors: list[int]
    tree: object | None
    start: np.ndarray          # leaf id -> first donor position
    count: np.ndarray          # leaf id -> donors in the leaf
    donors: np.ndarray         # donor values, grouped by leaf


def _tree(categorical: bool, minbucket: int, seed: int, y: np.ndarray):
    from sklearn.tree import DecisionTreeClassifier, DecisionTreeRegressor
    common = dict(min_samples_leaf=int(minbucket), min_samples_split=max(2, 3 * int(minbucket)),
                  max_depth=MAX_DEPTH, random_state=seed)
    if categorical:
        _, cnt = np.unique(y, return_counts=True)
        p = cnt / y.size
        root = float(1.0 - np.sum(p * p))
        return DecisionTreeClassifier(criterion="gini", min_impurity_decrease=COMPLEXITY * root,
                                      **common)
    root = float(np.var(y))
    return DecisionTreeRegressor(criterion="squared_error",
                                 min_impurity_decrease=COMPLEXITY * root, **common)


def _fit_step(X: np.ndarray, column: int, kind: str, categorical: bool, predictors: list[int],
              minbucket: int, seed: int) -> CartStep:
    x = X[:, column]
    if kind == "ind":
        rows = np.arange(X.shape[0])
        y = np.isnan(x).astype(np.float64)
        values = y
    elif kind == "val" and not categorical:
        rows = np.flatnonzero(~np.isnan(x))
        y = x[rows]
        values = y
    else:                          # categorical value: missing is a category of its own
        rows = np.arange(X.shape[0])
        values = x
        top = np.nanmax(x) if (~np.isnan(x)).any() else -1.0
        y = np.where(np.isnan(x), top + 1.0, x)
    P = X[np.ix_(rows, predictors)]
    keep = screen_predictors(P, y)
    if not keep.all():
        predictors = [p for p, k in zip(predictors, keep) if k]
        P = P[:, keep]
    if not predictors:
        return CartStep(column, kind, [], None, np.zeros(1, np.int64),
                        np.array([rows.size], np.int64), values.copy())
    tree = _tree(categorical or kind == "ind", minbucket, seed, y)
    tree.fit(P, y)
    leaf = tree.apply(P)
    nodes = tree.tree_.node_count
    order = np.argsort(leaf, kind="stable")
    count = np.bincount(leaf, minlength=nodes).astype(np.int64)
    start = np.concatenate([[0], np.cumsum(count)[:-1]]).astype(np.int64)
    return CartStep(column, kind, list(predictors), tree, start, count, values[order])


def _threads(jobs: int) -> int:
    """Threads for ``jobs`` independent fits: the cores this process may run on."""
    try:
        cores = len(os.sched_getaffinity(0))
    except AttributeError:                                   # pragma: no cover (not Linux)
        cores = os.cpu_count() or 1
    return max(1, min(cores, jobs))


def cart_fit(X: np.ndarray, plan: ColumnPlan, sequence: list[int], minbucket: int,
             streams: Streams, *, threads: int | None = None) -> list[CartStep]:
    """The trees of the visit sequence, fitted on the original records (content order).

    Every tree is fitted on original records only, so the fits are independent: they run
    in ``threads`` threads (default: one per core this process may use; scikit-learn
    grows a tree without holding the GIL). Each tree has its own seed, so the steps are
    the same bits whatever the number of threads."""
    jobs = []
    before = list(plan.kept)
    for i, j in enumerate(sequence):
        cat = plan.is_cat(j)
        kinds = ["ind", "val"] if not cat and np.isnan(X[:, j]).any() else ["val"]
        for kind in kinds:
            seed = streams.seed(100 + 2 * i + (kind == "ind"))
            jobs.append((j, kind, cat, sorted(before), seed))
        before.append(j)

    def fit(job: tuple) -> CartStep:
        j, kind, cat, predictors, seed = job
        return _fit_step(X, j, kind, cat, predictors, minbucket, seed)

    workers = _threads(len(jobs)) if threads is None else max(1, min(int(threads), len(jobs)))
    if workers == 1:
        return [fit(job) for job in jobs]
    # the largest fits (most predictors) first, so that the threads end together
    order = sorted(range(len(jobs)), key=lambda k: -len(jobs[k][3]))
    with ThreadPoolExecutor(max_workers=workers) as pool:
        done = dict(zip(order, pool.map(fit, [jobs[k] for k in order])))
    return [done[k] for k in range(len(jobs))]


def _draw(step: CartStep, P: np.ndarray | None, size: int, rng: np.random.Generator
          ) -> np.ndarray:
    if step.tree is None:
        leaf = np.zeros(size, dtype=np.int64)
    else:
        leaf = step.tree.apply(P)
    k = np.floor(rng.random(size) * step.count[leaf]).astype(np.int64)
    k = np.minimum(k, step.count[leaf] - 1)
    return step.donors[step.start[leaf] + k]


def cart_sample_block(steps: list[CartStep], Xb: np.ndarray, rng: np.random.Generator
                      ) -> np.ndarray:
    """The block with the replaced columns drawn in the visit sequence (kept ones as
    they are: they are the predictors of the records they belong to)."""
    out = Xb.copy()
    nb = Xb.shape[0]
    present: dict[int, np.ndarray] = {}
    for step in steps:
        P = out[:, step.predictors] if step.predictors else None
        if step.kind == "ind":
            present[step.column] = _draw(step, P, nb, rng) == 0.0
            continue
        if step.column in present:
            rows = present.pop(step.column)
            col = np.full(nb, np.nan)
            col[rows] = _draw(step, P[rows] if P is not None else None, int(rows.sum()), rng)
        else:
            col = _draw(step, P, nb, rng)
        out[:, step.column] = col
    return out


@register("cart", param="minbucket", kind="int", low=1, high=10**9, random=True,
          acts_on="mixed", allowed="an integer in [1, 10^9]",
          options=("synth_columns", "synth_order", "columns"),
          description="sequential CART synthesis (synthpop's default syn()): each replaced "
                      "column drawn from the leaf of a tree on the kept and earlier columns "
                      "(linearly dependent ones left out, as synthpop does), at least "
                      "minbucket records a leaf",
          reference="Reiter (2005); Nowok, Raab and Dibben (2016), synthpop; [DTMS §6]")
def cart(X: np.ndarray, minbucket: int, *, rng: np.random.Generator,
         categorical: Sequence[int] = (), keep: Sequence[int] = (),
         columns: Sequence[str] | None = None,
         synth_columns: Sequence[str] | None = None,
         synth_order: Sequence[str] | None = None,
         labels: Mapping[str, Sequence[str]] | None = None) -> np.ndarray:
    """Sequential CART release of ``X`` (n, m; categorical columns as codes, NaN missing).

    Parameters
    ----------
    minbucket : int >= 1
        Least number of original records in a leaf.
    synth_columns : list of column names, optional
        The replaced columns (default all but ``keep``); the others are kept bit for bit.
    synth_order : list of column names, optional
        The visit sequence (each replaced column once; default the file's order).

    Returns
    -------
    ndarray (n, m)
    """
    plan = plan_columns("cart", X, categorical=categorical, keep=keep, columns=columns,
                        synth_columns=synth_columns)
    sequence = check_order("cart", synth_order, plan, columns)
    check_float32(X, plan, columns)
    streams = Streams(rng)
    order = content_order(X)
    Xs = X[order]
    steps = cart_fit(Xs, plan, sequence, int(minbucket), streams)
    out_s = np.empty_like(Xs)
    spans = blocks(Xs.shape[0])

    def draw(b: int) -> None:
        a, e = spans[b]
        out_s[a:e] = cart_sample_block(steps, Xs[a:e], streams.block(Streams.SYNTH, b))

    workers = _threads(len(spans))
    if workers == 1:
        for b in range(len(spans)):
            draw(b)
    else:                       # blocks are independent: each has its own generator
        with ThreadPoolExecutor(max_workers=workers) as pool:
            list(pool.map(draw, range(len(spans))))
    out = np.empty_like(X)
    out[order] = out_s
    out[:, list(plan.kept)] = X[:, list(plan.kept)]
    return out
