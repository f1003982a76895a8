"""The release report: one self-contained HTML file on the cell chosen for release.

``sdcdist report CUBE --html R.html --chosen METHOD:PARAM[:REPLICATE]`` writes it, in the
spirit of sdcMicro's ``report()``. It holds, in order:

1. the data summary of the original file (:mod:`sdcdist.describe`): per-variable
   summaries, category frequencies, k-anonymity violations and individual risk on the
   keys, and (``internal`` variant only) the records of highest individual risk;
2. the spec, the metric conventions and the release rules the cube records;
3. the ranking of every cell with its acceptability (:mod:`sdcdist.rules`);
4. the recommended and the chosen cells;
5. original against released for the chosen cell: each variable's distribution (a
   histogram or category bars, both files side by side) and the difference of the
   association matrices (Pearson's r for two numeric columns, Cramér's V for two
   categorical ones, the correlation ratio for a mixed pair);
6. each risk family's figures from the cube for the chosen cell;
7. how to reproduce the release: the sdcdist version, the seed and spawn key, the
   ``sdcdist release`` and ``sdcdist mask`` commands, the fingerprints of the input, the
   spec and the release (the released file is regenerated and checked against the
   fingerprint the cube stores, :func:`sdcdist.release.plan_release`).

The page loads nothing: styles are inline and the plots are PNG images embedded as base64.
The ``external`` variant has no record-level content (no record numbers, no key
combinations of individual records, no per-record risk).
"""

from __future__ import annotations

import base64
import html
import io
import json
import math
import os
import warnings
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np

from .errors import SdcInputError, unknown_name_error

__all__ = ["VARIANTS", "parse_chosen", "association_matrix", "risk_families",
           "build_report", "write_report", "comparison"]

VARIANTS = ("internal", "external")

#: readable names of the risk families (the module a risk metric lives in)
FAMILY_NAMES = {
    "risk": "distance linkage and interval disclosure",
    "prl": "probabilistic record linkage",
    "frequency": "frequency risk (k-anonymity, individual risk)",
    "attribute": "attribute disclosure",
    "suda": "SUDA",
    "synthetic": "synthetic data (DCR, NNDR, CAP)",
    "household": "household risk",
    "modrisk": "model-based risk",
    "attacks": "attacks (singling out, linkability, inference)",
}

#: at most this many variables get a distribution plot
MAX_PLOTS = 40


def parse_chosen(text: str) -> tuple[str, float, int]:
    """``METHOD:PARAM[:REPLICATE]`` as (method, param, replicate)."""
    parts = str(text).split(":")
    bad = SdcInputError(f"--chosen {text!r} is not METHOD:PARAM[:REPLICATE]; write e.g. "
                        "'rankswap:10' or 'noise:0.5:1' (replicate 0 by default)")
    if len(parts) not in (2, 3) or not parts[0].strip():
        raise bad
    try:
        param = float(parts[1])
        rep = int(parts[2]) if len(parts) == 3 else 0
    except ValueError:
        raise bad from None
    if not math.isfinite(param) or rep < 0:
        raise bad
    return parts[0].strip(), param, rep


# --------------------------------------------------------------------------- numbers

def _cramers_v(a: np.ndarray, b: np.ndarray) -> float:
    ia = np.unique(a, return_inverse=True)[1].reshape(-1)
    ib = np.unique(b, return_inverse=True)[1].reshape(-1)
    r, c = int(ia.max()) + 1, int(ib.max()) + 1
    if min(r, c) < 2:
        return math.nan
    t = np.zeros((r, c))
    np.add.at(t, (ia, ib), 1.0)
    n = t.sum()
    e = np.outer(t.sum(1), t.sum(0)) / n
    chi2 = float(((t - e) ** 2 / e).sum())
    return math.sqrt(chi2 / n / (min(r, c) - 1))


def _eta(x: np.ndarray, g: np.ndarray) -> float:
    inv = np.unique(g, return_inverse=True)[1].reshape(-1)
    tot = float(((x - x.mean()) ** 2).sum())
    if tot == 0:
        return math.nan
    cnt = np.bincount(inv)
    means = np.bincount(inv, weights=x) / cnt
    between = float((cnt * (means - x.mean()) ** 2).sum())
    return math.sqrt(between / tot)


