"""The assignment API: :func:`assign`, the content order that breaks ties, and the expected
correctness of pairs of identical records."""

from __future__ import annotations

from typing import Any

import numpy as np

from ...errors import param_error, value_error
from .dense import minmax, nonfinite, solve_dense
from .sparse import Candidates, solve_sparse
from .ties import grid_bits, quantize

__all__ = ["assign", "assign_by_content", "content_order", "top_candidates", "identical_classes",
           "expected_hits", "DEFAULT_DENSE_LIMIT"]

#: Largest ``max(n_rows, n_cols)`` solved densely by default (a 5000 x 5000
#: float64 matrix is 200 MB; the solver is O(n^3) in the worst case).
DEFAULT_DENSE_LIMIT = 5000


_M1 = np.uint64(0xBF58476D1CE4E5B9)
_M2 = np.uint64(0x94D049BB133111EB)


def content_order(V: np.ndarray) -> np.ndarray:
    """A permutation of the rows of ``V`` fixed by their values alone, not their positions.

    Rows are sorted by a 64-bit hash (splitmix64 over the bits of each value;
    -0.0 and every NaN count as 0.0 and one NaN); identical rows keep their
    relative order. Shuffling the rows of ``V`` permutes them back into the same
    sequence of values.

    Parameters
    ----------
    V : ndarray (n, k)

    Returns
    -------
    ndarray (n,) of int64
    """
    V = np.array(V, dtype=np.float64, ndmin=2, copy=True)
    V[V == 0] = 0.0
    V[np.isnan(V)] = np.nan
    bits = np.ascontiguousarray(V).view(np.uint64)
    h = np.full(V.shape[0], 0x9E3779B97F4A7C15, dtype=np.uint64)
    with np.errstate(over="ignore"):
        for k in range(bits.shape[1]):
            z = h ^ bits[:, k]
            z = (z ^ (z >> np.uint64(30))) * _M1
            z = (z ^ (z >> np.uint64(27))) * _M2
            h = z ^ (z >> np.uint64(31))
    return np.argsort(h, kind="stable").astype(np.int64)


def identical_classes(V: np.ndarray) -> np.ndarray:
    """Classes of rows with identical values: a label per row.

    Labels are numbered in the order of the rows' values (so they do not depend
    on how the rows are sorted); -0.0 and 0.0 are one value, and so is every NaN.

    Parameters
    ----------
    V : ndarray (n, k)

    Returns
    -------
    ndarray (n,) of int64
        ``labels[i] == labels[j]`` iff rows i and j are identical.
    """
    V = np.array(V, dtype=np.float64, ndmin=2, copy=True)
    if V.shape[0] == 0:
        return np.zeros(0, np.int64)
    V[V == 0] = 0.0
    V[np.isnan(V)] = np.nan
    rows = np.ascontiguousarray(V).view(np.dtype((np.void, 8 * V.shape[1]))).ravel()
    return np.unique(rows, return_inverse=True)[1].astype(np.int64).ravel()


