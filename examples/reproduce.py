"""Re-run the papers' studies and print the published values beside sdcdist's.

    python examples/reproduce.py                 # quick: a few cells of each family (minutes)
    python examples/reproduce.py --full          # every cell of both studies
    python examples/reproduce.py --paper dmt --full --markdown
    python examples/reproduce.py --paper dmt --cells micir:3,micz:5
    python examples/reproduce.py --readme [CUBES]  # the tables of examples/README.md

``dmt`` is Table 2 of Domingo-Ferrer, Mateo-Sanz and Torra (``dmt_table2.yaml``,
109 rows: IL, DLD, PLD, ID1, Score and its rank); ``ywc`` is Tables 1-3 of
Yancey, Winkler and Creecy on the same Census file (``ywc_domingo.yaml``:
IL1s, s0, s2, the re-identification rate and the scores with the l metric).
The published values are in ``examples/paper_values/*.csv``, transcribed from
the papers. The script starts a local Dask cluster (``--workers``), audits the
spec restricted to the chosen cells (``--out DIR`` keeps the cubes, ``--cube``
reads one already made instead), and prints for each paper the table and the
agreement: the share of rows within 10 % and 20 % of the paper, the Pearson
correlation of each compared column, and for Table 2 Spearman's rank
correlation of Score (the paper's ranking against sdcdist's, over the rows
compared).
"""

from __future__ import annotations

import argparse
import csv
import math
import re
import sys
import tempfile
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
PAPERS = {
    "dmt": {"spec": "dmt_table2.yaml", "values": "dmt_table2.csv",
            "title": "Table 2 of Domingo-Ferrer, Mateo-Sanz and Torra (Census)",
            # column in the paper's CSV -> metric of the cube, scale paper = scale x cube
            "columns": {"IL": ("IL", 1.0), "DLD": ("DLD", 1.0), "PLD": ("PLD", 1.0),
                        "ID1": ("ID1", 1.0), "Score": ("Score", 1.0)},
            "agreement": ("DLD", "PLD", "IL", "ID1", "Score"),
            "rank": "Score",
            "quick": {"rankswap": [5, 10, 15], "noise": [0.1], "jpeg": [10, 80],
                      "resample": [3], "distr": [], "micmul": [3], "mic2mul": [5],
                      "mic3mul": [7], "mic4mul": [4], "micir": [3, 7], "micz": [5, 7],
                      "micpcp": [3, 7]}},
    "ywc": {"spec": "ywc_domingo.yaml", "values": "ywc_table3.csv",
            "title": "Tables 1-3 of Yancey, Winkler and Creecy (Domingo = Census data), l metric",
            "columns": {"IL1s": ("IL1s", 1.0), "s0": ("s0", 1.0), "s2": ("s2", 1.0),
                        "reid_l": ("PLD", 0.01), "Ascore_l": ("Ascore", 1.0),
                        "Sscore_l": ("Sscore", 1.0)},
            "agreement": ("reid_l", "IL1s", "s0", "s2", "Ascore_l", "Sscore_l"),
            "rank": "Sscore_l",
            "quick": {"rankswap": [5, 15], "corrnoise": [0.1], "mixnoise": [0.1],
                      "mixnoise_scaled": [0.2]}},
}


#: Evident misprints of the papers, corrected by :func:`paper_rows` (``raw=False``):
#: (paper, label, column) -> (value to use, why). YWC's Table 3 scores are
#: ``100 (s + reid) / 2`` with the s of Table 1 and the rates of Table 2 in every
#: other cell.
CORRECTIONS = {
    ("ywc", "rnkswp15", "Sscore_l"): (20.67, "printed 30.67; 100 (0.069 + 0.3444) / 2 = 20.67"),
    ("ywc", "rnkswp05", "Sscore_d"): (45.66, "printed 46.66; 100 (0.027 + 0.8861) / 2 = 45.66"),
}
#: YWC Table 2 has a row add05 and no add01, Tables 1 and 3 the reverse; Table 3's six add01
#: scores are Table 1's add01 s0, s1, s2 with Table 2's add05 rates, so those rates are add01's.
MOVED = {("ywc", "add05"): "add01"}


