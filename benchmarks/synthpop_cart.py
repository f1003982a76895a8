"""sdcdist's ``cart`` against its anchor, synthpop's ``syn()`` with method "cart" (R).

    .venv/bin/python benchmarks/synthpop_cart.py [--seeds 20] [--minbucket 5]
        [--skip-anchor] [--skip-pmse] [--speed 100000] [--big 1000000]

synthpop runs through ``benchmarks/peers/synthpop_cart.R`` (and ``synthpop_utility.R``)
with ``R_LIBS`` = --rlib (default $R_LIBS, else ~/Rlib; ``sh benchmarks/peers/setup.sh
synthpop`` installs it there). It is never an sdcdist dependency.

Anchor (the scenario of examples/synthetic_reid.yaml): Census (1080 x 13, sdcdist's copy),
the nine quasi-identifiers synthesised in the file's order, the four confidential columns
(AGI, PTOTVAL, POTHVAL, PEARNVAL) kept as predictors. For each seed, sdcdist's ``cart``
(rng = default_rng(seed)) and synthpop's cart (seed = seed) at the same minbucket; both
releases measured by sdcdist's ``pmse``, ``quality`` and ``DLD`` (record i of a release is
the synthetic version of original record i; key sets: all nine quasi-identifiers, and
[DTMS] Table 2's [TAXINC, WSALVAL]). The distributions over the seeds are compared by
the two-sample Kolmogorov-Smirnov and Mann-Whitney tests; they agree at 1 % when both
p-values are at least 0.01.

pMSE: sdcdist's ``pmse`` and ``pmse_ratio`` beside synthpop's ``utility.gen`` (method
"logit", maxorder 0: main effects, sdcdist's model) on a few releases: three of the
synthpop releases above, and two mixed files (categorical columns as labels, missing
values) built like benchmarks/generators.py's.

One run (synthpop 1.9-2, rpart 4.1.19, R 4.2.2; scikit-learn 1.9.1), minbucket 5, seeds
0..19, ``--diagnose``; mean (sd) over the 20 releases:

=======  =====================  =====================  ======  ======  =========
measure  sdcdist cart           synthpop cart          KS p    MW p    agree 1 %
=======  =====================  =====================  ======  ======  =========
pmse     0.000478 (0.000202)    0.000491 (0.000272)    0.83    0.92    yes
quality  0.99203 (0.00084)      0.99222 (0.00086)      0.83    0.51    yes
DLD (9)  8.21 (0.98)            8.27 (0.69)            0.83    0.48    yes
DLD (2)  15.60 (1.08)           16.21 (1.19)           0.081   0.091   yes
=======  =====================  =====================  ======  ======  =========

Both screen the predictors before each fit (synthpop's ``remove.lindep.syn``, which
sdcdist's ``cart`` follows): on Census PTOTVAL = PEARNVAL + POTHVAL exactly, so neither
splits on PTOTVAL. The diagnosis shows what the screen is worth: synthpop with it off
(``--diagnose``, "synthpop keeping collinear") links back more often, DLD (9) 9.13 (0.93)
against sdcdist's 8.21, KS p 0.004, MW p 0.005, and DLD (2) 17.02 (1.01), KS p 0.004 (pmse
and quality still agree); before sdcdist screened its predictors, its DLD (9) was 9.14
(0.94) and agreed with that variant instead (KS p 0.98).

pMSE against utility.gen (maxorder 0): on the three Census releases (an aliased design:
glm gives one coefficient NA) and the 2000-record mixed file, sdcdist's pmse equals the
converged glm (utility.gen's model refitted to 1e-14) to 2e-16 absolute (3e-13
relative; the others 2e-15 relative); utility.gen's own glm stops at a relative
deviance change of 1e-8, which leaves differences up to 7.4e-11 absolute, 1.5e-7
relative. Two differences by definition: (1) pmse_ratio on an aliased design: synthpop's
k counts the identified coefficients (13 on Census), sdcdist's all parameters (14), so
the ratios differ by the factor 12/13; (2) a numeric column missing in the release only
(the 3000-record file: WAGES, 81 records): utility.gen adds a missing indicator only for
columns with a missing value in the original, so glm drops those records (na.omit) yet
still divides by N; sdcdist gives them their indicator, which separates them (p = 1),
so its pmse = utility.gen's converged value + 81 (1 - c)^2 / N (to 1.5e-15 absolute).

Speed: fit + synthesis of sdcdist's ``cart`` and synthpop's cart (syn() alone, reading
and writing excluded) on the mixed file of benchmarks/generators.py (--speed records x 13
columns: 8 numeric, 5 categorical, missing values), every column synthesised, minbucket 5,
in one run with the load average; then sdcdist's ``cart`` alone at --big records.

One run on the shared 2-core machine (``--speed 100000 --big 1000000``; wall / CPU
seconds, CPU of all threads; load average 11-14 during the 100,000 runs):

=====================================  ===================  =================
run                                    wall                 CPU
=====================================  ===================  =================
sdcdist cart, 100,000 x 13             32.7 (load 11.1)     11.9
synthpop cart, 100,000 x 13            1026 (load 13.7)     297
sdcdist cart, 100,000 x 13, again      26.5 (load 12.2)     10.7
ratio synthpop / sdcdist               38.8x                27.7x
sdcdist cart, 1,000,000 x 13           375 (load 12.2-7.7)  169
sdcdist cart, 1,000,000 x 13 (rerun)   238 (load 2.6-4.8)   160
sdcdist cart, 1,000,000 x 13 (screen)  94.9 (load 1.8)      182
=====================================  ===================  =================

The last row is a later run (``--skip-anchor --skip-pmse --big 1000000``) with the
predictor screen of synthpop's ``remove.lindep.syn`` in place, on a quieter machine.

synthpop's rpart runs its default 10-fold cross-validation for every column (11 trees
a column; syn() does not turn it off), and draws the donors leaf by leaf in an R loop.
sdcdist fits its trees in threads (one per core): at 200,000 records, same run, load
about 4.5, 20.6 and 27.9 s wall with two threads against 31.1 s with one (the same bits).
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

import numpy as np
import pandas as pd

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(HERE))

QIS = ["AFNLWGT", "EMCONTRB", "FEDTAX", "STATETAX", "TAXINC", "INTVAL", "FICA", "WSALVAL",
       "ERNVAL"]
KEYSETS = [QIS, ["TAXINC", "WSALVAL"]]
MEASURES = ["pmse", "quality", "DLD", "DLD_2"]
CART_R = HERE / "peers" / "synthpop_cart.R"
UTIL_R = HERE / "peers" / "synthpop_utility.R"


def write_csv(X: np.ndarray, columns: list[str], categorical: list[int], path: Path) -> None:
    """Numeric columns exactly (repr), categorical codes as labels "c<code>", missing empty."""
    df = pd.DataFrame({c: X[:, j] for j, c in enumerate(columns)})
    for j in categorical:
        c = columns[j]
        df[c] = [None if np.isnan(v) else f"c{v:g}" for v in X[:, j]]
    df.to_csv(path, index=False, float_format="%.17g", na_rep="")


def read_csv(path: Path, columns: list[str], categorical: list[int]) -> np.ndarray:
    df = pd.read_csv(path, keep_default_na=True, na_values=[""])
    assert list(df.columns) == list(columns), (list(df.columns), columns)
    out = np.empty((len(df), len(columns)))
    for j, c in enumerate(columns):
        if j in categorical:
            out[:, j] = [np.nan if pd.isna(v) else float(str(v)[1:]) for v in df[c]]
        else:
            out[:, j] = df[c].to_numpy(dtype=np.float64)
    return out


def r_env(rlib: str) -> dict[str, str]:
    return dict(os.environ, R_LIBS=rlib)


def run_json(cmd: list[str], rlib: str, timeout: float) -> dict:
    p = subprocess.run(cmd, capture_output=True, text=True, env=r_env(rlib), timeout=timeout)
    if p.returncode != 0:
        raise RuntimeError(f"{' '.join(cmd[:2])} failed:\n{p.stderr[-3000:]}")
    line = [ln for ln in p.stdout.splitlines() if ln.startswith("{")][-1]
    return json.loads(line)


def synthpop_cart(inp: Path, out: Path, minbucket: int, seed: int, synth: list[str] | None,
                  rlib: str, timeout: float = 3600, keep_collinear: bool = False) -> dict:
    cmd = ["Rscript", str(CART_R), "--in", str(inp), "--out", str(out), "--minbucket",
           str(minbucket), "--seed", str(seed)]
    if synth:
        cmd += ["--synth", ",".join(synth)]
    if keep_collinear:
        cmd += ["--keep-collinear", "1"]
    return run_json(cmd, rlib, timeout)


def synthpop_pmse(orig: Path, syn: Path, rlib: str) -> dict:
    return run_json(["Rscript", str(UTIL_R), "--orig", str(orig), "--syn", str(syn),
                     "--maxorder", "0"], rlib, 600)


def sdcdist_measures(X: np.ndarray, Y: np.ndarray, columns: list[str]) -> dict[str, float]:
    from sdcdist.metrics import measure
    res = measure(X, Y, ["pmse", "quality", "DLD"], columns=columns, keysets=KEYSETS)
    dld = res["DLD"].per_keyset
    return {"pmse": res["pmse"].value, "quality": res["quality"].value,
            "DLD": float(dld[0]), "DLD_2": float(dld[1])}


def census() -> tuple[np.ndarray, list[str]]:
    from sdcdist.data.refdata import reference_file
    df = pd.read_csv(reference_file("census"))
    return df.to_numpy(dtype=np.float64), list(df.columns)


def sdcdist_cart(X: np.ndarray, cols: list[str], minbucket: int, seed: int) -> np.ndarray:
    """sdcdist's cart on the anchor scenario."""
    from sdcdist.masking import REGISTRY
    return REGISTRY["cart"](X, minbucket, rng=np.random.default_rng(seed), columns=cols,
                            synth_columns=QIS)


