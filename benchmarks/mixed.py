"""Categorical keys at scale: frequency risk on 10 million records, blocked distance linkage.

Run: ``python benchmarks/mixed.py [--rows 10000000] [--link-rows 1000000] [--workers 2]``
(``--only freq-csv --data-dir DIR`` runs only the frequency risk from CSV and Zarr against
sdcMicro, keeping the generated files in DIR for the next run; ``--freq-sizes 1000000
--repeats 3`` gives medians of 3 alternating runs of sdcMicro and sdcdist at 1,000,000
records, ``--against DIR`` times another checkout's sdcdist in the same run; the timed
commands run this checkout's sdcdist, its bytecode compiled first)

1. Frequency risk (``uniques``, ``kviol2/3/5``, ``IR_mean``, ``IR_max``, ``ER``) on
   ``--rows`` synthetic records with 5 categorical keys (100, 40, 12, 5 and 2 categories,
   skewed) and a positive weight, stored in a Zarr store and read chunk by chunk by the
   workers of a LocalCluster; against a single-process pandas ``groupby`` on the same
   array in memory (the values must agree).
2. Distance linkage on ``--link-rows`` records with one 50-level categorical key and 4
   numeric keys, masked by noise (p = 0.1, numeric) and PRAM (p = 0.9, the category):
   DLD blocked on the category against DLD on the 4 numeric keys alone (unblocked), on the
   same cluster.

The machine is shared: wall times are noisy, compare the ratios within one run.
"""

from __future__ import annotations

import argparse
import shutil
import tempfile

import numpy as np
from linkage import cluster, timed   # benchmarks/linkage.py: the same cluster and timer

FREQ = ["uniques", "kviol2", "kviol3", "kviol5", "IR_mean", "IR_max", "ER"]
LEVELS = (100, 40, 12, 5, 2)


def categorical_file(n: int, seed: int = 0) -> np.ndarray:
    """(n, 6): five skewed categorical keys (codes) and a weight in [1, 500)."""
    rng = np.random.default_rng(seed)
    cols = []
    for L in LEVELS:
        p = 1.0 / np.arange(1, L + 1) ** 0.8           # Zipf-like: rare categories exist
        cols.append(rng.choice(L, n, p=p / p.sum()).astype(np.float64))
    cols.append(rng.uniform(1.0, 500.0, n))
    return np.column_stack(cols)


#: the extra columns of the 13-column file: read by both tools, used by neither
WIDE_EXTRA = 7


def wide_file(n: int, seed: int = 0) -> np.ndarray:
    """(n, 13): :func:`categorical_file`'s keys and weight, then 7 numeric columns
    (3 incomes rounded to cents, 2 whole counts, 2 shares), as a survey file carries."""
    X = categorical_file(n, seed)
    rng = np.random.default_rng(seed + 1)
    extra = [np.round(np.exp(rng.normal(10, 1, n)), 2) for _ in range(3)]
    extra += [rng.poisson(3, n).astype(np.float64) for _ in range(2)]
    extra += [np.round(rng.random(n), 6) for _ in range(2)]
    return np.column_stack([X] + extra)


def pandas_reference(X: np.ndarray) -> dict[str, float]:
    """The same metrics by one pandas groupby, in one process."""
    import pandas as pd
    df = pd.DataFrame(X, columns=[f"k{j}" for j in range(5)] + ["w"])
    keys = [f"k{j}" for j in range(5)]
    g = df.groupby(keys, sort=False)["w"].agg(["size", "sum"])
    f = g["size"].to_numpy(dtype=np.float64)
    F = g["sum"].to_numpy()
    n = float(len(df))
    p = f / F
    q = p / (1 - p)
    r = np.where(F <= f, 1 / f, np.where(f == 1, q * np.log(1 / p),
                                         np.where(f == 2, q - q * q * np.log(1 / p),
                                                  p / (f - (1 - p)))))
    out = {"uniques": 100 * f[f == 1].sum() / n}
    for k in (2, 3, 5):
        out[f"kviol{k}"] = 100 * f[f < k].sum() / n
    out["ER"] = float((f * r).sum())
    out["IR_mean"] = out["ER"] / n
    out["IR_max"] = float(r.max())
    return out


