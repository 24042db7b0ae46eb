"""Alerts like Grafana's notification policies (issue 32), on the real broker (Redis: the
tasks are read back off the queue and run as the worker would, due times included), the
database and a local HTTP receiver: ten new clusters within a minute are ONE grouped
notification after the destination's group wait, the next one waits out its repeat interval;
links open where the app is served; a destination's "Send test" sends now; a cluster only
experimental rules found never pages."""
from datetime import datetime, timezone

import pytest

from alerts.models import Alert, Delivery
from alerts.tasks import deliver, evaluate
from rules.models import TeamRule
from tests.alerts.conftest import rule
from tests.support.cluster_world import Cause, seen
from tests.support.rule_texts import GRAPH_LAUNCHES
from tracedoc.celery import app

pytestmark = pytest.mark.timeout(120)
SERVED = "http://127.0.0.1:8200"  # as `make run PORT=8200` sets TRACEDOC_BASE_URL


def queued(queue: str) -> list[tuple[str, tuple, float]]:
    """(task name, args, seconds until due) of every task on the queue, taken off it."""
    out = []
    with app.connection_for_read() as conn:
        q = conn.SimpleQueue(queue)
        while True:
            try:
                message = q.get(timeout=0.3)
            except q.Empty:
                return out
            args, _kwargs, _embed = message.decode()
            eta = message.headers.get("eta")
            due = (datetime.fromisoformat(eta) - datetime.now(timezone.utc)).total_seconds() if eta else 0.0
            out.append((message.headers["task"], tuple(args), due))
            message.ack()


def play_evaluations(queue: str) -> list[tuple[str, tuple, float]]:
    """Run the queued evaluations as the worker would; what they queued in turn."""
    left = []
    for name, args, due in queued(queue):
        if name == "alerts.evaluate":
            evaluate(*args)
        else:
            left.append((name, args, due))
    return left + queued(queue)


@pytest.fixture
def hook(destinations, settings):
    settings.TRACEDOC_BASE_URL = SERVED
    d = destinations["webhook"]
    d.group_wait_s, d.repeat_interval_s = 30, 600
    d.save()
    return d


def test_ten_new_clusters_within_a_minute_are_one_notification(
        infra, hook, receiver, no_worker, django_capture_on_commit_callbacks):
    rule(infra, "new", [hook], min_severity="warning")
    for n in range(10):
        with django_capture_on_commit_callbacks(execute=True):
            seen(infra, Cause(f"fp-burst-{n}", "error", f"nccl.burst_{n}"), labels={"host": f"gpu-{n}"})
    tasks = play_evaluations(no_worker.queue)
    assert Alert.objects.count() == 10 and Delivery.objects.filter(queued_at__isnull=False).count() == 10
    [(name, (leader,), due)] = tasks  # one send for the group, due after the group wait
    assert name == "alerts.deliver" and 20 < due <= 30
    assert receiver.requests == []  # nothing before the wait is over
    deliver(leader)
    [note] = receiver.on("/hook")
    body = note.json
    assert (body["event"], body["count"], len(body["alerts"])) == ("cluster.digest", 10, 10)
    assert {a["root_cause"] for a in body["alerts"]} == {f"nccl.burst_{n}" for n in range(10)}
    links = [body["cluster_url"]] + [a[k] for a in body["alerts"] for k in ("cluster_url", "trace_url")]
    assert all(link.startswith(SERVED + "/") for link in links), links
    assert set(Delivery.objects.values_list("state", flat=True)) == {"sent"}

    # an eleventh, a minute later: it waits out the repeat interval, then goes alone
    with django_capture_on_commit_callbacks(execute=True):
        seen(infra, Cause("fp-late", "critical", "memory.oom"))
    [(name, (late,), due)] = play_evaluations(no_worker.queue)
    assert name == "alerts.deliver" and 590 < due <= 600
    deliver(late)
    assert len(receiver.on("/hook")) == 2
    assert receiver.on("/hook")[1].json["event"] == "cluster.new"
    assert receiver.on("/hook")[1].json["cluster_url"].startswith(SERVED + "/clusters/")


def test_a_destination_without_a_wait_sends_at_once(infra, hook, receiver, no_worker,
                                                    django_capture_on_commit_callbacks):
    hook.group_wait_s = hook.repeat_interval_s = 0
    hook.save()
    rule(infra, "new", [hook])
    with django_capture_on_commit_callbacks(execute=True):
        seen(infra, Cause("fp-now", "error", "nccl.now"))
    [(name, _args, due)] = play_evaluations(no_worker.queue)
    assert name == "alerts.deliver" and due == 0


def test_send_test_reaches_the_destination_now(infra, alice, client, hook, receiver):
    client.force_login(alice)
    response = client.post(f"/alerts/destinations/{hook.pk}/test/", HTTP_HX_REQUEST="true",
                           HTTP_HOST="127.0.0.1:8200")
    assert response.status_code == 200 and "Test sent" in response.content.decode()
    [note] = receiver.on("/hook")
    assert note.json["event"] == "cluster.test" and note.json["cluster_url"] == SERVED + "/clusters/"
    assert not Alert.objects.exists()  # nothing recorded, nothing grouped
    page = client.get("/alerts/").content.decode()
    assert f'action="/alerts/destinations/{hook.pk}/test/"' in page and "Send test" in page


def test_send_test_says_when_it_failed(infra, alice, client, hook, receiver):
    receiver.failures = 1
    client.force_login(alice)
    response = client.post(f"/alerts/destinations/{hook.pk}/test/", follow=True)
    assert "failed: HTTP 500" in response.content.decode()


def test_experimental_rules_never_page(infra, alice, hook, receiver, no_worker, django_capture_on_commit_callbacks):
    TeamRule.objects.create(team=infra, yaml=GRAPH_LAUNCHES.replace("root_cause: team.graph_replays",
                                                                    "root_cause: team.exp"), created_by=alice)
    rule(infra, "new", [hook], min_severity="info")
    # cluster_world names a finding's rule `rule.<root cause>`: the team rule's id is another
    experimental = Cause("fp-exp", "error", "team.exp")
    with django_capture_on_commit_callbacks(execute=True):
        trace, _ = seen(infra, experimental)
    trace.findings.update(rule_id="team.graph-launches")
    play_evaluations(no_worker.queue)
    assert not Alert.objects.exists()
    with django_capture_on_commit_callbacks(execute=True):  # a stable rule's cluster still pages
        seen(infra, Cause("fp-stable", "error", "nccl.stable"))
    assert [n for n, *_ in play_evaluations(no_worker.queue)] == ["alerts.deliver"]
    assert Alert.objects.count() == 1
