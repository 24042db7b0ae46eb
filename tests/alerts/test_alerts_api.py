"""`POST /api/v1/destinations/` and `POST /api/v1/alert-rules/`: token auth, team-scoped, the
secret never read back; the alerts sent, with their delivery logs."""
from rest_framework.test import APIClient

from alerts.models import AlertRule, Destination
from tests.alerts.conftest import invalid, rule
from tests.support.cluster_world import NCCL, seen


def test_create_a_destination_and_a_rule(alice_api, infra):
    response = alice_api.post("/api/v1/destinations/", {"name": "sre hook", "kind": "webhook",
                                                        "url": "https://hooks.example/x", "secret": "s3cret"},
                              format="json")
    assert response.status_code == 201, response.content
    body = response.json()
    assert body["team"] == "infra" and body["has_secret"] and "secret" not in body
    response = alice_api.post("/api/v1/alert-rules/", {"name": "new incidents", "trigger": "new",
                                                       "min_severity": "error", "destinations": [body["id"]],
                                                       "label_key": "env", "label_value": "prod"}, format="json")
    assert response.status_code == 201, response.content
    created = AlertRule.objects.get(pk=response.json()["id"])
    assert (created.team, created.created_by.username, list(created.destinations.values_list("pk", flat=True))) == (
        infra, "alice", [body["id"]])


def test_what_a_destination_needs(alice_api, infra):
    cases = [({"kind": "webhook", "url": "https://h.example"}, "secret"),
             ({"kind": "slack"}, "url"),
             ({"kind": "email"}, "emails"),
             ({"kind": "slack", "url": "file:///etc/passwd"}, "url"),
             ({"kind": "carrier-pigeon", "url": "https://h.example"}, "kind")]
    for n, (fields, field) in enumerate(cases):
        response = alice_api.post("/api/v1/destinations/", {"name": f"d{n}", **fields}, format="json")
        assert response.status_code == 400 and field in invalid(response), (fields, response.content)
    assert not Destination.objects.exists()


def test_a_count_rule_needs_a_threshold(alice_api, infra):
    response = alice_api.post("/api/v1/alert-rules/", {"name": "bursts", "trigger": "count", "destinations": []},
                              format="json")
    assert response.status_code == 400 and "threshold" in invalid(response)


def test_team_scoping(alice_api, charlie_api, infra, other):
    theirs = Destination.objects.create(team=other, name="theirs", kind="slack", url="https://s.example")
    response = alice_api.post("/api/v1/alert-rules/", {"name": "r", "trigger": "new", "destinations": [theirs.pk]},
                              format="json")
    assert response.status_code == 400 and "destinations" in invalid(response)
    response = alice_api.post("/api/v1/destinations/", {"team": "other", "name": "x", "kind": "slack",
                                                        "url": "https://s.example"}, format="json")
    assert response.status_code == 400 and "team" in invalid(response)
    assert alice_api.get("/api/v1/destinations/").json()["results"] == []
    assert charlie_api.get(f"/api/v1/destinations/{theirs.pk}/").status_code == 200
    assert alice_api.get(f"/api/v1/destinations/{theirs.pk}/").status_code == 404
    assert APIClient().get("/api/v1/alert-rules/").status_code in (401, 403)


def test_the_alerts_sent_and_their_delivery_log(alice_api, charlie_api, infra, destinations, receiver, eager,
                                               django_capture_on_commit_callbacks):
    rule(infra, "new", [destinations["webhook"], destinations["email"]])
    with django_capture_on_commit_callbacks(execute=True):
        seen(infra, NCCL, labels={"host": "gpu-a"})
    alerts = alice_api.get("/api/v1/alerts/").json()["results"]
    assert len(alerts) == 1 and alerts[0]["payload"]["hosts"] == ["gpu-a"]
    assert sorted((d["kind"], d["state"], d["attempts"]) for d in alerts[0]["deliveries"]) == [
        ("email", "sent", 1), ("webhook", "sent", 1)]
    assert charlie_api.get("/api/v1/alerts/").json()["results"] == []
