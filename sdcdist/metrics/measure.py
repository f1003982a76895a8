"""``measure``: compute metrics for one (original, masked) pair, here or on a cluster."""

from __future__ import annotations

import logging
from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np

from ..errors import SdcInputError, column_positions, value_error, weight_error
from ..parallel import Runner
from ._registry import MeasureContext, MetricResult, constant_columns, get_metric
from .keysets import default_keysets

__all__ = ["measure", "expand_requirements", "options_of"]

log = logging.getLogger(__name__)



def expand_requirements(names: Sequence[str]) -> list[str]:
    """``names`` plus every metric they are computed from, dependencies first."""
    out: list[str] = []

    def visit(n: str) -> None:
        m = get_metric(n)
        for r in m.requires:
            visit(r)
        if n not in out:
            out.append(n)
    for n in names:
        visit(n)
    return out


def options_of(name: str) -> list:
    """The options (:class:`sdcdist.options.Option`) metric ``name`` reads, its own and
    those of the metrics it is computed from, in declaration order. Unknown metric: the
    standard error listing the valid names."""
    from ..options import OPTIONS
    get_metric(name)
    used = {o for m in expand_requirements([name]) for o in get_metric(m).options}
    return [OPTIONS[n] for n in OPTIONS if n in used]


def _handle(runner: Runner, data: Any) -> tuple[Any, tuple[int, int]]:
    from ..data import Microdata, StoredArray
    if isinstance(data, Microdata):
        data = data.values
    if isinstance(data, StoredArray):
        return data, tuple(data.shape)  # type: ignore[return-value]
    # C order, as a store's chunks are read: a kernel's floating-point results may depend
    # on the memory layout (a CSV read into memory comes column-major)
    arr = np.ascontiguousarray(data, dtype=np.float64)
    if arr.ndim != 2:
        raise value_error("microdata", "2-D (records x variables)", got_text=f"shape {arr.shape}")
    return runner.share(arr), arr.shape  # type: ignore[return-value]


def _check_codes(categorical: Sequence[str] | None, inputs: Sequence[tuple[Any, Any, str]]
                 ) -> None:
    """The categorical columns of in-memory inputs hold codes 0, 1, 2, ... or NaN (a store
    written by sdcdist does)."""
    from ..data import Microdata, StoredArray
    from ..keytables import check_codes
    seen: list[tuple[Any, list]] = []
    for data, cols, what in inputs:
        if data is None or isinstance(data, StoredArray) or not categorical or cols is None:
            continue
        if any(data is d and list(cols) == c for d, c in seen):
            continue                               # the same array, already checked
        seen.append((data, list(cols)))
        arr = np.asarray(data.values if isinstance(data, Microdata) else data)
        if arr.ndim != 2 or arr.shape[1] != len(cols):
            continue                               # refused below with its own message
        cats = [c for c in categorical if c in cols]
        if cats:
            pos = [list(cols).index(c) for c in cats]
            check_codes(arr if pos == list(range(arr.shape[1])) else arr[:, pos], cats,
                        where=what)


