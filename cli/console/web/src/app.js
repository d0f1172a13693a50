// The weir console: reads /console/data every second and draws the
// pipeline graph, the tables and the chart; the buttons POST
// /pipeline/{action} with the admin token.
import uPlot from "uplot";

const $ = (sel) => document.querySelector(sel);
const fmt = new Intl.NumberFormat("en-US", { maximumFractionDigits: 1 });
const num = (n) => (n === undefined || n === null ? "—" : fmt.format(n));

// The admin token: from the URL fragment (#token=…, not sent to the
// server), kept for this tab only.
const tokenInput = $('[data-test="token"]');
const fromHash = new URLSearchParams(location.hash.slice(1)).get("token");
if (fromHash) {
  sessionStorage.setItem("weir-token", fromHash);
  history.replaceState(null, "", location.pathname);
}
tokenInput.value = sessionStorage.getItem("weir-token") || "";
tokenInput.addEventListener("change", () => sessionStorage.setItem("weir-token", tokenInput.value.trim()));

function message(text, error) {
  const m = $('[data-test="message"]');
  m.textContent = text;
  m.className = "message" + (error ? " error" : "");
}

for (const b of document.querySelectorAll("button[data-action]")) {
  b.addEventListener("click", async () => {
    const token = tokenInput.value.trim();
    if (!token) {
      message("enter the admin token first (weir pipeline console --data DIR prints a link with it)", true);
      return;
    }
    try {
      const resp = await fetch("/pipeline/" + b.dataset.action, {
        method: "POST",
        headers: { Authorization: "Bearer " + token, "Content-Type": "application/json" },
        body: "{}",
      });
      message((await resp.text()).trim(), !resp.ok);
    } catch (e) {
      message(String(e), true);
    }
    refresh();
  });
}

function el(tag, attrs, ...children) {
  const ns = ["svg", "g", "rect", "text", "path", "defs", "marker", "title"].includes(tag) ? "http://www.w3.org/2000/svg" : null;
  const e = ns ? document.createElementNS(ns, tag) : document.createElement(tag);
  for (const [k, v] of Object.entries(attrs || {})) {
    if (v !== undefined && v !== null) e.setAttribute(k, v);
  }
  for (const c of children) e.append(c instanceof Node ? c : document.createTextNode(String(c)));
  return e;
}

// Graph: nodes in columns by their depth from the sources, edges as curves
// labelled with the stream, the rate and, between computations, the
// backlog; an edge under backpressure is drawn red.
function drawGraph(graph) {
  const svg = $('[data-test="graph"]');
  const depth = {};
  const incoming = {};
  for (const e of graph.edges) (incoming[e.to] ||= []).push(e.from);
  const visit = (id, seen = new Set()) => {
    if (depth[id] !== undefined) return depth[id];
    if (seen.has(id)) return 0;
    seen.add(id);
    depth[id] = Math.max(-1, ...(incoming[id] || []).map((f) => visit(f, seen))) + 1;
    return depth[id];
  };
  graph.nodes.forEach((n) => visit(n.id));
  const cols = {};
  for (const n of graph.nodes) (cols[depth[n.id]] ||= []).push(n);
  const W = 170, H = 46, GX = 150, GY = 34;
  const pos = {};
  let maxRows = 1;
  for (const [d, nodes] of Object.entries(cols)) {
    maxRows = Math.max(maxRows, nodes.length);
    nodes.forEach((n, i) => (pos[n.id] = { x: 10 + d * (W + GX), y: 10 + i * (H + GY) }));
  }
  const width = 20 + Object.keys(cols).length * (W + GX) - GX;
  const height = 20 + maxRows * (H + GY) - GY;
  svg.setAttribute("viewBox", `0 0 ${width} ${height}`);
  svg.replaceChildren(
    el("defs", {}, el("marker", { id: "arrow", viewBox: "0 0 10 10", refX: 10, refY: 5, markerWidth: 7, markerHeight: 7, orient: "auto" },
      el("path", { d: "M0,0 L10,5 L0,10 z", fill: "#98a2b3" }))),
  );
  for (const e of graph.edges) {
    const a = pos[e.from], b = pos[e.to];
    if (!a || !b) continue;
    const x1 = a.x + W, y1 = a.y + H / 2, x2 = b.x, y2 = b.y + H / 2, mx = (x1 + x2) / 2;
    let label = `${e.stream}: ${num(e.rate)}/s`;
    if (e.backlog !== undefined) label += ` · backlog ${num(e.backlog)}`;
    svg.append(el("g", { class: "edge" + (e.backpressure ? " backpressure" : ""), "data-edge": `${e.from}->${e.to}`, "data-rate": e.rate, "data-backlog": e.backlog ?? "" },
      el("path", { d: `M${x1},${y1} C${mx},${y1} ${mx},${y2} ${x2},${y2}` }),
      el("text", { x: mx, y: (y1 + y2) / 2 - 8, "text-anchor": "middle" }, label),
      el("title", {}, e.backpressure ? "backpressure: the writer's outbox is nearly full" : label)));
  }
  for (const n of graph.nodes) {
    const p = pos[n.id];
    svg.append(el("g", { class: "node " + n.kind, "data-node": n.id, "data-kind": n.kind, transform: `translate(${p.x},${p.y})` },
      el("rect", { width: W, height: H }),
      el("text", { x: 8, y: 18 }, n.label.length > 24 ? n.label.slice(0, 23) + "…" : n.label),
      el("text", { x: 8, y: 36, class: "cls" }, n.class)));
  }
}

