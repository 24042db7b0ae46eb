"""The trace page in a real browser at 1400x1000 and 390x844: zoom into a kernel on the
timeline, click an evidence item and land on its event, the phone layout without sideways
page scroll, the dark theme. Screenshots land in test-artifacts/browser/."""
import re

import pytest

from tests.support.browser_wait import wait_for_js
from tests.support.diagnosed_traces import diagnosed
from tests.support.fixtures import SHOTS
from tests.support.trace_page import logged_in_page

pytestmark = [pytest.mark.browser, pytest.mark.timeout(300)]


@pytest.fixture
def graph_trace(infra, alice, no_worker, corpus_dir):
    return diagnosed(infra, alice, "cudagraph_abort")


def test_zoom_into_a_kernel_and_land_on_evidence(graph_trace, live_server, browser):
    SHOTS.mkdir(parents=True, exist_ok=True)
    page = logged_in_page(browser, live_server, graph_trace, viewport={"width": 1400, "height": 1000})
    kernel = page.evaluate("""() => window.tracedocTimeline.items().filter(i => i.kind === 'kernel')
                                  .sort((a, b) => b.dur - a.dur)[0]""")
    whole = page.evaluate("() => window.tracedocTimeline.range()")
    chart = page.locator(".timeline-chart canvas").first
    chart.scroll_into_view_if_needed()  # below the headline and the evidence, as the page orders them
    box = chart.bounding_box()
    page.mouse.move(box["x"] + box["width"] * 0.6, box["y"] + 40)
    for _ in range(6):  # wheel zoom re-fetches the visible range
        with page.expect_response(lambda r: "/timeline/" in r.url and "start_ns" in r.url):
            page.mouse.wheel(0, -600)
    narrowed = page.evaluate("() => window.tracedocTimeline.range()")
    assert narrowed[1] - narrowed[0] < 0.9 * (whole[1] - whole[0])
    # zoom to the kernel with the API's own range: it comes back alone, not merged
    page.click("[data-act=reset]")
    with page.expect_response(lambda r: "/timeline/" in r.url and "start_ns" in r.url):
        page.evaluate(f"""() => echarts.getInstanceByDom(document.querySelector('.timeline-chart'))
            .dispatchAction({{type: 'dataZoom', startValue: {kernel['ts']}, endValue: {kernel['ts'] + kernel['dur']}}})""")
    page.wait_for_timeout(300)
    single = page.evaluate(f"() => window.tracedocTimeline.items().filter(i => i.row === {kernel['row']})")
    assert single and single[0]["count"] == 1
    page.screenshot(path=str(SHOTS / "timeline_kernel.png"), full_page=False)
    # the axis reads wall-clock time (UTC), the day in the status line
    assert re.match(r"^\d{4}-\d\d-\d\d UTC · ", page.inner_text(".timeline-status"))
    assert re.fullmatch(r"\d{4}-\d\d-\d\d \d\d:\d\d:\d\d(\.\d+)? UTC",
                        page.evaluate("() => window.tracedocTimeline.axisLabel(0, 0)"))
    assert re.fullmatch(r"\d\d:\d\d:\d\d(\.\d+)?", page.evaluate("() => window.tracedocTimeline.axisLabel(1000, 1)"))

    evidence = page.locator("button.evidence-link").first
    evidence.scroll_into_view_if_needed()
    with page.expect_response(lambda r: "/timeline/" in r.url and "loc=" in r.url):
        evidence.click()
    wait_for_js(page, "document.querySelector('.timeline-detail').innerText.includes('traceEvents[10]')")
    row = page.evaluate("() => window.tracedocTimeline.highlight()")
    assert any(i["row"] == row for i in page.evaluate("() => window.tracedocTimeline.items()") if "row" in i)
    page.screenshot(path=str(SHOTS / "timeline_evidence.png"), full_page=False)


@pytest.mark.parametrize("scheme", ["light", "dark"])
def test_phone_layout_has_no_sideways_scroll(graph_trace, live_server, browser, scheme):
    page = logged_in_page(browser, live_server, graph_trace, viewport={"width": 390, "height": 844},
                          color_scheme=scheme, is_mobile=True, has_touch=True)
    assert page.evaluate("() => document.scrollingElement.scrollWidth <= window.innerWidth"), \
        page.evaluate("() => document.scrollingElement.scrollWidth")
    assert not page.locator("#site-nav").is_visible()
    page.click(".nav-toggle")
    assert page.locator("#site-nav").is_visible()
    background = page.evaluate("() => getComputedStyle(document.body).backgroundColor")
    assert (background == "rgb(15, 17, 21)") == (scheme == "dark")
    chart_width = page.locator(".timeline-chart").bounding_box()["width"]
    assert chart_width > 300
    page.screenshot(path=str(SHOTS / f"trace_phone_{scheme}.png"), full_page=True)
