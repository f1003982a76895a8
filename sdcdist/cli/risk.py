"""``sdcdist risk``: disclosure risk of one released file."""

from __future__ import annotations

from typing import Any

import click

from ..errors import SdcInputError
from ._paths import PathOrURL
from ._common import (ClusterOptions, cluster, cluster_options, echo_json, flag_inputs,
                      json_flag, main, names_option, option_items, parse_options,
                      reader_categorical, role_options, split_list)

__all__ = ["risk"]


def _load_beside(a: Any, path: str, what: str, original: str,
                 categorical: list[str] | None, na_values: str | None) -> tuple[Any, Any]:
    """A file that goes with the original ``a`` (the ``holdout`` or ``control`` set): loaded,
    checked to have the original's columns and types, and its categories aligned with
    ``a``'s. Returns (``a``, the file), both with the shared categories."""
    from ..data import align_categories
    from ._common import check_same_types
    x, _ = _load_with_id(path, None, what, categorical, na_values)
    if tuple(x.columns) != tuple(a.columns):
        raise SdcInputError(f"the {what} file's columns {list(x.columns)} differ from the "
                            f"original file's {list(a.columns)}; give the {what} file the "
                            f"original's columns in the same order (--{what})")
    check_same_types(a.categorical, x.categorical, x.columns, original, path, a.columns)
    return align_categories(a, x)


def _load_with_id(path: str, id_column: str | None, what: str,
                  categorical: list[str] | None = None,
                  na_values: str | None = None,
                  only: list[str] | None = None) -> tuple[Any, Any]:
    """The file without its identifier column, and that column (None without ``id_column``).
    ``only``: the columns the metrics read (:func:`_read_columns`; the others may be left
    out, see :func:`~sdcdist.data.load_microdata`)."""
    from ..data import load_microdata
    md = load_microdata(path, allow_constant=True,
                        categorical=reader_categorical(path, categorical), na_values=na_values,
                        only=only, fingerprint=False)
    if id_column is None:
        return md, None
    from ..errors import column_positions
    j = column_positions([id_column], md.columns, what="identifier column",
                         where=f"the {what} file")[0]
    keep = [c for i, c in enumerate(md.columns) if i != j]
    from ..linkage.truth import ids_of
    return md.select(keep), ids_of(md, id_column, what)


def _same_file(a: str, b: str) -> bool:
    """Whether two inputs are the same local file or store (then it is read once)."""
    import os
    try:
        return os.path.samefile(a, b)
    except (OSError, ValueError):
        return False


@main.command()
@click.argument("original", type=PathOrURL("input"))
@click.argument("masked", type=PathOrURL("input"))
@click.option("--metric", "metric_names", multiple=True, metavar="NAME[,NAME...]",
              help="Risk metrics to compute (repeatable; default: every risk metric).")
@click.option("--id", "id_column", default=None, metavar="COLUMN",
              help="Identifier column present in both files: the truth of which released "
                   "record is which person. Without it, row order is the truth.")
@option_items
@json_flag
@click.option("--seed", type=click.IntRange(0), default=0, show_default=True,
              help="Seeds the random tie-breaking of CRL.")
@click.option("--holdout", default=None, type=PathOrURL("input"), metavar="FILE",
              help="Holdout file: records of ORIGINAL's population that MASKED was not made "
                   "from, with ORIGINAL's columns (read by dcr_holdout_median, "
                   "dcr_closer_train and dcr_overfit).")
@click.option("--control", default=None, type=PathOrURL("input"), metavar="FILE",
              help="Control set of the singling-out, linkability and inference attacks: "
                   "original records held out of what MASKED was made from, with "
                   "ORIGINAL's columns (without it, an attack's risk is its success rate).")
