"""Try probabilistic-linkage conventions against a paper's published rates.

    python examples/conventions/search.py ywc --stage em        # YWC Table 2 rates
    python examples/conventions/search.py dmt --stage tolerance # DMT Table 2 PLD column

For each convention of the stage's grid, every compared cell of the paper is
masked as the audit masks it (replicate 0: the papers ran each method once)
and linked with :mod:`prl_lab`; the script prints, per convention, the mean
absolute difference to the paper (in percentage points), the share of cells
within 20 % of the paper, the correlation, and the values. ``--csv FILE``
writes every value. The stages are the searches of ``examples/README.md``.

YWC: all 13 variables, every cell of their Table 2 (the d-metric column for
conventions with ``method: d``, the l-metric column for ``l``). DMT: PLD is
the average over the key sets of the first 1..7 columns, on the cells of
``--cells`` (default: one or two parameters of each family, 13 cells).
"""

from __future__ import annotations

import argparse
import csv
import itertools
import math
import sys
import time
from dataclasses import asdict
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))
from prl_lab import (ROOT, Convention, _em, compare, content_orders,  # noqa: E402
                     masked_files, pair_weights, refit, score)

C = Convention


def stage_grid(paper: str, stage: str) -> list[Convention]:
    """The conventions of a search stage."""
    methods = ("d", "l")
    if stage == "baseline":
        return [C(method=m) for m in methods] + [C(method=m, m_oracle=True) for m in methods]
    if stage == "tolerance":
        ts = (0.01, 0.02, 0.05, 0.1, 0.2, 0.3, 0.5) if paper == "ywc" else (0.02, 0.05, 0.1, 0.2,
                                                                           0.3)
        return [C(method=m, t=t, m_oracle=o) for m in methods for t in ts for o in (False, True)]
    if stage == "em":
        return [C(method=m, t=t, p_max=pm, constrain=co, m_start=ms, u_fixed=uf, p_fixed=pf)
                for m in methods for t in (0.05, 0.1, 0.2)
                for pm, co, ms, uf, pf in itertools.product((True, False), (True, False),
                                                            (0.9, 0.99), (False, True),
                                                            (False, True))
                if not (pf and not pm)]
    if stage == "refit":
        return [C(method=m, t=t, refit=r) for m in methods for t in (0.1, 0.2, 0.3)
                for r in (0, 20)]
    if stage == "fine":
        return [C(method="l", t=t) for t in (0.25, 0.3, 0.35, 0.4)] + \
            [C(method="d", t=t, refit=20) for t in (0.25, 0.3, 0.35, 0.4)]
    if stage == "max":
        return [C(method="d", t=t, base="max", refit=r, u_fixed=uf) for t in (0.2, 0.25, 0.3)
                for r in (0, 20) for uf in (False, True)] + \
            [C(method="l", t=t, base="max", refit=r) for t in (0.25, 0.3) for r in (0, 20)]
    # DMT links 7 key sets per cell: its later stages keep sdcdist's t and plain EM
    ts, oracle = ((0.1, 0.2, 0.3), (False, True)) if paper == "ywc" else ((0.05,), (False,))
    if stage == "base":
        return [C(method=m, t=t, base=b, m_oracle=o) for m in methods
                for t in ts for b in ("a", "b", "max", "min") for o in oracle]
    if stage == "assign":
        return [C(method=m, t=t, assign=a, count=n, weights=w, m_oracle=o)
                for m in methods for t in ts
                for a, n in (("one2one", "all"), ("one2one", "w>0"), ("one2one", "p>0.5"),
                             ("best_b", "all"), ("best_a", "all"))
                for w in ("interp", "binary") for o in oracle]
    raise SystemExit(f"unknown stage {stage!r}")


PAPER_CELLS = {
    # YWC Table 2 label -> (method, param); the l and d columns. Table 2's "add05" is the
    # file of add01 in Tables 1 and 3: Table 3's add01 scores are Table 1's add01 s0, s1,
    # s2 with Table 2's add05 rates, all six to the printed digits
    "ywc": {"rnkswp05": ("rankswap", 5), "rnkswp10": ("rankswap", 10),
            "rnkswp15": ("rankswap", 15), "add05": ("corrnoise", 0.01),
            "add10": ("corrnoise", 0.1), "mixadd01": ("mixnoise", 0.01),
            "mixadd05": ("mixnoise", 0.05), "mixadd10": ("mixnoise", 0.1),
            "mixadd20": ("mixnoise", 0.2), "scalmixadd01": ("mixnoise_scaled", 0.01),
            "scalmixadd05": ("mixnoise_scaled", 0.05), "scalmixadd10": ("mixnoise_scaled", 0.1),
            "scalmixadd20": ("mixnoise_scaled", 0.2)},
}
DMT_QUICK = "rankswap:5,rankswap:15,noise:0.1,jpeg:80,resample:3,distr,micmul:3,mic2mul:5," \
            "mic3mul:7,mic4mul:4,micir:3,micz:5,micpcp:3"


