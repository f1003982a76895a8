"""Export of a release: time and peak memory of `sdcdist release` on a 1,000,000-record cell.

Run as ``python benchmarks/release.py [--rows 1000000] [--columns 8] [--keep DIR]``.

1. Writes a synthetic file (``--rows`` x ``--columns``, a Zarr store), audits it with one
   cell (noise 0.1, IL1s) in this process, and records the cube's masked-file fingerprint.
2. In a fresh process each (so that the peak resident set is the step's own):

   * ``mask only``: the release regenerated and checked, nothing written (the floor: the
     file and its masked copy in memory);
   * ``release csv`` / ``release parquet``: ``sdcdist.release.release`` (regenerate, check,
     write chunk by chunk, move into place);
   * ``whole-frame csv`` / ``whole-frame parquet``: the same masked values written the way
     CSV and Parquet were written before (one pandas DataFrame of the whole file), the
     baseline of the same run.

   Each prints seconds (wall, and CPU user+system) and the process's peak RSS (VmHWM).
3. Checks that the CSV release equals, byte for byte, the whole-frame CSV.

The machine is shared: the load average is printed before and after; wall times on a loaded
machine are several times an idle one's, CPU seconds are steadier.
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
import json, os, resource, sys, time
t0, c0 = time.perf_counter(), os.times()
import numpy as np
from sdcdist.audit import load_spec
from sdcdist.release import plan_release, release
kind, cube, spec, out = sys.argv[1:5]
s = load_spec(spec)
if kind == "mask":
    r = plan_release(cube, method="noise", param=0.1, spec=s)
elif kind == "release":
    r = release(cube, out, method="noise", param=0.1, spec=s)
else:
    import pandas as pd
    r = plan_release(cube, method="noise", param=0.1, spec=s)
    df = pd.DataFrame(r.values, columns=list(r.columns))
    if out.endswith(".csv"):
        df.to_csv(out, index=False, float_format="%.17g")
    else:
        df.to_parquet(out, index=False)
c1 = os.times()
hwm = 0
for line in open("/proc/self/status"):
    if line.startswith("VmHWM"):
        hwm = int(line.split()[1]) * 1024
print(json.dumps({"seconds": time.perf_counter() - t0,
                  "cpu": (c1.user - c0.user) + (c1.system - c0.system),
                  "peak_mib": hwm / 2**20,
                  "size_mib": os.path.getsize(out) / 2**20 if os.path.exists(out) else 0}))
"""


def load() -> str:
    return " ".join(f"{x:.1f}" for x in os.getloadavg())


def step(kind: str, cube: Path, spec: Path, out: Path) -> dict:
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    r = subprocess.run([sys.executable, "-c", STEP, kind, str(cube), str(spec), str(out)],
                       capture_output=True, text=True, env=env, timeout=3600)
    if r.returncode != 0:
        raise SystemExit(f"{kind} failed:\n{r.stderr[-3000:]}")
    return json.loads(r.stdout.strip().splitlines()[-1])


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--rows", type=int, default=1_000_000)
    ap.add_argument("--columns", type=int, default=8)
    ap.add_argument("--keep", default=None, help="work in this folder and keep it")
    a = ap.parse_args()
    sys.path.insert(0, str(ROOT))
    from sdcdist.audit import load_spec, run_audit
    from sdcdist.data.synth import write_synthetic
    work = Path(a.keep or tempfile.mkdtemp(prefix="sdcdist-release-"))
    work.mkdir(parents=True, exist_ok=True)
    print(f"load average before: {load()}  ({os.cpu_count()} cores)")
    data = work / "data.zarr"
    if not data.exists():
        write_synthetic(str(data), a.rows, columns=a.columns, seed=1)
    spec = work / "spec.yaml"
    spec.write_text(json.dumps({"name": "release-bench", "seed": 7, "replicates": 1,
                                "dataset": {"name": "synth", "path": "data.zarr"},
                                "methods": [{"name": "noise", "params": [0.1]}],
                                "metrics": ["IL1s"]}))
    cube = work / "cube.zarr"
    t = time.perf_counter()
    run_audit(load_spec(spec), cube, overwrite=True)
    print(f"audit of one cell ({a.rows:,} x {a.columns}): {time.perf_counter() - t:.1f} s")
    rows = []
    for kind, name, ext in (("mask", "mask only (no file)", "csv"),
                            ("release", "release csv", "csv"),
                            ("whole", "whole-frame csv (before)", "csv"),
                            ("release", "release parquet", "parquet"),
                            ("whole", "whole-frame parquet (before)", "parquet")):
        out = work / f"{kind}.{ext}"
        if out.exists():
            out.unlink()
        r = step(kind, cube, spec, out)
        rows.append((name, r))
        print(f"{name:30s} {r['seconds']:7.1f} s wall {r['cpu']:7.1f} s CPU "
              f"{r['peak_mib']:8.0f} MiB peak {r['size_mib']:8.1f} MiB file   (load {load()})")
    same = (work / "release.csv").read_bytes() == (work / "whole.csv").read_bytes()
    print(f"release csv equals the whole-frame csv byte for byte: {same}")
    print(f"load average after: {load()}")
    if not a.keep:
        import shutil
        shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main()
