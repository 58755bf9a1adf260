// sensordb's built-in graph page: pick a database, measurement, tags and field; the plot asks
// /sensordb/graph for M4 points at its own pixel width, again after every zoom or pan, and every
// two seconds when following live data. Schema comes from InfluxQL SHOW statements on /query.
"use strict";

const $ = (id) => document.getElementById(id);
const state = { from: null, to: null, plot: null, timer: null, requests: 0 };
// For tests and the curious: the last query sent and the data drawn.
window.sensordbGraph = { lastQuery: null, data: null, queries: [] };

async function influxql(q, db) {
  const params = new URLSearchParams({ q });
  if (db) params.set("db", db);
  const reply = await fetch("/query?" + params);
  const json = await reply.json();
  if (json.error) throw new Error(json.error);
  const result = json.results[0];
  if (result.error) throw new Error(result.error);
  return result.series || [];
}

function status(text, error) {
  $("status").textContent = text;
  $("status").className = error ? "error" : "";
}

function fill(select, values, keep) {
  const previous = keep ? select.value : null;
  select.replaceChildren(...values.map((v) => new Option(v.label ?? v, v.value ?? v)));
  if (previous && values.some((v) => (v.value ?? v) === previous)) select.value = previous;
}

async function loadDatabases() {
  const series = await influxql("SHOW DATABASES");
  fill($("db"), series.length ? (series[0].values || []).map((r) => r[0]) : []);
  await loadMeasurements();
}