def paper_targets(paper: str, cells: str | None) -> dict[tuple[str, float], dict[str, float]]:
    """(method, param) -> {"d": rate, "l": rate} (YWC) or {"*": PLD in %} (DMT)."""
    vals = ROOT / "examples" / "paper_values"
    out: dict[tuple[str, float], dict[str, float]] = {}
    if paper == "ywc":
        rows = {r["label"]: r for r in csv.DictReader((vals / "ywc_table3.csv").open())}
        for lab, key in PAPER_CELLS["ywc"].items():
            out[(key[0], float(key[1]))] = {"d": 100 * float(rows[lab]["reid_d"]),
                                            "l": 100 * float(rows[lab]["reid_l"])}
        return out
    want = {}
    for item in (cells or DMT_QUICK).split(","):
        name, _, p = item.partition(":")
        want.setdefault(name, set()).add(float(p) if p else math.nan)
    for r in csv.DictReader((vals / "dmt_table2.csv").open()):
        p = float(r["param"]) if r["param"] else math.nan
        if r["method"] in want and any(q == p or (math.isnan(q) and math.isnan(p))
                                       for q in want[r["method"]]):
            out[(r["method"], p)] = {"*": float(r["PLD"])}
    return out


def run(paper: str, grid: list[Convention], cells: str | None, out_csv: str | None) -> None:
    targets = paper_targets(paper, cells)
    sel: dict[str, list[float]] = {}
    for m, p in targets:
        sel.setdefault(m, [])
        if not math.isnan(p):
            sel[m].append(p)
    spec = "ywc_domingo" if paper == "ywc" else "dmt_table2"
    keysets = [list(range(13))] if paper == "ywc" else [list(range(s)) for s in range(1, 8)]
    got: dict[int, dict[tuple[str, float], float]] = {i: {} for i in range(len(grid))}
    groups: dict[tuple, list[int]] = {}
    for i, c in enumerate(grid):
        groups.setdefault((c.method, c.t, c.base), []).append(i)
    t0 = time.time()
    for meth, p, _, X, Xm, _ in masked_files(spec, sel, replicates=1):
        key = (meth, math.nan if meth == "distr" else float(p))
        tkey = next(k for k in targets if k[0] == meth and (k[1] == key[1] or meth == "distr"))
        for (method, t, base), idx in groups.items():
            per: dict[int, list[float]] = {i: [] for i in idx}
            for keys in keysets:
                D, T, ag = compare(X, Xm, keys, grid[idx[0]])
                order = content_orders(X, Xm, keys, method)
                fits: dict[tuple, tuple] = {}
                for i in idx:
                    c = grid[i]
                    ek = (c.p_max, c.constrain, c.m_start, c.u_fixed, c.p_fixed, c.m_oracle)
                    if ek not in fits:
                        m, u, pm = _em(ag, c)
                        if c.m_oracle:
                            m = np.clip([np.diag(a).mean() for a in ag], 1e-9, 1 - 1e-9)
                            u = np.clip([a.mean() for a in ag], 1e-9, 1 - 1e-9)
                        fits[ek] = (m, u, float(np.log(pm) - np.log1p(-pm)))
                    m, u, lpo = fits[ek]
                    W = pair_weights(D, T, ag, m, u, c)
                    if c.refit:
                        W = refit(D, T, ag, W, c, order)
                    per[i].append(100 * score(W, lpo, c, order))
            for i in idx:
                got[i][tkey] = float(np.mean(per[i]))
        print(f"  {meth} {p:g}: done ({time.time() - t0:.0f} s)", file=sys.stderr)
    rows = []
    for i, c in enumerate(grid):
        col = c.method if paper == "ywc" else "*"
        ks = [k for k in targets if k in got[i]]
        pv = np.array([targets[k][col] for k in ks])
        sv = np.array([got[i][k] for k in ks])
        mae = float(np.mean(np.abs(sv - pv)))
        w20 = float(np.mean(np.abs(sv - pv) <= 0.2 * np.abs(pv)))
        r = float(np.corrcoef(pv, sv)[0, 1]) if np.ptp(sv) > 0 else math.nan
        rows.append((mae, w20, r, c, ks, sv))
    rows.sort(key=lambda x: x[0])
    for mae, w20, r, c, ks, sv in rows:
        diff = {k: v for k, v in asdict(c).items() if v != getattr(Convention(), k)}
        print(f"MAE {mae:6.2f}  within20 {w20:4.2f}  r {r:6.3f}  {diff}  "
              + " ".join(f"{v:.1f}" for v in sv))
    if paper == "ywc":
        print("paper d:", " ".join(f"{targets[k]['d']:.1f}" for k in rows[0][4]))
        print("paper l:", " ".join(f"{targets[k]['l']:.1f}" for k in rows[0][4]))
    else:
        print("paper:  ", " ".join(f"{targets[k]['*']:.1f}" for k in rows[0][4]))
    print("cells:  ", " ".join(f"{m}:{p:g}" for m, p in rows[0][4]))
    if out_csv:
        with open(out_csv, "w", newline="") as fh:
            w = csv.writer(fh, lineterminator="\n")
            w.writerow([*asdict(Convention()), "MAE", "within20", "r",
                        *[f"{m}:{p:g}" for m, p in rows[0][4]]])
            for mae, w20, r, c, ks, sv in rows:
                w.writerow([*asdict(c).values(), f"{mae:.3f}", f"{w20:.3f}", f"{r:.4f}",
                            *[f"{v:.3f}" for v in sv]])


def main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("paper", choices=("ywc", "dmt"))
    ap.add_argument("--stage", default="baseline",
                    choices=("baseline", "tolerance", "em", "refit", "fine", "max", "base", "assign"))
    ap.add_argument("--cells", help="DMT cells, e.g. micir:3,rankswap:10,distr")
    ap.add_argument("--csv", help="write every value here")
    args = ap.parse_args(argv)
    run(args.paper, stage_grid(args.paper, args.stage), args.cells, args.csv)


if __name__ == "__main__":
    main()
