"""GET /api/v1/hosts/: hosts from agent labels and from the events, team-scoped."""
from ingest.models import Trace


def _done(team, user, labels=None, hosts=(), worst=None):
    return Trace.objects.create(team=team, created_by=user, name="t", labels=labels or {}, state="done",
                                report={"trace": {"hosts": list(hosts)}, "summary": {"worst": worst}})


def test_hosts_from_labels_and_events(alice_api, infra, alice):
    _done(infra, alice, labels={"host": "gpu-7"}, worst="critical")
    newest = _done(infra, alice, hosts=["gpu-7", "gpu-8"], worst="warning")
    body = {h["host"]: h for h in alice_api.get("/api/v1/hosts/").json()}
    assert set(body) == {"gpu-7", "gpu-8"}
    assert body["gpu-7"]["traces"] == 2
    assert body["gpu-7"]["last_trace"] == newest.pk and body["gpu-7"]["last_worst"] == "warning"


def test_other_teams_hosts_are_invisible(charlie_api, infra, alice):
    _done(infra, alice, labels={"host": "secret-host"})
    assert charlie_api.get("/api/v1/hosts/").json() == []


def test_token_required(client):
    assert client.get("/api/v1/hosts/").status_code in (401, 403)
