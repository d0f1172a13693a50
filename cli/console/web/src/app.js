// The weir console: reads /console/data twice a second and draws the
// pipeline graph, the tables and the charts. Under 'weir run' the buttons
// POST /pipeline/{action} with the admin token; under 'weir controller'
// every data request carries the cluster token and the workers' drain
// buttons POST /drain?worker=ID. When the process stops answering the page
// says so at once and keeps the last data, dimmed, until it answers again.
import uPlot from "uplot";

const $ = (sel, root = document) => root.querySelector(sel);
const $$ = (sel, root = document) => [...root.querySelectorAll(sel)];
const fmt = new Intl.NumberFormat("en-US", { maximumFractionDigits: 1 });
const compact = new Intl.NumberFormat("en-US", { notation: "compact", maximumFractionDigits: 1 });
const num = (n) => (n === undefined || n === null ? "—" : fmt.format(n));
const rate = (n) => (n === undefined || n === null ? "—" : (n >= 10000 ? compact.format(n) : fmt.format(n)) + "/s");
const msf = (n) => (n === undefined || n === null ? "—" : n >= 1000 ? fmt.format(n / 1000) + " s" : fmt.format(n) + " ms");
const secs = (n) => (n === undefined || n === null ? "—" : n < 120 ? fmt.format(n) + " s" : fmt.format(n / 60) + " min");
const bytes = (n) => (n === undefined || n === null ? "—" : n < 1024 ? n + " B" : n < 1048576 ? fmt.format(n / 1024) + " KiB" : fmt.format(n / 1048576) + " MiB");
const clock = (t) => (t ? new Date(t).toLocaleTimeString("en-GB") : "—");

const POLL_MS = 500;
const TIMEOUT_MS = 3000;

// ---- token, window, view state ----

const tokenInput = $('[data-test="token"]');
const fromHash = new URLSearchParams(location.hash.slice(1)).get("token");
if (fromHash) {
  sessionStorage.setItem("weir-token", fromHash);
  history.replaceState(null, "", location.pathname);
}
tokenInput.value = sessionStorage.getItem("weir-token") || "";
tokenInput.addEventListener("change", () => sessionStorage.setItem("weir-token", tokenInput.value.trim()));
const token = () => tokenInput.value.trim();

const windowSelect = $('[data-test="window"]');
windowSelect.value = sessionStorage.getItem("weir-window") || "10s";
windowSelect.addEventListener("change", () => {
  sessionStorage.setItem("weir-window", windowSelect.value);
  refresh();
});

let last = null; // the last data
let lastAt = null; // when it arrived
let selected = null; // the computation whose details are open
let zoomOut = false;
let pending = null; // {action, target, since}: a requested state change

function message(text, kind) {
  const m = $('[data-test="message"]');
  m.textContent = text;
  m.className = "message" + (kind ? " " + kind : "");
}

// ---- tabs ----

function showTab(name) {
  for (const t of $$("[data-tab]")) t.setAttribute("aria-selected", String(t.dataset.tab === name));
  for (const p of $$("[data-panel]")) p.hidden = p.dataset.panel !== name;
  sessionStorage.setItem("weir-tab", name);
  if (last) render(last);
}
for (const t of $$("[data-tab]")) {
  t.addEventListener("click", () => showTab(t.dataset.tab));
  t.addEventListener("keydown", (e) => {
    if (e.key !== "ArrowRight" && e.key !== "ArrowLeft") return;
    const tabs = $$("[data-tab]").filter((x) => !x.hidden);
    const i = tabs.indexOf(t) + (e.key === "ArrowRight" ? 1 : -1);
    const next = tabs[(i + tabs.length) % tabs.length];
    next.focus();
    showTab(next.dataset.tab);
  });
}

$('[data-test="zoom"]').addEventListener("click", (e) => {
  zoomOut = !zoomOut;
  e.currentTarget.setAttribute("aria-pressed", String(zoomOut));
  e.currentTarget.textContent = zoomOut ? "Actual size" : "Zoom out";
  if (last) drawGraph(last);
});

// ---- actions ----

async function post(path, body) {
  const resp = await fetch(path, {
    method: "POST",
    headers: { Authorization: "Bearer " + token(), "Content-Type": "application/json" },
    body: JSON.stringify(body || {}),
  });
  return { ok: resp.ok, text: (await resp.text()).trim() };
}

for (const b of $$("button[data-action]")) {
  b.addEventListener("click", async () => {
    if (!token()) {
      message("enter the admin token first ('weir pipeline console --data DIR' prints a link with it)", "error");
      return;
    }
    try {
      const r = await post("/pipeline/" + b.dataset.action);
      if (!r.ok) {
        pending = null;
        message(r.text, "error");
      } else {
        pending = { action: b.dataset.action, target: b.dataset.target, since: Date.now() };
        message(`${b.textContent} requested: waiting for "${b.dataset.target}"…`, "pending");
      }
    } catch (e) {
      message("the request did not reach weir: " + e.message, "error");
    }
    refresh();
  });
}

