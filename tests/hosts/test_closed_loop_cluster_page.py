"""The cluster page's "Closed loop" section (hosts.closed_loop_page) on real reports: the capture
the cluster's rule declares (kind, trigger, bounds), the team's policy for it, and the orders
made for the cluster with their state and, for the done one, before -> after with links to
both traces (tests/support/closed_loop_world.py)."""
import re
from html import unescape

import pytest
from django.test import Client

from diagnosis.models import ClusterRecord
from tests.support.closed_loop_world import closed_loop_world, reports
from tests.support.cluster_world import NCCL, seen


@pytest.fixture(scope="module")
def spiky():
    return reports()


@pytest.fixture
def page(infra, alice, spiky):
    def open_page(policy_on: bool = True):
        world = closed_loop_world(infra, alice, spiky, policy_on=policy_on)
        client = Client()
        client.force_login(alice)
        response = client.get(f"/clusters/{world.cluster.pk}/")
        assert response.status_code == 200
        html = response.content.decode()
        assert html.count('id="closed-loop"') == 1
        start = html.index('id="closed-loop"')
        return world, html[start:html.index("</section>", start)]
    return open_page


def text(html: str) -> str:
    """The words a reader sees: tags out, entities read, no space left before punctuation."""
    words = " ".join(unescape(re.sub(r"<[^>]+>", " ", html)).split())
    return re.sub(r" ([:,.;])", r"\1", words)


def test_the_section_shows_the_plan_the_rule_declares(page):
    _, section = page()
    words = text(section)
    assert "What would decide it rule latency.jitter" in words
    assert "Capture profiler window" in words
    assert "Taken at the next step over 1.5x the running median" in words
    assert "Bounds 30 steps, at most 64 MiB, waits up to 24 h for the occurrence" in words
    assert "Not asked when the trace already holds kineto, nsys_sqlite" in words
    assert "Latest trace still asks for it" in words


def test_the_policy_state_and_its_toggles(page):
    _, section = page()
    assert "on the next finding of this cluster that asks orders its capture" in text(section)
    # the rule is opted in, the cluster itself is not
    assert re.search(r'aria-pressed="true"\s+aria-label="Order captures for every finding of rule latency.jitter: on"',
                     section)
    assert 'aria-label="Order captures for this cluster: off"' in section
    assert "at most 2 orders per host an hour and 4 per cluster a day" in text(section)


def test_a_team_whose_loop_is_off_is_told_so(page):
    _, section = page(policy_on=False)
    assert "off the team's loop is off: opting in here turns it on." in text(section)
    assert section.count('aria-pressed="false"') == 2


def test_orders_with_state_and_before_after_linking_both_traces(page):
    world, section = page()
    rows = dict(re.findall(r'<tbody data-order="(\d+)">(.*?)</tbody>', section, re.S))
    assert set(rows) == {str(world.done.pk), str(world.queued.pk)}  # the person's request is not the loop's
    done = text(rows[str(world.done.pk)])
    assert done.startswith("gpu-7 profiler window done")
    assert ("latency.jitter (undetermined) → latency.spike-host-work: 4 of the 31 profiled steps took 23.63 ms"
            in done)
    assert "save_checkpoint took 22.91 ms in each of them (typically 0 ms a step): 100% of the slow steps' extra time" \
        in done
    asked = world.done.before["finding"]
    assert f'href="/traces/{world.first.pk}/#finding-{asked}"' in rows[str(world.done.pk)]
    assert re.search(rf'href="/traces/{world.capture.pk}/#finding-F\d+"><code>latency.spike-host-work', rows[str(world.done.pk)])
    queued = text(rows[str(world.queued.pk)])
    assert queued.startswith("gpu-8 profiler window queued") and "· expires 19 hours from now" in queued
    assert "waiting for the capture, taken at the next step over 1.5x the running median" in queued


def test_a_cluster_without_a_plan_or_orders_has_no_section(infra, alice):
    seen(infra, NCCL)  # its rule declares no capture
    client = Client()
    client.force_login(alice)
    cluster = ClusterRecord.objects.get(team=infra, fingerprint=NCCL.fingerprint)
    html = client.get(f"/clusters/{cluster.pk}/").content.decode()
    assert "Triage" in html and 'id="closed-loop"' not in html
