// squall's live page: polls /api/v1/topology every second and renders it.
"use strict";

const $ = (id) => document.getElementById(id);
const SVG = "http://www.w3.org/2000/svg";
let windowName = "10s";
let lastGraphKey = "";

function fmt(n) {
  if (n === null || n === undefined || Number.isNaN(n)) return "-";
  if (typeof n !== "number") return String(n);
  const a = Math.abs(n);
  if (a >= 1e9) return (n / 1e9).toFixed(2) + "G";
  if (a >= 1e6) return (n / 1e6).toFixed(2) + "M";
  if (a >= 1e4) return (n / 1e3).toFixed(1) + "k";
  return Number.isInteger(n) ? String(n) : n.toFixed(1);
}

function duration(secs) {
  const s = Math.floor(secs);
  const h = Math.floor(s / 3600), m = Math.floor((s % 3600) / 60);
  return (h ? h + "h " : "") + (h || m ? m + "m " : "") + (s % 60) + "s";
}

function el(tag, attrs, text) {
  const e = tag.startsWith("svg:") ? document.createElementNS(SVG, tag.slice(4)) : document.createElement(tag);
  for (const [k, v] of Object.entries(attrs || {})) e.setAttribute(k, v);
  if (text !== undefined) e.textContent = text;
  return e;
}

