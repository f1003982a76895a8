"""``sdcdist link``: link the records of two files and write the pairs."""

from __future__ import annotations

from typing import Any

import click

from ..errors import SdcInputError
from ..limits import MAX_DENSE, MAX_TOP_C
from ._common import (ClusterOptions, cluster, cluster_options, echo_json, json_flag, main,
                      na_values_option, names_option, option_items, parse_options,
                      split_list)
from ._paths import PathOrURL, check_output

__all__ = ["link"]


def _tolerances(text: str) -> float | list[float]:
    try:
        ts = [float(x) for x in split_list(text)]
    except ValueError:
        raise SdcInputError(f"The 't' parameter of prl must be a number or a comma-separated "
                            f"list of increasing numbers > 0. Got {text!r} instead.") from None
    if not ts:
        raise SdcInputError("The 't' parameter of prl must be a number > 0. Got nothing instead.")
    return ts[0] if len(ts) == 1 else ts


def _blocking(text: str | None) -> tuple[str, int] | None:
    if not text:
        return None
    col, sep, width = text.rpartition(":")
    if not sep:
        return text, 0                   # exact blocks on the column's values
    if not col or not width.isdigit() or int(width) < 1:
        raise SdcInputError(f"--block-on must be COLUMN (exact blocks) or COLUMN:HALF_WINDOW "
                            f"(e.g. region, or AGI:50). Got {text!r} instead.")
    return col, int(width)


@main.command()
@click.argument("original", type=PathOrURL("input"))
@click.argument("masked", type=PathOrURL("input"))
@click.option("--keys", required=True, metavar="A,B,...",
              help="Key columns compared (present in both files).")
@click.option("--method", type=click.Choice(["prl"]), default="prl", show_default=True,
              help="Linkage method: prl = probabilistic record linkage (Fellegi-Sunter, EM).")
@click.option("--id", "id_column", default=None, metavar="COLUMN",
              help="Identifier column in both files: gives the truth, adds 'correct' and PLD.")
@click.option("--compare", type=click.Choice(["s", "l", "d"]), default="s", show_default=True,
              help="Numeric comparison: absolute difference in sd of the original column (s), "
                   "relative difference on log-like g(v) (l) or on raw values (d; the papers: "
                   "--compare l --t 0.05).")
@click.option("--t", "t_text", default="0,0.1,0.25,0.5,1", show_default=True,
              metavar="T[,T2,...]",
              help="Tolerance(s); several increasing values give multi-level comparisons.")
@click.option("--weights", type=click.Choice(["linear", "step"]), default="linear",
              show_default=True,
              help="Weights of a multi-level numeric column: linear in |a - b| between its "
                   "levels' weights (read at each level's middle), or one per level (step).")
@click.option("--categorical", default=None, metavar="A,B,...",
              help="Key columns compared by equality.")
@click.option("--top-c", type=click.IntRange(1, MAX_TOP_C), default=20, show_default=True,
              help="Candidates kept per masked record for the sparse assignment.")
@click.option("--dense-limit", type=click.IntRange(1, MAX_DENSE), default=5000, show_default=True,
              help="Largest file solved by the dense exact assignment.")
@click.option("--block-on", default=None, metavar="COLUMN[:HALF_WINDOW]",
              help="Compare only records with equal COLUMN values (exact blocks, e.g. on a "
                   "categorical key), or with COLUMN:HALF_WINDOW the sorted neighbourhood; "
                   "default all pairs.")
@click.option("--em-max-iter", type=click.IntRange(1, 10**7), default=None,
              help="EM iteration limit (default 20000); a fit that reaches it is reported.")
@click.option("--counting", type=click.Choice(["auto", "pairs", "count"]), default="auto",
              show_default=True,
              help="Pattern counts and candidates by comparing all pairs, or exactly without "
                   "enumerating them (count; same result); auto counts on large files.")
@click.option("--out", required=True, type=PathOrURL("output"),
              help="Parquet file for the linked pairs.")