def _pearson(x: np.ndarray, y: np.ndarray) -> float:
    sx, sy = x.std(), y.std()
    if sx == 0 or sy == 0:
        return math.nan
    return float(((x - x.mean()) * (y - y.mean())).mean() / (sx * sy))


def association_matrix(values: np.ndarray, categorical: Sequence[bool]) -> np.ndarray:
    """Pairwise association of the columns (records with both values present): Pearson's
    r (numeric pair), Cramér's V (categorical pair), the correlation ratio eta (mixed)."""
    p = values.shape[1]
    out = np.eye(p)
    for i in range(p):
        for j in range(i + 1, p):
            x, y = values[:, i], values[:, j]
            ok = np.isfinite(x) & np.isfinite(y)
            x, y = x[ok], y[ok]
            if x.size < 2:
                v = math.nan
            elif categorical[i] and categorical[j]:
                v = _cramers_v(x, y)
            elif categorical[i]:
                v = _eta(y, x)
            elif categorical[j]:
                v = _eta(x, y)
            else:
                v = _pearson(x, y)
            out[i, j] = out[j, i] = v
    return out


def risk_families(cube: Any, method: str, param: float, replicate: int,
                  recommended: tuple[str, float] | None) -> list[dict[str, Any]]:
    """The cube's risk metrics grouped by family, each with the chosen replicate's value,
    the chosen cell's mean over replicates, the recommended cell's mean, and the range
    of the cell means over the grid."""
    from .metrics import REGISTRY
    metrics = [str(m) for m in cube["metric"].values]
    kinds = [str(k) for k in cube["metric_kind"].values]
    value = np.asarray(cube["value"].values, dtype=float)      # (M, P, K, R)
    done = np.asarray(cube["done"].values) == 1
    methods = [str(m) for m in cube["method"].values]
    params = [float(p) for p in cube["param"].values]
    mi, pi = methods.index(method), params.index(float(param))
    families: dict[str, list[dict[str, Any]]] = {}
    for k, (name, kind) in enumerate(zip(metrics, kinds)):
        if kind != "risk":
            continue
        m = REGISTRY.get(name)
        mod = m.func.__module__.replace("sdcdist.metrics.", "") if m is not None else "other"
        fam = FAMILY_NAMES.get(mod.split(".")[0], mod)
        v = value[:, :, k, :]
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", RuntimeWarning)     # cells without values
            means = np.nanmean(np.where(done, v, np.nan), -1)
        rec = math.nan
        if recommended is not None:
            rec = float(means[methods.index(recommended[0]),
                              params.index(float(recommended[1]))])
        fin = means[np.isfinite(means)]
        families.setdefault(fam, []).append({
            "metric": name, "unit": getattr(m, "unit", "") if m is not None else "",
            "ascending": bool(getattr(m, "ascending", True)),
            "chosen": float(v[mi, pi, replicate]), "chosen_mean": float(means[mi, pi]),
            "recommended_mean": rec,
            "grid_min": float(fin.min()) if fin.size else math.nan,
            "grid_max": float(fin.max()) if fin.size else math.nan})
    return [{"family": f, "metrics": rows} for f, rows in families.items()]


# --------------------------------------------------------------------------- plots

def _plt() -> Any:
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    return plt


def _png(plt: Any, fig: Any) -> str:
    buf = io.BytesIO()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", UserWarning)
        fig.tight_layout()
    fig.savefig(buf, format="png", dpi=80, metadata={"Software": None})
    plt.close(fig)
    return base64.b64encode(buf.getvalue()).decode("ascii")


def _labels(col: np.ndarray, labels: Sequence[str]) -> dict[str, int]:
    ok = np.isfinite(col) & (col >= 0)
    counts = np.bincount(col[ok].astype(np.int64), minlength=len(labels))
    out = {str(labels[i]) if i < len(labels) else str(i): int(c)
           for i, c in enumerate(counts)}
    miss = int((~ok).sum())
    if miss:
        out["(missing)"] = miss
    return out


#: the distribution plots drawn last, by content (the page's comparison and the two
#: report variants of one cell draw the same plots; drawing is most of their time)
_DRAWN: dict[tuple, str] = {}
_DRAWN_MAX = 256


