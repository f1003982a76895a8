"""``sdcdist risk``: disclosure risk of one released file."""

from __future__ import annotations

from typing import Any

import click

from ..errors import SdcInputError
from ._paths import PathOrURL
from ._common import (ClusterOptions, cluster, cluster_options, echo_json, json_flag, main,
                      names_option, option_items, parse_options, split_list,
                      typed_input_options)

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
                  na_values: str | None = None) -> tuple[Any, Any]:
    """The file without its identifier column, and that column (None without ``id_column``)."""
    from ..data import is_store, load_microdata
    cats = categorical if categorical and not is_store(path) else None
    md = load_microdata(path, allow_constant=True, categorical=cats, na_values=na_values)
    if id_column is None:
        return md, None
    from ..errors import column_positions
    j = column_positions([id_column], md.columns, what="identifier column",
                         where=f"the {what} file")[0]
    keep = [c for i, c in enumerate(md.columns) if i != j]
    return md.select(keep), md.values[:, j]


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
@click.option("--keys", default=None, metavar="A,B,...",
              help="Key columns in linkage order; key sets are their prefixes of sizes "
                   "1..7 (default: the columns both files share).")
@click.option("--keyset", "keysets", multiple=True, metavar="A,B,...",
              help="One explicit key set (repeatable; replaces the prefixes of --keys).")
@click.option("--id", "id_column", default=None, metavar="COLUMN",
              help="Identifier column present in both files: the truth of which released "
                   "record is which person. Without it, row order is the truth.")
@option_items
@json_flag
@click.option("--seed", type=click.IntRange(0), default=0, show_default=True,
              help="Seeds the random tie-breaking of CRL.")
@click.option("--confidential", default=None, metavar="A,B,...",
              help="Confidential columns of the attribute-disclosure metrics (l-diversity, "
                   "t-closeness, beta-likeness, delta-disclosure; default: the store's "
                   "confidential role).")
@click.option("--household", default=None, metavar="COLUMN",
              help="Household id column of the household risk metrics (HR_*; default: the "
                   "store's household role); never a linkage key.")
@click.option("--holdout", default=None, type=PathOrURL("input"), metavar="FILE",
              help="Holdout file: records of ORIGINAL's population that MASKED was not made "
                   "from, with ORIGINAL's columns (read by dcr_holdout_median, "
                   "dcr_closer_train and dcr_overfit).")
@click.option("--control", default=None, type=PathOrURL("input"), metavar="FILE",
              help="Control set of the singling-out, linkability and inference attacks: "
                   "original records held out of what MASKED was made from, with "
                   "ORIGINAL's columns (without it, an attack's risk is its success rate).")
