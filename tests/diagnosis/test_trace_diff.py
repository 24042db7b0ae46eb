"""The trace diff on the server: `GET /api/v1/traces/{id}/diff/{base_id}/` and the page
`/traces/{id}/diff/{base_id}/` compare two stored, diagnosed corpus traces; another team's
trace is a 404, an unfinished one a 409 problem document; the trace page offers the others."""
import pytest

from ingest.api.problems import TRACE_NOT_DONE
from problems import PROBLEM_CONTENT_TYPE, PROBLEM_TYPE_BASE
from ingest.models import Trace
from tests.support.diagnosed_traces import diagnosed

pytestmark = pytest.mark.timeout(300)

API = "/api/v1/traces/{}/diff/{}/"
PAGE = "/traces/{}/diff/{}/"


@pytest.fixture
def pair(infra, alice, no_worker, corpus_dir) -> tuple[Trace, Trace]:
    """(base, new): a healthy decode and the same workload with a fragmented allocator."""
    return diagnosed(infra, alice, "healthy_decode"), diagnosed(infra, alice, "fragmented_decode")


def fingerprints(report: dict) -> set[str]:
    return {c["fingerprint"] for c in report["clusters"]}


def test_the_api_diff_matches_the_two_stored_reports(alice_api, pair):
    base, new = pair
    response = alice_api.get(API.format(new.pk, base.pk))
    assert response.status_code == 200, response.content[:500]
    body = response.json()
    assert (body["base"], body["trace"]) == (base.pk, new.pk)
    by_status = {s: {c["fingerprint"] for c in body["clusters"] if c["status"] == s}
                 for s in ("appeared", "disappeared", "persisted")}
    assert by_status["appeared"] == fingerprints(new.report) - fingerprints(base.report)
    assert by_status["disappeared"] == fingerprints(base.report) - fingerprints(new.report)
    assert by_status["appeared"], "fragmented_decode should add a root cause the healthy run lacks"
    slis = {s["name"]: s for s in body["slis"]}
    # time to first token comes from the stored reports' slis (no events needed)
    assert (slis["ttft"]["base"], slis["ttft"]["new"]) == (base.report["slis"]["ttft_ms"], new.report["slis"]["ttft_ms"])
    assert slis["ttft"]["base"] is not None
    assert slis["step_latency_p50"]["base"] is not None and slis["step_latency_p50"]["new"] is not None
    stored_kernels = {k["name"] for d in new.report["breakdowns"]["kernels"] for k in d["top"]}
    assert {k["name"] for k in body["kernels"] if k["new_ms"] is not None} <= stored_kernels
    assert body["verdict"]["regression"] == any(c["status"] == "appeared" and c["severity"] in ("error", "critical")
                                                for c in body["findings"])

    # the same pair the other way round swaps appeared and disappeared
    back = alice_api.get(API.format(base.pk, new.pk)).json()
    assert {c["fingerprint"] for c in back["clusters"] if c["status"] == "disappeared"} == by_status["appeared"]


def test_gates_come_from_the_query(alice_api, pair):
    base, new = pair
    strict = alice_api.get(API.format(new.pk, base.pk), {"fail_on": "info", "fail_on_regression": 0}).json()
    assert strict["thresholds"] == {"fail_on": "info", "fail_on_regression_pct": 0.0}
    assert strict["verdict"]["regression"] and strict["verdict"]["reasons"]
    assert alice_api.get(API.format(new.pk, base.pk), {"fail_on": "fatal"}).status_code == 400


def test_another_teams_trace_is_a_404_on_either_side(alice_api, charlie_api, pair, other, charlie):
    base, new = pair
    assert charlie_api.get(API.format(new.pk, base.pk)).status_code == 404
    theirs = Trace.objects.create(team=other, created_by=charlie, name="theirs", state=Trace.State.DONE, report={})
    assert alice_api.get(API.format(new.pk, theirs.pk)).status_code == 404
    assert alice_api.get(API.format(theirs.pk, new.pk)).status_code == 404


def test_an_unfinished_side_is_a_409_problem(alice_api, client, alice, infra, pair):
    base, _ = pair
    pending = Trace.objects.create(team=infra, created_by=alice, name="pending", state=Trace.State.PARSING)
    response = alice_api.get(API.format(pending.pk, base.pk))
    assert response.status_code == 409
    assert response["Content-Type"] == PROBLEM_CONTENT_TYPE
    problem = response.json()
    assert problem["type"] == PROBLEM_TYPE_BASE + TRACE_NOT_DONE and problem["trace"] == pending.pk
    client.force_login(alice)
    page = client.get(PAGE.format(base.pk, pending.pk))
    assert page.status_code == 409 and b"diff-not-done" in page.content


def test_the_page_shows_clusters_slis_and_verdict_and_the_trace_page_links_it(client, alice, charlie, pair):
    base, new = pair
    client.force_login(alice)
    trace_page = client.get(f"/traces/{new.pk}/").content.decode()
    assert f'<option value="{base.pk}">' in trace_page
    assert '<option value="" selected>pick a trace</option>' in trace_page  # nothing alike: no guess
    Trace.objects.filter(pk__in=(base.pk, new.pk)).update(labels={"model": "llama-8b", "env": "bench"})
    assert f'<option value="{base.pk}" selected>' in client.get(f"/traces/{new.pk}/").content.decode()
    picked = client.get(f"/traces/{new.pk}/diff/", {"base": base.pk})
    assert picked.status_code == 302 and picked["Location"] == PAGE.format(new.pk, base.pk)

    page = client.get(PAGE.format(new.pk, base.pk))
    assert page.status_code == 200
    html = page.content.decode()
    for section in ("diff-verdict", "diff-slis", "diff-clusters-appeared", "diff-clusters-disappeared",
                    "diff-clusters-persisted", "diff-kernels"):
        assert f'id="{section}"' in html
    appeared = [c for c in new.report["clusters"] if c["fingerprint"] not in fingerprints(base.report)]
    assert all(c["title"] in html for c in appeared)
    ttft_row = html[html.index("time to first token"):].split("</tr>")[0]
    assert "n/a" not in ttft_row  # the stored reports carry it

    client.force_login(charlie)
    assert client.get(PAGE.format(new.pk, base.pk)).status_code == 404
