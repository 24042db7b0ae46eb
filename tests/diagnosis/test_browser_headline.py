"""The trace page answers in the order of the questions (issue 32): the headline cause (title,
severity, one line of why, the first fix) is at the top, its top edge inside the first
viewport on a desktop (1440x900) and a phone (390x844), light and dark; then the evidence,
the timeline, the breakdowns. Every finding and cluster reference is a link to its anchor.
Screenshots of the first viewport land in test-artifacts/browser/."""
from pathlib import Path

import pytest

from tests.support.diagnosed_traces import diagnosed, diagnosed_folder
from tests.support.fixtures import SHOTS
from tests.support.phone_layout import assert_fits
from tests.support.trace_page import logged_in_page

pytestmark = [pytest.mark.browser, pytest.mark.timeout(300)]
FOLDER = Path(__file__).resolve().parents[1] / "fixtures" / "nccl_multirank" / "collective_mismatch"
SIZES = {"desktop": {"viewport": {"width": 1440, "height": 900}},
         "phone": {"viewport": {"width": 390, "height": 844}, "is_mobile": True, "has_touch": True}}

# every in-page link (#...) points at an element of the page
DEAD_ANCHORS = """() => [...document.querySelectorAll('main a[href^="#"]')]
  .map(a => a.getAttribute('href')).filter(h => h.length > 1 && !document.getElementById(h.slice(1)))"""


@pytest.fixture
def incident(infra, alice, no_worker):
    return diagnosed_folder(infra, alice, FOLDER, "collective mismatch")


@pytest.mark.parametrize("scheme", ["light", "dark"])
@pytest.mark.parametrize("size", list(SIZES))
def test_the_headline_cause_is_in_the_first_viewport(incident, live_server, browser, size, scheme):
    top = incident.report["clusters"][0]
    headline = next(f for f in incident.report["findings"] if f["id"] == top["headline"])
    SHOTS.mkdir(parents=True, exist_ok=True)
    page = logged_in_page(browser, live_server, incident, color_scheme=scheme, **SIZES[size])
    page.evaluate("() => window.scrollTo(0, 0)")
    box = page.locator("#headline").bounding_box()
    height = SIZES[size]["viewport"]["height"]
    assert 0 <= box["y"] < height, f"{size}: the headline starts at {box['y']:.0f} px"
    # its title and the first fix are in view too, not only its border
    for part in ("#headline-title", ".headline-fix"):
        b = page.locator(f"#headline {part}").bounding_box()
        assert b["y"] + b["height"] <= height, f"{size}: {part} ends at {b['y'] + b['height']:.0f} px"
    text = page.locator("#headline").inner_text()
    assert top["title"] in text and top["severity"] in text
    assert headline["recommendations"][0].replace("`", "")[:40] in text
    # the order of the questions: cause, evidence, timeline, breakdowns
    order = page.evaluate("""() => ['#headline', '.summary', '.cluster', '#timeline', '#breakdowns']
        .map(s => document.querySelector(s)).filter(Boolean).map(el => el.getBoundingClientRect().top)""")
    assert order == sorted(order), order
    assert page.evaluate(DEAD_ANCHORS) == []
    page.screenshot(path=str(SHOTS / f"trace_headline_{size}_{scheme}.png"))
    if size == "phone":
        assert_fits(page, "trace page")
    page.locator("#headline-title a").click()
    page.wait_for_function(f"() => location.hash === '#finding-{headline['id']}'")
    assert page.locator(f"#finding-{headline['id']}").is_visible()


def test_finding_and_cluster_references_are_links(incident, client, alice):
    client.force_login(alice)
    html = client.get(f"/traces/{incident.pk}/").content.decode()
    for c in incident.report["clusters"]:
        assert f'href="#cluster-{c["id"]}"' in html and f'id="cluster-{c["id"]}"' in html
        for fid in c["findings"]:
            assert f'href="#finding-{fid}"' in html and f'id="finding-{fid}"' in html
    for f in incident.report["findings"]:
        if f.get("consequence_of"):
            assert f'consequence of <a href="#finding-{f["consequence_of"]}"' in html


@pytest.fixture
def long_named(incident):
    """An agent `wrap` trace is named after its command line (renamed before the browser starts)."""
    from ingest.models import Trace
    Trace.objects.filter(pk=incident.pk).update(name="gpu-node-017.cluster.internal.example.com: torchrun --nnodes=4 "
                                                     "--nproc_per_node=8 train.py --config=" + "x" * 300 + " (exit 1)")
    return incident


def test_a_long_trace_name_leaves_the_headline_in_view(long_named, live_server, browser):
    """The title is cut at two lines on a phone, the whole name in its tooltip; the cause stays in view."""
    page = logged_in_page(browser, live_server, long_named, color_scheme="light", **SIZES["phone"])
    page.evaluate("() => window.scrollTo(0, 0)")
    title = page.locator("h1 .trace-title")
    assert title.get_attribute("title").endswith("(exit 1)")
    assert title.bounding_box()["height"] < 90  # two lines
    b = page.locator("#headline-title").bounding_box()
    assert b["y"] + b["height"] <= 844
    assert_fits(page, "trace page with a long name")
    page.screenshot(path=str(SHOTS / "trace_headline_phone_long_name.png"))


@pytest.fixture(params=["oom_fragmentation", "cudagraph_abort", "nccl_timeout"])
def corpus_incident(request, infra, alice, no_worker, corpus_dir):
    return diagnosed(infra, alice, request.param)


def test_other_incidents_lead_with_their_cause_on_a_phone(corpus_incident, live_server, browser):
    """An OOM (its cause was ~2,500 px down), a capture abort, an NCCL timeout: title and first fix in view."""
    name = corpus_incident.name
    page = logged_in_page(browser, live_server, corpus_incident, color_scheme="dark", **SIZES["phone"])
    page.evaluate("() => window.scrollTo(0, 0)")
    for part in ("#headline-title", ".headline-fix"):
        b = page.locator(f"#headline {part}").bounding_box()
        assert b["y"] + b["height"] <= 844, f"{name}: {part} ends at {b['y'] + b['height']:.0f} px"
    page.screenshot(path=str(SHOTS / f"trace_headline_phone_{name}.png"))