def _distribution_png(name: str, a: np.ndarray, b: np.ndarray, cat: bool,
                      labels_a: Sequence[str], labels_b: Sequence[str], title_b: str) -> str:
    import hashlib
    key = (name, hashlib.sha256(np.ascontiguousarray(a, dtype=np.float64).tobytes())
           .hexdigest(), hashlib.sha256(np.ascontiguousarray(b, dtype=np.float64).tobytes())
           .hexdigest(), bool(cat), tuple(map(str, labels_a)), tuple(map(str, labels_b)),
           title_b)
    hit = _DRAWN.get(key)
    if hit is None:
        hit = _draw_distribution(name, a, b, cat, labels_a, labels_b, title_b)
        if len(_DRAWN) >= _DRAWN_MAX:
            _DRAWN.pop(next(iter(_DRAWN)))
        _DRAWN[key] = hit
    return hit


def _draw_distribution(name: str, a: np.ndarray, b: np.ndarray, cat: bool,
                       labels_a: Sequence[str], labels_b: Sequence[str], title_b: str) -> str:
    plt = _plt()
    fig, axes = plt.subplots(1, 2, figsize=(8, 2.6), sharey=True)
    if cat:
        ca, cb = _labels(a, labels_a), _labels(b, labels_b)
        names = list(dict.fromkeys([*ca, *cb]))
        pos = np.arange(len(names))
        for ax, c in zip(axes, (ca, cb)):
            ax.bar(pos, [c.get(x, 0) for x in names], color="#4c72b0")
            ax.set_xticks(pos)
            ax.set_xticklabels(names, rotation=45 if len(names) > 6 else 0, ha="right"
                               if len(names) > 6 else "center", fontsize=8)
        axes[0].set_ylabel("records")
    else:
        fa, fb = a[np.isfinite(a)], b[np.isfinite(b)]
        both = np.concatenate([fa, fb])
        if both.size:
            lo, hi = np.quantile(both, [0.005, 0.995])
            if hi <= lo:
                lo, hi = lo - 0.5, hi + 0.5
            edges = np.linspace(lo, hi, 31)
            for ax, v in zip(axes, (fa, fb)):
                # one artist per histogram (as fast to draw as a line), the bins of hist
                counts, _ = np.histogram(np.clip(v, lo, hi), bins=edges)
                ax.stairs(counts, edges, fill=True, color="#4c72b0")
        axes[0].set_ylabel("records")
    axes[0].set_title(f"{name}: original", fontsize=10)
    axes[1].set_title(f"{name}: {title_b}", fontsize=10)
    return _png(plt, fig)


def _association_png(names: Sequence[str], diff: np.ndarray) -> str:
    plt = _plt()
    p = len(names)
    size = max(3.5, 0.45 * p + 2)
    fig, ax = plt.subplots(figsize=(size + 1, size))
    lim = max(0.05, float(np.nanmax(np.abs(diff)))) if np.isfinite(diff).any() else 1.0
    im = ax.imshow(np.where(np.isfinite(diff), diff, 0.0), cmap="RdBu_r", vmin=-lim,
                   vmax=lim)
    ax.set_xticks(range(p))
    ax.set_yticks(range(p))
    ax.set_xticklabels(names, rotation=90, fontsize=8)
    ax.set_yticklabels(names, fontsize=8)
    ax.set_title("association: released - original", fontsize=10)
    fig.colorbar(im, ax=ax, shrink=0.8)
    return _png(plt, fig)


# --------------------------------------------------------------------------- HTML

_CSS = ("body{font-family:sans-serif;font-size:14px;max-width:1100px;margin:1em auto;"
        "padding:0 1em;color:#222}h1{font-size:22px}h2{font-size:18px;border-bottom:1px "
        "solid #ccc;margin-top:1.6em}h3{font-size:15px}table{border-collapse:collapse;"
        "font-size:13px;margin:.4em 0}td,th{padding:2px 8px;text-align:right;border-bottom:"
        "1px solid #eee}td:first-child,th:first-child{text-align:left}tr.chosen{background:"
        "#fff3c4}tr.recommended{background:#dff0d8}pre{background:#f6f6f6;padding:.6em;"
        "overflow-x:auto;font-size:12px}.no{color:#a00}.yes{color:#070}img{max-width:100%}"
        ".note{color:#555;font-size:13px}")


