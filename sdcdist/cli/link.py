"""``sdcdist link``: link the records of two files and write the pairs."""

from __future__ import annotations

from typing import Any

import click

from ..errors import SdcInputError, exclusive_error, unknown_name_error, value_error
from ._common import (ClusterOptions, cluster, cluster_options, echo_json, json_flag, main,
                      names_option, option_items, reader_categorical, role_options)
from ._paths import PathOrURL, check_output

__all__ = ["link"]


#: The flag of each PRL option where it is not ``--`` + the option's name without ``prl_``
_FLAG_NAMES = {"prl_method": "--compare", "prl_t": "--t", "prl_blocking": "--block-on"}

#: Options whose flag also takes a bare comma-separated list (``--t 0,0.1,0.5``)
_LIST_FLAGS = ("prl_t", "prl_block_rows")

#: Flags that are gone, and what replaced them
_OLD_FLAGS = {"--em-max-iter": "--em '{max_iter: N}' (or -o prl_em={max_iter: N})"}


def _flag(name: str) -> str:
    return _FLAG_NAMES.get(name, "--" + name[4:].replace("_", "-"))


def prl_flags(f: Any) -> Any:
    """Decorator: one flag per PRL option of the registry (:data:`sdcdist.linkage.prl.settings
    .NAMES`, :func:`sdcdist.options.prl_names`), its help and default from the registry; received as ``prl_<name>`` (None when
    not given). The values are read as an ``-o`` value and checked by the registry."""
    from ..options import OPTIONS, default_text, prl_names
    for name in reversed(prl_names()):
        opt = OPTIONS[name]
        extra = {"prl_t": "; several increasing values give multi-level comparisons",
                 "prl_blocking": " (COLUMN:HALF_WINDOW for [COLUMN, HALF_WINDOW])"}.get(name, "")
        f = click.option(_flag(name), name, default=None, metavar="VALUE",
                         help=f"{opt.description} (option {name}; default "
                              f"{default_text(opt)}): {opt.allowed}{extra}.")(f)
    for old, new in _OLD_FLAGS.items():
        f = click.option(old, "old_" + old.lstrip("-").replace("-", "_"), default=None,
                         hidden=True, expose_value=False, callback=_gone(old, new))(f)
    return f


def _gone(old: str, new: str) -> Any:
    def refuse(ctx: click.Context, param: click.Parameter, value: Any) -> None:
        if value is not None:
            raise click.UsageError(f"{old} is gone; give {new}", ctx)
    return refuse


def _read_flag(name: str, text: str) -> Any:
    """A flag's text as an option value: YAML as in ``-o``, plus ``A,B`` for a list option and
    ``COLUMN:HALF_WINDOW`` for the blocking."""
    from ..yamlsafe import parse_option_value
    t = text.strip()
    if name in _LIST_FLAGS and "," in t and not t.startswith("["):
        t = f"[{t}]"
    if name == "prl_blocking":
        col, sep, width = t.rpartition(":")
        if sep and col and width.strip().lstrip("-").isdigit():
            return [col, int(width)]
    return parse_option_value(name, t)


def prl_settings(flags: dict[str, Any], option_items: tuple[str, ...],
                 ctx: click.Context) -> Any:
    """The PRL settings from the flags and ``-o`` (each value checked by the registry; an
    option given both ways, or an option that is not a PRL option, is refused)."""
    from ..linkage.prl.settings import NAMES, PRLSettings
    from ..options import read_items
    given = read_items(option_items)
    for key in given:
        if key not in NAMES:
            raise unknown_name_error("PRL option", key, NAMES)
    values: dict[str, Any] = {}
    for name in NAMES:
        text = flags.get(name)
        if text is None:
            continue
        if name in given:
            raise exclusive_error([_flag(name), f"--option {name}=..."], "one")
        value = _read_flag(name, text)
        try:
            PRLSettings.from_options({name: value})
        except SdcInputError as e:
            raise SdcInputError(f"{_flag(name)}: {e}") from None
        values[name] = value
    return PRLSettings.from_options({**given, **values})


@main.command()
@click.argument("original", type=PathOrURL("input"))
@click.argument("masked", type=PathOrURL("input"))
@role_options(keys={"help": "Key columns compared (present in both files).", "required": True},
              categorical="Key columns compared by equality.", na_values=True)
@click.option("--method", type=click.Choice(["prl"]), default="prl", show_default=True,
              help="Linkage method: prl = probabilistic record linkage (Fellegi-Sunter, EM).")
@click.option("--id", "id_column", default=None, metavar="COLUMN",
              help="Identifier column in both files: gives the truth, adds 'correct' and PLD.")
@click.option("--out", required=True, type=PathOrURL("output"),
              help="Parquet file for the linked pairs.")
@click.option("--overwrite", is_flag=True, help="Replace an existing output file.")
@option_items(examples="prl_block_rows=[4096,4096] or prl_em={max_iter: 500}",
              which="the PRL options of the registry")