def frequency_part(n: int, client, tmp: str) -> None:
    from sdcdist.data import Microdata, StoredArray, write_microdata
    from sdcdist.metrics import measure
    X, t_gen = timed(lambda: categorical_file(n))
    names = [f"k{j}" for j in range(5)] + ["w"]
    cats = {f"k{j}": [str(i) for i in range(L)] for j, L in enumerate(LEVELS)}
    store = f"{tmp}/freq.zarr"
    _, t_write = timed(lambda: write_microdata(
        Microdata(X, tuple(names), {"key": names[:5], "weight": ["w"]}, None, cats), store,
        chunk_rows=1_000_000))
    print(f"frequency risk: {n:,} records, keys with {LEVELS} categories + weight "
          f"(generated in {t_gen:.1f} s, stored in {t_write:.1f} s)")
    A = StoredArray(store)
    res, t_dist = timed(lambda: measure(A, A, FREQ, columns=names, keysets=[names[:5]],
                                        categorical=names[:5], weight="w", client=client,
                                        options={"chunk_rows": 1_000_000}))
    ref, t_pd = timed(lambda: pandas_reference(X))
    print(f"  sdcdist on the cluster (chunks of 1,000,000 read from Zarr): {t_dist:7.1f} s")
    print(f"  pandas groupby, one process, array in memory:               {t_pd:7.1f} s")
    print(f"  ratio sdcdist / pandas: {t_dist / t_pd:.2f}")
    for k in FREQ:
        agree = np.isclose(res[k].value, ref[k], rtol=1e-9, atol=0)
        print(f"    {k:8s} {res[k].value:14.8g}  pandas {ref[k]:14.8g}  "
              f"{'agree' if agree else 'DIFFER'}")
    del X


def linkage_part(n: int, client) -> None:
    from sdcdist.masking import REGISTRY
    from sdcdist.metrics import measure
    rng = np.random.default_rng(1)
    cat = rng.integers(0, 50, n).astype(np.float64)
    z = rng.standard_normal((n, 4)) @ np.array([[1, .5, .2, 0], [0, 1, .3, .1],
                                                 [0, 0, 1, .4], [0, 0, 0, 1.]])
    num = np.exp(z) * np.array([1000, 50, 10, 1])
    X = np.column_stack([cat, num])
    Y = REGISTRY["noise"](X, 0.1, rng=np.random.default_rng(2), categorical=[0])
    Y = REGISTRY["pram"](Y, 0.9, rng=np.random.default_rng(3), categorical=[0])
    names = ["c", "x1", "x2", "x3", "x4"]
    print(f"distance linkage: {n:,} records, one 50-level categorical key + 4 numeric keys "
          "(noise p = 0.1, PRAM p = 0.9)")
    blocked, t_b = timed(lambda: measure(X, Y, ["DLD"], columns=names, keysets=[names],
                                         categorical=["c"], client=client)["DLD"].value)
    plain, t_u = timed(lambda: measure(X[:, 1:], Y[:, 1:], ["DLD"], columns=names[1:],
                                       keysets=[names[1:]], client=client)["DLD"].value)
    print(f"  blocked DLD (category + 4 numeric keys): {t_b:7.1f} s   DLD = {blocked:.3f} %")
    print(f"  unblocked DLD (4 numeric keys):          {t_u:7.1f} s   DLD = {plain:.3f} %")
    print(f"  ratio blocked / unblocked: {t_b / t_u:.2f}")


# ---------------------------------------------------------------------------
# Frequency risk from CSV and from Zarr, against sdcMicro's measure_risk (R)