def _e(x: Any) -> str:
    return html.escape(str(x))


def _n(v: Any) -> str:
    if v is None:
        return ""
    if isinstance(v, (int, np.integer)) and not isinstance(v, bool):
        return str(int(v))
    v = float(v)
    return "NaN" if math.isnan(v) else f"{v:.6g}"


def _table(header: Sequence[str], rows: Sequence[Sequence[Any]], *,
           classes: Sequence[str] | None = None) -> str:
    h = "".join(f"<th>{_e(c)}</th>" for c in header)
    body = []
    for i, r in enumerate(rows):
        cls = f' class="{classes[i]}"' if classes and classes[i] else ""
        body.append(f"<tr{cls}>" + "".join(f"<td>{c}</td>" for c in r) + "</tr>")
    return f"<table><tr>{h}</tr>{''.join(body)}</table>"


def _summary_html(d: dict[str, Any], internal: bool) -> str:
    from .describe import QUANTILES
    out = [f"<p>{d['records']} records x {d['variables']} variables (the records the "
           "audit masked).</p>"]
    num = [s for s in d["summaries"] if s["type"] == "numeric"]
    cat = [s for s in d["summaries"] if s["type"] == "categorical"]
    if num:
        qs = [f"{100 * p:g}%" for p in QUANTILES]
        out.append("<h3>Numeric variables</h3>" + _table(
            ["variable", "n", "missing", "mean", "sd", *qs],
            [[_e(s["name"]), _n(s["n"]), _n(s["missing"]), _n(s["mean"]), _n(s["sd"]),
              *[_n(s["quantiles"][q]) for q in qs]] for s in num]))
    for s in cat:
        out.append(f"<h3>{_e(s['name'])} (categorical: n {s['n']}, missing "
                   f"{s['missing']})</h3>" + _table(
                       ["category", "records", "%"],
                       [[_e(c["label"]), _n(c["count"]), _n(c["percent"])]
                        for c in s["categories"]]))
    r = d["risk"]
    if r is None:
        out.append("<p>No key columns: no k-anonymity figures.</p>")
        return "".join(out)
    w = f", weight {_e(r['weight'])}" if r["weight"] else ""
    out.append(f"<h3>Key columns {_e(', '.join(r['keys']))}{w}</h3>"
               f"<p>{r['combinations']} key combinations; {r['unique_records']} records unique on "
               f"the keys; individual risk mean {_n(r['risk_mean'])}, max {_n(r['risk_max'])}; "
               f"expected re-identifications {_n(r['expected_reidentifications'])}.</p>")
    out.append(_table(["k", "records with f_k < k", "% of records", "combinations"],
                      [[k, _n(v["records"]), _n(v["percent"]), _n(v["combinations"])]
                       for k, v in r["kviol"].items()]))
    if internal and r["riskiest"]:
        keys = r["keys"]
        out.append("<h3>Records of highest individual risk (internal)</h3><p class=note>"
                   "Record 1 is the first record of the file. This list is the "
                   "principal's own data: keep this report internal.</p>" + _table(
                       ["record", "individual risk", "f_k", *keys],
                       [[_n(x["record"]), _n(x["risk"]), _n(x["frequency"]),
                         *[_e("(missing)" if x["keys"][k] is None else x["keys"][k])
                           for k in keys]] for x in r["riskiest"]]))
    return "".join(out)


def _ranking_html(table: Any) -> str:
    from .report import html_fragment
    return html_fragment(table, digits=4)


def _original_and_release(cube: str, c: Any, method: str, param: float, replicate: int,
                          dataset: str | None, spec: Any) -> tuple[Any, Any, Any, Any]:
    """The original (the records the audit masked), the checked release, the spec and the
    dataset's index."""
    from .audit.run import load_dataset, split_control
    from .audit.spec import parse_spec
    from .data import Microdata
    from .release import plan_release
    r = plan_release(cube, method=method, param=param, replicate=replicate,
                     dataset=dataset, spec=spec)
    if spec is None:
        spec = parse_spec(json.loads(c.attrs.get("spec", "{}")), base_dir=Path.cwd())
    names = [x.name for x in spec.datasets]
    d = names.index(r.dataset)
    ds = spec.datasets[d]
    md = load_dataset(spec, ds)
    md = split_control(md, spec.options.get("control"), spec.seed, d, ds.name)
    rel = Microdata(r.values, tuple(r.columns), roles=dict(md.roles),
                    categories=dict(r.categories))
    return md, rel, r, ds


