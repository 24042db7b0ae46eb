// HTA-style breakdown charts on the trace page, from the report's `breakdowns` (json_script).
(function () {
  "use strict";
  const data = document.getElementById("breakdowns-data");
  if (!data || !window.echarts) return;
  const b = JSON.parse(data.textContent);
  const dark = window.matchMedia("(prefers-color-scheme: dark)").matches;
  const text = dark ? "#e5e7eb" : "#1f2937";
  const PARTS = [["compute", "#2f6fdb"], ["communication", "#7c3aed"], ["memory", "#c2410c"], ["other", "#64748b"], ["idle", "#d1d5db"]];
  const ms = ns => Math.round(ns / 1e4) / 100;
  const base = {animation: false, textStyle: {color: text}, tooltip: {trigger: "axis", axisPointer: {type: "shadow"}, confine: true},
    legend: {textStyle: {color: text}, top: 0}, grid: {left: 8, right: 16, top: 32, bottom: 8, containLabel: true}};
  function chart(name, option) {
    const el = document.querySelector(`.bd-chart[data-chart=${name}]`);
    if (!el) return;
    const c = echarts.init(el, dark ? "dark" : null);
    c.setOption(Object.assign({}, base, option, {backgroundColor: "transparent"}));
    window.addEventListener("resize", () => c.resize());
  }
  const label = d => d.artifact.slice(0, 18) + " GPU " + d.device;
  chart("temporal", {
    xAxis: {type: "value", max: 100, axisLabel: {formatter: "{value}%", color: text}},
    yAxis: {type: "category", data: b.temporal.map(label), axisLabel: {color: text}},
    series: PARTS.map(([p, color]) => ({name: p, type: "bar", stack: "t", itemStyle: {color: color},
      data: b.temporal.map(d => d[p + "_pct"])})),
  });
  const idle = b.idle_time.slice(0, 12);
  chart("idle", {
    xAxis: {type: "value", axisLabel: {color: text}},
    yAxis: {type: "category", data: idle.map(d => label(d) + " s" + d.stream), axisLabel: {color: text}},
    series: [["host_wait", "host wait", "#d97706"], ["kernel_wait", "kernel wait", "#2563eb"], ["other", "other", "#64748b"]]
      .map(([k, name, color]) => ({name: name, type: "bar", stack: "i", itemStyle: {color: color}, data: idle.map(d => ms(d[k + "_ns"]))})),
  });
  const top = (b.kernels[0] || {top: []}).top.slice(0, 10).reverse();
  chart("kernels", {
    legend: {show: false},
    xAxis: {type: "value", axisLabel: {color: text}},
    yAxis: {type: "category", data: top.map(k => k.name.length > 48 ? k.name.slice(0, 47) + "…" : k.name),
      axisLabel: {color: text, fontSize: 11}},
    series: [{name: "total ms", type: "bar", itemStyle: {color: "#2f6fdb"}, data: top.map(k => ms(k.total_ns))}],
  });
})();