R_MEASURE_RISK = r"""
suppressMessages({library(data.table); library(sdcMicro)})
args <- commandArgs(trailingOnly = TRUE)
cpu <- function(a, b) sum((b - a)[c("user.self", "sys.self", "user.child", "sys.child")],
                          na.rm = TRUE)
c0 <- proc.time(); t0 <- Sys.time()
d <- data.table::fread(args[1], showProgress = FALSE)
c1 <- proc.time(); t1 <- Sys.time()
r <- measure_risk(as.data.frame(d), keyVars = c("k0", "k1", "k2", "k3", "k4"), w = "w")
c2 <- proc.time(); t2 <- Sys.time()
cat(sprintf("READ %.3f\nRISK %.3f\nER %.10g\nCPU %.3f\nVERSION %s\n",
            as.numeric(t1 - t0, units = "secs"), as.numeric(t2 - t1, units = "secs"),
            r$global_risk_ER, cpu(c0, c2), as.character(packageVersion("sdcMicro"))))
"""


def sdcmicro_available() -> str | None:
    """sdcMicro's version when R with sdcMicro and data.table is installed, else None."""
    import shutil as sh
    import subprocess
    if sh.which("Rscript") is None:
        return None
    p = subprocess.run(["Rscript", "-e", "suppressMessages({library(data.table); "
                        "library(sdcMicro)}); cat(as.character(packageVersion('sdcMicro')))"],
                       capture_output=True, text=True)
    return p.stdout.strip() if p.returncode == 0 else None


def sdcmicro_measure_risk(csv: str) -> dict[str, float]:
    """sdcMicro's measure_risk on the CSV read by data.table::fread: times and ER."""
    import subprocess
    out = subprocess.run(["Rscript", "-e", R_MEASURE_RISK, csv], capture_output=True,
                         text=True, check=True).stdout
    vals = dict(line.split(" ", 1) for line in out.strip().splitlines())
    return {"read": float(vals["READ"]), "risk": float(vals["RISK"]), "ER": float(vals["ER"]),
            "cpu": float(vals["CPU"])}


def write_frequency_csv(X: np.ndarray, path: str) -> None:
    """The keys as integers and the weight with 17 significant digits, unquoted header;
    a 13-column file's extra columns (:func:`wide_file`) as x0..x6, counts as integers."""
    import pyarrow as pa
    import pyarrow.csv as pacsv
    names = [f"k{j}" for j in range(5)] + ["w"] + [f"x{j}" for j in range(X.shape[1] - 6)]
    cols = [pa.array(X[:, j].astype(np.int64)) for j in range(5)] + [pa.array(X[:, 5])]
    cols += [pa.array(X[:, j].astype(np.int64) if j in (9, 10) else X[:, j])
             for j in range(6, X.shape[1])]
    with open(path, "wb") as f:
        f.write((",".join(names) + "\n").encode())
        pacsv.write_csv(pa.table(cols, names=names), f,
                        pacsv.WriteOptions(include_header=False))


#: the CPU seconds of the last :func:`sdcdist_risk_cli` call
LAST_CPU = [float("nan")]


def children_cpu() -> float:
    """CPU seconds (user + system) of this process's finished children so far."""
    import resource
    r = resource.getrusage(resource.RUSAGE_CHILDREN)
    return r.ru_utime + r.ru_stime


#: the checkout this script belongs to: its sdcdist is the one timed
ROOT = str(__import__("pathlib").Path(__file__).resolve().parents[1])


def _checkout_env(checkout: str | None) -> tuple[dict[str, str], str]:
    """The environment and working folder of a command that runs the sdcdist of
    ``checkout`` (default: this script's), whatever folder the script was started in."""
    import os
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join([checkout or ROOT] +
                                        ([env["PYTHONPATH"]] if env.get("PYTHONPATH") else []))
    return env, tempfile.gettempdir()


