// Timeline search: the box asks the server (the page holds only a merged summary of a big
// trace) for the events whose name contains the text; matches in view are outlined, the first
// ones listed; Enter jumps to the next match (Shift+Enter the previous) and zooms to it.
// Buttons with data-timeline-search (the per-kernel table) search for their name.
(function () {
  "use strict";
  const T = window.tracedocTimeline;
  if (!T) return;
  const box = T.card.querySelector(".timeline-search input");
  const count = T.card.querySelector(".timeline-search .search-count");
  const list = T.card.querySelector(".timeline-matches");
  const url = T.card.dataset.search;
  const LISTED = 8, PAGE = 200;
  let text = "", total = 0, matches = [], names = [], current = -1, pending = null, timer = null;

  T.hooks.outline.push(item => text !== "" && item.name.toLowerCase().includes(text));

  async function load(offset) {
    const params = new URLSearchParams({q: text, offset: offset, limit: PAGE});
    const response = await fetch(url + "?" + params, {credentials: "same-origin"});
    if (!response.ok) { count.textContent = "search failed (" + response.status + ")"; return null; }
    return response.json();
  }

  function run() {
    clearTimeout(timer);
    const wanted = box.value.trim().toLowerCase();
    if (pending && wanted === text) return pending;
    text = wanted; current = -1; matches = []; total = 0; names = [];
    if (!text) { count.textContent = ""; list.replaceChildren(); list.hidden = true; T.redraw(); return Promise.resolve(); }
    count.textContent = "searching…";
    const asked = text;
    pending = load(0).then(body => {
      if (!body || asked !== text) return;
      total = body.total; matches = body.matches; names = body.names;
      show();
      T.redraw();
    }).finally(() => { if (asked === text) pending = null; });
    return pending;
  }

  function show() {
    count.textContent = total ? (current >= 0 ? "match " + (current + 1) + " of " : "") + total.toLocaleString("en") + " match" + (total === 1 ? "" : "es") +
      (current < 0 ? " · Enter jumps to the first" : "") : "no event has that name";
    list.replaceChildren();
    list.hidden = !total;
    const first = Math.max(0, Math.min(current, matches.length - LISTED));
    matches.slice(first, first + LISTED).forEach((m, i) => {
      if (!m) return;   // a page not fetched
      const li = document.createElement("li"), button = document.createElement("button");
      button.type = "button"; button.className = "link match" + (first + i === current ? " current" : "");
      const lane = T.lanes()[m.lane];
      button.textContent = m.name.slice(0, 80) + " · " + T.fmt(m.dur) + " at " + T.offsetText(m.ts, Math.max(m.dur, 1000)) +
        (lane ? " · " + lane.label : "");
      button.addEventListener("click", () => jump(first + i));
      li.append(button); list.append(li);
    });
    if (total > 1 && names.length > 1) {
      const li = document.createElement("li");
      li.className = "muted small";
      li.textContent = names.length + " names match: " + names.map(n => n.name.slice(0, 64) + " (" + n.count + ")").join(", ");
      list.append(li);
    }
  }

  async function jump(i) {
    if (!total) return;
    current = (i + total) % total;
    if (current >= matches.length || current < 0) {   // past the page held: fetch the page it is on
      const page = Math.floor(current / PAGE) * PAGE, body = await load(page);
      if (!body) return;
      matches = new Array(page).concat(body.matches);
    }
    const m = matches[current];
    show();
    const item = await T.around(m.ts, m.dur, m.row);
    if (item) await T.select(item);
    T.say("match " + (current + 1) + " of " + total.toLocaleString("en") + ": " + m.name.slice(0, 80));
  }

  box.addEventListener("input", () => { clearTimeout(timer); timer = setTimeout(run, 250); });
  box.addEventListener("keydown", async event => {
    if (event.key === "Escape") { box.value = ""; run(); return; }
    if (event.key !== "Enter") return;
    event.preventDefault();
    await run();
    await jump(event.shiftKey ? (current < 0 ? -1 : current - 1) : current + 1);
  });
  box.closest("form").addEventListener("submit", event => event.preventDefault());
  // "Find on timeline" beside a kernel's statistics: search for it, go to its first launch
  document.querySelectorAll("[data-timeline-search]").forEach(button => button.addEventListener("click", async () => {
    box.value = button.dataset.timelineSearch;
    T.card.scrollIntoView({block: "start"});
    await run();
    await jump(0);
  }));
  T.search = {run: run, jump: jump, state: () => ({text: text, total: total, current: current})};
})();
