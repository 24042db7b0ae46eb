"""The trace page's finding card (templates/diagnosis/partials/finding.html): a finding whose
report carries a capture plan says what would decide it, and names the closed loop's orders
for it: outstanding ones with when the hook takes them, done ones with what decided it; a
finding without an order points at the cluster page's policy."""
import re
from html import unescape

import pytest
from django.test import Client

from tests.support.closed_loop_world import closed_loop_world, reports


@pytest.fixture(scope="module")
def spiky():
    return reports()


def card(client, trace, rule_id: str) -> str:
    html = client.get(f"/traces/{trace.pk}/").content.decode()
    cards = re.findall(r'<article class="finding".*?</article>', html, re.S)
    [found] = [c for c in cards if f"<code>{rule_id}</code>" in c]
    return found


def words(html: str) -> str:
    text = " ".join(unescape(re.sub(r"<[^>]+>", " ", html)).split())
    return re.sub(r"\( ", "(", re.sub(r" ([:,.;)])", r"\1", text))


def test_the_card_says_what_would_decide_it_and_which_orders_run(infra, alice, spiky):
    world = closed_loop_world(infra, alice, spiky)
    client = Client()
    client.force_login(alice)
    jitter = card(client, world.first, "latency.jitter")
    text = words(jitter)
    assert ("What would decide it: profiler of 30 step(s) at the next step over 1.5x the running median, "
            "at most 64 MiB: a profiler window that holds the next slow step") in text
    orders = dict(re.findall(r'<li data-order="(\d+)">(.*?)</li>', jitter, re.S))
    assert set(orders) == {str(world.done.pk), str(world.queued.pk)}
    assert re.fullmatch(r"Order on gpu-8 queued outstanding since (now|a second ago|\d+ seconds ago): the hook takes it "
                        r"at the next step over 1\.5x the running median\.", words(orders[str(world.queued.pk)]))
    assert words(orders[str(world.done.pk)]) == "Order on gpu-7 done → latency.spike-host-work decided it."
    assert re.search(rf'href="/traces/{world.capture.pk}/#finding-F\d+"', orders[str(world.done.pk)])


def test_a_finding_without_an_order_points_at_the_policy(infra, alice, spiky):
    world = closed_loop_world(infra, alice, spiky, policy_on=False)
    world.queued.delete()
    client = Client()
    client.force_login(alice)
    later = client.get(f"/traces/{world.first.pk}/")  # the first trace made the done order: still named
    assert "decided it" in later.content.decode()
    from tests.support.closed_loop_world import stored
    again = stored(infra, alice, spiky.asking, host="gpu-7")  # the loop is off: no order
    text = words(card(client, again, "latency.jitter"))
    assert "What would decide it" in text and "Order on" not in text
    assert "No order outstanding. The closed loop takes it by itself where the team opts this rule or its " \
           "cluster in (cluster page)." in text
    assert f'href="/clusters/{world.cluster.pk}/#closed-loop"' in card(client, again, "latency.jitter")


def test_a_rule_test_card_has_no_cluster_and_names_no_order(db, spiky):
    """The rule editor's test result includes the same card, without a cluster or a stored trace."""
    from django.template.loader import render_to_string
    [jitter] = [f for f in spiky.asking.findings if f.rule_id == "latency.jitter"]
    html = render_to_string("diagnosis/partials/finding.html", {"f": jitter})
    assert "What would decide it" in words(html) and "Order on" not in html