def compile_package(checkout: str | None = None) -> str:
    """Compile the bytecode of the sdcdist package that the commands run (that of
    ``checkout``, else this script's checkout), as an installed package has it: with
    PYTHONDONTWRITEBYTECODE set, or a fresh checkout, every command would otherwise compile
    its modules again (about 0.25 s of CPU). Returns the package's folder."""
    import compileall
    import subprocess
    import sys
    env, cwd = _checkout_env(checkout)
    where = subprocess.run([sys.executable, "-c", "import sdcdist, os; "
                            "print(os.path.dirname(sdcdist.__file__))"], env=env, cwd=cwd,
                           capture_output=True, text=True, check=True).stdout.strip()
    compileall.compile_dir(where, quiet=1)
    return where


def sdcdist_risk_cli(path: str, *extra: str, checkout: str | None = None
                     ) -> tuple[float, float, str]:
    """``sdcdist risk PATH PATH`` on the frequency metrics as a user runs it (a new process,
    imports included): wall time, ER, and whether it computed in this process. Its CPU
    time (user + system, every thread) is kept in ``LAST_CPU``. ``checkout``: run the
    sdcdist of that folder instead of this script's checkout."""
    import os
    import subprocess
    import sys
    import time
    env, cwd = _checkout_env(checkout)
    path = os.path.abspath(path)
    c0 = children_cpu()
    cmd = [sys.executable, "-m", "sdcdist.cli", "risk", path, path, "--metric",
           ",".join(FREQ), "--keys", "k0,k1,k2,k3,k4", *extra]
    if not path.endswith(".zarr"):
        cmd += ["--categorical", "k0,k1,k2,k3,k4", "--weight", "w"]
    t = time.perf_counter()
    p = subprocess.run(cmd, capture_output=True, text=True, env=env, cwd=cwd)
    dt = time.perf_counter() - t
    LAST_CPU[0] = children_cpu() - c0
    if p.returncode != 0:
        raise RuntimeError(f"sdcdist risk failed ({p.returncode}): {p.stderr[-2000:]}")
    er = next(float(line.split()[1]) for line in p.stdout.splitlines()
              if line.startswith("ER "))
    return dt, er, "in-process" if "computing in this process" in p.stderr else "cluster"


def _print_row(n: int, width: int, label: str, d_t: float, d_how: str, l_t: float,
               c_t: float, d_er: float, d_cpu: float, load: float,
               peer: dict[str, float] | None) -> None:
    if peer is not None and label in ("CSV", "bfore"):
        p_t = peer["read"] + peer["risk"]
        agree = "yes" if np.isclose(d_er, peer["ER"], rtol=5e-6) else \
            f"NO ({d_er:.10g} vs {peer['ER']:.10g})"
        tail = (f"{p_t:9.1f} {peer['read']:7.1f} {peer['risk']:8.1f} {p_t / d_t:6.2f} "
                f"{d_cpu:6.2f} {peer['cpu']:6.2f} {peer['cpu'] / d_cpu:6.2f} {load:5.1f}  "
                f"{agree} (6 digits printed)")
    elif peer is not None:
        p_t = peer["risk"]
        tail = (f"{p_t:9.1f} {'-':>7s} {peer['risk']:8.1f} {p_t / d_t:6.2f} {d_cpu:6.2f} "
                f"{'-':>6s} {'-':>6s} {load:5.1f}  (risk only)")
    else:
        tail = f"{'absent':>9s} {'':>24s} {d_cpu:6.2f} {'':>13s} {load:5.1f}"
    print(f"  {n:11,d} {width:4d} {label:5s} {d_t:8.1f} {'(' + d_how + ')':12s} {l_t:8.1f} "
          f"{c_t:8.1f} {tail}", flush=True)