def paper_rows(paper: str, *, raw: bool = False) -> list[dict[str, Any]]:
    """The transcribed values of ``paper``: one dict per row (numbers as float, '' as NaN).

    ``raw=False`` applies :data:`CORRECTIONS` and :data:`MOVED` (the rates of YWC's
    Table 2 row add05 go to row add01, and row add05 is dropped)."""
    path = HERE / "paper_values" / PAPERS[paper]["values"]
    out = []
    with path.open(newline="") as fh:
        for r in csv.DictReader(fh):
            row: dict[str, Any] = {"label": r["label"], "method": r["method"],
                                   "param": float(r["param"]) if r["param"] else math.nan}
            for k, v in r.items():
                if k not in row:
                    row[k] = float(v) if v != "" else math.nan
            out.append(row)
    if raw:
        return out
    by_label = {r["label"]: r for r in out}
    for (p, src), dst in MOVED.items():
        if p == paper and src in by_label:
            moved = by_label.pop(src)
            for k in ("reid_d", "reid_l"):
                by_label[dst][k] = moved[k]
    for (p, label, col), (value, _) in CORRECTIONS.items():
        if p == paper:
            by_label[label][col] = value
    return [r for r in out if r["label"] in by_label]


def parse_cells(text: str) -> dict[str, list[float]]:
    """``"micir:3,micz:5,distr"`` -> ``{"micir": [3], "micz": [5], "distr": []}``."""
    cells: dict[str, list[float]] = {}
    for item in filter(None, (x.strip() for x in text.split(","))):
        name, _, p = item.partition(":")
        cells.setdefault(name, [])
        if p:
            cells[name].append(float(p))
    return cells


def restricted_spec(paper: str, cells: dict[str, list[float]] | None):
    """The paper's spec with only ``cells`` (method -> params; None = every cell)."""
    import yaml

    from sdcdist.audit import parse_spec
    path = HERE / PAPERS[paper]["spec"]
    doc = yaml.safe_load(path.read_text())
    if cells is not None:
        unknown = set(cells) - {m["name"] for m in doc["methods"]}
        if unknown:
            raise SystemExit(f"{paper}: no method {sorted(unknown)} in {path.name}")
        methods = []
        for m in doc["methods"]:
            if m["name"] not in cells:
                continue
            if "params" in m:
                want = [p for p in m["params"] if any(math.isclose(p, q) for q in
                                                      cells[m["name"]])]
                if not want:
                    continue
                m = dict(m, params=want)
            methods.append(m)
        doc["methods"] = methods
    return parse_spec(doc, base_dir=path.parent)


def audit(paper: str, cells: dict[str, list[float]] | None, out: Path, client) -> Path:
    """Run the (restricted) spec of ``paper`` into the cube ``out``."""
    from sdcdist.audit import run_audit
    res = run_audit(restricted_spec(paper, cells), out, client=client)
    if res.computed != res.total:
        raise SystemExit(f"{paper}: {res.total - res.computed} cells were not computed")
    return out


def compare(paper: str, cube_path: Path | str) -> list[dict[str, Any]]:
    """Paper rows that the cube has, each with ``sdcdist <column>`` beside the paper's."""
    import xarray as xr

    from sdcdist.cube import cell_table
    table = cell_table(xr.open_zarr(str(cube_path), consolidated=False))
    cols = PAPERS[paper]["columns"]
    have = {}
    for (m, p), r in table.iterrows():
        have[(m, None if math.isnan(p) else round(p, 6))] = r
    rows = []
    for row in paper_rows(paper):
        key = (row["method"], None if math.isnan(row["param"]) else round(row["param"], 6))
        if key not in have and row["method"] == "distr":
            key = next((k for k in have if k[0] == "distr"), key)
        if key not in have:
            continue
        r = dict(row)
        for col, (metric, scale) in cols.items():
            r[f"sdcdist {col}"] = float(have[key][metric]) * scale \
                if metric in have[key] else math.nan
        rows.append(r)
    return rows