@role_options
@cluster_options(local=True)
def risk(original: str, masked: str, metric_names: tuple[str, ...], keys: str | None,
         keysets: tuple[str, ...], id_column: str | None, option_items: tuple[str, ...],
         as_json: bool, seed: int, confidential: str | None, household: str | None,
         categorical: str | None, weight: str | None, na_values: str | None,
         holdout: str | None, control: str | None,
         where: ClusterOptions) -> None:
    """Disclosure risk of MASKED (the released file) against ORIGINAL (the intruder's file).

    The two files may differ in size and in which records and columns they
    hold; linkage uses the key columns both have. Prints one line per metric
    (mean over key sets) and the value for each key set; --json prints the same
    as a JSON object. Without --metric, the metrics that do not apply are left
    out with a note on stderr: those comparing the files record by record when
    their shapes differ or --id pairs the records otherwise than row by row (named,
    they are refused), the numeric-only linkage metrics (RR, GDBRL, and CRL on
    Pearson's correlations) when a key set holds a categorical column, and the holdout
    metrics without --holdout. With --holdout, the DCR metrics compare MASKED (a synthetic release)
    with ORIGINAL (its training file) and with the holdout.
    """
    from ..metrics import default_keysets, measure
    names = _asked(metric_names)
    cats = names_option(categorical, "--categorical")
    opts = parse_options(option_items)
    only = None if holdout is not None or control is not None else \
        _read_columns(names, keys, keysets, cats, weight, confidential, household, id_column)
    a, id_a = _load_with_id(original, id_column, "original", cats, na_values, only)
    if _same_file(original, masked):        # one file assessed on its own: read it once
        b, id_b = a, id_a
    else:
        b, id_b = _load_with_id(masked, id_column, "masked", cats, na_values, only)
    shape_a = _file_shape(original, a, only, id_column)
    shape_b = _file_shape(masked, b, only, id_column)
    if only is not None and (shape_a[1] == a.shape[1]) != (shape_b[1] == b.shape[1]):
        # one file read whole (a column of its is not plain numbers): both are, so that
        # the files' columns and types are compared as always
        if shape_a[1] != a.shape[1]:
            a, id_a = _load_with_id(original, id_column, "original", cats, na_values)
        else:
            b, id_b = _load_with_id(masked, id_column, "masked", cats, na_values)
    from ._common import check_same_types
    check_same_types(a.categorical, b.categorical, b.columns, original, masked, a.columns)
    from ..data import align_categories
    h = c_set = None
    if holdout is not None:
        a, h = _load_beside(a, holdout, "holdout", original, cats, na_values)
    if control is not None:
        a, c_set = _load_beside(a, control, "control", original, cats, na_values)
        if h is not None:
            a, h = align_categories(a, h)
    a, b = align_categories(a, b)
    inputs = flag_inputs(a.columns, b.columns, roles=(b.roles, a.roles),
                         categorical=list(dict.fromkeys(a.categorical + b.categorical)),
                         keys=keys, keysets=keysets, confidential=confidential,
                         household=household, weight=weight,
                         categories=(a.categories, b.categories)).replace(
        holdout=h is not None, control=c_set is not None, shape_original=shape_a,
        shape_masked=shape_b)
    truth = None
    if id_column is not None:
        from ..linkage import truth_from_ids
        from ..linkage.truth import check_id_forms
        check_id_forms(id_a, id_b, id_column)
        truth = truth_from_ids(id_a, id_b, column=id_column)
    if not names:
        names = _defaults(inputs, b, opts)
        from ..metrics import get_metric
        from ..metrics.measure import rows_paired
        rowwise = [n for n in names if get_metric(n).same_shape]
        if truth is not None and rowwise and not rows_paired(truth):
            # the identifiers pair the records otherwise than row by row
            click.echo(f"{id_column} pairs the records otherwise than row by row: skipping "
                       f"{', '.join(rowwise)} (they compare the files record by record, row "
                       f"i with row i; sort both files by {id_column} to compute them)",
                       err=True)
            names = [n for n in names if n not in set(rowwise)]
    ks = inputs.given_keysets()
    ks = None if ks is None else (default_keysets(inputs.keys) if inputs.keysets is None
                                  else ks)
    from ._common import choose_where, in_process_reason
    where = choose_where(where, in_process_reason(names, a.shape[0], b.shape[0]))
    with cluster(where, quiet=True) as client:
        res = measure(a.values, b.values, names, inputs=inputs, seed=seed, options=opts,
                      truth=truth, client=client,
                      holdout=h.values if h is not None else None,
                      control=c_set.values if c_set is not None else None)
    _print(res, names, a, b, ks, truth, id_column, inputs.weight, as_json,
           (shape_a, shape_b))


def _read_columns(names: list[str], keys: str | None, keysets: tuple[str, ...],
                  cats: list[str] | None, weight: str | None, confidential: str | None,
                  household: str | None, id_column: str | None) -> list[str] | None:
    """The columns that the metrics ``names`` read, when every one of them reads only its
    key columns and the weight (:attr:`~sdcdist.metrics.Metric.keys_only`) and the keys
    are named: those and every column a flag names. None: every column is read."""
    from ..metrics import get_metric
    if not names or not (keys or keysets) or \
            not all(get_metric(n).keys_only for n in names):
        return None
    named = [c for item in (keys, *keysets, confidential) if item for c in split_list(item)]
    named += list(cats or []) + [c for c in (weight, household, id_column) if c]
    return list(dict.fromkeys(named))


