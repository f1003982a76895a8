"""Poisson log-linear models of a grid of cell counts, fitted as R's ``glm.fit`` and MASS's
``loglm`` fit them: what the model-based risk (:mod:`.modrisk`) fits.

- :func:`design_matrix`: the treatment-contrast design of a full grid (R's
  ``model.matrix``);
- :func:`poisson_glm`: iteratively reweighted least squares on a dense design (start
  μ = y + 0.1, stopping when the relative change of the deviance is below 1e-8, at most
  25 iterations);
- :class:`GridDesign`, :func:`poisson_glm_grid`: the same iterations without forming the
  design: each least-squares step solves its normal equations, whose products are margins
  of the grid (O(cells x terms^2) an iteration); a step whose matrix is too
  ill-conditioned for them takes the dense pivoted QR instead;
- :func:`ipf_main_effects`: iterative proportional fitting of the main-effects model.

Plain numpy and scipy on the client (one BLAS thread, so the fits have the same bits
everywhere), no scheduling.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np

from ...parallel import one_blas_thread

__all__ = ["design_matrix", "poisson_glm", "GridDesign", "poisson_glm_grid",
           "ipf_main_effects"]

_EPS = np.finfo(np.float64).eps


def _linalg() -> Any:
    """scipy.linalg, imported on first use (listing the metrics stays light)."""
    import scipy.linalg
    return scipy.linalg


def design_matrix(levels: Sequence[int], terms: Sequence[tuple[int, ...]]) -> np.ndarray:
    """Treatment-contrast design of the full grid of cells (C order over the columns).

    ``levels``: the number of levels of each column; ``terms``: tuples of column
    positions. Columns: the intercept, then for each term the products of its columns'
    indicators of levels 2..L. Shape (prod(levels), P).
    """
    idx = np.indices(levels).reshape(len(levels), -1)
    G = idx.shape[1]
    widths = [int(np.prod([levels[j] - 1 for j in t])) for t in terms]
    X = np.zeros((G, 1 + sum(widths)))
    X[:, 0] = 1.0
    off = 1
    for t, wd in zip(terms, widths):
        if wd:
            ok = np.ones(G, bool)
            code = np.zeros(G, np.int64)
            for j in t:
                ok &= idx[j] >= 1
                code = code * (levels[j] - 1) + (idx[j] - 1)
            rows = np.flatnonzero(ok)
            X[rows, off + code[rows]] = 1.0
        off += wd
    return X


def _poisson_dev(y: np.ndarray, mu: np.ndarray) -> float:
    r = mu.copy()
    p = y > 0
    r[p] = y[p] * np.log(y[p] / mu[p]) - (y[p] - mu[p])
    return float(np.sum(2.0 * r))


def _irls_start(y: Any, offset: Any) -> tuple[np.ndarray, ...]:
    """The start of R's ``glm.fit`` for the Poisson family: counts, offset, eta = log(y +
    0.1), mu and the deviance there (shared by :func:`poisson_glm` and its grid form)."""
    y = np.asarray(y, dtype=np.float64)
    off = np.zeros_like(y) if offset is None else np.asarray(offset, dtype=np.float64)
    eta = np.log(y + 0.1)
    mu = np.maximum(np.exp(eta), _EPS)
    return y, off, eta, mu, _poisson_dev(y, mu)


def poisson_glm(X: np.ndarray, y: np.ndarray, offset: np.ndarray | None = None, *,
                epsilon: float = 1e-8, maxit: int = 25) -> tuple[np.ndarray, int, bool]:
    """Fitted means of a Poisson log-linear model, by R's ``glm.fit`` iterations.

    Parameters
    ----------
    X : ndarray (G, P)
        Design matrix.
    y : ndarray (G,)
        Non-negative responses.
    offset : ndarray (G,), optional

    Returns
    -------
    mu : ndarray (G,)
        Fitted means.
    iterations : int
    converged : bool
        Whether the relative change of the deviance fell below ``epsilon``.
    """
    y, off, eta, mu, devold = _irls_start(y, offset)
    converged = False
    it = 0
    with one_blas_thread():
        for it in range(1, maxit + 1):
            d = np.maximum(np.exp(eta), _EPS)           # d mu / d eta
            z = (eta - off) + (y - mu) / d
            w = np.sqrt(d * d / mu)
            # QR with column pivoting (R's dqrls pivots too): a rank-deficient design
            # gives the same fitted values
            beta = _linalg().lstsq(X * w[:, None], z * w, lapack_driver="gelsy",
                                      check_finite=False)[0]
            eta = X @ beta + off
            mu = np.maximum(np.exp(eta), _EPS)
            dev = _poisson_dev(y, mu)
            if abs(dev - devold) / (abs(dev) + 0.1) < epsilon:
                converged = True
                break
            devold = dev
    return mu, it, converged


class GridDesign:
    """The treatment-contrast design of :func:`design_matrix`, never formed: the products
    a Poisson fit needs are margins of the full grid of cells.

    A column of the design is the indicator of one combination of levels 2..L of a term's
    columns, so X'WX's entry of two columns is the sum of W over the cells where both
    indicators hold: a cell of the margin of W over the union of the two terms' columns.
    One iteration costs a margin per pair of terms, O(cells x terms^2), instead of the
    O(cells x parameters^2) of a dense least-squares step. ``extra``: dense columns
    appended after the grid's (weightedLLM's weight sums).
    """

    def __init__(self, levels: Sequence[int], terms: Sequence[tuple[int, ...]],
                 extra: np.ndarray | None = None) -> None:
        self.levels = tuple(int(v) for v in levels)
        # the intercept is the term without columns; a term with a one-level column has none
        self.terms = [t for t in [()] + [tuple(t) for t in terms]
                      if all(self.levels[j] > 1 for j in t)]
        self.widths = [int(np.prod([self.levels[j] - 1 for j in t])) for t in self.terms]
        self.offsets = np.concatenate([[0], np.cumsum(self.widths)]).astype(int)
        if extra is not None:
            extra = np.asarray(extra, np.float64)
            extra = extra.reshape(-1, 1) if extra.ndim == 1 else extra
        self.extra = extra
        self.p_grid = int(self.offsets[-1])
        self.P = self.p_grid + (0 if self.extra is None else self.extra.shape[1])

    def _margin(self, T: np.ndarray, axes: tuple[int, ...]) -> np.ndarray:
        """Sum of the grid tensor T over every column outside ``axes``, levels 2..L of
        ``axes`` kept, axes in the order given."""
        d = len(self.levels)
        M = T.sum(axis=tuple(a for a in range(d) if a not in axes))
        srt = sorted(axes)
        M = M[tuple(slice(1, None) for _ in srt)]
        return np.transpose(M, [srt.index(a) for a in axes])

    def gram(self, w: np.ndarray) -> np.ndarray:
        """X' diag(w) X."""
        T = w.reshape(self.levels)
        A = np.zeros((self.P, self.P))
        nt = len(self.terms)
        for a in range(nt):
            for b in range(a, nt):
                S, U = self.terms[a], self.terms[b]
                union = tuple(sorted(set(S) | set(U)))
                M = self._margin(T, union)
                idx = np.indices(M.shape).reshape(len(union), M.size)
                cs = np.zeros(idx.shape[1], np.int64)
                for j in S:
                    cs = cs * (self.levels[j] - 1) + idx[union.index(j)]
                cu = np.zeros(idx.shape[1], np.int64)
                for j in U:
                    cu = cu * (self.levels[j] - 1) + idx[union.index(j)]
                blk = np.zeros((self.widths[a], self.widths[b]))
                blk[cs, cu] = M.reshape(-1)
                oa, ob = self.offsets[a], self.offsets[b]
                A[oa:oa + self.widths[a], ob:ob + self.widths[b]] = blk
                A[ob:ob + self.widths[b], oa:oa + self.widths[a]] = blk.T
        if self.extra is not None:
            for k in range(self.extra.shape[1]):
                col = self.tmul(w * self.extra[:, k])
                A[:, self.p_grid + k] = col
                A[self.p_grid + k, :] = col
        return A

    def tmul(self, v: np.ndarray) -> np.ndarray:
        """X' v."""
        T = v.reshape(self.levels)
        out = np.empty(self.P)
        for t, o, wd in zip(self.terms, self.offsets, self.widths):
            out[o:o + wd] = self._margin(T, t).reshape(-1)
        if self.extra is not None:
            out[self.p_grid:] = self.extra.T @ v
        return out

    def mul(self, beta: np.ndarray) -> np.ndarray:
        """X beta."""
        d = len(self.levels)
        eta = np.zeros(self.levels)
        for t, o, wd in zip(self.terms, self.offsets, self.widths):
            B = np.zeros([self.levels[j] for j in t])
            B[tuple(slice(1, None) for _ in t)] = beta[o:o + wd].reshape(
                [self.levels[j] - 1 for j in t])
            srt = sorted(t)
            B = np.transpose(B, [t.index(a) for a in srt])
            shape = [self.levels[a] if a in t else 1 for a in range(d)]
            eta = eta + B.reshape(shape)
        eta = eta.reshape(-1)
        if self.extra is not None:
            eta = eta + self.extra @ beta[self.p_grid:]
        return eta


