"""The timeline of the corpus's big trace (h200/healthy_decode: ~60k events, 55k host calls on
one thread) in a real browser at 1400x1000 and 390x844: wheel zoom narrows the view and stays
within the item budget, zooming to the longest kernel shows that kernel alone, host calls are
drawn as a flame chart (a call at depth 1 sits under the call it runs inside), and the phone
layout never scrolls sideways, and the finding's evidence button lands on its event with
the log line in context. Screenshots land in test-artifacts/browser/."""
import numpy as np
import pytest

from diagnosis.timeline_store import index_for
from tests.support.browser_wait import wait_for_js
from tests.support.diagnosed_traces import diagnosed
from tests.support.fixtures import SHOTS
from tests.support.phone_layout import assert_fits
from tests.support.trace_page import logged_in_page

pytestmark = [pytest.mark.browser, pytest.mark.timeout(300)]

VIEWPORTS = {"desktop": {"viewport": {"width": 1400, "height": 1000}},
             "phone": {"viewport": {"width": 390, "height": 844}, "is_mobile": True, "has_touch": True}}


def _row(index, i: int) -> dict:
    return {"ts": int(index.ts[i] - index.start_ns), "dur": int(index.end[i] - index.ts[i]), "row": int(index.row[i])}


def longest_kernel_and_a_nested_call(index) -> tuple[dict, dict, dict]:
    """From the index the page is served from: the longest kernel, and a depth-1 host call
    with the depth-0 call of its thread that contains it."""
    kernel_code = index.kinds.index("kernel")
    gpu_rows = np.concatenate([np.arange(*index.lane_slice(lane.id).indices(len(index.ts)))
                               for lane in index.lanes if lane.group == "gpu"])
    kernels = gpu_rows[index.kind[gpu_rows] == kernel_code]
    kernel = int(kernels[np.argmax(index.end[kernels] - index.ts[kernels])])
    # the thread with the most calls at depth 1 (the model's thread, not a lone profiler span)
    below = max((lane for lane in index.lanes if lane.group == "cpu" and lane.depth == 1),
                key=lambda lane: index.events_in(lane.id))
    top = next(lane for lane in index.lanes if lane.depth == 0 and lane.path == below.path)
    children = np.arange(*index.lane_slice(below.id).indices(len(index.ts)))
    child = int(children[np.argmax(index.end[children] - index.ts[children])])
    parents = np.arange(*index.lane_slice(top.id).indices(len(index.ts)))
    inside = parents[(index.ts[parents] <= index.ts[child]) & (index.end[parents] >= index.end[child])]
    assert len(inside), "a depth-1 call with no call around it on depth 0"
    return _row(index, kernel), _row(index, child), _row(index, int(inside[0]))


@pytest.fixture
def big_trace(infra, alice, no_worker, corpus_dir):
    trace = diagnosed(infra, alice, "healthy_decode")
    # built here, before Playwright's loop makes the database unusable in this thread; the
    # live server's thread finds it in the same process cache
    return trace, longest_kernel_and_a_nested_call(index_for(trace))


def zoom_to(page, start: float, end: float) -> None:
    with page.expect_response(lambda r: "/timeline/" in r.url and "start_ns" in r.url):
        page.evaluate(f"""() => echarts.getInstanceByDom(document.querySelector('.timeline-chart'))
            .dispatchAction({{type: 'dataZoom', startValue: {start}, endValue: {end}}})""")
    page.wait_for_timeout(300)


