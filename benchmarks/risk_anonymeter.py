"""The three criteria (singling out, linkability, inference): sdcdist against anonymeter 1.1.0
at 100,000 and 1,000,000 records, and sdcdist's distance linkage (DLD) as a stronger
linkability attack.

    .venv/bin/python benchmarks/risk_anonymeter.py [--sizes 100000,1000000] [--timeout 900]
                                                   [--attacks so_uni,so_multi,...]

A seeded synthetic mixed file of n records (age, income, hours, sex, region); 20% of the
records are held out as the control set, the other 80% are masked (noise on the three
numbers, 10% of the regions swapped) and released. Each attack runs with 500 attacks and
the same options on both sides (singling out: univariate, and multivariate on 3 columns;
linkability: the attacker's files [age, sex, region] and [income, hours], 1 neighbour;
inference: region from the other columns). sdcdist runs each in a fresh process of this
environment, in-process (one core), twice: cold (the first call: loading its compiled
kernels and lazily imported modules counts) and warm (the same call again, the same figures);
anonymeter runs each in a fresh process of the benchmark environment
(benchmarks/.venv-peers-synth, never sdcdist's dependency) with its default n_jobs. Wall
time and peak memory (maximum resident set of the process) are those of the attack alone,
imports and data loading excluded on both sides; the ratio is anonymeter's time over
sdcdist's cold time (column "ratio") and over its warm time (column "warm"); anonymeter runs
once, its numba distance compiled inside its clock. An anonymeter run that does not finish within --timeout seconds is reported as
such (and, at the larger size, not started again for an attack that did not finish at the
smaller one). Risks are shown with their 95% interval, and the baselines' risks.

The same definitions. Beside sdcdist's default, each singling-out attack has a row
``=anon`` run with anonymeter 1.1.0's control scale (``so_control_scale: sizes``), against
the same anonymeter run; "in CI" says whether sdcdist's risk lies in anonymeter's interval.
anonymeter fits its model of the control's size to ``len()`` of the tuple of query counts
at each subset size (the number of queries, 500 at every size), not to the number that
single out, so its scale is always (n_c + 1)/(n_o + 1): 0.25 here. After its clock, the
anonymeter process prints the scale it applied, the scale its own fit gives when it counts
the queries that single out, and (n up to 200,000) the scale measured directly: the same
queries on four fresh samples of the population at each size (the file's generator with
other seeds). sdcdist's default (the model fitted to the exact expected successes) is the
definition in docs/catalog.md; anonymeter's 0.25 is a defect, and the note under the table
gives the evidence.

anonymeter as correct as its interface allows: the singling-out evaluator gets seed 1; the
inference evaluator has no seed and samples with numpy's global generator, which is seeded
(1). Its inference baseline aligns the guesses of random released rows to the targets by row
label (``reindex_like``): on a release that keeps the original's row labels it would guess a
target's own released value wherever the labels meet. It is given the release in random row
order (labels 0..n-1), so those guesses are random records' secrets; it still scores only
the targets whose label its sample holds (about n_attacks/n of them, the others count as
wrong), so its baseline is near 0 whatever the data. sdcdist's baseline guesses a random
released record's secret for every target, as anonymeter's documentation describes it.

The figures of the two tools are estimates from their own random queries and targets
(neither can draw the other's; anonymeter's univariate singling-out queries also follow polars'
group_by order, which varies from run to run at the same seed): two independent estimates
with intervals this wide fall outside each other's about once in six. docs/catalog.md gives
the figures of four seeds and, for inference, the risk expected over 3,000 targets.

DLD (distance linkage on the three numeric columns, % of released records linked to their
own original record) is computed on the same released and original files: a link there
re-identifies a person outright, where the linkability attack only joins the attacker's
two files through a released record.
"""

from __future__ import annotations

import argparse
import json
import resource
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np
import pandas as pd

HERE = Path(__file__).resolve().parent
PEERS = HERE / ".venv-peers-synth" / "bin" / "python"
COLS = ["age", "income", "hours", "sex", "region"]
CATS = {"sex": ["f", "m"], "region": ["centre", "east", "north", "south", "west"]}
AUX = [["age", "sex", "region"], ["income", "hours"]]
ATTACKS = ["so_uni", "so_multi", "linkability", "inference"]

