"""Data commands: ``ingest``, ``synth``, ``mask``."""

from __future__ import annotations

import sys
from typing import Any

import click

from ..errors import SdcInputError, empty_error
from ..limits import MAX_CHUNK_ROWS, MAX_ROWS
from ._common import (echo_json, json_flag, main, names_option, parse_method_options,
                      reader_categorical, role_options)
from ._paths import PathOrURL, check_output

__all__ = ["ingest", "synth", "mask"]


@main.command()
@click.argument("source", type=PathOrURL("input", exists=False))
@click.argument("store", type=PathOrURL("output"))
@click.option("--columns", default=None, metavar="A,B,...",
              help="Keep only these columns (comma-separated), e.g. to leave out text columns.")
@role_options(keys="Columns an intruder may know (key role), in linkage order.",
              confidential="Confidential columns (role used by the IPSO methods).",
              household="The household id column (household role), read by the household "
                        "risk metrics (HR_*); never a linkage key.",
              categorical="Integer-coded columns to store as categorical (text columns are "
                          "categorical anyway).",
              weight="The sampling-weight column (positive values), used by the frequency "
                     "risk metrics.",
              na_values=True)
@click.option("--chunk-rows", type=click.IntRange(1, MAX_CHUNK_ROWS), default=65_536, show_default=True,
              help="Records per Zarr chunk.")
@click.option("--overwrite", is_flag=True, help="Replace an existing store.")
def ingest(source: str, store: str, columns: str | None, keys: str | None,
           confidential: str | None, categorical: str | None, weight: str | None,
           household: str | None, chunk_rows: int, overwrite: bool,
           na_values: str | None) -> None:
    """Validate a CSV or Parquet file and store it as Zarr.

    Text columns and those named by --categorical are stored as categorical
    (integer codes plus their labels, kept verbatim); the others are numeric.
    Only an empty cell is missing (and the markers named by --na-values);
    missing values are allowed in categorical columns only. Missing or
    infinite numbers, a numeric column with a few non-numbers (a typo),
    fewer than 3 records, duplicate names and a weight that is not positive
    are refused with a message saying which column (and records) and how to
    fix it. Constant columns are kept. The source is never modified, an existing store
    is never replaced without --overwrite, and a failed ingest leaves nothing.
    """
    check_output(store, what="STORE", kind="store", overwrite=overwrite, inputs=[source])
    from ..data import ingest as do_ingest, open_microdata
    roles = {}
    key_list, conf = names_option(keys, "--keys"), names_option(confidential, "--confidential")
    cols, cats = names_option(columns, "--columns"), names_option(categorical, "--categorical")
    if weight is not None and not weight.strip():
        raise empty_error("--weight", "give the weight column, or leave --weight out")
    if key_list:
        roles["key"] = key_list
    if conf:
        roles["confidential"] = conf
    if weight:
        roles["weight"] = [weight]
    if household is not None and not household.strip():
        raise empty_error("--household", "give the household id column, or leave "
                          "--household out")
    if household:
        roles["household"] = [household]
    do_ingest(source, store, chunk_rows=chunk_rows, overwrite=overwrite, roles=roles,
              columns=cols, categorical=cats, na_values=na_values)
    da = open_microdata(store)
    cats = da.attrs.get("categories") or {}
    typed = f", {len(cats)} categorical ({', '.join(cats)})" if cats else ""
    click.echo(f"{store}: {da.shape[0]} records x {da.shape[1]} variables{typed} "
               f"(sha256 {da.attrs['sha256'][:12]}...)")


@main.command()
@click.option("--rows", type=click.IntRange(3, MAX_ROWS), required=True,
              help="Number of records.")
@click.option("--columns", type=click.IntRange(1, 13), default=8, show_default=True,
              help="Number of variables (income and tax items, age, hours).")
@click.option("--seed", type=click.IntRange(0), default=0, show_default=True)
@click.option("--out", required=True, type=PathOrURL("output"),
              help="Zarr store to write (or .csv / .parquet).")