def measure(original: Any, masked: Any, metrics: Sequence[str], *,
            columns: Sequence[str] | None = None,
            keysets: Sequence[Sequence[str]] | None = None,
            client: Any = None, seed: int | np.random.SeedSequence = 0,
            options: Mapping[str, Any] | None = None,
            truth: np.ndarray | None = None,
            masked_columns: Sequence[str] | None = None,
            categorical: Sequence[str] | None = None,
            weight: str | None = None,
            confidential: Sequence[str] | None = None,
            household: str | None = None,
            holdout: Any = None,
            control: Any = None) -> dict[str, MetricResult]:
    """Measure information loss and disclosure risk of ``masked`` against ``original``.

    Parameters
    ----------
    original, masked : ndarray (n, m), Microdata or StoredArray
    metrics : list of str
        Canonical metric names (see ``sdcdist.metrics.REGISTRY``).
    columns : list of str, optional
        Column names; default ``V1..Vm`` (or the Microdata's names).
    keysets : list of list of str, optional
        Key sets for linkage metrics; default prefixes of sizes 1..min(7, m).
    client : distributed.Client, optional
        Run the pieces on this cluster; ``None`` runs them here.
    seed : int or SeedSequence
        Seeds the metrics that break ties at random.
    options : dict, optional
        Computation options (``chunk_rows``, ``block_memory``, ``block_rows``, ...).
    truth : int array (n_masked,), optional
        Row of each masked record's true record in ``original`` (-1: absent).
        A truth that matches no record is refused; otherwise the risk
        metrics' ``info`` carries ``matched`` and ``unmatched``, the counts of
        masked records with and without a true record.
    masked_columns : list of str, optional
        Column names of ``masked`` when they differ from the original's (an
        intruder's file and a release holding different variables). Linkage
        key columns must exist in both files (matched by name); ``CRL`` can
        link files with no shared column. Default: the original's names.
    categorical : list of str, optional
        The categorical columns (codes). Default: those of ``original`` when it is
        a :class:`~sdcdist.data.Microdata`, else none. Numeric-only losses and
        utilities leave them (and the weight) out; linkage metrics refuse them in
        a key set; the frequency risk metrics count their combinations.
    weight : str, optional
        The sampling-weight column. Default: the ``weight`` role of ``masked``
        (else of ``original``) when a Microdata.
    confidential : list of str, optional
        The confidential columns of the attribute-disclosure metrics (``ldiv_*``,
        ``tclose``, ``beta_*``, ``delta_disc``). Default: the ``confidential`` role of
        ``masked`` (else of ``original``) when a Microdata.
    household : str, optional
        The household id column of the household risk metrics (``HR_*``); never a
        linkage key. Default: the ``household`` role of ``masked`` (else of
        ``original``) when a Microdata.
    holdout : ndarray (n_h, m), Microdata or StoredArray, optional
        A holdout file: records of the original's population that the release was not
        made from, with the original's columns (same codes for the same categories).
        Read by ``dcr_holdout_median``, ``dcr_closer_train`` and ``dcr_overfit``.
    control : ndarray (n_c, m), Microdata or StoredArray, optional
        The control set of the singling-out, linkability and inference attacks
        (``so_uni``, ``so_multi``, ``linkability``, ``inference`` and their
        ``_lo``, ``_hi``, ``_base``): original records, with the original file's
        columns, that were held out of what was masked. Without it those risks are
        the main attacks' success rates.

    Returns
    -------
    dict of str -> MetricResult
        Every requested metric (and those they are computed from).

    Raises
    ------
    SdcInputError
        Among others, if ``truth`` matches no masked record.
    """
    from ..data import Microdata
    for name in metrics:
        get_metric(name)
    if categorical is None:
        categorical = [c for md in (original, masked) if isinstance(md, Microdata)
                       for c in md.categorical]
        categorical = list(dict.fromkeys(categorical))
    if weight is None:
        weight = next((md.weight for md in (masked, original)
                       if isinstance(md, Microdata) and md.weight), None)
    if confidential is None:
        confidential = next((list(md.roles.get("confidential") or ())
                             for md in (masked, original)
                             if isinstance(md, Microdata) and md.roles.get("confidential")),
                            [])
    if household is None:
        household = next((md.household for md in (masked, original)
                          if isinstance(md, Microdata) and md.household), None)
    if columns is None:
        columns = original.columns if isinstance(original, Microdata) else None
    if masked_columns is None and isinstance(masked, Microdata) and columns is not None \
            and list(masked.columns) != list(columns):
        masked_columns = masked.columns
    runner = Runner(client)
    A, shape_a = _handle(runner, original)
    # the same object as both files (a file measured against itself, e.g. a release's own
    # risk) is copied, shared and checked once
    B, shape_b = (A, shape_a) if masked is original else _handle(runner, masked)
    if columns is None:
        columns = [f"V{j + 1}" for j in range(shape_a[1])]
    H, shape_h = (None, None) if holdout is None else _handle(runner, holdout)
    if shape_h is not None:
        if isinstance(holdout, Microdata) and tuple(holdout.columns) != tuple(columns):
            raise SdcInputError(f"the holdout file's columns {list(holdout.columns)} differ "
                                f"from the original file's {list(columns)}; give the holdout "
                                "the original's columns in the same order")
        if shape_h[1] != shape_a[1]:
            raise SdcInputError(f"the holdout file has {shape_h[1]} columns and the original "
                                f"file {shape_a[1]}; give the holdout the original's columns")
    if masked_columns is None:
        if shape_a[1] != shape_b[1]:
            raise SdcInputError(f"the original file has {shape_a[1]} columns and the masked "
                                f"file {shape_b[1]}; give both the same columns in the same "
                                "order, or name the masked file's columns (masked_columns)")
        masked_columns = columns
    if len(columns) != shape_a[1]:
        raise SdcInputError(f"{len(columns)} column names for {shape_a[1]} columns")
    if len(masked_columns) != shape_b[1]:
        raise SdcInputError(f"{len(masked_columns)} masked column names for {shape_b[1]} "
                            "columns")
    if tuple(masked_columns) != tuple(columns):
        same = [n for n in expand_requirements(metrics) if get_metric(n).same_shape]
        if same:
            raise SdcInputError(
                f"the masked file's columns {list(masked_columns)} differ from the original "
                f"file's {list(columns)}; {', '.join(same)} compare the files column by "
                "column, so both files need the same columns in the same order")
    _check_codes(categorical, ((original, columns, "the original file"),
                               (masked, masked_columns, "the masked file"),
                               (holdout, columns, "the holdout file"),
                               (control, columns, "the control set")))
    if weight is not None and weight in set(categorical or ()):
        raise weight_error(weight, fix="name a numeric weight column (--weight), or leave "
                           "the weight out")
    # the sampling weight is never a linkage key: it is not masked, and an intruder does
    # not know it (it would link every record to itself)
    shared = [c for c in columns if c in set(masked_columns) and c not in (weight, household)]
    if keysets is None and confidential:
        # a confidential column is what an intruder wants to learn, not a key they know: it
        # is left out of the default key sets (named key sets may still hold one)
        conf_set = set(confidential)
        shared = [c for c in shared if c not in conf_set] or shared
    if household is not None:
        if household == weight:
            raise SdcInputError(f"column {household!r} is both the household id and the "
                                "weight; give it one role")
        if household in set(confidential or ()):
            raise SdcInputError(f"column {household!r} is both the household id and a "
                                "confidential column; give it one role")
        if keysets is not None:
            with_hid = [list(ks) for ks in keysets if household in ks]
            if with_hid:
                raise SdcInputError(
                    f"key set {with_hid[0]} holds the household id column {household!r}; a "
                    "household id is never a linkage key (it identifies the household, not a "
                    "trait an intruder knows): leave it out of the key sets")
    if keysets is not None and weight is not None:
        with_weight = [list(ks) for ks in keysets if weight in ks]
        if with_weight:
            raise SdcInputError(
                f"key set {with_weight[0]} holds the weight column {weight!r}; the sampling "
                "weight is never a linkage key (it is not masked, so it would link every "
                "record to itself): leave it out of the key sets")
    if keysets is not None:
        if len(keysets) == 0:
            raise SdcInputError("no key sets given; give at least one list of key columns")
        for ks in keysets:
            if len(ks) == 0:
                raise SdcInputError("an empty key set was given; every key set needs at least "
                                    "one column")
            dup = sorted({c for c in ks if list(ks).count(c) > 1})
            if dup:
                raise SdcInputError(f"key set {list(ks)} names {dup} more than once; give each "
                                    "column once per key set")
            for have, what in ((columns, "original"), (masked_columns, "masked")):
                column_positions(ks, have, what="key set column", where=f"the {what} file")
    elif not shared and any(get_metric(n).keysets for n in metrics):
        need = [n for n in metrics if get_metric(n).keysets]
        raise SdcInputError(f"the original and masked files share no key columns, which "
                            f"{', '.join(need)} link on; give the key columns the same names "
                            "in both files (CRL can link without shared columns)")
    left_out: list[str] = []
    if keysets is None and any(get_metric(n).keysets for n in expand_requirements(metrics)):
        # a constant column cannot link (its standardisation divides by 0): left out of the
        # default key sets, with a note (named key sets holding one are refused by the metric)
        cats = set(categorical or ())
        num = [c for c in shared if c not in cats]
        ca = runner.call(constant_columns, A, column_positions(num, columns))
        cb = runner.call(constant_columns, B, column_positions(num, masked_columns))
        left_out = [c for c, x, y in zip(num, ca, cb) if x or y]
        if left_out:
            log.warning("constant column(s) %s left out of the default key sets: linkage "
                        "cannot use a column with one value", left_out)
            shared = [c for c in shared if c not in left_out]
            if not shared:
                raise SdcInputError(
                    f"every key column is constant ({left_out}) or the weight; linkage "
                    "needs a column with more than one value: name the key sets")
    ss = seed if isinstance(seed, np.random.SeedSequence) else np.random.SeedSequence(seed)
    counts: dict[str, int] = {}
    t = None
    if truth is not None:
        from ..linkage.truth import check_truth
        if np.shape(truth) != (shape_b[0],):
            raise SdcInputError(f"the truth must give one row of the original file per masked "
                                f"record ({shape_b[0]}); got shape {np.shape(truth)}")
        counts = check_truth(np.asarray(truth), shape_a[0])
        t = runner.share(np.asarray(truth, dtype=np.int64))
    C, shape_c = (None, None) if control is None else _handle(runner, control)
    if shape_c is not None and shape_c[1] != shape_a[1]:
        raise SdcInputError(f"the control set has {shape_c[1]} columns and the original file "
                            f"{shape_a[1]}; give the control set the original file's columns")
    ctx = MeasureContext(runner, A, B, shape_original=shape_a, shape_masked=shape_b,
                         columns=columns, keysets=keysets or default_keysets(shared),
                         seed=ss, options=options, truth=t, masked_columns=masked_columns,
                         categorical=categorical, weight=weight,
                         confidential=confidential, household=household,
                         holdout=H, shape_holdout=shape_h,
                         control=C, shape_control=shape_c)
    out = {}
    for name in expand_requirements(metrics):
        out[name] = ctx.measure(name)
        if counts and get_metric(name).kind == "risk":
            out[name].info.update(counts)
        if left_out and get_metric(name).keysets:
            out[name].info["constant_keys_left_out"] = list(left_out)
    return out