def frequency_csv_part(sizes: list[int], tmp: str, workers: int,
                       data_dir: str | None = None, files: str = "6,13",
                       repeats: int = 1, against: str | None = None) -> None:
    """Frequency risk (5 keys + weight) from a CSV and from a Zarr store: sdcdist's default
    path, --local and a local cluster, against sdcMicro's measure_risk after fread; on
    the 6-column file (keys + weight) and on a 13-column one (:func:`wide_file`: 7 more
    numeric columns that both tools read and neither uses).

    Wall times of a whole command (start-up and read included) and, because the machine
    is shared, CPU times (user + system of every thread): sdcdist's whole process against
    sdcMicro's fread + measure_risk (R's start-up and library loading left out). Each row
    prints the load average when it ran.

    ``data_dir``: keep the generated files there and reuse them in a later run (the same
    seed gives the same files; generating 10 million records takes minutes).

    ``repeats``: on the CSV files, sdcMicro and sdcdist's default command run this many
    times, alternately (with ``against``, that checkout's command too, after sdcdist's),
    and the rows give the median wall and CPU times of each (the ratios are those of the
    medians); the load average is that before the first repeat.

    ``against``: another sdcdist checkout (a folder holding its ``sdcdist`` package, e.g.
    the code before a change), timed the same way on the CSV files in the same run: a
    ``before`` row under each CSV row, with the same sdcMicro medians."""
    import os
    import statistics
    from sdcdist.data import Microdata, write_microdata
    here = compile_package()
    print(f"  sdcdist: {here} (bytecode compiled before timing)")
    if against:
        print(f"  before: {compile_package(against)} (bytecode compiled before timing)")
    version = sdcmicro_available()
    print("frequency risk from CSV and Zarr (uniques, kviol2/3/5, IR_mean, IR_max, ER; "
          "5 keys + weight), seconds of a whole command (start-up and read included)")
    if version is None:
        print("  sdcMicro ABSENT: R with sdcMicro and data.table was not found, so there is "
              "no peer figure in this run (install R, then sdcMicro and data.table)")
    else:
        print(f"  peer: sdcMicro {version} measure_risk, the CSV read by data.table::fread")
    print(f"  {'records':>11s} {'cols':>4s} {'input':5s} {'default':>8s} {'(path)':12s} "
          f"{'--local':>8s} {'cluster':>8s} {'sdcMicro':>9s} {'(fread':>7s} {'+ risk)':>8s} "
          f"{'wall x':>6s} {'cpu':>6s} {'R cpu':>6s} {'cpu x':>6s} {'load':>5s}  ER agree",
          flush=True)
    for n in sizes:
        for width in [int(x) for x in files.split(",") if x]:
            where = data_dir or tmp
            tag = f"freq{n}" if width == 6 else f"freq{n}w{width}"
            csv, store = f"{where}/{tag}.csv", f"{where}/{tag}.zarr"
            done = f"{where}/{tag}.complete"
            if not os.path.exists(done):
                os.makedirs(where, exist_ok=True)
                X = categorical_file(n) if width == 6 else wide_file(n)
                write_frequency_csv(X, csv)
                names = [f"k{j}" for j in range(5)] + ["w"] + \
                    [f"x{j}" for j in range(X.shape[1] - 6)]
                cats = {f"k{j}": [str(i) for i in range(L)] for j, L in enumerate(LEVELS)}
                write_microdata(Microdata(X, tuple(names), {"key": names[:5],
                                                            "weight": ["w"]}, None, cats),
                                store, chunk_rows=1_000_000, overwrite=True)
                del X
                open(done, "w").close()
            load = os.getloadavg()[0]
            peers, ours, before = [], [], []
            for _ in range(max(1, repeats)):
                if version:
                    peers.append(sdcmicro_measure_risk(csv))
                ours.append((*sdcdist_risk_cli(csv), LAST_CPU[0]))
                if against:
                    before.append((*sdcdist_risk_cli(csv, checkout=against), LAST_CPU[0]))
            med = statistics.median
            peer = {k: med(p[k] for p in peers) for k in peers[0]} if peers else None
            if peers:       # the whole time of the median run, not a sum of medians
                peer["read"] = med(p["read"] + p["risk"] for p in peers) - peer["risk"]
            for label, path in (("CSV", csv), ("Zarr", store)):
                if label == "CSV":
                    d_t, d_er, d_how = med(r[0] for r in ours), ours[0][1], ours[0][2]
                    d_cpu = med(r[3] for r in ours)
                else:
                    load = os.getloadavg()[0]
                    d_t, d_er, d_how = sdcdist_risk_cli(path)
                    d_cpu = LAST_CPU[0]
                l_t, _, _ = sdcdist_risk_cli(path, "--local")
                c_t = sdcdist_risk_cli(path, "--workers", str(workers))[0] \
                    if n <= 1_000_000 else float("nan")
                _print_row(n, width, label, d_t, d_how, l_t, c_t, d_er, d_cpu, load, peer)
                if label == "CSV" and before:
                    b_t, b_er, b_how = med(r[0] for r in before), before[0][1], before[0][2]
                    _print_row(n, width, "bfore", b_t, b_how, float("nan"), float("nan"),
                               b_er, med(r[3] for r in before), load, peer)
    print("  cluster = --workers " f"{workers} (a local cluster), measured at 1M only; the "
          "Zarr rows compare with sdcMicro's risk step alone (the store is sdcdist's own "
          "format); cpu = sdcdist's whole default command, R cpu = fread + measure_risk; "
          "load = the 1-minute load average as the row started"
          + (f"; CSV rows: medians of {repeats} alternating runs of sdcMicro and sdcdist"
             if repeats > 1 else "")
          + ("; bfore = the --against checkout's default command" if against else ""))


