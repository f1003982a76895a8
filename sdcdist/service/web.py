"""The web page of the service (``GET /``): plain HTML and a little JavaScript, no build step.

A guided flow for a data-protection officer preparing a release, in five steps:

1. **Data.** Upload a file with its roles (key, confidential, weight, household id,
   integer-coded categorical columns); the answer lists every column's type and roles.
   Choose the dataset(s) to audit and, for each dataset separately, its key columns;
   "before masking" shows each as ``sdcdist describe`` does (``/v1/datasets/{id}/describe``).
2. **Rules.** Release rules ``METRIC OP NUMBER`` (``DLD <= 5``), one a line. They go
   into the spec's ``require:``, so the server reads them (:mod:`sdcdist.rules`) and a
   bad rule is refused with its 422 message, shown beside the rules.
3. **Grid.** A preset by data type (numeric, categorical keys, mixed, synthetic;
   ``/v1/presets``, derived from the registries' declarations) ticks a short set of
   methods and metrics; everything else sits behind "more". What cannot apply to the
   chosen datasets with their keys is not offered and says why on hover: the server
   decides (``/v1/datasets/{id}/applicable``, :func:`sdcdist.metrics.applicable` and the
   methods' declared checks). The YAML box stays for experts.
4. **Results.** Every audit keeps its box: progress cell by cell, cancel and resume
   with one count, and when cells are in, the ranking by the default risk-utility score
   with one rank column, each cell marked acceptable or not with the rules it breaks
   (``/report?require=``), what was ticked and what a score added ("added by Score2"),
   the recommendation (least-loss acceptable cell and the Pareto front, or "none
   acceptable" and the closest) and the trade-off plot.
5. **Release.** For the recommended (or a chosen) cell: download the release
   (``/release``), the release report, internal or external (``/release-report``), and
   the comparison of original against released (``/compare``: each variable's
   distribution in both files, the difference of the association matrices, each risk
   family's figures), drawn by :mod:`sdcdist.releasereport`.

The token box appears only when the service needs tokens (``/v1/health`` says so); the
token is kept in the browser's session storage and sent as a bearer header. Every text
from the service is put in the page as text (``textContent``), never as HTML; the page
logs nothing.
"""