async function drainWorker(id) {
  if (!token()) {
    message("enter the cluster token first (draining needs it)", "error");
    return;
  }
  try {
    const r = await post("/drain?worker=" + encodeURIComponent(id));
    message(r.ok ? `worker ${id}: ${r.text}` : r.text, r.ok ? "ok" : "error");
  } catch (e) {
    message("the request did not reach the controller: " + e.message, "error");
  }
  refresh();
}

// ---- DOM helpers ----

const SVG = new Set(["svg", "g", "rect", "text", "tspan", "path", "defs", "marker", "title", "circle"]);
function el(tag, attrs, ...children) {
  const e = SVG.has(tag) ? document.createElementNS("http://www.w3.org/2000/svg", tag) : document.createElement(tag);
  for (const [k, v] of Object.entries(attrs || {})) {
    if (v === undefined || v === null || v === false) continue;
    if (k.startsWith("on")) e.addEventListener(k.slice(2), v);
    else e.setAttribute(k, v === true ? "" : v);
  }
  for (const c of children.flat()) {
    if (c === null || c === undefined || c === false) continue;
    e.append(c instanceof Node ? c : document.createTextNode(String(c)));
  }
  return e;
}

function table(sel, head, rows) {
  const t = $(sel);
  t.replaceChildren(el("thead", {}, el("tr", {}, head.map((h) => el("th", { class: h.num ? "num" : "", scope: "col" }, h.label)))),
    el("tbody", {}, rows));
}

// A cell with a number: shown formatted, the exact value in data-value.
const ncell = (v, field, show) => el("td", { class: "num", "data-field": field, "data-value": v ?? "" }, show ?? num(v));

// ---- graph ----

// Layered layout: a node's layer is its longest path from a source; within
// a layer nodes are ordered by the mean position of their predecessors
// (two sweeps), so that edges cross little. Sizes are in CSS pixels: the
// graph is as readable with forty computations as with two, and scrolls in
// its box when larger than the page (or, zoomed out, shrinks to fit).
const NW = 210, NH = 78, SH = 50, GX = 110, GY = 22, GV = 58;

function layout(graph, vertical) {
  const incoming = {};
  const outgoing = {};
  for (const e of graph.edges) {
    (incoming[e.to] ||= []).push(e.from);
    (outgoing[e.from] ||= []).push(e.to);
  }
  const depth = {};
  const visit = (id, stack = new Set()) => {
    if (depth[id] !== undefined) return depth[id];
    if (stack.has(id)) return 0;
    stack.add(id);
    depth[id] = Math.max(-1, ...(incoming[id] || []).map((f) => visit(f, stack))) + 1;
    stack.delete(id);
    return depth[id];
  };
  graph.nodes.forEach((n) => visit(n.id));
  // Sinks sit right after their computation.
  const layers = [];
  for (const n of graph.nodes) (layers[depth[n.id]] ||= []).push(n);
  const order = {};
  layers.forEach((l) => l.forEach((n, i) => (order[n.id] = i)));
  for (let sweep = 0; sweep < 2; sweep++) {
    for (const l of layers) {
      if (!l) continue;
      const key = (n) => {
        const ps = (incoming[n.id] || []).concat(sweep ? outgoing[n.id] || [] : []);
        return ps.length ? ps.reduce((s, p) => s + order[p], 0) / ps.length : order[n.id];
      };
      l.sort((a, b) => key(a) - key(b) || a.id.localeCompare(b.id));
      l.forEach((n, i) => (order[n.id] = i));
    }
  }
  const pos = {};
  if (vertical) {
    // Layers as rows (narrow screens): a chain is one column.
    let y = 10, width = 0;
    for (const l of layers) {
      let x = 10, rowH = 0;
      for (const n of l || []) {
        const h = n.kind === "computation" ? NH : SH;
        pos[n.id] = { x, y, h };
        x += NW + 16;
        rowH = Math.max(rowH, h);
      }
      width = Math.max(width, x - 16 + 10);
      y += rowH + GV;
    }
    return { pos, width, height: y - GV + 10 };
  }
  let height = 0;
  layers.forEach((l, d) => {
    let y = 10;
    for (const n of l || []) {
      const h = n.kind === "computation" ? NH : SH;
      pos[n.id] = { x: 10 + d * (NW + GX), y, h };
      y += h + GY;
    }
    height = Math.max(height, y);
  });
  return { pos, width: 20 + layers.length * (NW + GX) - GX, height: height - GY + 10 };
}

function nodeTitle(n) {
  const lines = [`${n.label} (${n.class})`];
  if (n.kind === "computation") {
    lines.push(`in ${rate(n.in_per_s)}, out ${rate(n.out_per_s)}`, `partitions ${n.partitions}, failing ${n.failing}`);
    if (n.backlog !== undefined) lines.push(`input backlog ${num(n.backlog)} messages`);
    if (n.backpressure) lines.push("backpressure: its outbox is nearly full, it stops taking input");
  }
  if (n.failed) lines.push(n.kind === "sink" ? "delivery stopped (see Failures)" : "cannot be listed (see Failures)");
  return lines.join("\n");
}

