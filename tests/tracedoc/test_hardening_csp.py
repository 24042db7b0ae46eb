"""Every page carries a Content-Security-Policy that allows scripts from our own static files
only, and the pages still work under it in a real browser (no violation reported)."""
import pytest

from tests.support.fixtures import log_in


def policy(answer) -> dict[str, list[str]]:
    header = answer["Content-Security-Policy"]
    return {d.split()[0]: d.split()[1:] for d in (p.strip() for p in header.split(";")) if d}


@pytest.mark.parametrize("path", ["/", "/clusters/", "/rules/", "/traces/new/", "/hosts/", "/api/docs/"])
def test_pages_send_a_policy_without_inline_scripts(client, alice, path):
    client.force_login(alice)
    answer = client.get(path, follow=True)
    assert answer.status_code == 200
    directives = policy(answer)
    assert directives["script-src"] == ["'self'"]
    assert directives["object-src"] == ["'none'"] and directives["frame-ancestors"] == ["'none'"]
    html = answer.content.decode()
    assert " onclick=" not in html and "<script>" not in html


@pytest.mark.django_db
def test_the_login_page_and_api_answers_carry_it_too(client, alice_api):
    assert "script-src 'self'" in client.get("/accounts/login/")["Content-Security-Policy"]
    assert "Content-Security-Policy" in alice_api.get("/api/v1/traces/")


@pytest.mark.browser
@pytest.mark.timeout(120)
def test_pages_run_under_the_policy_in_chromium(alice, live_server, browser):
    page = browser.new_page(viewport={"width": 600, "height": 900})  # narrow: the menu button shows
    violations = []
    page.on("console", lambda m: violations.append(m.text) if "Content Security Policy" in m.text else None)
    log_in(page, live_server.url + "/accounts/login/")
    page.wait_for_url(live_server.url + "/")
    page.click(".nav-toggle")  # its handler is a static file now
    assert page.locator(".nav-toggle").get_attribute("aria-expanded") == "true"
    for path in ("/clusters/", "/rules/", "/api/docs/"):
        page.goto(live_server.url + path)
        page.wait_for_load_state("networkidle")
    page.wait_for_selector(".swagger-ui .info", timeout=30_000)  # the docs' init script ran
    assert violations == []
