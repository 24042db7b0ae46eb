"""Flying the timeline of the corpus's big trace (h200/healthy_decode: a 24.7 MB Kineto JSON,
~60k events) in a real browser, desktop 1440x900 and phone 390x844, light and dark (issue 32):
one kernel is reached from the whole-trace view in at most 5 actions, by search (type, Enter)
and by clicking merged blocks; the per-kernel table's "Find on timeline" lands on that kernel;
launch -> kernel arrows join the pairs the profiler's correlation ids make; W/S/A/D zoom and
pan (not while typing); Shift+drag (or "Select range" on a phone) selects a range whose totals
are the server's; "Open in Perfetto" sends only that range, with its download progress shown.
Screenshots land in test-artifacts/browser/."""
import json

import numpy as np
import pytest

from diagnosis.timeline_store import index_for
from diagnosis.engine.timeline.totals import totals
from tests.support.browser_wait import wait_for_js
from tests.support.diagnosed_traces import diagnosed
from tests.support.fixtures import SHOTS
from tests.support.phone_layout import assert_fits
from tests.support.trace_page import logged_in_page

pytestmark = [pytest.mark.browser, pytest.mark.timeout(400)]

SIZES = {"desktop": {"viewport": {"width": 1440, "height": 900}},
         "phone": {"viewport": {"width": 390, "height": 844}, "is_mobile": True, "has_touch": True}}
MAX_ACTIONS = 5
T = "window.tracedocTimeline"


@pytest.fixture
def big_trace(infra, alice, no_worker, corpus_dir):
    trace = diagnosed(infra, alice, "healthy_decode")
    # built before Playwright's loop makes the database unusable in this thread; the live
    # server's thread finds it in the same process cache
    return trace, index_for(trace)


def longest_kernel(index) -> dict:
    kernel_code = index.kinds.index("kernel")
    rows = np.concatenate([np.arange(*index.lane_slice(lane.id).indices(len(index.ts)))
                           for lane in index.lanes if lane.group == "gpu"])
    rows = rows[index.kind[rows] == kernel_code]
    i = int(rows[np.argmax(index.end[rows] - index.ts[rows])])
    lane = int(np.searchsorted(index.offsets, i, side="right") - 1)
    return {"ts": int(index.ts[i] - index.start_ns), "dur": int(index.end[i] - index.ts[i]), "row": int(index.row[i]),
            "lane": lane, "name": str(index.names[index.name[i]])}


def open_page(browser, live_server, trace, size, scheme):
    page = logged_in_page(browser, live_server, trace, color_scheme=scheme, **SIZES[size])
    page.locator("#timeline").scroll_into_view_if_needed()
    return page


def timeline_answer(page):
    return page.expect_response(lambda r: "/timeline/?" in r.url and "start_ns" in r.url)


def shown_single(page, row: int) -> dict | None:
    hits = page.evaluate(f"() => {T}.items().filter(i => i.row === {row} && i.count === 1)")
    return hits[0] if hits else None