function drawGraph(d) {
  const svg = $('[data-test="graph"]');
  const graph = d.graph;
  // Actual size by default (text stays readable; a wide graph scrolls in
  // its box); zoomed out, the whole graph fits the box, down to 40%. On a
  // narrow screen the layers are rows.
  const box = $('[data-test="graph-box"]');
  const avail = Math.max(200, box.clientWidth - 2);
  const vertical = avail < 2 * NW + GX;
  const { pos, width, height } = layout(graph, vertical);
  const scale = zoomOut ? Math.min(1, Math.max(0.4, avail / width)) : 1;
  svg.setAttribute("viewBox", `0 0 ${width} ${height}`);
  svg.setAttribute("width", Math.round(width * scale));
  svg.setAttribute("height", Math.round(height * scale));
  const maxRate = Math.max(1, ...graph.edges.map((e) => e.rate));
  const parts = [el("defs", {}, el("marker", { id: "arrow", viewBox: "0 0 10 10", refX: 9, refY: 5, markerWidth: 9, markerHeight: 9, markerUnits: "userSpaceOnUse", orient: "auto" },
    el("path", { d: "M0,0 L10,5 L0,10 z", class: "arrowhead" })))];
  for (const e of graph.edges) {
    const a = pos[e.from], b = pos[e.to];
    if (!a || !b) continue;
    const x1 = vertical ? a.x + NW / 2 : a.x + NW, y1 = vertical ? a.y + a.h : a.y + a.h / 2;
    const x2 = vertical ? b.x + NW / 2 : b.x - 2, y2 = vertical ? b.y - 2 : b.y + b.h / 2;
    const mx = (x1 + x2) / 2, my = (y1 + y2) / 2;
    const curve = vertical ? `M${x1},${y1} C${x1},${my} ${x2},${my} ${x2},${y2}` : `M${x1},${y1} C${mx},${y1} ${mx},${y2} ${x2},${y2}`;
    const lx = vertical ? mx + 10 : mx, anchor = vertical ? "start" : "middle";
    const w = 1.5 + 3.5 * Math.log10(1 + (9 * e.rate) / maxRate);
    // The backlog shares the rate's line in rows (the gap row is free to
    // the right) but takes a line of its own in columns: beside the rate it
    // outgrew the gap between two columns and ran into their nodes.
    const queued = e.backlog !== undefined && e.backlog > 0 ? `${compact.format(e.backlog)} queued` : "";
    const label = rate(e.rate) + (vertical && queued ? ` · ${queued}` : "");
    parts.push(el("g", { class: "edge" + (e.backpressure ? " backpressure" : ""), "data-edge": `${e.from}->${e.to}`, "data-rate": e.rate, "data-backlog": e.backlog ?? "" },
      el("title", {}, `${e.stream}: ${rate(e.rate)}` + (e.backlog !== undefined ? `, ${num(e.backlog)} not yet processed` : "") + (e.backpressure ? " — backpressure" : "")),
      el("path", { d: curve, "stroke-width": w.toFixed(1) }),
      el("text", { x: lx, y: my - 6, "text-anchor": anchor, class: "edge-label" }, label),
      el("text", { x: lx, y: my + 12, "text-anchor": anchor, class: "edge-stream" }, e.stream.length > 16 ? e.stream.slice(0, 15) + "…" : e.stream),
      !vertical && queued ? el("text", { x: lx, y: my + 27, "text-anchor": anchor, class: "edge-label edge-queued" }, queued) : null));
  }
  for (const n of graph.nodes) {
    const p = pos[n.id];
    const cls = ["node", n.kind, n.failing > 0 || n.failed ? "failing" : "", n.backpressure ? "backpressure" : "", selected === n.id ? "selected" : ""].join(" ");
    const short = (s, k) => (s.length > k ? s.slice(0, k - 1) + "…" : s);
    const kids = [el("title", {}, nodeTitle(n)), el("rect", { width: NW, height: p.h, rx: 8 })];
    if (n.kind === "computation") {
      kids.push(
        el("text", { x: 10, y: 20, class: "name" }, short(n.label, 20)),
        el("text", { x: NW - 10, y: 20, "text-anchor": "end", class: n.failing ? "badge bad" : "badge" }, n.failing ? `${n.failing}/${n.partitions} failing` : `${n.partitions} part.`),
        el("text", { x: 10, y: 37, class: "cls" }, short(n.class, 30)),
        el("text", { x: 10, y: 55, class: "fig" }, `in ${rate(n.in_per_s)}  out ${rate(n.out_per_s)}`),
        el("text", { x: 10, y: 71, class: n.backpressure ? "fig warn" : "fig" },
          [n.backlog !== undefined ? `backlog ${compact.format(n.backlog)}` : null, n.lag !== undefined ? `lag ${compact.format(n.lag)}` : null, n.backpressure ? "BACKPRESSURE" : null].filter(Boolean).join("  ") || " "));
    } else {
      kids.push(
        el("text", { x: 10, y: 20, class: "name" }, short(n.label, 26)),
        el("text", { x: 10, y: 38, class: n.failed ? "fig warn" : "fig" }, n.failed ? (n.kind === "sink" ? "delivery stopped" : "cannot be listed") : `${n.kind} · ${rate(n.kind === "source" ? n.out_per_s : n.in_per_s)}`));
    }
    const g = el("g", { class: cls, "data-node": n.id, "data-kind": n.kind, "data-failing": n.failing || (n.failed ? 1 : 0), "data-backpressure": n.backpressure ? 1 : 0,
      transform: `translate(${p.x},${p.y})` }, kids);
    if (n.kind === "computation") {
      g.setAttribute("tabindex", "0");
      g.setAttribute("role", "button");
      g.setAttribute("aria-label", nodeTitle(n).replaceAll("\n", "; "));
      g.setAttribute("aria-pressed", String(selected === n.id));
      const pick = () => {
        selected = selected === n.id ? null : n.id;
        render(last);
        $(`[data-node="${CSS.escape(n.id)}"]`)?.focus();
      };
      g.addEventListener("click", pick);
      g.addEventListener("keydown", (e) => {
        if (e.key === "Enter" || e.key === " ") {
          e.preventDefault();
          pick();
        }
      });
    }
    parts.push(g);
  }
  // Redrawing must not take the keyboard focus away from a node.
  const focused = document.activeElement?.closest?.("[data-node]")?.dataset.node;
  svg.replaceChildren(...parts);
  if (focused) $(`[data-node="${CSS.escape(focused)}"]`, svg)?.focus();
}

