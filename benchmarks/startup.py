"""How fast the command line starts, against loading what a command needs up front.

Run as ``python benchmarks/startup.py [--repeat 5]``.

Times (median wall seconds of ``--repeat`` runs, each a fresh interpreter):

- ``sdcdist --help``, ``sdcdist methods``, ``sdcdist metrics``, ``sdcdist --version``;
- the baseline, measured in the same run: a fresh interpreter importing every
  module a command may need (the registries, Dask, distributed, xarray, zarr,
  pandas, scipy), which is what starting the command line cost when it imported
  everything at start-up.

and prints each command's ratio to the baseline, plus which heavy modules each
command loaded (from ``sys.modules`` at exit). The machine is shared: timings
are noisy; the module lists are exact.
"""

from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import sys
import time

HEAVY = ("dask", "distributed", "numba", "scipy", "xarray", "zarr", "pandas", "numpy",
         "matplotlib", "sklearn")

PROBE = ("import atexit, json, sys\n"
         "atexit.register(lambda: sys.stderr.write('\\nMODULES ' + json.dumps(sorted({m.split('.')[0]"
         " for m in sys.modules})) + '\\n'))\n")


def _run(code: str, args: list[str]) -> tuple[float, set[str]]:
    t = time.perf_counter()
    p = subprocess.run([sys.executable, "-c", PROBE + code, *args], capture_output=True,
                       text=True)
    dt = time.perf_counter() - t
    if p.returncode != 0:
        raise SystemExit(f"{args}: exit {p.returncode}\n{p.stderr[-2000:]}")
    line = [x for x in p.stderr.splitlines() if x.startswith("MODULES ")][-1]
    return dt, set(json.loads(line[8:]))


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--repeat", type=int, default=5)
    a = ap.parse_args()
    cli = ("import sys\nfrom sdcdist.cli import main\nsys.argv = ['sdcdist'] + sys.argv[1:]\n"
           "try:\n    main()\nexcept SystemExit as e:\n    sys.exit(e.code or 0)\n")
    eager = ("import sdcdist.cli, sdcdist.masking, sdcdist.metrics, sdcdist.audit, sdcdist.report\n"
             "import dask, distributed, xarray, zarr, pandas, scipy.stats, numba\n")
    cases = [("baseline: import everything", eager, []),
             ("sdcdist --help", cli, ["--help"]),
             ("sdcdist --version", cli, ["--version"]),
             ("sdcdist methods", cli, ["methods"]),
             ("sdcdist metrics", cli, ["metrics"])]
    for _, code, args in cases:                      # warm the file cache and numba's cache
        _run(code, args)
    base = None
    print(f"{'command':32s} {'median s':>9s} {'ratio':>7s}  heavy modules loaded")
    for label, code, args in cases:
        runs = [_run(code, args) for _ in range(a.repeat)]
        t = statistics.median(r[0] for r in runs)
        base = base or t
        mods = sorted(set(HEAVY) & runs[-1][1])
        print(f"{label:32s} {t:9.3f} {t / base:7.2f}  {', '.join(mods) or '-'}")


if __name__ == "__main__":
    main()
