"""Changes of the closed loop's policy are audited (accounts.audit, on PostgreSQL): the API's
PUT and the cluster page's toggles each leave who changed what in the audit log (the opted-in
clusters included, which no save covers), a GET writes and logs nothing, and the cluster's
activity says who opted this cluster or its rule in or out and who turned the team's loop on,
and when; another cluster's opt-in is not in this cluster's activity."""
import re
from html import unescape

import pytest

from accounts.models import AuditEntry
from diagnosis.cluster_activity import activity_log
from diagnosis.models import FindingRecord
from hosts.models import CapturePolicy
from tests.hosts.test_closed_loop_toggle import client_of as logged_in
from tests.hosts.test_closed_loop_toggle import toggle
from tests.support.closed_loop_world import asking_cluster
from tests.support.fixtures import token_client

POLICY = "hosts.CapturePolicy"


@pytest.fixture
def cluster(infra, alice, spiky):
    return asking_cluster(infra, alice, spiky)


def entries(team) -> list[AuditEntry]:
    return list(AuditEntry.objects.filter(team=team, object_type=POLICY).order_by("id"))


def activity_words(client, cluster) -> list[str]:
    html = client.get(f"/clusters/{cluster.pk}/").content.decode()
    section = html.split('id="activity"', 1)[1].split("</section>", 1)[0]
    return [" ".join(unescape(re.sub(r"<[^>]+>", " ", li)).split())
            for li in re.findall(r"<li>(.*?)</li>", section, re.S)]


def test_the_api_put_is_in_the_audit_log_with_its_clusters_and_a_get_logs_nothing(alice, infra, cluster):
    api = token_client(alice)
    assert api.get("/api/v1/capture-policy/").json()["enabled"] is False
    assert not CapturePolicy.objects.filter(team=infra).exists() and entries(infra) == []

    put = api.put("/api/v1/capture-policy/", {"enabled": True, "rules": ["latency.jitter"], "clusters": [cluster.pk],
                                              "max_per_host_per_hour": 3}, format="json")
    assert put.status_code == 200, put.content
    logged = entries(infra)
    assert all(e.actor == alice and e.actor_name == "alice" for e in logged)
    # the policy row with its defaults, the PUT's fields, the opted-in clusters
    assert [e.action for e in logged] == ["created", "updated", "updated"]
    assert logged[0].changes["enabled"] == [None, "False"] and logged[0].changes["rules"] == [None, []]
    assert logged[1].changes == {"enabled": ["False", "True"], "rules": [[], ["latency.jitter"]],
                                 "max_per_host_per_hour": ["2", "3"]}
    assert logged[2].changes == {"clusters": ["[]", f"[{cluster.pk}]"]}

    api.put("/api/v1/capture-policy/", {"enabled": False, "clusters": []}, format="json")
    off, emptied = entries(infra)[-2:]
    assert off.changes == {"enabled": ["True", "False"]} and emptied.changes == {"clusters": [f"[{cluster.pk}]", "[]"]}
    # the audit log's API lists them for the team, by type
    listed = api.get("/api/v1/audit/", {"object_type": POLICY}).json()
    assert listed["count"] == len(entries(infra)) and listed["results"][0]["changes"] == emptied.changes


def test_the_toggles_are_audited_and_the_cluster_activity_says_who_and_when(alice, bob, infra, cluster):
    assert toggle(logged_in(bob), cluster, target="cluster", on="1").status_code == 200
    assert toggle(logged_in(alice), cluster, target="rule", rule_id="latency.jitter", on="1").status_code == 200
    assert toggle(logged_in(alice), cluster, target="cluster", on="0").status_code == 200
    logged = entries(infra)
    assert [(e.actor_name, e.action) for e in logged] == [
        ("bob", "created"), ("bob", "updated"), ("bob", "updated"), ("alice", "updated"), ("alice", "updated")]
    assert logged[1].changes == {"clusters": ["[]", f"[{cluster.pk}]"]}
    assert logged[2].changes == {"enabled": ["False", "True"]}
    assert logged[3].changes == {"rules": [[], ["latency.jitter"]]}
    assert logged[4].changes == {"clusters": [f"[{cluster.pk}]", "[]"]}

    changes = [(a.actor, a.text) for a in activity_log(cluster) if a.kind == "closed_loop"]
    assert changes == [("alice", "opted this cluster out"), ("alice", "opted rule latency.jitter in"),
                       ("bob", "turned the team's closed loop on"), ("bob", "opted this cluster in")]
    words = activity_words(logged_in(alice), cluster)
    assert any(w.endswith("alice opted this cluster out (closed loop)") for w in words), words
    assert any("bob turned the team's closed loop on (closed loop)" in w for w in words), words


def test_another_clusters_opt_in_and_the_loop_before_any_opt_in_stay_out(alice, infra, cluster, spiky):
    other = FindingRecord.objects.exclude(cluster=cluster).filter(trace__team=infra).first()
    api = token_client(alice)
    api.put("/api/v1/capture-policy/", {"enabled": True}, format="json")   # not yet for this cluster
    if other is not None:
        api.put("/api/v1/capture-policy/", {"clusters": [other.cluster_id]}, format="json")
    assert [a for a in activity_log(cluster) if a.kind == "closed_loop"] == []
    api.put("/api/v1/capture-policy/", {"rules": ["latency.jitter"]}, format="json")
    api.put("/api/v1/capture-policy/", {"enabled": False}, format="json")
    assert [a.text for a in activity_log(cluster) if a.kind == "closed_loop"] == [
        "turned the team's closed loop off", "opted rule latency.jitter in"]