// ---- tables ----

function stateCell(p) {
  return el("td", { "data-field": "state" }, el("span", { class: "pill " + p.state }, p.state));
}

function epochRows(epochs, withPartition) {
  return epochs.map((e) => el("tr", { "data-epoch": e.ts },
    withPartition ? el("td", {}, e.partition) : null,
    el("td", { class: "mono" }, e.ts), el("td", {}, clock(e.at)),
    ncell(e.inputs, "inputs"), ncell(e.outputs, "outputs"), ncell(e.duplicates, "duplicates"), ncell(e.writes, "writes"), ncell(e.bytes, "bytes", bytes(e.bytes)),
    ncell(e.duration_ms, "duration", msf(e.duration_ms)), ncell(e.commit_ms, "commit", e.committed ? msf(e.commit_ms) : "none")));
}
const epochHead = (withPartition) => [withPartition ? { label: "partition" } : null, { label: "epoch" }, { label: "applied" }, { label: "inputs", num: 1 },
  { label: "outputs", num: 1 }, { label: "redelivered", num: 1 }, { label: "writes", num: 1 }, { label: "size", num: 1 }, { label: "duration", num: 1 },
  { label: "commit", num: 1 }].filter(Boolean);

function partitionRows(parts) {
  return parts.map((p) => el("tr", { "data-partition": p.id, class: p.state },
    el("th", { scope: "row" }, p.id), stateCell(p), el("td", {}, p.worker ? `${p.job || "—"} @ ${p.worker}` : p.job || "—"),
    ncell(p.rates?.inputs_per_s, "in-rate", rate(p.rates?.inputs_per_s)), ncell(p.rates?.epochs_per_s, "epoch-rate", num(p.rates?.epochs_per_s)),
    ncell(p.epoch_age_s, "epoch-age", p.epoch_age_s === undefined ? "—" : secs(p.epoch_age_s) + " ago"),
    ncell(p.epochs[0]?.duration_ms, "last-duration", msf(p.epochs[0]?.duration_ms)), ncell(p.epochs[0]?.commit_ms, "last-commit", msf(p.epochs[0]?.commit_ms)),
    ncell(p.lag, "lag"), ncell(p.restarts, "restarts"),
    el("td", { class: "error", "data-field": "last_error" }, p.last_error || "")));
}
const partitionHead = [{ label: "partition" }, { label: "state" }, { label: "job" }, { label: "in", num: 1 }, { label: "epochs/s", num: 1 },
  { label: "last epoch", num: 1 }, { label: "duration", num: 1 }, { label: "commit", num: 1 }, { label: "lag", num: 1 }, { label: "restarts", num: 1 }, { label: "last error" }];

