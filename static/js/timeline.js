// The trace page's zoomable timeline (Apache ECharts, vendored): wheel or drag to zoom and pan;
// host calls are drawn one lane per call depth under their thread (a flame chart, from the API);
// each zoom asks the timeline API for the visible range, which answers at most max_items items
// (merged spans where a lane holds more): a click on a merged span zooms into it. Evidence
// buttons land on their event; log evidence shows its lines in context. Search, keyboard,
// launch arrows, area selection and the Perfetto hand-off are the timeline_*.js files, which
// plug in through window.tracedocTimeline (hooks: view, draw, series, outline).
(function () {
  "use strict";
  const card = document.getElementById("timeline");
  if (!card || !window.echarts) return;
  const api = card.dataset.api, linesUrl = card.dataset.lines;
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
  const hooks = {view: [], draw: [], series: [], outline: []};
  let origin = 0n, span = 1, lanes = [], items = [], highlight = null, chart = null, range = null, timer = null;

  function fmt(ns) {
    const a = Math.abs(ns);
    if (a >= 1e9) return (ns / 1e9).toFixed(3) + " s";
    if (a >= 1e6) return (ns / 1e6).toFixed(3) + " ms";
    if (a >= 1e3) return (ns / 1e3).toFixed(2) + " µs";
    return Math.round(ns) + " ns";
  }
  // as many decimals as a view `width` ns wide needs for ticks a tenth of it apart to differ
  function digitsFor(unit, width) { return Math.min(9, Math.max(0, Math.ceil(Math.log10(unit / Math.max(width / 10, 1))))); }
  function offsetText(ns, width) {
    const a = Math.abs(ns), unit = a >= 1e9 ? [1e9, " s"] : a >= 1e6 ? [1e6, " ms"] : a >= 1e3 ? [1e3, " µs"] : [1, " ns"];
    return (ns < 0 ? "−" : "+") + (a / unit[0]).toFixed(digitsFor(unit[0], width)) + unit[1];
  }
  // axis ticks: wall-clock time (UTC) where the trace is on the wall clock, else the offset from its
  // start; as many decimals as the visible width needs, so ticks 2 µs apart differ
  const WALL_CLOCK_FROM = 946684800000000000n;  // 2000-01-01: earlier origins count from a boot or a start
  const onWallClock = () => origin >= WALL_CLOCK_FROM;
  function clock(ns, width, withDay) {
    const t = origin + BigInt(Math.round(ns)), iso = new Date(Number(t / 1000000000n) * 1000).toISOString();
    const digits = digitsFor(1e9, width);
    const text = iso.slice(11, 19) + (digits ? "." + (t % 1000000000n).toString().padStart(9, "0").slice(0, digits) : "");
    return withDay ? iso.slice(0, 10) + " " + text + " UTC" : text;
  }
  function fmtAxis(ns, index) {
    const [s, e] = visible();
    if (onWallClock()) return clock(ns, e - s, index === 0);
    return offsetText(ns, e - s);
  }
  // the pointer's place: its offset from the trace's start (and the clock time), finer than the ticks
  function hoverLabel(ns) {
    const [s, e] = visible(), fine = (e - s) / 100;
    return offsetText(ns, fine) + " from start" + (onWallClock() ? " · " + clock(ns, fine, false) : "");
  }
  // a phone has room for the lane's own name only (stream 7, thread 425, ↳ depth 2)
  function laneLabel(lane) {
    if (!phone()) return lane.label;
    return lane.depth ? "↳ depth " + lane.depth : lane.path[lane.path.length - 1];
  }
  function absolute(offset) { return (origin + BigInt(Math.round(offset))).toString(); }
  function query(params) { return new URLSearchParams(params).toString(); }
  function say(text) { status.textContent = text; }

  async function fetchView(start, end, extra) {
    const params = {max_items: phone() ? 1200 : 3000};
    if (start !== undefined) { params.start_ns = absolute(Math.max(start, 0)); params.end_ns = absolute(Math.max(end, start + 1)); }
    Object.assign(params, extra || {});
    say("loading…");
    const response = await fetch(api + "?" + query(params), {credentials: "same-origin"});
    if (!response.ok) { say("could not load the timeline (" + response.status + ")"); return null; }
    const body = await response.json();
    origin = BigInt(body.origin); span = Math.max(body.trace_end_ns - body.origin_ns, 1);
    lanes = body.lanes; items = body.items;
    const day = onWallClock() ? new Date(Number(origin / 1000000000n) * 1000).toISOString().slice(0, 10) + " UTC · " : "";
    // files the report names whose events are not stored: their lanes are absent, and the page says so
    say(day + items.length + " items" + (body.merged ? " (merged where dense: click one, or zoom in, for single events)" : "") +
        (body.message ? " · " + body.message : ""));
    hooks.view.forEach(fn => fn(items, lanes));
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
    const marked = !selected && hooks.outline.some(fn => fn(item));   // a search match
    const busy = item.count > 1 && item.dur > 0 ? Math.max(0.35, Math.min(1, item.busy_ns / item.dur)) : 0.9;
    const stroke = selected ? (dark() ? "#fde047" : "#111827") : marked ? (dark() ? "#fde047" : "#a16207") : null;
    const rect = {type: "rect", shape: {x: x0, y: top, width: w, height: h},
      style: {fill: fill, opacity: item.kind === "finding" || item.kind === "violation" ? 0.55 : busy,
        stroke: stroke, lineWidth: selected ? 3 : marked ? 2 : 0}};
    // a span wide enough for words carries its name, as in a flame chart (cut to the visible part)
    const box = params.coordSys, left = Math.max(x0, box.x) + 3, room = Math.min(x0 + w, box.x + box.width) - left - 3;
    const chars = Math.floor(room / 6.5);
    if (chars < 4) return rect;
    const name = (item.count > 1 ? item.count + "× " : "") + item.name;
    return {type: "group", children: [rect, {type: "text", silent: true, style: {
      text: name.length > chars ? name.slice(0, chars - 1) + "…" : name, x: left, y: top + h / 2,
      verticalAlign: "middle", fill: "#ffffff", font: "11px sans-serif"}}]};
  }

  function series() {
    return [{id: "events", type: "custom", renderItem: renderItem, encode: {x: [1, 2], y: 0},
      data: items.map(i => [i.lane, i.ts, i.ts + i.dur]), clip: true}, ...hooks.series.map(fn => fn())];
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
      tooltip: {confine: true, formatter: p => p.seriesId === "events" ? tooltip(items[p.dataIndex]) : ""},
      xAxis: {type: "value", min: 0, max: span, axisLabel: {color: text, formatter: (v, i) => fmtAxis(v, i), hideOverlap: true},
        splitLine: {lineStyle: {color: grid}},
        axisPointer: {show: true, snap: false, triggerTooltip: false, lineStyle: {color: dark() ? "#9ca3af" : "#6b7280", type: "dashed"},
          label: {formatter: p => hoverLabel(p.value), backgroundColor: dark() ? "#374151" : "#1f2937", color: "#ffffff"}}},
      yAxis: {type: "category", inverse: true, data: lanes.map(laneLabel),
        axisLabel: {color: text, width: labelW - 12, overflow: "truncate", fontSize: 11}, axisTick: {show: false},
        splitLine: {show: true, lineStyle: {color: grid}}},
      dataZoom: [{type: "inside", xAxisIndex: 0, filterMode: "none", minSpan: 0.0000001},
        {type: "slider", xAxisIndex: 0, filterMode: "none", height: 22, bottom: 12, labelFormatter: v => fmt(v)}],
      series: series(),
    };
    if (!chart) {
      chart = echarts.init(chartEl, dark() ? "dark" : null, {renderer: "canvas"});
      chart.on("datazoom", onZoom);
      chart.on("click", p => { if (p.seriesId === "events") clicked(items[p.dataIndex]); });
      window.addEventListener("resize", () => { chart.resize(); });
    }
    if (keepZoom && range) { option.dataZoom[0].startValue = option.dataZoom[1].startValue = range[0];
      option.dataZoom[0].endValue = option.dataZoom[1].endValue = range[1]; }
    chart.setOption(option, {replaceMerge: ["series", "yAxis"]});
    chart.resize();
    hooks.draw.forEach(fn => fn());
  }

  // the series again (a new highlight, search matches, arrows on or off), the rest as it is
  function redraw() { if (chart) chart.setOption({series: series()}, {replaceMerge: ["series"]}); }

  function tooltip(item) {
    if (!item) return "";
    const e = s => String(s).replace(/[&<>"]/g, c => ({"&": "&amp;", "<": "&lt;", ">": "&gt;", '"': "&quot;"}[c]));
    let out = "<strong>" + e(item.name).slice(0, 160) + "</strong><br>" + e(item.kind) + " · " + fmt(item.dur) + " at " +
      offsetText(item.ts, Math.max(item.dur, 1000)) + (onWallClock() ? " (" + clock(item.ts, Math.max(item.dur, 1000), false) + ")" : "");
    if (item.count > 1) out += "<br>" + item.count + " events merged, busy " + fmt(item.busy_ns) + " · click to zoom in";
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
    const width = Math.max(end - start, 2);
    start = Math.max(0, Math.min(start, span - width));
    range = [start, Math.min(span, start + width)];
    chart.dispatchAction({type: "dataZoom", startValue: range[0], endValue: range[1]});
  }

  // a merged span opens into its events; a single event is selected
  function clicked(item) {
    if (!item) return;
    if (item.count > 1 && item.dur > 0) { const pad = item.dur * 0.05; zoomTo(item.ts - pad, item.ts + item.dur + pad); return; }
    select(item);
  }

  async function select(item) {
    if (!item) return;
    highlight = item.row !== undefined ? item.row : null;
    redraw();
    detail.replaceChildren();
    const head = document.createElement("p");
    head.textContent = item.name + " · " + item.kind + " · " + fmt(item.dur) + " at " + offsetText(item.ts, Math.max(item.dur, 1000)) +
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

  // `place`: a button's dataset or a link's query (artifact, loc, ts, dur): the event the file and
  // location name, else the time
  async function focusEvidence(place) {
    const body = place.artifact && place.loc ? await fetchView(undefined, undefined, {artifact: place.artifact, loc: place.loc, max_items: 1}) : null;
    card.scrollIntoView({behavior: "smooth", block: "start"});
    if (!body || !body.found) {
      if (place.artifact && place.loc) say("that evidence has no timed event on the timeline");
      if (/^\d+$/.test(place.ts || "")) { const at = Number(BigInt(place.ts) - origin); await around(at, Number(place.dur) || 50000, null); }
      return;
    }
    const f = body.found;
    await around(f.ts, f.dur, f.row);
    const hit = items.find(i => i.row === f.row);
    if (hit) await select(hit);
  }

  // the event (ns after the origin) fills most of the view, highlighted; resolves once drawn
  async function around(ts, dur, row) {
    const pad = Math.max(dur * 0.5, 20000);
    const start = Math.max(0, ts - pad), end = ts + dur + pad;
    range = [start, end];
    highlight = row;
    clearTimeout(timer);
    if (await fetchView(start, end)) { draw(true); chart.dispatchAction({type: "dataZoom", startValue: start, endValue: end}); clearTimeout(timer); }
    return items.find(i => row !== null && i.row === row) || null;
  }

  function visible() { return range || [0, span]; }

  card.querySelector("[data-act=zoom-in]").addEventListener("click", () => { const [s, e] = visible(); const q = (e - s) / 4; zoomTo(s + q, e - q); });
  card.querySelector("[data-act=zoom-out]").addEventListener("click", () => { const [s, e] = visible(); const q = (e - s) / 2; zoomTo(s - q, e + q); });
  card.querySelector("[data-act=reset]").addEventListener("click", () => zoomTo(0, span));
  document.querySelectorAll("button.evidence-link").forEach(b => b.addEventListener("click", () => focusEvidence(b.dataset)));
  // a link from elsewhere (the rule editor's test run) names the event or time in the query:
  // ?artifact=&loc=&ts=&dur=#timeline opens the timeline there, as the evidence buttons do
  function linkedPlace() {
    const q = new URLSearchParams(window.location.search);
    const place = {artifact: q.get("artifact") || "", loc: q.get("loc") || "", ts: q.get("ts") || "", dur: q.get("dur") || ""};
    return (place.artifact && place.loc) || place.ts ? place : null;
  }
  window.matchMedia("(prefers-color-scheme: dark)").addEventListener("change", () => { chart.dispose(); chart = null; draw(true); });
  // the plug-ins' way in, and a handle for tests and people with the console open
  window.tracedocTimeline = {
    card: card, items: () => items, lanes: () => lanes, range: () => visible(), span: () => span, highlight: () => highlight,
    axisLabel: (ns, index) => fmtAxis(ns, index), hoverLabel: ns => hoverLabel(ns), chart: () => chart, absolute: absolute,
    fmt: fmt, offsetText: offsetText, clock: clock, onWallClock: onWallClock, say: say, zoomTo: zoomTo, around: around,
    select: select, redraw: redraw, phone: phone, dark: dark, laneHeight: LANE_H, hooks: hooks,
    // where an item is drawn, in the page's CSS pixels (its middle)
    pixelOf: item => {
      const [x, y] = chart.convertToPixel({xAxisIndex: 0, yAxisIndex: 0}, [item.ts + item.dur / 2, item.lane]);
      const box = chartEl.getBoundingClientRect();
      return [box.left + x, box.top + y];
    },
  };
  // after the defer'd plug-ins have registered their hooks
  const start = () => fetchView().then(body => {
    if (!body) return;
    draw(false);
    const place = linkedPlace();
    if (place) focusEvidence(place);
  });
  if (document.readyState === "loading") document.addEventListener("DOMContentLoaded", start); else start();
})();
