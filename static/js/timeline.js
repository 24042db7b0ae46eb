// The trace page's zoomable timeline (Apache ECharts, vendored): wheel or drag to zoom and pan;
// host calls are drawn one lane per call depth under their thread (a flame chart, from the API);
// each zoom asks the timeline API for the visible range, which answers at most max_items items
// (merged spans where a lane holds more). Evidence buttons land on their event; log evidence
// shows its lines in context; "Export" / "Open in Perfetto" take the visible range as Chrome JSON.
(function () {
  "use strict";
  const card = document.getElementById("timeline");
  if (!card || !window.echarts) return;
  const api = card.dataset.api, exportUrl = card.dataset.export, linesUrl = card.dataset.lines;
  const chartEl = card.querySelector(".timeline-chart");
  const status = card.querySelector(".timeline-status");
  const detail = card.querySelector(".timeline-detail");
  const phone = () => window.matchMedia("(max-width: 640px)").matches;
  const dark = () => window.matchMedia("(prefers-color-scheme: dark)").matches;
  const LANE_H = 22;
  const COLORS = {kernel: "#2f6fdb", memcpy: "#c2410c", memset: "#b45309", collective: "#7c3aed", sync: "#b91c1c",
    graph: "#0e7490", runtime: "#15803d", driver: "#4d7c0f", cpu_op: "#64748b", annotation: "#0891b2",
    span: "#0f766e", log: "#a16207", error: "#dc2626", oom: "#dc2626", sample: "#2563eb", step: "#9333ea",
    alloc: "#94a3b8", free: "#cbd5e1", marker: "#6b7280"};
  const SEVERITY = {critical: "#991b1b", error: "#dc2626", warning: "#d97706", info: "#2563eb", debug: "#6b7280"};
  let origin = 0n, span = 1, lanes = [], items = [], highlight = null, chart = null, range = null, timer = null;

  function fmt(ns) {
    const a = Math.abs(ns);
    if (a >= 1e9) return (ns / 1e9).toFixed(3) + " s";
    if (a >= 1e6) return (ns / 1e6).toFixed(3) + " ms";
    if (a >= 1e3) return (ns / 1e3).toFixed(2) + " µs";
    return Math.round(ns) + " ns";
  }
  // axis ticks: wall-clock time (UTC) where the trace is on the wall clock, else the offset from its
  // start; as many decimals as the visible width needs, so ticks 2 µs apart differ
  const WALL_CLOCK_FROM = 946684800000000000n;  // 2000-01-01: earlier origins count from a boot or a start
  function fmtAxis(ns, index) {
    const [s, e] = range || [0, span], step = Math.max((e - s) / 10, 1), a = Math.abs(ns);
    if (origin >= WALL_CLOCK_FROM) {
      const t = origin + BigInt(Math.round(ns)), iso = new Date(Number(t / 1000000000n) * 1000).toISOString();
      const digits = Math.min(9, Math.max(0, Math.ceil(Math.log10(1e9 / step))));
      const clock = iso.slice(11, 19) + (digits ? "." + (t % 1000000000n).toString().padStart(9, "0").slice(0, digits) : "");
      return index === 0 ? iso.slice(0, 10) + " " + clock + " UTC" : clock;
    }
    const unit = a >= 1e9 ? [1e9, " s"] : a >= 1e6 ? [1e6, " ms"] : a >= 1e3 ? [1e3, " µs"] : [1, " ns"];
    const digits = Math.min(9, Math.max(0, Math.ceil(Math.log10(unit[0] / step))));
    return "+" + (ns / unit[0]).toFixed(digits) + unit[1];
  }
  // a phone has room for the lane's own name only (stream 7, thread 425, ↳ depth 2)
  function laneLabel(lane) {
    if (!phone()) return lane.label;
    return lane.depth ? "↳ depth " + lane.depth : lane.path[lane.path.length - 1];
  }
  function absolute(offset) { return (origin + BigInt(Math.round(offset))).toString(); }
  function query(params) { return new URLSearchParams(params).toString(); }

  async function fetchView(start, end, extra) {
    const params = {max_items: phone() ? 1200 : 3000};
    if (start !== undefined) { params.start_ns = absolute(Math.max(start, 0)); params.end_ns = absolute(Math.max(end, start + 1)); }
    Object.assign(params, extra || {});
    status.textContent = "loading…";
    const response = await fetch(api + "?" + query(params), {credentials: "same-origin"});
    if (!response.ok) { status.textContent = "could not load the timeline (" + response.status + ")"; return null; }
    const body = await response.json();
    origin = BigInt(body.origin); span = Math.max(body.trace_end_ns - body.origin_ns, 1);
    lanes = body.lanes; items = body.items;
    const day = origin >= WALL_CLOCK_FROM ? new Date(Number(origin / 1000000000n) * 1000).toISOString().slice(0, 10) + " UTC · " : "";
    status.textContent = day + items.length + " items" + (body.merged ? " (merged where dense: zoom in for single events)" : "");
    return body;
  }

  function renderItem(params, api) {
    const item = items[params.dataIndex];
    const lane = lanes[item.lane];
    const y = api.coord([0, item.lane])[1];
    const x0 = api.coord([item.ts, item.lane])[0];
    const top = y - LANE_H / 2 + 3, h = LANE_H - 6;
    if (lane.type === "curve") {
      const max = lane._max || 1;
      const bar = Math.max(1, h * Math.min((item.value || 0) / max, 1));
      return {type: "rect", shape: {x: x0, y: top + h - bar, width: 2, height: bar},
        style: {fill: COLORS.sample, opacity: 0.8}};
    }
    const w = Math.max(api.size([item.dur, 0])[0], 2);
    const fill = item.severity ? SEVERITY[item.severity] || SEVERITY.info : COLORS[item.kind] || "#6b7280";
    const selected = highlight !== null && item.row === highlight;
    const busy = item.count > 1 && item.dur > 0 ? Math.max(0.35, Math.min(1, item.busy_ns / item.dur)) : 0.9;
    const rect = {type: "rect", shape: {x: x0, y: top, width: w, height: h},
      style: {fill: fill, opacity: item.kind === "finding" || item.kind === "violation" ? 0.55 : busy,
        stroke: selected ? (dark() ? "#fde047" : "#111827") : null, lineWidth: selected ? 3 : 0}};
    // a span wide enough for words carries its name, as in a flame chart (cut to the visible part)
    const box = params.coordSys, left = Math.max(x0, box.x) + 3, room = Math.min(x0 + w, box.x + box.width) - left - 3;
    const chars = Math.floor(room / 6.5);
    if (chars < 4) return rect;
    const name = (item.count > 1 ? item.count + "× " : "") + item.name;
    return {type: "group", children: [rect, {type: "text", silent: true, style: {
      text: name.length > chars ? name.slice(0, chars - 1) + "…" : name, x: left, y: top + h / 2,
      verticalAlign: "middle", fill: "#ffffff", font: "11px sans-serif"}}]};
  }

  function draw(keepZoom) {
    for (const lane of lanes) lane._max = 0;
    for (const item of items) if (lanes[item.lane].type === "curve") lanes[item.lane]._max = Math.max(lanes[item.lane]._max, item.value || 0);
    const labelW = phone() ? 110 : 240;
    chartEl.style.height = (lanes.length * LANE_H + 90) + "px";
    const text = dark() ? "#e5e7eb" : "#1f2937", grid = dark() ? "#374151" : "#e5e7eb";
    const option = {
      animation: false,
      grid: {left: labelW, right: 16, top: 8, bottom: 64},
      tooltip: {confine: true, formatter: p => tooltip(items[p.dataIndex])},
      xAxis: {type: "value", min: 0, max: span, axisLabel: {color: text, formatter: (v, i) => fmtAxis(v, i), hideOverlap: true},
        splitLine: {lineStyle: {color: grid}}},
      yAxis: {type: "category", inverse: true, data: lanes.map(laneLabel),
        axisLabel: {color: text, width: labelW - 12, overflow: "truncate", fontSize: 11}, axisTick: {show: false},
        splitLine: {show: true, lineStyle: {color: grid}}},
      dataZoom: [{type: "inside", xAxisIndex: 0, filterMode: "none", minSpan: 0.0000001},
        {type: "slider", xAxisIndex: 0, filterMode: "none", height: 22, bottom: 12, labelFormatter: v => fmt(v)}],
      series: [{type: "custom", renderItem: renderItem, encode: {x: [1, 2], y: 0},
        data: items.map(i => [i.lane, i.ts, i.ts + i.dur]), clip: true}],
    };
    if (!chart) {
      chart = echarts.init(chartEl, dark() ? "dark" : null, {renderer: "canvas"});
      chart.on("datazoom", onZoom);
      chart.on("click", p => select(items[p.dataIndex]));
      window.addEventListener("resize", () => { chart.resize(); });
    }
    if (keepZoom && range) { option.dataZoom[0].startValue = option.dataZoom[1].startValue = range[0];
      option.dataZoom[0].endValue = option.dataZoom[1].endValue = range[1]; }
    chart.setOption(option, {replaceMerge: ["series", "yAxis"]});
    chart.resize();
  }

  function tooltip(item) {
    if (!item) return "";
    const e = s => String(s).replace(/[&<>"]/g, c => ({"&": "&amp;", "<": "&lt;", ">": "&gt;", '"': "&quot;"}[c]));
    let out = "<strong>" + e(item.name).slice(0, 160) + "</strong><br>" + e(item.kind) + " · " + fmt(item.dur) + " at +" + fmt(item.ts);
    if (item.count > 1) out += "<br>" + item.count + " events merged, busy " + fmt(item.busy_ns);
    if (item.value !== undefined) out += "<br>value " + item.value;
    if (item.artifact) out += "<br>" + e(item.artifact) + ":" + e(item.loc || "");
    return out;
  }

  function onZoom() {
    const axis = chart.getModel().getComponent("xAxis", 0).axis;
    const extent = axis.scale.getExtent();
    range = [extent[0], extent[1]];
    clearTimeout(timer);
    timer = setTimeout(async () => { if (await fetchView(range[0], range[1])) draw(true); }, 180);
  }

  function zoomTo(start, end) {
    range = [Math.max(0, start), Math.min(span, end)];
    chart.dispatchAction({type: "dataZoom", startValue: range[0], endValue: range[1]});
  }

  async function select(item) {
    if (!item) return;
    highlight = item.row !== undefined ? item.row : null;
    chart.setOption({series: [{data: items.map(i => [i.lane, i.ts, i.ts + i.dur])}]});
    detail.replaceChildren();
    const head = document.createElement("p");
    head.textContent = item.name + " · " + item.kind + " · " + fmt(item.dur) + " at +" + fmt(item.ts) +
      (item.count > 1 ? " · " + item.count + " events (zoom in to see them)" : "") +
      (item.artifact ? " · " + item.artifact + ":" + item.loc : "");
    head.className = "selected-event";
    detail.append(head);
    if (item.ref && item.kind === "finding") {
      const link = document.createElement("a"); link.href = "#finding-" + item.ref; link.textContent = "Read " + item.ref;
      detail.append(link);
    }
    const line = /^line (\d+)$/.exec(item.loc || "");
    if (line) await showLines(item.artifact, +line[1]);
  }

  async function showLines(artifact, line) {
    const response = await fetch(linesUrl + "?" + query({artifact: artifact, line: line, context: 8}), {credentials: "same-origin"});
    if (!response.ok) return;
    const body = await response.json();
    const pre = document.createElement("pre");
    pre.className = "log-context";
    pre.setAttribute("aria-label", artifact + " around line " + line);
    for (const l of body.lines) {
      const row = document.createElement("span");
      row.textContent = String(l.line).padStart(6) + "  " + l.text + "\n";
      if (l.line === line) row.className = "hit";
      pre.append(row);
    }
    detail.append(pre);
  }

  async function focusEvidence(button) {
    const body = await fetchView(undefined, undefined, {artifact: button.dataset.artifact, loc: button.dataset.loc, max_items: 1});
    card.scrollIntoView({behavior: "smooth", block: "start"});
    if (!body || !body.found) {
      status.textContent = "that evidence has no timed event on the timeline";
      if (button.dataset.ts) { const at = Number(BigInt(button.dataset.ts) - origin); await around(at, 50000, null); }
      return;
    }
    const f = body.found;
    await around(f.ts, f.dur, f.row);
    const hit = items.find(i => i.row === f.row);
    if (hit) await select(hit);
  }

  async function around(ts, dur, row) {
    const pad = Math.max(dur * 0.5, 20000);  // the event fills most of the view
    const start = Math.max(0, ts - pad), end = ts + dur + pad;
    range = [start, end];
    highlight = row;
    if (await fetchView(start, end)) { draw(true); chart.dispatchAction({type: "dataZoom", startValue: start, endValue: end}); }
  }

  function visible() { return range || [0, span]; }

  function exportUrlFor() {
    const [s, e] = visible();
    return exportUrl + "?" + query({start_ns: absolute(s), end_ns: absolute(e)});
  }

  async function openInPerfetto() {
    // Perfetto UI's postMessage protocol: wait for PONG, then hand over the buffer.
    const response = await fetch(exportUrlFor(), {credentials: "same-origin"});
    const buffer = await response.arrayBuffer();
    const ui = window.open("https://ui.perfetto.dev");
    if (!ui) { status.textContent = "the browser blocked the Perfetto window: use Export instead"; return; }
    const ping = setInterval(() => ui.postMessage("PING", "https://ui.perfetto.dev"), 250);
    window.addEventListener("message", function onPong(event) {
      if (event.source !== ui || event.data !== "PONG") return;
      clearInterval(ping); window.removeEventListener("message", onPong);
      ui.postMessage({perfetto: {buffer: buffer, title: document.title, fileName: "tracedoc-selection.json"}}, "https://ui.perfetto.dev");
    });
    setTimeout(() => clearInterval(ping), 30000);
  }

  card.querySelector("[data-act=zoom-in]").addEventListener("click", () => { const [s, e] = visible(); const q = (e - s) / 4; zoomTo(s + q, e - q); });
  card.querySelector("[data-act=zoom-out]").addEventListener("click", () => { const [s, e] = visible(); const q = (e - s) / 2; zoomTo(s - q, e + q); });
  card.querySelector("[data-act=reset]").addEventListener("click", () => zoomTo(0, span));
  card.querySelector("[data-act=export]").addEventListener("click", () => { window.location.href = exportUrlFor(); });
  card.querySelector("[data-act=perfetto]").addEventListener("click", openInPerfetto);
  document.querySelectorAll("button.evidence-link").forEach(b => b.addEventListener("click", () => focusEvidence(b)));
  window.matchMedia("(prefers-color-scheme: dark)").addEventListener("change", () => { chart.dispose(); chart = null; draw(true); });
  // for tests and people with the console open
  window.tracedocTimeline = {items: () => items, lanes: () => lanes, range: () => visible(), highlight: () => highlight,
    axisLabel: (ns, index) => fmtAxis(ns, index)};
  fetchView().then(body => { if (body) draw(false); });
})();