# -- local suppression and PRAM against sdcMicro (R) ------------------------------------------

R_SUPPRESS = """
suppressMessages(library(sdcMicro))
a <- commandArgs(TRUE); df <- read.csv(a[1]); k <- as.integer(a[2])
imp <- as.integer(strsplit(a[3], ",")[[1]])
for (v in names(df)) df[[v]] <- factor(df[[v]])
t0 <- Sys.time(); r <- localSuppression(df, keyVars = names(df), k = k, importance = imp)
cat(sum(is.na(r$xAnon)), as.numeric(Sys.time() - t0, units = "secs"), "\\n")
"""
R_PRAM = """
suppressMessages(library(sdcMicro))
a <- commandArgs(TRUE); x <- factor(read.csv(a[1])$x); set.seed(1)
t0 <- Sys.time(); r <- pram(x, pd = 0.8, alpha = 0.5)
cat(as.numeric(Sys.time() - t0, units = "secs"), "\\n")
"""


def sdcmicro_version() -> str | None:
    """sdcMicro's version through Rscript, or None when R or sdcMicro is not installed."""
    import subprocess
    try:
        r = subprocess.run(["Rscript", "-e", 'cat(format(packageVersion("sdcMicro")))'],
                           capture_output=True, text=True, timeout=120)
    except (OSError, subprocess.TimeoutExpired):
        return None
    return r.stdout.strip() if r.returncode == 0 and r.stdout.strip() else None


def run_r(script: str, args: list[str], cap: float) -> tuple[list[float] | None, float | None]:
    """Run an R script (capped at ``cap`` s): (the numbers it printed or None if it did not
    finish, its peak resident memory in MB from /usr/bin/time when available)."""
    import os
    import subprocess
    with tempfile.NamedTemporaryFile("w", suffix=".R", delete=False) as f:
        f.write(script)
    timer = ["/usr/bin/time", "-f", "MAXRSS %M"] if os.path.exists("/usr/bin/time") else []
    try:
        r = subprocess.run(timer + ["Rscript", f.name] + args, capture_output=True, text=True,
                           timeout=cap)
    except subprocess.TimeoutExpired:
        return None, None
    finally:
        os.unlink(f.name)
    rss = [float(x.split()[1]) / 1024 for x in r.stderr.splitlines() if x.startswith("MAXRSS")]
    if r.returncode != 0:
        return None, rss[0] if rss else None
    return [float(v) for v in r.stdout.split()], (rss[0] if rss else None)


