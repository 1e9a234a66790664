// The explorer's page: two editors with line numbers, the stages of the last compile, the last run's result.
// Every call to the server carries the launch's token (from the page's address) in a header of its own.
"use strict";

const $ = (id) => document.getElementById(id);
const TOKEN = new URLSearchParams(location.search).get("token") || "";
const state = { compiled: null, ran: null, stage: null, compiledFor: null, ranFor: null, job: null };

function esc(text) {
  return String(text).replace(/[&<>"]/g, (c) => ({ "&": "&amp;", "<": "&lt;", ">": "&gt;", '"': "&quot;" }[c]));
}

// ---- editors: a textarea with a gutter of line numbers that scrolls with it
function setupEditor(box) {
  const area = $(box), gutter = $(box + "-editor").querySelector(".gutter");
  const render = () => {
    const lines = area.value.split("\n");
    if (gutter.children.length !== lines.length) {
      gutter.innerHTML = lines.map((_, i) => `<span data-line="${i + 1}">${i + 1}</span>`).join("");
    }
    fitGutter(area, gutter, lines);
    gutter.scrollTop = area.scrollTop;
  };
  area.addEventListener("input", () => { clearMarks(box); render(); markStale(); });
  new ResizeObserver(render).observe(area);
  area.addEventListener("scroll", () => { gutter.scrollTop = area.scrollTop; });
  area.addEventListener("keydown", (e) => {
    if (e.key === "Tab") {
      e.preventDefault();
      area.setRangeText("    ", area.selectionStart, area.selectionEnd, "end");
      render();
    }
  });
  if (box === "program") {
    const follow = () => linkToSource(area.value.slice(0, area.selectionStart).split("\n").length);
    area.addEventListener("click", follow);
    area.addEventListener("keyup", follow);
  }
  return render;
}
// long lines wrap in the editors: each number of the gutter is as tall as its line, measured in a hidden copy
function fitGutter(area, gutter, lines) {
  const measure = $("measure"), style = getComputedStyle(area);
  measure.style.width = `${area.clientWidth - parseFloat(style.paddingLeft) - parseFloat(style.paddingRight)}px`;
  measure.innerHTML = lines.map((line) => `<div>${esc(line) || "&#8203;"}</div>`).join("");
  const rows = measure.children, spans = gutter.children;
  for (let i = 0; i < spans.length && i < rows.length; i++) spans[i].style.height = `${rows[i].offsetHeight}px`;
}

const renderers = { program: setupEditor("program"), reference: setupEditor("reference") };

function clearMarks(box, cls) {
  for (const span of $(box + "-editor").querySelectorAll(".gutter span")) {
    if (!cls || cls === "error") span.classList.remove("error");
    if (!cls || cls === "linked") span.classList.remove("linked");
  }
}

function markLine(box, line, cls, select) {
  clearMarks(box, cls);
  const area = $(box), span = $(box + "-editor").querySelector(`.gutter span[data-line="${line}"]`);
  if (!span) return;
  span.classList.add(cls);
  const lines = area.value.split("\n");
  area.scrollTop = Math.max(0, (line - 5) * 18);
  if (select) {
    const start = lines.slice(0, line - 1).join("\n").length + (line > 1 ? 1 : 0);
    area.focus();
    area.setSelectionRange(start, start + lines[line - 1].length);
  }
}

// ---- the page's state: in the address (#state=...) and in files
function pageState() {
  return { program: $("program").value, reference: $("reference").value, sizes: $("sizes").value,
           target: $("target").value, arch: $("arch").value, check: $("check").checked, example: $("example").value,
           rtol: $("rtol").value, atol: $("atol").value };
}

// what a job is sent: the page's state, the tolerances as numbers (null: from the arithmetic), the job's name
function jobBody(s) {
  const tolerance = (text) => (text.trim() === "" ? null : Number(text));
  return { ...s, rtol: tolerance(s.rtol), atol: tolerance(s.atol), job: state.job };
}

function applyState(s) {
  for (const key of ["program", "reference", "sizes", "rtol", "atol"]) if (typeof s[key] === "string") $(key).value = s[key];
  for (const key of ["target", "arch", "example"]) if (s[key]) $(key).value = s[key];
  $("check").checked = !!s.check;
  renderers.program(); renderers.reference();
  markStale();
}

function encodeState(s) { return btoa(unescape(encodeURIComponent(JSON.stringify(s)))); }
function decodeState(text) { return JSON.parse(decodeURIComponent(escape(atob(text)))); }

// ---- talking to the server
async function call(path, body) {
  const headers = { "X-Explorer-Token": TOKEN };
  const options = body === undefined ? { headers } : {
    method: "POST", headers: { ...headers, "Content-Type": "application/json" }, body: JSON.stringify(body) };
  const response = await fetch(path, options);
  const data = await response.json();
  if (!response.ok) throw new Error(data.error || response.statusText);
  return data;
}

function newJobName() {
  return Array.from(crypto.getRandomValues(new Uint8Array(12)), (b) => b.toString(16).padStart(2, "0")).join("");
}

function busy(text) {
  $("status").textContent = text;
  const working = !!text.endsWith("...");
  for (const id of ["compile", "run"]) $(id).disabled = working;
  $("cancel").disabled = !working;
}

async function cancel() {
  if (state.job) await call("/api/cancel", { job: state.job }).catch(() => {});
}

function showError(error) {
  const box = $("error");
  if (!error) { box.hidden = true; clearMarks("program", "error"); clearMarks("reference", "error"); return; }
  const where = error.line ? `${error.box || "program"}.py line ${error.line}${error.col ? ", column " + error.col : ""}: ` : "";
  box.hidden = false;
  box.textContent = where + error.message;
  box.dataset.line = error.line || "";
  if (error.line) markLine(error.box || "program", error.line, "error", true);
}

async function compile() {
  busy("compiling...");
  showError(null);
  state.job = newJobName();
  const sent = pageState();
  try {
    const result = await call("/api/compile", jobBody(sent));
    state.compiled = result;
    state.compiledFor = JSON.stringify(sent);
    if (!result.ok) { state.ran = null; state.ranFor = null; }  // a failed compile: the last run is gone too
    showError(result.ok || result.cancelled ? null : result.error);
    buildStages();
    busy(result.cancelled ? "cancelled" : result.ok ? "compiled" : "compile failed");
  } catch (e) { busy("error: " + e.message); }
}

async function run() {
  busy("running...");
  showError(null);
  state.job = newJobName();
  const sent = pageState();
  try {
    const result = await call("/api/run", jobBody(sent));
    state.ran = result;
    state.ranFor = JSON.stringify(sent);
    showError(result.ok || result.cancelled ? null : result.error);
    buildStages();
    show("run");
    busy(result.cancelled ? "cancelled" : result.ok ? "ran" : "run failed");
  } catch (e) { busy("error: " + e.message); }
}

// ---- views made from another state of the page than the one it shows now are marked stale
function stageSource(key) {
  return key === "run" || (key === "output" && state.ran) ? state.ranFor : state.compiledFor;
}

function markStale() {
  const made = state.stage ? stageSource(state.stage) : null;
  const stale = made !== null && made !== undefined && made !== JSON.stringify(pageState());
  $("stale").hidden = !stale;
  $("stale").textContent = stale ? `stale: the page changed since this was ${state.stage === "run" ? "run" : "compiled"}; ${state.stage === "run" ? "Run" : "Compile"} again to update it` : "";
  $("view").classList.toggle("stale", stale);
}

// ---- stages
function stageList() {
  const list = [];
  const c = state.compiled;
  if (c) {
    for (const m of c.ir || []) list.push({ key: "ir:" + m.module, label: "IR: " + m.module, render: () => renderIR(m) });
    for (const m of c.modules || []) {
      for (const s of m.sources) list.push({ key: `src:${m.name}:${s.name}`, label: `${s.name}`, render: () => renderCode(s.text, s.lines, `${m.name} (${m.target})`) });
      if (m.ptx) list.push({ key: `ptx:${m.name}`, label: "PTX", render: () => renderCode(m.ptx, m.ptx_lines, `NVRTC's PTX of ${m.name}`) });
      if (m.report) list.push({ key: `report:${m.name}`, label: m.target.startsWith("cuda") ? "Registers, smem, occupancy" : "Vectorization report", render: () => renderReport(m.report) });
    }
    if ((c.pictures || []).length) list.push({ key: "pictures", label: "Pictures", render: renderPictures });
    for (const g of c.graphs || []) list.push({ key: "graph:" + g.name, label: "Graph: " + g.name, render: () => renderGraph(g) });
  }
  if (state.ran) list.push({ key: "run", label: "Run", render: renderRun });
  if (state.ran && state.ran.profile) list.push({ key: "profile", label: "Profile", render: renderProfile });
  const output = (state.ran && state.ran.output) || (c && c.output);
  if (output) list.push({ key: "output", label: "Output", render: () => renderCode(output, null, "what the program printed") });
  return list;
}

function buildStages() {
  const list = stageList();
  $("stages").innerHTML = list.map((s) => `<button data-key="${esc(s.key)}">${esc(s.label)}</button>`).join("");
  for (const b of $("stages").querySelectorAll("button")) b.addEventListener("click", () => show(b.dataset.key));
  const keep = list.find((s) => s.key === state.stage);
  const preferred = list.find((s) => s.key.startsWith("src:")) || list.find((s) => s.key.startsWith("graph:")) || list[0];
  if (keep || preferred) show((keep || preferred).key); else { $("view").innerHTML = ""; $("stage-title").textContent = ""; }
}

function show(key) {
  const stage = stageList().find((s) => s.key === key);
  if (!stage) return;
  state.stage = key;
  for (const b of $("stages").querySelectorAll("button")) b.classList.toggle("active", b.dataset.key === key);
  $("stage-title").textContent = stage.label;
  stage.render();
  markStale();
}

function codeHtml(text, lines, classes) {
  const rows = text.split("\n").map((line, i) => {
    const dsl = lines && lines[i] ? ` data-dsl="${lines[i]}" title="program.py line ${lines[i]}"` : "";
    const cls = classes ? ` class="${classes(line)}"` : "";
    return `<div${dsl}${cls}><span class="no">${i + 1}</span>${esc(line)}</div>`;
  });
  return `<div class="code">${rows.join("")}</div>`;
}

function renderCode(text, lines, title) {
  $("view").innerHTML = (title ? `<p class="picture">${esc(title)}</p>` : "") + codeHtml(text, lines, null);
  for (const row of $("view").querySelectorAll("[data-dsl]")) {
    row.addEventListener("click", () => linkToSource(Number(row.dataset.dsl)));
  }
}

function linkToSource(line) {
  let first = null;
  for (const row of $("view").querySelectorAll(".code div")) {
    const hit = Number(row.dataset.dsl) === line;
    row.classList.toggle("linked", hit);
    if (hit && !first) first = row;
  }
  if (first) { markLine("program", line, "linked", false); first.scrollIntoView({ block: "nearest" }); }
}

function renderIR(m) {
  const unchanged = (s, i) => i > 0 && s.diff === "";  // steps that changed nothing are greyed
  const options = m.steps.map((s, i) => `<option value="${i}"${unchanged(s, i) ? ' class="unchanged"' : ""}>${esc(s.name)}${unchanged(s, i) ? " (unchanged)" : ""}</option>`).join("");
  $("view").innerHTML = `<div class="picture"><label>Step <select id="ir-step">${options}</select></label>
    <label><input type="checkbox" id="ir-diff"> diff from the step before</label></div><div id="ir-text"></div>`;
  const draw = () => {
    const step = m.steps[Number($("ir-step").value)];
    const diff = $("ir-diff").checked;
    const marks = (l) => (l.startsWith("+") ? "add" : l.startsWith("-") ? "del" : "");
    $("ir-text").innerHTML = codeHtml(diff ? step.diff || "(this step changed nothing)" : step.text, diff ? null : step.lines, diff ? marks : null);
    for (const row of $("ir-text").querySelectorAll("[data-dsl]")) {
      row.addEventListener("click", () => linkToSource(Number(row.dataset.dsl)));
    }
  };
  $("ir-step").value = String(m.steps.length - 1);
  $("ir-step").onchange = draw;
  $("ir-diff").onchange = draw;
  draw();
}

function renderReport(text) { renderCode(text, null, ""); }

function renderPictures() {
  $("view").innerHTML = state.compiled.pictures.map((p) => `<div class="picture ${p.kind}"><b>${esc(p.title)}</b><p>${esc(p.note)}</p>${p.svg}</div>`).join("");
}

function renderGraph(g) {
  $("view").innerHTML = `<div class="picture graph"><p>Fused groups of ${esc(g.name)} (${esc(g.target)}): kernels ${esc(g.kernels.join(", "))}</p>${g.svg}</div>` +
    `<div class="code"><div>${esc(g.text).replace(/\n/g, "</div><div>")}</div></div>` +
    `<details class="picture"><summary>DOT</summary><pre>${esc(g.dot)}</pre></details>`;
}

function renderRun() {
  const r = state.ran;
  if (!r.ok) { $("view").innerHTML = `<div class="picture" id="run-failed">The run ${r.cancelled ? "was cancelled" : "failed"}: ${esc(r.error.message)}</div>`; return; }
  const inputs = r.inputs.map((i) => (i.shape ? `${i.name}: ${i.dtype}[${i.shape.join(", ")}]` : `${i.name} = ${i.value}`)).join("; ");
  const emulated = r.emulated ? `<tr class="emulated"><td>where</td><td id="run-emulated">on the CUDA emulator: times are the CPU's, not a GPU's</td></tr>` : "";
  $("view").innerHTML = `<table class="result picture" id="run-result">
    <tr><td>ran</td><td>${esc(r.ran)} on ${esc(r.target)}${r.emulated ? " (the CUDA emulator)" : ""}</td></tr>${emulated}
    <tr><td>inputs</td><td>${esc(inputs)}</td></tr>
    <tr><td>check</td><td id="run-check">${esc(r.check)}</td></tr>
    <tr><td>tolerance</td><td id="run-tolerance">${esc(r.verdict.tolerance)}</td></tr>
    <tr><td>kernel</td><td id="run-kernel">${r.kernel_ms.toFixed(4)} ms</td></tr>
    <tr><td>numpy reference</td><td id="run-numpy">${r.numpy_ms.toFixed(4)} ms</td></tr>
    <tr><td>numpy time / kernel time</td><td>${r.speedup.toFixed(3)}</td></tr></table>`;
}

// the profile of a run on the CUDA emulator: each line of the program as it was run, its memory counters beside it
// (lines that take more sectors or wavefronts than the ideal marked), then other files' lines and the kernels
function renderProfile() {
  const p = state.ran.profile, program = JSON.parse(state.ranFor).program;
  const rows = program.split("\n").map((line, i) => {
    const records = p.lines[String(i + 1)] || [];
    const counters = records.map((r) => `<span class="${r.waste > 1 ? "waste" : "ideal"}">${esc(r.text)}</span>`).join("");
    const cls = records.some((r) => r.waste > 1) ? ' class="wasteful"' : "";
    return `<div data-dsl="${i + 1}"${cls}><span class="no">${i + 1}</span><span class="src">${esc(line)}</span>` +
      (counters ? `<span class="counters">${counters}</span>` : "") + "</div>";
  });
  const others = p.elsewhere.map((r) => `<tr class="${r.waste > 1 ? "waste" : ""}"><td>${esc(r.where)}</td><td>${esc(r.text)}</td><td>${esc(r.source)}</td></tr>`).join("");
  const kernels = p.kernels.map((k) => `<tr><td>${esc(k.name)}</td><td>${k.launches} launch(es), ${k.blocks} blocks of ${k.threads_per_block} threads; ` +
    `warp instructions: ${esc(k.instructions)}; divergent branches ${k.divergent_branches}<br>time ${esc(k.bound)}</td></tr>`).join("");
  $("view").innerHTML = `<p class="picture">Counted on the CUDA emulator in one more call: for each memory instruction of a line, ` +
    `32-byte sectors a request (global) or wavefronts a request (shared: more than the ideal are bank conflicts), against the ideal.</p>` +
    `<div class="code profile" id="profile-lines">${rows.join("")}</div>` +
    (others ? `<table class="result picture" id="profile-elsewhere"><tr><th>where</th><th>counters</th><th>source</th></tr>${others}</table>` : "") +
    `<table class="result picture" id="profile-kernels">${kernels}</table>`;
  for (const row of $("view").querySelectorAll("[data-dsl]")) {
    row.addEventListener("click", () => linkToSource(Number(row.dataset.dsl)));
  }
}

// ---- set up
async function loadExample(key) {
  const e = await call("/api/examples/" + encodeURIComponent(key));
  applyState({ program: e.program, reference: e.reference, sizes: e.sizes, target: e.target, example: e.key });
  state.compiled = state.ran = state.compiledFor = state.ranFor = null;
  showError(null);
  buildStages();
}

async function start() {
  const info = await call("/api/info");
  $("safety").textContent = info.safety;
  $("example").innerHTML = info.examples.map((e) => `<option value="${esc(e.key)}">${esc(e.title)}</option>`).join("");
  $("target").innerHTML = info.targets.map((t) => `<option>${t}</option>`).join("");
  $("arch").innerHTML = info.archs.map((t) => `<option>${t}</option>`).join("");
  $("example").addEventListener("change", () => loadExample($("example").value));
  $("compile").addEventListener("click", compile);
  $("run").addEventListener("click", run);
  $("cancel").addEventListener("click", cancel);
  for (const id of ["sizes", "rtol", "atol"]) $(id).addEventListener("input", markStale);
  for (const id of ["target", "arch", "check"]) $(id).addEventListener("change", markStale);
  $("share").addEventListener("click", () => {
    location.hash = "state=" + encodeState(pageState());
    // the copied link leaves out the launch's token: whoever opens it adds their own explorer's ?token=
    if (navigator.clipboard) navigator.clipboard.writeText(location.origin + location.pathname + location.hash).catch(() => {});
    busy("the address now holds the page's state");
  });
  $("save").addEventListener("click", () => {
    const link = document.createElement("a");
    link.href = URL.createObjectURL(new Blob([JSON.stringify(pageState(), null, 2)], { type: "application/json" }));
    link.download = "explorer-state.json";
    link.click();
  });
  $("load").addEventListener("change", async () => {
    const file = $("load").files[0];
    if (file) applyState(JSON.parse(await file.text()));
  });
  const shared = location.hash.match(/state=([^&]+)/);
  if (shared) applyState(decodeState(shared[1])); else await loadExample(info.examples[0].key);
  busy("ready");
}

start();