def poisson_glm_grid(design: GridDesign, y: np.ndarray, offset: np.ndarray | None = None, *,
                     epsilon: float = 1e-8, maxit: int = 25,
                     dense: np.ndarray | None = None) -> tuple[np.ndarray, int, bool]:
    """:func:`poisson_glm` on the full grid of cells, each least-squares step solved by its
    normal equations X'WX beta = X'Wz built from margins (:class:`GridDesign`), by a
    Cholesky factorisation of the equilibrated matrix. The same iterations, start and
    stopping rule; where the matrix is too ill-conditioned for the normal equations (a
    reciprocal condition below 1e-10, e.g. a term whose cells all fit to zero, or a weight
    column collinear with the terms), the step is the dense pivoted QR of
    :func:`poisson_glm` on ``dense`` (the design matrix, formed on demand)."""
    y, off, eta, mu, devold = _irls_start(y, offset)
    converged = False
    it = 0
    X = dense
    with one_blas_thread():
        for it in range(1, maxit + 1):
            d = np.maximum(np.exp(eta), _EPS)
            z = (eta - off) + (y - mu) / d
            w2 = d * d / mu
            beta = None
            A = design.gram(w2)
            b = design.tmul(w2 * z)
            s = np.sqrt(np.diag(A))
            if np.all(s > 0):
                As = A / s[:, None] / s[None, :]
                try:
                    c, low = _linalg().cho_factor(As, check_finite=False)
                    if _rcond_chol(c, As, low) > 1e-10:
                        beta = _linalg().cho_solve((c, low), b / s,
                                                      check_finite=False) / s
                except np.linalg.LinAlgError:
                    beta = None
            if beta is None:
                if X is None:
                    X = design_matrix(design.levels, design.terms[1:])
                    if design.extra is not None:
                        X = np.column_stack([X, design.extra])
                w = np.sqrt(w2)
                beta = _linalg().lstsq(X * w[:, None], z * w, lapack_driver="gelsy",
                                          check_finite=False)[0]
                eta = X @ beta + off
            else:
                eta = design.mul(beta) + off
            mu = np.maximum(np.exp(eta), _EPS)
            dev = _poisson_dev(y, mu)
            if abs(dev - devold) / (abs(dev) + 0.1) < epsilon:
                converged = True
                break
            devold = dev
    return mu, it, converged


