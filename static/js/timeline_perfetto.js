// Export and "Open in Perfetto": the selected range (else the visible one) as Chrome trace JSON,
// never the whole trace when a range would do. Perfetto's window opens at the click (a popup
// opened later is blocked) and loads while the range downloads with its progress shown; then
// the buffer is handed over with Perfetto's postMessage protocol (PING until PONG).
(function () {
  "use strict";
  const T = window.tracedocTimeline;
  if (!T) return;
  const PERFETTO = "https://ui.perfetto.dev";
  const exportUrl = T.card.dataset.export;
  const button = T.card.querySelector("[data-act=perfetto]");
  const bar = T.card.querySelector(".perfetto-progress");
  const range = () => (T.selection && T.selection()) || T.range();
  const mb = bytes => (bytes / 1048576).toFixed(1) + " MB";

  function urlFor() {
    const [s, e] = range();
    return exportUrl + "?" + new URLSearchParams({start_ns: T.absolute(s), end_ns: T.absolute(Math.max(e, s + 1))});
  }

  // the body, read chunk by chunk so the status line can say how far it is
  async function download(url, report) {
    const response = await fetch(url, {credentials: "same-origin"});
    if (!response.ok) throw new Error("the export failed (" + response.status + ")");
    const size = Number(response.headers.get("Content-Length")) || 0;
    const reader = response.body.getReader(), chunks = [];
    let got = 0;
    for (;;) {
      const {done, value} = await reader.read();
      if (done) break;
      chunks.push(value); got += value.length;
      report(got, size);
    }
    const buffer = new Uint8Array(got);
    let at = 0;
    for (const chunk of chunks) { buffer.set(chunk, at); at += chunk.length; }
    return buffer.buffer;
  }

  function progress(got, size) {
    bar.hidden = false;
    if (size) { bar.max = size; bar.value = got; } else bar.removeAttribute("value");
    T.say("Perfetto: downloading the " + (T.selection && T.selection() ? "selection" : "visible range") + " · " +
      mb(got) + (size ? " of " + mb(size) + " (" + Math.round(100 * got / size) + "%)" : ""));
  }

  function handOver(ui, buffer) {
    return new Promise((resolve, reject) => {
      const ping = setInterval(() => { try { ui.postMessage("PING", PERFETTO); } catch (e) { /* still loading */ } }, 250);
      const giveUp = setTimeout(() => { stop(); reject(new Error("Perfetto did not answer in 30 s: use Export instead")); }, 30000);
      function stop() { clearInterval(ping); clearTimeout(giveUp); window.removeEventListener("message", onPong); }
      function onPong(event) {
        if (event.source !== ui || event.data !== "PONG") return;
        stop();
        ui.postMessage({perfetto: {buffer: buffer, title: document.title, fileName: "tracedoc-range.json"}}, PERFETTO);
        resolve();
      }
      window.addEventListener("message", onPong);
    });
  }

  async function openInPerfetto() {
    const ui = window.open(PERFETTO);
    if (!ui) { T.say("the browser blocked the Perfetto window: use Export instead"); return; }
    button.disabled = true;
    try {
      const buffer = await download(urlFor(), progress);
      T.say("Perfetto: handing over " + mb(buffer.byteLength) + "…");
      await handOver(ui, buffer);
      T.say("Perfetto: opened " + mb(buffer.byteLength) + " in its window");
    } catch (error) {
      T.say("Perfetto: " + error.message);
    } finally {
      button.disabled = false; bar.hidden = true;
    }
  }

  T.card.querySelector("[data-act=export]").addEventListener("click", () => { window.location.href = urlFor(); });
  button.addEventListener("click", openInPerfetto);
  T.exportUrl = urlFor;
})();