@click.option("--chunk-rows", type=click.IntRange(1, MAX_CHUNK_ROWS), default=65_536, show_default=True)
@click.option("--overwrite", is_flag=True, help="Replace an existing output.")
def synth(rows: int, columns: int, seed: int, out: str, chunk_rows: int,
          overwrite: bool) -> None:
    """Write a synthetic income/tax-like file: skewed, correlated, zeros, outliers.

    Zarr output is written chunk by chunk, so memory stays at about one chunk
    whatever --rows is.
    """
    from ..limits import check_rows
    in_memory = out.lower().endswith((".csv", ".parquet", ".pq"))
    check_rows(rows, columns=columns, what="--rows", in_memory=in_memory,
               hint="write a Zarr store instead, which is streamed")
    check_output(out, what="--out", kind="file" if in_memory else "store",
                 overwrite=overwrite)
    from ..data import synth as s, write_microdata
    if in_memory:
        write_microdata(s.generate(rows, columns=columns, seed=seed), out, overwrite=overwrite)
    else:
        s.write_synthetic(out, rows, columns=columns, seed=seed, chunk_rows=chunk_rows,
                          overwrite=overwrite, progress=sys.stderr.isatty())
    click.echo(f"{out}: {rows} records x {columns} variables (seed {seed})")


#: The option that sets each role a method may need (for the message when one is missing).
_ROLE_FLAGS = {"confidential": "--confidential", "key": "--keys"}


@main.command()
@click.argument("data", type=PathOrURL("input", exists=False))
@click.option("-m", "--method", required=True,
              help="Masking method (see `sdcdist methods`), e.g. micmul.")
@click.option("-p", "--param", type=float, default=None,
              help="The method's parameter (e.g. k for micmul); omit for methods without one. "
              "Its range is the method's (`sdcdist methods`): inf only where the method "
              "takes it (e.g. privbayes' epsilon, no noise), nan never.")
@click.option("--seed", type=click.IntRange(0), default=0, show_default=True,
              help="Seed of the random generator (same seed, same output).")
@click.option("--spawn-key", default=None, metavar="K1,K2,...",
              help="With --seed, the generator numpy.random.default_rng(SeedSequence(seed, "
                   "spawn_key=(K1, K2, ...))): an audit cell's seed, as `sdcdist release` "
                   "prints it, to write the same file.")
@click.option("--out", required=True, type=PathOrURL("output"),
              help="Masked file to write: .csv, .parquet, else a Zarr store.")
@role_options(keys="IPSO: the quasi-identifier columns (key role) to replace; default: the "
                   "dataset's key role.",
              confidential="IPSO: the confidential columns (regressors); default: the "
                           "dataset's confidential role.",
              categorical="Integer-coded columns of a CSV/Parquet input to read as "
                          "categorical.",
              na_values=True)
@click.option("--option", "-o", "option_items", multiple=True, metavar="KEY=VALUE",
              help="A method option, e.g. variables=[age] or mapping={sex: {'1': m}}; for "
                   "a pipeline a step's options, e.g. recode={w: 5, variables: [age]} "
                   "(repeatable; each key once).")