@pytest.mark.parametrize("size,scheme", [("desktop", "light"), ("phone", "dark")])
def test_one_kernel_in_at_most_five_actions(big_trace, live_server, browser, size, scheme):
    trace, index = big_trace
    SHOTS.mkdir(parents=True, exist_ok=True)
    target = longest_kernel(index)
    page = open_page(browser, live_server, trace, size, scheme)
    whole = page.evaluate(f"() => {T}.range()")

    # 1) by clicking merged blocks: each click opens the block that holds the kernel
    clicks = 0
    while not shown_single(page, target["row"]):
        holder = page.evaluate(f"""() => {T}.items().filter(i => i.lane === {target['lane']} && i.count > 1 &&
            i.ts <= {target['ts']} && i.ts + i.dur >= {target['ts'] + target['dur']}).sort((a, b) => a.dur - b.dur)[0]""")
        assert holder, "no merged block holds the kernel and it is not drawn alone"
        x, y = page.evaluate(f"() => {T}.pixelOf({json.dumps(holder)})")
        with timeline_answer(page):
            page.mouse.click(x, y)
        page.wait_for_timeout(250)
        clicks += 1
        assert clicks <= MAX_ACTIONS, f"the kernel is still merged after {clicks} clicks"
    narrowed = page.evaluate(f"() => {T}.range()")
    print(f"{size}: the longest kernel drawn alone after {clicks} clicks, view {whole[1] - whole[0]:.0f} -> "
          f"{narrowed[1] - narrowed[0]:.0f} ns")
    assert narrowed[1] - narrowed[0] < (whole[1] - whole[0]) / 100
    page.screenshot(path=str(SHOTS / f"timeline_fly_clicks_{size}_{scheme}.png"), full_page=False)

    # the launch arrows in this view: each joins a launch call and GPU work of one correlation id
    flows = page.evaluate(f"() => {T}.flows()")
    assert flows, "no launch -> kernel arrow in a view of single kernels"
    by_row = {int(index.row[i]): i for i in range(len(index.row)) if index.row[i] >= 0}
    for flow in flows[:50]:
        launch, work = by_row[flow["from"]], by_row[flow["to"]]
        assert index.corr[launch] == index.corr[work] == flow["corr"]
        assert index.kinds[index.kind[launch]] in ("runtime", "driver")

    # 2) by search, from the whole trace again: type part of the name, Enter (2 actions)
    page.click("[data-act=reset]")
    page.wait_for_timeout(400)
    box = page.locator(".timeline-search input")
    query = target["name"][:24]
    with page.expect_response(lambda r: "/timeline/search/" in r.url):
        box.fill(query)
    wait_for_js(page, "document.querySelector('.search-count').textContent.includes('match')")
    expected_total = int(np.isin(index.name, [c for c, n in enumerate(index.names) if query.lower() in str(n).lower()]).sum())
    assert f"{expected_total:,} match" in page.inner_text(".search-count")
    with timeline_answer(page):
        box.press("Enter")
    wait_for_js(page, f"{T}.highlight() !== null && {T}.items().some(i => i.row === {T}.highlight() && i.count === 1)")
    row = page.evaluate(f"() => {T}.highlight()")
    hit = shown_single(page, row)
    assert hit["kind"] == "kernel" and query.lower() in hit["name"].lower()
    assert page.locator(".timeline-matches button.match.current").count() == 1
    # the first match in time order: no event of that name starts before it
    named = np.isin(index.name, [c for c, n in enumerate(index.names) if query.lower() in str(n).lower()])
    assert hit["ts"] == int(index.ts[named].min() - index.start_ns)
    assert_fits(page, "trace page with search matches", SIZES[size]["viewport"]["width"])
    page.screenshot(path=str(SHOTS / f"timeline_fly_search_{size}_{scheme}.png"), full_page=False)

    # 3) the per-kernel statistics: the report's figures, and "Find on timeline" is one action
    stats = trace.report["breakdowns"]["kernels"][0]
    first = page.locator("table.kernel-stats tbody tr").first
    assert first.locator("td").nth(2).inner_text() == str(stats["top"][0]["count"])
    assert page.locator("table.kernel-types tbody tr").count() == len(stats["by_type"])
    share = stats["by_type"][0]["share_pct"]
    assert f"{share}%" in page.locator("table.kernel-types tbody tr").first.inner_text()
    first.scroll_into_view_if_needed()
    page.screenshot(path=str(SHOTS / f"timeline_fly_kernel_stats_{size}_{scheme}.png"), full_page=False)
    with timeline_answer(page):
        first.locator("[data-timeline-search]").click()
    wait_for_js(page, f"{T}.items().some(i => i.row === {T}.highlight() && i.count === 1)")
    hit = shown_single(page, page.evaluate(f"() => {T}.highlight()"))
    assert hit["name"] == stats["top"][0]["name"]


def test_keys_zoom_and_pan_but_not_while_typing(big_trace, live_server, browser):
    trace, _ = big_trace
    page = open_page(browser, live_server, trace, "desktop", "light")
    canvas = page.locator(".timeline-chart canvas").first
    box = canvas.bounding_box()
    page.mouse.move(box["x"] + box["width"] * 0.5, box["y"] + 40)

    def press(key: str) -> list[float]:
        with timeline_answer(page):
            page.keyboard.press(key)
        page.wait_for_timeout(200)
        return page.evaluate(f"() => {T}.range()")

    s0, e0 = page.evaluate(f"() => {T}.range()")
    s1, e1 = press("w")
    assert e1 - s1 == pytest.approx(0.6 * (e0 - s0), rel=0.02)
    s2, e2 = press("w")
    s3, e3 = press("d")
    assert s3 - s2 == pytest.approx(0.25 * (e2 - s2), rel=0.02) and e3 - s3 == pytest.approx(e2 - s2, rel=0.01)
    s4, e4 = press("a")
    assert s4 == pytest.approx(s2, rel=1e-6, abs=2)
    s5, e5 = press("s")
    assert e5 - s5 == pytest.approx((e4 - s4) / 0.6, rel=0.02)
    # typing a w into the search box searches; it does not zoom
    page.locator(".timeline-search input").type("w")
    page.wait_for_timeout(500)
    assert page.evaluate(f"() => {T}.range()") == [s5, e5]