def expected_hits(rows: np.ndarray, cols: np.ndarray, truth: np.ndarray,
                  row_class: np.ndarray, col_class: np.ndarray) -> np.ndarray:
    """Expected correctness of each assigned pair over the permutations of identical records.

    CATALOG (PRL item 5): records identical on the keys have identical weights, so
    permuting them gives other optimal assignments. A row b whose true column is
    a* counts x / (|H| |G|): H the class of rows identical to b, G the class of
    columns identical to a*, x the number of H's rows the assignment pairs with
    members of G. Spread over the pairs: a pair (h, a) is correct with probability
    n(H, G) / (|H| |G|), n(H, G) the rows of h's class whose true column is in a's
    class; summed over the pairs this is the sum of the rows' x / (|H| |G|). With
    nothing duplicated it is 1 for a true pair and 0 otherwise.

    Parameters
    ----------
    rows, cols : int arrays (k,)
        The assigned pairs.
    truth : int array (n_rows,)
        True column of each row (-1: none).
    row_class, col_class : int arrays (n_rows,), (n_cols,)
        :func:`identical_classes` of the rows' and the columns' records.

    Returns
    -------
    ndarray (k,) of float64, in [0, 1]
    """
    rows = np.asarray(rows, dtype=np.int64)
    cols = np.asarray(cols, dtype=np.int64)
    truth = np.asarray(truth, dtype=np.int64)
    rc = np.asarray(row_class, dtype=np.int64)
    cc = np.asarray(col_class, dtype=np.int64)
    if rows.size == 0:
        return np.zeros(0)
    n_rc = np.bincount(rc)
    n_cc = np.bincount(cc)
    span = np.int64(max(n_cc.size, 1))
    known = np.flatnonzero(truth >= 0)
    pairs, n_hg = np.unique(rc[known] * span + cc[truth[known]], return_counts=True)
    key = rc[rows] * span + cc[cols]
    pos = np.minimum(np.searchsorted(pairs, key), max(pairs.size - 1, 0))
    hit = pairs.size > 0
    x = np.where(pairs[pos] == key, n_hg[pos], 0) if hit else np.zeros(rows.size, np.int64)
    return x / (n_rc[rc[rows]].astype(np.float64) * n_cc[cc[cols]])


def assign_by_content(weights: np.ndarray | Candidates, row_order: np.ndarray,
                      col_order: np.ndarray | None, *, rows_ordered: bool = False, **kw: Any
                      ) -> tuple[np.ndarray, np.ndarray, dict[str, Any]]:
    """:func:`assign` with ties between optimal assignments broken by the records' values.

    The solver breaks ties by position (lowest index first). When rows and
    columns are two versions of the same records in the same order, as an
    original file and its masked release are, that favours the true pairs and
    inflates the share of correct links whenever weights tie. Here both sides
    are solved in :func:`content_order` of their own values, so the optimum
    returned does not depend on how either file is sorted, and the result is
    mapped back (pairs in increasing row order). The total is the same optimum.

    Parameters
    ----------
    weights : ndarray (n_rows, n_cols) or Candidates
    row_order, col_order : ndarray (n_rows,), ndarray (n_cols,)
        :func:`content_order` of the records behind rows and columns (e.g. of
        their key values); ``col_order=None`` when the columns already are in
        content order (their content order is then the identity).
    rows_ordered : bool
        A dense ``weights`` whose rows already are in ``row_order`` (its row q is the
        record ``row_order[q]``; e.g. computed from the rows' records taken in that
        order): no permuted copy is made. Rows returned are still the records' own.
    **kw
        As :func:`assign`; an ``unmatched`` array (one value per row) is permuted along.
    """
    ro = np.asarray(row_order, dtype=np.int64)
    co = None if col_order is None else np.asarray(col_order, dtype=np.int64)
    un = kw.get("unmatched")
    if isinstance(un, np.ndarray) and un.ndim == 1 and un.size == ro.size:
        kw = {**kw, "unmatched": un[ro]}
    if isinstance(weights, Candidates):
        rinv = np.empty_like(ro)
        rinv[ro] = np.arange(ro.size)
        cols = weights.cols
        if co is not None:
            cinv = np.empty_like(co)
            cinv[co] = np.arange(co.size)
            cols = cinv[cols]
        perm = Candidates(rinv[weights.rows], cols, weights.weights, weights.shape)
    else:
        W = np.asarray(weights)
        if rows_ordered:
            perm = W if co is None else W[:, co]
        else:
            perm = W[ro] if co is None else W[np.ix_(ro, co)]
    r, c, info = assign(perm, **kw)
    r = ro[r]
    if co is not None:
        c = co[c]
    o = np.argsort(r, kind="stable")
    return r[o], c[o], info


