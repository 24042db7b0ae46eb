// Flow arrows on the timeline: from a CPU launch (cudaLaunchKernel, cudaMemcpyAsync, …) to the
// GPU work it enqueued, when both are drawn as single events (the profiler's correlation id,
// within one file, pairs them). The arrow of the selected event is drawn bold.
(function () {
  "use strict";
  const T = window.tracedocTimeline;
  if (!T) return;
  const toggle = T.card.querySelector("[data-act=flows]");
  const MAX_ARROWS = 400;
  const HOST_KINDS = new Set(["runtime", "driver"]);
  let flows = [];

  function pair(items, lanes) {
    const launches = new Map();
    for (const item of items) {
      if (item.corr !== undefined && HOST_KINDS.has(item.kind) && lanes[item.lane].group === "cpu") {
        launches.set((item.artifact || "") + "#" + item.corr, item);
      }
    }
    const out = [];
    for (const item of items) {
      if (item.corr === undefined || lanes[item.lane].group !== "gpu") continue;
      const from = launches.get((item.artifact || "") + "#" + item.corr);
      if (from) out.push({from: from, to: item});
      if (out.length >= MAX_ARROWS) break;
    }
    return out;
  }

  function renderFlow(params, api) {
    const f = flows[params.dataIndex], h = T.laneHeight / 2 - 3;
    // from where the launch is drawn: its start, or the view's left edge when it began before it
    const [start, yFrom] = api.coord([f.from.ts, f.from.lane]), x1 = Math.max(start, params.coordSys.x);
    const [x2, yTo] = api.coord([f.to.ts, f.to.lane]);
    const up = yTo < yFrom, y1 = yFrom + (up ? -h : h), y2 = yTo + (up ? h : -h);
    const bold = T.highlight() !== null && (f.from.row === T.highlight() || f.to.row === T.highlight());
    const color = T.dark() ? "#e5e7eb" : "#111827", mid = (y1 + y2) / 2, tip = up ? 6 : -6;
    return {type: "group", silent: true, children: [
      {type: "bezierCurve", shape: {x1: x1, y1: y1, x2: x2, y2: y2 + tip, cpx1: x1, cpy1: mid, cpx2: x2, cpy2: mid},
        style: {stroke: color, lineWidth: bold ? 2.5 : 1, opacity: bold ? 1 : 0.45, fill: null}},
      {type: "polygon", shape: {points: [[x2, y2], [x2 - 4, y2 + tip], [x2 + 4, y2 + tip]]},
        style: {fill: color, opacity: bold ? 1 : 0.7}}]};
  }

  T.hooks.view.push((items, lanes) => { flows = toggle.checked ? pair(items, lanes) : []; });
  T.hooks.series.push(() => ({id: "flows", type: "custom", renderItem: renderFlow, silent: true, clip: true, z: 5,
    encode: {x: [0, 1], y: [2, 3]}, data: flows.map(f => [f.from.ts, f.to.ts, f.from.lane, f.to.lane])}));
  toggle.addEventListener("change", () => { flows = toggle.checked ? pair(T.items(), T.lanes()) : []; T.redraw(); });
  T.flows = () => flows.map(f => ({from: f.from.row, to: f.to.row, corr: f.to.corr}));
})();
