"""The cluster page's closed-loop toggles (hosts.policy_views) on PostgreSQL: a team member opts
the cluster, or its rule, in and out through htmx and gets the section back; opting in turns
the team's loop on and the next finding of the cluster orders its capture; someone outside
the team cannot change the policy (the API's rule for a session: a member of the team), nor
can a GET, a rule the cluster does not have, or nobody logged in."""
import pytest
from django.test import Client

from diagnosis.models import FindingRecord
from hosts.models import CapturePolicy, CaptureRequest
from tests.support.closed_loop_world import reports, stored


@pytest.fixture(scope="module")
def spiky():
    return reports()


@pytest.fixture
def cluster(infra, alice, spiky):
    from hosts.models import Host
    from django.utils import timezone
    Host.objects.create(team=infra, name="gpu-7", last_seen=timezone.now())
    trace = stored(infra, alice, spiky.asking, host="gpu-7")
    return FindingRecord.objects.get(trace=trace, rule_id="latency.jitter").cluster


def client_of(user) -> Client:
    client = Client()
    client.force_login(user)
    return client


def toggle(client, cluster, **data):
    return client.post(f"/hosts/closed-loop/{cluster.pk}/", data, HTTP_HX_REQUEST="true")


def test_a_member_opts_the_cluster_in_and_the_next_finding_orders(bob, infra, alice, cluster, spiky):
    assert not CapturePolicy.objects.filter(team=infra).exists()  # off: nothing written by reading the page
    assert client_of(bob).get(f"/clusters/{cluster.pk}/").status_code == 200
    assert not CapturePolicy.objects.filter(team=infra).exists()

    answer = toggle(client_of(bob), cluster, target="cluster", on="1")
    assert answer.status_code == 200
    html = answer.content.decode()
    assert html.lstrip().startswith('<section class="card closed-loop" id="closed-loop">')
    assert 'aria-label="Order captures for this cluster: on"' in html
    policy = CapturePolicy.objects.get(team=infra)
    assert policy.enabled and list(policy.clusters.all()) == [cluster] and policy.rules == []

    stored(infra, alice, spiky.asking, host="gpu-7")
    [order] = CaptureRequest.objects.all()
    assert (order.origin, order.cluster, order.rule_id) == ("auto", cluster, "latency.jitter")

    toggle(client_of(bob), cluster, target="cluster", on="0")
    policy.refresh_from_db()
    assert policy.enabled and list(policy.clusters.all()) == []  # out again; the team's switch stays


def test_the_rule_toggle_adds_and_removes_only_that_rule(alice, infra, cluster):
    CapturePolicy.objects.create(team=infra, enabled=True, rules=["nccl.timeout-undetermined"])
    html = toggle(client_of(alice), cluster, target="rule", rule_id="latency.jitter", on="1").content.decode()
    assert 'aria-label="Order captures for every finding of rule latency.jitter: on"' in html
    assert CapturePolicy.objects.get(team=infra).rules == ["nccl.timeout-undetermined", "latency.jitter"]
    toggle(client_of(alice), cluster, target="rule", rule_id="latency.jitter", on="1")  # twice: still once
    assert CapturePolicy.objects.get(team=infra).rules == ["nccl.timeout-undetermined", "latency.jitter"]
    toggle(client_of(alice), cluster, target="rule", rule_id="latency.jitter", on="0")
    assert CapturePolicy.objects.get(team=infra).rules == ["nccl.timeout-undetermined"]


def test_someone_outside_the_team_cannot_toggle(charlie, infra, cluster):
    answer = toggle(client_of(charlie), cluster, target="cluster", on="1")
    assert answer.status_code == 404
    answer = toggle(client_of(charlie), cluster, target="rule", rule_id="latency.jitter", on="1")
    assert answer.status_code == 404
    assert not CapturePolicy.objects.filter(team=infra).exists()


def test_no_login_no_get_and_no_foreign_rule(alice, infra, cluster):
    anonymous = Client().post(f"/hosts/closed-loop/{cluster.pk}/", {"target": "cluster", "on": "1"})
    assert anonymous.status_code == 302 and "/accounts/login/" in anonymous["Location"]
    assert client_of(alice).get(f"/hosts/closed-loop/{cluster.pk}/?target=cluster&on=1").status_code == 405
    # the page opts in only the cluster's own rules that declare a capture, not any rule id
    refused = toggle(client_of(alice), cluster, target="rule", rule_id="gpu.launch-bound", on="1")
    assert refused.status_code == 422 and "a rule of this cluster that declares a capture" in refused.content.decode()
    assert not CapturePolicy.objects.filter(team=infra, enabled=True).exists()


def test_without_htmx_the_form_posts_and_the_page_reloads(alice, infra, cluster):
    answer = client_of(alice).post(f"/hosts/closed-loop/{cluster.pk}/", {"target": "cluster", "on": "1"})
    assert answer.status_code == 302 and answer["Location"] == f"/clusters/{cluster.pk}/#closed-loop"
    assert CapturePolicy.objects.get(team=infra).clusters.get() == cluster