def build_report(cube: str, *, chosen: str, variant: str = "internal",
                 require: Sequence[str] = (), loss: str | None = None,
                 dataset: str | None = None, spec: Any = None, top: int = 10
                 ) -> tuple[str, dict[str, Any]]:
    """The release report as an HTML string, and its main figures as a dict.

    Raises :class:`~sdcdist.errors.SdcInputError` (before anything is written) for a
    chosen cell not in the cube or not finished, an unknown variant, bad rules, or a
    release that does not match the cube's fingerprint.
    """
    from importlib.metadata import PackageNotFoundError, version

    from .cube import open_cube, select_dataset
    from .describe import describe
    from .report import ranking_table, with_rules
    from .rules import cube_rules, recommend
    if variant not in VARIANTS:
        raise unknown_name_error("report variant", variant, VARIANTS)
    internal = variant == "internal"
    method, param, replicate = parse_chosen(chosen)
    # a few numbers per cell, each cell its own chunk: read once, in this thread
    full = open_cube(cube)[["value", "done"]]
    full.load(scheduler="synchronous")
    rules = cube_rules(full, require)
    rec = recommend(full, rules, loss=loss, dataset=dataset)
    md, rel, r, ds = _original_and_release(cube, full, method, param, replicate, dataset,
                                           spec)
    c = select_dataset(full, r.dataset if "dataset" in full.dims else None)
    keys = list(ds.keys or []) or None
    summary = describe(md, keys=keys, top=top if internal else 0)
    table = with_rules(ranking_table(c, by=rec.loss, dataset=r.dataset
                                     if "dataset" in full.dims else None), rec.table)
    families = risk_families(c, method, param, replicate, rec.recommended)
    cats = set(md.categorical)
    is_cat = [col in cats for col in md.columns]
    assoc_a = association_matrix(md.values, is_cat)
    assoc_b = association_matrix(rel.values, is_cat)
    diff = assoc_b - assoc_a
    attrs = full.attrs
    versions = json.loads(attrs.get("versions", "{}"))
    try:
        here = version("sdcdist")
    except PackageNotFoundError:                       # pragma: no cover
        here = "unknown"
    recorded = json.loads(attrs.get("datasets", "[]"))
    input_sha = next((x.get("sha256") for x in recorded if x.get("name") == r.dataset), "")
    spec_obj = json.loads(attrs.get("spec", "{}"))
    conventions = json.loads(attrs.get("conventions", "{}"))
    cell_txt = f"{method} {param:g} replicate {replicate}"
    judged = rec.table
    row = judged.loc[(method, float(param))]
    title = f"Release report: {cell_txt} of dataset {r.dataset}"
    p: list[str] = [f"<!DOCTYPE html>\n<html lang=en><head><meta charset=\"utf-8\">"
                    f"<title>{_e(title)}</title><style>{_CSS}</style></head><body>",
                    f"<h1>{_e(title)}</h1><p class=note>{_e(attrs.get('title', ''))}; "
                    f"variant: {variant}"
                    + ("" if internal else " (no record-level content)") + "</p>"]
    # 1. data summary
    p.append("<h2>1. The data before masking</h2>" + _summary_html(summary, internal))
    # 2. spec, conventions, rules
    p.append("<h2>2. Spec, conventions and rules</h2><h3>Spec</h3><pre>"
             + _e(json.dumps(spec_obj, indent=2, sort_keys=True)) + "</pre>")
    if conventions:
        p.append("<h3>Metric conventions</h3>" + _table(
            ["metric", "convention"], [[_e(k), _e(v)] for k, v in sorted(conventions.items())]))
    p.append("<h3>Release rules</h3>" + (
        "<ul>" + "".join(f"<li>{_e(x)}</li>" for x in rules) + "</ul>" if rules else
        "<p>No rules (the spec has no <code>require:</code> and none were given): every "
        "cell is acceptable.</p>"))
    # 3. ranking
    n_ok = int(judged["acceptable"].sum())
    p.append(f"<h2>3. Ranking by {_e(rec.loss)} with acceptability</h2><p>{n_ok} of "
             f"{len(judged)} cells acceptable (every replicate must meet every rule); "
             "means over replicates; rank 1 is the lowest loss or risk.</p>"
             + _ranking_html(table))
    # 4. recommended and chosen
    p.append("<h2>4. Recommended and chosen cells</h2><ul>"
             + "".join(f"<li>{_e(x)}</li>" for x in rec.lines()) + "</ul>")
    p.append(f"<p><b>Chosen: {_e(cell_txt)}</b> — "
             + ("<span class=yes>acceptable</span>" if bool(row["acceptable"]) else
                f"<span class=no>not acceptable</span>: breaks {_e(row['breaks'])}")
             + f"; {_e(rec.loss)} (mean over replicates) {_n(row['loss'])}"
             + ("; this is the recommended cell" if rec.recommended is not None and
                (rec.recommended[0], float(rec.recommended[1])) == (method, float(param))
                else "") + ".</p>")
    # 5. comparison
    p.append(f"<h2>5. Original against released ({_e(cell_txt)})</h2>"
             "<h3>Distributions, both files side by side</h3>")
    shown = list(md.columns)[:MAX_PLOTS]
    for j, name in enumerate(shown):
        png = _distribution_png(name, md.values[:, j], rel.values[:, j], is_cat[j],
                                md.categories.get(name, []), rel.categories.get(name, []),
                                f"released ({method} {param:g})")
        p.append(f'<img alt="{_e(name)}" src="data:image/png;base64,{png}">')
    if len(md.columns) > MAX_PLOTS:
        p.append(f"<p class=note>{len(md.columns) - MAX_PLOTS} more variables not "
                 "plotted.</p>")
    names = list(md.columns)
    worst = np.nanmax(np.abs(diff)) if np.isfinite(diff).any() else math.nan
    p.append("<h3>Association matrices: released minus original</h3><p class=note>"
             "Pearson's r for two numeric columns, Cramér's V for two categorical columns, "
             f"the correlation ratio for a mixed pair. Largest absolute difference "
             f"{_n(worst)}.</p>"
             f'<img alt="association difference" src="data:image/png;base64,'
             f'{_association_png(names, diff)}">'
             + _table(["", *names], [[_e(a), *[_n(v) for v in diff[i]]]
                                     for i, a in enumerate(names)]))
    # 6. risk families
    p.append("<h2>6. Disclosure risk of the chosen cell, by family</h2>")
    if not families:
        p.append("<p>The cube has no risk metrics.</p>")
    rec_txt = (f"{rec.recommended[0]} {rec.recommended[1]:g}" if rec.recommended else
               "recommended (none)")
    for f in families:
        p.append(f"<h3>{_e(f['family'])}</h3>" + _table(
            ["metric", "unit", f"replicate {replicate}", "mean over replicates",
             f"{rec_txt} (mean)", "grid min", "grid max"],
            [[_e(x["metric"]), _e(x["unit"]), _n(x["chosen"]), _n(x["chosen_mean"]),
              _n(x["recommended_mean"]), _n(x["grid_min"]), _n(x["grid_max"])]
             for x in f["metrics"]]))
    # 7. reproduce
    out_name = "release.csv"
    p.append("<h2>7. How to reproduce the release</h2>" + _table(
        ["item", "value"],
        [["sdcdist that wrote the cube", _e(versions.get("sdcdist", "unknown"))],
         ["sdcdist that wrote this report", _e(here)],
         ["spec seed", _e(spec_obj.get("seed", ""))],
         ["cell seed (entropy)", _e(r.entropy)],
         ["spawn key", _e(",".join(map(str, r.spawn_key)))],
         ["input SHA-256", f"<code>{_e(input_sha)}</code>"],
         ["spec SHA-256", f"<code>{_e(attrs.get('spec_sha256', ''))}</code>"],
         ["release fingerprint (SHA-256 of the masked values, as stored in the cube)",
          f"<code>{_e(r.fingerprint)}</code>"],
         ["records x variables", f"{r.records} x {len(r.columns)}"]])
        + "<pre>" + _e(f"sdcdist release {Path(cube).name} --method {method} --param "
                       f"{param:g} --replicate {replicate} --out {out_name}\n"
                       f"{r.mask_command('DATA')} --out {out_name}") + "</pre>"
        "<p class=note>The release is regenerated from the spec and the cell's seed and "
        "checked against the fingerprint the cube stores; it was checked when this report "
        "was written. Library versions of the cube: "
        + _e(", ".join(f"{k} {v}" for k, v in sorted(versions.items()))) + ".</p>")
    p.append("</body></html>\n")
    info = {"chosen": {"method": method, "param": param, "replicate": replicate},
            "variant": variant, "dataset": r.dataset,
            "acceptable": bool(row["acceptable"]),
            "recommended": rec.as_dict()["recommended"], "fingerprint": r.fingerprint,
            "seed": r.entropy, "spawn_key": list(r.spawn_key), "input_sha256": input_sha,
            "risk": {x["metric"]: x["chosen"] for f in families for x in f["metrics"]}}
    return "".join(p), info


