"""The rule editor's test pane in a real browser (issue 32 item 10): its "Show on timeline"
links open the trace page's timeline at the matched row (or the finding's evidence) in a new
tab, the editor's text left as it is; the matched rows table scrolls inside its card on a
desktop and a phone, light and dark. Screenshots in test-artifacts/browser/rule_test_pane_*."""
import pytest

from tests.support.browser_wait import wait_for_js
from tests.support.fixtures import SHOTS, log_in
from tests.support.rule_editor_page import type_rule
from tests.support.rule_texts import MALLOC_IN_DECODE as RULE

pytestmark = [pytest.mark.browser, pytest.mark.timeout(300)]

SIZES = {"desktop": {"width": 1440, "height": 900}, "phone": {"width": 390, "height": 844}}

# the matched rows' scroll box, the card around it and the page's width, in CSS pixels
BOXES = """() => {
  const box = el => { const r = el.getBoundingClientRect(); return {x: r.left, w: r.width, right: r.right}; };
  const rows = document.querySelector('.selection-rows .rows-scroll');
  return {rows: box(rows), card: box(rows.closest('.card')), table: box(rows.querySelector('table')),
          scrolls: rows.scrollWidth > rows.clientWidth, overflow_x: getComputedStyle(rows).overflowX,
          page: document.scrollingElement.scrollWidth, viewport: window.innerWidth,
          links: [...document.querySelectorAll('.selection-rows a.row-on-timeline')].map(box)};
}"""

# where the timeline shows, as absolute ns strings (BigInt: the times need more than 53 bits)
SHOWN = """() => { const t = window.tracedocTimeline, [s, e] = t.range();
  return {start: t.absolute(s), end: t.absolute(e), highlight: t.highlight(),
          detail: document.querySelector('.timeline-detail').innerText}; }"""


def run_rule(page, trace) -> None:
    page.wait_for_selector(".rule-code .cm-editor")
    type_rule(page, RULE)
    page.wait_for_selector("#validation .ok")
    page.select_option("#id_trace", str(trace.pk))
    page.click("#test-form button[type=submit]")  # a trial on the worker: the pane polls it until it is done
    page.wait_for_selector("#test-result .rule-trial[data-state=queued], #test-result .rule-trial[data-state=running]")
    page.wait_for_selector("#test-result .rule-trial[data-state=done] .test-result .selection-rows", timeout=60_000)


def opened_timeline(page, link) -> dict:
    """Click `link` (a new tab), wait for its timeline to land, return what it shows."""
    with page.context.expect_page() as opened:
        link.click()
    tab = opened.value
    tab.wait_for_load_state()
    wait_for_js(tab, "window.tracedocTimeline && window.tracedocTimeline.items().length > 0")
    wait_for_js(tab, "window.tracedocTimeline.highlight() !== null && !!document.querySelector('.timeline-detail .selected-event')",
                timeout_s=30)
    return {"url": tab.url, **tab.evaluate(SHOWN), "tab": tab}


def test_show_on_timeline_opens_the_trace_at_the_matched_row(decode_trace, trial_worker, live_server, browser):
    SHOTS.mkdir(parents=True, exist_ok=True)
    page = browser.new_context(viewport=SIZES["desktop"]).new_page()
    log_in(page, live_server.url + "/rules/new/")
    run_rule(page, decode_trace)

    # the first matched row: its time and its file:location, as the table lists them
    columns = page.locator(".selection-rows thead th").all_inner_texts()
    first = page.locator(".selection-rows tbody tr").first
    cells = dict(zip(columns, first.locator("td").all_inner_texts()))
    ts, dur = int(cells["ts"]), int(cells["dur"])
    shown = opened_timeline(page, first.locator("a.row-on-timeline"))
    assert f"/traces/{decode_trace.pk}/" in shown["url"] and shown["url"].endswith("#timeline")
    assert int(shown["start"]) <= ts and ts + dur <= int(shown["end"]), (shown, ts, dur)
    assert int(shown["end"]) - int(shown["start"]) < 100 * max(dur, 20_000)  # the row fills the view, not the trace
    assert "cudaMalloc" in shown["detail"] and cells["loc"] in shown["detail"]  # that very event selected
    shown["tab"].screenshot(path=str(SHOTS / "rule_test_pane_row_on_timeline.png"))
    shown["tab"].close()

    # a finding's evidence opens where the evidence is
    evidence = page.locator("#test-result .evidence a.evidence-link").first
    assert evidence.get_attribute("target") == "_blank"
    shown = opened_timeline(page, evidence)
    where = page.locator("#test-result .evidence li").first.locator(".where").inner_text()
    assert shown["detail"] and where.split(":")[0].strip() in shown["detail"]
    shown["tab"].close()
    assert "team.malloc-in-decode" in page.locator(".rule-code .cm-content").inner_text()  # the editor kept its text


@pytest.mark.parametrize("size", list(SIZES))
def test_the_matched_rows_scroll_inside_their_card(decode_trace, trial_worker, live_server, browser, size):
    SHOTS.mkdir(parents=True, exist_ok=True)
    page = browser.new_context(viewport=SIZES[size]).new_page()
    log_in(page, live_server.url + "/rules/new/")
    run_rule(page, decode_trace)
    for scheme in ("light", "dark"):
        page.emulate_media(color_scheme=scheme)
        page.locator(".selection-rows").evaluate("el => el.scrollIntoView({block: 'center'})")
        page.screenshot(path=str(SHOTS / f"rule_test_pane_rows_{size}_{scheme}.png"))
        b = page.evaluate(BOXES)
        assert b["page"] <= b["viewport"], f"{size} {scheme}: the page is {b['page']} px wide"
        # the rows' box is inside the card; the table is wider and scrolls inside the box
        assert b["card"]["x"] <= b["rows"]["x"] and b["rows"]["right"] <= b["card"]["right"] + 0.5, b
        assert b["overflow_x"] == "auto" and b["scrolls"] and b["table"]["w"] > b["rows"]["w"], b
        assert len(b["links"]) == 5
