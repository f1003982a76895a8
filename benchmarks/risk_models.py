"""Every disclosure-risk model against its reference tool, in one run.

    .venv/bin/python benchmarks/risk_models.py [--sizes 100000,1000000] [--timeout 900]
                                               [--only attribute,suda2,...]

Runs, one after the other and with the same ``--sizes`` and ``--timeout``, the benchmark of
each family of risk models; each prints its own table (measure, n, sdcdist wall time and peak
memory, the reference tool's, their ratio; "did not finish" where the reference tool ran out
of ``--timeout`` seconds):

=============  ==========================================  =====================================
part           measures                                    reference tool
=============  ==========================================  =====================================
attribute      l-diversity, t-closeness, beta-likeness,    pycanon 1.3.6, sdcMicro ``ldiversity``
               delta-disclosure (``attribute.py``)
suda2          special uniques, SUDA, DIS-SUDA             sdcMicro 5.8.1 ``suda2``
               (``risk_suda2.py``)
household      hierarchical (household) risk, log-linear   sdcMicro 5.8.1 ``measure_risk(hid=)``,
               model-based risk (``risk_household.py``)    ``modRisk``
anonymeter     singling out, linkability, inference        anonymeter 1.1.0
               (``risk_anonymeter.py``)
synthetic      DCR, NNDR, CategoricalCAP                   SDMetrics 0.32.0
               (``risk_synthetic.py``)
=============  ==========================================  =====================================

The reference tools run in their own environments (``sh benchmarks/peers/setup.sh``) or in
the system's R with sdcMicro; they are never sdcdist dependencies.
"""

from __future__ import annotations

import argparse
import subprocess
import sys
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent

#: part -> script of benchmarks/ (run as its own process, so one part's peak memory is its own)
PARTS = {"attribute": "attribute.py", "suda2": "risk_suda2.py",
         "household": "risk_household.py", "anonymeter": "risk_anonymeter.py",
         "synthetic": "risk_synthetic.py"}


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--sizes", default="100000,1000000", help="record counts, comma-separated")
    ap.add_argument("--timeout", type=float, default=900.0,
                    help="seconds a reference tool may take per run (default 900)")
    ap.add_argument("--only", default=",".join(PARTS),
                    help=f"parts to run, among {', '.join(PARTS)}")
    args = ap.parse_args(argv)
    only = [p.strip() for p in args.only.split(",") if p.strip()]
    unknown = sorted(set(only) - set(PARTS))
    if unknown:
        ap.error(f"unknown part(s) {unknown}; valid: {', '.join(PARTS)}")
    failed = []
    for part in only:
        script = HERE / PARTS[part]
        print(f"\n== {part} ({script.name})", flush=True)
        t0 = time.perf_counter()
        rc = subprocess.call([sys.executable, str(script), "--sizes", args.sizes,
                              "--timeout", str(args.timeout)])
        print(f"-- {part}: exit {rc}, {time.perf_counter() - t0:.0f} s", flush=True)
        if rc:
            failed.append(part)
    if failed:
        print(f"failed: {', '.join(failed)}")
    return 1 if failed else 0


if __name__ == "__main__":
    raise SystemExit(main())
