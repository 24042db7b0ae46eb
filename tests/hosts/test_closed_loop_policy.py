"""The closed loop's policy on PostgreSQL (hosts.closed_loop): a stored report whose finding
carries a capture plan orders it only when the team turned the loop on and opted the rule or
the cluster in; never a second order outstanding for one cluster and host; an order expires
and is then not handed out; the host's hourly limit holds. The report is a real diagnosis of
a real capture (tests/fixtures/closed_loop/spiky_cpu: latency.jitter, plan: a profiler window)."""
from datetime import timedelta

import pytest
from django.utils import timezone

from diagnosis.models import FindingRecord, record_report
from diagnosis.engine.pipeline import run
from hosts.models import CapturePolicy, CaptureRequest
from ingest.models import Trace
from tests.corpus import ROOT
from tests.hosts.test_agent_hosts import beat

TOKENS = ROOT / "tests" / "fixtures" / "closed_loop" / "spiky_cpu" / "token_latency.jsonl"


@pytest.fixture(scope="module")
def jitter_report():
    report = run([TOKENS])
    [jitter] = [f for f in report.findings if f.rule_id == "latency.jitter"]
    assert jitter.capture and jitter.capture.trigger == "slow_step"
    return report


@pytest.fixture
def stored(infra, alice, jitter_report):
    def store(host: str = "gpu-7") -> Trace:
        trace = Trace.objects.create(team=infra, created_by=alice, labels={"host": host}, state="done")
        record_report(trace, jitter_report)  # the receiver runs the closed loop, as after a diagnosis
        return trace
    return store


def orders():
    return list(CaptureRequest.objects.order_by("id"))


def test_nothing_is_ordered_until_the_team_opts_in(alice_api, infra, stored):
    beat(alice_api)
    stored()
    assert orders() == []
    CapturePolicy.objects.create(team=infra, enabled=True, rules=["gpu.launch-bound"])
    stored()
    assert orders() == []  # the loop is on, but not for this rule or cluster


def test_a_rule_opted_in_orders_once_per_cluster_and_host_until_the_order_is_over(alice_api, infra, stored):
    beat(alice_api)
    beat(alice_api, host="gpu-8")
    CapturePolicy.objects.create(team=infra, enabled=True, rules=["latency.jitter"], max_per_host_per_hour=2,
                                 order_ttl_s=3600)
    first = stored()
    [order] = orders()
    assert (order.origin, order.rule_id, order.kind, order.trigger, order.state) == \
        ("auto", "latency.jitter", "profiler", "slow_step", "pending")
    assert order.source_trace == first and order.host.name == "gpu-7" and order.before["rule_id"] == "latency.jitter"
    assert timedelta(minutes=59) < order.expires_at - timezone.now() <= timedelta(hours=1)
    assert order.plan["factor"] == 1.5 and order.plan["max_bytes"] > 0

    stored()
    assert len(orders()) == 1  # outstanding for this cluster and host: no second order
    stored(host="gpu-8")
    assert [o.host.name for o in orders()] == ["gpu-7", "gpu-8"]  # another host of the cluster gets its own

    # the order expires: the next heartbeat marks it and hands nothing out
    CaptureRequest.objects.filter(pk=order.pk).update(expires_at=timezone.now() - timedelta(seconds=1))
    assert beat(alice_api)["captures"] == []
    order.refresh_from_db()
    assert order.state == "expired" and "expired" in order.error

    stored()  # nothing outstanding now: a second order, the host's second this hour
    assert len(orders()) == 3
    CaptureRequest.objects.filter(state="pending").update(state="done")
    stored()  # a third in the hour is over the host's limit of 2
    assert [o.host.name for o in orders()].count("gpu-7") == 2


def test_a_cluster_opted_in_orders_and_the_order_reaches_the_agent_once(alice_api, infra, stored):
    beat(alice_api)
    policy = CapturePolicy.objects.create(team=infra, enabled=True)
    first = stored()
    cluster = FindingRecord.objects.get(trace=first, rule_id="latency.jitter").cluster
    assert orders() == []
    policy.clusters.add(cluster)
    stored()
    [order] = orders()
    assert order.cluster == cluster
    [handed] = beat(alice_api)["captures"]
    assert handed["id"] == order.pk and handed["trigger"] == "slow_step" and handed["factor"] == 1.5
    assert 0 < handed["expires_in"] <= 24 * 3600
    assert beat(alice_api)["captures"] == []  # sent once


def test_the_policy_api_turns_it_on_for_a_team_and_its_clusters_only(alice_api, infra, stored):
    beat(alice_api)
    trace = stored()
    cluster = FindingRecord.objects.get(trace=trace, rule_id="latency.jitter").cluster
    put = alice_api.put("/api/v1/capture-policy/", {"enabled": True, "rules": ["latency.jitter"],
                                                    "clusters": [cluster.pk, 10**9]}, format="json")
    assert put.status_code == 200, put.content
    body = alice_api.get("/api/v1/capture-policy/").json()
    assert body["enabled"] and body["rules"] == ["latency.jitter"] and body["clusters"] == [cluster.pk]
    bad = alice_api.put("/api/v1/capture-policy/", {"max_per_host_per_hour": -1}, format="json")
    assert bad.status_code == 400 and "max_per_host_per_hour" in bad.json()["detail"]
