"""The top navigation in a real browser at 1440, 820 and 390 px wide, light and dark (issue 32
item 10): at 820 px the links wrapped onto two lines ("API tokens", "Log out"). Wide, every
link sits on one row, each on one line; narrower, the links fold behind the Menu button and,
opened, each is one line inside the screen. Screenshots in test-artifacts/browser/nav_*."""
import pytest

from tests.support.fixtures import SHOTS, log_in

pytestmark = [pytest.mark.browser, pytest.mark.timeout(300)]

WIDTHS = {"desktop": 1440, "tablet": 820, "phone": 390}

# every link's and the bar's box, and each one's single-line height (its font's line box)
BOXES = """() => {
  const box = el => { const r = el.getBoundingClientRect(); return {x: r.left, y: r.top, w: r.width, h: r.height,
    right: r.right, bottom: r.bottom, shown: r.width > 0 && r.height > 0 && getComputedStyle(el).visibility !== 'hidden'}; };
  const line = el => parseFloat(getComputedStyle(el).lineHeight) || 1.2 * parseFloat(getComputedStyle(el).fontSize);
  const bar = document.querySelector('.topbar');
  const parts = [...bar.querySelectorAll('nav a, .whoami span, .whoami button')];
  return {bar: box(bar), toggle: box(bar.querySelector('.nav-toggle')), brand: box(bar.querySelector('.brand')),
          parts: parts.map(el => ({text: el.innerText.trim(), line: line(el), ...box(el)})),
          page: document.documentElement.scrollWidth, viewport: window.innerWidth,
          background: getComputedStyle(bar).backgroundColor};
}"""


def one_line(part: dict) -> bool:
    return part["h"] < 1.5 * part["line"]


@pytest.mark.parametrize("scheme", ["light", "dark"])
@pytest.mark.parametrize("size", list(WIDTHS))
def test_the_navigation_keeps_each_link_on_one_line(alice, live_server, browser, size, scheme):
    SHOTS.mkdir(parents=True, exist_ok=True)
    page = browser.new_context(viewport={"width": WIDTHS[size], "height": 900}, color_scheme=scheme).new_page()
    log_in(page, live_server.url + "/")
    page.wait_for_selector(".topbar nav", state="attached")
    page.screenshot(path=str(SHOTS / f"nav_{size}_{scheme}.png"), clip={"x": 0, "y": 0, "width": WIDTHS[size], "height": 160})
    b = page.evaluate(BOXES)
    assert b["page"] <= b["viewport"], f"{size}: the page is {b['page']} px wide"
    assert b["background"] == "rgb(17, 24, 39)"  # the bar stays dark in both schemes
    if size == "desktop":
        # one row: every link and "Log out" visible, on one line, at the brand's height, inside the screen
        assert not b["toggle"]["shown"]
        assert all(p["shown"] and one_line(p) for p in b["parts"]), [p for p in b["parts"] if not one_line(p)]
        middle = b["brand"]["y"] + b["brand"]["h"] / 2
        assert all(abs(p["y"] + p["h"] / 2 - middle) < 4 for p in b["parts"]), b["parts"]
        assert all(p["right"] <= b["viewport"] for p in b["parts"])
        assert b["bar"]["h"] < 64
        return
    # narrower: one row of brand and Menu, the links folded away
    assert b["toggle"]["shown"] and b["bar"]["h"] < 64
    assert abs((b["toggle"]["y"] + b["toggle"]["h"] / 2) - (b["brand"]["y"] + b["brand"]["h"] / 2)) < 4
    assert not any(p["shown"] for p in b["parts"])
    page.click(".topbar .nav-toggle")
    assert page.get_attribute(".topbar .nav-toggle", "aria-expanded") == "true"
    page.screenshot(path=str(SHOTS / f"nav_{size}_{scheme}_open.png"), clip={"x": 0, "y": 0, "width": WIDTHS[size], "height": 520})
    b = page.evaluate(BOXES)
    assert all(p["shown"] and one_line(p) for p in b["parts"]), [p for p in b["parts"] if not one_line(p)]
    assert all(0 <= p["x"] and p["right"] <= b["viewport"] for p in b["parts"])
    links = [p for p in b["parts"] if p["text"] not in ("alice", "Log out")]
    assert all(a["bottom"] <= z["y"] + 0.5 for a, z in zip(links, links[1:]))  # a column, no two on a row
    assert b["page"] <= b["viewport"]
