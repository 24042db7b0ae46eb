"""The trace page on a phone (390x844) and a desktop, light and dark (issue 32 item 10):
"Diagnose again" overlapped the severity badges, the summary wrapped one word a line, and
colour blocks stood behind the state history. Bounding boxes in a real browser; screenshots
of each in test-artifacts/browser/."""
from pathlib import Path

import pytest

from tests.support.diagnosed_traces import diagnosed_folder
from tests.support.fixtures import SHOTS
from tests.support.trace_page import logged_in_page

pytestmark = [pytest.mark.browser, pytest.mark.timeout(300)]
FOLDER = Path(__file__).resolve().parents[1] / "fixtures" / "nccl_multirank" / "collective_mismatch"
SIZES = {"desktop": {"viewport": {"width": 1440, "height": 900}},
         "phone": {"viewport": {"width": 390, "height": 844}, "is_mobile": True, "has_touch": True}}


@pytest.fixture
def incident(infra, alice, no_worker):
    return diagnosed_folder(infra, alice, FOLDER, "collective mismatch")


# boxes of the summary's parts and of the state history's steps, in page coordinates
BOXES = """() => {
  const box = el => { const r = el.getBoundingClientRect(); return {x: r.left, y: r.top + scrollY, w: r.width, h: r.height}; };
  const summary = document.querySelector('.summary');
  const steps = [...document.querySelectorAll('ol.history li')];
  return {
    card: box(summary), button: box(document.getElementById('rediagnose')),
    title: box(summary.querySelector('h2')), counts: box(summary.querySelector('.counts')),
    badges: [...summary.querySelectorAll('.counts .sev')].map(box),
    // a step's connector line (its ::before): where it ends on the right, null when it has none
    steps: steps.map(li => {
      const before = getComputedStyle(li, '::before'), r = li.getBoundingClientRect();
      const drawn = before.display !== 'none' && before.content !== 'none' && parseFloat(before.width) > 0;
      return {...box(li), dot: box(li.querySelector('.dot')), background: getComputedStyle(li).backgroundColor,
              connector_right: drawn ? r.left + parseFloat(before.marginLeft) + parseFloat(before.width) : null};
    }),
    // the left edge of the nearest box that clips the history (overflow hidden), if any
    clip_left: (() => { for (let el = document.querySelector('ol.history'); el; el = el.parentElement)
                          if (getComputedStyle(el).overflowX !== 'visible') return el.getBoundingClientRect().left;
                        return -1e9; })(),
    history_background: getComputedStyle(document.querySelector('ol.history')).backgroundColor,
  };
}"""
SIZES["tablet"] = {"viewport": {"width": 820, "height": 1180}, "is_mobile": True, "has_touch": True}
TRANSPARENT = "rgba(0, 0, 0, 0)"


def overlap(a: dict, b: dict) -> bool:
    return a["x"] < b["x"] + b["w"] and b["x"] < a["x"] + a["w"] and a["y"] < b["y"] + b["h"] and b["y"] < a["y"] + a["h"]


def inside(a: dict, b: dict) -> bool:
    return b["x"] <= a["x"] and a["x"] + a["w"] <= b["x"] + b["w"] + 0.5 and b["y"] <= a["y"] \
        and a["y"] + a["h"] <= b["y"] + b["h"] + 0.5


@pytest.mark.parametrize("scheme", ["light", "dark"])
@pytest.mark.parametrize("size", list(SIZES))
def test_diagnose_again_the_summary_and_the_state_history_do_not_collide(incident, live_server, browser,
                                                                         size, scheme):
    SHOTS.mkdir(parents=True, exist_ok=True)
    page = logged_in_page(browser, live_server, incident, color_scheme=scheme, **SIZES[size])
    page.evaluate("() => window.scrollTo(0, 0)")
    page.screenshot(path=str(SHOTS / f"trace_top_{size}_{scheme}.png"))
    page.locator(".summary").screenshot(path=str(SHOTS / f"trace_summary_{size}_{scheme}.png"))
    b = page.evaluate(BOXES)
    # "Diagnose again": inside its card, clear of the title and of every severity badge
    assert inside(b["button"], b["card"]), f"{size}: the button leaves the card: {b['button']} {b['card']}"
    assert not overlap(b["button"], b["title"]) and b["badges"]
    assert not any(overlap(b["button"], badge) for badge in b["badges"]), f"{size}: the button covers a badge"
    assert not overlap(b["button"], b["counts"])
    # the counts line has the card's width, not a sliver beside the button (a word a line)
    assert b["counts"]["w"] >= 0.8 * (b["card"]["w"] - 40), f"{size}: counts {b['counts']['w']:.0f} px wide"
    assert b["counts"]["h"] < 3 * 28, f"{size}: the counts take {b['counts']['h']:.0f} px"
    # the state history: no colour behind it, no connector starting a wrapped row
    assert b["history_background"] == TRANSPARENT
    assert all(s["background"] == TRANSPARENT for s in b["steps"])
    row_start = min(s["dot"]["x"] for s in b["steps"])
    starts = [s for s in b["steps"] if abs(s["dot"]["x"] - row_start) < 2]
    assert len(starts) >= (2 if size != "desktop" else 1)  # the steps wrap on a phone and a tablet
    for step in starts:
        visible = step["connector_right"] is not None and step["connector_right"] > b["clip_left"]
        assert not visible, f"{size}: a connector line starts a row at y={step['y']:.0f}"
    # between steps of a row the connectors are still drawn
    assert any(s["connector_right"] is not None and s["connector_right"] > b["clip_left"] for s in b["steps"])
