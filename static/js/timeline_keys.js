// Timeline keyboard, as in Perfetto: W / S zoom in / out (around the pointer when it is over the
// chart), A / D pan left / right. Not while typing (an input, a textarea, an editor), not with
// Ctrl, Alt or Cmd, and only while the timeline is on screen.
(function () {
  "use strict";
  const T = window.tracedocTimeline;
  if (!T) return;
  const chartEl = T.card.querySelector(".timeline-chart");
  const ZOOM = 0.6, PAN = 0.25;
  let pointerX = null;   // CSS px inside the chart, null when the pointer is elsewhere

  chartEl.addEventListener("mousemove", event => { pointerX = event.clientX - chartEl.getBoundingClientRect().left; });
  chartEl.addEventListener("mouseleave", () => { pointerX = null; });

  function typing(target) {
    return target instanceof Element && (target.closest("input, textarea, select, [contenteditable]:not([contenteditable=false])") !== null);
  }
  function onScreen() {
    const r = T.card.getBoundingClientRect();
    return r.bottom > 0 && r.top < window.innerHeight;
  }
  // the pointer's time, or the middle of the view
  function anchor(s, e) {
    const chart = T.chart();
    if (pointerX === null || !chart) return (s + e) / 2;
    const at = chart.convertFromPixel({xAxisIndex: 0}, pointerX);
    return at >= s && at <= e ? at : (s + e) / 2;
  }

  document.addEventListener("keydown", event => {
    if (event.ctrlKey || event.metaKey || event.altKey || typing(event.target) || !onScreen() || !T.chart()) return;
    const key = event.key.toLowerCase();
    if (!"wasd".includes(key) || key.length !== 1) return;
    const [s, e] = T.range(), width = e - s;
    if (key === "w" || key === "s") {
      const at = anchor(s, e), f = key === "w" ? ZOOM : 1 / ZOOM;
      T.zoomTo(at - (at - s) * f, at + (e - at) * f);
    } else {
      const shift = (key === "a" ? -1 : 1) * width * PAN;
      T.zoomTo(s + shift, e + shift);
    }
    event.preventDefault();
  });
})();