function table(sel, head, rows) {
  const t = $(sel);
  t.replaceChildren(el("tr", {}, ...head.map((h) => el("th", { class: h.num ? "num" : "" }, h.label))));
  for (const r of rows) t.append(r);
}

function cell(value, attrs) {
  return el("td", attrs, value);
}

let chart = null;
let chartNames = "";

function drawChart(series) {
  const names = [...new Set(series.flatMap((p) => Object.keys(p.rates)))].sort();
  const box = $('[data-test="chart"]');
  if (names.join() !== chartNames) {
    chartNames = names.join();
    if (chart) chart.destroy();
    const colors = ["#1570ef", "#12b76a", "#f79009", "#7a5af8", "#ee46bc", "#0ba5ec"];
    chart = new uPlot({
      width: Math.max(300, box.clientWidth || 520), height: 220,
      scales: { x: { time: true }, lag: {} },
      axes: [{}, { label: "inputs/s" }, { scale: "lag", side: 1, label: "lag (rows)", grid: { show: false } }],
      series: [{}, ...names.map((n, i) => ({ label: n + " in/s", stroke: colors[i % colors.length] })),
        { label: "queue lag", scale: "lag", stroke: "#b42318", dash: [4, 4] }],
    }, null, box);
  }
  const data = [series.map((p) => p.t), ...names.map((n) => series.map((p) => p.rates[n] ?? null)), series.map((p) => p.lag ?? null)];
  chart.setData(data);
}

function render(d) {
  const s = d.status;
  const st = $('[data-test="state"]');
  st.textContent = s.state;
  st.className = "state " + s.state;
  $('[data-test="uptime"]').textContent = `up ${num(s.uptime_seconds)}s · ${s.controller.JobsStarted} jobs started, ${s.controller.JobsFailed} failed`;
  drawGraph(d.graph);

  const comps = Object.keys(s.computations).sort();
  table('[data-test="computations"]',
    [{ label: "computation" }, { label: "inputs", num: 1 }, { label: "in/s", num: 1 }, { label: "outputs", num: 1 }, { label: "out/s", num: 1 },
      { label: "epochs/s", num: 1 }, { label: "redelivered, skipped", num: 1 }],
    comps.map((c) => {
      const k = s.computations[c], r = d.rates[c] || {};
      return el("tr", { "data-comp": c },
        cell(c), cell(k.Inputs, { class: "num", "data-field": "inputs" }), cell(num(r.inputs_per_s), { class: "num" }),
        cell(k.Outputs, { class: "num", "data-field": "outputs" }), cell(num(r.outputs_per_s), { class: "num" }),
        cell(num(r.epochs_per_s), { class: "num" }), cell(k.Duplicates, { class: "num", "data-field": "duplicates" }));
    }));

  table('[data-test="partitions"]',
    [{ label: "partition" }, { label: "state" }, { label: "job" }, { label: "epochs/s", num: 1 }, { label: "last epoch", num: 1 },
      { label: "lag", num: 1 }, { label: "restarts", num: 1 }, { label: "last error" }],
    d.partitions.map((p) => el("tr", { "data-partition": p.id, class: p.state },
      cell(p.id), cell(p.state, { "data-field": "state" }), cell(p.job || "—"), cell(num(p.epochs_per_s), { class: "num" }),
      cell(p.epoch_age_s === undefined ? "—" : p.epoch_age_s + "s ago", { class: "num" }),
      cell(num(p.lag), { class: "num", "data-field": "lag" }), cell(p.restarts, { class: "num" }),
      cell(p.last_error || "", { class: "error", "data-field": "last_error" }))));

  table('[data-test="watermarks"]', [{ label: "stream" }, { label: "system watermark" }, { label: "event watermark" }],
    d.watermarks.map((w) => el("tr", { "data-stream": w.stream }, cell(w.stream), cell(w.system || "—"), cell(w.event || "—"))));

  const fails = s.sink_failures || [];
  $('[data-test="sink-failures-section"]').hidden = fails.length === 0;
  table('[data-test="sink-failures"]', [{ label: "partition" }, { label: "sink" }, { label: "error" }],
    fails.map((f) => el("tr", {}, cell(f.partition), cell(f.sink), cell(f.error, { class: "error" }))));

  drawChart(d.series);
  window.__weir = { last: d };
  document.body.dataset.loaded = "true";
}

async function refresh() {
  try {
    const resp = await fetch("/console/data", { cache: "no-store" });
    if (!resp.ok) throw new Error(await resp.text());
    render(await resp.json());
  } catch (e) {
    message("cannot read the pipeline's status: " + e, true);
  }
}

refresh();
setInterval(refresh, 1000);
