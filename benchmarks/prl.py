"""Benchmark: probabilistic record linkage of sdcdist against Splink and recordlinkage.

On the same files, in one run, prints the re-identification rate (share of
masked records linked to their own record) under both scorings — the 1-1 assignment
(PLD; for Splink its single-best-links clustering, for recordlinkage its greedy 1-1) and
best link (PLD_best: each masked record linked to its best-weighted record(s), the true one
counting 1/t among t tied) — and wall time of

* sdcdist's default PRL (comparison ``s``: levels of |a - b| at 0, 0.1, 0.25,
  0.5, 1 sd of the original column, weights linear in |a - b| between the
  levels' middles (``prl_weights: linear``); constrained EM on all pairs;
  exact 1-1 assignment),
* sdcdist with ``prl_em: {fit: m_only}`` (u from all pairs and P(M) = 1/n fixed, EM of
  m only: the fit of Splink's fixed-u set-up),
* sdcdist with the same levels and one weight per level (``weights="step"``), with either
  fit,
* sdcdist with the papers' binary comparison (``l``, t = 0.05, d/l
  downweighting): the baseline the default replaced,
* Splink 5 (DuckDB backend), as strong as its docs allow for this task: per key
  column levels |a - b| <= 0.1, 0.25, 0.5, 1 sd of the original column plus else,
  with and without an exact-match level first; u by random sampling of 1e7 pairs
  (seed 1) with Splink's early stop off (``min_count_per_level=None``: by default
  it stops after a 1 % probe, which left u coarse and cost Tarragona 15.7 % ->
  19.5 %); m by EM on all pairs with u and P(match) = 1/n fixed, up to 100
  iterations; no term frequencies; scored by each masked record's best
  match_weight (ties 1/t) and by Splink's 1-1 single-best-links clustering; the
  strongest set-up under each scoring is the row, the others are in its notes; and
  Splink's fixed-u set-up as a row of its own: a null level, the same absolute-difference
  levels, u from every pair (``estimate_u_using_random_sampling`` with ``max_pairs`` at
  least all pairs and no early stop: with Splink's default ``min_count_per_level=100`` it
  stops after a probe of ~1 % of the pairs, and Tarragona falls from 19.8 to 15.7 %), EM
  of m only (``fix_u_probabilities``, P(match) = 1/n fixed, no term frequencies),
* recordlinkage (ECM), likewise the strongest of: one binary feature per level
  |a - b| <= 0.1, 0.25, 0.5, 1 sd per column (ECM takes binary features), or the
  linear similarity binarised at 0.5 sd; each scored by best link (ties 1/t) and
  by its 1-1 greedy linking; ECM with its documented defaults (100 iterations,
  atol 1e-4: a tighter bound never finished Census and re-identifies no more,
  see ``run_peer.recordlinkage``),

for Census (1080 x 13), Tarragona (834 x 13), a synthetic 10,000 x 10 file
skewed like a tax file (zeros, values rounded to 2 significant digits, so
repeated), a synthetic 59,315 x 10 file and a tie-heavy utility file ``eia``
(4,092 x 10: the real EIA file of sdcMicro with ``--eia-csv``, else the
deterministic look-alike :func:`eia_like`: whole numbers, zeros, a few large
utilities, so most differences fall in the lowest comparison level and patterns
repeat); all numeric columns as one key
set; masked file = additive noise with variance 0.1 var (noise p = sqrt(0.1)),
seed 1. sdcdist compares all pairs. The peers compare all pairs up to
``--peer-max-pairs`` (recordlinkage holds every pair in pandas); above, the
blocking their docs recommend, and the table says so. Each peer gets ``--timeout``
seconds a file; it prints a line after each finished set-up, so on a timeout its
row is the strongest set-up that finished, and says which did not (with no
finished set-up the row says it did not finish). The peers run with one BLAS
thread (``PEER_ENV``).

The peers are not sdcdist dependencies: ``sh benchmarks/peers/setup.sh``
installs them into ``benchmarks/.venv-peers``, and they run there as
subprocesses (``benchmarks/peers/run_peer.py``); a missing venv skips them
(``--peer-python`` points at another venv with splink and duckdb).

The peer ``splink_fixed_u_sql`` (``--peers splink_fixed_u_sql``) is the same fixed-u set-up
(issue 42's) for the large files. Splink works in a DuckDB database file (``DuckDBAPI`` takes
the connection) under ``--sql-tmp`` with ``memory_limit`` ``--sql-memory`` (9 GB),
``--sql-threads`` threads (1) and its ``temp_directory`` beside it, so the tables Splink
materialises for EM (every compared pair and its comparison vector) live on disk and its
joins spill there; predict runs in 10 slices of the masked file and the best-link figure is
computed in SQL. Up to ``--sql-max-pairs`` (default 2e8: the 10,000-record file's 1e8) it
compares all pairs: u from every pair (``--sql-u-pairs``), EM of m on every pair. Above it,
with ``--sql-sample-slices K/N``, still every pair for prediction but a sample for training
(as Splink's docs suggest for large files): u from 1e7 random pairs, EM of m on Splink's own
sample of about ``--sql-em-pairs`` pairs (``max_pairs`` of its EM: a hash filter on the
records of each side), and predict on all pairs of K of N slices of the masked file (each a
hash-random set of masked records, each against every original record: a masked record's
best link is exact, so the finished slices estimate the file's rate, with its standard
error; the peer prints its figure after every slice, and a run cut short by ``--timeout`` or
``--until`` keeps the last). The row says which. Its 1-1 figure (all pairs, every slice)
is Splink's single-best-links clustering on the pairs at or above the weight the top ~200
pairs a masked record reach: links below that weight never decide one above it, so it is a
lower bound (marked ``≥``) of the clustering on all pairs, which can add at most the true
pairs below (counted in the row). Without ``--sql-sample-slices``, above ``--sql-max-pairs``
(59,315 records: 3.5e9 pairs) it blocks as Splink's docs recommend for large files: OR-ed
``block_on`` rules, one per 2 consecutive key columns (cyclically, 10 rules) on equal
floor(x / (0.1 sd)) bins, u from 1e7 random pairs, m by EM in one session per disjoint rule;
the row states the share of true pairs the blocking keeps (13.3 %). No blocking on this file
keeps 90 % of the true pairs within 3e8 pairs: its ten columns are skewed (10-80 % zeros,
the median record within 0.3 sd of zero on every column) while the noise has 0.32 sd, so a
rule is nearly as likely to keep a random pair as a true one. Measured on the file: one
rule per column on bins of 0.25 / 0.5 sd keeps 96.9 / 99.9 % of the true pairs but
3.1e9 / 3.5e9 of the 3.5e9 pairs; consecutive column pairs on 0.1 / 0.25 / 0.5 sd bins keep
13.3 / 52.5 / 87.7 % with 2.5e8 / 1.2e9 / 2.5e9 pairs; all 45 column pairs on 0.25 sd bins
84.5 % with 2.3e9; |difference of the sums of standardised values| below 0.25 / 1.65 keeps
19.8 / 90.1 % with 2.6e8 / 1.5e9 pairs. At that size sdcdist's ``m_only`` (the same
estimator, all pairs) stands in for the set-up. On 2 cores shared with other jobs Splink's EM
took 20-70 s an iteration on a 1e7-pair sample (58 iterations at 10,000 records), so EM on
all 1e8 pairs did not fit an hour: README's figures ran 10,000 records with
``--sql-max-pairs 9.9e7 --sql-sample-slices 10/10 --sql-em-pairs 1e7`` (every pair
predicted, trained on samples), and the same at 59,315 records (50 s an iteration, then 35
slices of 1e8 pairs) did not finish.

    python benchmarks/prl.py [--files census,tarragona,synth10k,synth59k,eia] [--workers 2]
                             [--variants default,step,l] [--peers splink,recordlinkage]
                             [--peer-max-pairs 2e7] [--sql-max-pairs 2e8] [--timeout 3600]
                             [--sql-memory 9GB] [--sql-threads 1] [--sql-tmp DIR]
                             [--sql-em-pairs 0] [--sql-sample-slices K/N] [--peer-log FILE]
                             [--peer-files F] [--until HH:MM]
                             [--eia-csv eia.csv] [--warm] [--repeats N]

``--workers 0`` runs sdcdist in this process without a cluster (the library call with
``Runner(None)``: patterns in one task, the EM's E-step parts and the dense weights on two
threads); ``--warm --repeats 5`` then gives the warm figure of the library, the median of
five calls after one that compiles and warms the caches.
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

HERE = Path(__file__).resolve().parent
PEER_PY = HERE / ".venv-peers" / "bin" / "python"
#: one BLAS thread in the peers: numpy's BLAS otherwise starts a thread a core and, on a busy
#: machine, spins; recordlinkage's ECM (a few small dot products an iteration) ran 3x slower
PEER_ENV = {**os.environ, "OPENBLAS_NUM_THREADS": "1", "OMP_NUM_THREADS": "1",
            "MKL_NUM_THREADS": "1"}
#: splink_fixed_u_sql: above --sql-max-pairs, 10 OR-ed block_on rules on equal 0.1-sd bins of
#: 2 consecutive columns (DuckDB's memory, threads, directory and the pairs for u and EM are
#: options of the command)
SQL_ARGS = ("--block-width", "0.1", "--block-columns", "2")
FILES = ("census", "tarragona", "synth10k", "synth59k", "eia")
#: sdcdist rows: name -> (label, PRL registry options)
VARIANTS = {
    "default": ("sdcdist PRL (default: s, 6 levels, linear weights)", {}),
    "m_only": ("sdcdist PRL (s, linear weights, fit m_only)", {"prl_em": {"fit": "m_only"}}),
    "step": ("sdcdist PRL (s, 6 levels, step weights)", {"prl_weights": "step"}),
    "step_m_only": ("sdcdist PRL (s, step weights, fit m_only)",
                    {"prl_weights": "step", "prl_em": {"fit": "m_only"}}),
    "l": ("sdcdist PRL (papers: l, t = 0.05)", {"prl_method": "l", "prl_t": 0.05}),
}


def utility_like(n: int, *, columns: int = 10, seed: int = 0) -> np.ndarray:
    """Skewed synthetic tax-like columns with zeros, rounded to 2 significant digits."""
    from sdcdist.data import synth
    X = synth.generate(n, columns=columns, seed=seed).values.astype(np.float64)
    with np.errstate(divide="ignore"):
        mag = 10.0 ** (np.floor(np.log10(np.abs(X))) - 1)
    mag[~np.isfinite(mag) | (mag == 0)] = 1.0
    return np.round(X / mag) * mag


#: The ten numeric columns of the EIA utility file (sdcMicro's ``EIA``: 4,092 records)
EIA_COLUMNS = ("RESREVENUE", "RESSALES", "COMREVENUE", "COMSALES", "INDREVENUE", "INDSALES",
               "OTHREVENUE", "OTHRSALES", "TOTREVENUE", "TOTSALES")


def eia_like(*, utilities: int = 341, months: int = 12, seed: int = 0) -> np.ndarray:
    """A tie-heavy utility file shaped like sdcMicro's EIA (341 utilities x 12 months =
    4,092 records, the ten columns of :data:`EIA_COLUMNS`), generated deterministically.

    Per utility a size (log-normal, sd 1.6 on the log scale: a few large utilities and many
    small ones, so each column's sd is set by the large ones and most differences fall in
    the lowest comparison level) and a price per sector; per month a seasonal factor. Sales
    are whole numbers; revenues are sales x price, whole numbers; about 4 % of the
    utilities sell nothing to industry and 5 % nothing to the other sector (zeros, as in
    EIA); totals are the sums of the sectors. Small utilities give small whole numbers, so
    values repeat (about 85 % distinct per column, as EIA's 44-99 %).
    """
    rng = np.random.default_rng(seed)
    size = np.exp(rng.normal(9.5, 1.6, utilities))
    share = {"RES": np.ones(utilities), "COM": np.exp(rng.normal(-0.2, 0.6, utilities)),
             "IND": np.exp(rng.normal(-0.8, 1.2, utilities)) * (rng.random(utilities) > 0.04),
             "OTH": np.exp(rng.normal(-3.0, 1.5, utilities)) * (rng.random(utilities) > 0.05)}
    price = {k: rng.uniform(0.06, 0.2, utilities) * f
             for k, f in (("RES", 1.0), ("COM", 0.9), ("IND", 0.7), ("OTH", 0.9))}
    season = 1 + 0.2 * np.cos(2 * np.pi * np.arange(months) / months)
    cols = {}
    for k in ("RES", "COM", "IND", "OTH"):
        base = (size * share[k])[:, None] * season[None, :]
        sales = np.round(base * np.exp(rng.normal(0, 0.05, (utilities, months))))
        revenue = np.round(sales * price[k][:, None] * np.exp(rng.normal(0, 0.03, (utilities,
                                                                                   months))))
        cols[k] = (revenue.T.ravel(), sales.T.ravel())      # month by month, as EIA
    rev = sum(cols[k][0] for k in cols)
    sal = sum(cols[k][1] for k in cols)
    out = [v for k in ("RES", "COM", "IND", "OTH") for v in cols[k]] + [rev, sal]
    return np.column_stack(out).astype(np.float64)


def load_eia(path: str | None) -> np.ndarray:
    """The real EIA file's ten numeric columns from a CSV (e.g. written by R:
    ``data(EIA, package = "sdcMicro"); write.csv(EIA, "eia.csv", row.names = FALSE)``), or
    :func:`eia_like` without one."""
    if not path:
        return eia_like()
    import pandas as pd
    d = pd.read_csv(path)
    missing = [c for c in EIA_COLUMNS if c not in d.columns]
    if missing:
        raise SystemExit(f"{path} lacks the EIA columns {missing}")
    return d[list(EIA_COLUMNS)].to_numpy(np.float64)


def load(name: str, *, eia_csv: str | None = None) -> tuple[np.ndarray, np.ndarray]:
    from sdcdist.data import load_microdata
    from sdcdist.data.refdata import reference_file
    from sdcdist.masking import REGISTRY
    if name in ("census", "tarragona"):
        X = load_microdata(reference_file(name)).values.astype(np.float64)
    elif name == "synth10k":
        X = utility_like(10_000)
    elif name == "synth59k":
        X = utility_like(59_315)
    elif name == "eia":
        X = load_eia(eia_csv)
    else:
        raise SystemExit(f"unknown file {name!r}; one of {', '.join(FILES)}")
    Y = REGISTRY["noise"](X, np.sqrt(0.1), rng=np.random.default_rng(1))
    return X, Y


def _reset_peak() -> None:
    """Reset this process's peak resident memory (Linux: VmHWM, by writing 5 to clear_refs)."""
    try:
        with open("/proc/self/clear_refs", "w") as f:
            f.write("5")
    except OSError:
        pass


