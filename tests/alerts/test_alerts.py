"""Alerts reach people: a real local HTTP receiver (and Django's mail outbox) gets one alert
per destination kind for a new incident, none for a repeat of an open cluster, one for a
regression; a receiver failing twice gets it on the third try; the webhook's HMAC verifies."""
import pytest
from django.core.files.uploadedfile import SimpleUploadedFile

from alerts.destinations.webhook import SIGNATURE_HEADER, verify
from alerts.models import Alert, Delivery
from diagnosis.models import ClusterRecord
from diagnosis.tasks import diagnose_trace
from ingest.tasks import parse_trace
from ingest.uploads import create_trace
from tests.alerts.conftest import SECRET, rule
from tests.corpus import corpus
from tests.support.cluster_world import GRAPH, NCCL, OOM, seen

pytestmark = pytest.mark.timeout(300)
WEB_PATHS = ("/hook", "/slack", "/api/v2/alerts", "/pd")


def sent(receiver, mailoutbox) -> dict[str, int]:
    return {**{p: len(receiver.on(p)) for p in WEB_PATHS}, "email": len(mailoutbox)}


def test_an_uploaded_incident_alerts_each_destination_kind_once(
        infra, alice, destinations, receiver, mailoutbox, eager, corpus_dir, django_capture_on_commit_callbacks):
    rule(infra, "new", destinations.values(), min_severity="error")
    folder = corpus("h200", "cudagraph_abort")
    with django_capture_on_commit_callbacks(execute=False):  # the upload's own task is not wanted here
        trace = create_trace(infra, alice, [SimpleUploadedFile(p.name, p.read_bytes()) for p in sorted(folder.iterdir())],
                             name="cudagraph abort", labels={"host": "gpu-node-7", "env": "prod"})
    parse_trace(trace.pk)
    with django_capture_on_commit_callbacks(execute=True):
        diagnose_trace(trace.pk)
    trace.refresh_from_db()
    assert trace.state == "done", trace.error
    incidents = ClusterRecord.objects.filter(team=infra, severity__in=("error", "critical"))
    assert incidents.exists()
    assert sent(receiver, mailoutbox) == {p: incidents.count() for p in (*WEB_PATHS, "email")}

    cluster = incidents.order_by("pk").first()
    link = f"https://tracedoc.example/clusters/{cluster.pk}/"
    hook = next(r.json for r in receiver.on("/hook") if r.json["cluster_id"] == cluster.pk)
    assert (hook["event"], hook["root_cause"], hook["severity"], hook["hosts"], hook["trace_count"],
            hook["cluster_url"]) == ("cluster.new", cluster.root_cause, cluster.severity, ["gpu-node-7"], 1, link)
    slack = "\n".join(r.body.decode() for r in receiver.on("/slack"))
    assert cluster.root_cause in slack and link in slack and "gpu-node-7" in slack
    am = [a for r in receiver.on("/api/v2/alerts") for a in r.json if a["generatorURL"] == link][0]
    assert (am["labels"]["root_cause"], am["labels"]["severity"], am["labels"]["host"],
            am["annotations"]["trace_count"]) == (cluster.root_cause, cluster.severity, "gpu-node-7", "1")
    pd = [r.json for r in receiver.on("/pd") if r.json["links"][0]["href"] == link][0]
    assert (pd["routing_key"], pd["event_action"], pd["payload"]["severity"], pd["payload"]["source"]) == (
        "R0UTINGKEY", "trigger", cluster.severity, "gpu-node-7")
    mail = [m for m in mailoutbox if link in m.body][0]
    assert mail.to == ["oncall@example.com", "sre@example.com"] and cluster.root_cause in mail.body
    assert set(Delivery.objects.values_list("state", flat=True)) == {"sent"}


