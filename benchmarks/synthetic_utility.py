"""Utility measures of synthetic releases: sdcdist against SDMetrics 0.32 (quality
measures) and statsmodels (pMSE, CI overlap) on five files, and the time of the quality
measures at 1,000,000 records.

    .venv/bin/python benchmarks/synthetic_utility.py [--peers PYTHON] [--size 1000000]
                                                     [--workers 0]

--peers is a Python with ``sdmetrics==0.32.*`` and ``statsmodels`` installed (a separate
environment, never a dependency of sdcdist; default ``benchmarks/.venv-peers-synth``).

Agreement. Five pairs (original, release):

- Census (1080 x 13 numeric) and Tarragona (834 x 13 numeric), each against a release
  drawn column by column from it (a marginal synthesizer) with every numeric value
  rounded to 3 significant digits (ties);
- the household file (4580 records; categorical urbrur, roof, walls, water, electcon,
  relat, sex, hhcivil; numeric age, expend, income, savings) against a marginal release
  of 4000 records with 3 % of its values missing;
- two seeded mixed files (3 categorical columns with 2, 6 and 12 categories, 3 numeric
  columns, tie-heavy, 5 % missing values), of 3000 against 2500 and 800 against 1200
  records, the release a noisy copy with categories changed at random.

For each, SDMetrics' QualityReport (``num_rows_subsample`` is not reached below 50,000
records) gives the column-shape and column-pair scores, averaged as sdcdist's measures
are; statsmodels' GLM (binomial) on synthpop's design gives pMSE and pmse_ratio (records
in a category, or with a missing value, of one file only are separated: p = their label,
the GLM fitted on the others), and a float64 Newton-Raphson on the same design (columns
standardised) gives a second pMSE (``pmse_newton``); statsmodels' OLS ``conf_int`` gives the CI
overlap of a regression. The largest difference is printed per measure; the checks:
1e-12 for the SDMetrics measures, 1e-12 relative for pMSE against that Newton,
1e-8 relative against the GLM itself (its IRLS stops on a deviance tolerance), 1e-9 for
the CI overlap (statsmodels solves an un-centred design by a pseudo-inverse: on the
household file, values up to 1e8, it loses digits; sdcdist's intervals are exact).

Speed. The quality measures of sdcdist on a seeded mixed pair of --size records each
(3 categorical, 4 numeric columns), in process (or on a local cluster of --workers
processes), beside SDMetrics' QualityReport on the same pair (which subsamples 50,000 rows
for its contingency tables). The machine's load average is printed with the times.
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

QUALITY = ["ks_complement", "tv_complement", "corr_similarity", "contingency_similarity",
           "quality"]

PEER = r"""
import json, sys, warnings
import numpy as np, pandas as pd
warnings.simplefilter("ignore")
from sdmetrics.reports.single_table import QualityReport
job = json.load(open(sys.argv[1]))
out = {}
for case in job:
    cats, names = case["cats"], case["names"]
    real = pd.read_csv(case["real"])
    syn = pd.read_csv(case["syn"])
    for c in cats:                      # labels as strings, a missing value as NaN
        for df in (real, syn):
            df[c] = df[c].map(lambda v: np.nan if pd.isna(v) else "c%g" % v).astype(object)
    meta = {"columns": {c: {"sdtype": "categorical" if c in cats else "numerical"}
                        for c in names}}
    rep = QualityReport()
    rep.generate(real, syn, meta, verbose=False)
    sh = rep.get_details("Column Shapes")
    tr = rep.get_details("Column Pair Trends")
    iscat = lambda c: c in cats
    both_cat = tr.apply(lambda r: iscat(r["Column 1"]) and iscat(r["Column 2"]), axis=1)
    res = {
        "ks_complement": sh.loc[sh["Metric"] == "KSComplement", "Score"].mean(),
        "tv_complement": sh.loc[sh["Metric"] == "TVComplement", "Score"].mean(),
        "corr_similarity": tr.loc[tr["Metric"] == "CorrelationSimilarity", "Score"].mean(),
        "contingency_similarity": tr.loc[(tr["Metric"] == "ContingencySimilarity") & both_cat,
                                         "Score"].mean(),
        "quality": rep.get_score()}
    # pMSE: synthpop utility.gen's logit design (main effects), statsmodels' GLM
    import statsmodels.api as sm
    real = pd.read_csv(case["real"])
    syn = pd.read_csv(case["syn"])
    df = pd.concat([real, syn], ignore_index=True)
    t = np.r_[np.zeros(len(real)), np.ones(len(syn))]
    parts = [pd.Series(np.ones(len(df)), name="const")]
    for c in names:
        col = df[c]
        if col.nunique(dropna=False) <= 1:
            continue
        if c in cats:
            col = col.fillna(-1.0).astype("category")
            parts.append(pd.get_dummies(col, drop_first=True, dtype=float))
        else:
            parts.append(col.fillna(0.0))
            if col.isna().any():
                parts.append(col.isna().astype(float).rename(c + "_NA"))
    D = pd.concat(parts, axis=1).to_numpy(float)
    # records in a category (or a missing numeric value) of one file only are separated:
    # the likelihood's supremum gives them p = label; the GLM is fitted on the others
    sep = np.zeros(len(df), bool)
    while True:
        new = sep.copy()
        for c in names:
            key = df[c].fillna(-1.0) if c in cats else df[c].isna()
            rest = pd.DataFrame({"k": key[~sep], "t": t[~sep]})
            g = rest.groupby("k")["t"].nunique()
            one = set(g.index[g == 1])
            if c not in cats:
                one &= {True}
            new |= key.isin(one).to_numpy() & ~sep
        if (new == sep).all():
            break
        sep = new
    c = len(syn) / len(df)
    k = D.shape[1]
    p = t.copy()
    # a dummy whose records were all separated is 0 on the fitted records: left out of the
    # GLM (it changes no fitted value; statsmodels' IRLS on a singular design loses digits)
    keep = np.abs(D[~sep]).max(axis=0) > 0
    Dk = D[~sep][:, keep]
    fit = sm.GLM(t[~sep], Dk, family=sm.families.Binomial()).fit(tol=1e-14, maxiter=500)
    p[~sep] = fit.predict(Dk)
    res["pmse"] = float(np.mean((np.asarray(p) - c) ** 2))
    # a second reference: Newton-Raphson in float64 on the design with its non-constant
    # columns standardised (the same fitted values; a well-conditioned Hessian)
    Z = Dk.copy()
    sd = Z.std(axis=0)
    Z[:, sd > 0] = (Z[:, sd > 0] - Z[:, sd > 0].mean(axis=0)) / sd[sd > 0]
    beta = np.zeros(Z.shape[1])
    for _ in range(40):
        q = 1 / (1 + np.exp(-Z @ beta))
        H = Z.T @ (Z * (q * (1 - q))[:, None])
        beta = beta + np.linalg.lstsq(H, Z.T @ (t[~sep] - q), rcond=None)[0]
    p2 = t.copy()
    p2[~sep] = 1 / (1 + np.exp(-Z @ beta))
    res["pmse_newton"] = float(np.mean((p2 - c) ** 2))
    res["pmse_ratio"] = res["pmse"] / ((k - 1) * (1 - c) ** 2 * c / len(df))
    # CI overlap of the case's regression: statsmodels OLS conf_int
    y, xs = case["regression"]
    ci = []
    for F in (real, syn):
        d = F[[*xs, y]].dropna()
        ols = sm.OLS(d[y].to_numpy(), sm.add_constant(d[xs].to_numpy(), has_constant="add"))
        ci.append(np.asarray(ols.fit().conf_int(0.05)))
    (lo, hi), (ls, us) = ci[0].T, ci[1].T
    inter = np.minimum(hi, us) - np.maximum(lo, ls)
    res["ci_overlap"] = float(np.mean(0.5 * (inter / (hi - lo) + inter / (us - ls))))
    out[case["label"]] = {k: (None if v is None or v != v else float(v))
                          for k, v in res.items()}
