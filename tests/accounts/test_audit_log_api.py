"""`GET /api/v1/audit/` and the audit log page: a user sees the changes of their teams' objects
and of their own tokens, newest first, filtered and paginated; never another team's."""
from __future__ import annotations

from datetime import timedelta

from django.test import Client
from django.utils import timezone

from accounts.audit import acting_as
from accounts.models import ApiToken, AuditEntry
from diagnosis.models import SLODefinition
from tests.support.scoped_tokens import SLO, client_for


def _slo(client, objective: str) -> int:
    return client.post("/api/v1/slos/", {**SLO, "objective": objective}, format="json").json()["id"]


def test_the_api_lists_own_team_changes_newest_first_with_filters(alice, charlie):
    alice_api, charlie_api = client_for(alice, "admin"), client_for(charlie, "admin")
    pk = _slo(alice_api, "max <= 1s")
    alice_api.patch(f"/api/v1/slos/{pk}/", {"objective": "max <= 2s"}, format="json")
    _slo(charlie_api, "max <= 9s")  # another team's change

    log = alice_api.get("/api/v1/audit/").json()
    slo_entries = [e for e in log["results"] if e["object_type"] == "diagnosis.SLODefinition"]
    assert [(e["actor"], e["team"], e["action"]) for e in slo_entries] == [
        ("alice", "infra", "updated"), ("alice", "infra", "created")]
    assert slo_entries[0]["changes"] == {"objective": ["max <= 1s", "max <= 2s"]}
    assert "max <= 9s" not in str(log)
    # alice's token was logged when issued; charlie's is not hers to see
    tokens = alice_api.get("/api/v1/audit/", {"object_type": "accounts.ApiToken"}).json()["results"]
    assert {e["object_id"] for e in tokens} == {str(t.pk) for t in ApiToken.objects.filter(user=alice)}

    updated = alice_api.get("/api/v1/audit/", {"action": "updated", "object_type": "diagnosis.SLODefinition"})
    assert [e["id"] for e in updated.json()["results"]] == [slo_entries[0]["id"]]
    later = (timezone.now() + timedelta(minutes=1)).isoformat()
    assert alice_api.get("/api/v1/audit/", {"since": later}).json()["count"] == 0
    assert alice_api.get("/api/v1/audit/", {"until": later}).json()["count"] == log["count"]


def test_the_api_pages_and_refuses_bad_filters(alice):
    alice_api = client_for(alice, "read")
    with acting_as(alice):
        for i in range(5):
            SLODefinition.objects.create(team=alice.teams.get(), slo_id=f"s{i}", sli="time_to_first_token",
                                         objective="max <= 1s")
    first = alice_api.get("/api/v1/audit/", {"limit": 2, "object_type": "diagnosis.SLODefinition"}).json()
    assert first["count"] == 5 and len(first["results"]) == 2 and first["next"]
    assert alice_api.get("/api/v1/audit/", {"action": "exploded"}).status_code == 400
    assert alice_api.get("/api/v1/audit/", {"since": "yesterday"}).status_code == 400
    assert alice_api.get("/api/v1/audit/", {"limit": "99999999999999999999"}).status_code == 400


def test_another_teams_entry_is_not_found(alice, charlie):
    with acting_as(charlie):
        SLODefinition.objects.create(team=charlie.teams.get(), slo_id="theirs", sli="time_to_first_token",
                                     objective="max <= 1s")
    entry = AuditEntry.objects.get(object_type="diagnosis.SLODefinition")
    assert client_for(alice, "read").get(f"/api/v1/audit/{entry.pk}/").status_code == 404
    assert client_for(charlie, "read").get(f"/api/v1/audit/{entry.pk}/").status_code == 200


def test_the_page_shows_the_teams_changes_and_filters_them(alice, charlie):
    with acting_as(alice):
        SLODefinition.objects.create(team=alice.teams.get(), slo_id="ttft-ours", sli="time_to_first_token",
                                     objective="max <= 1s")
    with acting_as(charlie):
        SLODefinition.objects.create(team=charlie.teams.get(), slo_id="ttft-theirs", sli="time_to_first_token",
                                     objective="max <= 1s")
    browser = Client()
    browser.force_login(alice)
    page = browser.get("/settings/audit/").content.decode()
    assert "ttft-ours" in page and "ttft-theirs" not in page and "alice" in page
    only_tokens = browser.get("/settings/audit/", {"object_type": "accounts.ApiToken"}).content.decode()
    assert "ttft-ours" not in only_tokens
    bad = browser.get("/settings/audit/", {"since": "not a date"}).content.decode()
    assert "since:" in bad and "ttft-ours" not in bad
    assert Client().get("/settings/audit/").status_code == 302  # login first
