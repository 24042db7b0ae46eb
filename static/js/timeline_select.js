// Area selection on the timeline: Shift+drag (or "Select range", then drag: phones) marks a
// time range; the server's totals of it (busy time per lane, event counts, the names that
// took the most time) come back as an HTML fragment through htmx. Esc or "Clear" drops it;
// "Export" and "Open in Perfetto" then take the selection rather than the whole view.
(function () {
  "use strict";
  const T = window.tracedocTimeline;
  if (!T || !window.htmx) return;
  const stage = T.card.querySelector(".timeline-stage");
  const chartEl = T.card.querySelector(".timeline-chart");
  const shade = T.card.querySelector(".timeline-shade");
  const panel = T.card.querySelector(".timeline-selection");
  const totals = panel.querySelector(".selection-totals");
  const mode = T.card.querySelector("[data-act=select]");
  const exportButton = T.card.querySelector("[data-act=export]"), perfetto = T.card.querySelector("[data-act=perfetto]");
  let selection = null, drag = null;

  // the hand-off buttons say what they will send
  function label() {
    exportButton.textContent = selection ? "Export selection" : "Export range";
    perfetto.textContent = selection ? "Open selection in Perfetto" : "Open in Perfetto";
  }

  function grid() {
    const chart = T.chart();
    return chart && chart.getModel().getComponent("grid", 0).coordinateSystem.getRect();
  }
  const toValue = x => T.chart().convertFromPixel({xAxisIndex: 0}, x);
  const toPixel = v => T.chart().convertToPixel({xAxisIndex: 0}, v);

  // the shade over the selected range, cut to the plot area
  function place(from, to) {
    const g = grid();
    if (!g || from === null) { shade.hidden = true; return; }
    const left = Math.max(Math.min(from, to), g.x), right = Math.min(Math.max(from, to), g.x + g.width);
    shade.hidden = right <= left;
    shade.style.left = left + "px"; shade.style.width = (right - left) + "px";
    shade.style.top = g.y + "px"; shade.style.height = g.height + "px";
  }
  function follow() { if (selection) place(toPixel(selection[0]), toPixel(selection[1])); else if (!drag) place(null); }

  function within(event) {
    const g = grid(), r = chartEl.getBoundingClientRect();
    if (!g) return null;
    const x = event.clientX - r.left, y = event.clientY - r.top;
    return x >= g.x && x <= g.x + g.width && y >= g.y && y <= g.y + g.height ? x : null;
  }

  function start(event) {
    if (!(event.shiftKey || mode.getAttribute("aria-pressed") === "true") || event.button > 0) return;
    const x = within(event);
    if (x === null) return;
    drag = {from: x, to: x, id: event.pointerId};
    stage.setPointerCapture(event.pointerId);
    event.preventDefault(); event.stopPropagation();
  }
  function move(event) {
    if (!drag || event.pointerId !== drag.id) return;
    const g = grid(), r = chartEl.getBoundingClientRect();
    drag.to = Math.max(g.x, Math.min(event.clientX - r.left, g.x + g.width));
    place(drag.from, drag.to);
    event.stopPropagation();
  }
  function end(event) {
    if (!drag || event.pointerId !== drag.id) return;
    const {from, to} = drag;
    drag = null;
    event.stopPropagation();
    if (Math.abs(to - from) < 3) { clear(); return; }   // a click, not a drag
    choose(toValue(Math.min(from, to)), toValue(Math.max(from, to)));
  }
  // ECharts pans on mousedown / touchstart: not while a selection is being drawn
  function hold(event) { if (drag || event.shiftKey || mode.getAttribute("aria-pressed") === "true") event.stopPropagation(); }

  function choose(s, e) {
    selection = [Math.max(0, s), Math.min(T.span(), Math.max(e, s + 1))];
    follow(); label();
    panel.hidden = false;
    const params = new URLSearchParams({start_ns: T.absolute(selection[0]), end_ns: T.absolute(selection[1])});
    totals.textContent = "adding up the selection…";
    htmx.ajax("GET", panel.dataset.url + "?" + params, {target: totals, swap: "innerHTML"});
    T.say("selected " + T.fmt(selection[1] - selection[0]) + " · Esc clears it");
  }
  function clear() {
    selection = null; place(null); panel.hidden = true; totals.replaceChildren(); label();
  }

  stage.addEventListener("pointerdown", start, true);
  stage.addEventListener("pointermove", move, true);
  stage.addEventListener("pointerup", end, true);
  stage.addEventListener("pointercancel", () => { drag = null; follow(); }, true);
  for (const type of ["mousedown", "touchstart"]) stage.addEventListener(type, hold, true);
  mode.addEventListener("click", () => {
    const on = mode.getAttribute("aria-pressed") !== "true";
    mode.setAttribute("aria-pressed", on);
    stage.classList.toggle("selecting", on);
  });
  panel.querySelector("[data-act=zoom-selection]").addEventListener("click", () => { if (selection) T.zoomTo(selection[0], selection[1]); });
  panel.querySelector("[data-act=clear-selection]").addEventListener("click", clear);
  document.addEventListener("keydown", event => {
    if (event.key === "Escape" && selection && !(event.target instanceof HTMLInputElement)) clear();
  });
  T.hooks.draw.push(() => { const chart = T.chart(); chart.off("rendered", follow); chart.on("rendered", follow); follow(); });
  T.selection = () => selection;
  T.choose = choose;
})();
