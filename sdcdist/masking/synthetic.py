"""IPSO synthetic generators (Burridge): quasi-identifiers replaced by regression draws.

The columns play two roles: the confidential ones X_c are the regressors and
are released unchanged; the quasi-identifiers Y are regressed on [1, X_c] and
replaced by synthetic values Y'. Other columns are released unchanged.

Roles are an option of the method::

    roles={"confidential": [0, 1], "quasi": [2, 3, 4]}             # positions (0-based)
    roles={"confidential": ["AGI", "TAX"], "quasi": ["FICA"]}, columns=names

``"key"`` is accepted for ``"quasi"``, so a dataset's ``roles`` attribute
(``{"key": [...], "confidential": [...]}``) can be passed as it is; other roles
are ignored.

B̂ and Σ̂ are the maximum-likelihood estimates: B̂ by least squares and
Σ̂ = RᵀR/n with R the residuals.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np

from ..errors import SdcInputError, column_error, count_error, value_error
from ._registry import register
from .noise import cov_factor

__all__ = ["ipso_a", "ipso_b", "ipso_c", "ipso", "resolve_roles", "regression_fit"]

QUASI_NAMES = ("quasi", "key")


def resolve_roles(roles: Mapping[str, Sequence] | None, m: int, method: str,
                  columns: Sequence[str] | None = None) -> tuple[list[int], list[int]]:
    """Positions of the confidential and quasi-identifier columns.

    Parameters
    ----------
    roles : mapping
        ``"confidential"`` and ``"quasi"`` (or ``"key"``): column positions or,
        with ``columns``, column names.
    m : int
        Number of columns of the data.
    method : str
        For messages.
    columns : sequence of str, optional
        Column names, needed when roles name columns.

    Returns
    -------
    (confidential, quasi) : lists of 0-based positions, disjoint, non-empty.
    """
    how = ("pass roles={'confidential': [...], 'quasi': [...]} (column positions, or names "
           "with columns=[...]), or declare the roles 'confidential' and 'key' on the dataset")
    if not roles:
        raise SdcInputError(f"{method} needs the roles of the columns (confidential "
                            f"regressors and quasi-identifiers): {how}.")
    given = f" (roles given: {', '.join(map(str, roles))})"
    quasi_key = [r for r in QUASI_NAMES if roles.get(r)]
    if len(quasi_key) > 1:
        raise SdcInputError(f"{method}: give the quasi-identifiers once, as 'quasi' or as "
                            f"'key', not both.")
    conf = list(roles.get("confidential") or [])
    quasi = list(roles.get(quasi_key[0]) if quasi_key else [])
    for what, cols in (("confidential", conf), ("quasi-identifier", quasi)):
        if not cols:
            raise count_error(f"The {what} role of {method}{given}", "at least 1", "column", 0,
                              how)
    pos = {}
    if columns is not None:
        pos = {c: i for i, c in enumerate(columns)}

    def position(c) -> int:
        if isinstance(c, str):
            if columns is None:
                raise SdcInputError(f"{method}: roles name columns ({c!r}) but no column names "
                                    f"were given; pass columns=[...] or use positions.")
            if c not in pos:
                raise column_error([c], columns, where=f"the roles of {method}")
            return pos[c]
        if isinstance(c, bool) or not isinstance(c, (int, np.integer)) or not 0 <= c < m:
            raise value_error(f"Role column {c!r} of {method}",
                              f"a column position in [0, {m - 1}] or a column name")
        return int(c)

    conf_pos = [position(c) for c in conf]
    quasi_pos = [position(c) for c in quasi]
    both = sorted(set(conf_pos) & set(quasi_pos))
    if both:
        raise SdcInputError(f"{method}: column position(s) {both} are both confidential and "
                            f"quasi-identifier; each column has one role.")
    if len(set(conf_pos)) < len(conf_pos) or len(set(quasi_pos)) < len(quasi_pos):
        raise SdcInputError(f"{method}: a column is listed twice in the roles.")
    return conf_pos, quasi_pos


def _design_basis(A: np.ndarray) -> np.ndarray:
    """Orthonormal basis (n, r) of the column space of A (SVD, rank by the usual tolerance)."""
    U, s, _ = np.linalg.svd(A, full_matrices=False)
    tol = s.max() * max(A.shape) * np.finfo(float).eps
    return U[:, s > tol]


def regression_fit(A: np.ndarray, Y: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Least-squares B̂ of Y (n, q) on A (n, c) and the ML residual covariance Σ̂ = RᵀR/n."""
    B, *_ = np.linalg.lstsq(A, Y, rcond=None)
    R = Y - A @ B
    return B, R.T @ R / A.shape[0]


