"""``measure``: compute metrics for one (original, masked) pair, here or on a cluster."""

from __future__ import annotations

import logging
import math
from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np

from ..errors import SdcInputError, column_positions, value_error
from ..parallel import Runner
from ._registry import MeasureContext, MetricResult, constant_columns, get_metric
from .inputs import Inputs, applicable, need_error
from .keysets import default_keysets

__all__ = ["measure", "expand_requirements", "options_of", "rows_paired", "undefined_note",
           "undefined_reason"]

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
            # consecutive columns as a slice: a view, not a copy
            check_codes(arr[:, pos[0]:pos[-1] + 1] if pos == list(range(pos[0], pos[-1] + 1))
                        else arr[:, pos], cats, where=what)


def measure(original: Any, masked: Any, metrics: Sequence[str], *,
            inputs: Inputs | None = None,
            client: Any = None, seed: int | np.random.SeedSequence = 0,
            options: Mapping[str, Any] | None = None,
            truth: np.ndarray | None = None,
            holdout: Any = None,
            control: Any = None,
            columns: Sequence[str] | None = None,
            keysets: Sequence[Sequence[str]] | None = None,
            masked_columns: Sequence[str] | None = None,
            categorical: Sequence[str] | None = None,
            weight: str | None = None,
            confidential: Sequence[str] | None = None,
            household: str | None = None) -> dict[str, MetricResult]:
    """Measure information loss and disclosure risk of ``masked`` against ``original``.

    Parameters
    ----------
    original, masked : ndarray (n, m), Microdata or StoredArray
    metrics : list of str
        Canonical metric names (see ``sdcdist.metrics.REGISTRY``).
    inputs : Inputs, optional
        The columns, their roles and the key sets (:class:`~sdcdist.metrics.Inputs`);
        default: those of ``original`` and ``masked`` when Microdata
        (:meth:`Inputs.from_microdata`), with the keywords below.
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
    holdout : ndarray (n_h, m), Microdata or StoredArray, optional
        A holdout file: records of the original's population that the release was not
        made from, with the original's columns (same codes for the same categories).
        Read by the metrics that need one (``needs={"holdout"}``: ``dcr_holdout_median``,
        ``dcr_closer_train``, ``dcr_overfit``).
    control : ndarray (n_c, m), Microdata or StoredArray, optional
        The control set of the singling-out, linkability and inference attacks
        (``so_uni``, ``so_multi``, ``linkability``, ``inference`` and their
        ``_lo``, ``_hi``, ``_base``): original records, with the original file's
        columns, that were held out of what was masked. Without it those risks are
        the main attacks' success rates.
    columns, keysets, masked_columns, categorical, weight, confidential, household
        The fields of ``inputs`` given one by one (each wins over ``inputs``' and the
        files' roles): column names (default ``V1..Vm`` or the Microdata's), named key
        sets (default: prefixes of sizes 1..min(7, m) of the shared columns but the
        weight, the household id and the confidential columns), the masked file's column
        names when they differ (linkage keys are matched by name; ``CRL`` can link files
        with no shared column), the categorical columns (codes; numeric-only losses and
        utilities leave them and the weight out, linkage metrics refuse them in a key set,
        the frequency risks count their combinations), the sampling-weight column, the
        confidential columns of the attribute-disclosure metrics and the household id
        column of the household risk metrics (never a linkage key).

    Returns
    -------
    dict of str -> MetricResult
        Every requested metric (and those they are computed from).

    Raises
    ------
    SdcInputError
        A metric whose declared need is not given (:func:`~sdcdist.metrics.applicable`),
        roles that clash (:meth:`Inputs.check`), a ``truth`` that matches no masked
        record, ...
    """
    for name in metrics:
        get_metric(name)
    inputs = _inputs(original, masked, inputs, columns=columns, keysets=keysets,
                     masked_columns=masked_columns, categorical=categorical, weight=weight,
                     confidential=confidential, household=household)
    runner = Runner(client)
    A, shape_a = _handle(runner, original)
    # the same object as both files (a file measured against itself, e.g. a release's own
    # risk) is copied, shared and checked once
    B, shape_b = (A, shape_a) if masked is original else _handle(runner, masked)
    H, shape_h = (None, None) if holdout is None else _handle(runner, holdout)
    C, shape_c = (None, None) if control is None else _handle(runner, control)
    inputs = _shaped(inputs, metrics, shape_a, shape_b, holdout, shape_h, shape_c)
    cols, mcols = inputs.columns, inputs.masked
    _check_codes(inputs.categorical, ((original, cols, "the original file"),
                                      (masked, mcols, "the masked file"),
                                      (holdout, cols, "the holdout file"),
                                      (control, cols, "the control set")))
    inputs.check()
    for name in expand_requirements(metrics):
        why = applicable(name, inputs, options)
        if why is not None and why.need:
            raise need_error(name, why.need)
    ks, left_out = _keysets(runner, inputs, metrics, A, B)
    counts: dict[str, int] = {}
    t = None
    if truth is not None:
        from ..linkage.truth import check_truth
        if np.shape(truth) != (shape_b[0],):
            raise SdcInputError(f"the truth must give one row of the original file per masked "
                                f"record ({shape_b[0]}); got shape {np.shape(truth)}")
        counts = check_truth(np.asarray(truth), shape_a[0])
        rowwise = [n for n in expand_requirements(metrics) if get_metric(n).same_shape]
        if rowwise and not rows_paired(truth):
            raise SdcInputError(
                f"{', '.join(rowwise)} compare the files record by record (masked row i with "
                "original row i), and the identifiers pair the masked records otherwise; put "
                "the masked file's rows in the original's order (sort both files by the "
                "identifier), or leave these metrics out")
        t = runner.share(np.asarray(truth, dtype=np.int64))
    ss = seed if isinstance(seed, np.random.SeedSequence) else np.random.SeedSequence(seed)
    ctx = MeasureContext(runner, A, B, inputs=inputs, keysets=ks, seed=ss, options=options,
                         truth=t, holdout=H, shape_holdout=shape_h, control=C,
                         shape_control=shape_c)
    out = {}
    for name in expand_requirements(metrics):
        out[name] = ctx.measure(name)
        if counts and get_metric(name).kind == "risk":
            out[name].info.update(counts)
        if left_out and get_metric(name).keysets:
            out[name].info["constant_keys_left_out"] = list(left_out)
    return out


