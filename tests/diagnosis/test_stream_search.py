"""The issue stream's search bar on the stored world (PostgreSQL in `make test`): each term
narrows the clusters as it says, the API takes the same `query`, the page shows unresolved
issues by default, turns a link of the older parameters into its query, and shows what it
cannot read (400, never a 500). Snooze presets in plain words."""
from datetime import timedelta
from urllib.parse import parse_qs, urlparse

import pytest
from django.utils import timezone

from diagnosis.models import ClusterRecord
from tests.diagnosis.test_cluster_stream_api import URL, fingerprints, world  # noqa: F401 (fixture)


@pytest.fixture
def triaged(world, bob):  # noqa: F811
    ClusterRecord.objects.filter(pk=world["fp-nccl"].pk).update(status="resolved")
    ClusterRecord.objects.filter(pk=world["fp-oom"].pk).update(assignee=bob)
    return world


@pytest.mark.parametrize("query, expected", [
    ("", ["fp-graph", "fp-oom", "fp-nccl"]),
    ("is:unresolved", ["fp-graph", "fp-oom"]),
    ("-is:unresolved", ["fp-nccl"]),
    ("severity:>=error", ["fp-oom", "fp-nccl"]),
    ("severity:<error", ["fp-graph"]),
    ("severity:warning,critical", ["fp-graph", "fp-oom"]),
    ("root_cause:nccl.*", ["fp-nccl"]),
    ("root_cause:*.oom", ["fp-oom"]),
    ("root_cause:nccl.", []),  # no `*`: the whole root cause
    ("root_cause:nccl.timeout.stream_blocked,memory.oom", ["fp-oom", "fp-nccl"]),
    ("host:gpu-b", ["fp-oom", "fp-nccl"]),
    ("host:gpu-*", ["fp-graph", "fp-oom", "fp-nccl"]),
    ("-host:gpu-b", ["fp-graph"]),
    ("label:env=prod", ["fp-graph", "fp-nccl"]),
    ("label:env=prod label:host=gpu-c", ["fp-graph"]),
    ("label:env__contains=p", []),
    ("slo:ttft", ["fp-oom"]),
    ("is:unassigned", ["fp-graph", "fp-nccl"]),
    ("assignee:bob", ["fp-oom"]),
    ("cuda_GRAPH", ["fp-graph"]),
    ("-incident", []),
    ("first_seen:-3d", ["fp-graph", "fp-oom"]),
    ("is:unresolved severity:>=error host:gpu-* incident", ["fp-oom"]),
    ("sort:severity", ["fp-oom", "fp-nccl", "fp-graph"]),
])
def test_each_term_over_the_api(alice_api, triaged, query, expected):
    assert fingerprints(alice_api.get(URL, {"query": query})) == expected


def test_the_query_and_the_older_parameters_both_hold(alice_api, triaged):
    assert fingerprints(alice_api.get(URL, {"query": "host:gpu-b", "min_severity": "critical"})) == ["fp-oom"]


def test_a_query_the_api_cannot_read_is_a_400_that_says_why(alice_api, triaged):
    response = alice_api.get(URL, {"query": "is:fixed"})
    assert response.status_code == 400
    problem = {p["name"]: p["reason"] for p in response.json()["invalid_params"]}
    assert "is:fixed: expected one of" in problem["query"]


def test_the_page_shows_unresolved_issues_by_default(client, alice, triaged):
    client.force_login(alice)
    page = client.get("/clusters/")
    assert page.status_code == 200
    html = page.content.decode()
    assert 'value="is:unresolved"' in html
    assert f'id="cluster-row-{triaged["fp-oom"].pk}"' in html and f'id="cluster-row-{triaged["fp-nccl"].pk}"' not in html
    assert f'id="cluster-row-{triaged["fp-nccl"].pk}"' in client.get("/clusters/", {"query": ""}).content.decode()


def test_the_page_shows_an_error_for_a_bad_query_not_a_500(client, alice, triaged):
    client.force_login(alice)
    page = client.get("/clusters/", {"query": 'colour:red host:"gpu'})
    assert page.status_code == 400
    assert "unknown key &#x27;colour:&#x27;" in page.content.decode()
    assert 'aria-invalid="true"' in page.content.decode()


def test_a_link_of_the_older_parameters_opens_as_its_query(client, alice, triaged):
    client.force_login(alice)
    response = client.get("/clusters/", {"status": "open", "label": "env=prod", "min_severity": "warning",
                                         "period": 7})
    assert response.status_code == 302
    params = parse_qs(urlparse(response.url).query)
    assert params == {"query": ["is:open severity:>=warning label:env=prod"], "period": ["7"]}
    page = client.get(response.url)
    assert f'id="cluster-row-{triaged["fp-graph"].pk}"' in page.content.decode()
    assert page.content.decode().count('class="cluster-row"') == 1


@pytest.mark.parametrize("preset, delay", [("1h", timedelta(hours=1)), ("tomorrow", timedelta(days=1)),
                                           ("1w", timedelta(weeks=1))])
def test_snooze_presets(client, alice, triaged, preset, delay):
    client.force_login(alice)
    oom = triaged["fp-oom"]
    response = client.post(f"/clusters/{oom.pk}/snooze/", {"preset": preset, "back": "?query=is%3Aunresolved"})
    assert response.status_code == 302 and response.url == "/clusters/?query=is%3Aunresolved"
    oom.refresh_from_db()
    assert oom.status == "ignored" and oom.snooze_count is None
    assert abs((oom.snooze_until - timezone.now()) - delay) < timedelta(minutes=1)


def test_snooze_until_it_happens_n_more_times(client, alice, triaged):
    client.force_login(alice)
    nccl = triaged["fp-nccl"]
    assert nccl.trace_count == 2
    response = client.post(f"/clusters/{nccl.pk}/snooze/", {"more": 3})
    assert response.status_code == 302 and response.url == f"/clusters/{nccl.pk}/"
    nccl.refresh_from_db()
    assert (nccl.status, nccl.snooze_count, nccl.snooze_until) == ("ignored", 5, None)
    assert "until it is seen in 5 traces" in client.get(response.url).content.decode()


def test_a_snooze_of_nothing_says_how(client, alice, triaged):
    client.force_login(alice)
    oom = triaged["fp-oom"]
    page = client.post(f"/clusters/{oom.pk}/snooze/", {}, follow=True)
    assert "snooze for a while, until it happens again, or until a time" in page.content.decode()
    oom.refresh_from_db()
    assert oom.status == "open"