def _peak_mb() -> float:
    """This process's peak resident memory since the last :func:`_reset_peak`, in MB."""
    try:
        with open("/proc/self/status") as f:
            for line in f:
                if line.startswith("VmHWM:"):
                    return int(line.split()[1]) / 1024.0
    except OSError:
        pass
    import resource
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024.0


def run_sdcdist(client, X: np.ndarray, Y: np.ndarray, options: dict, repeats: int = 1
                ) -> dict:
    """sdcdist's PRL of Y to X on ``client`` (None: in this process, the library call with
    no cluster); with ``repeats`` > 1 the wall time is the median of that many calls (each
    one's time in the note)."""
    from sdcdist.linkage.prl import PRLSettings, probabilistic_linkage
    from sdcdist.parallel import Runner
    runner = Runner(client)
    n = X.shape[0]
    A, B = runner.share(X), runner.share(Y)
    walls = []
    for _ in range(max(1, repeats)):
        if client is not None:
            client.run(_reset_peak)
        _reset_peak()
        t0 = time.perf_counter()
        res = probabilistic_linkage(runner, A, B, n, n, tuple(range(X.shape[1])),
                                    settings=PRLSettings.from_options(options))
        walls.append(time.perf_counter() - t0)
    i = res.info
    out = {"rss": _peak_mb()}
    if client is not None:
        out["rss_workers"] = max(client.run(_peak_mb).values())
    return {**out, "correct": res.correct, "best": res.correct_best, "n": n,
            "wall": float(np.median(walls)), "pairs": i["pairs_compared"],
            "note": f"{i['assignment']} assignment; EM {i['em_iterations']} it, "
                    f"P(M) {i['p_match']:.6g}"
                    f"{'' if i['em_converged'] else ' (NOT converged)'}; timings "
                    + ", ".join(f"{k} {v:.2f}" for k, v in i["timings"].items())
                    + (f"; walls {', '.join(f'{w:.2f}' for w in walls)} s (median)"
                       if len(walls) > 1 else "")}