def _pairs(rows: list[dict], col: str) -> tuple[list[float], list[float]]:
    ok = [r for r in rows if not (math.isnan(r[col]) or math.isnan(r[f"sdcdist {col}"]))]
    return [r[col] for r in ok], [r[f"sdcdist {col}"] for r in ok]


def agreement(paper: str, rows: list[dict]) -> dict[str, dict[str, float]]:
    """Per compared column: rows, share within 10 % / 20 % of the paper, Pearson r; for
    the ranking column also Spearman's rho of the paper's values against sdcdist's."""
    import numpy as np
    from scipy.stats import pearsonr, spearmanr
    out: dict[str, dict[str, float]] = {}
    for col in PAPERS[paper]["agreement"]:
        p, s = _pairs(rows, col)
        if not p:
            continue
        p_, s_ = np.asarray(p), np.asarray(s)
        rel = np.abs(s_ - p_) / np.maximum(np.abs(p_), 1e-12)
        res = {"rows": float(p_.size), "within10": float(np.mean(rel <= 0.10)),
               "within20": float(np.mean(rel <= 0.20)), "pearson": math.nan,
               "spearman": math.nan}
        if p_.size > 2 and np.ptp(p_) > 0 and np.ptp(s_) > 0:
            res["pearson"] = float(pearsonr(p_, s_)[0])
            res["spearman"] = float(spearmanr(p_, s_)[0])
        out[col] = res
    return out


def _fmt(v: float) -> str:
    return "-" if isinstance(v, float) and math.isnan(v) else f"{v:.2f}" \
        if abs(v) >= 1 or v == 0 else f"{v:.3f}"


