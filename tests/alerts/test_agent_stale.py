"""Stale agents (alerts.agent_health, the beat job alerts.check_agents): a host whose heartbeats
stopped raises one alert per `agent_stale` rule through its destinations (every kind), however
often the check runs; a heartbeat again sends a recovery notice (PagerDuty resolves, Alertmanager
ends the alert); a host still beating, or of a team with no such rule, raises nothing; cluster
rules never fire on hosts, and an agent rule never on clusters."""
from datetime import timedelta

import pytest
from django.utils import timezone

from alerts.models import AgentOutage, Alert
from alerts.tasks import check_agents
from hosts import heartbeats
from hosts.models import Host
from tests.alerts.conftest import rule
from tests.support.cluster_world import NCCL, seen


@pytest.fixture
def quiet_host(infra):
    """gpu-a beat every 30 s until 5 minutes ago; gpu-b beat 10 s ago."""
    heartbeats.record(infra, heartbeats.Heartbeat(host="gpu-a", agent_version="1.4.0", interval=30))
    heartbeats.record(infra, heartbeats.Heartbeat(host="gpu-b", agent_version="1.4.0", interval=30))
    Host.objects.filter(name="gpu-a").update(last_seen=timezone.now() - timedelta(minutes=5))
    Host.objects.filter(name="gpu-b").update(last_seen=timezone.now() - timedelta(seconds=10))
    return Host.objects.get(name="gpu-a")


def test_a_stale_agent_alerts_once_and_its_return_is_a_notice(infra, other, destinations, receiver, mailoutbox,
                                                                eager, quiet_host):
    rule(infra, "agent_stale", destinations.values())
    heartbeats.record(other, heartbeats.Heartbeat(host="theirs", interval=30))
    Host.objects.filter(name="theirs").update(last_seen=timezone.now() - timedelta(hours=1))  # no rule there

    assert len(check_agents()) == 5  # one alert, one delivery per destination
    assert check_agents() == [] and check_agents() == []  # still stale: nothing more
    stale = Alert.objects.get(key__startswith="stale-")
    assert stale.cluster is None and stale.trigger == "agent_stale"
    assert AgentOutage.objects.filter(recovered_at=None).count() == 1  # theirs is not watched

    hook = receiver.on("/hook")
    assert len(hook) == 1
    body = hook[0].json
    assert body["event"] == "agent.stale" and body["hosts"] == ["gpu-a"] and body["severity"] == "warning"
    assert body["summary"].startswith("[warning] Stale agent: Agent on gpu-a stopped sending heartbeats")
    assert "(expected every 30 s)" in body["title"]
    assert body["cluster_url"] == f"https://tracedoc.example/hosts/{quiet_host.pk}/"
    pd = receiver.on("/pd")[0].json
    assert pd["event_action"] == "trigger" and pd["dedup_key"] == f"tracedoc-infra-agent-{quiet_host.pk}"
    am = receiver.on("/api/v2/alerts")[0].json[0]
    assert am["labels"]["alertname"] == "TracedocAgentStale" and "endsAt" not in am
    assert len(mailoutbox) == 1 and "gpu-a" in mailoutbox[0].subject

    heartbeats.record(infra, heartbeats.Heartbeat(host="gpu-a", agent_version="1.4.0", interval=30))
    assert len(check_agents()) == 5
    assert check_agents() == []
    back = receiver.on("/hook")[-1].json
    assert len(receiver.on("/hook")) == 2
    assert back["event"] == "agent.recovered" and back["severity"] == "info"
    assert "Agent on gpu-a is sending heartbeats again after 5 min without" in back["summary"]
    pd_back = receiver.on("/pd")[-1].json
    assert (pd_back["event_action"], pd_back["dedup_key"]) == ("resolve", pd["dedup_key"])
    am_back = receiver.on("/api/v2/alerts")[-1].json[0]
    assert am_back["labels"] == am["labels"] and am_back["endsAt"] >= am_back["startsAt"]
    assert AgentOutage.objects.get().recovered_at is not None

    Host.objects.filter(name="gpu-a").update(last_seen=timezone.now() - timedelta(minutes=3))
    assert len(check_agents()) == 5  # quiet again: a second outage, a second alert
    assert Alert.objects.filter(key__startswith="stale-").count() == 2


def test_a_short_interval_is_still_given_a_minute(infra, destinations, receiver, eager):
    rule(infra, "agent_stale", [destinations["webhook"]])
    heartbeats.record(infra, heartbeats.Heartbeat(host="fast", interval=1))
    Host.objects.filter(name="fast").update(last_seen=timezone.now() - timedelta(seconds=30))
    assert check_agents() == []  # 30 missed beats, but not a minute yet
    Host.objects.filter(name="fast").update(last_seen=timezone.now() - timedelta(seconds=61))
    assert len(check_agents()) == 1


def test_agent_rules_and_cluster_rules_keep_to_their_own(infra, destinations, receiver, eager, quiet_host,
                                                         django_capture_on_commit_callbacks):
    rule(infra, "new", [destinations["slack"]])
    agent_rule = rule(infra, "agent_stale", [destinations["webhook"]], min_severity="critical")
    with django_capture_on_commit_callbacks(execute=True):
        seen(infra, NCCL)
    assert [a.rule for a in Alert.objects.all()] != [agent_rule] and not Alert.objects.filter(rule=agent_rule)
    check_agents()  # the agent rule's severity does not hold it back; the cluster rule stays quiet
    assert [a.trigger for a in Alert.objects.order_by("pk")] == ["new", "agent_stale"]
    assert len(receiver.on("/slack")) == 1 and len(receiver.on("/hook")) == 1