def _rcond_chol(c: np.ndarray, A: np.ndarray, lower: bool) -> float:
    """Reciprocal 1-norm condition number of A from its Cholesky factor (LAPACK dpocon)."""
    anorm = float(np.abs(A).sum(axis=0).max())
    rc, info = _linalg().lapack.dpocon(c, anorm, uplo="L" if lower else "U")
    return float(rc) if info == 0 else 0.0


def ipf_main_effects(table: np.ndarray, *, eps: float = 0.1, maxit: int = 40
                     ) -> tuple[np.ndarray, int, bool]:
    """Fitted counts of the main-effects (independence) model by iterative proportional
    fitting, as R's ``loglin`` (start 1; a cycle adjusts each one-way margin in turn; stop
    when no fitted margin was more than ``eps`` off at the start of its adjustment)."""
    fit = np.ones(table.shape)
    d = table.ndim
    it = 0
    for it in range(1, maxit + 1):
        xmax = 0.0
        for j in range(d):
            axes = tuple(a for a in range(d) if a != j)
            obs = table.sum(axis=axes)
            cur = fit.sum(axis=axes)
            xmax = max(xmax, float(np.abs(cur - obs).max()))
            adj = np.divide(obs, cur, out=np.zeros_like(cur), where=cur > 0)
            shape = [1] * d
            shape[j] = -1
            fit = fit * adj.reshape(shape)
        if xmax < eps:
            return fit, it, True
    return fit, it, False