function renderComputations(d) {
  table('[data-test="computations"]',
    [{ label: "computation" }, { label: "partitions", num: 1 }, { label: "in/s", num: 1 }, { label: "out/s", num: 1 }, { label: "epochs/s", num: 1 },
      { label: "inputs", num: 1 }, { label: "outputs", num: 1 }, { label: "redelivered", num: 1 }, { label: "lag", num: 1 }],
    d.computations.map((c) => {
      const k = d.status?.computations?.[c.name] || {};
      return el("tr", { "data-comp": c.name, class: c.failing ? "failing" : "" },
        el("th", { scope: "row" }, el("button", { type: "button", class: "link", onclick: () => { selected = c.name; render(last); } }, c.name)),
        el("td", { class: "num" + (c.failing ? " bad" : "") }, c.failing ? `${c.failing}/${c.partitions} failing` : c.partitions),
        ncell(c.rates.inputs_per_s, "in-rate", rate(c.rates.inputs_per_s)), ncell(c.rates.outputs_per_s, "out-rate", rate(c.rates.outputs_per_s)),
        ncell(c.rates.epochs_per_s, "epoch-rate"),
        ncell(k.Inputs, "inputs"), ncell(k.Outputs, "outputs"), ncell(k.Duplicates, "duplicates"), ncell(c.lag, "lag"));
    }));
}

function renderDetail(d) {
  const box = $('[data-test="detail"]');
  const c = d.computations.find((x) => x.name === selected);
  box.hidden = !c;
  if (!c) return;
  const parts = d.partitions.filter((p) => p.computation === c.name);
  const epochs = parts.flatMap((p) => p.epochs.map((e) => ({ ...e, partition: p.id }))).sort((a, b) => (a.at < b.at ? 1 : -1)).slice(0, 12);
  const es = d.epoch_summary[c.name] || {};
  box.replaceChildren(
    el("div", { class: "section-head" }, el("h2", {}, `${c.name} `, el("span", { class: "muted" }, c.class)),
      el("button", { type: "button", "data-test": "close-detail", onclick: () => { selected = null; render(last); } }, "Close")),
    el("dl", { class: "facts-grid", "data-detail": c.name },
      el("div", {}, el("dt", {}, `in (${windowSelect.value})`), el("dd", {}, rate(c.rates.inputs_per_s))),
      el("div", {}, el("dt", {}, `out (${windowSelect.value})`), el("dd", {}, rate(c.rates.outputs_per_s))),
      el("div", {}, el("dt", {}, "epochs"), el("dd", {}, num(c.rates.epochs_per_s) + "/s")),
      el("div", {}, el("dt", {}, "lag"), el("dd", {}, num(c.lag))),
      el("div", {}, el("dt", {}, "epoch duration avg / max"), el("dd", {}, `${msf(es.avg_duration_ms)} / ${msf(es.max_duration_ms)}`)),
      el("div", {}, el("dt", {}, "commit latency avg / max"), el("dd", {}, `${msf(es.avg_commit_ms)} / ${msf(es.max_commit_ms)}`)),
      el("div", {}, el("dt", {}, "inputs per epoch"), el("dd", {}, num(es.avg_inputs))),
      el("div", {}, el("dt", {}, "transaction per epoch"), el("dd", {}, bytes(es.avg_bytes))),
      el("div", {}, el("dt", {}, "outbox limit"), el("dd", {}, num(c.outbox_limit)))),
    el("h3", {}, "Partitions"),
    el("div", { class: "scroll" }, el("table", {}, el("thead", {}, el("tr", {}, partitionHead.map((h) => el("th", { class: h.num ? "num" : "" }, h.label)))),
      el("tbody", {}, partitionRows(parts)))),
    el("h3", {}, "Recent epochs"),
    el("div", { class: "scroll" }, el("table", {}, el("thead", {}, el("tr", {}, epochHead(true).map((h) => el("th", { class: h.num ? "num" : "" }, h.label)))),
      el("tbody", {}, epochRows(epochs, true)))));
}

function failureCard(f) {
  const title = f.kind === "sink" ? `sink ${f.sink} of ${f.partition}: delivery stopped` : f.kind === "source" ? `source of ${f.computation} cannot be listed` : `partition ${f.partition} failing`;
  const o = f.origin;
  return el("article", { class: "failure", "data-failure": f.partition || f.computation },
    el("h3", {}, title),
    el("p", { class: "muted" }, [
      f.consecutive_failures ? `${f.consecutive_failures} failures in a row` : null,
      f.restarts ? `${f.restarts} restarts` : null,
      f.restart_at ? `next attempt ${clock(f.restart_at)}` : null,
      f.worker ? `on worker ${f.worker}` : null].filter(Boolean).join(" · ")),
    o ? el("dl", { class: "origin" },
      el("dt", {}, "cause"), el("dd", { "data-field": "cause" }, o.cause),
      el("dt", {}, o.call), el("dd", { class: "mono", "data-field": "message" }, o.message),
      o.source ? [el("dt", {}, "origin"), el("dd", { "data-field": "origin" }, `source ${o.source}, partition ${o.source_partition}, offset ${o.offset}`)] : null,
      f.poison ? [el("dt", {}, "poison row"), el("dd", {}, el("code", { "data-field": "poison" }, f.poison))] : null) : null,
    el("details", { open: true }, el("summary", {}, "full error"), el("pre", { class: "error", "data-field": "error" }, f.error)),
    f.history.length ? el("details", {}, el("summary", {}, `restart history (${f.history.length})`),
      el("ol", { class: "history" }, f.history.slice().reverse().map((h) => el("li", {}, `${clock(h.at)} — `,
        h.recovered ? "ran healthy again" : `failure ${h.consecutive_failures} in a row (restart ${h.restarts}): ${h.error}`)))) : null,
    f.skip ? el("p", {}, skipButton(f)) : null,
    el("div", { class: "cli" }, el("h4", {}, "What you can do"),
      el("ul", {}, f.actions.map((a) => el("li", {}, a.what, el("br"), el("code", {}, a.command))))));
}