def run_peer(tool: str, X: np.ndarray, Y: np.ndarray, max_pairs: float,
             timeout: float, python: Path = PEER_PY, extra: tuple = ()) -> dict:
    """Run one peer in its venv on the two files; its last JSON line (``rss``: the peer
    process's peak resident memory, MB, DuckDB's included)."""
    if not Path(python).exists():
        return {"error": f"skipped: no {python} (sh benchmarks/peers/setup.sh, or "
                         "--peer-python)"}
    with tempfile.TemporaryDirectory() as d:
        f = Path(d) / "files.npz"
        np.savez(f, A=X, B=Y)
        try:
            p = subprocess.run([str(python), str(HERE / "peers" / "run_peer.py"), tool, str(f),
                                "--max-pairs", str(max_pairs), *extra], capture_output=True,
                               text=True, timeout=timeout, env=PEER_ENV)
        except subprocess.TimeoutExpired as e:
            # the peers print a line after each finished set-up: keep the last one
            out = e.stdout.decode() if isinstance(e.stdout, bytes) else (e.stdout or "")
            lines = [x for x in out.splitlines() if x.startswith("{")]
            if not lines:
                return {"error": f"did not finish within {timeout:.0f} s"}
            r = json.loads(lines[-1])
            r["note"] += f"; the remaining set-ups did not finish within {timeout:.0f} s"
            return r
    lines = [x for x in p.stdout.splitlines() if x.startswith("{")]
    if p.returncode != 0 or not lines:
        last = p.stderr.strip().splitlines()[-1:]
        return {"error": f"failed (exit {p.returncode})" + (f": {last[0]}" if last else "")}
    return json.loads(lines[-1])