def compare(rows: dict[str, dict[str, list[float]]], a_name: str, b_name: str) -> None:
    from scipy import stats
    print(f"\n{a_name} against {b_name}\nmeasure   {a_name + ' mean (sd)':28s} "
          f"{b_name + ' mean (sd)':28s} KS p     MW p     agree at 1 %")
    for m in MEASURES:
        a, b = np.array(rows[a_name][m]), np.array(rows[b_name][m])
        ks = stats.ks_2samp(a, b).pvalue
        mw = stats.mannwhitneyu(a, b, alternative="two-sided").pvalue
        print(f"{m:8s}  {f'{a.mean():.6g} ({a.std(ddof=1):.3g})':28s} "
              f"{f'{b.mean():.6g} ({b.std(ddof=1):.3g})':28s} {ks:.4f}   {mw:.4f}   "
              f"{'yes' if min(ks, mw) >= 0.01 else 'NO'}", flush=True)


def anchor(args: argparse.Namespace, tmp: Path) -> dict[str, list[float]]:
    X, cols = census()
    src = tmp / "census.csv"
    write_csv(X, cols, [], src)
    kept = [j for j, c in enumerate(cols) if c not in QIS]
    tools = ["sdcdist", "synthpop"]
    if args.diagnose:
        tools += ["synthpop keeping collinear"]
    rows: dict[str, dict[str, list[float]]] = {t: {m: [] for m in MEASURES} for t in tools}
    releases = []
    print(f"Census {X.shape[0]} x {X.shape[1]}: nine quasi-identifiers synthesised, "
          f"{', '.join(cols[j] for j in kept)} kept; minbucket {args.minbucket}; "
          f"{args.seeds} seeds", flush=True)
    for seed in range(args.seeds):
        made = {"sdcdist": sdcdist_cart(X, cols, args.minbucket, seed)}
        out = tmp / f"synthpop_{seed}.csv"
        synthpop_cart(src, out, args.minbucket, seed, QIS, args.rlib)
        made["synthpop"] = read_csv(out, cols, [])
        releases.append(out)
        if args.diagnose:
            out2 = tmp / f"synthpop_keep_{seed}.csv"
            synthpop_cart(src, out2, args.minbucket, seed, QIS, args.rlib, keep_collinear=True)
            made["synthpop keeping collinear"] = read_csv(out2, cols, [])
        for tool, R in made.items():
            assert np.array_equal(R[:, kept], X[:, kept]), f"{tool} changed a kept column"
            for m, v in sdcdist_measures(X, R, cols).items():
                rows[tool][m].append(v)
        print(f"  seed {seed:2d}: " + "  ".join(
            f"{m} " + "/".join(f"{rows[t][m][-1]:.5g}" for t in tools) for m in MEASURES),
            flush=True)
    compare(rows, "sdcdist", "synthpop")
    if args.diagnose:
        compare(rows, "sdcdist", "synthpop keeping collinear")
    return {"releases": releases[:3], "X": X, "cols": cols, "src": src}