def check_records(n: int, m: int, variant: str, *,
                  roles: Mapping[str, Sequence] | None = None,
                  columns: Sequence[str] | None = None) -> tuple[list[int], list[int]]:
    """Check that IPSO ``variant`` can fit ``n`` records of ``m`` columns with these roles.

    Returns the positions of the confidential and quasi-identifier columns.

    Raises
    ------
    SdcInputError
        If the roles are wrong, or there are too few records for the regression.
    """
    method = f"ipso_{variant}"
    conf, quasi = resolve_roles(roles, m, method, columns)
    c, q = len(conf), len(quasi)
    need = c + 1 + (q if variant == "c" else 0)
    if n <= need:
        what = (f"the {c + 1} regressors (intercept and {c} confidential column(s)) plus the "
                f"{q} quasi-identifier(s), so that the residual covariance can be restored"
                if variant == "c" else
                f"the {c + 1} regressors (intercept and {c} confidential column(s))")
        raise count_error(f"The array given to {method}", f"at least {need + 1}", "records", n,
                          f"more than {what}")
    return conf, quasi


def ipso(X: np.ndarray, variant: str, *, rng: np.random.Generator,
         roles: Mapping[str, Sequence] | None = None,
         columns: Sequence[str] | None = None) -> np.ndarray:
    """IPSO-A, -B or -C (``variant`` "a", "b", "c"): see the registered methods."""
    n, m = X.shape
    conf, quasi = check_records(n, m, variant, roles=roles, columns=columns)
    q = len(quasi)
    A = np.column_stack([np.ones(n), X[:, conf]])
    Y = X[:, quasi]
    B, S = regression_fit(A, Y)
    # E* = W Lᵀ with W standard normal (n, q) and L Lᵀ = Σ̂. Both later steps act on
    # W, which is the same as acting on E* (E* is linear in W) but stays exact when Σ̂
    # is singular (quasi-identifiers collinear given X_c).
    W = rng.standard_normal((n, q))
    if variant in ("b", "c"):
        U = _design_basis(A)
        W = W - U @ (U.T @ W)          # residual after regression on [1, X_c]
    if variant == "c":
        # whiten: sample covariance (WᵀW/n) exactly the identity; Lᵀ then recolours to Σ̂
        Lw = np.linalg.cholesky(W.T @ W / n)
        W = np.linalg.solve(Lw, W.T).T
    E = W @ cov_factor(S).T
    out = X.copy()
    out[:, quasi] = A @ B + E
    return out


def _check_ipso_data(X: np.ndarray, params: Sequence[float], *, method: str,
                     options: Mapping[str, Any], **_: Any) -> None:
    """Data check of IPSO: the roles name columns of the file, and there are enough records
    for the regression."""
    check_records(X.shape[0], X.shape[1], method.rsplit("_", 1)[-1],
                  roles=options.get("roles"), columns=options.get("columns"))


_IPSO = dict(param="none", kind="none", random=True, options=("roles", "columns"),
             reference="[DTMS §2, Burridge]", data_check=_check_ipso_data)


@register("ipso_a", **_IPSO,
          description="IPSO-A: quasi-identifiers replaced by their regression on the "
                      "confidential columns plus normal noise with the residual covariance")
def ipso_a(X: np.ndarray, param: float = 0.0, *, rng: np.random.Generator,
           roles: Mapping[str, Sequence] | None = None,
           columns: Sequence[str] | None = None) -> np.ndarray:
    """IPSO-A: ``Y' = [1, X_c] B̂ + E*``, rows of E* i.i.d. N(0, Σ̂).

    Parameters
    ----------
    X : ndarray, shape (n, m)
        Original data. Not modified.
    param : 0 (the method has no parameter)
    rng : numpy.random.Generator
    roles : mapping
        Confidential (regressor) and quasi-identifier columns; see the module doc.
    columns : sequence of str, optional
        Column names, when roles name columns.

    Returns
    -------
    ndarray, shape (n, m)
        The quasi-identifier columns replaced; every other column unchanged.
    """
    return ipso(X, "a", rng=rng, roles=roles, columns=columns)


@register("ipso_b", **_IPSO,
          description="IPSO-B: as IPSO-A with the noise made orthogonal to the regressors, so "
                      "the regression coefficients are kept exactly")
def ipso_b(X: np.ndarray, param: float = 0.0, *, rng: np.random.Generator,
           roles: Mapping[str, Sequence] | None = None,
           columns: Sequence[str] | None = None) -> np.ndarray:
    """IPSO-B: as :func:`ipso_a` with E* replaced by its residual on [1, X_c].

    Regressing Y' on [1, X_c] returns exactly B̂. Parameters and return as
    :func:`ipso_a`.
    """
    return ipso(X, "b", rng=rng, roles=roles, columns=columns)


@register("ipso_c", **_IPSO,
          description="IPSO-C: as IPSO-B with the noise recoloured to the residual covariance, "
                      "so coefficients and residual covariance are both kept exactly")
def ipso_c(X: np.ndarray, param: float = 0.0, *, rng: np.random.Generator,
           roles: Mapping[str, Sequence] | None = None,
           columns: Sequence[str] | None = None) -> np.ndarray:
    """IPSO-C: as :func:`ipso_b`, the residual whitened and recoloured to Σ̂ exactly.

    Regressing Y' on [1, X_c] returns exactly B̂ and residual covariance
    (RᵀR/n) exactly Σ̂. Parameters and return as :func:`ipso_a`.
    """
    return ipso(X, "c", rng=rng, roles=roles, columns=columns)