json.dump(out, open(sys.argv[2], "w"))
"""


def _marginal(X: np.ndarray, n: int, rng: np.random.Generator, digits: int | None = None,
              missing: float = 0.0) -> np.ndarray:
    """A release drawn column by column (bootstrap of each column), optionally rounded to
    ``digits`` significant digits and with a share of values missing."""
    Y = np.column_stack([X[rng.integers(0, X.shape[0], n), j] for j in range(X.shape[1])])
    if digits is not None:
        with np.errstate(divide="ignore", invalid="ignore"):
            mag = np.where(Y != 0, np.floor(np.log10(np.abs(Y))), 0)
        Y = np.round(Y / 10 ** (mag - digits + 1)) * 10 ** (mag - digits + 1)
    if missing:
        Y[rng.random(Y.shape) < missing] = np.nan
    return Y


def _mixed(n: int, rng: np.random.Generator, shift: float = 0.0,
           missing: float = 0.05, numeric: int = 3) -> np.ndarray:
    g1 = rng.integers(0, 2, n)
    g2 = (g1 * 2 + rng.integers(0, 4, n)) % 6
    g3 = rng.integers(0, 12, n)
    cols = [g1, g2, g3]
    age = np.round(rng.normal(40 + 5 * g1 + shift, 12, n))
    cols.append(age)
    cols.append(np.round(rng.gamma(2, 800, n) + 100 * age, -1))
    cols.append(np.round(rng.normal(37, 6, n) - 2 * g1, 0))
    if numeric > 3:
        cols.append(rng.normal(0, 1, n) + 0.01 * age)
    X = np.column_stack(cols).astype(np.float64)
    if missing:
        X[rng.random(X.shape) < missing] = np.nan
    return X


def cases(rng: np.random.Generator) -> list[dict]:
    from sdcdist.data.refdata import reference_file
    out = []
    for name in ("census", "tarragona"):
        df = pd.read_csv(reference_file(name))
        X = df.to_numpy(np.float64)
        names = list(df.columns)
        out.append({"label": name, "X": X, "Y": _marginal(X, X.shape[0], rng, digits=3),
                    "names": names, "cats": [], "regression": (names[-1], names[:3])})
    hh = pd.read_csv(reference_file("household"))
    cats = ["urbrur", "roof", "walls", "water", "electcon", "relat", "sex", "hhcivil"]
    names = cats + ["age", "expend", "income", "savings"]
    X = hh[names].to_numpy(np.float64)
    X[rng.random(X.shape) < 0.03] = np.nan
    out.append({"label": "household", "X": X, "Y": _marginal(X, 4000, rng, missing=0.03),
                "names": names, "cats": cats,
                "regression": ("expend", ["age", "income", "savings"])})
    mixed = ["g1", "g2", "g3", "age", "income", "hours"]
    for label, n, m in (("mixed_a", 3000, 2500), ("mixed_b", 800, 1200)):
        X = _mixed(n, rng)
        Y = _mixed(m, rng, shift=2.0)
        out.append({"label": label, "X": X, "Y": Y, "names": mixed, "cats": mixed[:3],
                    "regression": ("income", ["age", "hours"])})
    return out


def sdcdist_figures(case: dict, client=None) -> dict[str, float]:
    from sdcdist.metrics import measure
    y, xs = case["regression"]
    res = measure(case["X"], case["Y"], [*QUALITY, "pmse", "pmse_ratio", "ci_overlap"],
                  columns=case["names"], categorical=case["cats"], client=client,
                  options={"regression": f"{y} ~ {' + '.join(xs)}"})
    return {k: float(v.value) for k, v in res.items()}


def agreement(peers: str) -> bool:
    rng = np.random.default_rng(20260501)
    cs = cases(rng)
    ok = True
    with tempfile.TemporaryDirectory() as tmp:
        job = []
        for c in cs:
            paths = {}
            for which, A in (("real", c["X"]), ("syn", c["Y"])):
                p = Path(tmp) / f"{c['label']}_{which}.csv"
                pd.DataFrame(A, columns=c["names"]).to_csv(p, index=False, float_format="%.17g")
                paths[which] = str(p)
            job.append({"label": c["label"], "names": c["names"], "cats": c["cats"],
                        "regression": c["regression"], **paths})
        (Path(tmp) / "job.json").write_text(json.dumps(job))
        (Path(tmp) / "peer.py").write_text(PEER)
        t0 = time.perf_counter()
        subprocess.run([peers, str(Path(tmp) / "peer.py"), str(Path(tmp) / "job.json"),
                        str(Path(tmp) / "out.json")], check=True)
        t_peer = time.perf_counter() - t0
        theirs = json.loads((Path(tmp) / "out.json").read_text())
        if os.environ.get("SYNUTIL_PEER_JSON"):
            Path(os.environ["SYNUTIL_PEER_JSON"]).write_text(json.dumps(theirs))
    t0 = time.perf_counter()
    ours = {c["label"]: sdcdist_figures(c) for c in cs}
    t_ours = time.perf_counter() - t0
    names = [*QUALITY, "pmse", "pmse_ratio", "ci_overlap"]
    for c in cs:                           # the float Newton's pMSE beside sdcdist's
        ours[c["label"]]["pmse_newton"] = ours[c["label"]]["pmse"]
    names.append("pmse_newton")
    print(f"{'file':10s} " + " ".join(f"{n:>22s}" for n in names))
    worst = {n: 0.0 for n in names}
    for c in cs:
        row = []
        for n in names:
            a, b = ours[c["label"]][n], theirs[c["label"]][n]
            if b is None or np.isnan(a):
                same = (b is None) and np.isnan(a)
                d = 0.0 if same else float("inf")
            else:
                d = abs(a - b) / (abs(b) if n.startswith("pmse") else 1.0)
            if n == "pmse_newton":
                row.append(f"{d:.1e}")
                worst[n] = max(worst[n], d)
                continue
            worst[n] = max(worst[n], d)
            row.append(f"{a:.15f}" if not np.isnan(a) else "nan")
        print(f"{c['label']:10s} " + " ".join(f"{v:>22s}" for v in row))
    print("largest difference (relative for pmse*): " +
          ", ".join(f"{n} {worst[n]:.2e}" for n in names))
    for n in names:
        tol = {"pmse": 1e-8, "pmse_ratio": 1e-8, "ci_overlap": 1e-9}.get(n, 1e-12)
        if worst[n] > tol:
            ok = False
            print(f"  DIFFERS: {n} ({worst[n]:.3e} > {tol})")
    print(f"time for the five files: sdcdist {t_ours:.1f} s, peers (SDMetrics + "
          f"statsmodels) {t_peer:.1f} s")
    return ok


def speed(size: int, peers: str, workers: int) -> None:
    from sdcdist.metrics import measure
    rng = np.random.default_rng(7)
    X = _mixed(size, rng, numeric=4)
    Y = _mixed(size, rng, shift=1.0, numeric=4)
    names = ["g1", "g2", "g3", "age", "income", "hours", "z"]
    client = None
    if workers:
        from dask.distributed import Client, LocalCluster
        client = Client(LocalCluster(n_workers=workers, threads_per_worker=1,
                                     processes=True, dashboard_address=None))
    print(f"load average before: {os.getloadavg()}")
    t0 = time.perf_counter()
    res = measure(X, Y, QUALITY, columns=names, categorical=names[:3], client=client)
    t = time.perf_counter() - t0
    print(f"sdcdist quality measures, {size:,} x 7 records each "
          f"({'in process' if not workers else f'{workers} workers'}): {t:.1f} s  " +
          ", ".join(f"{k} {v.value:.6f}" for k, v in res.items()))
    print(f"load average after: {os.getloadavg()}")
    if client is not None:
        client.close()
    if peers:
        with tempfile.TemporaryDirectory() as tmp:
            for which, A in (("real", X), ("syn", Y)):
                np.save(Path(tmp) / f"{which}.npy", A)
            code = (
                "import sys, time, warnings, numpy as np, pandas as pd\n"
                "warnings.simplefilter('ignore')\n"
                "from sdmetrics.reports.single_table import QualityReport\n"
                f"names = {names!r}\n"
                "def load(w):\n"
                "    df = pd.DataFrame(np.load(sys.argv[1] + f'/{w}.npy'), columns=names)\n"
                "    for c in names[:3]:\n"
                "        df[c] = df[c].map(lambda v: np.nan if v != v else 'c%g' % v)\n"
                "    return df\n"
                "real, syn = load('real'), load('syn')\n"
                "meta = {'columns': {c: {'sdtype': 'categorical' if c in names[:3] else "
                "'numerical'} for c in names}}\n"
                "t0 = time.perf_counter(); r = QualityReport()\n"
                "r.generate(real, syn, meta, verbose=False)\n"
                "print(f'SDMetrics QualityReport: {time.perf_counter() - t0:.1f} s, "
                "quality {r.get_score():.6f} (contingency tables on 50,000-row samples)')\n")
            (Path(tmp) / "p.py").write_text(code)
            subprocess.run([peers, str(Path(tmp) / "p.py"), tmp], check=False)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--peers", default=str(HERE / ".venv-peers-synth" / "bin" / "python"))
    ap.add_argument("--size", type=int, default=1_000_000)
    ap.add_argument("--workers", type=int, default=0)
    ap.add_argument("--skip-speed", action="store_true")
    a = ap.parse_args()
    ok = agreement(a.peers)
    if not a.skip_speed:
        speed(a.size, a.peers, a.workers)
    return 0 if ok else 1


if __name__ == "__main__":
    raise SystemExit(main())