def pmse_check(args: argparse.Namespace, tmp: Path, census_releases: list[Path]) -> None:
    from generators import CATEGORICAL, COLUMNS, mixed_file

    from sdcdist.metrics import measure
    cases = []
    X, cols = census()
    src = tmp / "census_o.csv"
    write_csv(X, cols, [], src)
    if not census_releases:
        for seed in range(3):
            out = tmp / f"synthpop_{seed}.csv"
            synthpop_cart(src, out, args.minbucket, seed, QIS, args.rlib)
            census_releases.append(out)
    for i, p in enumerate(census_releases):
        cases.append((f"Census, synthpop release {i}", src, p, X, read_csv(p, cols, []),
                      cols, []))
    for n, seed in ((3000, 11), (2000, 12)):
        A = mixed_file(n, seed=seed)
        rng = np.random.default_rng(seed + 100)
        B = mixed_file(n, seed=seed + 50)
        if n == 3000:                                  # missing values only in the release:
            B[rng.random(n) < 0.03, 0] = np.nan        # their indicator separates them
        pa, pb = tmp / f"mixed_{n}_o.csv", tmp / f"mixed_{n}_s.csv"
        write_csv(A, COLUMNS, CATEGORICAL, pa)
        write_csv(B, COLUMNS, CATEGORICAL, pb)
        note = ", WAGES missing in the release only" if n == 3000 else ""
        cases.append((f"mixed {n} x 13 (5 categorical, missing values{note})", pa, pb, A, B,
                      COLUMNS, CATEGORICAL))
    print("\npMSE: sdcdist's pmse / pmse_ratio against synthpop's utility.gen "
          "(method 'logit', maxorder 0)")
    for name, pa, pb, A, B, cols_, cat in cases:
        theirs = synthpop_pmse(pa, pb, args.rlib)
        res = measure(A, B, ["pmse", "pmse_ratio"], columns=cols_,
                      categorical=[cols_[j] for j in cat])
        ours, ratio = res["pmse"].value, res["pmse_ratio"].value
        tight = theirs["pMSE_tight"]
        print(f"  {name}:\n    sdcdist pmse {ours:.17g}\n    utility.gen  {theirs['pMSE']:.17g}"
              f"  (diff {ours - theirs['pMSE']:.3g}, relative "
              f"{(ours - theirs['pMSE']) / theirs['pMSE']:.2g})\n    its glm to 1e-14 "
              f"{tight:.17g}  (diff {ours - tight:.3g}, relative {(ours - tight) / tight:.2g})"
              f"\n    pmse_ratio {ratio:.12g}, S_pMSE {theirs['S_pMSE']:.12g}; parameters "
              f"{res['pmse'].info['parameters']} (sdcdist) / {theirs['parameters']} identified "
              f"(glm); records fitted by glm {theirs['fitted_records']} of "
              f"{theirs['records']}; separated in sdcdist "
              f"{res['pmse'].info.get('separated_records')}", flush=True)


