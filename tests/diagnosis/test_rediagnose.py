"""Re-diagnose a stored trace after a rule change: `POST /api/v1/traces/{id}/rediagnose/` and
the trace page's button queue `diagnosis.diagnose_trace` (a new run) on the real broker; the
task, run as the worker would, applies the current rules to the stored events (no re-parse)
and the report changes with the rule."""
import pytest

from diagnosis.models import ClusterRecord
from diagnosis.tasks import diagnose_trace
from ingest.models import Trace
from rules.models import TeamRule
from tests.support.diagnosed_traces import rule_ids
from tests.support.rule_texts import MALLOC_IN_DECODE as RULE

pytestmark = pytest.mark.timeout(300)


def test_a_rule_added_after_the_upload_changes_the_report(alice_api, alice, infra, decode_trace, no_worker):
    assert "team.malloc-in-decode" not in rule_ids(decode_trace)
    parsed_at = list(decode_trace.artifacts.values_list("parsed_at", flat=True))
    TeamRule.objects.create(team=infra, yaml=RULE, created_by=alice, updated_by=alice)

    response = alice_api.post(f"/api/v1/traces/{decode_trace.pk}/rediagnose/")
    assert response.status_code == 202, response.content
    assert response.json()["state"] == "diagnosing"
    assert no_worker.ids() == [decode_trace.pk]  # queued for a worker, not run in the request
    decode_trace.refresh_from_db()
    assert decode_trace.run_id == response.json()["run_id"]

    diagnose_trace(decode_trace.pk, decode_trace.run_id)  # what the worker does with the message
    decode_trace.refresh_from_db()
    assert decode_trace.state == "done"
    assert "team.malloc-in-decode" in rule_ids(decode_trace)
    assert ClusterRecord.objects.filter(team=infra, root_cause="team.malloc_in_decode", trace_count=1).exists()
    assert list(decode_trace.artifacts.values_list("parsed_at", flat=True)) == parsed_at  # not parsed again
    assert decode_trace.findings.filter(rule_id="team.malloc-in-decode").count() == 1


def test_the_trace_page_has_the_button(client, alice, decode_trace, no_worker):
    client.force_login(alice)
    page = client.get(f"/traces/{decode_trace.pk}/").content.decode()
    assert f'action="/clusters/rediagnose/{decode_trace.pk}/"' in page
    response = client.post(f"/clusters/rediagnose/{decode_trace.pk}/")
    assert response.status_code == 302 and response["Location"] == f"/traces/{decode_trace.pk}/"
    assert no_worker.ids() == [decode_trace.pk]
    assert Trace.objects.get(pk=decode_trace.pk).state == "diagnosing"


def test_only_a_finished_parsed_trace_of_ones_team(alice_api, charlie_api, infra, no_worker):
    busy = Trace.objects.create(team=infra, state=Trace.State.PARSING)
    response = alice_api.post(f"/api/v1/traces/{busy.pk}/rediagnose/")
    assert response.status_code == 409 and "parsing" in response.json()["detail"]
    never_parsed = Trace.objects.create(team=infra, state=Trace.State.FAILED)
    assert alice_api.post(f"/api/v1/traces/{never_parsed.pk}/rediagnose/").status_code == 409
    done = Trace.objects.create(team=infra)
    for state in ("parsing", "parsed", "diagnosing", "done"):
        done.transition(state)
    assert charlie_api.post(f"/api/v1/traces/{done.pk}/rediagnose/").status_code == 404
    assert no_worker.ids() == []


def test_a_dead_broker_leaves_the_trace_as_it_was(alice_api, infra, dead_broker):
    trace = Trace.objects.create(team=infra)
    for state in ("parsing", "parsed", "diagnosing", "done"):
        trace.transition(state)
    response = alice_api.post(f"/api/v1/traces/{trace.pk}/rediagnose/")
    assert response.status_code == 503 and "broker" in response.json()["detail"]
    trace.refresh_from_db()
    assert (trace.state, trace.run_id) == ("done", "")