def top_candidates(W: np.ndarray, c: int, *, maximize: bool = True) -> Candidates:
    """The ``c`` best columns of each row of a dense matrix, as a candidate graph.

    Ties at the cut are broken by column index (a stable sort), so the graph
    depends only on ``W``.
    """
    W = np.asarray(W, dtype=np.float64)
    c = int(min(max(c, 1), W.shape[1]))
    order = np.argsort(-W if maximize else W, axis=1, kind="stable")[:, :c]
    return Candidates.from_topc(order, np.take_along_axis(W, order, axis=1), W.shape[1])


def assign(weights: np.ndarray | Candidates, *, maximize: bool = True,
           dense_limit: int = DEFAULT_DENSE_LIMIT, top_c: int = 20,
           unmatched: Any = None, on_grid: int | None = None,
           extremes: tuple[float, float, np.ndarray] | None = None, on_prices: Any = None
           ) -> tuple[np.ndarray, np.ndarray, dict[str, Any]]:
    """Optimal one-to-one assignment of rows to columns.

    Parameters
    ----------
    weights : ndarray (n_rows, n_cols) or Candidates
        A dense matrix of pair weights (distances when ``maximize=False``), or
        a sparse candidate graph. A dense matrix with
        ``max(n_rows, n_cols) <= dense_limit`` is solved exactly; a larger one
        is first cut to each row's ``top_c`` best columns. A candidate graph
        is always solved sparsely.
    maximize : bool
        Maximise total weight (True) or minimise total distance (False).
    dense_limit : int
        Largest side solved by the dense solver.
    top_c : int
        Candidates per row when a too-large dense matrix must be cut.
    unmatched : None, float, array (n_rows,) or "row_floor"
        Value of leaving a row unassigned (see the module docstring); ``None``
        assigns as many rows as possible. ``"row_floor"`` (sparse only): a row
        left out is worth a hair less than its worst candidate, so a row stays
        unassigned only when that frees a better use of its candidates; much
        faster than ``None`` on large contested graphs, and the same result
        whenever the graph is complete. Dense matrices treat it as ``None``.
    on_grid : int, optional
        A dense ``weights`` already on the grid ``2**-on_grid``: the integers
        ``np.rint(w * 2**on_grid)`` of finite weights (:func:`~.ties.quantize`), with
        ``on_grid`` the bits :func:`~.ties.grid_bits` gives for them (the caller checked
        both, e.g. while computing them); neither checked nor rounded again. Without
        ``unmatched``.
    extremes : (float, float, ndarray (n_cols,)), optional
        With ``on_grid`` and ``maximize``: the smallest and the largest entry of
        ``weights`` and each column's largest, as the caller found them while computing
        the weights (the dense solver then does not read the matrix for them).
    on_prices : callable, optional
        A dense solve calls it (no argument) once its start on every core is done
        (:func:`~.dense.exact_dense`); a caller can start side work then. The same result.

    Returns
    -------
    rows, cols : int arrays, shape (k,)
        Assigned pairs, sorted by row; rows not listed are unassigned.
    info : dict
        ``method`` ("dense" or "sparse"), ``flag`` (1 when the sparse candidate
        restriction was used), ``n_candidates`` (edges in the graph),
        ``n_assigned``, ``n_unassigned_rows``, ``grid`` (the fixed-point grid the
        weights were rounded to: 2^-24 unless their size needs a coarser one).

    Ties: the weights are rounded once to multiples of 2^-24 (:mod:`.ties`) and solved as
    integers, so totals equal in exact arithmetic are equal; among the optimal
    assignments the lexicographically smallest is returned: rows in their order, each
    taking the first column (in column order) it has in some optimal assignment given the
    rows before it, leaving a row out last. (With more rows than columns in a dense
    matrix, the same with the roles of rows and columns swapped.)
    """
    if isinstance(unmatched, str) and unmatched != "row_floor":
        raise param_error("unmatched", "assign", "None, a number, one number per row or "
                          "'row_floor'", unmatched)
    if on_grid is not None:
        if isinstance(weights, Candidates) or unmatched is not None:
            raise param_error("on_grid", "assign", "a dense matrix without unmatched", on_grid)
        if dense_limit < 1:
            raise param_error("dense_limit", "assign", "an integer >= 1", dense_limit)
        return _solve_on_grid(np.asarray(weights, dtype=np.float64), None, int(on_grid),
                              maximize, dense_limit, top_c, None,
                              extremes if maximize else None, on_prices)
    if isinstance(weights, Candidates):
        cand, W = weights.dedup(maximize), None
    else:
        W = np.asarray(weights, dtype=np.float64)
        if W.ndim != 2:
            raise value_error("The weight matrix of an assignment", "2-D",
                              got_text=f"shape {W.shape}")
        if W.ndim == 2 and W.size and nonfinite(W):
            raise value_error("Assignment weights", "finite",
                              got_text=f"{int(np.count_nonzero(~np.isfinite(W)))} non-finite "
                                       "entries")
        cand = None
    if dense_limit < 1:
        raise param_error("dense_limit", "assign", "an integer >= 1", dense_limit)
    # fixed point (CATALOG PRL item 5): every weight rounded once to the grid and held as
    # an integer, so that totals equal in exact arithmetic are equal and content order,
    # not rounding, picks among the optimal assignments
    un = None if unmatched is None or isinstance(unmatched, str) else \
        np.asarray(unmatched, dtype=np.float64)
    if W is not None:
        lo, hi = minmax(W) if W.size else (0.0, 0.0)
        n_pairs = min(W.shape) if W.size else 0
    else:
        lo, hi = ((float(cand.weights.min()), float(cand.weights.max()))
                  if cand.weights.size else (0.0, 0.0))
        n_pairs = min(cand.shape)
    if un is not None and un.size:
        if not np.all(np.isfinite(un)):
            raise param_error("unmatched", "assign", "finite numbers", "a non-finite value")
        lo, hi = min(lo, float(un.min())), max(hi, float(un.max()))
    bits = grid_bits(lo, hi, n_pairs)
    uq = unmatched if un is None else quantize(un, bits)
    if W is not None:
        W = quantize(W, bits)
    else:
        cand = Candidates(cand.rows, cand.cols, quantize(cand.weights, bits), cand.shape)
    return _solve_on_grid(W, cand, bits, maximize, dense_limit, top_c, uq, None, on_prices)