// skipButton skips the failed message (POST /pipeline/skip): the first
// press asks for a second, so that one slip does not drop a message.
const armed = new Set();
function skipButton(f) {
  const key = f.partition + " " + JSON.stringify(f.skip);
  const what = f.skip.message ? `message ${f.skip.message}` : `source partition ${f.skip.source_partition} offset ${f.skip.offset}`;
  return el("button", { type: "button", class: armed.has(key) ? "danger" : "", "data-skip": f.partition, onclick: async () => {
    if (!armed.has(key)) {
      armed.add(key);
      message(`press "Confirm skip" to skip ${what} of ${f.computation}: it will not be processed`, "pending");
      render(last);
      $(`[data-skip="${CSS.escape(f.partition)}"]`)?.focus();
      return;
    }
    armed.delete(key);
    if (!token()) {
      message("enter the admin token first", "error");
      return;
    }
    try {
      const r = await post("/pipeline/skip", f.skip);
      message(r.text, r.ok ? "ok" : "error");
    } catch (e) {
      message("the request did not reach weir: " + e.message, "error");
    }
    refresh();
  } }, armed.has(key) ? "Confirm skip" : `Skip this message`);
}

function renderFailures(d) {
  const fails = d.failures;
  $('[data-test="failure-count"]').textContent = fails.length ? String(fails.length) : "";
  $('[data-tab="failures"]').classList.toggle("alert", fails.length > 0);
  $('[data-test="no-failures"]').hidden = fails.length > 0;
  if ($('[data-panel="failures"]').hidden === false) $('[data-test="failures"]').replaceChildren(...fails.map(failureCard));
  const sum = $('[data-test="failures-summary-section"]');
  sum.hidden = fails.length === 0;
  $('[data-test="failures-summary"]').replaceChildren(el("ul", {}, fails.slice(0, 5).map((f) => el("li", {},
    el("strong", {}, f.partition || f.computation), ": ", el("span", { class: "error" }, f.origin ? f.origin.cause : f.error.split("\n")[0]), " ",
    el("button", { type: "button", class: "link", onclick: () => showTab("failures") }, "details")))));
}

function renderPartitions(d) {
  const filter = $('[data-test="partition-filter"]');
  const want = ["", ...d.computations.map((c) => c.name)];
  if ([...filter.options].map((o) => o.value).join() !== want.join()) {
    const v = filter.value;
    filter.replaceChildren(...want.map((w) => el("option", { value: w }, w || "all")));
    filter.value = v;
  }
  const parts = d.partitions.filter((p) => !filter.value || p.computation === filter.value);
  table('[data-test="partitions"]', partitionHead, partitionRows(parts));
}
$('[data-test="partition-filter"]').addEventListener("change", () => last && render(last));

function renderEpochs(d) {
  table('[data-test="epoch-summary"]', [{ label: "computation" }, { label: "epochs seen", num: 1 }, { label: "epochs/s", num: 1 }, { label: "inputs/epoch", num: 1 }, { label: "size/epoch", num: 1 },
    { label: "duration avg", num: 1 }, { label: "max", num: 1 }, { label: "commit avg", num: 1 }, { label: "max", num: 1 }],
  d.computations.map((c) => {
    const s = d.epoch_summary[c.name] || {};
    return el("tr", { "data-epoch-comp": c.name }, el("th", { scope: "row" }, c.name), ncell(s.count, "count"), ncell(c.rates.epochs_per_s, "epoch-rate"),
      ncell(s.avg_inputs, "avg-inputs"), ncell(s.avg_bytes, "avg-bytes", bytes(s.avg_bytes)), ncell(s.avg_duration_ms, "avg-duration", msf(s.avg_duration_ms)), ncell(s.max_duration_ms, "max-duration", msf(s.max_duration_ms)),
      ncell(s.avg_commit_ms, "avg-commit", msf(s.avg_commit_ms)), ncell(s.max_commit_ms, "max-commit", msf(s.max_commit_ms)));
  }));
  const all = d.partitions.flatMap((p) => p.epochs.map((e) => ({ ...e, partition: p.id }))).sort((a, b) => (a.at < b.at ? 1 : -1)).slice(0, 40);
  table('[data-test="epochs"]', epochHead(true), epochRows(all, true));
}