def sparse_file(n: int, seed: int = 5) -> np.ndarray:
    """(n, 6) uniform keys with 20, 15, 10, 8, 6 and 4 categories: many small classes."""
    rng = np.random.default_rng(seed)
    return np.column_stack([rng.integers(0, L, n) for L in (20, 15, 10, 8, 6, 4)]).astype(float)


def household_keys() -> np.ndarray:
    import pandas as pd
    from sdcdist.data.refdata import reference_file
    df = pd.read_csv(reference_file("household"))
    keys = ["urbrur", "roof", "walls", "water", "electcon", "relat", "sex"]
    return np.column_stack([pd.factorize(df[c], sort=True)[0] for c in keys]).astype(float)


def sdcmicro_importance(X: np.ndarray) -> list[int]:
    """sdcMicro's default importance of each key (its ``localSuppression`` with
    ``importance = NULL``): keys ranked by their number of categories, fewest first (1 =
    most important, suppressed last), ties in column order. Both tools get it explicitly."""
    levels = [np.unique(X[~np.isnan(X[:, j]), j]).size for j in range(X.shape[1])]
    imp = np.empty(len(levels), dtype=np.int64)
    imp[np.argsort(levels, kind="stable")] = np.arange(1, len(levels) + 1)
    return imp.tolist()


def suppression_part(rows: int, cap: float, tmp: str, version: str | None) -> None:
    """Values suppressed and time: sdcdist's suppress against sdcMicro's localSuppression,
    both with sdcMicro's default importance order (``sdcmicro_importance``)."""
    import os
    import pandas as pd
    from sdcdist.masking.suppression import suppress_greedy
    peer = f"sdcMicro {version}" if version else "sdcMicro (not installed: R column empty)"
    print(f"local suppression: sdcdist suppress against {peer} localSuppression "
          f"(both with sdcMicro's default importance), capped at {cap:.0f} s")
    print(f"  {'file':<28} {'k':>2} {'sdcdist values':>15} {'time s':>8} "
          f"{'sdcMicro values':>16} {'time s':>9}")
    files = [("household (4,580 x 7)", household_keys(), (3, 5)),
             ("sparse (20,000 x 6)", sparse_file(20_000), (3,)),
             (f"skewed ({rows:,} x 5)", categorical_file(rows)[:, :5], (3,))]
    for name, X, ks in files:
        path = os.path.join(tmp, "keys.csv")
        pd.DataFrame(X.astype(np.int64), columns=[f"k{j}" for j in range(X.shape[1])]
                     ).to_csv(path, index=False)
        imp = sdcmicro_importance(X)
        for k in ks:
            (_, total, _), t = timed(lambda: suppress_greedy(X, k, importance=imp))
            if version:
                res, _ = run_r(R_SUPPRESS, [path, str(k), ",".join(map(str, imp))], cap)
                r = (f"{int(res[0]):>16,} {res[1]:>9.1f}" if res
                     else f"{'did not finish':>16} {'>' + format(cap, '.0f'):>9}")
            else:
                r = f"{'-':>16} {'-':>9}"
            print(f"  {name:<28} {k:>2} {total:>15,} {t:>8.2f} {r}")


