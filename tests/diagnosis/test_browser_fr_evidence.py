"""In a real browser: the collective-mismatch finding of a two-rank NCCL hang cites a
flight-recorder entry (`nccl_trace_rank_1:entries[6]`); clicking its evidence button lands
on that entry on the timeline -- the view zoomed around it, the entry highlighted and named
in the detail. Screenshot in test-artifacts/browser/."""
from pathlib import Path

import pytest
from django.core.files.uploadedfile import SimpleUploadedFile

from diagnosis.tasks import diagnose_trace
from ingest.tasks import parse_trace
from ingest.uploads import create_trace
from tests.support.browser_wait import wait_for_js
from tests.support.fixtures import SHOTS
from tests.support.trace_page import logged_in_page

pytestmark = [pytest.mark.browser, pytest.mark.timeout(300)]
FOLDER = Path(__file__).resolve().parents[1] / "fixtures" / "nccl_multirank" / "collective_mismatch"


@pytest.fixture
def hang_trace(infra, alice, no_worker):
    files = [SimpleUploadedFile(p.name, p.read_bytes()) for p in sorted(FOLDER.iterdir())]
    trace = create_trace(infra, alice, files, name="collective mismatch")
    parse_trace(trace.pk)
    diagnose_trace(trace.pk)
    trace.refresh_from_db()
    assert trace.state == "done", trace.error
    return trace


def fr_evidence(trace) -> dict:
    return next(e for f in trace.report["findings"] if f["rule_id"] == "nccl.collective-mismatch"
                for e in f["evidence"] if e["loc"].startswith("entries["))


def test_a_flight_recorder_evidence_item_lands_on_its_entry(hang_trace, live_server, browser):
    evidence = fr_evidence(hang_trace)  # the database first: not usable once Playwright runs
    assert (evidence["artifact"], evidence["loc"]) == ("nccl_trace_rank_1", "entries[6]")
    SHOTS.mkdir(parents=True, exist_ok=True)
    page = logged_in_page(browser, live_server, hang_trace, viewport={"width": 1400, "height": 1000})
    whole = page.evaluate("() => window.tracedocTimeline.range()")
    button = page.locator(f"button.evidence-link[data-artifact='{evidence['artifact']}'][data-loc='{evidence['loc']}']")
    button.scroll_into_view_if_needed()
    with page.expect_response(lambda r: "/timeline/" in r.url and "loc=entries" in r.url) as located:
        button.click()
    found = located.value.json()["found"]
    assert found is not None, "the flight-recorder entry has no event on the timeline"
    wait_for_js(page, "document.querySelector('.timeline-detail').innerText.includes('nccl_trace_rank_1:entries[6]')")
    assert page.evaluate("() => window.tracedocTimeline.highlight()") == found["row"]
    shown = page.evaluate(f"() => window.tracedocTimeline.items().filter(i => i.row === {found['row']})")
    assert shown and shown[0]["artifact"] == "nccl_trace_rank_1" and shown[0]["loc"] == "entries[6]"
    narrowed = page.evaluate("() => window.tracedocTimeline.range()")
    assert narrowed[0] <= found["ts"] <= narrowed[1] and narrowed[1] - narrowed[0] < whole[1] - whole[0]
    page.locator(".timeline-chart").scroll_into_view_if_needed()
    page.wait_for_timeout(600)  # the smooth scroll to the card
    page.screenshot(path=str(SHOTS / "timeline_flight_recorder_evidence.png"), full_page=False)
