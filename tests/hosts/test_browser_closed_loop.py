"""The closed loop's pages in headless Chromium, on a laptop (1440x900) and a phone (390x844), in
light and dark: the cluster page's Closed loop section (plan, policy, orders with before -> after)
whose toggle opts the cluster in through htmx and stays so after a reload; the trace page's
finding card with its orders; the host page's requests by origin. axe-core finds no serious or
critical violation (colour contrast included) in those parts; nothing is wider than the phone.
Screenshots land in test-artifacts/browser/."""
from pathlib import Path

import pytest

from tests.support.closed_loop_world import closed_loop_world, reports
from tests.support.fixtures import SHOTS, log_in
from tests.support.phone_layout import assert_fits

pytestmark = [pytest.mark.browser, pytest.mark.timeout(300)]

AXE = Path(__file__).resolve().parents[1] / "fixtures" / "axe" / "axe.min.js"
SCREENS = {"desktop": {"viewport": {"width": 1440, "height": 900}},
           "phone": {"viewport": {"width": 390, "height": 844}, "is_mobile": True, "has_touch": True}}
SUMMARY = """(results) => results.violations.filter(v => v.impact === 'serious' || v.impact === 'critical')
    .map(v => ({id: v.id, help: v.help, nodes: v.nodes.slice(0, 5).map(n => n.target.join(' '))}))"""


@pytest.fixture(scope="module")
def spiky():
    return reports()


@pytest.fixture
def world(infra, alice, spiky):
    return closed_loop_world(infra, alice, spiky, policy_on=False)


def serious(page, selector: str) -> list:
    if not page.evaluate("() => typeof axe !== 'undefined'"):
        page.add_script_tag(content=AXE.read_text(encoding="utf-8"))
    return page.evaluate(f"(sel) => axe.run({{include: [[sel]]}}).then({SUMMARY})", selector)


@pytest.mark.parametrize("scheme", ["light", "dark"])
@pytest.mark.parametrize("screen", ["desktop", "phone"])
def test_closed_loop_pages(world, live_server, browser, screen, scheme):
    # the world first (a fixture before the browser): the database is not usable once Playwright runs
    cluster, first, gpu7 = world.cluster.pk, world.first.pk, world.done.host_id
    SHOTS.mkdir(parents=True, exist_ok=True)
    shot = f"closed_loop_{screen}_{scheme}"
    context = browser.new_context(color_scheme=scheme, bypass_csp=True, **SCREENS[screen])
    page = context.new_page()
    log_in(page, f"{live_server.url}/clusters/{cluster}/")
    page.wait_for_url(f"**/clusters/{cluster}/")

    section = page.locator("#closed-loop")
    section.scroll_into_view_if_needed()
    assert "What would decide it" in section.inner_text()
    assert "latency.spike-host-work" in section.locator(f"tbody[data-order='{world.done.pk}']").inner_text()
    toggle = section.get_by_role("button", name="Order captures for this cluster: off")
    if screen == "phone":
        assert_fits(page, "cluster page")
    assert not serious(page, "#closed-loop")
    section.screenshot(path=str(SHOTS / f"{shot}_section.png"))
    with page.expect_response(lambda r: "/hosts/closed-loop/" in r.url):
        toggle.click()
    on = page.locator("#closed-loop").get_by_role("button", name="Order captures for this cluster: on")
    on.wait_for()
    assert on.get_attribute("aria-pressed") == "true"
    assert "the next finding of this cluster that asks orders its capture" in page.locator("#closed-loop").inner_text()
    page.reload()
    assert page.locator("#closed-loop").get_by_role("button", name="Order captures for this cluster: on").is_visible()
    assert not serious(page, "#closed-loop")  # the 'on' state's colours too
    page.locator("#closed-loop").screenshot(path=str(SHOTS / f"{shot}_section_on.png"))
    page.screenshot(path=str(SHOTS / f"{shot}_cluster.png"), full_page=True)

    page.goto(f"{live_server.url}/traces/{first}/")
    card = page.locator("article.finding", has=page.locator("code", has_text="latency.jitter")).first
    card.scroll_into_view_if_needed()
    assert "decided it" in card.inner_text() and "queued" in card.inner_text()
    if screen == "phone":
        assert_fits(page, "trace page")
    assert not serious(page, "article.finding .capture-plan")
    card.screenshot(path=str(SHOTS / f"{shot}_finding.png"))

    page.goto(f"{live_server.url}/hosts/{gpu7}/")
    captures = page.locator("#captures")
    assert captures.locator(".origin-auto").count() == 1 and captures.locator(".origin-person").count() == 1
    if screen == "phone":
        assert_fits(page, "host page")
    assert not serious(page, "#captures")
    page.screenshot(path=str(SHOTS / f"{shot}_host.png"), full_page=True)
    page.goto(f"{live_server.url}/hosts/")
    assert not serious(page, "#hosts")
    page.screenshot(path=str(SHOTS / f"{shot}_hosts.png"), full_page=True)
    context.close()