@pytest.mark.parametrize("device", sorted(VIEWPORTS))
def test_zoom_into_a_kernel_of_the_big_trace(big_trace, live_server, browser, device):
    trace, (kernel, child, parent) = big_trace
    SHOTS.mkdir(parents=True, exist_ok=True)
    page = logged_in_page(browser, live_server, trace, **VIEWPORTS[device])
    lanes = page.evaluate("() => window.tracedocTimeline.lanes()")
    depths = sorted({lane["depth"] for lane in lanes if lane["group"] == "cpu"})
    assert depths[:3] == [0, 1, 2], depths
    assert any(lane["label"].endswith("· depth 1") for lane in lanes)
    whole_items = page.evaluate("() => window.tracedocTimeline.items().length")
    budget = 1200 if device == "phone" else 3000
    assert whole_items <= budget

    # a real wheel over the chart narrows the view and asks the API for it
    whole = page.evaluate("() => window.tracedocTimeline.range()")
    canvas = page.locator(".timeline-chart canvas").first
    canvas.scroll_into_view_if_needed()  # below the fold on a phone: a wheel there reaches nothing
    box = canvas.bounding_box()
    page.mouse.move(box["x"] + box["width"] * 0.7, box["y"] + 60)
    for _ in range(4):
        with page.expect_response(lambda r: "/timeline/" in r.url and "start_ns" in r.url) as answer:
            page.mouse.wheel(0, -600)
        assert len(answer.value.json()["items"]) <= budget
    narrowed = page.evaluate("() => window.tracedocTimeline.range()")
    assert narrowed[1] - narrowed[0] < 0.9 * (whole[1] - whole[0])

    # the longest kernel, zoomed to with a margin of its own length: one item, not merged
    zoom_to(page, kernel["ts"] - kernel["dur"], kernel["ts"] + 2 * kernel["dur"])
    hit = page.evaluate(f"() => window.tracedocTimeline.items().filter(i => i.row === {kernel['row']})")
    assert hit and hit[0]["count"] == 1 and hit[0]["kind"] == "kernel"
    assert page.evaluate("() => document.scrollingElement.scrollWidth <= window.innerWidth")
    page.locator("#timeline").scroll_into_view_if_needed()
    page.screenshot(path=str(SHOTS / f"timeline_big_kernel_{device}.png"), full_page=False)

    # the flame chart: around a depth-1 call, the depth-0 call it runs inside, one lane up
    margin = max(child["dur"] // 4, 1000)
    zoom_to(page, child["ts"] - margin, child["ts"] + child["dur"] + margin)
    items = page.evaluate("() => window.tracedocTimeline.items()")
    by_row = {i["row"]: i for i in items if "row" in i}
    assert child["row"] in by_row and parent["row"] in by_row, "the call or its caller is missing"
    inner, outer = by_row[child["row"]], by_row[parent["row"]]
    assert lanes[inner["lane"]]["depth"] == 1 and lanes[outer["lane"]]["depth"] == 0
    assert lanes[inner["lane"]]["path"] == lanes[outer["lane"]]["path"]
    assert outer["ts"] <= inner["ts"] and outer["ts"] + outer["dur"] >= inner["ts"] + inner["dur"]
    assert page.evaluate("() => document.scrollingElement.scrollWidth <= window.innerWidth")
    page.screenshot(path=str(SHOTS / f"timeline_big_flame_{device}.png"), full_page=False)

    # the info finding's evidence (token_latency.jsonl line 1): lands on its event, with the line in context
    evidence = page.locator("button.evidence-link").first
    evidence.scroll_into_view_if_needed()
    with page.expect_response(lambda r: "/timeline/" in r.url and "loc=" in r.url):
        evidence.click()
    wait_for_js(page, "document.querySelector('.timeline-detail pre.log-context') !== null")
    row = page.evaluate("() => window.tracedocTimeline.highlight()")
    assert row is not None and any(i.get("row") == row for i in page.evaluate("() => window.tracedocTimeline.items()"))
    assert "token_latency.jsonl:line 1" in page.locator(".timeline-detail .selected-event").inner_text()
    assert page.locator(".timeline-detail pre.log-context .hit").count() == 1
    assert_fits(page, "trace page with a log line in context", VIEWPORTS[device]["viewport"]["width"])
    page.screenshot(path=str(SHOTS / f"timeline_big_evidence_{device}.png"), full_page=False)
