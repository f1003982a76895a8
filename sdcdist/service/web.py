"""The web page of the service (``GET /``): plain HTML and a little JavaScript, no build step.

It lists the principal's audits with progress bars (polled every second),
has a form to upload a dataset and one to submit a spec against it, and shows
each finished audit's ranking table and trade-off plot. The token, when the
service needs one, is kept in the browser's session storage and sent as a
bearer header with every request.
"""

PAGE = r"""<!DOCTYPE html>
<html lang="en"><head><meta charset="utf-8">
<meta name="viewport" content="width=device-width, initial-scale=1">
<title>sdcdist audits</title>
<style>
body{font-family:system-ui,sans-serif;margin:1.5em auto;max-width:1100px;padding:0 1em;color:#222}
h1{font-size:1.4em;margin-bottom:.2em} h2{font-size:1.1em;margin-top:1.5em}
fieldset{border:1px solid #ccc;padding:.6em 1em;margin:.6em 0}
label{display:inline-block;margin:.2em .8em .2em 0}
textarea{width:100%;height:12em;font-family:monospace;font-size:12px}
.audit{border:1px solid #ddd;border-radius:4px;padding:.5em .8em;margin:.5em 0}
.bar{background:#eee;border-radius:3px;height:14px;width:100%;overflow:hidden}
.bar>div{background:#3a7bd5;height:100%;width:0;transition:width .3s}
.done .bar>div{background:#2e9b4f} .failed .bar>div,.cancelled .bar>div{background:#c33}
.msg{color:#a00;white-space:pre-wrap} .ok{color:#2e7d32}
table.rank{border-collapse:collapse;font-size:12px;margin:.5em 0}
table.rank td,table.rank th{padding:2px 8px;text-align:right;border-bottom:1px solid #eee}
table.rank td:first-child,table.rank th:first-child{text-align:left}
img.plot{max-width:100%;border:1px solid #eee;margin:.5em 0}
small{color:#666}
</style></head><body>
<h1>sdcdist audits</h1>
<small>Information loss and disclosure risk of masking methods. API: <a href="docs">/docs</a>.</small>
<fieldset id="auth"><legend>Token</legend>
<label>Bearer token <input id="token" type="password" size="48" autocomplete="off"></label>
<button id="save-token" type="button">Use</button> <small id="auth-state"></small>
</fieldset>
<fieldset><legend>1. Upload a dataset (CSV or Parquet)</legend>
<form id="upload-form">
<label>File <input id="upload-file" name="file" type="file" accept=".csv,.tsv,.gz,.parquet,.pq" required></label>
<label>Name <input id="upload-name" name="name" size="12"></label>
<label>Key columns <input id="upload-keys" name="keys" size="20" placeholder="A,B,C"></label>
<button id="upload-submit" type="submit">Upload</button>
</form>
<div id="upload-result"></div>
</fieldset>
<fieldset><legend>2. Submit an audit spec</legend>
<form id="spec-form">
<label>Dataset <select id="spec-dataset"></select></label> <small>replaces <code>dataset:</code> in the spec</small>
<textarea id="spec-text" spellcheck="false">name: web
seed: 1
methods:
  - {name: noise, params: [0.1, 0.2]}
  - {name: micmul, params: [3]}
replicates: 1
metrics: [IL1s, DLD]
</textarea>
<button id="spec-submit" type="submit">Submit</button>
</form>
<div id="spec-result"></div>
</fieldset>
<h2>Audits</h2>
<div id="audits"><small>none yet</small></div>
<script>
"use strict";
const $ = (id) => document.getElementById(id);
let token = sessionStorage.getItem("sdcdist-token") || "";
$("token").value = token;
const shown = {};                       // audit id -> rendered final status

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

$("save-token").onclick = () => {
  token = $("token").value.trim();
  sessionStorage.setItem("sdcdist-token", token);
  refreshDatasets(); refresh();
};

async function refreshDatasets() {
  try {
    const ds = await (await api("v1/datasets")).json();
    const sel = $("spec-dataset");
    const keep = sel.value;
    sel.innerHTML = "";
    for (const d of ds) {
      const o = document.createElement("option");
      o.value = d.id; o.textContent = d.name + " (" + d.rows + " x " + d.columns.length + ", " + d.id + ")";
      sel.appendChild(o);
    }
    if (keep) sel.value = keep;
    text($("auth-state"), "signed in", "ok");
  } catch (e) { text($("auth-state"), e.message, "msg"); }
}

$("upload-form").onsubmit = async (ev) => {
  ev.preventDefault();
  const fd = new FormData($("upload-form"));
  if (!fd.get("name")) fd.delete("name");
  if (!fd.get("keys")) fd.delete("keys");
  text($("upload-result"), "uploading...");
  try {
    const d = await (await api("v1/datasets", {method: "POST", body: fd})).json();
    text($("upload-result"), "dataset " + d.id + ": " + d.rows + " records x " + d.columns.length + " columns", "ok");
    await refreshDatasets();
    $("spec-dataset").value = d.id;
  } catch (e) { text($("upload-result"), e.message, "msg"); }
};

$("spec-form").onsubmit = async (ev) => {
  ev.preventDefault();
  let spec = $("spec-text").value;
  const id = $("spec-dataset").value;
  if (id) {                              // the chosen upload is the spec's dataset
    spec = spec.replace(/^dataset:.*(\n[ \t]+.*)*/m, "").trimEnd() +
      "\ndataset: {id: " + id + "}\n";
  }
  try {
    const a = await (await api("v1/audits", {method: "POST", body: spec,
      headers: {"Content-Type": "application/yaml"}})).json();
    text($("spec-result"), "audit " + a.id + " queued", "ok");
    refresh();
  } catch (e) { text($("spec-result"), e.message, "msg"); }
};

function auditBox(a) {
  let box = document.getElementById("audit-" + a.id);
  if (!box) {
    box = document.createElement("div");
    box.id = "audit-" + a.id;
    box.innerHTML = '<div><b class="name"></b> <code class="aid"></code> <span class="status"></span> ' +
      '<span class="count"></span> <button class="cancel" type="button">cancel</button></div>' +
      '<div class="bar" role="progressbar" aria-valuemin="0" aria-valuemax="100"><div></div></div>' +
      '<div class="msg"></div><div class="results"></div>';
    box.querySelector(".cancel").onclick = async () => {
      try { await api("v1/audits/" + a.id, {method: "DELETE"}); refresh(); }
      catch (e) { text(box.querySelector(".msg"), e.message, "msg"); }
    };
    const list = $("audits");
    if (list.querySelector("small")) list.innerHTML = "";
    list.insertBefore(box, list.firstChild);
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
  if (a.error) text(box.querySelector(".msg"), a.error, "msg");
  if (a.status === "done" && shown[a.id] !== "done") { shown[a.id] = "done"; showResults(a, box); }
}

async function showResults(a, box) {
  const res = box.querySelector(".results");
  try {
    const metrics = await (await api("v1/audits/" + a.id + "/query")).json();
    const names = metrics.rows.length ? Object.keys(metrics.rows[0]) : [];
    const score = ["Score", "Score2", "Score3"].find((s) => names.includes(s));
    const by = score || names.find((n) => !["method", "param", "param_name", "replicates"].includes(n));
    const rep = await (await api("v1/audits/" + a.id + "/report?format=json&by=" + encodeURIComponent(by))).json();
    const table = document.createElement("table");
    table.className = "rank";
    table.id = "rank-" + a.id;
    const cols = Object.keys(rep.rows[0] || {}).filter((c) => c !== "param_name" && c !== "replicates");
    const head = table.createTHead().insertRow();
    for (const c of cols) { const th = document.createElement("th"); th.textContent = c; head.appendChild(th); }
    const body = table.createTBody();
    for (const row of rep.rows) {
      const tr = body.insertRow();
      for (const c of cols) {
        const v = row[c];
        tr.insertCell().textContent = (typeof v === "number") ? (Number.isInteger(v) ? v : v.toFixed(3)) : (v === null ? "" : v);
      }
    }
    const cap = document.createElement("small");
    cap.textContent = "cells ranked by " + by + " (rank 1 is best)";
    res.appendChild(cap); res.appendChild(table);
    const img = document.createElement("img");
    img.className = "plot"; img.id = "plot-" + a.id; img.alt = "trade-off plot";
    const blob = await (await api("v1/audits/" + a.id + "/plot?kind=tradeoff")).blob();
    img.src = URL.createObjectURL(blob);
    res.appendChild(img);
  } catch (e) { text(box.querySelector(".msg"), e.message, "msg"); }
}

async function refresh() {
  try {
    const audits = await (await api("v1/audits")).json();
    for (const a of audits) auditBox(a);
  } catch (e) { /* shown by the token line */ }
}

refreshDatasets(); refresh();
setInterval(refresh, 1000);
</script>
</body></html>
"""
