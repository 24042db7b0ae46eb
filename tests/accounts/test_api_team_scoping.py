"""A user never sees another team's objects: lists leave them out, details answer 404."""
import pytest

from diagnosis.models import ClusterRecord
from ingest.models import Trace


@pytest.fixture
def alices_trace(infra, alice):
    return Trace.objects.create(team=infra, name="alice's", created_by=alice)


@pytest.fixture
def alices_cluster(infra):
    return ClusterRecord.objects.create(team=infra, fingerprint="abc", title="NCCL timeout", severity="error")


def test_another_teams_trace_is_404(charlie_api, alices_trace):
    for suffix in ("", "report/", "findings/"):
        assert charlie_api.get(f"/api/v1/traces/{alices_trace.pk}/{suffix}").status_code == 404


def test_another_teams_traces_are_not_listed(charlie_api, alice_api, alices_trace):
    assert charlie_api.get("/api/v1/traces/").json()["results"] == []
    assert [t["id"] for t in alice_api.get("/api/v1/traces/").json()["results"]] == [alices_trace.pk]


def test_another_teams_cluster_is_404_and_cannot_be_changed(charlie_api, alices_cluster):
    url = f"/api/v1/clusters/{alices_cluster.pk}/"
    assert charlie_api.get(url).status_code == 404
    assert charlie_api.patch(url, {"status": "ignored"}, format="json").status_code == 404
    alices_cluster.refresh_from_db()
    assert alices_cluster.status == "open"


def test_a_team_mate_can_triage(alice_api, bob, alices_cluster):
    url = f"/api/v1/clusters/{alices_cluster.pk}/"
    response = alice_api.patch(url, {"status": "resolved", "assignee": "bob"}, format="json")
    assert response.status_code == 200, response.content
    alices_cluster.refresh_from_db()
    assert (alices_cluster.status, alices_cluster.assignee) == ("resolved", bob)


def test_an_outsider_cannot_be_assigned(alice_api, charlie, alices_cluster):
    response = alice_api.patch(f"/api/v1/clusters/{alices_cluster.pk}/", {"assignee": "charlie"}, format="json")
    assert response.status_code == 400


def test_the_trace_page_of_another_team_is_404(client, charlie, alices_trace):
    client.force_login(charlie)
    assert client.get(f"/traces/{alices_trace.pk}/").status_code == 404
    assert client.get(f"/traces/{alices_trace.pk}/progress/").status_code == 404
