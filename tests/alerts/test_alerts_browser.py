"""In a real browser: configure alerts on the team's pages -- a webhook destination (refused
first at the metadata address, then pointed at a real local HTTP receiver this test starts)
and an alert rule -- upload an incident through the form, and watch the alert's delivery
log say `sent`. The Celery worker subprocess sends it; the receiver checks the signature.
Screenshots land in test-artifacts/browser/."""
import pytest
from playwright.sync_api import TimeoutError as PlaywrightTimeout

from alerts.destinations.webhook import SIGNATURE_HEADER, verify
from tests.alerts.conftest import SECRET
from tests.alerts.receiver import Receiver
from tests.corpus import corpus
from tests.support.fixtures import SHOTS
from tests.support.fixtures import log_in

pytestmark = [pytest.mark.browser, pytest.mark.timeout(300)]


@pytest.fixture
def hook(settings, monkeypatch):
    """The receiver, allowed as a destination in this process (the form) and in the worker
    subprocess (the send), which reads its settings from the environment."""
    with Receiver() as r:
        settings.TRACEDOC_ALERT_ALLOWED_NETWORKS = ["127.0.0.1/32"]
        monkeypatch.setenv("TRACEDOC_ALERT_ALLOWED_NETWORKS", "127.0.0.1/32")
        monkeypatch.setenv("TRACEDOC_ALERT_RETRY_BACKOFF_S", "1")
        yield r


def test_configure_alerts_in_the_ui_and_see_the_delivery(alice, corpus_dir, hook, live_server, worker, browser):
    SHOTS.mkdir(parents=True, exist_ok=True)
    page = browser.new_page(viewport={"width": 1400, "height": 1000})
    log_in(page, live_server.url + "/alerts/")
    page.wait_for_url("**/alerts/")
    assert page.locator("#site-nav a[aria-current=page]").inner_text() == "Alerts"

    page.click("text=New destination")
    page.fill("#id_name", "on-call hook")
    page.select_option("#id_kind", "webhook")
    page.fill("#id_url", "http://169.254.169.254/latest/meta-data/")
    page.fill("#id_secret", SECRET)
    page.click("#alert-form button[type=submit]")
    assert "internal address" in page.locator("#url-errors").inner_text()
    page.fill("#id_url", f"{hook.url}/hook")
    page.fill("#id_secret", SECRET)  # a password field is not sent back
    page.click("#alert-form button[type=submit]")
    page.wait_for_url("**/alerts/")
    assert "on-call hook" in page.locator("#destinations").inner_text()

    page.click("text=New alert rule")
    page.fill("#id_name", "new incidents")
    page.select_option("#id_trigger", "new")
    page.select_option("#id_min_severity", "error")
    page.check("#alert-form input[name=destinations] >> nth=0")
    page.click("#alert-form button[type=submit]")
    page.wait_for_url("**/alerts/")
    assert "new incidents" in page.locator("#alert-rules").inner_text()
    page.screenshot(path=str(SHOTS / "alerts_configured.png"), full_page=True)

    page.click("text=Upload")
    page.set_input_files("#id_files", sorted(str(p) for p in corpus("h200", "cudagraph_abort").iterdir()))
    page.fill("#id_labels", "host=gpu-node-7, env=prod")
    page.click("text=Upload and diagnose")
    page.wait_for_url("**/traces/*/")
    try:
        page.wait_for_selector("h1 .state-done, h1 .state-failed", timeout=120_000)
    except PlaywrightTimeout:
        pytest.fail("the trace did not finish; worker log:\n" + worker.read_text()[-4000:])
    assert page.locator("h1 .state").inner_text() == "done", worker.read_text()[-3000:]

    page.goto(live_server.url + "/alerts/")
    page.locator("#recent-alerts tbody a").first.click()
    page.wait_for_selector("#deliveries tr.delivery[data-state=sent]", timeout=60_000)  # the log polls
    log = page.locator("#deliveries").inner_text()
    assert "on-call hook" in log and "ok HTTP 202" in log
    page.screenshot(path=str(SHOTS / "alert_delivery_log.png"), full_page=True)

    [received] = hook.on("/hook")
    assert verify(SECRET, received.headers[SIGNATURE_HEADER], received.body)
    assert received.json["event"] == "cluster.new" and received.json["hosts"] == ["gpu-node-7"]
    assert received.json["severity"] in ("error", "critical")
