"""Triage of a cluster: open -> acknowledged -> resolved / ignored (snoozed), regressed;
every change in the activity log with who and when; comments; bulk actions on the stream."""
from datetime import timedelta

import pytest
from django.utils import timezone

from diagnosis.models import ClusterRecord, ClusterTransition, FindingRecord
from tests.support.cluster_world import GRAPH, NCCL, OOM, days_ago, seen


@pytest.fixture
def nccl(infra):
    seen(infra, NCCL, at=days_ago(3), labels={"host": "gpu-a"})
    return ClusterRecord.objects.get(team=infra, fingerprint=NCCL.fingerprint)


def kinds(cluster) -> list[tuple]:
    return [(a.kind, a.old, a.new, a.actor.username if a.actor else None) for a in cluster.activity.order_by("id")]


def test_api_changes_are_logged_with_who(alice_api, alice, bob, nccl):
    url = f"/api/v1/clusters/{nccl.pk}/"
    assert alice_api.patch(url, {"status": "acknowledged", "assignee": "bob"}, format="json").status_code == 200
    assert alice_api.patch(url, {"status": "resolved"}, format="json").status_code == 200
    response = alice_api.post(f"{url}comments/", {"text": "driver 550 fixed it"}, format="json")
    assert response.status_code == 201 and response.json()["actor"] == "alice"
    assert kinds(nccl) == [("created", "", "", None), ("status", "open", "acknowledged", "alice"),
                           ("assignee", "", "bob", "alice"), ("status", "acknowledged", "resolved", "alice"),
                           ("comment", "", "", "alice")]
    log = alice_api.get(f"{url}activity/").json()
    assert log[0]["text"] == "driver 550 fixed it" and log[0]["at"]


def test_a_resolved_cluster_seen_in_a_new_trace_regresses_and_says_so(infra, nccl):
    nccl.change(None, status="resolved")
    _, transitions = seen(infra, NCCL, at=days_ago(0))
    nccl.refresh_from_db()
    assert nccl.status == "regressed" and nccl.regressions == 1
    assert [t.kind for t in transitions] == [ClusterTransition.REGRESSED]
    assert kinds(nccl)[-1] == ("status", "resolved", "regressed", None)


def test_a_repeat_of_an_open_cluster_is_only_seen(infra, nccl):
    _, transitions = seen(infra, NCCL, at=days_ago(0))
    assert [t.kind for t in transitions] == [ClusterTransition.SEEN]
    assert ClusterRecord.objects.get(pk=nccl.pk).status == "open"


def test_a_snooze_by_count_opens_the_cluster_again_once_reached(alice, infra, nccl):
    nccl.change(alice, status="ignored", snooze_count=3)
    seen(infra, NCCL)
    assert ClusterRecord.objects.get(pk=nccl.pk).status == "ignored"  # 2 traces
    seen(infra, NCCL)
    nccl.refresh_from_db()
    assert nccl.status == "open" and nccl.snooze_count is None
    assert kinds(nccl)[-1] == ("status", "ignored", "open", None)


def test_a_snooze_until_a_time(alice, infra, nccl):
    nccl.change(alice, status="ignored", snooze_until=timezone.now() + timedelta(hours=1))
    seen(infra, NCCL)
    assert ClusterRecord.objects.get(pk=nccl.pk).status == "ignored"
    ClusterRecord.objects.filter(pk=nccl.pk).update(snooze_until=timezone.now() - timedelta(minutes=1))
    seen(infra, NCCL)
    assert ClusterRecord.objects.get(pk=nccl.pk).status == "open"


def test_bulk_status_through_the_api(alice_api, charlie, infra, other):
    seen(infra, NCCL, OOM, GRAPH)
    mine = list(ClusterRecord.objects.filter(team=infra).values_list("pk", flat=True))
    response = alice_api.post("/api/v1/clusters/bulk/", {"ids": mine[:2], "status": "acknowledged"}, format="json")
    assert response.status_code == 200
    assert sorted(ClusterRecord.objects.filter(status="acknowledged").values_list("pk", flat=True)) == sorted(mine[:2])
    seen(other, NCCL)
    theirs = ClusterRecord.objects.get(team=other).pk
    response = alice_api.post("/api/v1/clusters/bulk/", {"ids": [mine[2], theirs], "status": "ignored"},
                              format="json")
    assert response.status_code == 404  # another team's cluster is not there for alice
    assert response.json()["detail"] == f"no cluster {theirs} in your teams; nothing was changed"
    assert ClusterRecord.objects.get(pk=mine[2]).status == "open"


def test_stream_page_filters_and_bulk_action(client, alice, infra):
    seen(infra, NCCL, at=days_ago(1), labels={"host": "gpu-a", "env": "prod"})
    seen(infra, OOM, at=days_ago(1), labels={"host": "gpu-b", "env": "staging"})
    client.force_login(alice)
    page = client.get("/clusters/", {"label": "env=prod"}, follow=True).content.decode()  # as a query
    assert "nccl.timeout.stream_blocked" in page and "memory.oom" not in page
    assert 'class="marker marker-new"' in page and "gpu-a" in page
    assert client.get("/clusters/", {"sort": "nonsense"}).status_code == 400
    ids = list(ClusterRecord.objects.filter(team=infra).values_list("pk", flat=True))
    response = client.post("/clusters/bulk/", {"clusters": ids, "status": "resolved", "query": "label=env%3Dprod"})
    assert response.status_code == 302 and response["Location"].endswith("?label=env%3Dprod")
    assert set(ClusterRecord.objects.filter(team=infra).values_list("status", flat=True)) == {"resolved"}


def test_cluster_page_shows_where_and_when_it_recurred(client, alice, infra, nccl):
    seen(infra, NCCL, at=days_ago(1), labels={"host": "gpu-b", "env": "prod"})
    nccl.change(alice, text="looking at the switch")
    client.force_login(alice)
    page = client.get(f"/clusters/{nccl.pk}/").content.decode()
    for expected in ("What happened", "nccl.timeout.stream_blocked explained", "restart it", "gpu-a", "gpu-b",
                     "looking at the switch", "rule.nccl.timeout.stream_blocked</code> v3", "#finding-F1",
                     'class="recurrence"'):
        assert expected in page, expected
    response = client.post(f"/clusters/{nccl.pk}/snooze/", {"count": 5})
    assert response.status_code == 302
    nccl.refresh_from_db()
    assert (nccl.status, nccl.snooze_count) == ("ignored", 5)


def test_the_activity_api_lists_the_rule_versions_that_matched(alice_api, nccl):
    """As the cluster page shows it: the stored changes plus one line per rule version, at the
    first trace it matched in."""
    log = alice_api.get(f"/api/v1/clusters/{nccl.pk}/activity/").json()
    rules = [e for e in log if e["kind"] == "rule"]
    found = set(FindingRecord.objects.filter(cluster=nccl).values_list("rule_id", "rule_version"))
    assert found and {(e["rule_id"], e["rule_version"]) for e in rules} == found
    assert all(e["id"] is None and e["trace"] for e in rules)
    assert any(e["kind"] == "created" for e in log)