@pytest.mark.parametrize("size,scheme", [("desktop", "light"), ("desktop", "dark"), ("phone", "light")])
def test_area_selection_totals_and_perfetto_range(big_trace, live_server, browser, size, scheme):
    trace, index = big_trace
    SHOTS.mkdir(parents=True, exist_ok=True)
    page = open_page(browser, live_server, trace, size, scheme)
    canvas = page.locator(".timeline-chart canvas").first
    box = canvas.bounding_box()
    grid = page.evaluate(f"() => {T}.chart().getModel().getComponent('grid', 0).coordinateSystem.getRect()")
    y = box["y"] + grid["y"] + 2 * 22 + 11   # the first GPU lane (after findings and step latency)
    x0, x1 = box["x"] + grid["x"] + grid["width"] * 0.30, box["x"] + grid["x"] + grid["width"] * 0.55
    before = page.evaluate(f"() => {T}.range()")
    if size == "phone":
        page.click("[data-act=select]")
    else:
        page.keyboard.down("Shift")
    page.mouse.move(x0, y)
    page.mouse.down()
    page.mouse.move((x0 + x1) / 2, y, steps=4)
    page.mouse.move(x1, y, steps=4)
    with page.expect_response(lambda r: "/timeline/selection/" in r.url):
        page.mouse.up()
    if size != "phone":
        page.keyboard.up("Shift")
    assert page.evaluate(f"() => {T}.range()") == before, "the drag panned the chart"
    selected = page.evaluate(f"() => {T}.selection()")
    assert selected and selected[1] > selected[0]
    wait_for_js(page, "document.querySelector('.timeline-selection table.selection-lanes') !== null")

    # the server's totals of that range, as the panel shows them
    head = page.locator(".timeline-selection .selection-head")
    start_ns, end_ns = int(head.get_attribute("data-start-ns")), int(head.get_attribute("data-end-ns"))
    assert start_ns - index.start_ns == pytest.approx(selected[0], abs=2)
    expected = totals(index, start_ns, end_ns)
    assert f"{expected.count:,} event" in head.inner_text()
    rows = page.locator(".timeline-selection table.selection-lanes tbody tr")
    assert rows.count() == len(expected.lanes)
    gpu = next(lane for lane in expected.lanes if lane.group == "gpu")
    cells = page.locator(f".timeline-selection tr[data-lane='{gpu.lane}'] td")
    assert cells.nth(1).inner_text() == f"{gpu.count:,}"
    kernels = page.locator(".timeline-selection table.selection-names").first.locator("tbody tr td.kernel-name")
    assert kernels.first.get_attribute("title") == expected.gpu_names[0].name
    assert 0 < gpu.busy_ns <= end_ns - start_ns
    assert cells.nth(3).inner_text().endswith(f"{round(100 * gpu.busy_ns / (end_ns - start_ns), 1)}%")
    assert page.locator(".timeline-shade").is_visible()
    assert_fits(page, "trace page with a selection", SIZES[size]["viewport"]["width"])
    page.locator(".timeline-stage").scroll_into_view_if_needed()
    page.screenshot(path=str(SHOTS / f"timeline_fly_selection_{size}_{scheme}.png"), full_page=False)
    page.locator(".timeline-selection").screenshot(path=str(SHOTS / f"timeline_fly_totals_{size}_{scheme}.png"))

    # Open in Perfetto: only the selection travels, with the download's progress in the status line
    page.context.route("https://ui.perfetto.dev/**", lambda route: route.fulfill(
        status=200, content_type="text/html", body=FAKE_PERFETTO))
    page.evaluate("""() => { window.__said = [];
      new MutationObserver(() => window.__said.push(document.querySelector('.timeline-status').textContent))
        .observe(document.querySelector('.timeline-status'), {childList: true, characterData: true, subtree: true}); }""")
    with page.context.expect_page() as popup_info, \
            page.expect_response(lambda r: "/timeline/export/" in r.url) as exported:
        page.click("[data-act=perfetto]")
    assert f"start_ns={start_ns}" in exported.value.url and f"end_ns={end_ns}" in exported.value.url
    popup = popup_info.value
    assert popup.evaluate("() => window.opener !== null"), "the page's COOP cut Perfetto off from its opener"
    wait_for_js(popup, "window.received !== undefined")
    received = json.loads(popup.evaluate("() => window.received"))
    assert received["otherData"]["start_ns"] == str(start_ns) and received["otherData"]["end_ns"] == str(end_ns)
    events = [e for e in received["traceEvents"] if e["ph"] == "X"]
    assert events and all(e["ts"] * 1000 + e.get("dur", 0) * 1000 >= start_ns - index.start_ns - 1 for e in events)
    wait_for_js(page, "document.querySelector('.timeline-status').textContent.startsWith('Perfetto: opened')")
    said = page.evaluate("() => window.__said")
    assert any(s.startswith("Perfetto: downloading the selection") and "MB" in s for s in said), said

    # Esc drops the selection; the panel goes
    page.keyboard.press("Escape")
    assert page.evaluate(f"() => {T}.selection()") is None
    assert not page.locator(".timeline-selection").is_visible()


# Perfetto UI's side of its postMessage protocol (perfetto.dev/docs/visualization/deep-linking-to-perfetto-ui):
# PONG to a PING, then keep what was sent
FAKE_PERFETTO = """<!doctype html><title>fake Perfetto</title><script>
window.addEventListener("message", e => {
  if (e.data === "PING") { e.source.postMessage("PONG", "*"); return; }
  if (e.data && e.data.perfetto) window.received = new TextDecoder().decode(e.data.perfetto.buffer);
});
</script>"""
