"""A capture's own trace page says which request it answered (hosts.answered_order, on
PostgreSQL): for the closed loop's order its kind, host and trigger, the cluster and rule it was
ordered for, the trace whose finding asked (linked at that finding) and what it decided; for a
person's request who asked; the trace it adds to. A trace nobody asked for says nothing, and
the asking trace is not mistaken for the answer."""
import re
from html import unescape

from ingest.models import Trace


def card(client, trace) -> str:
    html = client.get(f"/traces/{trace.pk}/").content.decode()
    found = re.search(r'<section class="card answered-order" id="answered-order".*?</section>', html, re.S)
    return found.group(0) if found else ""


def words(html: str) -> str:
    return " ".join(unescape(re.sub(r"<[^>]+>", " ", html)).split())


def test_the_capture_names_the_order_its_cluster_rule_trigger_and_the_asking_trace(world, alice_client):
    html = card(alice_client, world.capture)
    order, first = world.done, world.first
    assert "Closed-loop capture" in html and f"capture request <strong>#{order.pk}</strong>" in html
    assert f'href="/hosts/{order.host_id}/">gpu-7</a>' in html
    assert f"taken {order.occasion}" in words(html) and '<span class="state state-done">done</span>' in html
    assert f'href="/clusters/{world.cluster.pk}/#closed-loop"' in html and "<code>latency.jitter</code>" in html
    asked = order.before["finding"]
    assert f'href="/traces/{first.pk}/#finding-{asked}"' in html and f"finding {asked}" in words(html)
    # what it decided: the capture's own finding, on this page
    answer = next(f for f in world.capture.report["findings"] if f["rule_id"] == "latency.spike-host-work")
    assert f'href="#finding-{answer["id"]}"><code>latency.spike-host-work</code></a>' in html
    assert "save_checkpoint" in words(html)
    assert f'href="/traces/{first.pk}/">' in html and "too, under before/" in words(html)


def test_a_persons_capture_says_who_asked(world, alice_client, alice):
    answer = Trace.objects.create(team=world.first.team, created_by=alice, state="done", report=world.first.report,
                                  labels={"host": "gpu-7", "capture_request": str(world.by_person.pk)})
    world.by_person.finish(answer)
    html = card(alice_client, answer)
    assert "On-demand capture" in html and f"#{world.by_person.pk}" in html
    assert "Asked by alice on the host page" in words(html) and "closed loop" not in words(html).lower()


def test_a_trace_nobody_asked_for_and_the_asking_trace_show_no_card(world, alice_client):
    assert card(alice_client, world.first) == ""
    page = alice_client.get(f"/traces/{world.first.pk}/")
    assert page.status_code == 200 and 'id="answered-order"' not in page.content.decode()