ANONYMETER = r"""
import json, resource, sys, time, warnings
warnings.simplefilter("ignore")
import numpy as np
import pandas as pd
import anonymeter.evaluators as ev
import anonymeter.evaluators.singling_out_evaluator as so
attack, d, here = sys.argv[1], sys.argv[2], sys.argv[3]
ori, syn, ctl = (pd.read_csv(f"{d}/{k}.csv") for k in ("original", "released", "control"))
# the release in random row order, labelled 0..n-1: the inference baseline aligns its
# guesses to the targets by row label, and must not meet a target's own released record
syn = syn.sample(frac=1.0, random_state=7).reset_index(drop=True)
np.random.seed(1)          # InferenceEvaluator has no seed: it samples with numpy's global one
got = {}
gen = so._generate_singling_out_queries
def keep(**kw):
    got["q"] = gen(**kw)
    return got["q"]
so._generate_singling_out_queries = keep
t = time.perf_counter()
if attack in ("so_uni", "so_multi"):
    e = ev.SinglingOutEvaluator(ori, syn, n_attacks=500, n_cols=3, control=ctl, seed=1)
    e.evaluate(mode="univariate" if attack == "so_uni" else "multivariate")
elif attack == "linkability":
    e = ev.LinkabilityEvaluator(ori, syn, aux_cols=(["age", "sex", "region"],
                                ["income", "hours"]), n_attacks=500, n_neighbors=1,
                                control=ctl).evaluate()
else:
    e = ev.InferenceEvaluator(ori, syn, aux_cols=["age", "income", "hours", "sex"],
                              secret="region", n_attacks=500, control=ctl).evaluate()
r = e.risk()
b = e.risk(baseline=True)
out = {"seconds": time.perf_counter() - t, "risk": r.value, "lo": r.ci[0], "hi": r.ci[1],
       "base": b.value, "peak_mb": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024}
if attack.startswith("so_"):
    # after the clock: the control scale anonymeter applied, the one its own fit gives when it
    # counts the queries that single out (not len() of the counts), and the one measured on
    # fresh samples of the population the file was drawn from
    import polars as pl
    sys.path.insert(0, here)
    import risk_anonymeter as ra
    q = got["q"]
    def singles(df):
        return int((np.array(so._evaluate_queries(df, q)) == 1).sum())
    raw = singles(e._control)
    out["scale_anonymeter"] = float(e._n_control) / raw if raw else float("nan")
    rng = np.random.default_rng(1)
    sizes, succ = [], []
    for n_rows in np.linspace(min(1000, len(e._control)), len(e._control), 10).astype(int):
        for _ in range(5):
            sub = e._control.sample(n_rows, with_replacement=False, seed=int(rng.integers(2**31)))
            sizes.append(n_rows)
            succ.append(singles(sub))
    f = so._fit_model(np.array(sizes), np.array(succ))
    out["scale_fit_successes"] = float(f(len(e._ori)) / f(len(e._control)))
    n = len(ori) + len(ctl)
    if n <= 200_000:
        big, small = [], []
        for k in range(1, 5):
            o, _, c = ra.synthetic(n, seed=1000 + k)
            big.append(singles(pl.DataFrame(o).unique()))
            small.append(singles(pl.DataFrame(c).unique()))
        out["scale_fresh"] = float(np.mean(big) / np.mean(small))
print(json.dumps(out))
"""


