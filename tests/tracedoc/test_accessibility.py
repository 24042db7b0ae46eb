"""axe-core (vendored, tests/fixtures/axe/) on the app's main pages, logged in, in headless
Chromium: no `serious` or `critical` violation on any of them. The app's CSP refuses an
injected inline script, so the context bypasses CSP for the injection only; the pages
themselves are served as usual. Screenshots land in test-artifacts/browser/."""
import json
from pathlib import Path

import pytest

from diagnosis.models import ClusterRecord
from hosts.models import Host
from tests.support.diagnosed_traces import diagnosed
from tests.support.fixtures import SHOTS, log_in

pytestmark = [pytest.mark.browser, pytest.mark.timeout(300)]

AXE = Path(__file__).resolve().parents[1] / "fixtures" / "axe" / "axe.min.js"
BLOCKING = {"serious", "critical"}
# What axe reports per violation, trimmed to what a reader needs to find and fix it.
SUMMARY = """(results) => results.violations.map(v => ({
    id: v.id, impact: v.impact, help: v.help,
    nodes: v.nodes.slice(0, 5).map(n => ({target: n.target.join(' '), why: n.failureSummary}))}))"""


@pytest.fixture
def world(infra, alice, no_worker, corpus_dir):
    """A diagnosed trace (with its clusters) and a host: every page has content to check."""
    trace = diagnosed(infra, alice, "cudagraph_abort")
    Host.objects.create(team=infra, name="gpu-a", agent_version="1.0",
                        gpus=[{"index": 0, "name": "NVIDIA H200", "uuid": "GPU-0", "memory_total": 150_000}])
    cluster = ClusterRecord.objects.filter(team=infra).first()
    assert cluster is not None, "the diagnosed trace opened no cluster"
    host = Host.objects.get(team=infra, name="gpu-a")
    return {"trace list": "/", "trace": f"/traces/{trace.pk}/", "cluster stream": "/clusters/",
            "cluster": f"/clusters/{cluster.pk}/", "rules": "/rules/", "rule editor": "/rules/new/",
            "hosts": "/hosts/", "host": f"/hosts/{host.pk}/", "alerts": "/alerts/",
            "alert destination form": "/alerts/destinations/new/", "alert rule form": "/alerts/rules/new/",
            "api tokens": "/settings/tokens/", "audit log": "/settings/audit/"}


KEY_COLOUR = """() => getComputedStyle([...document.querySelectorAll('.rule-code .cm-content span')]
    .find(s => s.textContent === 'id')).color"""


def violations(page, exclude: list[list[str]]) -> list[dict]:
    page.add_script_tag(content=AXE.read_text(encoding="utf-8"))
    # axe.run returns a promise; page.evaluate awaits it through the DevTools protocol.
    return page.evaluate(f"(exclude) => axe.run({{include: [['html']], exclude}}).then({SUMMARY})", exclude)


@pytest.mark.parametrize("scheme", ["light", "dark"])
def test_main_pages_have_no_serious_violations(world, live_server, browser, scheme):
    # the world first: the database is not usable once Playwright runs its event loop
    SHOTS.mkdir(parents=True, exist_ok=True)
    context = browser.new_context(viewport={"width": 1400, "height": 1000}, bypass_csp=True, color_scheme=scheme)
    page = context.new_page()
    log_in(page, live_server.url + "/accounts/login/")
    page.wait_for_url(live_server.url + "/")
    blocking = {}
    for name, path in world.items():
        page.goto(live_server.url + path)
        page.wait_for_load_state("networkidle")
        assert "/accounts/login/" not in page.url, name
        if name == "rule editor":  # the YAML keys drawn in the scheme's own colour, not CodeMirror's light one
            page.wait_for_selector(".rule-code .cm-content span")
            assert page.evaluate(KEY_COLOUR) == {"light": "rgb(30, 64, 175)", "dark": "rgb(126, 231, 135)"}[scheme]
        found = [v for v in violations(page, []) if v["impact"] in BLOCKING]
        if found:
            blocking[name] = found
        page.screenshot(path=str(SHOTS / f"a11y_{scheme}_{name.replace(' ', '_')}.png"), full_page=True)
    context.close()
    assert not blocking, json.dumps(blocking, indent=1)
