"""The web page of the service (``GET /``): plain HTML and a little JavaScript, no build step.

For a data-protection officer rather than a programmer:

- **Upload** a file with its roles (key, confidential, weight, household id columns,
  integer-coded categorical columns); the answer lists every column's type and roles, so a column
  read as categorical by accident shows at once.
- **Build an audit** from forms: the registered masking methods (with their parameter
  range, a parameter list and a grid builder), the registered metrics (grouped by kind,
  each with its unit, which end is better and its definition) and the key columns of the
  chosen datasets, all read from the API (``/v1/methods``, ``/v1/metrics``,
  ``/v1/datasets``): the page holds no list of its own. The YAML box stays for experts.
- **Results**: every audit keeps its box (a new submission never wipes another's
  results); a finished (or cancelled, with cells) audit shows its ranking by the default
  risk-utility score (see :mod:`sdcdist.service.results`), what each metric means, and
  the trade-off plot of the table's own loss and risk measures with the better corner
  marked. An audit over several datasets shows a dataset selector; a failed or
  cancelled audit shows why.

The token, when the service needs one, is kept in the browser's session storage and
sent as a bearer header with every request. Every text from the service is put in the
page as text (``textContent``), never as HTML.
"""

PAGE = r"""<!DOCTYPE html>
<html lang="en"><head><meta charset="utf-8">
<meta name="viewport" content="width=device-width, initial-scale=1">
<title>sdcdist audits</title>
<style>
body{font-family:system-ui,sans-serif;margin:1.5em auto;max-width:1150px;padding:0 1em;color:#222}
h1{font-size:1.4em;margin-bottom:.2em} h2{font-size:1.1em;margin-top:1.5em}
h3{font-size:1em;margin:.6em 0 .3em}
fieldset{border:1px solid #ccc;padding:.6em 1em;margin:.6em 0}
label{display:inline-block;margin:.2em .8em .2em 0}
textarea{width:100%;height:12em;font-family:monospace;font-size:12px}
.audit{border:1px solid #ddd;border-radius:4px;padding:.5em .8em;margin:.5em 0}
.bar{background:#eee;border-radius:3px;height:14px;width:100%;overflow:hidden}
.bar>div{background:#3a7bd5;height:100%;width:0;transition:width .3s}
.done .bar>div{background:#2e9b4f} .failed .bar>div,.cancelled .bar>div{background:#c33}
.msg{color:#a00;white-space:pre-wrap} .ok{color:#2e7d32} .warn{color:#9a6700}
table.rank,table.grid{border-collapse:collapse;font-size:12px;margin:.5em 0}
table.rank td,table.rank th{padding:2px 8px;text-align:right;border-bottom:1px solid #eee}
table.rank td:first-child,table.rank th:first-child{text-align:left}
table.rank tr.best td{background:#eaf6ee}
table.grid td,table.grid th{padding:2px 6px;border-bottom:1px solid #eee;text-align:left;vertical-align:top}
table.grid input[type=text]{font-family:monospace}
img.plot{max-width:100%;width:760px;border:1px solid #eee;margin:.5em 0}
small,.hint{color:#666} .hint{font-size:12px}
dl.metrics{font-size:12px;margin:.3em 0;display:grid;grid-template-columns:max-content 1fr;gap:.15em .8em}
dl.metrics dt{font-weight:bold} dl.metrics dd{margin:0}
#metric-list{display:grid;grid-template-columns:1fr 1fr;gap:0 1.5em}
.kindgroup label{display:block;margin:.1em 0;font-size:13px}
#metric-list .def{display:none} #metric-list.defs .def{display:inline}
.cols label{font-size:13px}
code{font-size:12px}
</style></head><body>
<h1>sdcdist audits</h1>
<small>How much information masking methods destroy, and how easily people are re-identified
in the result. API reference: <a href="docs">/docs</a>.</small>
<fieldset id="auth"><legend>Token</legend>
<label>Bearer token <input id="token" type="password" size="48" autocomplete="off"></label>
<button id="save-token" type="button">Use</button> <small id="auth-state"></small>
</fieldset>

<fieldset><legend>1. Upload a dataset (CSV or Parquet)</legend>
<form id="upload-form">
<label>File <input id="upload-file" name="file" type="file" accept=".csv,.tsv,.txt,.gz,.parquet,.pq" required></label>
<label>Name <input id="upload-name" name="name" size="12"></label><br>
<label title="the columns an intruder may know (quasi-identifiers), in linkage order">Key columns <input id="upload-keys" name="keys" size="18" placeholder="AGE,REGION"></label>
<label title="the sensitive columns (needed by the IPSO methods)">Confidential <input id="upload-confidential" name="confidential" size="14"></label>
<label title="integer-coded columns that are categories, not numbers (text columns are categorical anyway)">Categorical <input id="upload-categorical" name="categorical" size="14"></label>
<label title="the sampling-weight column (positive values; never masked)">Weight <input id="upload-weight" name="weight" size="8"></label>
<label title="the household id column, for the household risks HR_* (never a key)">Household id <input id="upload-household" name="household" size="8"></label>
<label title="keep only these columns (leave identifiers out)">Only columns <input id="upload-columns" name="columns" size="18"></label>
<button id="upload-submit" type="submit">Upload</button>
</form>
<div id="upload-result"></div>
</fieldset>

<fieldset><legend>2. Build an audit</legend>
<form id="spec-form">
<label>Name <input id="spec-name" value="audit" size="14"></label>
<label title="every random choice derives from it: the same seed and data give the same results">Seed <input id="spec-seed" type="number" value="1" min="0" style="width:6em"></label>
<label title="random methods run this many times per parameter value; results are averaged">Replicates <input id="spec-replicates" type="number" value="2" min="1" max="100" style="width:4em"></label>
<h3>Datasets</h3>
<div id="spec-datasets"><small>upload a dataset first</small></div>
<h3>Key columns <span class="hint">(what an intruder knows; linkage risk is measured on them, in this order)</span></h3>
<div id="spec-keys" class="cols"><small>choose a dataset</small></div>
<h3>Masking methods <span class="hint">(tick the methods to compare; parameters as a list, or build a grid)</span></h3>
<table class="grid" id="method-table"><thead><tr><th></th><th>method</th><th>parameter</th><th>allowed</th><th>values</th><th>grid: from, to, steps</th></tr></thead><tbody></tbody></table>
<h3>Metrics <span class="hint">(a score brings the metrics it is made of along; hover a name for its definition)</span>
<label class="hint"><input type="checkbox" id="metric-defs"> show definitions</label></h3>
<div id="metric-list"></div>
<p><button id="spec-submit" type="submit">Submit audit</button>
<button id="spec-to-yaml" type="button">Show as YAML</button></p>
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
</fieldset>

<h2>Audits</h2>
<div id="audits"><small id="audits-empty">none yet</small></div>
<script>
"use strict";
const $ = (id) => document.getElementById(id);
let token = sessionStorage.getItem("sdcdist-token") || "";
$("token").value = token;
const shown = {};                       // audit id -> state whose results are on the page
let catalogue = null;                   // {methods, metrics} from the API
let datasets = [];
// the page's starting grid (what a first audit usually compares); every method the
// registry has is listed, these are only pre-filled
const START = {noise: "0.05, 0.1, 0.2", rankswap: "2, 5, 10", micmul: "3, 5"};
// and the metric it starts with is the score the registry prefers (/v1/metrics "preferred")

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
    try { const j = await r.json(); if (j.detail) msg = r.status + ": " + j.detail; } catch (e) {}
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

$("save-token").onclick = () => {
  token = $("token").value.trim();
  sessionStorage.setItem("sdcdist-token", token);
  start();
};

// -- catalogue: methods and metrics from the registries ---------------------------------
async function loadCatalogue() {
  const [methods, metrics] = await Promise.all([
    (await api("v1/methods")).json(), (await api("v1/metrics")).json()]);
  catalogue = {methods, metrics};
  const body = $("method-table").tBodies[0];
  body.innerHTML = "";
  for (const m of methods) {
    const tr = body.insertRow();
    tr.id = "method-" + m.name;
    const use = el("input", {type: "checkbox", cls: "use", "data-method": m.name});
    use.checked = m.name in START;
    tr.insertCell().appendChild(use);
    const name = tr.insertCell();
    name.appendChild(el("b", {text: m.name}));
    name.appendChild(el("div", {cls: "hint", text: m.description}));
    tr.insertCell().textContent = m.kind === "none" ? "(none)" : m.param;
    tr.insertCell().textContent = m.kind === "none" ? "no parameter" : m.range;
    const vals = tr.insertCell();
    if (m.kind !== "none") {
      const inp = el("input", {type: "text", size: 18, cls: "params", placeholder: m.range});
      inp.value = START[m.name] || "";
      inp.oninput = () => { use.checked = inp.value.trim() !== ""; };
      vals.appendChild(inp);
      const g = tr.insertCell();
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
        inp.value = out.join(", "); use.checked = true;
      };
      g.append(lo, " ", hi, " ", n, " ", b);
    } else {
      vals.textContent = "-"; tr.insertCell();
    }
  }
  const list = $("metric-list");
  list.innerHTML = "";
  const kinds = [["risk", "Disclosure risk"], ["loss", "Information loss"],
                 ["utility", "Utility loss"], ["score", "Risk-utility scores"]];
  for (const [kind, title] of kinds) {
    const group = el("div", {cls: "kindgroup", id: "metrics-" + kind}, [el("h3", {text: title})]);
    for (const m of metrics.filter((x) => x.kind === kind)) {
      const box = el("input", {type: "checkbox", value: m.name, cls: "metric"});
      box.checked = Boolean(m.preferred);
      const lab = el("label", {title: m.description + (m.reference ? " " + m.reference : "")},
        [box, " ", el("b", {text: m.name}), " ",
         el("span", {cls: "hint", text: "(" + (m.unit || "no unit") + "; " +
           (m.lower_is_better ? "lower" : "higher") + " is better) "}),
         el("span", {cls: "hint def", text: m.description})]);
      group.appendChild(lab);
    }
    list.appendChild(group);
  }
}

// -- datasets -----------------------------------------------------------------------------
async function refreshDatasets(select) {
  datasets = await (await api("v1/datasets")).json();
  const box = $("spec-datasets");
  const was = new Set(checkedDatasets());
  box.innerHTML = "";
  if (!datasets.length) { box.appendChild(el("small", {text: "upload a dataset first"})); }
  datasets.forEach((d, i) => {
    const c = el("input", {type: "checkbox", value: d.id, cls: "ds"});
    c.checked = select ? d.id === select : (was.size ? was.has(d.id) : i === datasets.length - 1);
    c.onchange = showKeys;
    box.appendChild(el("label", {}, [c, " " + d.name + " (" + d.rows + " records x " +
      d.columns.length + " columns, " + d.id + ")"]));
  });
  showKeys();
}
function checkedDatasets() {
  return Array.from(document.querySelectorAll("#spec-datasets input.ds:checked")).map((c) => c.value);
}
function showKeys() {
  const box = $("spec-keys");
  const before = new Map(Array.from(box.querySelectorAll("input")).map((c) => [c.value, c.checked]));
  box.innerHTML = "";
  const chosen = datasets.filter((d) => checkedDatasets().includes(d.id));
  if (!chosen.length) { box.appendChild(el("small", {text: "choose a dataset"})); return; }
  const cols = [];
  for (const d of chosen) for (const c of (d.schema || d.columns.map((n) => ({name: n})))) {
    if (!cols.some((x) => x.name === c.name)) cols.push(c);
  }
  const declared = new Set(chosen.flatMap((d) => (d.roles || {}).key || []));
  for (const c of cols) {
    const cb = el("input", {type: "checkbox", value: c.name, cls: "key"});
    cb.checked = before.has(c.name) ? before.get(c.name) : declared.has(c.name);
    const what = (c.type || "") + (c.roles && c.roles.length ? ", " + c.roles.join(", ") : "");
    box.appendChild(el("label", {}, [cb, " " + c.name + " ", el("span", {cls: "hint", text: what ? "(" + what + ")" : ""})]));
  }
  box.appendChild(el("div", {cls: "hint", text: "none ticked: every column is a key (prefixes of the column order)"}));
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
    out.appendChild(el("div", {cls: "ok", text: "dataset " + d.id + ": " + d.rows + " records x " + d.columns.length + " columns"}));
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
    out.appendChild(t);
    const cats = (d.schema || []).filter((c) => c.type === "categorical").map((c) => c.name);
    if (cats.length) out.appendChild(el("div", {cls: "warn", text: "categorical: " + cats.join(", ") + ". Numeric masking methods carry these columns through unchanged; if one should be numeric, fix the file and upload it again."}));
    await refreshDatasets(d.id);
  } catch (e) { text(out, e.message, "msg"); }
};

// -- the spec from the forms ----------------------------------------------------------
function buildSpec() {
  const ids = checkedDatasets();
  if (!ids.length) throw new Error("choose at least one dataset (upload one first)");
  const keys = Array.from(document.querySelectorAll("#spec-keys input.key:checked")).map((c) => c.value);
  const used = {};
  const entries = ids.map((id) => {
    const d = datasets.find((x) => x.id === id);
    let name = d.name; let k = 2;
    while (used[name]) name = d.name + "_" + (k++);
    used[name] = true;
    const e = {id: id, name: name};
    const mine = keys.filter((c) => d.columns.includes(c));
    if (mine.length) e.keys = mine;
    return e;
  });
  const methods = [];
  for (const tr of $("method-table").tBodies[0].rows) {
    const use = tr.querySelector("input.use");
    if (!use.checked) continue;
    const name = use.getAttribute("data-method");
    const inp = tr.querySelector("input.params");
    if (!inp) { methods.push({name: name}); continue; }
    const vals = inp.value.split(/[\s,;]+/).filter((s) => s !== "").map(Number);
    if (!vals.length || vals.some((v) => !isFinite(v))) throw new Error("method " + name + ": give its parameter values as numbers (" + inp.placeholder + ")");
    methods.push({name: name, params: vals});
  }
  if (!methods.length) throw new Error("tick at least one masking method");
  const metrics = Array.from(document.querySelectorAll("#metric-list input.metric:checked")).map((c) => c.value);
  if (!metrics.length) throw new Error("tick at least one metric");
  const spec = {name: $("spec-name").value.trim() || "audit", seed: parseInt($("spec-seed").value || "0", 10)};
  if (entries.length === 1) spec.dataset = entries[0]; else spec.datasets = entries;
  spec.methods = methods;
  spec.replicates = parseInt($("spec-replicates").value || "1", 10);
  spec.metrics = metrics;
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
async function submit(body, ctype) {
  const a = await (await api("v1/audits", {method: "POST", body: body, headers: {"Content-Type": ctype}})).json();
  text($("spec-result"), "audit " + a.id + " queued", "ok");
  refresh();
}
$("metric-defs").onchange = () => {
  $("metric-list").classList.toggle("defs", $("metric-defs").checked);
};
$("spec-form").onsubmit = async (ev) => {
  ev.preventDefault();
  try { await submit(JSON.stringify(buildSpec()), "application/json"); }
  catch (e) { text($("spec-result"), e.message, "msg"); }
};
$("spec-to-yaml").onclick = () => {
  try { $("spec-text").value = toYaml(buildSpec()); $("expert").open = true; }
  catch (e) { text($("spec-result"), e.message, "msg"); }
};
$("yaml-submit").onclick = async () => {
  try { await submit($("spec-text").value, "application/yaml"); }
  catch (e) { text($("spec-result"), e.message, "msg"); }
};

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
  box.querySelector(".status").textContent = a.status;
  const pct = a.cells_total ? Math.floor(100 * a.cells_done / a.cells_total) : 0;
  box.querySelector(".count").textContent = a.cells_done + " / " + a.cells_total + " cells (" + pct + " %)";
  const bar = box.querySelector(".bar");
  bar.setAttribute("aria-valuenow", pct);
  bar.firstChild.style.width = pct + "%";
  box.querySelector(".cancel").style.display = (a.status === "queued" || a.status === "running") ? "" : "none";
  box.querySelector(".resume").style.display = (a.status === "failed" || a.status === "cancelled") ? "" : "none";
  const msg = box.querySelector(".msg");
  if (a.error) text(msg, (a.status === "cancelled" ? "" : a.status + ": ") + a.error, a.status === "cancelled" ? "warn msg" : "msg");
  else if (a.note) { text(msg, a.note, "warn msg"); msg.dataset.note = "1"; }
  else if (msg.dataset.note) { text(msg, "", "msg"); delete msg.dataset.note; }
  const final = a.status === "done" || ((a.status === "cancelled" || a.status === "failed") && a.cells_done > 0);
  const state = a.status + ":" + a.cells_done;
  if (final && shown[a.id] !== state) { shown[a.id] = state; showResults(a, box); }
}

async function showResults(a, box) {
  const res = box.querySelector(".results");
  try {
    const sum = await (await api("v1/audits/" + a.id + "/summary")).json();
    res.innerHTML = "";
    if (a.status !== "done") res.appendChild(el("div", {cls: "warn", text: "partial results: the " + a.cells_done + " cells finished before the audit stopped"}));
    const view = el("div", {cls: "view"});
    if (sum.datasets.length > 1) {
      const sel = el("select", {cls: "dataset", id: "dataset-" + a.id});
      for (const d of sum.datasets) sel.appendChild(el("option", {value: d, text: d}));
      sel.onchange = () => showDataset(a, view, sel.value);
      res.appendChild(el("label", {}, ["Dataset ", sel, " ", el("small", {text: "(this audit covers " + sum.datasets.length + " datasets)"})]));
    }
    res.appendChild(view);
    await showDataset(a, view, sum.datasets.length > 1 ? sum.datasets[0] : null);
  } catch (e) { text(box.querySelector(".msg"), e.message, "msg"); }
}

async function showDataset(a, view, dataset) {
  const q = dataset ? "&dataset=" + encodeURIComponent(dataset) : "";
  const rep = await (await api("v1/audits/" + a.id + "/report?format=json" + q)).json();
  view.innerHTML = "";
  const cap = el("div", {cls: "caption", id: "caption-" + a.id});
  cap.appendChild(el("b", {text: "Ranked by " + rep.by}));
  cap.appendChild(document.createTextNode(" (rank 1 is best): " + (rep.why || "")));
  view.appendChild(cap);
  if (rep.warning) view.appendChild(el("div", {cls: "warn", text: rep.warning}));
  const info = {};
  for (const m of rep.metrics) info[m.name] = m;
  const table = el("table", {cls: "rank", id: "rank-" + a.id});
  const cols = Object.keys(rep.rows[0] || {}).filter((c) => c !== "param_name" && c !== "replicates");
  const head = table.createTHead().insertRow();
  for (const c of cols) {
    const m = info[c.replace(/ rank$/, "")];
    const th = el("th", {text: c});
    if (m) th.title = m.name + ": " + m.description + " [" + (m.unit || "no unit") + "; " + (m.lower_is_better ? "lower" : "higher") + " is better]";
    head.appendChild(th);
  }
  const body = table.createTBody();
  rep.rows.forEach((row, i) => {
    const tr = body.insertRow();
    if (i === 0) tr.className = "best";
    for (const c of cols) tr.insertCell().textContent = num(row[c]);
  });
  view.appendChild(table);
  const dl = el("dl", {cls: "metrics", id: "explain-" + a.id});
  if (rep.by === "balanced") {
    dl.appendChild(el("dt", {text: "balanced"}));
    dl.appendChild(el("dd", {text: "mean of the cell's risk rank and loss rank (lower is better)"}));
  }
  for (const m of rep.metrics) {
    dl.appendChild(el("dt", {text: m.name}));
    dl.appendChild(el("dd", {}, [el("i", {text: (m.unit || "no unit") + "; " + (m.lower_is_better ? "lower" : "higher") + " is better. "}), m.description]));
  }
  view.appendChild(el("h3", {text: "What the columns mean"}));
  view.appendChild(dl);
  if (rep.risk && rep.loss) {
    const img = el("img", {cls: "plot", id: "plot-" + a.id,
      alt: "trade-off plot: " + rep.risk + " against " + rep.loss + ", the better corner marked"});
    view.appendChild(img);
    const blob = await (await api("v1/audits/" + a.id + "/plot?kind=tradeoff&risk=" +
      encodeURIComponent(rep.risk) + "&loss=" + encodeURIComponent(rep.loss) + q)).blob();
    img.src = URL.createObjectURL(blob);
  }
}

async function refresh() {
  try {
    const audits = await (await api("v1/audits")).json();
    for (const a of audits) auditBox(a);
  } catch (e) { /* shown by the token line */ }
}

async function start() {
  try {
    await loadCatalogue();
    await refreshDatasets();
    text($("auth-state"), "signed in", "ok");
  } catch (e) { text($("auth-state"), e.message, "msg"); }
  refresh();
}
start();
setInterval(refresh, 1000);
</script>
</body></html>
"""