def synthetic(n: int, seed: int = 20261127) -> tuple[pd.DataFrame, pd.DataFrame, pd.DataFrame]:
    """(original, released, control): the masked 80% and its release, the held-out 20%."""
    rng = np.random.default_rng(seed)
    region = rng.choice(np.array(["north", "south", "east", "west", "centre"]), n,
                        p=[.3, .25, .2, .15, .1])
    sex = rng.choice(np.array(["f", "m"]), n)
    age = rng.integers(18, 90, n).astype(float)
    hours = np.clip(np.round(rng.normal(38, 8, n)), 0, 80)
    income = np.round(np.exp(rng.normal(10, 0.6, n)) * (1 + (age - 18) / 100), 0)
    d = pd.DataFrame({"age": age, "income": income, "hours": hours, "sex": sex,
                      "region": region})
    held = np.zeros(n, bool)
    held[rng.choice(n, size=n // 5, replace=False)] = True
    ori, ctl = d[~held].reset_index(drop=True), d[held].reset_index(drop=True)
    syn = ori.copy()
    syn["age"] = syn["age"] + rng.integers(-2, 3, len(syn))
    syn["income"] = np.round(syn["income"] * rng.normal(1, 0.05, len(syn)), 0)
    syn["hours"] = syn["hours"] + rng.integers(-1, 2, len(syn))
    swap = rng.random(len(syn)) < 0.1
    syn.loc[swap, "region"] = rng.permutation(syn.loc[swap, "region"].to_numpy())
    return ori, syn, ctl


def _codes(d: pd.DataFrame) -> np.ndarray:
    d = d.copy()
    for c, labels in CATS.items():
        d[c] = d[c].map({v: i for i, v in enumerate(labels)})
    return d[COLS].to_numpy(np.float64)


def child_sdcdist(attack: str, folder: str, extra: str = "{}") -> None:
    """Run the attack twice in one process: cold (its compiled kernels and lazily imported
    modules load inside the clock) and warm (the same call again: the same figures)."""
    from sdcdist.metrics import measure
    O, S, C = (_codes(pd.read_csv(f"{folder}/{k}.csv"))
               for k in ("original", "released", "control"))

    def once() -> dict:
        if attack == "DLD":
            r = measure(O, S, ["DLD"], columns=COLS, keysets=[["age", "income", "hours"]])
            return {"risk": r["DLD"].value / 100.0}
        opts = {"attack_n": 500, "so_n_cols": 3, "link_aux": AUX, "link_neighbors": 1,
                "infer_secret": "region", **json.loads(extra)}
        names = [attack, attack + "_lo", attack + "_hi", attack + "_base"]
        r = measure(O, S, names, columns=COLS, categorical=list(CATS), control=C,
                    options=opts, seed=1)
        out = {"risk": r[attack].value, "lo": r[attack + "_lo"].value,
               "hi": r[attack + "_hi"].value, "base": r[attack + "_base"].value}
        if attack.startswith("so_"):
            out["scale"] = r[attack].info.get("control_correction")
        return out

    t = time.perf_counter()
    out = once()
    out["seconds"] = time.perf_counter() - t
    out["peak_mb"] = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    t = time.perf_counter()
    again = once()
    out["warm"] = time.perf_counter() - t
    if any(again[k] != out[k] for k in again):
        raise SystemExit("the warm run gave other figures than the cold one")
    print(json.dumps(out))


def _run(cmd: list[str], timeout: float) -> dict | None:
    try:
        p = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout)
    except subprocess.TimeoutExpired:
        return None
    lines = [x for x in p.stdout.splitlines() if x.startswith("{")]
    if p.returncode != 0 or not lines:
        return {"error": (p.stderr.strip().splitlines() or ["failed"])[-1][:120]}
    return json.loads(lines[-1])


def _fig(r: dict | None) -> str:
    if r is None or "error" in r:
        return "-"
    if "lo" not in r:
        return f"{r['risk']:.3f}"
    return f"{r['risk']:.3f} [{r['lo']:.3f}, {r['hi']:.3f}]"


def _ok(r: dict | None) -> bool:
    return r is not None and "error" not in r


def _base(r: dict | None) -> str:
    return f"{r['base']:.3f}" if _ok(r) and "base" in r else "-"


def _within(mine: dict | None, theirs: dict | None) -> str:
    if not (_ok(mine) and _ok(theirs)) or "lo" not in mine:
        return ""
    return "yes" if theirs["lo"] <= mine["risk"] <= theirs["hi"] else "NO"


#: sdcdist rows run with anonymeter's definitions beside the default (same anonymeter run)
SAME_DEFS = {"so_uni": {"so_control_scale": "sizes"}, "so_multi": {"so_control_scale": "sizes"}}


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--sizes", default="100000,1000000")
    ap.add_argument("--timeout", type=float, default=900.0)
    ap.add_argument("--attacks", default=",".join(ATTACKS + ["DLD"]),
                    help="rows to run, among " + ", ".join(ATTACKS + ["DLD"]))
    ap.add_argument("--child", nargs="+", metavar="ARG", help=argparse.SUPPRESS)
    a = ap.parse_args(argv)
    if a.child:
        child_sdcdist(*a.child)
        return 0
    if not PEERS.exists():
        print(f"the benchmark environment {PEERS} is missing (anonymeter 1.1.0)")
        return 1
    header = (f"{'attack':<15} {'n':>9} {'sdcdist s':>9} {'warm s':>7} {'MB':>5} "
              f"{'anonymeter s':>13} {'MB':>5} {'ratio':>7} {'warm':>6}  "
              f"{'sdcdist risk [95% CI]':<22} {'base':>5}  "
              f"{'anonymeter risk [95% CI]':<22} {'base':>5}  in CI")
    rows, notes = [], []
    dnf: set[str] = set()
    print(header, flush=True)
    for n in (int(x) for x in a.sizes.split(",")):
        with tempfile.TemporaryDirectory() as tmp:
            for k, d in zip(("original", "released", "control"), synthetic(n)):
                d.to_csv(f"{tmp}/{k}.csv", index=False)
            for attack in [x.strip() for x in a.attacks.split(",") if x.strip()]:
                runs = [(attack, _run([sys.executable, __file__, "--child", attack, tmp],
                                      a.timeout))]
                if attack in SAME_DEFS:
                    runs.append((attack + " =anon", _run(
                        [sys.executable, __file__, "--child", attack, tmp,
                         json.dumps(SAME_DEFS[attack])], a.timeout)))
                if attack == "DLD":
                    theirs, t_text = None, "(no peer)"
                elif attack in dnf:
                    theirs, t_text = None, "not run (dnf at smaller n)"
                else:
                    theirs = _run([str(PEERS), "-c", ANONYMETER, attack, tmp, str(HERE)],
                                  a.timeout)
                    if theirs is None:
                        dnf.add(attack)
                        t_text = f"did not finish in {a.timeout / 60:.0f} min"
                    elif "error" in theirs:
                        t_text = "failed: " + theirs["error"]
                    else:
                        t_text = f"{theirs['seconds']:.1f}"
                for label, mine in runs:
                    ok = _ok(mine)
                    ratio = (f"{theirs['seconds'] / mine['seconds']:.1f}x"
                             if ok and _ok(theirs) else
                             (f">{a.timeout / mine['seconds']:.0f}x" if ok and attack in dnf
                              and theirs is None and t_text.startswith("did") else "-"))
                    warm = (f"{theirs['seconds'] / mine['warm']:.1f}x"
                            if ok and _ok(theirs) else "-")
                    their_mb = f"{theirs['peak_mb']:.0f}" if _ok(theirs) else "-"
                    line = (f"{'DLD (sdcdist)' if attack == 'DLD' else label:<15} {n:>9} "
                            f"{mine['seconds'] if ok else float('nan'):>9.2f} "
                            f"{mine['warm'] if ok else float('nan'):>7.2f} "
                            f"{mine['peak_mb'] if ok else float('nan'):>5.0f} "
                            f"{t_text:>13} {their_mb:>5} "
                            f"{ratio:>7} {warm:>6}  {_fig(mine):<22} "
                            f"{_base(mine):>5}  "
                            f"{_fig(theirs):<22} "
                            f"{_base(theirs):>5}"
                            f"  {_within(mine, theirs)}")
                    if not ok:
                        line += f"  sdcdist: {'timeout' if mine is None else mine['error']}"
                    rows.append(line)
                    print(line, flush=True)
                if attack in SAME_DEFS and _ok(theirs) and all(_ok(m) for _, m in runs):
                    notes.append(
                        f"{attack} at n={n}: the control's successes scaled by "
                        f"{runs[0][1]['scale']:.3f} (sdcdist: the model fitted to the "
                        f"successes), {runs[1][1]['scale']:.4f} (=anon: (n_c + 1)/(n_o + 1)); "
                        f"anonymeter applied {theirs['scale_anonymeter']:.4f}, its own fit "
                        f"gives {theirs['scale_fit_successes']:.3f} when it counts the queries "
                        "that single out" + (
                            f", and fresh samples of the population give "
                            f"{theirs['scale_fresh']:.2f}" if "scale_fresh" in theirs else ""))
    print()
    print(header)
    print("\n".join(rows))
    print("\n".join(notes))
    print("sdcdist s: cold (the first call in a fresh process: compiled kernels and lazily "
          "imported modules load inside the clock); warm s: the same call again. ratio: "
          "anonymeter's time over sdcdist's cold time; warm: over its warm time. anonymeter's "
          "time is one call (its compiled distance is built inside its clock).")
    print("=anon: sdcdist with anonymeter 1.1.0's control scale (so_control_scale: sizes). "
          "in CI: sdcdist's risk within anonymeter's 95% interval. base: the baseline's "
          "risk (anonymeter's inference baseline scores only the targets whose row label its "
          "sample of released rows happens to hold, about n_attacks/n of them: near 0 "
          "whatever the data). Each tool draws its own queries and targets: the figures of "
          "one seed are independent estimates, and anonymeter's univariate queries follow "
          "polars' group_by order, which varies from run to run at the same seed.")
    print("DLD: share of released records distance linkage links to their own original "
          "record (the numeric columns); the linkability row of the same n is the share of "
          "targets whose two halves meet in one released record, less the control's.")
    return 0


if __name__ == "__main__":
    sys.exit(main())
