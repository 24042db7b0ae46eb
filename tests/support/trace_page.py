"""The trace page in a real browser: opened logged in as alice, its timeline drawn."""
from tests.support.browser_wait import wait_for_js
from tests.support.fixtures import log_in


def logged_in_page(browser, live_server, trace, **context):
    page = browser.new_context(**context).new_page()
    log_in(page, f"{live_server.url}/traces/{trace.pk}/")
    page.wait_for_url(f"**/traces/{trace.pk}/")
    wait_for_js(page, "window.tracedocTimeline && window.tracedocTimeline.items().length > 0")
    return page