def test_a_repeat_of_an_open_cluster_sends_nothing_and_a_regression_sends_one(
        infra, destinations, receiver, mailoutbox, eager, django_capture_on_commit_callbacks):
    rule(infra, "new", destinations.values())
    rule(infra, "regressed", destinations.values())
    with django_capture_on_commit_callbacks(execute=True):
        seen(infra, NCCL, labels={"host": "gpu-a"})
    assert sent(receiver, mailoutbox) == {p: 1 for p in (*WEB_PATHS, "email")}
    with django_capture_on_commit_callbacks(execute=True):
        seen(infra, NCCL, labels={"host": "gpu-b"})  # the same open cluster again
    assert sent(receiver, mailoutbox) == {p: 1 for p in (*WEB_PATHS, "email")}

    ClusterRecord.objects.get(team=infra).change(None, status="resolved")
    with django_capture_on_commit_callbacks(execute=True):
        seen(infra, NCCL, labels={"host": "gpu-c"})
    assert sent(receiver, mailoutbox) == {p: 2 for p in (*WEB_PATHS, "email")}
    assert receiver.on("/hook")[-1].json["event"] == "cluster.regressed"
    assert receiver.on("/hook")[-1].json["hosts"] == ["gpu-c"]
    with django_capture_on_commit_callbacks(execute=True):
        seen(infra, NCCL)  # still regressed, not resolved again: no second regression
    assert sent(receiver, mailoutbox) == {p: 2 for p in (*WEB_PATHS, "email")}
    assert sorted(Alert.objects.values_list("key", flat=True)) == ["new", "regressed-1"]


def test_a_receiver_failing_twice_gets_the_alert_on_the_third_try(
        infra, destinations, receiver, eager, django_capture_on_commit_callbacks):
    rule(infra, "new", [destinations["webhook"]])
    receiver.failures = 2
    with django_capture_on_commit_callbacks(execute=True):
        seen(infra, OOM)
    assert len(receiver.on("/hook")) == 3
    delivery = Delivery.objects.get()
    assert (delivery.state, delivery.attempts) == ("sent", 3)
    assert [(e["ok"], e["status"]) for e in delivery.log] == [(False, 500), (False, 500), (True, 202)]
    bodies = {r.body for r in receiver.on("/hook")}
    assert len(bodies) == 1  # the same alert each time


def test_a_receiver_that_never_answers_well_ends_failed(
        infra, destinations, receiver, eager, settings, django_capture_on_commit_callbacks):
    settings.TRACEDOC_ALERT_MAX_ATTEMPTS = 3
    rule(infra, "new", [destinations["slack"]])
    receiver.failures = 10
    with django_capture_on_commit_callbacks(execute=True):
        seen(infra, OOM)
    delivery = Delivery.objects.get()
    assert (delivery.state, delivery.attempts, len(receiver.on("/slack"))) == ("failed", 3, 3)
    assert "HTTP 500" in delivery.log[-1]["error"]


def test_the_webhook_signature_verifies(infra, destinations, receiver, eager, django_capture_on_commit_callbacks):
    rule(infra, "new", [destinations["webhook"]])
    with django_capture_on_commit_callbacks(execute=True):
        seen(infra, NCCL)
    request = receiver.on("/hook")[0]
    header = request.headers[SIGNATURE_HEADER]
    assert verify(SECRET, header, request.body)
    assert not verify("another-secret", header, request.body)
    assert not verify(SECRET, header, request.body.replace(b"nccl", b"NCCL"))


def test_a_count_rule_fires_once_its_window_holds_n_traces(
        infra, destinations, receiver, eager, django_capture_on_commit_callbacks):
    rule(infra, "count", [destinations["webhook"]], threshold=3, window_minutes=60)
    for _ in range(2):
        with django_capture_on_commit_callbacks(execute=True):
            seen(infra, NCCL)
    assert receiver.on("/hook") == []
    for _ in range(2):
        with django_capture_on_commit_callbacks(execute=True):
            seen(infra, NCCL)
    assert [r.json["window_count"] for r in receiver.on("/hook")] == [3]  # once per window, not per trace


def test_severity_and_label_filters(infra, destinations, receiver, eager, django_capture_on_commit_callbacks):
    rule(infra, "new", [destinations["webhook"]], min_severity="critical")
    rule(infra, "new", [destinations["slack"]], label_key="env", label_value="prod")
    with django_capture_on_commit_callbacks(execute=True):
        seen(infra, NCCL, labels={"env": "staging"})  # error, staging: neither
        seen(infra, GRAPH, labels={"env": "prod"})    # warning, prod: the label rule
        seen(infra, OOM, labels={"env": "dev"})       # critical, dev: the severity rule
    assert [r.json["root_cause"] for r in receiver.on("/hook")] == [OOM.root_cause]
    assert len(receiver.on("/slack")) == 1 and GRAPH.root_cause in receiver.on("/slack")[0].body.decode()