def rows_paired(truth: Any) -> bool:
    """Whether the truth pairs masked record i with original record i for every i (what the
    metrics comparing the files record by record, ``same_shape``, take for granted)."""
    t = np.asarray(truth)
    return bool(np.array_equal(t, np.arange(t.size)))


def undefined_reason(name: str, result: MetricResult) -> str | None:
    """Why a figure is NaN (undefined on these files): the reason the metric gave
    (``info["undefined"]``), else a pointer to its definition; None for a figure that has
    a value."""
    if not math.isnan(result.value):
        return None
    why = result.info.get("undefined") if isinstance(result.info, dict) else None
    return why or f"its definition gives no value here (sdcdist metrics {name})"


def undefined_note(name: str, result: MetricResult) -> str | None:
    """The note on stderr for a NaN figure (:func:`undefined_reason`), or None."""
    why = undefined_reason(name, result)
    return None if why is None else f"note: {name} is undefined (NaN) on these files: {why}"


def _inputs(original: Any, masked: Any, inputs: Inputs | None, **given: Any) -> Inputs:
    """``inputs``, else those of the files' roles; the keywords given win. Key sets that
    are the default prefixes of some key columns (a :class:`KeySets` not ``given``) become
    those key columns."""
    ks = given.pop("keysets")
    if ks is not None and not getattr(ks, "given", True):
        given["keys"] = tuple(ks.columns)
    elif ks is not None:
        given["keysets"] = ks
    if inputs is None:
        return Inputs.from_microdata(original, masked, **given)
    inputs = inputs.replace(**{k: v for k, v in given.items() if v is not None})
    if not inputs.n_categories:
        # the declared categories of the files, when the caller's inputs do not say
        known = Inputs.from_microdata(original, masked).n_categories
        if known:
            inputs = inputs.replace(n_categories=known)
    return inputs