def memory(r: dict) -> str:
    """Peak resident memory: sdcdist's client process and its largest worker; a peer's
    process."""
    if "rss_workers" in r:
        return f"{r['rss'] / 1024:.2f} GiB client, {r['rss_workers'] / 1024:.2f} GiB worker"
    return f"{r['rss'] / 1024:.2f} GiB" if "rss" in r else "–"


def row(tool: str, r: dict) -> str:
    """A table row: PLD (1-1 assignment) and best link (PLD_best: ties 1/t) where both are
    known; a peer's row is its strongest set-up and scoring."""
    if "error" in r:
        return f"| {tool} | – | – | – | – | {r['error']} |"
    if "correct" not in r:     # best link only (splink_fixed_u_sql), perhaps on a sample
        se = f" (± {100.0 * r['best_se']:.2f})" if "best_se" in r else ""
        return (f"| {tool} | – | {100.0 * r['best'] / r['n']:.2f} %{se} | {r['wall']:.1f} s | "
                f"{memory(r)} | {r['pairs']:,} pairs; {r['note']} |")
    if "setups" in r:          # a peer: the strongest set-up under each scoring
        one = [v[0] for k, v in r["setups"].items() if k.endswith("|1-1")]
        bst = [v[0] for k, v in r["setups"].items() if k.endswith("|best")]
        r = {**r, "correct": max(one) if one else float("nan"),
             "best": max(bst) if bst else float("nan")}
    best = f"{100.0 * r['best'] / r['n']:.2f} %" if "best" in r else "–"
    ge = "≥ " if r.get("correct_lower_bound") else ""
    return (f"| {tool} | {ge}{100.0 * r['correct'] / r['n']:.2f} % | {best} | {r['wall']:.1f} s | "
            f"{memory(r)} | {r['pairs']:,} pairs; {r['note']} |")


