"""In a real browser: issue an upload token on the settings page, see its key once, use it,
revoke it through htmx and see it refused. Screenshot in test-artifacts/browser/."""
import pytest
import requests

from tests.support.fixtures import SHOTS, log_in

pytestmark = [pytest.mark.browser, pytest.mark.timeout(120)]


def test_issue_use_and_revoke_a_token_on_the_settings_page(alice, live_server, browser):
    SHOTS.mkdir(parents=True, exist_ok=True)
    page = browser.new_page(viewport={"width": 1280, "height": 900})
    log_in(page, live_server.url + "/settings/tokens/")
    page.wait_for_url("**/settings/tokens/")
    page.fill("#id_name", "nightly CI")
    page.select_option("#id_scope", "upload")
    page.fill("#id_expires_days", "30")
    page.click("#token-form button[type=submit]")
    key = page.locator("#new-key-value").inner_text(timeout=10_000).strip()
    assert len(key) == 40
    row = page.locator("#tokens tr", has_text="nightly CI")
    assert "upload" in row.inner_text() and "active" in row.inner_text() and key[:8] in row.inner_text()
    page.screenshot(path=str(SHOTS / "api-tokens.png"), full_page=True)

    headers = {"Authorization": f"Token {key}"}
    assert requests.get(f"{live_server.url}/api/v1/traces/", headers=headers, timeout=30).status_code == 200
    assert requests.post(f"{live_server.url}/api/v1/slos/", headers=headers, timeout=30,
                         json={"slo_id": "ttft", "sli": "time_to_first_token", "objective": "max <= 1s"}
                         ).status_code == 403  # upload scope: no team settings

    page.reload()  # the key is shown once: not on the page any more
    assert page.locator("#new-key-value").count() == 0 and key not in page.content()
    page.once("dialog", lambda dialog: dialog.accept())
    page.locator("#tokens tr", has_text="nightly CI").get_by_role("button", name="Revoke nightly CI").click()
    page.locator("#tokens tr", has_text="nightly CI").locator(".state-failed", has_text="revoked").wait_for(timeout=10_000)
    assert requests.get(f"{live_server.url}/api/v1/traces/", headers=headers, timeout=30).status_code == 401


def test_the_new_key_has_a_copy_button_and_the_form_defaults_to_upload(alice, live_server, browser):
    """Issue 32: new tokens defaulted to read scope, and the key shown once had no copy button."""
    context = browser.new_context(viewport={"width": 1280, "height": 900})
    context.grant_permissions(["clipboard-read", "clipboard-write"], origin=live_server.url)
    page = context.new_page()
    log_in(page, live_server.url + "/settings/tokens/")
    page.wait_for_url("**/settings/tokens/")
    assert page.locator("#id_scope").input_value() == "upload"
    page.fill("#id_name", "ci")
    page.click("#token-form button[type=submit]")
    key = page.locator("#new-key-value").inner_text(timeout=10_000).strip()
    page.get_by_role("button", name="Copy").click()
    page.locator("#new-key-copied", has_text="Copied").wait_for(timeout=5_000)
    assert page.evaluate("navigator.clipboard.readText()") == key
    page.screenshot(path=str(SHOTS / "api-token-copy.png"))
    context.close()
