"""Generators cart, copula, privbayes against synthpop, SDV, DataSynthesizer; at 1M records.

``cart``, ``copula`` and ``privbayes`` against the tools statistical offices use for their
models, and at 1,000,000 records; ratios from one run.

    .venv/bin/python benchmarks/synthetic.py [--sizes 100000,1000000]
        [--only copula,privbayes,cart,large] [--timeout 600] [--small-rows 10000]
        [--small privbayes,cart]
        [--dld-rows 20000] [--peers benchmarks/.venv-peers-sdv/bin/python]
        [--synthpop-script benchmarks/peers/synthpop_cart.R] [--r-libs ~/Rlib]

What is measured
----------------
The file: ``benchmarks/generators.py``'s mixed file (sdcdist's synthetic income file, 13
columns: 8 numeric, 5 categorical, 5 % missing values in INTINC and HOURSBAND), seed 0.

1. Speed at the first size (100,000 x 13 by default). Each tool runs in a process of its
   own on the same file; the time is the tool's fit + sample alone (reading the input
   file, starting the interpreter and importing the tool are outside it, except that
   DataSynthesizer reads its CSV inside its describer), wall and CPU seconds (CPU of the
   process and of the children it waits for: DataSynthesizer fits its network with a
   process pool), and the process's peak resident memory (GNU time's %M: the whole
   process, with its imports and its input; the largest of it and its pool's workers).
   The pairs, each generator at its defaults:

   - ``copula`` (lambda 0) against SDV's GaussianCopulaSynthesizer at its defaults
     (categorical columns declared categorical, the others numerical);
   - ``privbayes`` (epsilon 1, k = 2, 20 bins) against DataSynthesizer's correlated
     attribute mode at the same epsilon, k = 2 and histogram size 20 (categorical
     columns declared categorical; DataSynthesizer 0.1.13 reads its conditionals back
     with ``eval`` of printed numpy integers, which numpy 2 prints as ``np.int64(3)``:
     its module is given the name ``np``, nothing else is changed);
   - ``cart`` (minbucket 5) against synthpop's ``syn(method = "cart")`` through
     ``benchmarks/peers/synthpop_cart.R`` (needs R and synthpop in ``--r-libs``), the
     seconds of its ``syn()`` call; "synthpop not installed" when R or synthpop is
     missing.

   Each anchor gets ``--timeout`` seconds (then "did not finish in T s", and the ratio is
   at least T / sdcdist's seconds). DataSynthesizer and synthpop are slow: the pairs named
   in ``--small`` (privbayes and cart) are measured again at ``--small-rows`` records.
   Ratio = anchor seconds / sdcdist seconds (wall, and CPU beside it). The goal: every
   generator at least 10x faster than its anchor.

2. The same yardstick on every release (the models differ, so they are compared, not
   required to agree): sdcdist's ``quality`` (SDMetrics 0.32's QualityReport score,
   equal to it to 1e-12, see benchmarks/synthetic_utility.py), ``pmse`` (synthpop's
   ``utility.gen``, main-effects logit), and DLD with the Gower distance (the default on
   categorical keys) on a fixed key set of 4 categorical and 3 numeric columns
   (AGEBAND, HOURSBAND, CHARITY, STATETAX10 (AGEBAND, HOURSBAND, STATETAX10 ordinal),
   WAGES, INTINC, TAXINC) over the first ``--dld-rows`` records of the original and of
   the release. Every release here is fully synthetic: no release record derives from
   the original record of its row, so DLD is the rate of chance links (about
   100/dld_rows %) unless a tool copies records in place; it is shown to check that.

3. At the second size (1,000,000 records; ``large`` in ``--only``, or one of
   ``large-copula``, ``large-cart``, ``large-quality``): ``cart`` and
   ``copula`` fit + sample (goals: under 5 minutes and 30 s on 2 cores), and the five
   quality measures (ks_complement, tv_complement, corr_similarity,
   contingency_similarity, quality) of copula's release against the original, in one
   process, as ``sdcdist measure`` runs them when the work fits (no cluster; goal under
   30 s).

The machine is shared: the load average is printed with each table; compare ratios
within one run. SDV, DataSynthesizer and synthpop live in their own environments
(benchmarks/peers/setup.sh), never as sdcdist dependencies.

Figures (29 Nov 2026, the shared 2-core machine; SDV 2.0.0, DataSynthesizer 0.1.13,
synthpop 1.9.2), fit + sample, wall / CPU seconds, ratios within each run:

==========  ==============  ===============================  =================  ====
generator   sdcdist         anchor                           ratio wall (CPU)   load
==========  ==============  ===============================  =================  ====
100,000 x 13
copula      1.55 / 0.49     SDV Gaussian copula 83.5 / 23.7  53.9 (47.9)        11-13
copula      0.65 / 0.64     SDV Gaussian copula 28.0 / 27.9  43.3 (43.3)        4-5
privbayes   1.75 / 0.59     DataSynthesizer: not in 600 s    > 343              13
                            (5 of 12 attributes placed)
privbayes   0.59 / 0.58     DataSynthesizer 600.3 / 956.3    1012 (1648)        1.3-5.5
cart        26.5 / 8.75     synthpop: not in 600 s           > 23               13
cart        10.1 / 9.99     synthpop 348.6 / 346.2           34.4 (34.7)        1.5-3
10,000 x 13
privbayes   0.21 / 0.07     DataSynthesizer 242.9 / 77.9     1179 (1118)        14
privbayes   0.07 / 0.07     DataSynthesizer 54.0 / 98.9      802 (1469)         1-1.5
20,000 x 13
cart        5.30 / 2.15     synthpop 75.5 / 30.5             14.2 (14.2)        8-9
==========  ==============  ===============================  =================  ====

The yardstick (sdcdist's measures on each release; DLD over 20,000 records, chance
0.005 %): at 100,000, copula quality 0.9555, pMSE 0.000026; SDV 0.8364, 0.0902 (its
beta marginals lose the incomes' mass at zero); privbayes 0.6971, 0.2480; cart 0.9944,
0.000024; synthpop 0.9945, 0.000023; DataSynthesizer 0.7232, 0.2477. At 10,000:
privbayes 0.6250, 0.2420; DataSynthesizer 0.7266, 0.2393 (privbayes and DataSynthesizer
near pMSE's worst, 0.25: at epsilon 1 equal-width bins of skewed incomes come back
spread over their first bin). At 20,000: cart 0.9877,
0.000178; synthpop 0.9879, 0.000113. DLD at the level of chance for every release (0 to
2 links of 20,000).

1,000,000 x 13: copula 15.7 / 6.0 s (load 10.5) and 9.4 / 9.2 s (load 3); cart
464.6 / 151.9 s (load 12.5, over the 5 minutes) and 248.9 / 158.8 s (load 6); the five
quality measures in process 12.9 / 5.2 s (load 11) and 6.6 / 6.5 s (load 6).
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path

os.environ.setdefault("NPY_DISABLE_CPU_FEATURES", "X86_V4 AVX512_ICL AVX512_SPR")
os.environ.setdefault("OPENBLAS_CORETYPE", "Haswell")   # sdcdist's pinned paths, before numpy

import numpy as np  # noqa: E402

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent

COLUMNS = ["WAGES", "BUSINC", "INTINC", "DIVINC", "PENSION", "TAXINC", "FEDTAX", "FICA",
           "AGEBAND", "HOURSBAND", "CHARITY", "PROPTAX5", "STATETAX10"]
CATEGORICAL = list(range(8, 13))
CAT_NAMES = [COLUMNS[j] for j in CATEGORICAL]
PARAMS = {"cart": 5, "copula": 0.0, "privbayes": 1.0}
EPSILON, DEGREE, BINS = 1.0, 2, 20
KEYS = ["AGEBAND", "HOURSBAND", "CHARITY", "STATETAX10", "WAGES", "INTINC", "TAXINC"]
ORDINAL = ["AGEBAND", "HOURSBAND", "STATETAX10"]
QUALITY = ["ks_complement", "tv_complement", "corr_similarity", "contingency_similarity",
           "quality"]
SDC_ENV = {"NPY_DISABLE_CPU_FEATURES": "X86_V4 AVX512_ICL AVX512_SPR",
           "OPENBLAS_CORETYPE": "Haswell"}


# -- children: one tool, one process ---------------------------------------------------------

def _cpu() -> float:
    s, c = resource.getrusage(resource.RUSAGE_SELF), resource.getrusage(resource.RUSAGE_CHILDREN)
    return s.ru_utime + s.ru_stime + c.ru_utime + c.ru_stime


def _as_frame(X: np.ndarray):
    """Categorical codes as labels "c<code>" (missing: NaN), numbers as they are."""
    import pandas as pd
    df = pd.DataFrame(X, columns=COLUMNS)
    for c in CAT_NAMES:
        df[c] = df[c].map(lambda v: np.nan if v != v else "c%d" % int(v)).astype(object)
    return df


def _from_frame(df) -> np.ndarray:
    """Back to float codes: "c<code>" -> code, anything missing -> NaN."""
    import pandas as pd
    out = np.empty((len(df), len(COLUMNS)))
    for j, c in enumerate(COLUMNS):
        col = df[c]
        if c in CAT_NAMES:
            s = col.astype(object).map(lambda v: np.nan if (v is None or v != v or v == "")
                                       else float(str(v).lstrip("c")))
            out[:, j] = s.to_numpy(np.float64)
        else:
            out[:, j] = pd.to_numeric(col, errors="coerce").to_numpy(np.float64)
    return out


def child_sdcdist(method: str, inp: str, out: str, seed: int) -> dict:
    sys.path.insert(0, str(ROOT))
    from sdcdist.masking import REGISTRY
    X = np.load(inp)
    fn = REGISTRY[method]
    import scipy.special  # noqa: F401  (imported before the clock, as the peers' imports)
    import sklearn.tree  # noqa: F401
    t, c = time.perf_counter(), _cpu()
    Y = fn(X, PARAMS[method], rng=np.random.default_rng(seed), categorical=CATEGORICAL,
           columns=COLUMNS)
    res = {"seconds": time.perf_counter() - t, "cpu": _cpu() - c}
    np.save(out, Y)
    return res


def child_sdv(inp: str, out: str, seed: int) -> dict:
    import warnings
    warnings.simplefilter("ignore")
    import sdv
    from sdv.metadata import Metadata
    from sdv.single_table import GaussianCopulaSynthesizer
    df = _as_frame(np.load(inp))
    meta = Metadata.load_from_dict({"tables": {"table": {"columns": {
        c: {"sdtype": "categorical" if c in CAT_NAMES else "numerical"} for c in COLUMNS}}}})
    np.random.seed(seed)
    t, c = time.perf_counter(), _cpu()
    syn = GaussianCopulaSynthesizer(meta)               # its defaults
    syn.fit({"table": df})                              # SDV 2: {table name: frame}
    rel = syn.sample(num_rows=len(df))
    if isinstance(rel, dict):
        rel = rel["table"]
    res = {"seconds": time.perf_counter() - t, "cpu": _cpu() - c,
           "tool": f"SDV {sdv.__version__} GaussianCopulaSynthesizer"}
    np.save(out, _from_frame(rel))
    return res


def child_datasynthesizer(inp: str, out: str, seed: int) -> dict:
    import warnings
    warnings.simplefilter("ignore")
    from importlib.metadata import version

    import pandas as pd
    from DataSynthesizer.DataDescriber import DataDescriber
    import DataSynthesizer.DataGenerator as _dg
    from DataSynthesizer.DataGenerator import DataGenerator
    # DataSynthesizer 0.1.13 keys its conditionals by str(list of parent codes) and reads
    # them back with eval(); under numpy 2 the codes print as "np.int64(3)": give that
    # eval the name np (nothing else changes)
    _dg.np = np
    X = np.load(inp)
    tmp = Path(out).parent
    csv = tmp / (Path(out).stem + "_in.csv")
    _as_frame(X).to_csv(csv, index=False)
    desc = tmp / (Path(out).stem + "_description.json")
    syn_csv = tmp / (Path(out).stem + "_out.csv")
    t, c = time.perf_counter(), _cpu()
    d = DataDescriber(histogram_bins=BINS, category_threshold=20)
    d.describe_dataset_in_correlated_attribute_mode(
        dataset_file=str(csv), epsilon=EPSILON, k=DEGREE,
        attribute_to_is_categorical={c: c in CAT_NAMES for c in COLUMNS},
        attribute_to_is_candidate_key={c: False for c in COLUMNS}, seed=seed)
    d.save_dataset_description_to_file(str(desc))
    g = DataGenerator()
    g.generate_dataset_in_correlated_attribute_mode(X.shape[0], str(desc), seed=seed)
    g.save_synthetic_data(str(syn_csv))
    res = {"seconds": time.perf_counter() - t, "cpu": _cpu() - c,
           "tool": f"DataSynthesizer {version('DataSynthesizer')} (correlated attribute mode)"}
    np.save(out, _from_frame(pd.read_csv(syn_csv)))
    return res


def child_quality(orig: str, rel: str) -> dict:
    sys.path.insert(0, str(ROOT))
    from sdcdist.metrics import measure
    X, Y = np.load(orig), np.load(rel)
    import scipy.special  # noqa: F401
    t, c = time.perf_counter(), _cpu()
    r = measure(X, Y, QUALITY, columns=COLUMNS, categorical=CAT_NAMES)
    return {"seconds": time.perf_counter() - t, "cpu": _cpu() - c,
            "values": {k: float(v.value) for k, v in r.items()}}


def child_main(argv: list[str]) -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--child", required=True)
    ap.add_argument("--in", dest="inp")
    ap.add_argument("--out")
    ap.add_argument("--seed", type=int, default=0)
    a = ap.parse_args(argv)
    if a.child in PARAMS:
        res = child_sdcdist(a.child, a.inp, a.out, a.seed)
    elif a.child == "sdv":
        res = child_sdv(a.inp, a.out, a.seed)
    elif a.child == "datasynthesizer":
        res = child_datasynthesizer(a.inp, a.out, a.seed)
    elif a.child == "quality":
        res = child_quality(a.inp, a.out)
    else:
        raise SystemExit(f"unknown child {a.child}")
    print(json.dumps(res), flush=True)


# -- the parent: data, processes, measures, tables ------------------------------------------

def load() -> str:
    one, five, _ = os.getloadavg()
    return f"load average {one:.1f} (5 min {five:.1f}) on {os.cpu_count()} cores"


def run_process(cmd: list[str], timeout: float, env: dict | None = None) -> dict:
    """Run one tool's process (a session of its own); its JSON line with its peak memory
    and its total wall time, or {"timeout": T} / {"error": ...}.

    The peak memory is GNU time's %M (the tool's largest resident set, or one of the
    children it waited for, such as DataSynthesizer's pool) where /usr/bin/time exists:
    a process forked from this one and measured by this one's wait4 would count this
    process's own resident set (the image it had before exec) as well. Without it, the
    column is wait4's figure, which has this process's size as a floor."""
    gnu_time = Path("/usr/bin/time")
    if gnu_time.exists():
        cmd = [str(gnu_time), "-f", "SDCBENCH_MAXRSS_KB %M", *cmd]
    with tempfile.TemporaryFile("w+") as fo, tempfile.TemporaryFile("w+") as fe:
        t = time.perf_counter()
        p = subprocess.Popen(cmd, stdout=fo, stderr=fe, text=True,
                             env={**os.environ, **(env or {})}, start_new_session=True)
        while True:
            pid, status, ru = os.wait4(p.pid, os.WNOHANG)
            if pid:
                break
            if time.perf_counter() - t > timeout:
                os.killpg(p.pid, signal.SIGKILL)      # the tool and its pool: its own group
                os.wait4(p.pid, 0)
                p.returncode = -9
                fo.seek(0)
                # DataSynthesizer prints "Adding attribute X" as it builds its network
                placed = fo.read().count("Adding attribute")
                return {"timeout": timeout, "placed": placed}
            time.sleep(0.05)
        wall = time.perf_counter() - t
        p.returncode = os.waitstatus_to_exitcode(status)
        fo.seek(0)
        fe.seek(0)
        out_text, err_text = fo.read(), fe.read()
    lines = [ln for ln in out_text.splitlines() if ln.strip().startswith("{")]
    if p.returncode != 0 or not lines:
        tail = [ln for ln in (err_text or out_text).strip().splitlines()
                if not ln.startswith("SDCBENCH_MAXRSS_KB") and
                not ln.startswith("Command exited with")][-3:]
        return {"error": f"exit {p.returncode}: " + " | ".join(tail)[:300]}
    res = json.loads(lines[-1])
    res["process_wall"] = wall
    res["rss_mb"] = ru.ru_maxrss / 1024.0
    for ln in err_text.splitlines():
        if ln.startswith("SDCBENCH_MAXRSS_KB "):
            res["rss_mb"] = int(ln.split()[1]) / 1024.0
    if "cpu" not in res:                 # a tool that reports its seconds alone (R)
        res["cpu"] = ru.ru_utime + ru.ru_stime
        res["cpu_whole_process"] = True
    return res


def run_tool(which: str, X_path: Path, out: Path, a, seed: int = 0) -> dict:
    me = str(Path(__file__).resolve())
    if which in PARAMS:
        cmd = [sys.executable, me, "--child", which, "--in", str(X_path), "--out", str(out),
               "--seed", str(seed)]
        env = {**SDC_ENV, "PYTHONPATH": str(ROOT)}
    elif which in ("sdv", "datasynthesizer"):
        cmd = [a.peers, me, "--child", which, "--in", str(X_path), "--out", str(out),
               "--seed", str(seed)]
        env = {"PYTHONUNBUFFERED": "1"}       # its progress lines survive a timeout
    elif which == "synthpop":
        csv_in = out.with_suffix(".in.csv")
        csv_out = out.with_suffix(".out.csv")
        _as_frame(np.load(X_path)).to_csv(csv_in, index=False, na_rep="NA")
        cmd = ["Rscript", str(a.synthpop_script), "--in", str(csv_in), "--out", str(csv_out),
               "--minbucket", str(PARAMS["cart"]), "--seed", str(seed)]
        env = {"R_LIBS": a.r_libs}
    else:
        raise ValueError(which)
    res = run_process(cmd, a.own_timeout if which in PARAMS else a.timeout, env)
    if which == "synthpop" and "seconds" in res:
        import pandas as pd
        np.save(out, _from_frame(pd.read_csv(csv_out, keep_default_na=True,
                                             na_values=["NA", ""])))
    return res


def synthpop_status(a) -> str | None:
    """None when synthpop can run, else why not."""
    if not Path(a.synthpop_script).exists():
        return f"synthpop not installed ({Path(a.synthpop_script).name} absent)"
    if shutil.which("Rscript") is None:
        return "synthpop not installed (no Rscript)"
    r = subprocess.run(["Rscript", "-e", "suppressMessages(library(synthpop)); "
                        "cat(as.character(packageVersion('synthpop')))"],
                       capture_output=True, text=True, env={**os.environ, "R_LIBS": a.r_libs})
    if r.returncode != 0:
        return "synthpop not installed"
    a.synthpop_version = r.stdout.strip().splitlines()[-1] if r.stdout.strip() else "?"
    return None


def yardstick(X: np.ndarray, Y: np.ndarray, dld_rows: int) -> dict:
    """quality, pmse (whole files) and Gower DLD on the key set (first dld_rows records)."""
    from sdcdist.metrics import measure
    r = measure(X, Y, ["quality", "pmse"], columns=COLUMNS, categorical=CAT_NAMES)
    k = min(dld_rows, X.shape[0], Y.shape[0])
    d = measure(X[:k], Y[:k], ["DLD"], columns=COLUMNS, categorical=CAT_NAMES,
                keysets=[KEYS], options={"ordinal": ORDINAL})
    return {"quality": float(r["quality"].value), "pmse": float(r["pmse"].value),
            "DLD": float(d["DLD"].value), "dld_rows": k}


def fmt_s(res: dict) -> str:
    if "timeout" in res:
        note = f" ({res['placed']} of 12 placed)" if res.get("placed") else ""
        return f"did not finish in {res['timeout']:.0f} s{note}"
    if "error" in res:
        return "failed: " + res["error"][:60]
    if "skipped" in res:
        return res["skipped"]
    return f"{res['seconds']:9.2f} {res['cpu']:9.2f} {res['rss_mb']:8.0f}"


def ratio(anchor: dict, ours: dict, key: str) -> str:
    if "seconds" not in anchor or "seconds" not in ours or ours[key] <= 0:
        if "timeout" in anchor and "seconds" in ours and key == "seconds":
            return f"> {anchor['timeout'] / ours[key]:.0f}"
        return "-"
    return f"{anchor[key] / ours[key]:.1f}"


def speed_section(n: int, a, tmp: Path, measures: list) -> None:
    sys.path.insert(0, str(HERE))
    from generators import mixed_file
    X = mixed_file(n)
    xp = tmp / f"X_{n}.npy"
    np.save(xp, X)
    pairs = [("copula", "sdv", "SDV GaussianCopulaSynthesizer (defaults)"),
             ("privbayes", "datasynthesizer",
              f"DataSynthesizer correlated mode (eps {EPSILON:g}, k {DEGREE})"),
             ("cart", "synthpop", "synthpop syn(method = 'cart')")]
    pairs = [p for p in pairs if p[0] in a.only]
    print(f"\n== Speed: {n:,} records x 13 columns (8 numeric, 5 categorical), fit + sample, "
          f"one process each ==\n{load()} at the start", flush=True)
    head = (f"{'generator':10s} {'wall s':>9s} {'CPU s':>9s} {'RSS MiB':>8s} | "
            f"{'anchor':44s} {'wall s':>9s} {'CPU s':>9s} {'RSS MiB':>8s} | "
            f"{'ratio wall':>10s} {'ratio CPU':>9s}")
    rows = []
    for ours_name, anchor, label in pairs:
        ours = run_tool(ours_name, xp, tmp / f"{ours_name}_{n}.npy", a)
        if anchor == "synthpop":
            why = synthpop_status(a)
            if why:
                theirs = {"skipped": why}
            else:
                label = f"synthpop {a.synthpop_version} syn(method = 'cart')"
                theirs = run_tool("synthpop", xp, tmp / f"synthpop_{n}.npy", a)
        else:
            theirs = run_tool(anchor, xp, tmp / f"{anchor}_{n}.npy", a)
        if "tool" in theirs:
            label = theirs["tool"] + (" (defaults)" if anchor == "sdv" else "")
        rows.append((ours_name, ours, label, theirs))
        print(f"  {ours_name} / {label}: done ({load()})", flush=True)
        for who, res, path in ((ours_name, ours, tmp / f"{ours_name}_{n}.npy"),
                               (label, theirs, tmp / f"{anchor}_{n}.npy")):
            if "seconds" in res:
                measures.append((n, who, path, xp))
    print(f"\n{head}")
    for ours_name, ours, label, theirs in rows:
        print(f"{ours_name:10s} {fmt_s(ours):>28s} | {label[:44]:44s} {fmt_s(theirs):>28s} | "
              f"{ratio(theirs, ours, 'seconds'):>10s} {ratio(theirs, ours, 'cpu'):>9s}")
    print(f"({load()} at the end; ratio = anchor / sdcdist, goal >= 10)", flush=True)
    small = [(g, anc) for g, anc, _ in pairs if g in a.small and anc != "synthpop"
             or g in a.small and anc == "synthpop" and synthpop_status(a) is None]
    if small and a.small_rows and a.small_rows < n:
        m = a.small_rows
        Xs = mixed_file(m)
        xs = tmp / f"X_{m}.npy"
        np.save(xs, Xs)
        print(f"\nAt {m:,} records (the same file generator, seed 0): {load()}\n{head}",
              flush=True)
        for g, anc in small:
            ours = run_tool(g, xs, tmp / f"{g}_{m}.npy", a)
            theirs = run_tool(anc, xs, tmp / f"{anc}_{m}.npy", a)
            label = theirs.get("tool") or {
                "sdv": "SDV GaussianCopulaSynthesizer (defaults)",
                "datasynthesizer": "DataSynthesizer correlated mode",
                "synthpop": f"synthpop {getattr(a, 'synthpop_version', '')} syn(method = 'cart')"
            }[anc]
            print(f"{g:10s} {fmt_s(ours):>28s} | {label[:44]:44s} {fmt_s(theirs):>28s} | "
                  f"{ratio(theirs, ours, 'seconds'):>10s} {ratio(theirs, ours, 'cpu'):>9s}",
                  flush=True)
            for who, res, path in ((g, ours, tmp / f"{g}_{m}.npy"),
                                   (label, theirs, tmp / f"{anc}_{m}.npy")):
                if "seconds" in res:
                    measures.append((m, who, path, xs))
        print(f"({load()})", flush=True)


def yardstick_section(measures: list, a) -> None:
    if not measures:
        return
    print(f"\n== The same yardstick on every release (sdcdist's measures; DLD: Gower on "
          f"{', '.join(KEYS)}, ordinal {', '.join(ORDINAL)}) ==\n{load()}", flush=True)
    print(f"{'records':>9s} {'release':50s} {'quality':>9s} {'pmse':>10s} "
          f"{'DLD %':>8s} {'DLD rows':>8s}")
    for n, who, path, xp in measures:
        X, Y = np.load(xp), np.load(path)
        t = time.perf_counter()
        f = yardstick(X, Y, a.dld_rows)
        print(f"{n:9,d} {who[:50]:50s} {f['quality']:9.4f} {f['pmse']:10.6f} "
              f"{f['DLD']:8.4f} {f['dld_rows']:8,d}   ({time.perf_counter() - t:.1f} s)",
              flush=True)
    print(f"(pmse: 0 best, 0.25 worst for equal sizes; quality: 1 best; chance DLD = 100/rows %;"
          f" {load()})")


def large_section(n: int, a, tmp: Path) -> None:
    sys.path.insert(0, str(HERE))
    from generators import mixed_file
    X = mixed_file(n)
    xp = tmp / f"X_{n}.npy"
    np.save(xp, X)
    del X
    print(f"\n== {n:,} records x 13 columns: fit + sample, and the quality measures ==\n"
          f"{load()} at the start", flush=True)
    print(f"{'what':62s} {'wall s':>9s} {'CPU s':>9s} {'RSS MiB':>8s}  goal")
    goals = {"copula": 30.0, "cart": 300.0}
    for name in ("copula", "cart"):
        if f"large-{name}" not in a.only and not (name == "copula"
                                                   and "large-quality" in a.only):
            continue
        res = run_tool(name, xp, tmp / f"{name}_{n}.npy", a)
        ok = "" if "seconds" not in res else ("met" if res["seconds"] < goals[name]
                                              else "MISSED")
        print(f"{name + f' (defaults) fit + sample':62s} {fmt_s(res):>28s}  "
              f"< {goals[name]:.0f} s {ok}   ({load()})", flush=True)
    if "large-quality" in a.only:
        rel = tmp / f"copula_{n}.npy"
        if rel.exists():
            res = run_process([sys.executable, str(Path(__file__).resolve()), "--child",
                               "quality", "--in", str(xp), "--out", str(rel)], a.own_timeout,
                              {**SDC_ENV, "PYTHONPATH": str(ROOT)})
            ok = "" if "seconds" not in res else ("met" if res["seconds"] < 30 else "MISSED")
            print(f"{'5 quality measures, original vs copula release, in process':62s} "
                  f"{fmt_s(res):>28s}  < 30 s {ok}   ({load()})", flush=True)
            if "values" in res:
                print("  " + ", ".join(f"{k} {v:.6f}" for k, v in res["values"].items()))


def main() -> int:
    if "--child" in sys.argv:
        child_main(sys.argv[1:])
        return 0
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--sizes", default="100000,1000000",
                    help="two sizes: the comparison with the anchors, then the large run "
                         "(one size: the comparison alone)")
    ap.add_argument("--only", default="copula,privbayes,cart,large",
                    help="comma list of copula, privbayes, cart (the comparisons with the "
                         "anchors at the first size), large (all of the second size) or "
                         "large-copula, large-cart, large-quality (the quality measures of "
                         "copula's release; runs copula too)")
    ap.add_argument("--timeout", type=float, default=600.0,
                    help="seconds an anchor's process may take (then: did not finish)")
    ap.add_argument("--own-timeout", type=float, default=3600.0,
                    help="seconds one of sdcdist's processes may take")
    ap.add_argument("--small-rows", type=int, default=10_000,
                    help="also compare the generators of --small with their anchors at this "
                         "size (0: no)")
    ap.add_argument("--small", default="privbayes,cart",
                    help="comma list of the generators compared at --small-rows too "
                         "(default the ones whose anchors are slowest)")
    ap.add_argument("--dld-rows", type=int, default=20_000)
    ap.add_argument("--peers", default=str(HERE / ".venv-peers-sdv" / "bin" / "python"),
                    help="a Python with sdv and DataSynthesizer (benchmarks/peers/setup.sh)")
    ap.add_argument("--synthpop-script", default=str(HERE / "peers" / "synthpop_cart.R"))
    ap.add_argument("--r-libs", default=os.environ.get("R_LIBS", str(Path.home() / "Rlib")),
                    help="the R library with synthpop (default $R_LIBS, else ~/Rlib)")
    a = ap.parse_args()
    a.only = [s.strip() for s in a.only.split(",") if s.strip()]
    a.small = [s.strip() for s in a.small.split(",") if s.strip()]
    if "large" in a.only:
        a.only += ["large-copula", "large-cart", "large-quality"]
    sizes = [int(s) for s in a.sizes.split(",")]
    sys.path.insert(0, str(ROOT))
    print(f"sdcdist {ROOT}; peers {a.peers}; {load()}")
    with tempfile.TemporaryDirectory(prefix="sdc_synth_bench_") as t:
        tmp = Path(t)
        measures: list = []
        if any(m in a.only for m in PARAMS):
            speed_section(sizes[0], a, tmp, measures)
            yardstick_section(measures, a)
        if len(sizes) > 1 and any(m.startswith("large-") for m in a.only):
            large_section(sizes[1], a, tmp)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
