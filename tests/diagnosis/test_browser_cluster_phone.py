"""The issue stream and the cluster page on a phone (390x844, light and dark): nothing is
wider than the screen even with the page's sideways clip lifted (so the clip hides nothing),
the stream's status and assignee controls can be reached (in view, or in a table that
scrolls by itself) and used, "new" and "regressed" markers show, and the filters still work.
Screenshots land in test-artifacts/browser/."""
import pytest

from diagnosis.models import ClusterRecord
from tests.support.cluster_world import COLD, GRAPH, NCCL, OOM, days_ago, seen
from tests.support.fixtures import SHOTS, log_in
from tests.support.phone_layout import assert_fits

pytestmark = [pytest.mark.browser, pytest.mark.timeout(300)]

PHONE = {"viewport": {"width": 390, "height": 844}, "is_mobile": True, "has_touch": True}

REACHABLE = """sel => {
  const el = document.querySelector(sel), r = el.getBoundingClientRect();
  if (r.right <= window.innerWidth && r.left >= 0) return 'in view';
  for (let up = el.parentElement; up; up = up.parentElement) {
    const s = getComputedStyle(up).overflowX;
    if ((s === 'auto' || s === 'scroll') && up.scrollWidth > up.clientWidth) return 'scrolls inside ' + up.tagName;
  }
  return 'cut off';
}"""


@pytest.fixture
def incidents(infra, alice):
    seen(infra, NCCL, at=days_ago(6), labels={"host": "gpu-a", "env": "prod"})
    seen(infra, NCCL, OOM, at=days_ago(2), labels={"host": "gpu-b", "env": "prod"})
    seen(infra, GRAPH, COLD, at=days_ago(1), labels={"host": "gpu-c", "env": "staging"})
    ClusterRecord.objects.get(team=infra, fingerprint=GRAPH.fingerprint).change(alice, status="resolved")
    seen(infra, GRAPH, at=days_ago(0), labels={"host": "gpu-c", "env": "staging"})   # back: regressed
    return {c.fingerprint: c.pk for c in ClusterRecord.objects.filter(team=infra)}


def contrast(fg: str, bg: str) -> float:
    """WCAG contrast ratio of two computed `rgb(...)` colours."""
    def luminance(css: str) -> float:
        channels = [int(c) / 255 for c in css[css.index("(") + 1:css.index(")")].split(",")[:3]]
        lin = [c / 12.92 if c <= 0.03928 else ((c + 0.055) / 1.055) ** 2.4 for c in channels]
        return 0.2126 * lin[0] + 0.7152 * lin[1] + 0.0722 * lin[2]
    light, dark = sorted((luminance(fg), luminance(bg)), reverse=True)
    return (light + 0.05) / (dark + 0.05)


@pytest.mark.parametrize("scheme", ["light", "dark"])
def test_stream_and_cluster_page_on_a_phone(incidents, live_server, browser, scheme):
    SHOTS.mkdir(parents=True, exist_ok=True)
    page = browser.new_context(color_scheme=scheme, **PHONE).new_page()
    log_in(page, live_server.url + "/clusters/")
    page.wait_for_url("**/clusters/")
    assert page.locator("tr.cluster-row").count() == 3
    graph = page.locator(f"#cluster-row-{incidents['fp-graph']}")
    assert graph.locator(".marker-regressed").is_visible() and graph.locator(".marker-new").is_visible()
    assert page.locator(f"#cluster-row-{incidents['fp-nccl']} .marker-regressed").count() == 0
    nccl = f"#cluster-row-{incidents['fp-nccl']}"
    for control in ("select[name$='-status']", "select[name$='-assignee']"):
        assert page.evaluate(REACHABLE, f"{nccl} {control}") != "cut off", control
    status = page.locator(f"{nccl} select[name$='-status']")
    status.scroll_into_view_if_needed()
    with page.expect_response(lambda r: "/triage/" in r.url):
        status.select_option("acknowledged")
    page.wait_for_timeout(200)
    assert page.locator(f"{nccl} select[name$='-status']").input_value() == "acknowledged"
    page.reload()
    assert_fits(page, "stream")
    chip = page.locator(f"{nccl} .host").first
    colours = chip.evaluate("el => [getComputedStyle(el).color, getComputedStyle(el).backgroundColor]")
    assert colours[0] != colours[1] and contrast(*colours) >= 4.5, colours
    page.screenshot(path=str(SHOTS / f"cluster_stream_phone_{scheme}.png"), full_page=True)

    page.fill("#stream-query", "label:env=staging")
    page.click("#stream-search button[type=submit]")
    page.wait_for_url("**label%3Aenv%3Dstaging**")
    assert page.locator("tr.cluster-row").count() == 1

    page.goto(f"{live_server.url}/clusters/{incidents['fp-nccl']}/")
    assert "open → acknowledged" in page.locator("#activity").inner_text()
    assert_fits(page, "cluster page")
    page.screenshot(path=str(SHOTS / f"cluster_detail_phone_{scheme}.png"), full_page=True)