@prl_flags
@json_flag
@cluster_options(local=True)
def link(original: str, masked: str, keys: str, method: str, id_column: str | None,
         categorical: str | None, out: str, overwrite: bool, na_values: str | None,
         option_items: tuple[str, ...], as_json: bool, where: ClusterOptions,
         **flags: Any) -> None:
    """Link each record of MASKED to at most one record of ORIGINAL and write the pairs.

    Both files are CSV, Parquet or Zarr stores and may differ in size (e.g. an
    external file covering part of the population). The output has one row per
    linked pair: row_b (MASKED), row_a (ORIGINAL), weight, match_probability
    and, with --id, id_b, id_a, correct and true_weight. Records left without a
    partner are not listed.

    Every PRL option of a spec (``sdcdist metrics``) has a flag here (``--compare`` for
    prl_method, ``--t`` for prl_t, ``--block-on`` for prl_blocking, ``--top-c`` for
    prl_top_c, ...) and can be given with ``-o/--option`` too, e.g.
    ``-o prl_em={max_iter: 500}`` or ``-o prl_block_rows=[4096,4096]``; an option
    and the flag that sets the same thing cannot both be given.
    """
    from ..data import load_microdata
    from ..linkage.link import link_files
    # the options first: a bad value is reported before anything about the files
    settings = prl_settings(flags, option_items, click.get_current_context())
    if not out.lower().endswith((".parquet", ".pq")):
        raise value_error("--out", "a file name ending in .parquet (the pairs are written as "
                          "Parquet)", out)
    check_output(out, what="--out", overwrite=overwrite, inputs=[original, masked])
    key_list = names_option(keys, "--keys")
    cats = names_option(categorical, "--categorical") or []
    # integer-coded keys declared categorical are read as categories (missing values
    # allowed there)
    A, B = (load_microdata(p, na_values=na_values, categorical=reader_categorical(p, cats))
            for p in (original, masked))
    from ..data import align_categories
    A, B = align_categories(A, B)
    hid = [h for h in dict.fromkeys((A.household, B.household)) if h in key_list]
    if hid:
        from ..roles import key_role_error
        raise key_role_error("--keys", hid[0], "household", "--keys")
    # text keys (categorical in the files) are compared by equality too
    cats = list(dict.fromkeys(cats + [k for k in key_list
                                      if k in A.categories or k in B.categories]))
    from ._common import IN_PROCESS_PAIRS, choose_where
    na, nb = A.shape[0], B.shape[0]
    where = choose_where(where, f"{na} x {nb} record pairs are few"
                         if na * nb <= IN_PROCESS_PAIRS else None)
    with cluster(where, quiet=True) as client:
        res = link_files(A, B, key_list, id_column=id_column, categorical=cats,
                         client=client, settings=settings)
    _write_pairs(res, out)
    info = res.result.info
    if as_json:
        echo_json({"out": out, "pairs": len(res.pairs), "masked_records": B.shape[0],
                   **{k: info[k] for k in ("pairs_compared", "assignment", "blocking",
                                           "em_iterations", "em_loglik", "em_converged",
                                           "em_identified", "em_info_ratio", "em_fit",
                                           "p_match", "counting", "pattern_kernel",
                                           "candidates", "pairs_enumerated", "pairs_weighed")
                      if k in info},
                   **res.figures(), "matched": res.matched, "unmatched": res.unmatched})
        return
    click.echo(f"{out}: {len(res.pairs)} linked pairs of {B.shape[0]} masked records; "
               f"{info['pairs_compared']} pairs compared, {info['assignment']} assignment, "
               f"blocking {info['blocking']}, EM {info['em_iterations']} iterations "
               f"(log-likelihood {info['em_loglik']:.6g}), P(M) {info['p_match']:.3g}")
    if not info["em_converged"]:
        from ..linkage.prl.em import limit_advice
        click.echo(f"warning: EM did not converge within {info['em_iterations']} iterations "
                   f"(parameters still moving by {settings.em.tol:g} or more); "
                   + ("raise max_iter (--em '{max_iter: N}')" if settings.em.accelerate else
                      limit_advice(False).replace("prl_em ", "--em ")))
    if info.get("em_identified") is False:
        click.echo("warning: the pattern counts do not identify the EM fit (observed "
                   f"information singular: smallest/largest eigenvalue "
                   f"{info['em_info_ratio']:.3g}); other parameters, another P(M), fit them "
                   "as well, so the weights and links are not determined by the data (use "
                   "more or other key columns)")
    if "counting" in info:
        click.echo(f"pattern counts: {info['counting']}"
                   + (f"; candidates: {info['candidates']}" if "candidates" in info else ""))
    if "pairs_enumerated" in info:
        click.echo(f"counting path: {info['pairs_enumerated']} pairs enumerated for the "
                   f"pattern counts, {info.get('pairs_weighed', 0)} weighed for the candidates")
    if res.pld is not None:
        click.echo(f"PLD {res.pld:.2f}  PLD20 {res.pld20:.2f}  "
                   f"PLD_best {100.0 * res.result.correct_best / B.shape[0]:.2f}")
    if res.matched is not None:
        click.echo(f"identifiers: {res.matched} of {res.matched + res.unmatched} masked records "
                   f"have one in the original file"
                   + ("; the others count as not re-identified" if res.unmatched else ""))


def _write_pairs(res: Any, out: str) -> None:
    """The pairs as Parquet, with the run's summary (counts only) in the file's metadata
    under the key ``sdcdist``."""
    import json

    import pyarrow as pa
    import pyarrow.parquet as pq
    table = pa.Table.from_pandas(res.pairs, preserve_index=False)
    summary = {"pld": res.pld, "pld20": res.pld20, "matched": res.matched,
               "unmatched": res.unmatched, "assignment": res.result.info.get("assignment")}
    meta = dict(table.schema.metadata or {})
    meta[b"sdcdist"] = json.dumps(summary).encode()
    pq.write_table(table.replace_schema_metadata(meta), out)
