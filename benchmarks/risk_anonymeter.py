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
environment, in-process (one core); anonymeter runs each in a fresh process of the
benchmark environment (benchmarks/.venv-peers-synth, never sdcdist's dependency) with its
default n_jobs. Wall time and peak memory (maximum resident set of the process) are those
of the attack alone, data loading excluded; an anonymeter run that does not finish within
--timeout seconds is reported as such (and, at the larger size, not started again for an
attack that did not finish at the smaller one). Risks are shown with their 95% interval.

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
import pandas as pd
import anonymeter.evaluators as ev
attack, d = sys.argv[1], sys.argv[2]
ori, syn, ctl = (pd.read_csv(f"{d}/{k}.csv") for k in ("original", "released", "control"))
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
print(json.dumps({"seconds": time.perf_counter() - t, "risk": r.value, "lo": r.ci[0],
                  "hi": r.ci[1],
                  "peak_mb": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024}))
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


def child_sdcdist(attack: str, folder: str) -> None:
    from sdcdist.metrics import measure
    O, S, C = (_codes(pd.read_csv(f"{folder}/{k}.csv"))
               for k in ("original", "released", "control"))
    t = time.perf_counter()
    if attack == "DLD":
        r = measure(O, S, ["DLD"], columns=COLS, keysets=[["age", "income", "hours"]])
        out = {"risk": r["DLD"].value / 100.0}
    else:
        opts = {"attack_n": 500, "so_n_cols": 3, "link_aux": AUX, "link_neighbors": 1,
                "infer_secret": "region"}
        names = [attack, attack + "_lo", attack + "_hi"]
        r = measure(O, S, names, columns=COLS, categorical=list(CATS), control=C,
                    options=opts, seed=1)
        out = {"risk": r[attack].value, "lo": r[attack + "_lo"].value,
               "hi": r[attack + "_hi"].value}
    out["seconds"] = time.perf_counter() - t
    out["peak_mb"] = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
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


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--sizes", default="100000,1000000")
    ap.add_argument("--timeout", type=float, default=900.0)
    ap.add_argument("--attacks", default=",".join(ATTACKS + ["DLD"]),
                    help="rows to run, among " + ", ".join(ATTACKS + ["DLD"]))
    ap.add_argument("--child", nargs=2, metavar=("ATTACK", "FOLDER"), help=argparse.SUPPRESS)
    a = ap.parse_args(argv)
    if a.child:
        child_sdcdist(*a.child)
        return 0
    if not PEERS.exists():
        print(f"the benchmark environment {PEERS} is missing (anonymeter 1.1.0)")
        return 1
    header = (f"{'attack':<12} {'n':>9} {'sdcdist s':>10} {'MB':>6} {'anonymeter s':>13} "
              f"{'MB':>6} {'ratio':>7}  {'sdcdist risk [95% CI]':<26} "
              f"{'anonymeter risk [95% CI]':<26}")
    rows = []
    dnf: set[str] = set()
    print(header, flush=True)
    for n in (int(x) for x in a.sizes.split(",")):
        with tempfile.TemporaryDirectory() as tmp:
            for k, d in zip(("original", "released", "control"), synthetic(n)):
                d.to_csv(f"{tmp}/{k}.csv", index=False)
            for attack in [x.strip() for x in a.attacks.split(",") if x.strip()]:
                mine = _run([sys.executable, __file__, "--child", attack, tmp], a.timeout)
                if attack == "DLD":
                    theirs, t_text = None, "(no peer)"
                elif attack in dnf:
                    theirs, t_text = None, "not run (dnf at smaller n)"
                else:
                    theirs = _run([str(PEERS), "-c", ANONYMETER, attack, tmp], a.timeout)
                    if theirs is None:
                        dnf.add(attack)
                        t_text = f"did not finish in {a.timeout / 60:.0f} min"
                    elif "error" in theirs:
                        t_text = "failed: " + theirs["error"]
                    else:
                        t_text = f"{theirs['seconds']:.1f}"
                ok = mine is not None and "error" not in mine
                ratio = (f"{theirs['seconds'] / mine['seconds']:.1f}x"
                         if ok and theirs and "error" not in theirs else
                         (f">{a.timeout / mine['seconds']:.0f}x" if ok and attack in dnf
                          and theirs is None and t_text.startswith("did") else "-"))
                their_mb = theirs["peak_mb"] if theirs and "error" not in theirs else float("nan")
                line = (f"{'DLD (sdcdist)' if attack == 'DLD' else attack:<12} {n:>9} "
                        f"{mine['seconds'] if ok else float('nan'):>10.2f} "
                        f"{mine['peak_mb'] if ok else float('nan'):>6.0f} "
                        f"{t_text:>13} {their_mb:>6.0f} "
                        f"{ratio:>7}  {_fig(mine):<26} {_fig(theirs):<26}")
                if not ok:
                    line += f"  sdcdist: {'timeout' if mine is None else mine['error']}"
                rows.append(line)
                print(line, flush=True)
    print()
    print(header)
    print("\n".join(rows))
    print("DLD: share of released records distance linkage links to their own original "
          "record (the numeric columns); the linkability row of the same n is the share of "
          "targets whose two halves meet in one released record, less the control's.")
    return 0


if __name__ == "__main__":
    sys.exit(main())
