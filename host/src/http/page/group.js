// The live page of a group member: polls /api/v1/group every second and
// draws this host's partitions (lease epoch, phase, last checkpoint), the
// members it sees and its counters. Read-only, as the member's endpoint.
"use strict";

const $ = (id) => document.getElementById(id);

// The read token, if the endpoint needs one: given once as `/#token=...`
// (a fragment never reaches the server or its logs), then kept for this tab.
const TOKEN_KEY = "squall-token";
function takeTokenFromFragment() {
  const m = /(?:^#|&)token=([^&]+)/.exec(location.hash);
  if (!m) return false;
  sessionStorage.setItem(TOKEN_KEY, decodeURIComponent(m[1]));
  history.replaceState(null, "", location.pathname + location.search);
  return true;
}
takeTokenFromFragment();
window.addEventListener("hashchange", () => {
  if (takeTokenFromFragment()) refresh();
});

function headers() {
  const token = sessionStorage.getItem(TOKEN_KEY);
  return token ? { Authorization: `Bearer ${token}` } : {};
}

function cell(row, text, cls) {
  const td = row.insertCell();
  td.textContent = String(text);
  if (cls) td.className = cls;
  return td;
}

function draw(view) {
  $("group").textContent = view.group;
  $("host").textContent = view.host;
  $("share").textContent = view.share;
  $("members").textContent = view.members.join(", ") || "none";
  const body = $("partitions").tBodies[0];
  body.replaceChildren();
  for (const p of view.partitions) {
    const row = body.insertRow();
    row.dataset.partition = p.partition;
    cell(row, p.partition, "partition");
    cell(row, p.epoch, "epoch");
    cell(row, p.phase, "phase");
    cell(row, p.last_checkpoint || "none yet", "checkpoint");
  }
  const counters = $("counters").tBodies[0];
  counters.replaceChildren();
  for (const [name, value] of Object.entries(view.counters)) {
    const row = counters.insertRow();
    row.dataset.counter = name;
    cell(row, name.replace(/_/g, " "));
    cell(row, value, "value");
  }
}

async function refresh() {
  try {
    const r = await fetch("/api/v1/group", { headers: headers() });
    if (r.status === 401) {
      $("status").textContent = "this endpoint needs a token: open /#token=…";
      return;
    }
    if (!r.ok) {
      $("status").textContent = `the member answered ${r.status}`;
      return;
    }
    draw(await r.json());
    $("status").textContent = `updated ${new Date().toLocaleTimeString()}`;
  } catch (e) {
    $("status").textContent = `the member does not answer (${e})`;
  }
}

refresh();
setInterval(refresh, 1000);