def table_text(paper: str, rows: list[dict], *, markdown: bool = False) -> str:
    """Rows of paper vs sdcdist values, in the paper's order, with sdcdist's rank by the
    ranking column among the rows compared."""
    cols = list(PAPERS[paper]["columns"])
    rank_col = PAPERS[paper]["rank"]
    order = sorted(range(len(rows)), key=lambda i: (math.isnan(rows[i][f"sdcdist {rank_col}"]),
                                                    rows[i][f"sdcdist {rank_col}"]))
    srank = {i: n + 1 for n, i in enumerate(order)}
    prank = {i: n + 1 for n, i in enumerate(sorted(
        range(len(rows)), key=lambda i: (math.isnan(rows[i][rank_col]), rows[i][rank_col])))}
    head = ["cell"] + [f"{c} paper / sdcdist" for c in cols] + [f"{rank_col} rank"]
    lines = []
    for i, r in enumerate(rows):
        cell = r["label"]
        vals = [f"{_fmt(r[c])} / {_fmt(r[f'sdcdist {c}'])}" for c in cols]
        lines.append([cell, *vals, f"{prank[i]} / {srank[i]}"])
    if markdown:
        out = ["| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
        out += ["| " + " | ".join(x) + " |" for x in lines]
        return "\n".join(out)
    widths = [max(len(x[j]) for x in [head, *lines]) for j in range(len(head))]
    return "\n".join("  ".join(x[j].ljust(widths[j]) for j in range(len(head)))
                     for x in [head, *lines])


def agreement_text(paper: str, agr: dict[str, dict[str, float]]) -> str:
    lines = []
    for col, a in agr.items():
        s = (f"{col}: {int(a['rows'])} rows, {100 * a['within10']:.0f} % within 10 %, "
             f"{100 * a['within20']:.0f} % within 20 % of the paper, Pearson r = "
             f"{a['pearson']:.3f}")
        if col == PAPERS[paper]["rank"]:
            s += f", Spearman rho (ranking) = {a['spearman']:.3f}"
        lines.append(s)
    return "\n".join(lines)


# ---------------------------------------------------------------------------
# the tables of examples/README.md, generated from the example cubes
#
# Each table of the README sits between ``<!-- table: NAME -->`` and ``<!-- /table -->``.
# ``summarize`` reads an example's cube into a small summary (the cube's per-metric
# fingerprints and the figures its tables show), kept in ``SUMMARY_FILE`` beside the
# example fingerprints; ``readme_tables`` renders the tables from the summary and
# ``write_readme`` puts them into the README. ``python tests/data/make_fingerprints.py
# --all`` regenerates the fingerprints, the summary and the README tables in one command;
# tests/test_reproduce.py checks that the README shows what the summary gives and that
# the summary was made from the cubes the fingerprints describe.

README = HERE / "README.md"
SUMMARY_FILE = HERE.parent / "tests" / "data" / "example_tables.json"
VALUES_FILE = HERE.parent / "tests" / "data" / "example_values_fingerprints.json"

#: The synthetic study's key sets (examples/synthetic_reid.yaml): k0 = (TAXINC, WSALVAL),
#: k1, k2 = the paper's four-attribute sets, k3 = all nine quasi-identifiers.
_REID_K = (0, 1, 2, 3)

#: table name -> (example spec, ``sdcdist report`` arguments: --by and --metrics), or
#: (example spec, {"columns": [(header, metric, key set or None), ...]}): chosen figures
#: in the cube's cell order, a key set's own figure where one is named, no ranks
README_TABLES: dict[str, tuple[str, dict[str, Any]]] = {
    "synthetic_reid_linkage": ("synthetic_reid", {"columns": [
        *[(f"DLD k{k}", "DLD", k) for k in _REID_K], ("DRL2 k0", "DRL2", 0),
        ("DRL2 k3", "DRL2", 3), *[(f"PLD k{k}", "PLD", k) for k in _REID_K],
        ("CRL", "CRL", None)]}),
    "synthetic_reid_utility": ("synthetic_reid", {"columns": [
        ("DLD (mean of key sets)", "DLD", None), *[(m, m, None) for m in (
            "dcr_train_median", "dcr_baseline", "nndr_median", "pmse", "pmse_ratio",
            "ks_complement", "corr_similarity", "quality", "ci_overlap", "IL1s")]]}),
    "synthetic_reid_household": ("synthetic_reid_household", {"columns": [
        (m, m, None) for m in (
            "DLD", "PLD", "uniques", "kviol3", "ER", "so_uni", "so_multi", "linkability",
            "inference", "pmse", "pmse_ratio", "tv_complement", "contingency_similarity",
            "quality")]}),
    "household": ("household", {"by": "ER", "metrics": [
        "uniques", "kviol5", "IR_max", "ER", "changed", "hellinger", "IL1s", "DLD"]}),
    "household_risks_identity": ("household_risks", {"by": "HR_ER", "metrics": [
        "uniques", "ER", "suda_share", "dis_suda_mean", "msu_total", "HR_mean", "HR_max",
        "modrisk_tau1", "modrisk_gr1"]}),
    "household_risks_attacks": ("household_risks", {"by": "so_multi", "metrics": [
        "so_uni", "linkability", "inference", "DLD", "PLD"]}),
    "household_risks_attribute": ("household_risks", {"by": "hellinger", "metrics": [
        "ldiv_distinct", "ldiv_distinct_fail", "ldiv_entropy_fail", "ldiv_recursive_fail",
        "tclose", "tclose_fail", "beta_enhanced_fail", "delta_disc_fail", "cap",
        "dcr_train_median", "nndr_median", "changed", "IL1s"]}),
}


def _frame_to_json(df) -> dict[str, Any]:
    """A ranking table as JSON (floats exact: JSON keeps their shortest repr)."""
    out = df.reset_index()
    return {"columns": [str(c) for c in out.columns],
            "rows": [[None if (isinstance(v, float) and math.isnan(v)) else
                      (v.item() if hasattr(v, "item") else v) for v in row]
                     for row in out.itertuples(index=False)]}


def _frame_from_json(obj: dict[str, Any]):
    import pandas as pd
    df = pd.DataFrame(obj["rows"], columns=obj["columns"])
    for c in df.columns:
        if c not in ("method", "param_name", "replicates"):
            df[c] = df[c].astype(float)
    return df.set_index(["method", "param"])


def column_table(cube, columns: list[tuple[str, str, int | None]]):
    """Chosen figures of every finished cell, in the cube's order: ``(header, metric,
    key set)`` is the metric's value (``key set`` None) or its value on that key set, each
    the mean over the cell's replicates (index (method, param), as a ranking table)."""
    import pandas as pd

    from sdcdist.cube import cell_table, select_dataset
    cube = select_dataset(cube)
    table = cell_table(cube)
    metrics = [str(m) for m in cube["metric"].values]
    methods = [str(m) for m in cube["method"].values]
    params = [float(p) for p in cube["param"].values]
    ks = cube["keyset_value"].mean("replicate", skipna=True).load().values
    out = pd.DataFrame(index=table.index)
    out["param_name"] = table["param_name"]
    out["replicates"] = table["replicates"]
    for header, metric, keyset in columns:
        if keyset is None:
            out[header] = table[metric]
            continue
        mi = metrics.index(metric)
        out[header] = [float(ks[methods.index(m), params.index(p), mi, keyset])
                       for m, p in out.index]
    return out


def summarize(name: str, cube_path: Path | str) -> dict[str, Any]:
    """The summary of example ``name``'s cube: its fingerprints and its README tables."""
    from sdcdist.cube import open_cube
    from sdcdist.report import ranking_table
    from sdcdist.testing import cube_fingerprints
    import json
    cube = open_cube(str(cube_path))
    tables = {t: _frame_to_json(column_table(cube, a["columns"]) if "columns" in a else
                                ranking_table(cube, by=a["by"], metrics=a["metrics"]))
              for t, (spec, a) in README_TABLES.items() if spec == name}
    # as tests/test_examples.py compares them: PS and PS2 by their values alone
    values_only = json.loads(VALUES_FILE.read_text())
    fps: dict[str, Any] = dict(cube_fingerprints(cube_path))
    values = cube_fingerprints(cube_path, variables=("value", "keyset_value", "excluded"))
    fps.update({m: ["values", values[m]] for m in values_only if m in values})
    return {"fingerprints": fps, "tables": tables}


def update_summary(cubes: dict[str, Path | str]) -> dict[str, Any]:
    """Rewrite the summaries of the examples in ``cubes`` (name -> cube path)."""
    import json
    summary = json.loads(SUMMARY_FILE.read_text()) if SUMMARY_FILE.exists() else {}
    for name, path in cubes.items():
        if any(spec == name for spec, _ in README_TABLES.values()):
            summary[name] = summarize(name, path)
    SUMMARY_FILE.write_text(json.dumps(summary, indent=1, sort_keys=True) + "\n")
    return summary


def readme_tables(summary: dict[str, Any] | None = None) -> dict[str, str]:
    """Table name -> its Markdown, rendered from the summary."""
    import json

    from sdcdist.report import markdown_table
    if summary is None:
        summary = json.loads(SUMMARY_FILE.read_text())
    out = {}
    for t, (spec, _) in README_TABLES.items():
        if spec not in summary or t not in summary[spec]["tables"]:
            raise SystemExit(f"{SUMMARY_FILE.name} has no table {t!r} of {spec!r}: run "
                             "python tests/data/make_fingerprints.py " + spec)
        out[t] = markdown_table(_frame_from_json(summary[spec]["tables"][t])).rstrip("\n")
    return out


_MARK = re.compile(r"(<!-- table: (?P<name>[\w-]+) -->\n)(?P<body>.*?)(\n<!-- /table -->)", re.S)


def readme_sections(text: str) -> dict[str, str]:
    """The generated sections of the README text: name -> Markdown between the markers."""
    return {m["name"]: m["body"] for m in _MARK.finditer(text)}


def write_readme(tables: dict[str, str] | None = None, path: Path = README) -> bool:
    """Put the generated tables into the README between their markers; whether it changed."""
    tables = readme_tables() if tables is None else tables
    text = path.read_text()
    missing = set(tables) - set(readme_sections(text))
    if missing:
        raise SystemExit(f"{path.name} has no markers for {sorted(missing)}")
    new = _MARK.sub(lambda m: m.group(1) + tables.get(m["name"], m["body"]) + m.group(4), text)
    if new != text:
        path.write_text(new)
    return new != text


def main(argv: list[str] | None = None, *, client=None) -> dict[str, Any]:
    """Command line; returns ``{paper: {"rows": [...], "agreement": {...}}}``.

    ``client``: an existing Dask client (tests); otherwise a local cluster is started.
    """
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--paper", choices=[*PAPERS, "all"], default="all")
    mode = ap.add_mutually_exclusive_group()
    mode.add_argument("--full", action="store_true", help="every cell of the studies")
    mode.add_argument("--cells", help="only these cells, e.g. micir:3,micz:5,distr")
    ap.add_argument("--cube", help="compare this cube (of one --paper) instead of auditing")
    ap.add_argument("--out", help="folder to keep the cubes in (default: a temporary one)")
    ap.add_argument("--workers", type=int, default=2, help="local cluster workers")
    ap.add_argument("--markdown", action="store_true", help="tables in Markdown")
    ap.add_argument("--readme", nargs="?", const="", metavar="CUBES",
                    help="write the tables of examples/README.md from the summary "
                         f"(tests/data/{SUMMARY_FILE.name}); with a folder of example cubes "
                         "(NAME.zarr, as make_fingerprints.py --keep leaves them), first "
                         "rewrite the summaries of those cubes")
    args = ap.parse_args(argv)
    if args.readme is not None:
        sys.path.insert(0, str(HERE.parent))
        import sdcdist  # noqa: F401  (first: pins the SIMD code paths before numpy loads)
        if args.readme:
            cubes = {p.stem: p for p in sorted(Path(args.readme).glob("*.zarr"))}
            update_summary(cubes)
        changed = write_readme()
        print(f"{README.name}: tables {'rewritten' if changed else 'unchanged'}")
        return {}
    papers = list(PAPERS) if args.paper == "all" else [args.paper]
    if args.cube and len(papers) != 1:
        ap.error("--cube compares one cube: give --paper dmt or --paper ywc")
    sys.path.insert(0, str(HERE.parent))
    import sdcdist  # noqa: F401  (first: pins the SIMD code paths before numpy loads)

    results: dict[str, Any] = {}
    with tempfile.TemporaryDirectory() as tmp:
        outdir = Path(args.out or tmp)
        outdir.mkdir(parents=True, exist_ok=True)
        cubes = {}
        if args.cube:
            cubes[papers[0]] = Path(args.cube)
        else:
            own = None
            if client is None:
                from distributed import Client, LocalCluster
                own = LocalCluster(n_workers=args.workers, threads_per_worker=1,
                                   dashboard_address=":0")
                client = Client(own)
            try:
                for paper in papers:
                    cells = None if args.full else parse_cells(args.cells) if args.cells \
                        else PAPERS[paper]["quick"]
                    if cells is not None:
                        cells = {m: p for m, p in cells.items()
                                 if m in {x["method"] for x in paper_rows(paper)}}
                        if not cells:
                            continue
                    cubes[paper] = audit(paper, cells, outdir / f"{paper}.zarr", client)
            finally:
                if own is not None:
                    client.close()
                    own.close()
        for paper, path in cubes.items():
            rows = compare(paper, path)
            agr = agreement(paper, rows)
            results[paper] = {"rows": rows, "agreement": agr}
            print(f"\n## {PAPERS[paper]['title']}: {len(rows)} rows\n")
            print(table_text(paper, rows, markdown=args.markdown))
            print()
            print(agreement_text(paper, agr))
    return results


if __name__ == "__main__":
    main()
