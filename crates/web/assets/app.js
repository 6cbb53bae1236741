// Spate's dashboard: polls /v1/jobs/{jid}/dashboard every second and draws it.
//
// Rules: no third-party code, no build step; every string that comes from the job (names,
// messages) goes into the page as text (textContent / text nodes), never as HTML. The token,
// if any, comes from the URL fragment (#token=…, which browsers never send), is kept in
// sessionStorage and sent as `Authorization: Bearer`.

const SVG = "http://www.w3.org/2000/svg";

// Health of the page itself, readable from the DOM (the browser test checks them).
const health = { polls: 0, cspViolations: 0, jsErrors: 0 };
function showHealth() {
  document.body.dataset.polls = health.polls;
  document.body.dataset.cspViolations = health.cspViolations;
  document.body.dataset.jsErrors = health.jsErrors;
}
document.addEventListener("securitypolicyviolation", () => { health.cspViolations++; showHealth(); });
window.addEventListener("error", () => { health.jsErrors++; showHealth(); });
window.addEventListener("unhandledrejection", () => { health.jsErrors++; showHealth(); });
showHealth();
const REFRESH_MS = 1000;
const state = { jid: null, selected: null, history: [], last: null };

// --- Token and requests ----------------------------------------------------------------

function takeToken() {
  const m = /(?:^#|&)token=([^&]+)/.exec(location.hash);
  if (m) {
    sessionStorage.setItem("spate-token", decodeURIComponent(m[1]));
    history.replaceState(null, "", location.pathname + location.search);
  }
  return sessionStorage.getItem("spate-token");
}
const token = takeToken();

async function api(path, options = {}) {
  const headers = Object.assign({ Accept: "application/json" }, options.headers || {});
  if (token) headers.Authorization = "Bearer " + token;
  const resp = await fetch(path, Object.assign({}, options, { headers, cache: "no-store" }));
  let body = null;
  try { body = await resp.json(); } catch (_) { body = null; }
  if (!resp.ok) {
    const msg = body && body.errors ? body.errors.join("; ") : resp.statusText;
    const err = new Error(`HTTP ${resp.status}: ${msg}`);
    err.status = resp.status;
    throw err;
  }
  return body;
}

// --- DOM helpers (text only) -----------------------------------------------------------

function el(tag, attrs, ...children) {
  const e = document.createElement(tag);
  setAttrs(e, attrs);
  for (const c of children) append(e, c);
  return e;
}
function sv(tag, attrs, ...children) {
  const e = document.createElementNS(SVG, tag);
  setAttrs(e, attrs);
  for (const c of children) append(e, c);
  return e;
}
function setAttrs(e, attrs) {
  for (const [k, v] of Object.entries(attrs || {})) {
    if (v === null || v === undefined || v === false) continue;
    if (k === "text") e.textContent = String(v);
    else if (k.startsWith("on")) e.addEventListener(k.slice(2), v);
    else e.setAttribute(k, String(v));
  }
}
function append(e, c) {
  if (c === null || c === undefined || c === false) return;
  if (Array.isArray(c)) { for (const x of c) append(e, x); return; }
  e.appendChild(c instanceof Node ? c : document.createTextNode(String(c)));
}
function replace(id, ...children) {
  const e = document.getElementById(id);
  e.replaceChildren();
  for (const c of children) append(e, c);
  return e;
}

// --- Formatting ------------------------------------------------------------------------

export function fmtCount(x) {
  if (x === null || x === undefined || !isFinite(x)) return "–";
  const a = Math.abs(x);
  if (a >= 1e9) return (x / 1e9).toFixed(2) + "G";
  if (a >= 1e6) return (x / 1e6).toFixed(2) + "M";
  if (a >= 1e4) return (x / 1e3).toFixed(1) + "k";
  if (a >= 100 || Number.isInteger(x)) return Math.round(x).toString();
  return x.toFixed(1);
}
export function fmtBytes(x) {
  if (x === null || x === undefined || !isFinite(x)) return "–";
  const units = ["B", "KB", "MB", "GB", "TB"];
  let i = 0;
  while (Math.abs(x) >= 1000 && i < units.length - 1) { x /= 1000; i++; }
  return (i === 0 ? x.toFixed(0) : x.toFixed(1)) + " " + units[i];
}
/** A latency: two decimals below 10 ms, where sub-millisecond figures matter. */
export function fmtLat(ms) {
  if (ms === null || ms === undefined || !isFinite(ms)) return "–";
  if (ms < 10) return ms.toFixed(2) + " ms";
  return fmtMs(ms);
}

export function fmtMs(ms) {
  if (ms === null || ms === undefined || !isFinite(ms)) return "–";
  if (ms < 1000) return Math.round(ms) + " ms";
  const s = ms / 1000;
  if (s < 60) return s.toFixed(1) + " s";
  const m = Math.floor(s / 60), h = Math.floor(m / 60), d = Math.floor(h / 24);
  if (d > 0) return `${d}d ${h % 24}h`;
  if (h > 0) return `${h}h ${m % 60}m`;
  return `${m}m ${Math.floor(s % 60)}s`;
}
function fmtTime(ms) {
  if (ms === null || ms === undefined || !isFinite(ms)) return "–";
  return new Date(ms).toISOString().replace("T", " ").slice(0, 19) + " UTC";
}
function fmtPct(x) {
  return x === null || x === undefined || !isFinite(x) ? "–" : Math.round(x) + "%";
}
// Busy 0 % is blue, 100 % red, through green and yellow (as Flink's UI: idle blue, busy red).
export function busyHue(pct) {
  const p = Math.max(0, Math.min(100, pct || 0));
  return 210 - 2.1 * p;
}
function busyClass(pct) {
  if (pct === null || pct === undefined) return "busy-unknown";
  return pct >= 75 ? "busy-high" : pct >= 30 ? "busy-mid" : "busy-low";
}

// --- Rendering -------------------------------------------------------------------------

function renderHeader(d) {
  const j = d.job;
  document.title = `${j.name} · Spate`;
  replace("job-name", j.name);
  const st = document.getElementById("job-state");
  st.textContent = j.state;
  st.dataset.state = j.state;
  replace("job-meta", `${j.jid.slice(0, 8)} · uptime ${fmtMs(j.duration)} · ${j.parallelism} workers · ${j.numRestarts} restarts`);
  const actions = document.getElementById("actions");
  actions.hidden = false;
  for (const id of ["btn-savepoint", "btn-stop", "btn-cancel"]) {
    document.getElementById(id).disabled = j.terminal || (id !== "btn-cancel" && !j.savepointsEnabled);
  }
}

function sparkline(values) {
  const w = 160, h = 22;
  const svg = sv("svg", { viewBox: `0 0 ${w} ${h}`, preserveAspectRatio: "none", "aria-hidden": "true" });
  if (values.length < 2) return svg;
  const max = Math.max(...values, 1);
  const pts = values.map((v, i) => `${(i / (values.length - 1)) * w},${h - 2 - (v / max) * (h - 4)}`);
  svg.appendChild(sv("polyline", { class: "spark", points: pts.join(" ") }));
  return svg;
}

function card(label, value, sub, extra, attrs) {
  return el("div", Object.assign({ class: "card" }, attrs || {}),
    el("div", { class: "label", text: label }),
    el("div", { class: "value", text: value }),
    el("div", { class: "sub", text: sub || "" }),
    extra || null);
}

function renderCards(d) {
  const nodes = d.graph.nodes;
  const inputs = new Set(d.graph.edges.map((e) => e.to));
  const outputs = new Set(d.graph.edges.map((e) => e.from));
  const sources = nodes.filter((n) => !inputs.has(n.id));
  const sinks = nodes.filter((n) => !outputs.has(n.id));
  const inRate = sources.reduce((a, n) => a + n.outPerSecond, 0);
  const outRate = sinks.reduce((a, n) => a + n.inPerSecond, 0);
  state.history.push(inRate);
  if (state.history.length > 90) state.history.shift();
  const cp = d.checkpoints;
  const lat = sinks.map((n) => n.latency).filter(Boolean);
  const p99 = lat.length ? Math.max(...lat.map((l) => l.p99)) : null;
  const p50 = lat.length ? Math.max(...lat.map((l) => l.p50)) : null;
  const busiest = nodes.reduce((a, n) => (a && a.busyMax >= (n.busyMax || 0) ? a : n), null);
  replace("cards",
    card("Ingest", fmtCount(inRate) + "/s", `${sources.length} source${sources.length === 1 ? "" : "s"}`, sparkline(state.history), { "data-metric": "ingest", "data-value": inRate }),
    card("Output", fmtCount(outRate) + "/s", `${sinks.length} sink${sinks.length === 1 ? "" : "s"}`, null, { "data-metric": "output", "data-value": outRate }),
    card("Busiest", busiest ? fmtPct(busiest.busyMax) : "–", busiest ? busiest.name : "", null, { "data-metric": "busiest" }),
    card("Latency p99", p99 === null ? "–" : fmtLat(p99), p50 === null ? "no samples yet" : `p50 ${fmtLat(p50)} · at the sinks`, null, { "data-metric": "latency-p99", "data-value": p99 }),
    card("Checkpoints", `${cp.completed} ok · ${cp.failed} failed`,
      cp.interval ? `last ${cp.lastAgeMs === null ? "–" : fmtMs(cp.lastAgeMs) + " ago"} · ${fmtMs(cp.lastDuration)} · ${fmtBytes(cp.lastFullSize)}` : "checkpointing off",
      null, { "data-metric": "checkpoints", "data-completed": cp.completed, "data-failed": cp.failed }));
}

function truncate(s, n) {
  return s.length > n ? s.slice(0, n - 1) + "…" : s;
}

function renderGraph(d) {
  const g = d.graph;
  const svg = document.getElementById("graph");
  svg.replaceChildren();
  svg.setAttribute("viewBox", `0 0 ${g.width} ${g.height}`);
  svg.setAttribute("width", g.width);
  svg.setAttribute("height", g.height);
  const defs = sv("defs", {},
    sv("marker", { id: "arrow", viewBox: "0 0 10 10", refX: 9, refY: 5, markerWidth: 7, markerHeight: 7, orient: "auto-start-reverse" },
      sv("path", { d: "M0,0 L10,5 L0,10 z", fill: "#94a3b8" })));
  svg.appendChild(defs);
  const byId = new Map(g.nodes.map((n) => [n.id, n]));
  for (const e of g.edges) {
    const a = byId.get(e.from), b = byId.get(e.to);
    if (!a || !b) continue;
    const x1 = a.x + a.w, y1 = a.y + a.h / 2, x2 = b.x - 2, y2 = b.y + b.h / 2;
    const mx = (x1 + x2) / 2;
    svg.appendChild(sv("path", { class: "edge", d: `M${x1},${y1} C${mx},${y1} ${mx},${y2} ${x2},${y2}`, "marker-end": "url(#arrow)", "data-from": e.from, "data-to": e.to }));
    const label = e.ship_strategy;
    const lw = label.length * 6.6 + 10;
    const ly = (y1 + y2) / 2;
    svg.appendChild(sv("g", { class: "edge-label", transform: `translate(${mx - lw / 2},${ly - 8})` },
      sv("rect", { width: lw, height: 16, rx: 8 }),
      sv("text", { x: lw / 2, y: 11.5, "text-anchor": "middle", text: label })));
  }
  for (const n of g.nodes) svg.appendChild(vertexBox(n));
}

function vertexBox(n) {
  const busy = n.busyMax;
  const hue = busyHue(busy);
  const cls = ["vertex", busyClass(busy), "bp-" + n.backpressureLevel];
  if (state.selected === n.id) cls.push("selected");
  const grp = sv("g", {
    class: cls.join(" "),
    transform: `translate(${n.x},${n.y})`,
    "data-vertex-id": n.id,
    "data-busy-max": busy === null ? "" : busy,
    "data-in-rate": n.inPerSecond,
    "data-out-rate": n.outPerSecond,
    "data-records-in": n.recordsIn,
    "data-records-out": n.recordsOut,
    "data-bp-level": n.backpressureLevel,
    "data-bp-ratio": n.backpressure,
    tabindex: 0,
    onclick: () => { state.selected = n.id; if (state.last) render(state.last); },
  });
  grp.appendChild(sv("title", { text: `${n.name}\nbusy max ${fmtPct(busy)}, mean ${fmtPct(n.busyAvg)}\nbackpressure ${Math.round(n.backpressure * 100)}% (${n.backpressureLevel})` }));
  grp.appendChild(sv("rect", { class: "box", width: n.w, height: n.h, rx: 9, fill: `hsl(${hue} 70% 92%)`, stroke: `hsl(${hue} 55% 45%)` }));
  grp.appendChild(sv("text", { class: "v-name", x: 12, y: 21, text: truncate(n.name, n.backpressureLevel === "ok" ? 28 : 21) }));
  grp.appendChild(sv("text", { class: "v-kind", x: 12, y: 37, text: `${n.kind} · parallelism ${n.parallelism}` }));
  grp.appendChild(sv("text", { class: "num v-in", x: 12, y: 58, "data-value": n.inPerSecond, text: `in  ${fmtCount(n.inPerSecond)}/s` }));
  grp.appendChild(sv("text", { class: "num v-out", x: n.w - 12, y: 58, "text-anchor": "end", "data-value": n.outPerSecond, text: `out ${fmtCount(n.outPerSecond)}/s` }));
  const wmText = n.watermarkLagMs === null || n.watermarkLagMs === undefined ? "wm –" : `wm lag ${fmtMs(n.watermarkLagMs)}`;
  grp.appendChild(sv("text", { class: "num v-wm", x: 12, y: 76, "data-value": n.watermarkLagMs, text: wmText }));
  if (n.latency) {
    grp.appendChild(sv("text", { class: "num v-lat", x: n.w - 12, y: 76, "text-anchor": "end", "data-value": n.latency.p99, text: `p99 ${fmtLat(n.latency.p99)}` }));
  }
  // The busy bar: its length and colour say the same as the number beside it.
  const barW = n.w - 92;
  grp.appendChild(sv("rect", { class: "bar-bg", x: 12, y: 88, width: barW, height: 9, rx: 4.5 }));
  grp.appendChild(sv("rect", { class: "bar", x: 12, y: 88, width: Math.max(0, Math.min(1, (busy || 0) / 100)) * barW, height: 9, rx: 4.5, fill: `hsl(${hue} 70% 48%)` }));
  grp.appendChild(sv("text", { class: "num v-busy", x: n.w - 12, y: 97, "text-anchor": "end", "data-value": busy === null ? "" : busy, text: `busy ${fmtPct(busy)}` }));
  if (n.backpressureLevel !== "ok") {
    const label = `BP ${Math.round(n.backpressure * 100)}%`;
    const bw = label.length * 6.8 + 10;
    grp.appendChild(sv("g", { class: `bp-badge bp-${n.backpressureLevel}`, transform: `translate(${n.w - bw - 8},8)`, "data-value": n.backpressure },
      sv("rect", { width: bw, height: 17 }),
      sv("text", { class: "v-bp", x: bw / 2, y: 12.5, "text-anchor": "middle", text: label })));
  }
  return grp;
}

function table(id, head, rows, empty) {
  const t = document.getElementById(id);
  t.replaceChildren();
  if (!rows.length) {
    t.appendChild(el("tbody", {}, el("tr", {}, el("td", { class: "empty", text: empty || "none" }))));
    return;
  }
  t.appendChild(el("thead", {}, el("tr", {}, head.map(([label, cls]) => el("th", { class: cls || null, text: label })))));
  t.appendChild(el("tbody", {}, rows));
}

function meter(pct) {
  const m = el("span", { class: "meter" });
  const fill = el("span");
  fill.style.width = Math.max(0, Math.min(100, pct || 0)) + "%";
  fill.style.background = `hsl(${busyHue(pct)} 70% 48%)`;
  m.appendChild(fill);
  return m;
}

function renderSubtasks(d) {
  const nodes = d.graph.nodes;
  let n = nodes.find((x) => x.id === state.selected);
  if (!n) n = nodes.reduce((a, x) => (a && (a.busyMax || 0) >= (x.busyMax || 0) ? a : x), null);
  if (!n) return;
  replace("subtask-title", "Subtasks · ", el("span", { class: "vname", text: truncate(n.name, 90) }));
  table("subtasks",
    [["#"], ["records in", "n"], ["records out", "n"], ["in/s", "n"], ["out/s", "n"], ["busy"], ["backpressure", "n"], ["output watermark", "n"]],
    n.subtasks.map((s) => el("tr", { "data-subtask": s.subtask },
      el("td", { text: s.subtask }),
      el("td", { class: "n", text: fmtCount(s.numRecordsIn) }),
      el("td", { class: "n", text: fmtCount(s.numRecordsOut) }),
      el("td", { class: "n", text: fmtCount(s.numRecordsInPerSecond) }),
      el("td", { class: "n", text: fmtCount(s.numRecordsOutPerSecond) }),
      el("td", {}, meter(s.busyTimeMsPerSecond / 10), fmtPct(s.busyTimeMsPerSecond / 10)),
      el("td", { class: "n", text: fmtPct((s.backPressuredTimeMsPerSecond || 0) / 10) }),
      el("td", { class: "n", text: s.currentOutputWatermark === null ? "–" : fmtTime(s.currentOutputWatermark).slice(11) }))));
}

function renderWatermarks(d) {
  table("watermarks", [["vertex"], ["output watermark", "n"], ["lag", "n"], ["late dropped", "n"]],
    d.graph.nodes.map((n) => el("tr", { "data-row-vertex": n.id },
      el("td", { class: "name", text: n.name, title: n.name }),
      el("td", { class: "n", title: fmtTime(n.watermark), text: n.watermark === null ? "–" : fmtTime(n.watermark).slice(11) }),
      el("td", { class: "n wm-lag" + (n.watermarkLagMs > 60000 ? " lag-bad" : ""), "data-value": n.watermarkLagMs, text: fmtMs(n.watermarkLagMs) }),
      el("td", { class: "n", text: fmtCount(n.lateDropped) }))));
}

function renderLatency(d) {
  const rows = d.graph.nodes.filter((n) => n.latency).map((n) => el("tr", { "data-row-vertex": n.id },
    el("td", { class: "name", text: n.name, title: n.name }),
    el("td", { class: "n lat-p50", text: fmtLat(n.latency.p50) }),
    el("td", { class: "n lat-p95", text: fmtLat(n.latency.p95) }),
    el("td", { class: "n lat-p99", "data-value": n.latency.p99, text: fmtLat(n.latency.p99) }),
    el("td", { class: "n lat-max", text: fmtLat(n.latency.max) }),
    el("td", { class: "n", text: fmtCount(n.latency.count) })));
  table("latency", [["vertex"], ["p50", "n"], ["p95", "n"], ["p99", "n"], ["max", "n"], ["samples", "n"]], rows, "no latency samples yet");
}

function renderCheckpoints(d) {
  const cp = d.checkpoints;
  replace("cp-summary", cp.interval ? `every ${fmtMs(cp.interval)} · ${cp.in_progress} in progress · ${cp.restored} restored` : "off");
  table("checkpoints", [["id"], ["status"], ["triggered", "n"], ["duration", "n"], ["uploaded", "n"], ["full size", "n"]],
    cp.history.map((c) => el("tr", { "data-checkpoint-id": c.id },
      el("td", { text: c.id }),
      el("td", {}, el("span", { class: "pill " + c.status, text: c.status.replace("_", " ").toLowerCase() }), c.is_savepoint ? el("span", { class: "pill sp", text: "savepoint" }) : null,
        c.failure_message ? el("div", { class: "hint", text: c.failure_message }) : null),
      el("td", { class: "n", text: fmtTime(c.trigger_timestamp).slice(11) }),
      el("td", { class: "n", text: c.status === "IN_PROGRESS" ? "…" : fmtMs(c.end_to_end_duration) }),
      el("td", { class: "n", text: fmtBytes(c.checkpointed_size) }),
      el("td", { class: "n", text: fmtBytes(c.state_size) }))),
    "no checkpoints yet");
}

function renderExceptions(d) {
  const ul = replace("exceptions");
  if (!d.exceptions.length) { ul.appendChild(el("li", { class: "empty", text: "No failures. The job has not restarted." })); return; }
  for (const e of d.exceptions) {
    ul.appendChild(el("li", { class: "exception" },
      el("div", { class: "when", text: `${fmtTime(e.timestamp)}${e.operator ? " · " + e.operator : ""} · ${e.restarted ? "restarted" : "ended the job"}` }),
      el("div", { class: "msg", text: e.message })));
  }
}

function renderAutoscaler(d) {
  const a = d.autoscaler;
  if (!a) {
    replace("autoscaler-summary", "off");
    table("autoscaler", [["decision"]], [], "the job runs on a fixed worker count (start it with --autoscale ds2)");
    return;
  }
  const procs = (n) => `${n} process${n === 1 ? "" : "es"}`;
  replace("autoscaler-summary", `${a.policy} · ${a.workers} workers (${a.minWorkers}–${a.maxWorkers}) · estimate ${a.estimateWorkers} · ${a.windows} windows · ${a.numDecisions} decisions · ${procs(a.processes)}`);
  table("autoscaler", [["when"], ["window", "n"], ["from", "n"], ["to", "n"], ["processes", "n"], ["why"]],
    a.decisions.map((x) => el("tr", { class: "decision" },
      el("td", { text: fmtTime(x.timestamp).slice(11) }),
      el("td", { class: "n", text: x.window }),
      el("td", { class: "n", text: x.from }),
      el("td", { class: "n", text: x.to }),
      el("td", { class: "n", text: x.fromProcesses === x.toProcesses ? `${x.toProcesses}` : `${x.fromProcesses} → ${x.toProcesses}` }),
      el("td", { text: x.reason }))),
    "no decision yet");
}

function renderShedding(d) {
  const s = d.shedding;
  if (!s) {
    replace("shedding-summary", "off");
    table("shedding", [["load"]], [], "the job applies backpressure under overload (start it with --overload shed)");
    return;
  }
  replace("shedding-summary", `${s.overloaded ? "overloaded" : "within capacity"} · headroom ${s.headroom}`);
  table("shedding", [["total load", "n"], ["capacity", "n"], ["drop fraction", "n"], ["records shed", "n"]],
    [el("tr", {},
      el("td", { class: "n", text: (s.totalLoad ?? 0).toFixed(2) }),
      el("td", { class: "n", text: (s.capacity ?? 0).toFixed(2) }),
      el("td", { class: "n", id: "shed-fraction", text: ((s.fraction ?? 0) * 100).toFixed(1) + "%" }),
      el("td", { class: "n", id: "shed-count", text: s.shed }))],
    "");
}

function renderProcesses(d) {
  table("processes", [["process"], ["host"], ["pid", "n"], ["workers", "n"], ["CPU"], ["RSS", "n"], ["peak RSS", "n"], ["threads", "n"]],
    d.processes.map((p) => el("tr", { "data-process": p.index },
      el("td", { text: p.index }),
      el("td", { text: p.host }),
      el("td", { class: "n", text: p.pid }),
      el("td", { class: "n", text: p.workers }),
      el("td", {}, meter((p.cpuLoad || 0) * 100), p.cpuLoad === null ? "–" : Math.round(p.cpuLoad * 100) + "%"),
      el("td", { class: "n proc-rss", "data-value": p.rss, text: fmtBytes(p.rss) }),
      el("td", { class: "n", text: fmtBytes(p.peakRss) }),
      el("td", { class: "n", text: p.threads === null ? "–" : p.threads }))));
}

function render(d) {
  state.last = d;
  renderHeader(d);
  renderCards(d);
  renderGraph(d);
  renderSubtasks(d);
  renderWatermarks(d);
  renderLatency(d);
  renderCheckpoints(d);
  renderExceptions(d);
  renderAutoscaler(d);
  renderShedding(d);
  renderProcesses(d);
  replace("updated", `updated ${fmtTime(d.now)} · refreshes every ${REFRESH_MS / 1000} s`);
}

// --- Polling and actions ---------------------------------------------------------------

function banner(msg) {
  const b = document.getElementById("banner");
  b.hidden = !msg;
  b.textContent = msg || "";
}
let toastTimer = null;
function toast(msg) {
  const t = document.getElementById("toast");
  t.textContent = msg;
  t.hidden = false;
  clearTimeout(toastTimer);
  toastTimer = setTimeout(() => { t.hidden = true; }, 8000);
}

async function poll() {
  try {
    if (!state.jid) {
      const jobs = await api("/v1/jobs");
      if (!jobs.jobs.length) throw new Error("no job is running");
      state.jid = jobs.jobs[0].id;
    }
    const d = await api(`/v1/jobs/${state.jid}/dashboard`);
    banner(null);
    render(d);
    health.polls++;
    showHealth();
  } catch (e) {
    banner(e.status === 401
      ? "This job's REST API needs a token: open the URL with #token=<token> appended."
      : `Cannot reach the job: ${e.message}`);
  }
  setTimeout(poll, REFRESH_MS);
}

async function follow(id, what) {
  for (let i = 0; i < 600; i++) {
    const s = await api(`/v1/jobs/${state.jid}/savepoints/${id}`);
    if (s.status.id === "COMPLETED") {
      const op = s.operation || {};
      toast(op.location ? `${what} written to ${op.location}` : `${what} failed: ${(op["failure-cause"] || {}).message || "unknown cause"}`);
      return;
    }
    await new Promise((r) => setTimeout(r, 1000));
  }
}

async function act(kind) {
  if (!state.jid) return;
  try {
    if (kind === "cancel") {
      if (!confirm("Cancel the job now, without a savepoint?")) return;
      await api(`/v1/jobs/${state.jid}?mode=cancel`, { method: "PATCH" });
      toast("Cancelling the job…");
    } else if (kind === "stop") {
      const drain = document.getElementById("drain").checked;
      if (!confirm(`Stop the job with a final savepoint${drain ? " (drain: fire all windows first)" : ""}?`)) return;
      const r = await api(`/v1/jobs/${state.jid}/stop`, { method: "POST", headers: { "Content-Type": "application/json" }, body: JSON.stringify({ drain }) });
      toast("Stopping with a savepoint…");
      follow(r["request-id"], "Final savepoint");
    } else {
      const r = await api(`/v1/jobs/${state.jid}/savepoints`, { method: "POST", headers: { "Content-Type": "application/json" }, body: JSON.stringify({ "cancel-job": false }) });
      toast("Savepoint triggered…");
      follow(r["request-id"], "Savepoint");
    }
  } catch (e) {
    toast(e.message);
  }
}

document.getElementById("btn-cancel").addEventListener("click", () => act("cancel"));
document.getElementById("btn-stop").addEventListener("click", () => act("stop"));
document.getElementById("btn-savepoint").addEventListener("click", () => act("savepoint"));
poll();
