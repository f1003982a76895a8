"""The ``release`` command: write one audited cell's masked file."""

from __future__ import annotations

import click

from ..errors import SdcInputError
from ._common import echo_json, json_flag, main
from ._paths import PathOrURL, check_output

__all__ = ["release"]


@main.command()
@click.argument("cube", type=PathOrURL("input", exists=False))
@click.option("-m", "--method", required=True, help="The cell's masking method.")
@click.option("-p", "--param", type=float, required=True,
              help="The cell's parameter value (0 for methods without one).")
@click.option("-r", "--replicate", type=click.IntRange(0), default=0, show_default=True,
              help="The cell's replicate.")
@click.option("--dataset", default=None, help="Dataset of a multi-dataset cube.")
@click.option("--spec", "spec_path", default=None, type=PathOrURL("input"),
              help="The spec file that made the cube (default: the copy the cube records, "
                   "its data paths relative to the current directory).")
@click.option("--out", required=True, type=PathOrURL("output"),
              help="The released file: .csv or .parquet.")
@click.option("--overwrite", is_flag=True, help="Replace an existing file.")
@json_flag
def release(cube: str, method: str, param: float, replicate: int, dataset: str | None,
            spec_path: str | None, out: str, overwrite: bool, as_json: bool) -> None:
    """Write the masked file of one cell of an audit cube (the release).

    \b
    Example:
      sdcdist release audit.zarr --method rankswap --param 10 --replicate 0 \\
          --out release.csv

    The file is regenerated from the cube's spec and the cell's seed and
    checked against the masked-file fingerprint the audit recorded; it is the
    file `sdcdist mask` writes with that seed (the command is printed). It is
    written chunk by chunk under a temporary name and moved into place: on any
    refusal nothing is written.
    """
    if not out.lower().endswith((".csv", ".parquet", ".pq")):
        raise SdcInputError(f"--out {out!r} must be a .csv or .parquet file")
    check_output(out, what="--out", overwrite=overwrite, kind="file",
                 inputs=[cube, spec_path])
    from ..audit.spec import load_spec
    from ..release import release as run_release
    spec = load_spec(spec_path) if spec_path else None
    r = run_release(cube, out, method=method, param=param, replicate=replicate,
                    dataset=dataset, spec=spec, overwrite=overwrite)
    if as_json:
        echo_json({"out": out, **r.as_dict(), "mask_command": r.mask_command()})
        return
    click.echo(f"{out}: {r.records} records x {len(r.columns)} variables, {r.method} "
               f"{r.param:g} replicate {r.replicate} of dataset {r.dataset!r}; fingerprint "
               f"{r.fingerprint} matches the cube")
    click.echo(f"same file as: {r.mask_command()} --out {out}")