@click.option("--overwrite", is_flag=True, help="Replace an existing output file.")
@na_values_option
@option_items
@json_flag
@cluster_options(local=True)
def link(original: str, masked: str, keys: str, method: str, id_column: str | None,
         compare: str, t_text: str, weights: str, categorical: str | None, top_c: int,
         dense_limit: int,
         block_on: str | None, em_max_iter: int | None, counting: str, out: str,
         overwrite: bool, na_values: str | None, option_items: tuple[str, ...],
         as_json: bool,
         where: ClusterOptions) -> None:
    """Link each record of MASKED to at most one record of ORIGINAL and write the pairs.

    Both files are CSV, Parquet or Zarr stores and may differ in size (e.g. an
    external file covering part of the population). The output has one row per
    linked pair: row_b (MASKED), row_a (ORIGINAL), weight, match_probability
    and, with --id, id_b, id_a, correct and true_weight. Records left without a
    partner are not listed.

    ``-o/--option`` takes the PRL options of a spec (``sdcdist metrics``), e.g.
    ``-o prl_em={max_iter: 500}`` or ``-o prl_block_rows=[4096,4096]``; an option
    and the flag that sets the same thing cannot both be given.
    """
    from ..data import load_microdata
    from ..linkage.link import link_files
    if not out.lower().endswith((".parquet", ".pq")):
        raise SdcInputError(f"the pairs are written as Parquet; give an output ending in "
                            f".parquet (got {out!r})")
    check_output(out, what="--out", overwrite=overwrite)
    key_list = names_option(keys, "--keys")
    cats = names_option(categorical, "--categorical") or []
    t, blocking = _tolerances(t_text), _blocking(block_on)
    settings = dict(method=compare, t=t, top_c=top_c, dense_limit=dense_limit,
                    blocking=blocking, em_options={"max_iter": em_max_iter} if em_max_iter
                    else None, counting=counting, weights=weights, block_rows=None)
    ctx = click.get_current_context()
    settings.update(_prl_options(parse_options(option_items), ctx))
    A = load_microdata(original, na_values=na_values)
    B = load_microdata(masked, na_values=na_values)
    from ..data import align_categories
    A, B = align_categories(A, B)
    # text keys (categorical in the files) are compared by equality too
    cats = list(dict.fromkeys(cats + [k for k in key_list
                                      if k in A.categories or k in B.categories]))
    from ._common import IN_PROCESS_PAIRS, choose_where
    na, nb = A.shape[0], B.shape[0]
    where = choose_where(where, f"{na} x {nb} record pairs are few"
                         if na * nb <= IN_PROCESS_PAIRS else None)
    with cluster(where, quiet=True) as client:
        res = link_files(A, B, key_list, id_column=id_column, categorical=cats,
                         client=client, **settings)
    _write_pairs(res, out)
    info = res.result.info
    if as_json:
        echo_json({"out": out, "pairs": len(res.pairs), "masked_records": B.shape[0],
                   **{k: info[k] for k in ("pairs_compared", "assignment", "blocking",
                                           "em_iterations", "em_loglik", "em_converged",
                                           "p_match", "pairs_enumerated", "pairs_weighed")
                      if k in info},
                   "PLD": res.pld, "PLD20": res.pld20, "matched": res.matched,
                   "unmatched": res.unmatched})
        return
    click.echo(f"{out}: {len(res.pairs)} linked pairs of {B.shape[0]} masked records; "
               f"{info['pairs_compared']} pairs compared, {info['assignment']} assignment, "
               f"blocking {info['blocking']}, EM {info['em_iterations']} iterations "
               f"(log-likelihood {info['em_loglik']:.6g}), P(M) {info['p_match']:.3g}")
    if not info["em_converged"]:
        click.echo(f"warning: EM did not converge within {info['em_iterations']} iterations "
                   "(parameters still moving by 1e-10 or more); raise --em-max-iter")
    if "pairs_enumerated" in info:
        click.echo(f"counting path: {info['pairs_enumerated']} pairs enumerated for the "
                   f"pattern counts, {info.get('pairs_weighed', 0)} weighed for the candidates")
    if res.pld is not None:
        click.echo(f"PLD {res.pld:.2f}  PLD20 {res.pld20:.2f}")
    if res.matched is not None:
        click.echo(f"identifiers: {res.matched} of {res.matched + res.unmatched} masked records "
                   f"have one in the original file"
                   + ("; the others count as not re-identified" if res.unmatched else ""))


#: link_files' argument for each PRL option of the registry, and the flag setting it
_PRL_ARGS = {"prl_method": ("method", "--compare"), "prl_t": ("t", "--t"),
             "prl_weights": ("weights", "--weights"), "prl_top_c": ("top_c", "--top-c"),
             "prl_dense_limit": ("dense_limit", "--dense-limit"),
             "prl_blocking": ("blocking", "--block-on"),
             "prl_block_rows": ("block_rows", None), "prl_em": ("em_options", "--em-max-iter"),
             "prl_counting": ("counting", "--counting")}


def _prl_options(opts: dict[str, Any], ctx: click.Context) -> dict[str, Any]:
    """``-o`` options as link_files arguments; refuses options link does not read and an
    option given both as a flag and with -o."""
    out: dict[str, Any] = {}
    for key, value in opts.items():
        if key not in _PRL_ARGS:
            raise SdcInputError(f"`sdcdist link` reads the PRL options only; {key!r} is not "
                                f"one. Valid options: {', '.join(_PRL_ARGS)}.")
        arg, flag = _PRL_ARGS[key]
        if flag is not None:
            param = flag.lstrip("-").replace("-", "_")
            param = {"t": "t_text"}.get(param, param)
            src = ctx.get_parameter_source(param)
            if src is not None and src.name not in ("DEFAULT", "DEFAULT_MAP"):
                raise SdcInputError(f"{flag} and --option {key}=... set the same thing; give "
                                    "one of them")
        if key == "prl_t" and isinstance(value, list) and len(value) == 1:
            value = value[0]
        if key == "prl_blocking" and value is not None:
            value = (value, 0) if isinstance(value, str) else (str(value[0]), int(value[1]))
        if key in ("prl_block_rows",) and value is not None:
            value = (int(value[0]), int(value[1]))
        out[arg] = value
    return out


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