def _file_shape(path: str, md: Any, only: list[str] | None,
                id_column: str | None) -> tuple[int, int]:
    """The records and columns of the file but its identifier column (``md`` may hold
    only the columns read)."""
    from ..data import is_store, source_columns
    if only is None or is_store(path):
        return md.shape
    return (md.shape[0], len(source_columns(path)) - (id_column is not None))


def _asked(metric_names: tuple[str, ...]) -> list[str]:
    """The risk metrics named by --metric (none: the command chooses)."""
    from ..metrics import REGISTRY, get_metric
    names = names_option(metric_names, "--metric", kind="metric") or []
    for n in names:
        if get_metric(n).kind != "risk":
            risky = ", ".join(k for k, m in REGISTRY.items() if m.kind == "risk")
            raise SdcInputError(f"{n!r} is a {get_metric(n).kind} metric; `sdcdist risk` "
                                f"computes risk metrics: {risky}")
    return names


def _defaults(inputs: Any, b: Any, opts: dict) -> list[str]:
    """The risk metrics that apply to ``inputs`` (:func:`~sdcdist.metrics.default_metrics`);
    a note on stderr names those left out and why, but for those that need an input
    nobody gave or are computed only when named."""
    import numpy as np

    from ..metrics import default_metrics
    levels = {}
    for c in inputs.categorical_keys():
        col = np.asarray(b.values[:, b.columns.index(c)], dtype=np.float64)
        levels[c] = int(np.unique(col[~np.isnan(col)]).size)
    names, skipped = default_metrics("risk", inputs.replace(levels=tuple(levels.items())),
                                     opts)
    from ._common import note_skipped
    note_skipped(skipped)
    return names


def _print(res: dict, names: list[str], a: Any, b: Any, ks: Any, truth: Any,
           id_column: str | None, weight: str | None, as_json: bool,
           shapes: tuple[tuple[int, int], tuple[int, int]]) -> None:
    """The figures: one line per metric and its value per key set, or a JSON object.
    ``shapes``: the files' records and columns."""
    (na, ma), (nb, mb) = shapes
    from ..metrics import default_keysets
    from ._figures import (interval_figures, interval_text, note_undefined,
                           undefined_figures)
    matched = ""
    if truth is not None:
        from ..linkage import truth_counts
        c = truth_counts(truth)
        matched = (f" ({c['matched']} of {c['matched'] + c['unmatched']} masked records have "
                   "an identifier in the original file")
        matched += "; the others count as not re-identified)" if c["unmatched"] else ")"
    if as_json:
        labels = ks or default_keysets([c for c in a.columns if c in b.columns])
        echo_json({"original": [na, ma], "masked": [nb, mb],
                   "truth": f"column {id_column}" if id_column else "row order",
                   **({"matched": truth_counts(truth)} if truth is not None else {}),
                   "metrics": {n: {"value": res[n].value, "flag": res[n].flag,
                                   **undefined_figures(n, res[n]),
                                   **interval_figures(n, res[n]),
                                   **({"per_keyset": {",".join(k): v for v, k in
                                                      zip(res[n].per_keyset, labels)}}
                                      if res[n].per_keyset and len(res[n].per_keyset) > 1
                                      else {})}
                               for n in names}})
        return
    click.echo(f"original {na} x {ma}, masked {nb} x {mb}, "
               f"truth: {'column ' + repr(id_column) if id_column else 'row order'}{matched}")
    gone = sorted({c for n in names for c in (res[n].info.get("constant_keys_left_out") or ())})
    if gone:
        click.echo(f"constant column(s) {gone} left out of the default key sets (linkage "
                   "cannot use a column with one value)", err=True)
    for n in names:
        r = res[n]
        extra = " (approximate: sparse candidates)" if r.flag else ""
        click.echo(f"{n:8s} {r.value:12.6g}{interval_text(n, r)}{extra}")
        if r.per_keyset and len(r.per_keyset) > 1:
            gone = set(r.info.get("constant_keys_left_out") or ())
            labels = ks or default_keysets([c for c in a.columns if c in b.columns
                                            and c != weight and c not in gone])
            for v, k in zip(r.per_keyset, labels):
                click.echo(f"  {','.join(k):30s} {v:12.6g}")
    note_undefined({n: res[n] for n in names})