def pram_part(rows: int, tmp: str, version: str | None, cap: float) -> None:
    """PRAM time and peak memory at ``rows`` records, one key of 1,000 categories."""
    import os
    import tracemalloc
    import pandas as pd
    from sdcdist.masking.pram import pram_column
    rng = np.random.default_rng(7)
    p = 1.0 / np.arange(1, 1001) ** 0.8
    x = rng.choice(1000, rows, p=p / p.sum()).astype(np.float64)
    tracemalloc.start()
    _, t = timed(lambda: pram_column(x, 0.8, rng=np.random.default_rng(1)))
    peak = tracemalloc.get_traced_memory()[1] / 2**20
    tracemalloc.stop()
    print(f"PRAM (pd = 0.8, alpha = 0.5): {rows:,} records, one key of 1,000 categories")
    print(f"  sdcdist pram: {t:7.2f} s, peak {peak:7.1f} MB allocated by the call (tracemalloc; "
          f"the column itself is {x.nbytes / 2**20:.1f} MB)")
    if not version:
        print("  sdcMicro: not installed (Rscript or the package missing), not measured")
        return
    path = os.path.join(tmp, "pram.csv")
    pd.DataFrame({"x": x.astype(np.int64)}).to_csv(path, index=False)
    res, rss = run_r(R_PRAM, [path], cap)
    if res is None:
        print(f"  sdcMicro {version} pram: did not finish in {cap:.0f} s")
    else:
        print(f"  sdcMicro {version} pram: {res[0]:7.2f} s, peak resident memory of the whole "
              f"R process {rss or float('nan'):.0f} MB (/usr/bin/time; includes reading the CSV "
              "and R itself)")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--rows", type=int, default=10_000_000)
    ap.add_argument("--link-rows", type=int, default=1_000_000)
    ap.add_argument("--workers", type=int, default=2)
    ap.add_argument("--freq-sizes", default="1000000,10000000",
                    help="record counts of the frequency-risk-from-CSV rows (comma-separated)")
    ap.add_argument("--sdc-rows", type=int, default=1_000_000,
                    help="records of the large suppression file and of the PRAM run")
    ap.add_argument("--sdcmicro-cap", type=float, default=900.0,
                    help="seconds after which an sdcMicro run is stopped (reported)")
    ap.add_argument("--data-dir", default=None,
                    help="keep the frequency-risk files (CSV and Zarr) in this folder and "
                         "reuse them in later runs (default: a temporary folder)")
    ap.add_argument("--freq-files", default="6,13",
                    help="the widths of the frequency-risk CSV files: 6 (keys + weight) "
                         "and/or 13 (7 more numeric columns)")
    ap.add_argument("--repeats", type=int, default=1,
                    help="alternating runs of sdcMicro and sdcdist on each CSV file "
                         "(medians reported)")
    ap.add_argument("--against", default=None, metavar="DIR",
                    help="another sdcdist checkout (the folder holding its sdcdist package) "
                         "timed on the CSV files in the same run (rows 'bfore')")
    ap.add_argument("--only", choices=("all", "freq-csv", "sdcmicro"), default="all",
                    help="freq-csv: only the frequency risk rows against sdcMicro; sdcmicro: "
                         "only local suppression and PRAM against sdcMicro")
    a = ap.parse_args()
    if a.only != "all":
        tmp = tempfile.mkdtemp(prefix="sdcdist-mixed-")
        try:
            if a.only == "freq-csv":
                frequency_csv_part([int(x) for x in a.freq_sizes.split(",")], tmp, a.workers,
                                   a.data_dir, a.freq_files, a.repeats, a.against)
            else:
                version = sdcmicro_version()
                suppression_part(a.sdc_rows, a.sdcmicro_cap, tmp, version)
                pram_part(a.sdc_rows, tmp, version, a.sdcmicro_cap)
        finally:
            shutil.rmtree(tmp, ignore_errors=True)
        return
    tmp = tempfile.mkdtemp(prefix="sdcdist-mixed-")
    c, client = cluster(a.workers)
    try:
        print(f"{a.workers} worker processes, 1 thread each; shared machine: times are "
              "noisy, compare ratios")
        frequency_part(a.rows, client, tmp)
        linkage_part(a.link_rows, client)
        frequency_csv_part([int(x) for x in a.freq_sizes.split(",")], tmp, a.workers,
                           a.data_dir, a.freq_files, a.repeats, a.against)
        version = sdcmicro_version()
        suppression_part(a.sdc_rows, a.sdcmicro_cap, tmp, version)
        pram_part(a.sdc_rows, tmp, version, a.sdcmicro_cap)
    finally:
        client.close()
        c.close()
        shutil.rmtree(tmp, ignore_errors=True)


if __name__ == "__main__":
    main()