def _shaped(inputs: Inputs, metrics: Sequence[str], shape_a: tuple, shape_b: tuple,
            holdout: Any, shape_h: tuple | None, shape_c: tuple | None) -> Inputs:
    """``inputs`` with the files' shapes and column names (``V1..Vm`` when none were
    given), checked against the files."""
    from ..data import Microdata
    cols = list(inputs.columns) or [f"V{j + 1}" for j in range(shape_a[1])]
    if shape_h is not None:
        if isinstance(holdout, Microdata) and tuple(holdout.columns) != tuple(cols):
            raise SdcInputError(f"the holdout file's columns {list(holdout.columns)} differ "
                                f"from the original file's {cols}; give the holdout "
                                "the original's columns in the same order")
        if shape_h[1] != shape_a[1]:
            raise SdcInputError(f"the holdout file has {shape_h[1]} columns and the original "
                                f"file {shape_a[1]}; give the holdout the original's columns")
    mcols = inputs.masked_columns
    if mcols is None:
        if shape_a[1] != shape_b[1]:
            raise SdcInputError(f"the original file has {shape_a[1]} columns and the masked "
                                f"file {shape_b[1]}; give both the same columns in the same "
                                "order, or name the masked file's columns (masked_columns)")
        mcols = cols
    if len(cols) != shape_a[1]:
        raise SdcInputError(f"{len(cols)} column names for {shape_a[1]} columns")
    if len(mcols) != shape_b[1]:
        raise SdcInputError(f"{len(mcols)} masked column names for {shape_b[1]} columns")
    if tuple(mcols) != tuple(cols):
        same = [n for n in expand_requirements(metrics) if get_metric(n).same_shape]
        if same:
            raise SdcInputError(
                f"the masked file's columns {list(mcols)} differ from the original "
                f"file's {cols}; {', '.join(same)} compare the files column by column, so "
                "both files need the same columns in the same order")
    if shape_c is not None and shape_c[1] != shape_a[1]:
        raise SdcInputError(f"the control set has {shape_c[1]} columns and the original file "
                            f"{shape_a[1]}; give the control set the original file's columns")
    return inputs.replace(columns=tuple(cols), masked_columns=tuple(mcols),
                          holdout=shape_h is not None, control=shape_c is not None,
                          shape_original=shape_a, shape_masked=shape_b)


def _keysets(runner: Runner, inputs: Inputs, metrics: Sequence[str], A: Any, B: Any
             ) -> tuple[Any, list[str]]:
    """The key sets of the context (the given ones, else the prefixes of the shared key
    columns), and the constant columns left out of the default."""
    given = inputs.given_keysets()
    if given is not None:
        return (default_keysets(inputs.keys) if inputs.keysets is None else given), []
    # the sampling weight and the household id are never linkage keys
    shared = [c for c in inputs.shared if c not in (inputs.weight, inputs.household)]
    if inputs.confidential:
        # a confidential column is what an intruder wants to learn, not a key they know: it
        # is left out of the default key sets (named key sets may still hold one)
        conf_set = set(inputs.confidential)
        shared = [c for c in shared if c not in conf_set] or shared
    if not shared and any(get_metric(n).keysets for n in metrics):
        need = [n for n in metrics if get_metric(n).keysets]
        raise SdcInputError(f"the original and masked files share no key columns, which "
                            f"{', '.join(need)} link on; give the key columns the same names "
                            "in both files (CRL can link without shared columns)")
    left_out: list[str] = []
    if any(get_metric(n).keysets for n in expand_requirements(metrics)):
        # a constant column cannot link (its standardisation divides by 0): left out of the
        # default key sets, with a note (named key sets holding one are refused by the metric)
        cats = set(inputs.categorical)
        num = [c for c in shared if c not in cats]
        ca = runner.call(constant_columns, A, column_positions(num, inputs.columns))
        cb = runner.call(constant_columns, B, column_positions(num, inputs.masked))
        left_out = [c for c, x, y in zip(num, ca, cb) if x or y]
        if left_out:
            log.warning("constant column(s) %s left out of the default key sets: linkage "
                        "cannot use a column with one value", left_out)
            shared = [c for c in shared if c not in left_out]
            if not shared:
                raise SdcInputError(
                    f"every key column is constant ({left_out}) or the weight; linkage "
                    "needs a column with more than one value: name the key sets")
    return default_keysets(shared), left_out
