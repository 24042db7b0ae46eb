"""The alert pages: create, edit and delete destinations and alert rules of one's own team
(the model's checks shown on the form, the SSRF guard among them), another team's a 404,
and an alert's delivery log."""
import pytest

from alerts.models import Alert, AlertRule, Destination
from tests.alerts.conftest import SECRET, rule
from tests.support.cluster_world import NCCL, seen

pytestmark = pytest.mark.timeout(120)


@pytest.fixture
def alice_web(client, alice):
    client.force_login(alice)
    return client


def test_create_edit_and_delete_a_destination(alice_web, infra, settings):
    page = alice_web.get("/alerts/destinations/new/").content.decode()
    assert 'name="url"' in page and 'type="hidden" name="team"' in page  # one team: no choice to make
    refused = alice_web.post("/alerts/destinations/new/", {"team": infra.pk, "name": "meta", "kind": "slack",
                                                           "url": "http://169.254.169.254/latest/meta-data/"})
    assert refused.status_code == 400 and "internal address" in refused.content.decode()
    missing = alice_web.post("/alerts/destinations/new/", {"team": infra.pk, "name": "hook", "kind": "webhook",
                                                           "url": "https://hooks.example/x"})
    assert missing.status_code == 400 and "signing secret" in missing.content.decode()
    assert not Destination.objects.exists()

    saved = alice_web.post("/alerts/destinations/new/", {"team": infra.pk, "name": "hook", "kind": "webhook",
                                                         "url": "https://hooks.example/x", "secret": SECRET,
                                                         "enabled": "on"})
    assert saved.status_code == 302 and saved["Location"] == "/alerts/"
    d = Destination.objects.get()
    assert (d.team, d.secret, d.enabled) == (infra, SECRET, True)
    edit = alice_web.get(f"/alerts/destinations/{d.pk}/").content.decode()
    assert SECRET not in edit and "hooks.example/x" not in edit  # credentials are never shown back
    alice_web.post(f"/alerts/destinations/{d.pk}/", {"name": "hook v2", "kind": "webhook",
                                                     "url": "https://hooks.example/y", "secret": ""})
    d.refresh_from_db()
    assert (d.name, d.url, d.secret, d.enabled) == ("hook v2", "https://hooks.example/y", SECRET, False)
    listing = alice_web.get("/alerts/").content.decode()
    assert "hook v2" in listing and "https://hooks.example/…" in listing and "hooks.example/y" not in listing

    gone = alice_web.post(f"/alerts/destinations/{d.pk}/delete/", HTTP_HX_REQUEST="true")
    assert gone.status_code == 200 and gone.content == b""
    assert not Destination.objects.exists()


def test_create_and_edit_an_alert_rule(alice_web, infra, other):
    mine = Destination.objects.create(team=infra, name="slack", kind="slack", url="https://hooks.example/s")
    theirs = Destination.objects.create(team=other, name="their slack", kind="slack", url="https://hooks.example/t")
    page = alice_web.get("/alerts/rules/new/").content.decode()
    assert "slack" in page and "their slack" not in page
    count_without_threshold = alice_web.post("/alerts/rules/new/", {
        "team": infra.pk, "name": "bursts", "trigger": "count", "min_severity": "warning", "threshold": 0,
        "window_minutes": 60, "destinations": [mine.pk]})
    assert count_without_threshold.status_code == 400 and "threshold" in count_without_threshold.content.decode()
    foreign = alice_web.post("/alerts/rules/new/", {"team": infra.pk, "name": "x", "trigger": "new",
                                                    "min_severity": "error", "threshold": 0, "window_minutes": 60,
                                                    "destinations": [theirs.pk]})
    assert foreign.status_code == 400 and not AlertRule.objects.exists()

    saved = alice_web.post("/alerts/rules/new/", {
        "team": infra.pk, "name": "prod incidents", "trigger": "new", "min_severity": "error", "threshold": 0,
        "window_minutes": 60, "label_key": "env", "label_value": "prod", "destinations": [mine.pk], "enabled": "on"})
    assert saved.status_code == 302, saved.content.decode()
    r = AlertRule.objects.get()
    assert (r.created_by.username, r.label_key, list(r.destinations.all())) == ("alice", "env", [mine])
    listing = alice_web.get("/alerts/").content.decode()
    assert "prod incidents" in listing and "env=prod" in listing
    alice_web.post(f"/alerts/rules/{r.pk}/", {"name": "prod incidents", "trigger": "regressed",
                                              "min_severity": "critical", "threshold": 0, "window_minutes": 60,
                                              "destinations": [mine.pk], "enabled": "on"})
    r.refresh_from_db()
    assert (r.trigger, r.min_severity, r.team) == ("regressed", "critical", infra)
    assert alice_web.post(f"/alerts/rules/{r.pk}/delete/").status_code == 302
    assert not AlertRule.objects.exists()


def test_another_teams_objects_are_404(alice_web, other):
    d = Destination.objects.create(team=other, name="theirs", kind="slack", url="https://hooks.example/t")
    r = rule(other, "new", [d])
    for url in (f"/alerts/destinations/{d.pk}/", f"/alerts/rules/{r.pk}/"):
        assert alice_web.get(url).status_code == 404
    for url in (f"/alerts/destinations/{d.pk}/delete/", f"/alerts/rules/{r.pk}/delete/"):
        assert alice_web.post(url).status_code == 404
    assert Destination.objects.filter(pk=d.pk).exists() and AlertRule.objects.filter(pk=r.pk).exists()
    assert "theirs" not in alice_web.get("/alerts/").content.decode()


def test_the_delivery_log_of_an_alert(alice_web, infra, destinations, receiver, eager,
                                      django_capture_on_commit_callbacks):
    receiver.failures = 1
    rule(infra, "new", [destinations["slack"]])
    with django_capture_on_commit_callbacks(execute=True):
        seen(infra, NCCL, labels={"host": "gpu-a"})
    listing = alice_web.get("/alerts/").content.decode()
    assert "slack dest: sent" in listing
    alert = Alert.objects.get()
    page = alice_web.get(f"/alerts/{alert.pk}/").content.decode()
    assert "HTTP 500" in page and 'data-state="sent"' in page and "gpu-a" in page
    assert 'hx-trigger="every 2s"' not in page  # nothing pending: no polling