const quote = (name) => '"' + name.replace(/\\/g, "\\\\").replace(/"/g, '\\"') + '"';

async function loadMeasurements() {
  const db = $("db").value;
  const series = db ? await influxql("SHOW MEASUREMENTS", db) : [];
  fill($("measurement"), series.length ? (series[0].values || []).map((r) => r[0]) : []);
  await loadSchema();
}

async function loadSchema() {
  const db = $("db").value, m = $("measurement").value;
  $("tags").replaceChildren();
  if (!m) { fill($("field"), []); return; }
  const fields = await influxql("SHOW FIELD KEYS FROM " + quote(m), db);
  fill($("field"), fields.length ? fields[0].values.filter((r) => r[1] !== "string").map((r) => r[0]) : []);
  const values = await influxql("SHOW TAG VALUES FROM " + quote(m) + " WITH KEY =~ /.*/", db);
  const byKey = new Map();
  for (const [key, value] of (values.length ? values[0].values : [])) {
    if (!byKey.has(key)) byKey.set(key, []);
    byKey.get(key).push(value);
  }
  for (const [key, list] of byKey) {
    const select = document.createElement("select");
    select.dataset.tag = key;
    fill(select, [{ label: "any", value: "" }, ...list]);
    select.addEventListener("change", redraw);
    const label = document.createElement("label");
    label.append(key + " ", select);
    $("tags").append(label);
  }
  await showNewest();
}

// The window of the chosen range ending at the field's newest point when that is older than
// the range (data from a while ago), else at now.
async function showNewest() {
  const db = $("db").value, m = $("measurement").value, f = $("field").value;
  state.newest = null;
  if (db && m && f) {
    const params = new URLSearchParams({ db, epoch: "ms", q: "SELECT last(" + quote(f) + ") FROM " + quote(m) });
    const json = await (await fetch("/query?" + params)).json();
    const series = json.results && json.results[0].series;
    if (series && series[0].values) state.newest = series[0].values[0][0];
  }
  resetRange();
  await redraw();
}

function resetRange() {
  const range = $("range").value;
  const now = Date.now();
  const span = range === "all" ? null : Number(range) * 1000;
  if (span === null) {
    state.from = 0;
    state.to = now + 86400e3;
  } else {
    state.to = state.newest !== null && state.newest < now - span ? state.newest + span / 50 : now;
    state.from = state.to - span;
  }
}

function plotWidth() {
  return Math.max(200, Math.floor($("plot").clientWidth || window.innerWidth - 40));
}

async function redraw() {
  const db = $("db").value, m = $("measurement").value, f = $("field").value;
  if (!db || !m || !f) { status("pick a database, measurement and field"); return; }
  const width = plotWidth();
  const params = new URLSearchParams({
    db, measurement: m, field: f, width: String(width),
    from: new Date(Math.floor(state.from)).toISOString(),
    to: new Date(Math.ceil(state.to)).toISOString(),
  });
  for (const select of $("tags").querySelectorAll("select")) {
    if (select.value) params.set("tag." + select.dataset.tag, select.value);
  }
  const url = "/sensordb/graph?" + params;
  window.sensordbGraph.lastQuery = { from: state.from, to: state.to, width, url };
  window.sensordbGraph.queries.push(window.sensordbGraph.lastQuery);
  const request = ++state.requests;
  let json;
  try {
    const reply = await fetch(url);
    json = await reply.json();
    if (!reply.ok) throw new Error(json.error || reply.statusText);
  } catch (e) {
    status("query failed: " + e.message, true);
    return;
  }
  if (request !== state.requests) return; // a newer view was asked for meanwhile
  draw(json.series, width);
}

// One x axis for all series (uPlot's model): the union of their times, null where a series has
// no point; lines span the gaps.
function draw(series, width) {
  const times = [...new Set(series.flatMap((s) => s.points.map((p) => p[0])))].sort((a, b) => a - b);
  const index = new Map(times.map((t, i) => [t, i]));
  const columns = series.map((s) => {
    const column = new Array(times.length).fill(null);
    for (const [t, v] of s.points) column[index.get(t)] = v;
    return column;
  });
  const data = [times.map((t) => t / 1000), ...columns];
  window.sensordbGraph.data = { series: series.map((s) => s.key), points: series.map((s) => s.points) };
  const palette = ["#1f77b4", "#d62728", "#2ca02c", "#ff7f0e", "#9467bd", "#8c564b", "#e377c2", "#17becf"];
  const options = {
    width, height: Math.max(300, window.innerHeight - 200),
    scales: { x: { time: true, min: state.from / 1000, max: state.to / 1000 } },
    series: [{}, ...series.map((s, i) => ({ label: label(s), stroke: palette[i % palette.length], spanGaps: true, points: { show: false } }))],
    cursor: { drag: { x: true, y: false } },
    hooks: { setSelect: [(u) => {
      if (u.select.width < 2) return;
      const from = u.posToVal(u.select.left, "x") * 1000, to = u.posToVal(u.select.left + u.select.width, "x") * 1000;
      u.setSelect({ left: 0, width: 0 }, false);
      zoom(from, to);
    }] },
  };
  if (state.plot) state.plot.destroy();
  state.plot = new uPlot(options, data, $("plot"));
  const total = series.reduce((n, s) => n + s.points.length, 0);
  status(series.length + " series, " + total + " points drawn, " + new Date(state.from).toISOString() + " to " + new Date(state.to).toISOString());
}

// A series is named by its tags (the measurement and field are in the form above).
function label(s) {
  const tags = Object.entries(s.tags).filter(([, v]) => v !== "").map(([k, v]) => k + "=" + v);
  return tags.length ? tags.join(" ") : s.key;
}

function zoom(from, to) {
  $("live").checked = false;
  follow();
  state.from = from;
  state.to = to;
  redraw();
}
window.sensordbGraph.zoom = zoom;

function pan(direction) {
  const half = (state.to - state.from) / 2;
  state.from += direction * half;
  state.to += direction * half;
  redraw();
}

function follow() {
  clearInterval(state.timer);
  state.timer = null;
  if ($("live").checked) {
    state.timer = setInterval(() => {
      const span = state.to - state.from;
      state.to = Date.now();
      state.from = state.to - span;
      redraw();
    }, 2000);
  }
}

$("db").addEventListener("change", () => loadMeasurements().catch((e) => status(e.message, true)));
$("measurement").addEventListener("change", () => loadSchema().catch((e) => status(e.message, true)));
$("field").addEventListener("change", () => showNewest().catch((e) => status(e.message, true)));
$("range").addEventListener("change", () => { resetRange(); redraw(); });
$("back").addEventListener("click", () => pan(-1));
$("forward").addEventListener("click", () => pan(1));
$("live").addEventListener("change", follow);
window.addEventListener("resize", () => { if (state.plot) redraw(); });
loadDatabases().catch((e) => status(e.message, true));