@click.option("--overwrite", is_flag=True, help="Replace an existing output.")
@json_flag
def mask(data: str, method: str, param: float | None, seed: int, spawn_key: str | None,
         out: str, keys: str | None,
         confidential: str | None, option_items: tuple[str, ...], categorical: str | None,
         overwrite: bool, na_values: str | None, as_json: bool) -> None:
    """Mask DATA (a Zarr store, CSV or Parquet file) with one method and write the result.

    \b
    Examples:
      sdcdist mask people.zarr --method micmul --param 3 --out masked.parquet
      sdcdist mask people.csv --method ipso_c --confidential WAGES,TAXINC \\
          --keys FEDTAX,FICA --out synthetic.csv

    The random generator is numpy's default_rng(--seed). Column names and roles
    are kept; a Zarr output also records the method, parameter and seed.
    """
    import numpy as np

    from ..data import Microdata, load_microdata, write_microdata
    from ..masking import get_method, method_options, missing_roles
    check_output(out, what="--out", overwrite=overwrite, inputs=[data],
                 kind="file" if out.lower().endswith((".csv", ".parquet", ".pq")) else "store")
    meth = get_method(method)
    key = _spawn_key(spawn_key) if spawn_key is not None else None      # refused before any reading
    if param is None:
        if meth.kind != "none":
            raise SdcInputError(f"{meth.name} needs --param: its {meth.param!r} parameter "
                                f"must be {meth.allowed_text()}")
        param = 0.0
    elif meth.kind == "int" and float(param).is_integer():
        param = int(param)
    key_list, conf = names_option(keys, "--keys"), names_option(confidential, "--confidential")
    cats = names_option(categorical, "--categorical")
    given: dict[str, Any] = parse_method_options(meth, option_items) if option_items else {}
    md = load_microdata(data, categorical=reader_categorical(data, cats), na_values=na_values)
    roles = {r: list(c) for r, c in md.roles.items()}
    if key_list:
        roles["key"] = key_list
    if conf:
        roles["confidential"] = conf
    for cols in roles.values():
        md.column_index(cols, what="role column")
    missing = missing_roles(meth, roles)
    if missing:
        raise SdcInputError(f"{meth.name} needs the roles of the columns: pass "
                            f"{' and '.join(_ROLE_FLAGS[r] for r in missing)} (comma-separated "
                            f"column names), or ingest the data with those roles")
    if meth.acts_on == "numeric" and "roles" in meth.options:
        _numeric_roles(meth.name, roles, set(md.categories))
    options: dict[str, Any] = method_options(meth, columns=md.columns, roles=roles,
                                             categorical=md.categories, options=given)
    info: dict[str, Any] = {}
    if "info" in meth.options:
        options["info"] = info
    seq = np.random.SeedSequence(seed, spawn_key=key) if key else seed
    masked = meth(md.values, param, rng=np.random.default_rng(seq), **options)
    attrs = {"masking": {"method": meth.name, "param_name": meth.param, "param": param,
                         "seed": seed, "source_sha256": md.sha256}}
    if key:
        attrs["masking"]["spawn_key"] = list(key)
    if "family" in info:
        attrs["masking"]["family"] = dict(zip(md.columns, info["family"]))
    categories = {**md.categories, **info.get("categories", {})}
    write_microdata(Microdata(masked, md.columns, roles, None, categories), out,
                    overwrite=overwrite,
                    attrs=attrs)
    shown = "" if meth.kind == "none" else f" {meth.param}={param:g}"
    if as_json:
        echo_json({"out": out, "records": md.shape[0], "variables": md.shape[1],
                   "method": meth.name, "param_name": meth.param, "param": param,
                   "seed": seed,
                   **({"family": dict(zip(md.columns, info["family"]))}
                      if "family" in info else {}),
                   **({k: info[k] for k in ("suppressed", "bound", "unsafe") if k in info})})
        return
    click.echo(f"{out}: {md.shape[0]} records x {md.shape[1]} variables masked with "
               f"{meth.name}{shown} (seed {seed})")
    if "family" in info:
        click.echo("fitted families: " + ", ".join(
            f"{c}={f}" for c, f in zip(md.columns, info["family"])))
    if "suppressed" in info:
        click.echo(f"suppressed {info['suppressed']} key values (bound: {info['bound']}, "
                   f"{info['unsafe']} records below k before suppression)")


def _spawn_key(text: str) -> tuple[int, ...]:
    """``--spawn-key K1,K2,...``: non-negative integers below 2**64."""
    try:
        key = tuple(int(k) for k in text.split(","))
    except ValueError:
        key = ()
    if not key or len(key) > 16 or any(k < 0 or k >= 2 ** 64 for k in key):
        raise SdcInputError(f"--spawn-key {text[:100]!r} must be 1 to 16 comma-separated "
                            "integers in [0, 2**64), e.g. 12,345,678,0 (as `sdcdist release` "
                            "prints it)")
    return key


def _numeric_roles(method: str, roles: dict[str, list[str]], categorical: set[str]) -> None:
    """A numeric method's roles must each keep a numeric column (it leaves categorical
    columns as they are): the message names the command-line flags, not the API's."""
    for role, flag in (("confidential", "--confidential"), ("key", "--keys")):
        cols = roles.get(role) or (roles.get("quasi") if role == "key" else None) or []
        if cols and all(c in categorical for c in cols):
            raise SdcInputError(
                f"{method} models numeric columns and leaves categorical ones unchanged, but "
                f"every column of the {role} role ({', '.join(cols)}) is categorical; pass "
                f"{flag} with numeric column names (comma-separated)")
