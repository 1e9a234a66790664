// The explorer's page: two editors with line numbers, the stages of the last compile, the last run's result.
"use strict";

const $ = (id) => document.getElementById(id);
const state = { compiled: null, ran: null, stage: null };

function esc(text) {
  return String(text).replace(/[&<>"]/g, (c) => ({ "&": "&amp;", "<": "&lt;", ">": "&gt;", '"': "&quot;" }[c]));
}

// ---- editors: a textarea with a gutter of line numbers that scrolls with it
function setupEditor(box) {
  const area = $(box), gutter = $(box + "-editor").querySelector(".gutter");
  const render = () => {
    const count = area.value.split("\n").length;
    if (gutter.children.length !== count) {
      gutter.innerHTML = Array.from({ length: count }, (_, i) => `<span data-line="${i + 1}">${i + 1}</span>`).join("");
    }
    gutter.scrollTop = area.scrollTop;
  };
  area.addEventListener("input", () => { clearMarks(box); render(); });
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
           target: $("target").value, arch: $("arch").value, check: $("check").checked, example: $("example").value };
}

function applyState(s) {
  for (const key of ["program", "reference", "sizes"]) if (typeof s[key] === "string") $(key).value = s[key];
  for (const key of ["target", "arch", "example"]) if (s[key]) $(key).value = s[key];
  $("check").checked = !!s.check;
  renderers.program(); renderers.reference();
}

function encodeState(s) { return btoa(unescape(encodeURIComponent(JSON.stringify(s)))); }
function decodeState(text) { return JSON.parse(decodeURIComponent(escape(atob(text)))); }

// ---- talking to the server
async function post(path, body) {
  const response = await fetch(path, { method: "POST", headers: { "Content-Type": "application/json" }, body: JSON.stringify(body) });
  const data = await response.json();
  if (!response.ok) throw new Error(data.error || response.statusText);
  return data;
}

function busy(text) {
  $("status").textContent = text;
  for (const id of ["compile", "run"]) $(id).disabled = !!text.endsWith("...");
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
  try {
    const result = await post("/api/compile", pageState());
    state.compiled = result;
    showError(result.ok ? null : result.error);
    buildStages();
    busy(result.ok ? "compiled" : "compile failed");
  } catch (e) { busy("error: " + e.message); }
}

async function run() {
  busy("running...");
  showError(null);
  try {
    const result = await post("/api/run", pageState());
    state.ran = result;
    showError(result.ok ? null : result.error);
    buildStages();
    show("run");
    busy(result.ok ? "ran" : "run failed");
  } catch (e) { busy("error: " + e.message); }
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
  const options = m.steps.map((s, i) => `<option value="${i}">${esc(s.name)}</option>`).join("");
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
  if (!r.ok) { $("view").innerHTML = `<div class="picture">The run failed: ${esc(r.error.message)}</div>`; return; }
  const inputs = r.inputs.map((i) => (i.shape ? `${i.name}: ${i.dtype}[${i.shape.join(", ")}]` : `${i.name} = ${i.value}`)).join("; ");
  $("view").innerHTML = `<table class="result picture" id="run-result">
    <tr><td>ran</td><td>${esc(r.ran)} on ${esc(r.target)}</td></tr>
    <tr><td>inputs</td><td>${esc(inputs)}</td></tr>
    <tr><td>check</td><td id="run-check">${esc(r.check)}</td></tr>
    <tr><td>kernel</td><td id="run-kernel">${r.kernel_ms.toFixed(4)} ms</td></tr>
    <tr><td>numpy reference</td><td id="run-numpy">${r.numpy_ms.toFixed(4)} ms</td></tr>
    <tr><td>numpy time / kernel time</td><td>${r.speedup.toFixed(3)}</td></tr></table>`;
}

// ---- set up
async function loadExample(key) {
  const response = await fetch("/api/examples/" + encodeURIComponent(key));
  const e = await response.json();
  applyState({ program: e.program, reference: e.reference, sizes: e.sizes, target: e.target, example: e.key });
  state.compiled = state.ran = null;
  showError(null);
  buildStages();
}

async function start() {
  const info = await (await fetch("/api/info")).json();
  $("safety").textContent = info.safety;
  $("example").innerHTML = info.examples.map((e) => `<option value="${esc(e.key)}">${esc(e.title)}</option>`).join("");
  $("target").innerHTML = info.targets.map((t) => `<option>${t}</option>`).join("");
  $("arch").innerHTML = info.archs.map((t) => `<option>${t}</option>`).join("");
  $("example").addEventListener("change", () => loadExample($("example").value));
  $("compile").addEventListener("click", compile);
  $("run").addEventListener("click", run);
  $("share").addEventListener("click", () => {
    location.hash = "state=" + encodeState(pageState());
    if (navigator.clipboard) navigator.clipboard.writeText(location.href).catch(() => {});
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