@typed_input_options
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
    their shapes differ, and the numeric-only linkage metrics (RR, GDBRL) when
    a key set holds a categorical column, and the holdout metrics without
    --holdout. With --holdout, the DCR metrics compare MASKED (a synthetic release)
    with ORIGINAL (its training file) and with the holdout.
    """
    from ..metrics import REGISTRY, default_keysets, get_metric, measure
    names = [n for item in metric_names for n in split_list(item)]
    if metric_names and not names:
        raise SdcInputError("--metric was given without a name; give metric names "
                            "(comma-separated), or leave --metric out for all of them")
    names = names or \
        [n for n, m in REGISTRY.items() if m.kind == "risk"]
    for n in names:
        if get_metric(n).kind != "risk":
            risky = ", ".join(k for k, m in REGISTRY.items() if m.kind == "risk")
            raise SdcInputError(f"{n!r} is a {get_metric(n).kind} metric; `sdcdist risk` "
                                f"computes risk metrics: {risky}")
    cats = names_option(categorical, "--categorical")
    key_list = names_option(keys, "--keys")
    ks_given = [names_option(k, "--keyset") for k in keysets]
    opts = parse_options(option_items)
    a, id_a = _load_with_id(original, id_column, "original", cats, na_values)
    if _same_file(original, masked):        # one file assessed on its own: read it once
        b, id_b = a, id_a
    else:
        b, id_b = _load_with_id(masked, id_column, "masked", cats, na_values)
    from ._common import check_same_types
    check_same_types(a.categorical, b.categorical, b.columns, original, masked, a.columns)
    from ..data import align_categories
    h = None
    if holdout is not None:
        a, h = _load_beside(a, holdout, "holdout", original, cats, na_values)
    elif not metric_names:
        from ..metrics import needing
        drop = set(needing(names, "holdout"))
        names = [n for n in names if n not in drop]
    c_set = None
    if control is not None:
        a, c_set = _load_beside(a, control, "control", original, cats, na_values)
        if h is not None:
            a, h = align_categories(a, h)
    a, b = align_categories(a, b)
    categ = list(dict.fromkeys(a.categorical + b.categorical))
    if not metric_names and not categ:
        # the frequency metrics count categorical keys: none here
        names = [n for n in names if not (get_metric(n).categorical
                                          and not get_metric(n).keysets)
                 or get_metric(n).index]
    weight = weight or b.weight or a.weight
    conf = names_option(confidential, "--confidential") or \
        list(b.roles.get("confidential") or a.roles.get("confidential") or [])
    if conf:
        from ..errors import column_positions
        column_positions(conf, b.columns, what="confidential column", where="the masked file")
    elif not metric_names:
        # the attribute-disclosure metrics and cap need confidential columns: none here
        from ..metrics import needing
        drop = set(needing(names, "confidential"))
        names = [n for n in names if n not in drop]
    if household is not None and not household.strip():
        raise SdcInputError("--household was given without a name; give the household id "
                            "column, or leave --household out")
    household = household or b.household or a.household
    if household is not None:
        from ..errors import column_positions
        column_positions([household], b.columns, what="household id column",
                         where="the masked file")
    elif not metric_names:
        # the household risk metrics need a household id: none here
        from ..metrics import needing
        drop = set(needing(names, "household"))
        names = [n for n in names if n not in drop]
    if not metric_names:
        # the singling-out, linkability and inference attacks are asked for by name
        names = [n for n in names if not get_metric(n).by_name]
    if weight is not None:
        from ..errors import column_positions
        column_positions([weight], b.columns, what="weight column", where="the masked file")
    if not metric_names and a.shape != b.shape:
        skip = [n for n in names if get_metric(n).same_shape]
        names = [n for n in names if n not in skip]
        click.echo(f"files differ in shape: skipping {', '.join(skip)} (they compare the "
                   "files record by record)", err=True)
    truth = None
    if id_column is not None:
        from ..linkage import truth_from_ids
        truth = truth_from_ids(id_a, id_b, column=id_column)
    if not ks_given and not key_list:
        # the store's key role, else every shared column but the weight, the household
        # id and the confidential columns (measure's default)
        key_list = [c for c in (a.roles.get("key") or []) if c in b.columns] or None
    if ks_given:
        ks = ks_given
    elif key_list:
        ks = default_keysets(key_list)
    else:
        ks = None
    if not metric_names and categ:
        names = _applicable(names, ks or default_keysets([c for c in a.columns
                                                           if c in b.columns]),
                            categ, [c for c in b.columns if c not in categ])
    if not metric_names and categ:
        names = _without_oversized_models(names, ks, key_list, categ, b, opts)
    from ._common import choose_where, in_process_reason, interval_figures, interval_text
    where = choose_where(where, in_process_reason(names, a.shape[0], b.shape[0]))
    with cluster(where, quiet=True) as client:
        res = measure(a.values, b.values, names, columns=a.columns, masked_columns=b.columns,
                      keysets=ks, seed=seed, options=opts, truth=truth, client=client,
                      categorical=categ, weight=weight, confidential=conf,
                      household=household,
                      holdout=h.values if h is not None else None,
                      control=c_set.values if c_set is not None else None)
    matched = ""
    if truth is not None:
        from ..linkage import truth_counts
        c = truth_counts(truth)
        matched = (f" ({c['matched']} of {c['matched'] + c['unmatched']} masked records have "
                   "an identifier in the original file")
        matched += "; the others count as not re-identified)" if c["unmatched"] else ")"
    if as_json:
        labels = ks or default_keysets([c for c in a.columns if c in b.columns])
        echo_json({"original": list(a.shape), "masked": list(b.shape),
                   "truth": f"column {id_column}" if id_column else "row order",
                   **({"matched": truth_counts(truth)} if truth is not None else {}),
                   "metrics": {n: {"value": res[n].value, "flag": res[n].flag,
                                   **interval_figures(n, res[n]),
                                   **({"per_keyset": {",".join(k): v for v, k in
                                                      zip(res[n].per_keyset, labels)}}
                                      if res[n].per_keyset and len(res[n].per_keyset) > 1
                                      else {})}
                               for n in names}})
        return
    click.echo(f"original {a.shape[0]} x {a.shape[1]}, masked {b.shape[0]} x {b.shape[1]}, "
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


def _without_oversized_models(names: list[str], keysets: Any, key_list: list[str] | None,
                              categorical: list[str], b: Any, opts: dict) -> list[str]:
    """The default metrics without those that would refuse the file for its number of
    categorical keys: SUDA2's search over every subset of them (more than 16 keys) and the
    log-linear model of modrisk (more cells than it fits). A note on stderr says how to ask
    for them."""
    import math

    import numpy as np

    from ..metrics import modrisk, suda
    cand = ([c for k in keysets for c in k] if keysets else key_list or list(b.columns))
    keys = [c for c in dict.fromkeys(cand) if c in categorical]
    q = len(keys)
    skip: list[str] = []
    if "suda_max_size" not in opts and 2 ** q - 1 > suda.MAX_SUBSETS:
        fit = max(k for k in range(1, q + 1)
                  if sum(math.comb(q, i) for i in range(1, k + 1)) <= suda.MAX_SUBSETS)
        gone = [n for n in names if n in suda.METRICS]
        if gone:
            click.echo(f"{q} categorical keys: skipping {', '.join(gone)} (SUDA2 over every "
                       f"subset of them is too large; ask with --metric and "
                       f"-o suda_max_size={fit} or less)", err=True)
        skip += gone
    if "modrisk_formula" not in opts and keys:
        cells = 1.0
        for c in keys:
            col = np.asarray(b.values[:, b.columns.index(c)], dtype=np.float64)
            cells *= max(1, np.unique(col[~np.isnan(col)]).size)
        gone = [n for n in names if n.startswith("modrisk_")]
        if cells > modrisk.MAX_CELLS and gone:
            click.echo(f"{q} categorical keys make a log-linear model of {cells:.3g} cells: "
                       f"skipping {', '.join(gone)} (ask with --metric and -o "
                       "modrisk_formula=... on fewer or coarser keys)", err=True)
            skip += gone
    return [n for n in names if n not in skip]


def _applicable(names: list[str], keysets: Any, categorical: list[str],
                numeric: list[str]) -> list[str]:
    """The default metrics that apply to files with categorical columns; a note on stderr
    names those left out and why (as for files of different shapes)."""
    from ..metrics import get_metric
    in_keys = sorted({c for k in keysets for c in k if c in categorical})
    skip_link = [n for n in names if get_metric(n).keysets and not get_metric(n).categorical
                 and in_keys]
    skip_num = [n for n in names if not numeric and not get_metric(n).keysets
                and not get_metric(n).categorical]
    if skip_link:
        click.echo(f"key sets hold categorical column(s) {', '.join(in_keys)}: skipping "
                   f"{', '.join(skip_link)} (they link on numeric keys only; name numeric "
                   "key sets with --keyset, or ask for them with --metric)", err=True)
    if skip_num:
        click.echo(f"no numeric column: skipping {', '.join(skip_num)} (they read numeric "
                   "columns only)", err=True)
    return [n for n in names if n not in skip_link and n not in skip_num]
