"""``sdcdist measure``: information loss, utility (and risk) of one masked file."""

from __future__ import annotations

from typing import Any

import click

from ..errors import exclusive_error, missing_file_error, value_error
from ..limits import MAX_CHUNK_ROWS
from ._paths import PathOrURL
from ._common import (ClusterOptions, cluster, cluster_options, echo_json, flag_inputs,
                      json_flag, main, names_option, option_items, parse_options,
                      role_options)

__all__ = ["measure_cmd"]


def _open_input(path: str, what: str, categorical: list[str] | None = None,
                na_values: str | None = None
                ) -> tuple[Any, tuple[str, ...], list[str], str | None, dict, dict]:
    """A Zarr store as a lazily read array (tasks read their own rows), else loaded; with
    its column names, categorical columns, weight column, category labels and roles."""
    from pathlib import Path

    from ..data import StoredArray, is_store, load_microdata, open_microdata
    if is_store(path):
        attrs = open_microdata(path).attrs
        cols = tuple(str(c) for c in attrs["columns"])
        roles = dict(attrs.get("roles") or {})
        w = roles.get("weight") or [None]
        labels = dict(attrs.get("categories") or {})
        return (StoredArray(path), cols, [c for c in cols if c in labels], w[0], labels,
                roles)
    if not Path(path).exists():
        raise missing_file_error(f"{what} file", path,
                                 "give a CSV, Parquet file or an sdcdist Zarr store")
    md = load_microdata(path, allow_constant=True, categorical=categorical,
                        na_values=na_values)
    return (md.values, md.columns, md.categorical, md.weight, dict(md.categories),
            dict(md.roles))


def _aligned(A: Any, B: Any, cols_a: tuple[str, ...], cols_b: tuple[str, ...],
             labels_a: dict, labels_b: dict) -> tuple[Any, Any]:
    """The two inputs with the same codes for the same labels (see
    :func:`sdcdist.data.align_categories`); stores whose labels already agree stay lazy."""
    if all(labels_a[c] == labels_b[c] for c in labels_a if c in labels_b):
        return A, B
    from ..data import Microdata, StoredArray, align_categories
    a = Microdata(A[:, :] if isinstance(A, StoredArray) else A, cols_a, {}, None, labels_a)
    b = Microdata(B[:, :] if isinstance(B, StoredArray) else B, cols_b, {}, None, labels_b)
    a, b = align_categories(a, b)
    return a.values, b.values


@main.command("measure")
@click.argument("original", type=PathOrURL("input", exists=False))
@click.argument("masked", type=PathOrURL("input", exists=False))
@click.option("--metric", "metric_names", multiple=True, metavar="NAME[,NAME...]",
              help="Metric(s) to compute (repeat or comma-separate). Default: every "
                   "information-loss and utility metric. `sdcdist metrics` lists them.")
@click.option("--seed", type=click.IntRange(0), default=0, show_default=True,
              help="Seed of the random tie-breaking and k-means starts.")
@click.option("--chunk-rows", type=click.IntRange(1, MAX_CHUNK_ROWS), default=None,
              help="Records per reduction chunk (default 65536).")
@json_flag
@option_items
@role_options
@cluster_options(local=True)
def measure_cmd(original: str, masked: str, metric_names: tuple[str, ...],
                keysets: tuple[str, ...], seed: int, chunk_rows: int | None, as_json: bool,
                option_items: tuple[str, ...], categorical: str | None, keys: str | None,
                weight: str | None, na_values: str | None, confidential: str | None,
                household: str | None, where: ClusterOptions) -> None:
    """Measure information loss, utility (and risk) of MASKED against ORIGINAL.

    Both files must have the same records in the same order and the same
    columns. Files are CSV, Parquet or sdcdist Zarr stores (read chunk by
    chunk by the workers). Prints one line per metric with the number of
    terms left out of a mean variation (zero denominators) and a flag for
    approximations; --json prints the same as a JSON object.
    """
    from ..metrics import REGISTRY, get_metric, measure
    names = names_option(metric_names, "--metric", kind="metric") or []
    for n in names:
        get_metric(n)
    cats = names_option(categorical, "--categorical")
    options = parse_options(option_items)
    if chunk_rows:
        if "chunk_rows" in options:
            raise exclusive_error(["--chunk-rows", "--option chunk_rows=..."], "one")
        options["chunk_rows"] = chunk_rows
    A, cols_a, cat_a, w_a, labels_a, roles_a = _open_input(original, "original", cats,
                                                           na_values)
    B, cols_b, cat_b, w_b, labels_b, roles_b = _open_input(masked, "masked", cats, na_values)
    # default: every loss and utility metric (those of categorical columns when there are
    # any) that applies to the files (:func:`_defaults`)
    default = not names
    names = names or \
        [n for n, m in REGISTRY.items() if m.kind in ("loss", "utility")
         and not (m.categorical and not (cat_a or cat_b))]
    from ._common import check_same_types
    check_same_types(cat_a, cat_b, cols_b, original, masked, cols_a)
    A, B = _aligned(A, B, cols_a, cols_b, labels_a, labels_b)
    if cols_a != cols_b:
        raise value_error("The masked file's columns", f"the original file's {list(cols_a)}, "
                          "in the same order", list(cols_b))
    inputs = flag_inputs(cols_a, cols_b, roles=(roles_b, roles_a),
                         categorical=list(dict.fromkeys(cat_a + cat_b)), keys=keys,
                         keysets=keysets, confidential=confidential, household=household,
                         weight=weight, key_role=False, categories=(labels_a, labels_b))
    if default:
        names = _defaults(names, inputs, options)
    from ._common import choose_where, in_process_reason
    from ._figures import (interval_figures, interval_text, note_undefined,
                           undefined_figures)
    where = choose_where(where, in_process_reason(names, A.shape[0], B.shape[0]))
    with cluster(where, quiet=True) as client:
        res = measure(A, B, names, inputs=inputs, seed=seed, options=options, client=client)
    if as_json:
        echo_json({n: {"value": r.value, "kind": REGISTRY[n].kind,
                       "excluded": r.excluded, "flag": r.flag,
                       **({"per_keyset": list(r.per_keyset)} if r.per_keyset else {}),
                       **interval_figures(n, r), **undefined_figures(n, r)}
                   for n, r in res.items()})
        return
    click.echo(f"{'metric':10s} {'kind':8s} {'value':>14s} {'excluded':>9s} {'flag':>5s}")
    for n, r in res.items():
        click.echo(f"{n:10s} {REGISTRY[n].kind:8s} {r.value:14.6g} {r.excluded:9d} {r.flag:5d}"
                   + interval_text(n, r))
    from ..metrics.risk.prl import em_note
    for n, r in res.items():
        note = em_note(n, r)
        if note:
            click.echo(note)
    note_undefined(res)


def _defaults(names: list[str], inputs: Any, options: dict) -> list[str]:
    """Those of the default ``names`` that apply to ``inputs``, with the metrics they are
    computed from (:func:`~sdcdist.metrics.applicable`: e.g. the correlation metrics and
    the composites built on them need two numeric columns); a note on stderr names the
    others and why."""
    from ..metrics import expand_requirements
    from ..metrics.inputs import applicable_split
    from ._common import note_skipped
    kept, skipped = applicable_split(names, inputs, options,
                                     parts=lambda n: expand_requirements([n]))
    note_skipped(skipped)
    return kept