def speed(args: argparse.Namespace, tmp: Path) -> None:
    from generators import CATEGORICAL, COLUMNS, mixed_file

    from sdcdist.masking import REGISTRY

    def ours(X: np.ndarray) -> tuple[float, float]:
        t, c = time.perf_counter(), time.process_time()
        REGISTRY["cart"](X, args.minbucket, rng=np.random.default_rng(0),
                         categorical=CATEGORICAL, columns=COLUMNS)
        return time.perf_counter() - t, time.process_time() - c

    for n in args.speed:
        X = mixed_file(n)
        p = tmp / f"speed_{n}.csv"
        write_csv(X, COLUMNS, CATEGORICAL, p)
        print(f"\nspeed: {n:,} x 13 (8 numeric, 5 categorical, missing values), every column "
              f"synthesised, minbucket {args.minbucket}; load average "
              f"{' '.join(f'{v:.1f}' for v in os.getloadavg())} on {os.cpu_count()} cores",
              flush=True)
        w1, c1 = ours(X)
        print(f"  sdcdist cart   {w1:8.2f} s wall {c1:8.2f} s CPU  (load "
              f"{os.getloadavg()[0]:.1f})", flush=True)
        r = synthpop_cart(p, tmp / f"speed_{n}_out.csv", args.minbucket, 0, None, args.rlib)
        print(f"  synthpop cart  {r['seconds']:8.2f} s wall {r['cpu']:8.2f} s CPU  (load "
              f"{os.getloadavg()[0]:.1f})", flush=True)
        w2, c2 = ours(X)
        print(f"  sdcdist cart   {w2:8.2f} s wall {c2:8.2f} s CPU  (again; load "
              f"{os.getloadavg()[0]:.1f})", flush=True)
        w, c = min(w1, w2), min(c1, c2)
        print(f"  ratio synthpop / sdcdist: {r['seconds'] / w:.1f}x wall, {r['cpu'] / c:.1f}x CPU",
              flush=True)
    for n in args.big:
        X = mixed_file(n)
        print(f"\nsdcdist cart at {n:,} x 13; load average "
              f"{' '.join(f'{v:.1f}' for v in os.getloadavg())}", flush=True)
        w, c = ours(X)
        print(f"  sdcdist cart   {w:8.2f} s wall {c:8.2f} s CPU  (load "
              f"{os.getloadavg()[0]:.1f})", flush=True)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--seeds", type=int, default=20)
    ap.add_argument("--minbucket", type=int, default=5)
    ap.add_argument("--rlib", default=os.environ.get("SYNTHPOP_LIB", os.environ.get(
        "R_LIBS", str(Path.home() / "Rlib"))))
    ap.add_argument("--skip-anchor", action="store_true")
    ap.add_argument("--skip-pmse", action="store_true")
    ap.add_argument("--diagnose", action="store_true",
                    help="also synthpop keeping collinear predictors (its remove.lindep.syn "
                         "off; see synthpop_cart.R)")
    ap.add_argument("--speed", type=int, nargs="*", default=[])
    ap.add_argument("--big", type=int, nargs="*", default=[])
    args = ap.parse_args()
    with tempfile.TemporaryDirectory() as d:
        tmp = Path(d)
        releases: list[Path] = []
        if not args.skip_anchor:
            releases = anchor(args, tmp)["releases"]
        if not args.skip_pmse:
            pmse_check(args, tmp, releases)
        if args.speed or args.big:
            speed(args, tmp)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