function renderWatermarks(d) {
  table('[data-test="watermarks"]', [{ label: "stream" }, { label: "system watermark" }, { label: "behind the newest epoch", num: 1 }, { label: "event watermark" }, { label: "behind now", num: 1 }],
    d.watermarks.map((w) => el("tr", { "data-stream": w.stream }, el("th", { scope: "row" }, w.stream), el("td", {}, w.system ? clock(w.system) : "—"),
      ncell(w.system_delay_s, "system-delay", secs(w.system_delay_s)), el("td", {}, w.event ? new Date(w.event).toISOString() : "—"),
      ncell(w.event_delay_s, "event-delay", w.event_delay_s < 0 ? secs(-w.event_delay_s) + " ahead" : secs(w.event_delay_s)))));
}

function renderWorkers(d) {
  const tab = $('[data-test="workers-tab"]');
  tab.hidden = d.mode !== "controller";
  if (d.mode !== "controller") return;
  table('[data-test="workers"]', [{ label: "worker" }, { label: "address" }, { label: "state" }, { label: "incarnation", num: 1 }, { label: "jobs", num: 1 },
    { label: "partitions" }, { label: "" }],
  (d.workers || []).map((w) => el("tr", { "data-worker": w.id },
    el("th", { scope: "row" }, w.id), el("td", {}, w.addr),
    el("td", {}, el("span", { class: "pill " + (!w.alive ? "failing" : w.draining ? "idle" : "running") }, !w.alive ? "lost" : w.draining ? "draining" : "alive")),
    ncell(w.incarnation, "incarnation", String(w.incarnation)), ncell(w.jobs, "jobs"), el("td", { class: "wrap" }, w.partitions.join(", ") || "—"),
    el("td", {}, el("button", { type: "button", "data-drain": w.id, disabled: w.draining || !w.alive, onclick: () => drainWorker(w.id) }, "Drain")))));
}

// ---- charts ----

const COLORS = ["#1570ef", "#12b76a", "#f79009", "#7a5af8", "#ee46bc", "#0ba5ec", "#667085", "#d92d20"];
const charts = {};

function drawChart(key, box, names, unitLeft, data, right) {
  const sig = names.join() + "|" + (right ? right.label : "") + "|" + Math.round(box.clientWidth / 20);
  let c = charts[key];
  if (!c || c.sig !== sig) {
    c?.plot.destroy();
    const series = [{}, ...names.map((n, i) => ({ label: n, stroke: COLORS[i % COLORS.length], width: 2, spanGaps: true, points: { show: false } }))];
    const axes = [{}, { label: unitLeft, size: 60 }];
    const scales = { x: { time: true } };
    if (right) {
      series.push({ label: right.label, scale: "r", stroke: "#b42318", dash: [5, 4], width: 2, spanGaps: true, points: { show: false } });
      axes.push({ scale: "r", side: 1, label: right.unit, grid: { show: false }, size: 60 });
      scales.r = {};
    }
    const plot = new uPlot({ width: Math.max(260, box.clientWidth - 4), height: 220, scales, axes, series, legend: { show: false }, cursor: { drag: { x: false, y: false } } }, null, box);
    c = charts[key] = { plot, sig };
  }
  c.plot.setData(data);
}

function legend(box, items) {
  box.replaceChildren(...items.map(([name, value, color, dashed]) => el("span", { class: "item" },
    el("span", { class: "swatch" + (dashed ? " dashed" : ""), style: `--c:${color}` }), name + " ", el("strong", {}, value))));
}

function renderCharts(d) {
  const s = d.series;
  if (!s.t || s.t.length < 2) return;
  if ($('[data-panel="overview"]').hidden === false) {
    const names = Object.keys(s.rates).sort();
    drawChart("rates", $('[data-test="chart"]'), names, "inputs/s", [s.t, ...names.map((n) => s.rates[n]), s.lag], { label: "source lag", unit: "lag (rows)" });
    const lastVal = (a) => (a && a.length ? a[a.length - 1] : null);
    legend($('[data-test="chart-legend"]'), [...names.map((n, i) => [n, rate(lastVal(s.rates[n])), COLORS[i % COLORS.length]]), ["source lag", num(lastVal(s.lag)), "#b42318", true]]);
  }
  if ($('[data-panel="watermarks"]').hidden === false) {
    const names = Object.keys(s.wm_delay_s).sort();
    const events = Object.keys(s.event_wm_delay_s || {}).sort();
    const pad = (a) => a.concat(Array(Math.max(0, s.t.length - a.length)).fill(null));
    drawChart("wm", $('[data-test="wm-chart"]'), [...names.map((n) => n + " (system)"), ...events.map((n) => n + " (event)")], "seconds behind",
      [s.t, ...names.map((n) => s.wm_delay_s[n]), ...events.map((n) => pad(s.event_wm_delay_s[n]))]);
    const lastVal = (a) => (a && a.length ? a[a.length - 1] : null);
    legend($('[data-test="wm-legend"]'), [...names.map((n, i) => [n + " (system)", secs(lastVal(s.wm_delay_s[n])), COLORS[i % COLORS.length]]),
      ...events.map((n, i) => [n + " (event)", secs(lastVal(s.event_wm_delay_s[n])), COLORS[(names.length + i) % COLORS.length]])]);
  }
}