def write_report(cube: str, out: str, **kw: Any) -> dict[str, Any]:
    """Build the report (:func:`build_report`) and write it to ``out`` under a temporary
    name moved into place: on any refusal nothing is written."""
    text, info = build_report(cube, **kw)
    path = Path(out)
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(f".{path.name}.tmp{os.getpid()}")
    try:
        tmp.write_text(text, encoding="utf-8")
        os.replace(tmp, path)
    finally:
        if tmp.exists():
            tmp.unlink()
    info["bytes"] = len(text.encode("utf-8"))
    return info


def comparison(cube: str, *, method: str, param: float, replicate: int = 0,
               require: Sequence[str] = (), loss: str | None = None,
               dataset: str | None = None, spec: Any = None) -> dict[str, Any]:
    """Original against released for one cell, as section 5 and 6 of the report draw them,
    for a page: each variable's distribution (a PNG, base64, both files side by side), the
    association matrices' difference (a PNG and the numbers) and each risk family's
    figures; the release is regenerated and checked as for the report. Aggregates only:
    no record-level content."""
    from .cube import open_cube, select_dataset
    from .rules import cube_rules, recommend
    full = open_cube(cube)[["value", "done"]]
    full.load(scheduler="synchronous")
    rules = cube_rules(full, require)
    rec = recommend(full, rules, loss=loss, dataset=dataset)
    md, rel, r, _ = _original_and_release(cube, full, method, float(param), int(replicate),
                                          dataset, spec)
    c = select_dataset(full, r.dataset if "dataset" in full.dims else None)
    families = risk_families(c, method, float(param), int(replicate), rec.recommended)
    cats = set(md.categorical)
    is_cat = [col in cats for col in md.columns]
    diff = association_matrix(rel.values, is_cat) - association_matrix(md.values, is_cat)
    shown = list(md.columns)[:MAX_PLOTS]
    plots = [{"variable": name, "categorical": is_cat[j],
              "png": _distribution_png(name, md.values[:, j], rel.values[:, j], is_cat[j],
                                       md.categories.get(name, []),
                                       rel.categories.get(name, []),
                                       f"released ({method} {float(param):g})")}
             for j, name in enumerate(shown)]
    names = list(md.columns)
    worst = float(np.nanmax(np.abs(diff))) if np.isfinite(diff).any() else math.nan
    return {"dataset": r.dataset, "method": method, "param": float(param),
            "replicate": int(replicate), "fingerprint": r.fingerprint,
            "seed": r.entropy, "spawn_key": list(r.spawn_key),
            "distributions": plots, "more_variables": max(0, len(names) - MAX_PLOTS),
            "association": {"variables": names,
                            "difference": [[None if not math.isfinite(v) else float(v)
                                            for v in row] for row in diff],
                            "largest": None if not math.isfinite(worst) else worst,
                            "png": _association_png(names, diff)},
            "risk": families,
            "recommended": rec.as_dict()["recommended"]}
