"""The release report for the 109-cell Table-2 cube: time and size of
``sdcdist report CUBE --html R.html --chosen METHOD:PARAM``.

Run as ``python benchmarks/release_report.py [--full] [--keep DIR]``.

1. Audits ``examples/dmt_table2.yaml`` (the 109 cells of Table 2 of Domingo-Ferrer,
   Mateo-Sanz and Torra on the Census file, 3 replicates of the random methods) in this
   process. Without ``--full`` the cube has the same shape (every method, parameter and
   replicate) but only the cheap metrics IL, DLD and ID1 (no PLD, so no Score): the full
   spec's probabilistic linkage takes tens of minutes of a shared 2-core machine. The audit
   is not what is measured.
2. In a fresh process each, so that the peak resident set is the step's own:

   * ``ranking --html`` (the baseline of the same run): ``sdcdist report CUBE --by IL
     --html T.html``, the ranking table as HTML;
   * ``release report internal`` / ``external``: ``sdcdist report CUBE --chosen
     rankswap:10:1 --html R.html [--variant external]``, which regenerates that cell's
     masked file, checks it against the cube's fingerprint, describes the data, draws the
     comparison plots and writes the page.

   Each prints seconds (wall, and CPU user+system of the process), its peak RSS (VmHWM)
   and the file's size.

The machine is shared: the load average is printed before and after.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]

STEP = r"""
import json, os, sys, time
t0, c0 = time.perf_counter(), os.times()
from click.testing import CliRunner
from sdcdist.cli import main
out = sys.argv[-1]
r = CliRunner().invoke(main, sys.argv[1:], catch_exceptions=False)
assert r.exit_code == 0, r.output
c1 = os.times()
hwm = 0
for line in open("/proc/self/status"):
    if line.startswith("VmHWM"):
        hwm = int(line.split()[1]) * 1024
print(json.dumps({"seconds": time.perf_counter() - t0,
                  "cpu": (c1.user - c0.user) + (c1.system - c0.system),
                  "peak_mib": hwm / 2**20, "size_kib": os.path.getsize(out) / 2**10}))
"""


def load() -> str:
    return " ".join(f"{x:.1f}" for x in os.getloadavg())


def step(args: list[str], cwd: Path) -> dict:
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    r = subprocess.run([sys.executable, "-W", "ignore", "-c", STEP, *args],
                       capture_output=True, text=True, env=env, timeout=3600, cwd=cwd)
    if r.returncode != 0:
        raise SystemExit(f"{' '.join(args)} failed:\n{r.stderr[-3000:]}")
    return json.loads(r.stdout.strip().splitlines()[-1])


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--full", action="store_true",
                    help="audit the spec as it is (Score, Score2: PLD; slow)")
    ap.add_argument("--keep", default=None, help="work in this folder and keep it")
    a = ap.parse_args()
    sys.path.insert(0, str(ROOT))
    from sdcdist.audit import parse_spec, run_audit
    from sdcdist.yamlsafe import load_yaml
    work = Path(a.keep or tempfile.mkdtemp(prefix="sdcdist-report-"))
    work.mkdir(parents=True, exist_ok=True)
    print(f"load average before: {load()}  ({os.cpu_count()} cores)")
    spec = load_yaml((ROOT / "examples" / "dmt_table2.yaml").read_text(), what="the spec")
    if not a.full:
        spec["metrics"] = ["IL", "DLD", "ID1"]
    spec["require"] = ["DLD <= 10"]
    (work / "spec.json").write_text(json.dumps(spec))
    cube = work / "table2.zarr"
    if not cube.exists():
        t = time.perf_counter()
        run_audit(parse_spec(spec, base_dir=work), cube)
        print(f"audit ({'full' if a.full else 'IL, DLD, ID1'}): "
              f"{time.perf_counter() - t:.1f} s")
    from sdcdist.cube import open_cube
    c = open_cube(str(cube))
    print(f"cube: {c.sizes['method']} methods, {int((c['done'].values == 1).any(-1).sum())} "
          f"(method, param) cells, {int((c['done'].values == 1).sum())} with replicates")
    by = "Score" if a.full else "IL"
    for name, args in (
            ("ranking --html (baseline)", ["report", str(cube), "--by", by, "--overwrite",
                                           "--html", str(work / "T.html")]),
            ("release report internal", ["report", str(cube), "--chosen", "rankswap:10:1",
                                         "--overwrite", "--html", str(work / "R.html")]),
            ("release report external", ["report", str(cube), "--chosen", "rankswap:10:1",
                                         "--variant", "external", "--overwrite", "--html",
                                         str(work / "E.html")])):
        r = step(args, work)
        print(f"{name:28s} {r['seconds']:6.1f} s wall {r['cpu']:6.1f} s CPU "
              f"{r['peak_mib']:6.0f} MiB peak {r['size_kib']:8.1f} KiB   (load {load()})")
    print(f"load average after: {load()}")
    if not a.keep:
        import shutil
        shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main()