// ---- header ----

function renderHeader(d) {
  $('[data-test="mode"]').textContent = d.mode === "controller" ? "distributed" : "embedded";
  $('[data-test="run-actions"]').hidden = d.mode === "controller";
  $('[data-test="token-label"]').textContent = d.mode === "controller" ? "cluster token" : "admin token";
  const st = $('[data-test="state"]');
  const s = d.status;
  const state = !d.active ? "standby" : s.state;
  st.textContent = state;
  const failing = d.failures.length;
  st.className = "state " + state + (failing && state === "working" ? " degraded" : "");
  st.title = failing ? `${state}, with ${failing} failure(s): see Failures` : state;
  $('[data-test="window-label"]').textContent = `(averaged over ${windowSelect.options[windowSelect.selectedIndex].text})`;
  const facts = [];
  if (s) {
    facts.push(`up ${secs(s.uptime_seconds)}`, `${s.controller.JobsStarted} jobs started`, `${s.controller.JobsFailed} failed`);
    if (failing) facts.push(`${failing} failing`);
  } else if (d.leader) {
    facts.push(`standing by; the active controller is ${d.leader.id || "unknown"}` + (d.leader.admin ? ` (console at http://${d.leader.admin}/)` : ""));
  }
  if (d.mode === "controller" && d.workers) facts.push(`${d.workers.filter((w) => w.alive).length}/${d.workers.length} workers alive`);
  const f = $('[data-test="uptime"]');
  f.replaceChildren(...facts.map((x, i) => el("span", { class: i === 3 && failing ? "bad" : "" }, x)));
  if (pending && s) {
    if (s.state === pending.target) {
      message(`${pending.target} (${pending.action} took ${fmt.format((Date.now() - pending.since) / 1000)} s)`, "ok");
      pending = null;
    } else {
      message(`${pending.action} requested: now ${s.state}, waiting for ${pending.target}…`, "pending");
    }
  }
}

// ---- main loop ----

function render(d) {
  last = d;
  renderHeader(d);
  drawGraph(d);
  renderDetail(d);
  renderFailures(d);
  renderComputations(d);
  if ($('[data-panel="partitions"]').hidden === false) renderPartitions(d);
  if ($('[data-panel="epochs"]').hidden === false) renderEpochs(d);
  if ($('[data-panel="watermarks"]').hidden === false) renderWatermarks(d);
  renderWorkers(d);
  renderCharts(d);
  window.__weir = { last: d, at: lastAt };
  document.body.dataset.loaded = "true";
}

function setConnection(ok, why) {
  const c = $('[data-test="connection"]');
  const banner = $('[data-test="disconnected"]');
  if (ok) {
    document.body.dataset.connection = "live";
    c.textContent = "live";
    c.className = "connection live";
    banner.hidden = true;
    return;
  }
  document.body.dataset.connection = "lost";
  c.textContent = "disconnected";
  c.className = "connection lost";
  banner.hidden = false;
  banner.replaceChildren(el("strong", {}, "Disconnected. "),
    `${location.host} does not answer (${why}).`,
    lastAt ? ` The figures below are from ${clock(lastAt)} and are not updated; ` : " ",
    "the page retries by itself. If the process exited, start it again (weir run / weir controller).");
}

let inflight = false;
async function refresh() {
  if (inflight) return;
  if (!token() && last && last.mode !== "controller") {
    // weir run's data needs the admin token: ask for it rather than be refused.
    message("enter the admin token to see the pipeline ('weir pipeline console --data DIR' prints a link with it)", "error");
    return;
  }
  inflight = true;
  const ctl = new AbortController();
  const timer = setTimeout(() => ctl.abort(), TIMEOUT_MS);
  try {
    const headers = token() ? { Authorization: "Bearer " + token() } : {};
    const resp = await fetch("/console/data?window=" + encodeURIComponent(windowSelect.value), { cache: "no-store", headers, signal: ctl.signal });
    if (resp.status === 401) {
      setConnection(true);
      message(last && last.mode === "controller" || !last && location.port === ""
        ? "the controller needs the cluster token: paste it in the field (or open the link with #token=…)"
        : "the data needs the admin token (or, under weir controller, the cluster token): paste it in the field, or open the link 'weir pipeline console --data DIR' prints", "error");
      return;
    }
    if (!resp.ok) throw new Error(`HTTP ${resp.status}: ${(await resp.text()).trim()}`);
    const d = await resp.json();
    lastAt = new Date();
    setConnection(true);
    render(d);
  } catch (e) {
    setConnection(false, e.name === "AbortError" ? `no answer within ${TIMEOUT_MS / 1000} s` : e.message === "Failed to fetch" ? "connection refused" : e.message);
  } finally {
    clearTimeout(timer);
    inflight = false;
  }
}

showTab(sessionStorage.getItem("weir-tab") || "overview");
window.addEventListener("resize", () => last && render(last));
refresh();
setInterval(refresh, POLL_MS);
