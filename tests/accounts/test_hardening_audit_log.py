"""The audit log records who changed a rule, an SLO, an API token or a cluster's triage state,
when, and what; the service's own cluster bookkeeping is not a person's change."""
from django.contrib.admin.sites import site
from django.test import RequestFactory

from accounts.audit import acting_as
from accounts.models import ApiToken, AuditEntry
from diagnosis.models import ClusterRecord
from tests.support.cluster_world import NCCL, days_ago, seen
from tests.support.rule_texts import GRAPH_LAUNCHES as RULE


def entries(object_type: str) -> list[tuple]:
    return [(e.actor_name, e.team.slug if e.team else None, e.action, e.changes)
            for e in AuditEntry.objects.filter(object_type=object_type).order_by("id")]


def test_slo_changes_through_the_api_name_the_token_user(alice_api, infra):
    pk = alice_api.post("/api/v1/slos/", {"slo_id": "ttft", "sli": "time_to_first_token", "objective": "max <= 1s"},
                        format="json").json()["id"]
    assert alice_api.patch(f"/api/v1/slos/{pk}/", {"objective": "max <= 2s"}, format="json").status_code == 200
    assert alice_api.delete(f"/api/v1/slos/{pk}/").status_code == 204
    log = entries("diagnosis.SLODefinition")
    assert [(who, team, action) for who, team, action, _ in log] == [
        ("alice", "infra", "created"), ("alice", "infra", "updated"), ("alice", "infra", "deleted")]
    assert log[1][3] == {"objective": ["max <= 1s", "max <= 2s"]}


def test_a_rule_created_and_edited_is_logged(alice_api, infra):
    rule = alice_api.post("/api/v1/rules/", {"yaml": RULE}, format="json")
    assert rule.status_code == 201, rule.content
    alice_api.patch(f"/api/v1/rules/{rule.json()['id']}/", {"enabled": False}, format="json")
    log = entries("rules.TeamRule")
    assert [(who, action) for who, _, action, _ in log] == [("alice", "created"), ("alice", "updated")]
    assert log[1][3]["enabled"] == ["True", "False"]


def test_cluster_triage_is_logged_but_not_the_diagnosis_bookkeeping(alice_api, infra):
    seen(infra, NCCL, at=days_ago(3))
    seen(infra, NCCL, at=days_ago(1))  # trace count and last seen move: no one decided that
    cluster = ClusterRecord.objects.get(team=infra, fingerprint=NCCL.fingerprint)
    assert entries("diagnosis.ClusterRecord") == []
    assert alice_api.patch(f"/api/v1/clusters/{cluster.pk}/", {"status": "acknowledged"},
                           format="json").status_code == 200
    assert entries("diagnosis.ClusterRecord") == [("alice", "infra", "updated", {"status": ["open", "acknowledged"]})]


def test_token_issue_and_revocation_are_logged_without_the_key(alice, admin_user):
    with acting_as(alice):
        token, key = ApiToken.issue(alice, name="ci")
    request = RequestFactory().post("/admin/")
    request.user = admin_user
    site._registry[ApiToken].revoke(request, ApiToken.objects.filter(pk=token.pk))
    log = entries("accounts.ApiToken")
    assert [(who, action) for who, _, action, _ in log] == [("alice", "created"), ("", "updated")]
    assert list(log[1][3]) == ["revoked_at"]
    assert key not in str(list(AuditEntry.objects.values_list("changes", "object_repr")))
