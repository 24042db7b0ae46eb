"""The on-call stream in a real browser (laptop 1440x900 and phone 390x844, light and dark):
twelve unresolved issues and two resolved ones; the stream opens on the unresolved ones, at
least eight of them whole in the laptop's first screen; the search bar narrows it, says what it
cannot read; a row's snooze preset takes an issue out of the unresolved stream; axe-core finds
no contrast violation. Screenshots go to SHOTS (test-artifacts/browser/)."""
import json
from pathlib import Path

import pytest

from diagnosis.models import ClusterRecord
from tests.support.cluster_world import Cause, days_ago, seen
from tests.support.fixtures import SHOTS, log_in
from tests.support.phone_layout import assert_fits

pytestmark = [pytest.mark.browser, pytest.mark.timeout(300)]

AXE = Path(__file__).resolve().parents[1] / "fixtures" / "axe" / "axe.min.js"
LAPTOP = {"viewport": {"width": 1440, "height": 900}}
PHONE = {"viewport": {"width": 390, "height": 844}, "is_mobile": True, "has_touch": True}
# root causes of the rule pack, as an on-call stream of a busy week shows them
CAUSES = [("nccl.timeout.stream_blocked", "error"), ("memory.oom", "critical"), ("cuda_graph.capture_abort", "warning"),
          ("nccl.collective_mismatch", "critical"), ("dataloader.stall", "warning"), ("thermal.throttle", "warning"),
          ("nvlink.errors", "error"), ("xid.79_fell_off_the_bus", "critical"), ("kv_cache.eviction_storm", "warning"),
          ("host.oom_killer", "error"), ("cuda.illegal_address", "critical"), ("nccl.ib_timeout", "error"),
          ("pcie.replay_errors", "warning"), ("ecc.uncorrectable", "critical")]
IN_VIEW = """() => [...document.querySelectorAll('tr.cluster-row')].filter(r => {
  const b = r.getBoundingClientRect(); return b.top >= 0 && b.bottom <= window.innerHeight; }).length"""
CONTRAST = """() => axe.run({runOnly: {type: 'rule', values: ['color-contrast']}}).then(r => r.violations.map(v => ({
  id: v.id, nodes: v.nodes.slice(0, 5).map(n => ({target: n.target.join(' '), why: n.failureSummary}))})))"""


@pytest.fixture
def stream(infra, alice):
    for n, (root_cause, severity) in enumerate(CAUSES):
        seen(infra, Cause(f"fp-{n}", severity, root_cause), at=days_ago(n / 3),
             labels={"host": f"gpu-node-{n % 4:02d}", "env": "prod" if n % 3 else "staging", "job": f"llama-70b-{n}"})
    ClusterRecord.objects.filter(team=infra, fingerprint__in=["fp-12", "fp-13"]).update(status="resolved")
    return {c.root_cause: c.pk for c in ClusterRecord.objects.filter(team=infra)}


def rows(page) -> int:
    return page.locator("tr.cluster-row").count()


def contrast_violations(page) -> list:
    page.add_script_tag(content=AXE.read_text(encoding="utf-8"))
    return page.evaluate(CONTRAST)


@pytest.mark.parametrize("device", ["laptop", "phone"])
@pytest.mark.parametrize("scheme", ["light", "dark"])
def test_the_on_call_stream(stream, live_server, browser, device, scheme):
    # the world first: the database is not usable once Playwright runs its event loop
    SHOTS.mkdir(parents=True, exist_ok=True)
    context = browser.new_context(color_scheme=scheme, bypass_csp=True, **(LAPTOP if device == "laptop" else PHONE))
    page = context.new_page()
    log_in(page, live_server.url + "/clusters/")
    page.wait_for_url("**/clusters/**")
    assert page.input_value("#stream-query") == "is:unresolved"
    assert rows(page) == 12  # the two resolved ones are not on call
    assert page.locator(".stream-tabs a[aria-current=page]").inner_text() == "Unresolved"
    if device == "laptop":
        assert page.evaluate(IN_VIEW) >= 8, page.evaluate(IN_VIEW)
    else:
        assert_fits(page, "on-call stream")
        assert page.evaluate(IN_VIEW) >= 1  # the first issue in the phone's first screen, not below the filters
    page.screenshot(path=str(SHOTS / f"oncall_stream_{device}_{scheme}.png"))
    assert contrast_violations(page) == [], json.dumps(contrast_violations(page), indent=1)

    page.fill("#stream-query", "is:unresolved severity:>=critical root_cause:nccl.* mismatch")
    page.press("#stream-query", "Enter")
    page.wait_for_url("**query=**critical**")
    assert rows(page) == 1 and "nccl.collective_mismatch" in page.locator("tr.cluster-row").inner_text()

    page.fill("#stream-query", "is:fixed colour:red")
    page.press("#stream-query", "Enter")
    page.wait_for_selector(".stream-errors")
    assert "is:fixed: expected one of" in page.locator(".stream-errors").inner_text()
    assert page.get_attribute("#stream-query", "aria-invalid") == "true"
    page.screenshot(path=str(SHOTS / f"oncall_stream_error_{device}_{scheme}.png"))

    page.goto(live_server.url + "/clusters/")
    oom = page.locator(f"#cluster-row-{stream['memory.oom']}")
    oom.locator(".snooze-menu summary").click()
    assert oom.locator("button[value='1h']").is_visible()
    assert contrast_violations(page) == [], json.dumps(contrast_violations(page), indent=1)
    page.screenshot(path=str(SHOTS / f"oncall_stream_snooze_{device}_{scheme}.png"))
    oom.locator("button[value='1h']").click()
    page.wait_for_selector(".messages >> text=snoozed until")
    assert rows(page) == 11 and page.locator(f"#cluster-row-{stream['memory.oom']}").count() == 0
    page.click(".stream-tabs >> text=Snoozed")
    page.wait_for_url("**query=is%3Aignored**")
    assert rows(page) == 1
    context.close()