def _solve_on_grid(W: np.ndarray | None, cand: Candidates | None, bits: int, maximize: bool,
                   dense_limit: int, top_c: int, uq: Any, extremes: Any = None,
                   on_prices: Any = None) -> tuple[np.ndarray, np.ndarray, dict[str, Any]]:
    # the steps of assign() after the rounding (or for weights already on the grid
    # 2**-bits, held as integers): a dense matrix (cut to each row's top_c best columns
    # above dense_limit) or a candidate graph, solved as integers
    if W is not None and max(W.shape) > dense_limit:
        cand, W = top_candidates(W, top_c, maximize=maximize), None
    if W is not None:
        n_r = W.shape[0]
        if W.size == 0:
            r = c = np.zeros(0, np.int64)
        else:
            r, c = solve_dense(W, maximize, uq, integer=True, extremes=extremes,
                               on_prices=on_prices)
        info = {"method": "dense", "flag": 0, "n_candidates": int(W.size)}
    else:
        n_r = cand.shape[0]
        r, c, _, _ = solve_sparse(cand, maximize=maximize, unmatched=uq, integer=True)
        info = {"method": "sparse", "flag": 1, "n_candidates": int(cand.rows.size)}
    info["grid"] = 2.0 ** -bits
    order = np.argsort(r, kind="stable")
    r, c = np.asarray(r, np.int64)[order], np.asarray(c, np.int64)[order]
    info.update(n_assigned=int(r.size), n_unassigned_rows=int(n_r - r.size))
    return r, c, info