// The bearer token, if the endpoint needs one: given once as
// `/#token=...` (a fragment never reaches the server or its logs) or typed
// into the form shown after a 401, then kept for this tab only.
const TOKEN_KEY = "squall-token";
function takeTokenFromFragment() {
  const m = /(?:^#|&)token=([^&]+)/.exec(location.hash);
  if (!m) return false;
  sessionStorage.setItem(TOKEN_KEY, decodeURIComponent(m[1]));
  history.replaceState(null, "", location.pathname + location.search);
  return true;
}
takeTokenFromFragment();
// A `#token=` pasted into the address bar of an open page changes only the
// fragment: no reload, so take it here.
window.addEventListener("hashchange", () => {
  if (takeTokenFromFragment()) {
    $("login").hidden = true;
    refresh();
  }
});

function headers(extra) {
  const h = Object.assign({}, extra || {});
  const token = sessionStorage.getItem(TOKEN_KEY);
  if (token) h["Authorization"] = `Bearer ${token}`;
  return h;
}

function askForToken(message) {
  const form = $("login");
  form.hidden = false;
  $("login-message").textContent = message;
}

async function post(path) {
  // JSON and a custom header: what a cross-site form cannot send.
  const r = await fetch(path, {
    method: "POST",
    headers: headers({ "Content-Type": "application/json", "X-Requested-With": "squall-page" }),
    body: "{}",
  });
  if (r.status === 401) askForToken("this action needs the control token");
  const body = await r.json().catch(() => ({}));
  if (!r.ok) alert(body.error || r.statusText);
  refresh();
}

// The tap panel: the last TAP_LINES tuples the component emits, streamed
// from GET /api/v1/tap (NDJSON) until "stop" or another tap.
const TAP_LINES = 20;
let tapAbort = null;
async function startTap(name) {
  if (tapAbort) tapAbort.abort();
  const abort = new AbortController();
  tapAbort = abort;
  $("tap").hidden = false;
  $("tap-name").textContent = name;
  const out = $("tap-out");
  out.textContent = "";
  const lines = [];
  const show = (line) => {
    lines.push(line);
    if (lines.length > TAP_LINES) lines.shift();
    out.textContent = lines.join("\n");
  };
  try {
    const r = await fetch(`/api/v1/tap?outputs_of=${encodeURIComponent(name)}`, {
      headers: headers({ "X-Requested-With": "squall-page" }),
      signal: abort.signal,
    });
    if (r.status === 401) askForToken("the tap needs the control token");
    if (!r.ok) {
      const body = await r.json().catch(() => ({}));
      return show(`error: ${body.error || r.statusText}`);
    }
    const reader = r.body.getReader();
    const decoder = new TextDecoder();
    let rest = "";
    for (;;) {
      const { value, done } = await reader.read();
      if (done) break;
      rest += decoder.decode(value, { stream: true });
      let at;
      while ((at = rest.indexOf("\n")) >= 0) {
        const j = JSON.parse(rest.slice(0, at));
        rest = rest.slice(at + 1);
        if (j.status) continue;
        const fields = j.fields.map((f, i) => `${f}=${JSON.stringify(j.values[i])}`).join(" ");
        show(`task ${j.task} ${j.stream}: ${fields}`);
      }
    }
  } catch (e) {
    if (e.name !== "AbortError") show(`error: ${e.message}`);
  }
}
$("tap-stop").onclick = () => {
  if (tapAbort) tapAbort.abort();
  tapAbort = null;
  $("tap").hidden = true;
};

// Layered layout: spouts in column 0, each bolt one column right of its
// deepest input. Rows are assigned in order within a column.
function layout(components, edges) {
  const depth = {};
  components.forEach((c) => { depth[c.name] = c.kind === "spout" ? 0 : -1; });
  for (let pass = 0; pass < components.length; pass++) {
    let changed = false;
    for (const e of edges) {
      const d = (depth[e.from] < 0 ? 0 : depth[e.from]) + 1;
      if (depth[e.to] < d) { depth[e.to] = d; changed = true; }
    }
    if (!changed) break;
  }
  const columns = {};
  const pos = {};
  for (const c of components) {
    const d = Math.max(0, depth[c.name]);
    columns[d] = (columns[d] || 0) + 1;
    pos[c.name] = { col: d, row: columns[d] - 1 };
  }
  return { pos, rows: Math.max(1, ...Object.values(columns)), cols: Object.keys(columns).length };
}

function drawGraph(t) {
  const svg = $("graph");
  const key = JSON.stringify([t.components.map((c) => c.name), t.edges.map((e) => [e.from, e.to, e.stream, e.chained])]);
  const { pos, rows, cols } = layout(t.components, t.edges);
  const W = 170, H = 46, GX = 190, GY = 22;
  if (key !== lastGraphKey) {
    lastGraphKey = key;
    svg.replaceChildren();
    svg.setAttribute("width", cols * (W + GX));
    svg.setAttribute("height", rows * (H + GY) + 30);
    const defs = el("svg:defs");
    const marker = el("svg:marker", { id: "arrow", viewBox: "0 0 10 10", refX: 10, refY: 5, markerWidth: 6, markerHeight: 6, orient: "auto" });
    marker.appendChild(el("svg:path", { d: "M0,0 L10,5 L0,10 z", fill: "#57606a" }));
    defs.appendChild(marker);
    svg.appendChild(defs);
    t.edges.forEach((e, i) => {
      const a = pos[e.from], b = pos[e.to];
      const x1 = a.col * (W + GX) + W, y1 = a.row * (H + GY) + H / 2 + 25;
      const x2 = b.col * (W + GX), y2 = b.row * (H + GY) + H / 2 + 25;
      const g = el("svg:g", { class: e.chained ? "edge chained" : "edge" });
      const mx = (x1 + x2) / 2;
      g.appendChild(el("svg:path", { d: `M${x1},${y1} C${mx},${y1} ${mx},${y2} ${x2},${y2}`, "marker-end": "url(#arrow)" }));
      const what = `${e.stream} · ${e.grouping}${e.chained ? " · chained" : ""}`;
      g.appendChild(el("svg:text", { x: mx, y: (y1 + y2) / 2 - 18, "text-anchor": "middle" }, what));
      g.appendChild(el("svg:text", { x: mx, y: (y1 + y2) / 2 - 5, "text-anchor": "middle", id: `edge-${i}` }, ""));
      svg.appendChild(g);
    });
    for (const c of t.components) {
      const p = pos[c.name];
      const g = el("svg:g", { class: `node ${c.kind}`, id: `node-${c.name}`, transform: `translate(${p.col * (W + GX)},${p.row * (H + GY) + 25})` });
      g.appendChild(el("svg:rect", { width: W, height: H, rx: 6 }));
      g.appendChild(el("svg:text", { x: 8, y: 18 }, `${c.name} ×${c.tasks}`));
      g.appendChild(el("svg:text", { x: 8, y: 36, class: "node-rate" }, ""));
      svg.appendChild(g);
    }
  }
  t.edges.forEach((e, i) => {
    const label = $(`edge-${i}`);
    if (label) label.textContent = `${fmt(e.rate)}/s`;
  });
  for (const c of t.components) {
    const g = $(`node-${c.name}`);
    if (!g) continue;
    const w = c.windows[windowName] || {};
    g.classList.toggle("inactive", c.kind === "spout" && !c.active);
    g.querySelector(".node-rate").textContent =
      c.kind === "spout" ? `emit ${fmt(w.emit_rate)}/s` : `exec ${fmt(w.execute_rate)}/s · cap ${c.summary.capacity.toFixed(2)}`;
  }
}

function spark(svg, series, cls, scale) {
  const values = series.map((v) => (v === null ? 0 : v));
  const w = svg.clientWidth || 300, h = svg.clientHeight || 48;
  const max = scale || Math.max(1, ...values);
  const n = values.length;
  const points = values.map((v, i) => `${n < 2 ? 0 : (i / (n - 1)) * w},${h - 2 - (v / max) * (h - 4)}`).join(" ");
  const line = el("svg:polyline", { points, class: cls || "" });
  return line;
}

function drawSparks(history) {
  const last = (a) => (a.length ? a[a.length - 1] : null);
  $("spark-executed").replaceChildren(spark($("spark-executed"), history.executed_per_sec));
  $("spark-acked").replaceChildren(spark($("spark-acked"), history.acked_per_sec));
  const lat = $("spark-latency");
  // p50 and p99 share one scale, so p50 is never drawn above p99.
  const top = Math.max(1, ...history.complete_latency_p99_us.map((v) => v || 0));
  lat.replaceChildren(spark(lat, history.complete_latency_p99_us, "p99", top), spark(lat, history.complete_latency_p50_us, "", top));
  $("now-executed").textContent = fmt(last(history.executed_per_sec));
  $("now-acked").textContent = fmt(last(history.acked_per_sec));
  $("now-latency").textContent = `${fmt(last(history.complete_latency_p50_us))} / ${fmt(last(history.complete_latency_p99_us))}`;
}

function drawTable(t) {
  const body = document.querySelector("#components tbody");
  const seen = new Set();
  for (const c of t.components) {
    seen.add(c.name);
    let tr = body.querySelector(`tr[data-component="${CSS.escape(c.name)}"]`);
    if (!tr) {
      tr = el("tr", { "data-component": c.name });
      for (const k of ["name", "kind", "tasks", "emitted", "emit_rate", "executed", "execute_rate", "acked", "failed", "capacity", "queued", "bp", "p50", "p99", "errors", "steer"]) {
        tr.appendChild(el("td", { class: k }));
      }
      const tap = el("button", { class: "small tap", title: "GET /api/v1/tap: sampled tuples (control scope)" }, "tap");
      tap.onclick = () => startTap(c.name);
      tr.querySelector(".steer").append(tap, " ");
      if (c.kind === "spout") {
        const off = el("button", { class: "small deactivate" }, "deactivate");
        off.onclick = () => post(`/api/v1/deactivate?component=${encodeURIComponent(c.name)}`);
        const on = el("button", { class: "small activate" }, "activate");
        on.onclick = () => post(`/api/v1/activate?component=${encodeURIComponent(c.name)}`);
        tr.querySelector(".steer").append(off, " ", on);
      }
      body.appendChild(tr);
    }
    const s = c.summary, w = c.windows[windowName] || {};
    const lat = s.complete_latency_us;
    const cells = {
      name: c.name, kind: c.kind, tasks: c.tasks, emitted: fmt(s.emitted), emit_rate: fmt(w.emit_rate),
      executed: fmt(s.executed), execute_rate: fmt(w.execute_rate), acked: fmt(s.acked), failed: fmt(s.failed),
      capacity: s.capacity.toFixed(2), queued: s.queue_depth_batches, bp: s.backpressure_secs.toFixed(2),
      p50: lat ? `${lat.p50}µs` : "-", p99: lat ? `${lat.p99}µs` : "-", errors: s.errors,
    };
    for (const [k, v] of Object.entries(cells)) tr.querySelector(`.${k}`).textContent = v;
    tr.querySelector(".emitted").dataset.value = s.emitted;
    tr.querySelector(".executed").dataset.value = s.executed;
    tr.classList.toggle("inactive", c.kind === "spout" && !c.active);
  }
  for (const tr of [...body.children]) if (!seen.has(tr.dataset.component)) tr.remove();
}

function drawErrors(t) {
  const list = $("errors");
  const errors = t.components.filter((c) => c.last_error).map((c) => ({ component: c.name, ...c.last_error }));
  errors.sort((a, b) => b.time - a.time);
  list.replaceChildren();
  if (!errors.length) list.appendChild(el("li", { class: "muted" }, "none"));
  for (const e of errors) {
    list.appendChild(el("li", {}, `${new Date(e.time * 1000).toLocaleTimeString()} ${e.component} task ${e.task}: ${e.message}`));
  }
  renderDurable(t.durable_state);
  const fatal = $("fatal");
  fatal.hidden = !t.error;
  fatal.textContent = t.error ? `fatal: ${t.error}` : "";
}

// Durable state (a topology with [state]): the last committed checkpoint,
// how checkpoints go, and the restore at start.
function renderDurable(d) {
  $("durable").hidden = !d;
  if (!d) return;
  const ms = (v) => (v == null ? "-" : `${v.toFixed(1)} ms`);
  $("durable-summary").textContent =
    `${d.backend} · namespace ${d.namespace} · last committed checkpoint ${d.last_committed}` +
    ` · ${d.committed} committed, ${d.failed} failed, ${d.aborted} abandoned` +
    ` · last ${ms(d.last_duration_ms)} (${d.last_records} records, ${fmt(d.last_bytes)}B)` +
    ` · p50 ${ms(d.duration_p50_ms)}, p99 ${ms(d.duration_p99_ms)}` +
    ` · restored ${d.restored_records} records in ${d.restore_secs.toFixed(3)} s`;
  $("durable-error").textContent = d.last_error ? `last error: ${d.last_error}` : "";
}

async function refresh() {
  try {
    const r = await fetch("/api/v1/topology", { cache: "no-store", headers: headers() });
    if (r.status === 401) {
      askForToken("this endpoint needs a token");
      $("state").textContent = "token needed";
      $("state").className = "state down";
      return;
    }
    const t = await r.json();
    document.title = `squall · ${t.name}`;
    $("name").textContent = t.name;
    $("state").textContent = t.state;
    $("state").className = `state ${t.state}`;
    $("uptime").textContent = `up ${duration(t.uptime_secs)}`;
    const p = t.process || {};
    $("process").textContent = p.rss_bytes ? `· RSS ${fmt(p.rss_bytes)}B · CPU ${fmt(p.cpu_secs)}s` : "";
    const select = $("window");
    if (!select.options.length) {
      for (const w of t.windows) select.appendChild(el("option", { value: w }, w));
      select.value = windowName;
    }
    drawGraph(t);
    drawTable(t);
    drawSparks(t.history);
    drawErrors(t);
  } catch (e) {
    $("state").textContent = "unreachable";
    $("state").className = "state down";
  }
}

$("login").onsubmit = (e) => {
  e.preventDefault();
  sessionStorage.setItem(TOKEN_KEY, $("token").value.trim());
  $("token").value = "";
  $("login").hidden = true;
  refresh();
};
$("window").onchange = (e) => { windowName = e.target.value; refresh(); };
$("deactivate-all").onclick = () => post("/api/v1/deactivate");
$("activate-all").onclick = () => post("/api/v1/activate");
$("drain").onclick = () => { if (confirm("Drain the topology and stop squall?")) post("/api/v1/drain"); };
refresh();
setInterval(refresh, 1000);