def setup_rows(r: dict) -> list[str]:
    """Splink's fixed-u set-up (u from all pairs, EM of m only, the issue-42 set-up) as a
    row of its own: its 1-1 (single best links) and best-link figures."""
    s = r.get("setups") or {}
    if "fixed u|best" not in s:
        return []
    n = r["n"]
    one, best = s.get("fixed u|1-1", [float("nan"), 0.0]), s["fixed u|best"]
    return [f"| {r['tool']}, fixed u | {100.0 * one[0] / n:.2f} % | "
            f"{100.0 * best[0] / n:.2f} % | {best[1]:.1f} s | {memory(r)} | {r['pairs']:,} "
            "pairs (all); null "
            "level + |a-b| <= 0.1, 0.25, 0.5, 1 sd + else; u from every pair (random sampling "
            "with max_pairs >= all pairs, no early stop), EM of m only with u and "
            "P(match) = 1/n fixed, no term frequencies; first column Splink's 1-1 single "
            "best links |"]


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--files", default=",".join(FILES))
    ap.add_argument("--workers", type=int, default=2)
    ap.add_argument("--variants", default=",".join(VARIANTS),
                    help="sdcdist rows: " + ", ".join(VARIANTS) + " (none: no sdcdist row)")
    ap.add_argument("--peers", default="splink,recordlinkage")
    ap.add_argument("--peer-files", default=None,
                    help="the files the peers run on (default: all of --files)")
    ap.add_argument("--peer-max-pairs", type=float, default=2e7,
                    help="all pairs up to this many for the peers; above, their blocking")
    ap.add_argument("--sql-max-pairs", type=float, default=2e8,
                    help="splink_fixed_u_sql: all pairs up to this many (10,000 records: "
                         "1e8), above its blocking")
    ap.add_argument("--sql-memory", default="9GB",
                    help="splink_fixed_u_sql: DuckDB's memory_limit (it spills beyond)")
    ap.add_argument("--sql-threads", type=int, default=1,
                    help="splink_fixed_u_sql: DuckDB's threads")
    ap.add_argument("--sql-tmp", default=tempfile.gettempdir(),
                    help="splink_fixed_u_sql: directory of DuckDB's database file and spill "
                         "files (~30 GB free at 1e8 pairs)")
    ap.add_argument("--sql-u-pairs", type=float, default=0.0,
                    help="splink_fixed_u_sql: random pairs for u (default: every pair where "
                         "all pairs are compared, the set-up of issue 42; else 1e7)")
    ap.add_argument("--sql-em-pairs", type=float, default=0.0,
                    help="splink_fixed_u_sql with --sql-sample-slices, above --sql-max-pairs: "
                         "EM on Splink's sample of about this many pairs (its max_pairs; "
                         "default --sql-max-pairs); up to --sql-max-pairs EM runs on every "
                         "pair")
    ap.add_argument("--sql-sample-slices", default="",
                    help="splink_fixed_u_sql above --sql-max-pairs: K/N = all pairs of K of N "
                         "slices of the masked file (EM on Splink's sample of --sql-max-pairs "
                         "pairs) instead of blocking")
    ap.add_argument("--peer-log", default=None,
                    help="splink_fixed_u_sql: append Splink's INFO log (with times) here")
    ap.add_argument("--timeout", type=float, default=3600.0)
    ap.add_argument("--until", default=None,
                    help="HH:MM (UTC): no peer runs past this time (each gets the lesser of "
                         "--timeout and the time left)")
    ap.add_argument("--eia-csv", default=None,
                    help="the real EIA file as CSV for the file 'eia' (default: the "
                         "generated tie-heavy look-alike, eia_like)")
    ap.add_argument("--warm", action="store_true",
                    help="time sdcdist's second call on each file (the first warms up)")
    ap.add_argument("--repeats", type=int, default=1,
                    help="sdcdist's wall time: the median of this many calls")
    ap.add_argument("--peer-python", default=str(PEER_PY),
                    help="the python of the peers' venv (default benchmarks/.venv-peers)")
    args = ap.parse_args()
    args.variants = "" if args.variants == "none" else args.variants
    until = None
    if args.until:
        import datetime as dt
        now = dt.datetime.now(dt.timezone.utc)
        hh, mm = (int(x) for x in args.until.split(":"))
        until = now.replace(hour=hh, minute=mm, second=0, microsecond=0)
        if until < now:
            until += dt.timedelta(days=1)
        until = time.time() + (until - now).total_seconds()

    def timeout() -> float:
        return args.timeout if until is None else max(1.0, min(args.timeout,
                                                               until - time.time()))
    from distributed import Client, LocalCluster
    peers = [p for p in args.peers.split(",") if p]
    variants = [v for v in args.variants.split(",") if v]
    for v in variants:
        if v not in VARIANTS:
            raise SystemExit(f"unknown variant {v!r}; one of {', '.join(VARIANTS)}")
    print(f"PRL benchmark: all numeric columns as one key set, noise variance 0.1 var, seed 1, "
          f"{args.workers or 'no'} workers{' (in this process)' if not args.workers else ''}; "
          "wall times on a shared machine are noisy\n")
    import contextlib
    with (LocalCluster(n_workers=args.workers, threads_per_worker=1, processes=True,
                       dashboard_address=":0", silence_logs=40) if args.workers > 0
          else contextlib.nullcontext()) as cluster, \
            (Client(cluster) if cluster is not None else contextlib.nullcontext()) as client:
        for name in args.files.split(","):
            X, Y = load(name, eia_csv=args.eia_csv)
            print(f"### {name}: {X.shape[0]:,} x {X.shape[1]}\n")
            print("| tool | PLD (1-1) | best link (ties 1/t) | wall | peak memory | notes |\n"
                  "|---|---|---|---|---|---|")
            for v in variants:
                label, options = VARIANTS[v]
                if args.warm:
                    run_sdcdist(client, X, Y, options)
                print(row(label, run_sdcdist(client, X, Y, options, args.repeats)), flush=True)
            for tool in (peers if args.peer_files is None
                         or name in args.peer_files.split(",") else []):
                if tool == "splink_fixed_u_sql":
                    extra = SQL_ARGS + (
                        "--memory", args.sql_memory, "--threads", str(args.sql_threads),
                        "--tmp", args.sql_tmp, "--u-pairs", repr(args.sql_u_pairs)) + (
                        ("--predict-slices", args.sql_sample_slices.split("/")[0],
                         "--chunks", args.sql_sample_slices.split("/")[1],
                         "--em-pairs", repr(args.sql_em_pairs or args.sql_max_pairs))
                        if args.sql_sample_slices and X.shape[0] ** 2 > args.sql_max_pairs
                        else ()) + (
                        ("--log", args.peer_log) if args.peer_log else ())
                    r = run_peer(tool, X, Y, args.sql_max_pairs, timeout(),
                                 Path(args.peer_python), extra)
                    label = (f"{r.get('tool', tool)}, fixed u (issue 42's set-up), best link "
                             f"in SQL: {r['setup']}" if "setup" in r else
                             f"{r.get('tool', tool)}, fixed u (issue 42's set-up)")
                    print(row(label, r), flush=True)
                    continue
                r = run_peer(tool, X, Y, args.peer_max_pairs, timeout(),
                             Path(args.peer_python))
                print(row(r.get("tool", tool), r), flush=True)
                for line in setup_rows(r):
                    print(line, flush=True)
            print()
    sys.stdout.flush()


if __name__ == "__main__":
    main()
