"""The API tokens page in a real browser, light and dark: a token's "Revoke" button (a link-like
button) is readable on its card (it was the top bar's pale grey, 1.48:1 on white; issue 32):
axe-core's colour-contrast rule passes on the tokens table, and the measured ratio is >= 4.5."""
from pathlib import Path

import pytest

from tests.diagnosis.test_browser_cluster_phone import contrast
from tests.support.fixtures import SHOTS, log_in

pytestmark = [pytest.mark.browser, pytest.mark.timeout(120)]
AXE = Path(__file__).resolve().parents[1] / "fixtures" / "axe" / "axe.min.js"
COLOURS = """sel => { const el = document.querySelector(sel); let bg = el;
  while (bg && getComputedStyle(bg).backgroundColor === 'rgba(0, 0, 0, 0)') bg = bg.parentElement;
  return [getComputedStyle(el).color, getComputedStyle(bg).backgroundColor]; }"""


@pytest.mark.parametrize("scheme", ["light", "dark"])
def test_revoke_is_readable(alice, live_server, browser, scheme):
    SHOTS.mkdir(parents=True, exist_ok=True)
    context = browser.new_context(viewport={"width": 1440, "height": 900}, color_scheme=scheme, bypass_csp=True)
    page = context.new_page()
    log_in(page, live_server.url + "/settings/tokens/")
    page.wait_for_url("**/settings/tokens/")
    page.fill("#id_name", "nightly CI")
    page.click("#token-form button[type=submit]")
    page.locator("#new-key-value").wait_for(timeout=10_000)
    revoke = "#tokens button[aria-label='Revoke nightly CI']"
    ratio = contrast(*page.evaluate(COLOURS, revoke))
    assert ratio >= 4.5, ratio
    page.add_script_tag(content=AXE.read_text(encoding="utf-8"))
    found = page.evaluate("() => axe.run({include: [['#tokens']]}, {runOnly: ['color-contrast']})"
                          ".then(r => r.violations.map(v => v.nodes.map(n => n.target.join(' '))))")
    assert found == [], found
    page.screenshot(path=str(SHOTS / f"api-tokens-{scheme}.png"))
    context.close()
