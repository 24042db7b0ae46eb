"""A capture request's state in the same words on every page (CaptureRequest.state_word): the
host's page and the cluster's Closed loop section say queued / taken / done / failed / expired
for the same order, never the agent protocol's pending / sent (on PostgreSQL)."""
import re

import pytest
from django.utils import timezone

from hosts.models import CaptureRequest

WORDS = {"pending": "queued", "sent": "taken", "done": "done", "failed": "failed", "expired": "expired"}


def test_every_state_has_its_word_and_badge():
    assert {s.value for s in CaptureRequest.State} == set(WORDS)
    for state, word in WORDS.items():
        request = CaptureRequest(state=state)
        assert request.state_word == word
        assert request.state_class == ("parsing" if state in CaptureRequest.OUTSTANDING else state)


def host_page_state(alice_client, order) -> str:
    html = alice_client.get(f"/hosts/{order.host_id}/").content.decode()
    row = re.search(rf'<tr data-capture="{order.pk}">(.*?)</tr>', html, re.S).group(1)
    return re.findall(r'<span class="state state-([a-z]+)">([a-z]+)</span>', row)[0]


def cluster_page_state(alice_client, order) -> str:
    html = alice_client.get(f"/clusters/{order.cluster_id}/").content.decode()
    body = re.search(rf'<tbody data-order="{order.pk}">(.*?)</tbody>', html, re.S).group(1)
    return re.findall(r'<span class="state state-([a-z]+)">([a-z]+)</span>', body)[0]


@pytest.mark.parametrize("state", list(WORDS))
def test_the_host_page_and_the_cluster_page_say_the_same_word(world, alice_client, state):
    order = world.queued
    CaptureRequest.objects.filter(pk=order.pk).update(state=state, sent_at=timezone.now())
    on_host, on_cluster = host_page_state(alice_client, order), cluster_page_state(alice_client, order)
    assert on_host == on_cluster == (CaptureRequest(state=state).state_class, WORDS[state])


def test_a_persons_request_is_queued_on_the_host_page_too(world, alice_client):
    assert world.by_person.state == "pending"
    assert host_page_state(alice_client, world.by_person) == ("parsing", "queued")