PAGE = r"""<!DOCTYPE html>
<html lang="en"><head><meta charset="utf-8">
<meta name="viewport" content="width=device-width, initial-scale=1">
<title>sdcdist: from audit to release</title>
<style>
body{font-family:system-ui,sans-serif;margin:1em auto;max-width:1400px;padding:0 1em;color:#222;font-size:15px}
h1{font-size:1.45em;margin-bottom:.1em} h2{font-size:1.2em;margin:0 0 .4em}
h3{font-size:1em;margin:.7em 0 .3em}
section.step{border:1px solid #cfd8e3;border-radius:6px;padding:.7em 1.1em;margin:1em 0;background:#fbfcfe}
section.step>h2 .n{display:inline-block;background:#3a6ea5;color:#fff;border-radius:50%;width:1.5em;height:1.5em;text-align:center;line-height:1.5em;margin-right:.4em;font-size:.9em}
nav.steps{font-size:14px;color:#555;margin:.4em 0} nav.steps a{margin-right:1em;color:#3a6ea5}
fieldset{border:1px solid #ccc;padding:.5em 1em;margin:.5em 0}
label{display:inline-block;margin:.2em .8em .2em 0}
textarea{width:100%;font-family:monospace;font-size:13px}
textarea#spec-text{height:11em} textarea#rules{height:4.5em;max-width:30em}
.audit{border:1px solid #ddd;border-radius:4px;padding:.5em .8em;margin:.6em 0;background:#fff}
.bar{background:#eee;border-radius:3px;height:14px;width:100%;overflow:hidden}
.bar>div{background:#3a7bd5;height:100%;width:0;transition:width .3s}
.done .bar>div{background:#2e9b4f} .failed .bar>div,.cancelled .bar>div{background:#c33}
.msg{color:#a00;white-space:pre-wrap} .ok{color:#2e7d32} .warn{color:#9a6700}
table.rank,table.grid,table.risk{border-collapse:collapse;font-size:13px;margin:.5em 0}
table.rank td,table.rank th,table.risk td,table.risk th{padding:3px 8px;text-align:right;border-bottom:1px solid #eee}
table.rank td:first-child,table.rank th:first-child,table.risk td:first-child,table.risk th:first-child{text-align:left}
table.rank th{background:#f2f5f9;vertical-align:bottom}
table.rank tr.recommended td{background:#e3f4e8} table.rank tr.chosen td{outline:2px solid #f0b400}
table.rank td.no{color:#a00} table.rank td.yes{color:#1d7a3a;font-weight:bold}
table.rank td.breaks,table.rank th.breaks{text-align:left} table.rank td.breaks{color:#a00;font-size:12px}
th .added{display:block;font-weight:normal;font-size:11px;color:#7a5b00}
table.grid td,table.grid th{padding:3px 6px;border-bottom:1px solid #eee;text-align:left;vertical-align:top}
table.grid input[type=text]{font-family:monospace}
tr.na td,label.na{color:#999} tr.na b,label.na b{text-decoration:line-through}
img.plot{max-width:100%;width:760px;border:1px solid #eee;margin:.5em 0}
#compare-distributions{display:grid;grid-template-columns:repeat(auto-fill,minmax(min(100%,640px),1fr));gap:.3em 1em}
img.dist{width:100%;max-width:640px;display:block;margin:.2em 0;border:1px solid #eee}
img.assoc{max-width:100%;border:1px solid #eee}
small,.hint{color:#555} .hint{font-size:13px}
dl.metrics{font-size:13px;margin:.3em 0;display:grid;grid-template-columns:max-content 1fr;gap:.15em .8em}
dl.metrics dt{font-weight:bold} dl.metrics dd{margin:0}
#metric-list,#more-metric-list{display:grid;grid-template-columns:1fr 1fr;gap:0 1.5em}
.kindgroup label{display:block;margin:.1em 0;font-size:14px}
.def{display:none} .defs .def{display:inline}
.cols label{font-size:14px}
.keys{margin:.2em 0 .6em} .keys>b{display:block}
.presets button{margin:.2em .4em .2em 0;padding:.35em .8em;border:1px solid #3a6ea5;background:#fff;border-radius:4px;cursor:pointer}
.presets button.on{background:#3a6ea5;color:#fff}
.recommend{border-left:4px solid #2e9b4f;background:#eef8f0;padding:.5em .8em;margin:.5em 0}
.recommend.none{border-left-color:#c33;background:#fbeeee}
#release-cell{font-weight:bold}
#release-actions button{margin:.2em .5em .2em 0}
.family{margin:.4em 0}
code{font-size:13px}
button{font-size:14px}
</style></head><body>
<h1>sdcdist: from audit to release</h1>
<small>Compare masking methods on your data, set the rules a release must meet, and get the
recommended release with its report. API reference: <a href="docs">/docs</a>.</small>
<nav class="steps"><a href="#step-data">1. Data</a><a href="#step-rules">2. Rules</a><a href="#step-grid">3. Grid</a><a href="#step-results">4. Results</a><a href="#step-release">5. Release</a></nav>
<fieldset id="auth" style="display:none"><legend>Sign in</legend>
<label>Bearer token <input id="token" type="password" size="48" autocomplete="off"></label>
<button id="save-token" type="button">Use</button> <small id="auth-state"></small>
</fieldset>

<section class="step" id="step-data"><h2><span class="n">1</span>Data</h2>
<form id="upload-form">
<label>File (CSV or Parquet) <input id="upload-file" name="file" type="file" accept=".csv,.tsv,.txt,.gz,.parquet,.pq" required></label>
<label>Name <input id="upload-name" name="name" size="12"></label>
<button id="upload-submit" type="submit">Upload</button>
<details id="upload-roles"><summary>Roles of the columns (optional; they can be chosen below too)</summary>
<label title="the columns an intruder may know (quasi-identifiers), in linkage order">Key columns <input id="upload-keys" name="keys" size="18" placeholder="AGE,REGION"></label>
<label title="the sensitive columns (needed by the IPSO methods and the attribute-disclosure measures)">Confidential <input id="upload-confidential" name="confidential" size="14"></label>
<label title="integer-coded columns that are categories, not numbers (text columns are categorical anyway)">Categorical <input id="upload-categorical" name="categorical" size="14"></label>
<label title="the sampling-weight column (positive values; never masked)">Weight <input id="upload-weight" name="weight" size="8"></label>
<label title="the household id column, for the household risks (never a key)">Household id <input id="upload-household" name="household" size="8"></label>
<label title="keep only these columns (leave identifiers out)">Only columns <input id="upload-columns" name="columns" size="18"></label>
</details>
</form>
<div id="upload-result"></div>
<h3>Datasets to audit</h3>
<div id="spec-datasets"><small>upload a dataset first</small></div>
<h3>Key columns <span class="hint">(what an intruder knows, per dataset; linkage risk is measured on them, in this order)</span></h3>
<div id="spec-keys" class="cols"><small>choose a dataset</small></div>
<h3>Before masking <span class="hint">(each variable, and how exposed the records are on the keys)</span></h3>
<div id="describe"><small>choose a dataset</small></div>
</section>

<section class="step" id="step-rules"><h2><span class="n">2</span>Rules a release must meet</h2>
<p class="hint">One rule a line: <code>METRIC OP NUMBER</code> with OP one of &lt;=, &lt;, &gt;=, &gt;, ==
(for example <code>DLD &lt;= 5</code>: at most 5 % of records re-identified by distance linkage;
<code>IL_S2 &lt;= 20</code>: information loss at most 20). A cell is acceptable when every replicate
meets every rule; the recommendation is the acceptable cell that loses least information.
The rules are checked by the server when you run the audit, and can be changed afterwards.</p>
<textarea id="rules" spellcheck="false" placeholder="DLD <= 5&#10;IL_S2 <= 20"></textarea>
<div id="rules-result"></div>
</section>

<section class="step" id="step-grid"><h2><span class="n">3</span>Grid: methods and metrics to compare</h2>
<form id="spec-form">
<div class="presets" id="presets"><b>Start from a preset:</b> </div>
<div class="hint" id="preset-help"></div>
<label>Name <input id="spec-name" value="audit" size="14"></label>
<label title="every random choice derives from it: the same seed and data give the same results">Seed <input id="spec-seed" type="number" value="1" min="0" style="width:6em"></label>
<label title="random methods run this many times per parameter value; results are averaged, and a cell is acceptable only if every replicate is">Replicates <input id="spec-replicates" type="number" value="2" min="1" max="100" style="width:4em"></label>
<h3>Masking methods <span class="hint">(parameter values as a list, or build a grid)</span></h3>
<table class="grid" id="method-table"><thead><tr><th></th><th>method</th><th>parameter</th><th>allowed</th><th>values</th><th>grid: from, to, steps</th></tr></thead>
<tbody class="main"></tbody>
<tbody class="more" style="display:none"></tbody></table>
<button type="button" id="more-methods">more methods</button>
<h3>Metrics <span class="hint">(a score brings the metrics it is made of along; hover a name for its definition)</span>
<label class="hint"><input type="checkbox" id="metric-defs"> show definitions</label></h3>
<div id="metric-list"></div>
<button type="button" id="more-metrics">more metrics</button>
<div id="more-metric-list" style="display:none"></div>
<p><button id="spec-submit" type="submit"><b>Run the audit</b></button>
<button id="spec-to-yaml" type="button">Show as YAML</button> <span id="spec-cells" class="hint"></span></p>
</form>
<details id="expert"><summary>Expert: write the spec in YAML</summary>
<p class="hint">The spec as <code>sdcdist audit</code> reads it (see docs/spec.md). Name uploaded
data by <code>dataset: {id: ds_...}</code> or <code>datasets: [{id: ...}, ...]</code>.</p>
<textarea id="spec-text" spellcheck="false">name: web
seed: 1
methods:
  - {name: noise, params: [0.05, 0.1, 0.2]}
  - {name: micmul, params: [3, 5]}
replicates: 1
metrics: [Score2]
</textarea>
<button id="yaml-submit" type="button">Submit YAML</button>
</details>
<div id="spec-result"></div>
</section>

<section class="step" id="step-results"><h2><span class="n">4</span>Results</h2>
<div id="audits"><small id="audits-empty">no audit yet: run one in step 3</small></div>
</section>

<section class="step" id="step-release"><h2><span class="n">5</span>Release</h2>
<div id="release-none" class="hint">When an audit has results, its recommended cell is chosen here; "choose" on any row of a ranking picks another.</div>
<div id="release-box" style="display:none">
<p>Cell to release: <span id="release-cell"></span> <label>replicate <select id="release-replicate"></select></label>
<span id="release-state"></span></p>
<div id="release-actions">
<button type="button" id="release-download">Download the release (CSV)</button>
<button type="button" id="report-internal" title="for the data owner: lists the records of highest individual risk">Download the release report (internal)</button>
<button type="button" id="report-external" title="to file or share: no record-level content">Download the release report (external)</button>
<button type="button" id="compare-show">Compare original and release</button>
</div>
<div id="release-msg"></div>
<div id="compare"></div>
</div>
</section>
<script>
"use strict";
const $ = (id) => document.getElementById(id);
let token = sessionStorage.getItem("sdcdist-token") || "";
$("token").value = token;
const shown = {};                       // audit id -> state whose results are on the page
const audits = {};                      // audit id -> {spec, rules, view state}
let catalogue = null;                   // {methods, metrics, presets} from the API
let datasets = [];
let applic = {};                        // dataset id -> {methods, metrics} reasons
let preset = null, touched = false;
let release = null;                     // {audit, method, param, replicates, dataset, rules}

const csrf = (document.querySelector('meta[name="sdcdist-csrf"]') || {}).content || "";
function headers(extra) {
  const h = Object.assign({}, extra || {});
  if (token) h["Authorization"] = "Bearer " + token;
  if (csrf) h["X-Sdcdist-Csrf"] = csrf;
  return h;
}
async function api(path, opts) {
  opts = opts || {};
  opts.headers = headers(opts.headers);
  const r = await fetch(path, opts);
  if (!r.ok) {
    let msg = r.status + " " + r.statusText;
    try { const j = await r.json(); if (j.detail) msg = r.status + ": " + (typeof j.detail === "string" ? j.detail : JSON.stringify(j.detail)); } catch (e) {}
    throw new Error(msg);
  }
  return r;
}
function text(el, s, cls) { el.textContent = s; el.className = cls || ""; }
function el(tag, props, kids) {
  const e = document.createElement(tag);
  for (const [k, v] of Object.entries(props || {})) {
    if (k === "text") e.textContent = v; else if (k === "cls") e.className = v;
    else if (k in e && typeof v !== "string") e[k] = v; else e.setAttribute(k, v);
  }
  for (const c of kids || []) e.appendChild(typeof c === "string" ? document.createTextNode(c) : c);
  return e;
}
function num(v) {
  if (v === null || v === undefined) return "";
  if (typeof v !== "number") return String(v);
  if (Number.isInteger(v)) return String(v);
  if (v !== 0 && Math.abs(v) < 0.01) return v.toExponential(2);
  return v.toFixed(3);
}
function g(v) { return typeof v === "number" ? String(Number(v.toPrecision(6))) : String(v); }
function metricInfo(name) { return catalogue ? catalogue.metrics.find((m) => m.name === name) : null; }
function rulesText() { return $("rules").value.split(/\n/).map((s) => s.trim()).filter((s) => s); }

$("save-token").onclick = () => {
  token = $("token").value.trim();
  sessionStorage.setItem("sdcdist-token", token);
  start();
};

// -- catalogue: methods, metrics and presets from the registries ------------------------
function methodRow(m) {
  const tr = el("tr", {id: "method-" + m.name});
  const use = el("input", {type: "checkbox", cls: "use", "data-method": m.name});
  use.onchange = () => { touched = true; countCells(); };
  tr.insertCell().appendChild(use);
  const name = tr.insertCell();
  name.appendChild(el("b", {text: m.name}));
  name.appendChild(el("div", {cls: "hint", text: m.description}));
  tr.insertCell().textContent = m.kind === "none" ? "(none)" : m.param;
  tr.insertCell().textContent = m.kind === "none" ? "no parameter" : m.range;
  const vals = tr.insertCell();
  if (m.kind !== "none") {
    const inp = el("input", {type: "text", size: 18, cls: "params", placeholder: m.range});
    inp.oninput = () => { use.checked = inp.value.trim() !== "" && !use.disabled; touched = true; countCells(); };
    vals.appendChild(inp);
    const gcell = tr.insertCell();
    const lo = el("input", {type: "number", cls: "lo", step: "any", style: "width:5em", title: "from"});
    const hi = el("input", {type: "number", cls: "hi", step: "any", style: "width:5em", title: "to"});
    const n = el("input", {type: "number", cls: "n", min: 2, max: 50, value: 4, style: "width:3.5em", title: "steps"});
    if (m.low !== null && m.low !== undefined) lo.placeholder = m.low;
    if (m.high !== null && m.high !== undefined) hi.placeholder = m.high;
    const b = el("button", {type: "button", cls: "grid", text: "grid"});
    b.onclick = () => {
      const a = parseFloat(lo.value), z = parseFloat(hi.value), k = parseInt(n.value, 10);
      if (!isFinite(a) || !isFinite(z) || !(k >= 2)) { lo.focus(); return; }
      const out = [];
      for (let i = 0; i < k; i++) {
        let v = a + (z - a) * i / (k - 1);
        v = m.kind === "int" ? Math.round(v) : Number(v.toPrecision(4));
        if (!out.includes(v)) out.push(v);
      }
      inp.value = out.join(", "); if (!use.disabled) use.checked = true; touched = true; countCells();
    };
    gcell.append(lo, " ", hi, " ", n, " ", b);
  } else {
    vals.textContent = "-"; tr.insertCell();
  }
  return tr;
}
function metricLabel(m) {
  const box = el("input", {type: "checkbox", value: m.name, cls: "metric"});
  box.onchange = () => { touched = true; };
  const bits = [box, " ", el("b", {text: m.name}), " ",
    el("span", {cls: "hint", text: "(" + (m.unit || "no unit") + "; " +
      (m.lower_is_better ? "lower" : "higher") + " is better) "})];
  if (m.requires && m.requires.length) bits.push(el("span", {cls: "hint brings", text: "brings " + m.requires.join(", ") + " "}));
  bits.push(el("span", {cls: "hint def", text: m.description}));
  return el("label", {id: "metric-" + m.name, "data-title": m.description + (m.reference ? " " + m.reference : "")}, bits);
}
async function loadCatalogue() {
  const [methods, metrics, presets] = await Promise.all([
    (await api("v1/methods")).json(), (await api("v1/metrics")).json(), (await api("v1/presets")).json()]);
  catalogue = {methods, metrics, presets};
  const main = $("method-table").tBodies[0];
  main.innerHTML = ""; $("method-table").tBodies[1].innerHTML = "";
  for (const m of methods) main.appendChild(methodRow(m));
  $("metric-list").innerHTML = ""; $("more-metric-list").innerHTML = "";
  const kinds = [["risk", "Disclosure risk"], ["loss", "Information loss"],
                 ["utility", "Utility loss"], ["score", "Risk-utility scores"]];
  for (const [where, suffix] of [["metric-list", ""], ["more-metric-list", "-more"]]) {
    for (const [kind, title] of kinds) {
      $(where).appendChild(el("div", {cls: "kindgroup", id: "metrics-" + kind + suffix}, [el("h3", {text: title})]));
    }
  }
  for (const m of metrics) $("metrics-" + m.kind).appendChild(metricLabel(m));
  const box = $("presets");
  box.querySelectorAll("button").forEach((b) => b.remove());
  for (const p of presets) {
    const b = el("button", {type: "button", id: "preset-" + p.name, text: p.label, title: p.help});
    b.onclick = () => { applyPreset(p.name); touched = true; };
    box.appendChild(b);
  }
}
function suggestedPreset() {
  const chosen = datasets.filter((d) => checkedDatasets().includes(d.id));
  let anyCat = false, allCat = true, catKey = false;
  for (const d of chosen) {
    const keys = new Set(keysOf(d.id));
    for (const c of (d.schema || [])) {
      const cat = c.type === "categorical";
      anyCat = anyCat || cat; allCat = allCat && cat;
      if (cat && keys.has(c.name)) catKey = true;
    }
  }
  if (!chosen.length || !anyCat) return "numeric";
  if (allCat) return "categorical";
  return catKey ? "mixed" : "numeric";
}
function applyPreset(name) {
  const p = catalogue.presets.find((x) => x.name === name);
  if (!p) return;
  preset = name;
  document.querySelectorAll("#presets button").forEach((b) => b.classList.toggle("on", b.id === "preset-" + name));
  $("preset-help").textContent = p.label + ": " + p.help + ". Everything else is under \"more\".";
  for (const tr of allMethodRows()) {
    const m = tr.id.replace(/^method-/, "");
    const use = tr.querySelector("input.use"), inp = tr.querySelector("input.params");
    const on = m in p.methods;
    use.checked = on;
    if (inp) inp.value = on ? p.methods[m].map(g).join(", ") : "";
  }
  for (const box of document.querySelectorAll("input.metric")) box.checked = p.metrics.includes(box.value);
  arrange();
  countCells();
}
function allMethodRows() { return Array.from(document.querySelectorAll("#method-table tbody tr")); }
// what is ticked or in the preset is shown; the rest sits behind "more"; what cannot
// apply is not offered (disabled, the reason on hover)
function arrange() {
  if (!catalogue) return;
  const p = catalogue.presets.find((x) => x.name === preset) || {methods: {}, metrics: []};
  const [main, more] = $("method-table").tBodies;
  for (const tr of allMethodRows()) {
    const m = tr.id.replace(/^method-/, "");
    const why = reasonFor("methods", m);
    const use = tr.querySelector("input.use");
    use.disabled = Boolean(why);
    if (why) use.checked = false;
    tr.classList.toggle("na", Boolean(why));
    tr.title = why ? "cannot apply: " + why : "";
    const front = !why && (m in p.methods || use.checked);
    (front ? main : more).appendChild(tr);
  }
  const nmore = more.rows.length;
  $("more-methods").textContent = (more.style.display === "none" ? "more methods (" + nmore + ")" : "fewer methods");
  for (const m of catalogue.metrics) {
    const lab = $("metric-" + m.name), box = lab.querySelector("input");
    const why = reasonFor("metrics", m.name);
    box.disabled = Boolean(why);
    if (why) box.checked = false;
    lab.classList.toggle("na", Boolean(why));
    lab.title = why ? "cannot apply: " + why : lab.getAttribute("data-title");
    const front = !why && (p.metrics.includes(m.name) || box.checked);
    $("metrics-" + m.kind + (front ? "" : "-more")).appendChild(lab);
  }
  for (const k of ["risk", "loss", "utility", "score"]) {
    $("metrics-" + k).style.display = $("metrics-" + k).querySelector("label") ? "" : "none";
  }
  const mm = document.querySelectorAll("#more-metric-list label").length;
  $("more-metrics").textContent = $("more-metric-list").style.display === "none" ? "more metrics (" + mm + ")" : "fewer metrics";
}
function reasonFor(kind, name) {
  const out = [];
  const ids = checkedDatasets();
  for (const id of ids) {
    const a = applic[id];
    if (!a || !a[kind]) continue;
    const r = a[kind][name];
    if (r) {
      const d = datasets.find((x) => x.id === id);
      out.push((ids.length > 1 ? "dataset " + (d ? d.name : id) + ": " : "") + r);
    }
  }
  return out.join("; ");
}
$("more-methods").onclick = () => {
  const more = $("method-table").tBodies[1];
  more.style.display = more.style.display === "none" ? "" : "none";
  arrange();
};
$("more-metrics").onclick = () => {
  const more = $("more-metric-list");
  more.style.display = more.style.display === "none" ? "" : "none";
  arrange();
};
$("metric-defs").onchange = () => {
  for (const id of ["metric-list", "more-metric-list"]) $(id).classList.toggle("defs", $("metric-defs").checked);
};
function paramsOf(tr) {
  const inp = tr.querySelector("input.params");
  if (!inp) return [0];
  return inp.value.split(/[\s,;]+/).filter((s) => s !== "").map(Number);
}
function countCells() {
  try {
    let n = 0;
    const reps = parseInt($("spec-replicates").value || "1", 10);
    for (const tr of allMethodRows()) {
      if (!tr.querySelector("input.use").checked) continue;
      const m = catalogue.methods.find((x) => "method-" + x.name === tr.id);
      n += paramsOf(tr).length * (m && m.random ? reps : 1);
    }
    $("spec-cells").textContent = n ? n * Math.max(1, checkedDatasets().length) + " cells (each a masked file measured)" : "";
  } catch (e) { $("spec-cells").textContent = ""; }
}
$("spec-replicates").oninput = countCells;

// -- datasets and their keys ------------------------------------------------------------
async function refreshDatasets(select) {
  datasets = await (await api("v1/datasets")).json();
  const box = $("spec-datasets");
  const was = new Set(checkedDatasets());
  box.innerHTML = "";
  if (!datasets.length) { box.appendChild(el("small", {text: "upload a dataset first"})); }
  datasets.forEach((d, i) => {
    const c = el("input", {type: "checkbox", value: d.id, cls: "ds"});
    c.checked = select ? d.id === select : (was.size ? was.has(d.id) : i === datasets.length - 1);
    c.onchange = () => { showKeys(); };
    box.appendChild(el("label", {}, [c, " " + d.name + " (" + d.rows + " records x " +
      d.columns.length + " columns)"]));
  });
  showKeys();
}
function checkedDatasets() {
  return Array.from(document.querySelectorAll("#spec-datasets input.ds:checked")).map((c) => c.value);
}
function keysOf(id) {
  return Array.from(document.querySelectorAll('#spec-keys .keys[data-dataset="' + id + '"] input.key:checked')).map((c) => c.value);
}
function showKeys() {
  const box = $("spec-keys");
  const before = new Map(Array.from(box.querySelectorAll("input.key")).map((c) => [c.getAttribute("data-dataset") + "/" + c.value, c.checked]));
  box.innerHTML = "";
  const chosen = datasets.filter((d) => checkedDatasets().includes(d.id));
  if (!chosen.length) { box.appendChild(el("small", {text: "choose a dataset"})); countCells(); return; }
  for (const d of chosen) {
    const grp = el("div", {cls: "keys", "data-dataset": d.id}, [el("b", {text: "Keys of " + d.name})]);
    const declared = new Set((d.roles || {}).key || []);
    for (const c of (d.schema || d.columns.map((n) => ({name: n})))) {
      const cb = el("input", {type: "checkbox", value: c.name, cls: "key", "data-dataset": d.id});
      const k = d.id + "/" + c.name;
      cb.checked = before.has(k) ? before.get(k) : declared.has(c.name);
      cb.onchange = () => { keyHint(grp); loadApplicable(); };
      const what = (c.type || "") + (c.roles && c.roles.length ? ", " + c.roles.join(", ") : "");
      grp.appendChild(el("label", {}, [cb, " " + c.name + " ", el("span", {cls: "hint", text: what ? "(" + what + ")" : ""})]));
    }
    grp.appendChild(el("div", {cls: "hint keyhint"}));
    box.appendChild(grp);
    keyHint(grp);
  }
  loadApplicable();
}
function keyHint(grp) {
  const keys = Array.from(grp.querySelectorAll("input.key:checked")).map((c) => c.value);
  grp.querySelector(".keyhint").textContent = keys.length ?
    "linkage risk on the key sets " + keys.map((_, i) => "{" + keys.slice(0, i + 1).join(", ") + "}").slice(0, 7).join(", ") + " (the prefixes, in this order)" :
    "none ticked: every column is a key (linkage on the prefixes of the column order)";
}
let applicSeq = 0;
async function loadApplicable() {
  const seq = ++applicSeq;
  const ids = checkedDatasets();
  const got = {};
  try {
    await Promise.all(ids.map(async (id) => {
      const keys = keysOf(id);
      const q = keys.length ? "?keys=" + encodeURIComponent(keys.join(",")) : "";
      got[id] = await (await api("v1/datasets/" + id + "/applicable" + q)).json();
    }));
  } catch (e) { text($("spec-result"), e.message, "msg"); return; }
  if (seq !== applicSeq) return;
  applic = got;
  loadDescribe(ids, seq);
  if (!touched || !preset) applyPreset(suggestedPreset()); else arrange();
  document.body.setAttribute("data-applicable", ids.map((id) => id + ":" + keysOf(id).join(",")).join(";"));
}

// -- the data before masking (sdcdist describe) -------------------------------------------
async function loadDescribe(ids, seq) {
  const box = $("describe");
  const parts = [];
  try {
    for (const id of ids) {
      const keys = keysOf(id);
      const q = keys.length ? "?keys=" + encodeURIComponent(keys.join(",")) : "";
      parts.push([id, await (await api("v1/datasets/" + id + "/describe" + q)).json()]);
    }
  } catch (e) { text(box, e.message, "msg"); return; }
  if (seq !== applicSeq) return;
  box.innerHTML = "";
  if (!parts.length) { box.appendChild(el("small", {text: "choose a dataset"})); return; }
  for (const [id, dsc] of parts) {
    const d = datasets.find((x) => x.id === id) || {name: id};
    const r = dsc.risk;
    const head = d.name + ": " + dsc.records + " records, " + dsc.variables + " variables" + (r ?
      "; on the keys " + r.keys.join(", ") + ": " + r.unique_records + " records unique (" + num(100 * r.unique_records / r.records) + " %), " +
      num(r.expected_reidentifications) + " expected re-identifications" : "; no key columns (tick some above)");
    const det = el("details", {cls: "describe", "data-dataset": id}, [el("summary", {text: head})]);
    const cats = new Set(dsc.summaries.filter((x) => x.type === "categorical").map((x) => x.name));
    if (r && r.keys.some((k) => !cats.has(k))) det.appendChild(el("div", {cls: "hint", text:
      "Numeric keys are counted here by their exact values, so nearly every record is unique on them; " +
      "for numeric keys the audit's distance-linkage risk (DLD) says how many records an intruder would actually re-identify."}));
    const numeric = dsc.summaries.filter((x) => x.type === "numeric");
    if (numeric.length) {
      const qs = Object.keys(numeric[0].quantiles);
      const t = el("table", {cls: "risk"});
      const h = t.createTHead().insertRow();
      for (const x of ["variable", "records", "missing", "mean", "sd", ...qs]) h.appendChild(el("th", {text: x}));
      const b = t.createTBody();
      for (const x of numeric) {
        const tr = b.insertRow();
        for (const v of [x.name, x.n, x.missing, num(x.mean), num(x.sd), ...qs.map((k) => num(x.quantiles[k]))]) tr.insertCell().textContent = v;
      }
      det.appendChild(t);
    }
    for (const x of dsc.summaries.filter((y) => y.type === "categorical")) {
      const cats = x.categories.slice().sort((a, b) => b.count - a.count);
      det.appendChild(el("div", {cls: "hint", text: x.name + " (categorical, " + x.categories.length + " categories, " + x.missing + " missing): " +
        cats.slice(0, 12).map((c) => c.label + " " + c.count + " (" + num(c.percent) + " %)").join(", ") + (cats.length > 12 ? ", ..." : "")}));
    }
    if (r) {
      const t = el("table", {cls: "risk"});
      const h = t.createTHead().insertRow();
      for (const x of ["k", "records in a key combination shared by fewer than k", "% of records", "such combinations"]) h.appendChild(el("th", {text: x}));
      const b = t.createTBody();
      for (const [k, v] of Object.entries(r.kviol)) {
        const tr = b.insertRow();
        for (const x of [k, v.records, num(v.percent), v.combinations]) tr.insertCell().textContent = x;
      }
      det.appendChild(el("div", {text: "k-anonymity on " + r.keys.join(", ") + ": " + r.combinations + " key combinations; individual risk mean " + num(r.risk_mean) + ", max " + num(r.risk_max)}));
      det.appendChild(t);
      if (r.riskiest && r.riskiest.length) {
        const rt = el("table", {cls: "risk"});
        const rh = rt.createTHead().insertRow();
        for (const x of ["record", "risk", "f_k", ...r.keys]) rh.appendChild(el("th", {text: x}));
        const rb = rt.createTBody();
        for (const x of r.riskiest) {
          const tr = rb.insertRow();
          for (const v of [x.record, num(x.risk), x.frequency, ...r.keys.map((k) => x.keys[k] === null ? "(missing)" : x.keys[k])]) tr.insertCell().textContent = v;
        }
        det.appendChild(el("details", {}, [el("summary", {text: "the " + r.riskiest.length + " records of highest individual risk (your own data: record numbers and key values; never in the external report)"}), rt]));
      }
    }
    box.appendChild(det);
  }
}

$("upload-form").onsubmit = async (ev) => {
  ev.preventDefault();
  const fd = new FormData($("upload-form"));
  for (const k of ["name", "keys", "confidential", "categorical", "weight", "household", "columns"]) {
    if (!String(fd.get(k) || "").trim()) fd.delete(k);
  }
  const out = $("upload-result");
  text(out, "uploading...");
  try {
    const d = await (await api("v1/datasets", {method: "POST", body: fd})).json();
    out.innerHTML = "";
    out.appendChild(el("div", {cls: "ok", text: "dataset " + d.name + ": " + d.rows + " records x " + d.columns.length + " columns"}));
    const t = el("table", {cls: "grid", id: "upload-schema"});
    const h = t.createTHead().insertRow();
    for (const c of ["column", "type", "categories", "roles"]) h.appendChild(el("th", {text: c}));
    const b = t.createTBody();
    for (const c of d.schema || []) {
      const tr = b.insertRow();
      tr.insertCell().textContent = c.name;
      tr.insertCell().textContent = c.type;
      tr.insertCell().textContent = c.categories === null ? "" : c.categories;
      tr.insertCell().textContent = c.roles.join(", ");
      if (c.type === "categorical") tr.title = "stored as categories; if this column holds numbers, check the file (a stray text value makes a column categorical)";
    }
    const cats = (d.schema || []).filter((c) => c.type === "categorical").map((c) => c.name);
    // open when something needs a look: categorical columns (a stray text value?)
    out.appendChild(el("details", {open: cats.length > 0}, [el("summary", {text: "its columns: type and roles"}), t]));
    if (cats.length) out.appendChild(el("div", {cls: "warn", text: "categorical: " + cats.join(", ") + ". Numeric masking methods carry these columns through unchanged; if one should be numeric, fix the file and upload it again."}));
    await refreshDatasets(d.id);
  } catch (e) { text(out, e.message, "msg"); }
};

// -- the spec from the forms ----------------------------------------------------------
function buildSpec() {
  const ids = checkedDatasets();
  if (!ids.length) throw new Error("choose at least one dataset (upload one first)");
  const used = {};
  const entries = ids.map((id) => {
    const d = datasets.find((x) => x.id === id);
    let name = d.name; let k = 2;
    while (used[name]) name = d.name + "_" + (k++);
    used[name] = true;
    const e = {id: id, name: name};
    const mine = keysOf(id);
    if (mine.length) e.keys = mine;
    return e;
  });
  const methods = [];
  for (const tr of allMethodRows()) {
    const use = tr.querySelector("input.use");
    if (!use.checked) continue;
    const name = use.getAttribute("data-method");
    const inp = tr.querySelector("input.params");
    if (!inp) { methods.push({name: name}); continue; }
    const vals = paramsOf(tr);
    if (!vals.length || vals.some((v) => !isFinite(v))) throw new Error("method " + name + ": give its parameter values as numbers (" + inp.placeholder + ")");
    methods.push({name: name, params: vals});
  }
  if (!methods.length) throw new Error("tick at least one masking method");
  const order = catalogue.metrics.map((m) => m.name);
  const metrics = Array.from(document.querySelectorAll("input.metric:checked")).map((c) => c.value)
    .sort((x, y) => order.indexOf(x) - order.indexOf(y));
  if (!metrics.length) throw new Error("tick at least one metric");
  const spec = {name: $("spec-name").value.trim() || "audit", seed: parseInt($("spec-seed").value || "0", 10)};
  if (entries.length === 1) spec.dataset = entries[0]; else spec.datasets = entries;
  spec.methods = methods;
  spec.replicates = parseInt($("spec-replicates").value || "1", 10);
  spec.metrics = metrics;
  const rules = rulesText();
  if (rules.length) spec.require = rules;
  return spec;
}
function yamlValue(v) {
  if (Array.isArray(v)) return "[" + v.map(yamlValue).join(", ") + "]";
  if (v && typeof v === "object") return "{" + Object.entries(v).map(([k, x]) => k + ": " + yamlValue(x)).join(", ") + "}";
  if (typeof v === "string") return /^[A-Za-z0-9_.\-]+$/.test(v) && !/^(true|false|null|yes|no|on|off|[0-9.eE+\-]+)$/i.test(v) ? v : JSON.stringify(v);
  return String(v);
}
function toYaml(spec) {
  const lines = [];
  for (const [k, v] of Object.entries(spec)) {
    if (Array.isArray(v) && v.length && typeof v[0] === "object") {
      lines.push(k + ":");
      for (const x of v) lines.push("  - " + yamlValue(x));
    } else lines.push(k + ": " + yamlValue(v));
  }
  return lines.join("\n") + "\n";
}
async function submit(body, ctype, spec) {
  text($("rules-result"), "");
  try {
    const a = await (await api("v1/audits", {method: "POST", body: body, headers: {"Content-Type": ctype}})).json();
    audits[a.id] = {spec: spec || null, rules: spec && spec.require ? spec.require.slice() : []};
    text($("spec-result"), "audit " + a.id + " queued: its progress and results are in step 4", "ok");
    if (spec && spec.require) text($("rules-result"), "rules accepted: " + spec.require.join("; "), "ok");
    refresh();
  } catch (e) {
    if (/rule/i.test(e.message)) {
      text($("rules-result"), e.message, "msg");
      text($("spec-result"), "not run: a rule in step 2 is refused (see there)", "msg");
    } else text($("spec-result"), e.message, "msg");
  }
}
$("rules").oninput = () => { text($("rules-result"), ""); };
$("spec-form").onsubmit = async (ev) => {
  ev.preventDefault();
  let spec;
  try { spec = buildSpec(); } catch (e) { text($("spec-result"), e.message, "msg"); return; }
  await submit(JSON.stringify(spec), "application/json", spec);
};
$("spec-to-yaml").onclick = () => {
  try { $("spec-text").value = toYaml(buildSpec()); $("expert").open = true; }
  catch (e) { text($("spec-result"), e.message, "msg"); }
};
$("yaml-submit").onclick = async () => { await submit($("spec-text").value, "application/yaml", null); };

// -- audits and their results -----------------------------------------------------------
function auditBox(a) {
  let box = document.getElementById("audit-" + a.id);
  if (!box) {
    box = el("div", {id: "audit-" + a.id});
    box.innerHTML = '<div><b class="name"></b> <code class="aid"></code> <span class="status"></span> ' +
      '<span class="count"></span> <button class="cancel" type="button">cancel</button> ' +
      '<button class="resume" type="button">resume</button></div>' +
      '<div class="bar" role="progressbar" aria-valuemin="0" aria-valuemax="100"><div></div></div>' +
      '<div class="msg"></div><div class="results"></div>';
    box.querySelector(".cancel").onclick = async () => {
      try { await api("v1/audits/" + a.id, {method: "DELETE"}); refresh(); }
      catch (e) { text(box.querySelector(".msg"), e.message, "msg"); }
    };
    box.querySelector(".resume").onclick = async () => {
      try { await api("v1/audits/" + a.id + "/resume", {method: "POST"}); refresh(); }
      catch (e) { text(box.querySelector(".msg"), e.message, "msg"); }
    };
    const empty = $("audits-empty");
    if (empty) empty.remove();
    $("audits").insertBefore(box, $("audits").firstChild);
  }
  box.className = "audit " + a.status;
  box.querySelector(".name").textContent = a.name;
  box.querySelector(".aid").textContent = a.id;
  const what = {queued: "waiting to start", running: "running", done: "done",
                failed: "failed", cancelled: "cancelled"}[a.status] || a.status;
  box.querySelector(".status").textContent = a.status === "running" && !a.cells_done ?
    "running: reading the data and computing the first cells" : what;
  // one count: the cells in the cube, as the service counts them
  const pct = a.cells_total ? Math.floor(100 * a.cells_done / a.cells_total) : 0;
  const count = box.querySelector(".count");
  count.textContent = a.cells_done + " of " + a.cells_total + " cells (" + pct + " %)";
  count.setAttribute("data-done", a.cells_done);
  const bar = box.querySelector(".bar");
  bar.setAttribute("aria-valuenow", pct);
  bar.firstChild.style.width = pct + "%";
  box.querySelector(".cancel").style.display = (a.status === "queued" || a.status === "running") ? "" : "none";
  box.querySelector(".resume").style.display = (a.status === "failed" || a.status === "cancelled") ? "" : "none";
  const msg = box.querySelector(".msg");
  // the message is the audit's state now: a resumed audit drops its old cancel note
  if (a.error) text(msg, (a.status === "cancelled" ? "" : a.status + ": ") + a.error +
    (a.status === "cancelled" ? " (" + a.cells_done + " of " + a.cells_total + " cells done; resume computes the rest)" : ""),
    a.status === "cancelled" ? "warn msg" : "msg");
  else if (a.note) text(msg, a.note, "warn msg");
  else text(msg, "", "msg");
  const final = a.status === "done" || ((a.status === "cancelled" || a.status === "failed") && a.cells_done > 0);
  const state = a.status + ":" + a.cells_done;
  if (final && shown[a.id] !== state) { shown[a.id] = state; showResults(a, box); }
  if (!final && a.status !== "cancelled" && a.status !== "failed" && shown[a.id]) {
    delete shown[a.id]; box.querySelector(".results").innerHTML = "";
  }
}

async function showResults(a, box) {
  const res = box.querySelector(".results");
  try {
    const sum = await (await api("v1/audits/" + a.id + "/summary")).json();
    res.innerHTML = "";
    if (a.status !== "done") res.appendChild(el("div", {cls: "warn", text: "partial results: the " + a.cells_done + " of " + a.cells_total + " cells finished before the audit stopped"}));
    const view = el("div", {cls: "view"});
    const info = audits[a.id] || (audits[a.id] = {spec: null, rules: []});
    info.summary = sum;
    if (sum.datasets.length > 1) {
      const sel = el("select", {cls: "dataset", id: "dataset-" + a.id});
      for (const d of sum.datasets) sel.appendChild(el("option", {value: d, text: d}));
      sel.onchange = () => showDataset(a, view, sel.value);
      res.appendChild(el("label", {}, ["Dataset ", sel, " ", el("small", {text: "(this audit covers " + sum.datasets.length + " datasets)"})]));
    }
    const all = el("label", {cls: "hint"}, [el("input", {type: "checkbox", cls: "all-metrics"}), " show every metric the audit measured (" + sum.metrics.length + "), not only what was ticked and what a score brought"]);
    all.firstChild.onchange = () => { info.all = all.firstChild.checked; showDataset(a, view, info.dataset || null); };
    res.appendChild(all);
    const rj = el("button", {type: "button", cls: "rejudge", text: "judge again with the rules of step 2"});
    rj.onclick = () => { info.rules = rulesText(); showDataset(a, view, info.dataset || null); };
    res.appendChild(view);
    res.appendChild(rj);
    await showDataset(a, view, sum.datasets.length > 1 ? sum.datasets[0] : null);
  } catch (e) { text(box.querySelector(".msg"), e.message, "msg"); }
}

function cellName(m, p, pn) { return pn === "none" ? m : m + " " + (pn ? pn + "=" : "") + g(p); }

async function showDataset(a, view, dataset) {
  const info = audits[a.id];
  info.dataset = dataset;
  const q = dataset ? "&dataset=" + encodeURIComponent(dataset) : "";
  const rq = (info.rules || []).map((r) => "&require=" + encodeURIComponent(r)).join("");
  const names = info.summary.metrics.map((m) => m.name);
  const ticked = info.spec ? info.spec.metrics : null;
  let rep;
  try {
    const base = {by: info.summary.ranking.by};      // the default ranking, from the summary
    // what was ticked and the parts a ticked score brought; every metric when asked
    let want = names;
    if (!info.all && ticked) {
      const withParts = new Set(ticked);
      for (const t of ticked) for (const p of ((metricInfo(t) || {}).requires || [])) withParts.add(p);
      want = names.filter((n) => withParts.has(n));
    } else if (!info.all) want = [];
    const extra = want.filter((n) => n !== base.by && !(metricInfo(n) || {}).part_of);
    const mq = base.by === "balanced" || !extra.length ? "" : "&metrics=" + encodeURIComponent(extra.join(","));
    rep = await (await api("v1/audits/" + a.id + "/report?format=json" + q + rq + mq)).json();
  } catch (e) {
    view.innerHTML = "";
    view.appendChild(el("div", {cls: "msg rules-error", id: "rules-error-" + a.id, text: e.message}));
    if (/rule/i.test(e.message)) text($("rules-result"), e.message, "msg");
    return;
  }
  view.innerHTML = "";
  const cap = el("div", {cls: "caption", id: "caption-" + a.id});
  cap.appendChild(el("b", {text: "Ranked by " + rep.by}));
  cap.appendChild(document.createTextNode(" (rank 1 is best): " + (rep.why || (rep.by === "balanced" ? "the mean of each cell's risk rank and loss rank" : ""))));
  view.appendChild(cap);
  if (rep.warning) view.appendChild(el("div", {cls: "warn", text: rep.warning}));
  const rec = rep.recommendation;
  // -- the recommendation ---------------------------------------------------------------
  let target = null;
  if (rec) {
    const box = el("div", {cls: "recommend" + (rec.recommended ? "" : " none"), id: "recommend-" + a.id});
    const rows = rep.rows;
    const find = (c) => rows.find((r) => r.method === c.method && r.param === c.param);
    box.appendChild(el("div", {text: "Rules: " + rec.rules.join(", ") + " — " + rec.acceptable.length + " of " + rows.length + " cells acceptable (every replicate meets every rule)."}));
    if (rec.recommended) {
      const r = find(rec.recommended);
      target = rec.recommended;
      box.appendChild(el("div", {}, [el("b", {text: "Recommended: " + cellName(r.method, r.param, r.param_name)}),
        " — the least " + rec.loss + " (" + num(r[rec.loss]) + ") among the acceptable cells."]));
      box.appendChild(el("div", {cls: "hint", text: "Pareto front of the acceptable cells (" + rec.loss + " against " + (rec.front_metrics.join(", ") || "-") + "; no other acceptable cell is better on all of them): " +
        rec.front.map((c) => cellName(c.method, c.param, (find(c) || {}).param_name)).join(", ")}));
    } else {
      const r = find(rec.closest);
      target = rec.closest;
      box.appendChild(el("div", {}, [el("b", {text: "No cell is acceptable."}),
        " The closest is " + cellName(r.method, r.param, r.param_name) + ": it breaks " + r.breaks + ". Loosen a rule, or add stronger parameters to the grid."]));
    }
    view.appendChild(box);
  } else {
    view.appendChild(el("div", {cls: "hint", id: "recommend-" + a.id, text: "No rules: every cell is acceptable; set rules in step 2 and judge again to get a recommendation."}));
  }
  // -- the ranking table --------------------------------------------------------------------
  const minfo = {};
  for (const m of rep.metrics) minfo[m.name] = m;
  // a metric nobody ticked is marked with the score (or measure) that brought it
  const addedBy = {};
  const roots = ticked || names.filter((n) => !names.some((o) => ((metricInfo(o) || {}).requires || []).includes(n)));
  const walk = (t, depth) => {
    for (const part of ((metricInfo(t) || {}).requires || [])) {
      if (roots.includes(part) || addedBy[part] || depth > 6) continue;
      addedBy[part] = t; walk(part, depth + 1);
    }
  };
  for (const t of roots) walk(t, 0);
  const table = el("table", {cls: "rank", id: "rank-" + a.id});
  const skip = new Set(["param_name", "replicates", "breaks", "acceptable", "balanced"]);
  const cols = Object.keys(rep.rows[0] || {}).filter((c) => !skip.has(c) && !/ rank$/.test(c));
  const head = table.createTHead().insertRow();
  head.appendChild(el("th", {text: "rank", title: "1 is best by " + rep.by + "; equal values share a rank"}));
  for (const c of cols) {
    const m = minfo[c] || metricInfo(c);
    const th = el("th", {text: c});
    if (m) th.title = m.name + ": " + m.description + " [" + (m.unit || "no unit") + "; " + (m.lower_is_better ? "lower" : "higher") + " is better]";
    if (addedBy[c]) th.appendChild(el("span", {cls: "added", text: "added by " + addedBy[c]}));
    head.appendChild(th);
  }
  if (rec) { head.appendChild(el("th", {text: "acceptable"})); head.appendChild(el("th", {text: "breaks", cls: "breaks"})); }
  head.appendChild(el("th", {text: ""}));
  const body = table.createTBody();
  const byv = rep.by === "balanced" ? "balanced" : rep.by;
  let prev = null, rank = 0;
  rep.rows.forEach((row, i) => {
    const tr = body.insertRow();
    tr.setAttribute("data-method", row.method); tr.setAttribute("data-param", row.param);
    if (target && row.method === target.method && row.param === target.param && rec && rec.recommended) tr.className = "recommended";
    if (row[byv] !== prev) { rank = i + 1; prev = row[byv]; }
    tr.insertCell().textContent = row[byv] === null ? "" : rank;
    for (const c of cols) tr.insertCell().textContent = num(row[c]);
    if (rec) {
      const ok = row.acceptable === "yes";
      const td = tr.insertCell(); td.textContent = ok ? "yes" : "no"; td.className = ok ? "yes" : "no";
      const br = tr.insertCell(); br.textContent = row.breaks || ""; br.className = "breaks";
    }
    const b = el("button", {type: "button", cls: "choose", text: "choose"});
    b.onclick = () => { chooseCell(a, row.method, row.param, row.param_name, dataset, rec, row); release.manual = true; $("step-release").scrollIntoView(); };
    tr.insertCell().appendChild(b);
  });
  view.appendChild(table);
  // the release step follows the newest results: their recommended (or closest) cell
  const pick = target ? rep.rows.find((x) => x.method === target.method && x.param === target.param) : rep.rows[0];
  if (pick && !(release && release.manual && release.audit !== a.id)) {
    chooseCell(a, pick.method, pick.param, pick.param_name, dataset, rec, pick);
  }
  const dl = el("dl", {cls: "metrics", id: "explain-" + a.id});
  if (rep.by === "balanced") {
    dl.appendChild(el("dt", {text: "rank"}));
    dl.appendChild(el("dd", {text: "by the mean of the cell's risk rank and loss rank (lower is better)"}));
  }
  for (const m of rep.metrics) {
    dl.appendChild(el("dt", {text: m.name}));
    dl.appendChild(el("dd", {}, [el("i", {text: (m.unit || "no unit") + "; " + (m.lower_is_better ? "lower" : "higher") + " is better. "}), m.description,
      addedBy[m.name] ? " (added by " + addedBy[m.name] + ")" : ""]));
  }
  view.appendChild(el("details", {}, [el("summary", {text: "What the columns mean"}), dl]));
  if (rep.risk && rep.loss) {
    const img = el("img", {cls: "plot", id: "plot-" + a.id,
      alt: "trade-off plot: " + rep.risk + " against " + rep.loss + ", the better corner marked"});
    view.appendChild(img);
    const blob = await (await api("v1/audits/" + a.id + "/plot?kind=tradeoff&risk=" +
      encodeURIComponent(rep.risk) + "&loss=" + encodeURIComponent(rep.loss) + q)).blob();
    img.src = URL.createObjectURL(blob);
  }
}

// -- the release ----------------------------------------------------------------------------
function chooseCell(a, method, param, pname, dataset, rec, row) {
  const info = audits[a.id] || {};
  release = {audit: a.id, name: a.name, method, param, dataset, rules: info.rules || [],
             replicates: row && row.replicates ? row.replicates : 1};
  $("release-none").style.display = "none";
  $("release-box").style.display = "";
  $("release-cell").textContent = cellName(method, param, pname) + (dataset ? " of dataset " + dataset : "") + ", from the audit \u201c" + a.name + "\u201d";
  const sel = $("release-replicate");
  sel.innerHTML = "";
  for (let r = 0; r < release.replicates; r++) sel.appendChild(el("option", {value: r, text: String(r)}));
  let state = "";
  if (rec && row) state = row.acceptable === "yes" ? (rec.recommended && rec.recommended.method === method && rec.recommended.param === param ? "the recommended cell" : "acceptable") : "not acceptable: breaks " + row.breaks;
  text($("release-state"), state, rec && row && row.acceptable !== "yes" ? "msg" : "ok");
  $("compare").innerHTML = ""; text($("release-msg"), "");
  document.querySelectorAll("table.rank tr.chosen").forEach((tr) => tr.classList.remove("chosen"));
  const tr = document.querySelector("#rank-" + a.id + ' tr[data-method="' + method + '"][data-param="' + param + '"]');
  if (tr) tr.classList.add("chosen");
}
function cellQuery() {
  const r = release;
  let q = "method=" + encodeURIComponent(r.method) + "&param=" + encodeURIComponent(r.param) +
    "&replicate=" + encodeURIComponent($("release-replicate").value || "0");
  if (r.dataset) q += "&dataset=" + encodeURIComponent(r.dataset);
  return q;
}
function rulesQuery() { return (release.rules || []).map((x) => "&require=" + encodeURIComponent(x)).join(""); }
async function download(path, fallback) {
  const r = await api(path);
  const cd = r.headers.get("Content-Disposition") || "";
  const m = /filename="?([^";]+)"?/.exec(cd);
  const blob = await r.blob();
  const a = el("a", {href: URL.createObjectURL(blob), download: m ? m[1] : fallback});
  document.body.appendChild(a); a.click(); a.remove();
  return m ? m[1] : fallback;
}
async function act(button, busy, fn) {
  const b = $(button), was = b.textContent;
  b.disabled = true; b.textContent = busy;
  try { await fn(); } catch (e) { text($("release-msg"), e.message, "msg"); }
  finally { b.disabled = false; b.textContent = was; }
}
$("release-download").onclick = () => act("release-download", "preparing the release...", async () => {
  const f = await download("v1/audits/" + release.audit + "/release?" + cellQuery(), "release.csv");
  text($("release-msg"), "downloaded " + f + ": regenerated from the audit's spec and the cell's seed, and checked against the fingerprint the audit recorded", "ok");
});
for (const v of ["internal", "external"]) {
  $("report-" + v).onclick = () => act("report-" + v, "writing the report...", async () => {
    const f = await download("v1/audits/" + release.audit + "/release-report?variant=" + v + "&" + cellQuery() + rulesQuery(), "report-" + v + ".html");
    text($("release-msg"), "downloaded " + f + " (" + v + (v === "external" ? ": no record-level content" : ": lists the riskiest records, keep it internal") + "); it opens offline", "ok");
  });
}
$("compare-show").onclick = () => act("compare-show", "comparing...", async () => {
  const c = await (await api("v1/audits/" + release.audit + "/compare?" + cellQuery() + rulesQuery())).json();
  const box = $("compare");
  box.innerHTML = "";
  box.appendChild(el("h3", {text: "Original against released: " + cellName(c.method, c.param) + ", replicate " + c.replicate}));
  box.appendChild(el("div", {cls: "hint", text: "Each variable's distribution, the original file on the left and the release on the right (the same bins)."}));
  const dists = el("div", {id: "compare-distributions"});
  for (const d of c.distributions) dists.appendChild(el("img", {cls: "dist", alt: d.variable + ": original and released", src: "data:image/png;base64," + d.png}));
  if (c.more_variables) dists.appendChild(el("div", {cls: "hint", text: c.more_variables + " more variables not plotted"}));
  box.appendChild(dists);
  box.appendChild(el("h3", {text: "Associations: released minus original"}));
  box.appendChild(el("div", {cls: "hint", id: "compare-association", text: "Pearson's r between numeric columns, Cramér's V between categorical ones, the correlation ratio for a mixed pair; the largest absolute change is " + num(c.association.largest) + "."}));
  box.appendChild(el("img", {cls: "assoc", alt: "association difference", src: "data:image/png;base64," + c.association.png}));
  box.appendChild(el("h3", {text: "Disclosure risk of this cell, by family"}));
  const rec = c.recommended ? cellName(c.recommended.method, c.recommended.param) : null;
  for (const f of c.risk) {
    const t = el("table", {cls: "risk"});
    const h = t.createTHead().insertRow();
    for (const x of ["metric", "unit", "replicate " + c.replicate, "mean over replicates", rec ? rec + " (recommended, mean)" : "recommended", "grid min", "grid max"]) h.appendChild(el("th", {text: x}));
    const b = t.createTBody();
    for (const x of f.metrics) {
      const tr = b.insertRow();
      for (const v of [x.metric, x.unit, num(x.chosen), num(x.chosen_mean), num(x.recommended_mean), num(x.grid_min), num(x.grid_max)]) tr.insertCell().textContent = v;
    }
    box.appendChild(el("div", {cls: "family"}, [el("b", {text: f.family}), t]));
  }
  box.setAttribute("data-ready", "1");
});

async function refresh() {
  try {
    const list = await (await api("v1/audits")).json();
    for (const a of list) auditBox(a);
  } catch (e) { /* shown by the token line */ }
}

async function start() {
  try {
    const h = await (await fetch("v1/health")).json();
    $("auth").style.display = h.auth === "bearer" ? "" : "none";
  } catch (e) {}
  try {
    await loadCatalogue();
    await refreshDatasets();
    text($("auth-state"), "signed in", "ok");
  } catch (e) { text($("auth-state"), e.message, "msg"); if (/^401/.test(e.message)) $("auth").style.display = ""; }
  refresh();
}
start();
setInterval(refresh, 1000);
</script>
</body></html>
"""
