"""`GET /api/v1/clusters/`: the issue stream's filters, sort, pagination, markers, per-day
counts and affected hosts/labels, on a world of four incidents and a repeat."""
from datetime import timedelta

import pytest
from django.utils import timezone

from diagnosis.models import ClusterRecord, FindingRecord
from tests.support.cluster_world import COLD, GRAPH, NCCL, OOM, days_ago, seen

URL = "/api/v1/clusters/"


@pytest.fixture
def world(infra, other):
    """nccl on gpu-a (prod, 10 days ago) and again on gpu-b (staging, 2 days ago) with an oom;
    a graph abort on gpu-c (prod) with an info cold start, today; another team's nccl."""
    seen(infra, NCCL, at=days_ago(10), labels={"host": "gpu-a", "env": "prod"})
    seen(infra, NCCL, OOM, at=days_ago(2), labels={"env": "staging"}, hosts=("gpu-b",))
    seen(infra, GRAPH, COLD, at=days_ago(0), labels={"host": "gpu-c", "env": "prod"})
    seen(other, NCCL, at=days_ago(1), labels={"host": "theirs"})
    return {c.fingerprint: c for c in ClusterRecord.objects.filter(team=infra)}


def fingerprints(response) -> list[str]:
    assert response.status_code == 200, response.content
    return [row["fingerprint"] for row in response.json()["results"]]


def test_an_info_finding_opens_no_cluster_and_stays_on_its_trace(world):
    assert set(world) == {"fp-nccl", "fp-oom", "fp-graph"}
    cold = FindingRecord.objects.get(root_cause="startup.cold_start")
    assert cold.cluster is None and cold.trace.name.endswith("fp-cold")


def test_the_stream_lists_the_team_newest_first(alice_api, world):
    assert fingerprints(alice_api.get(URL)) == ["fp-graph", "fp-oom", "fp-nccl"]


@pytest.mark.parametrize("query, expected", [
    ("status=resolved", ["fp-nccl"]),
    ("status=resolved&status=open", ["fp-graph", "fp-oom", "fp-nccl"]),
    ("severity=critical", ["fp-oom"]),
    ("severity=warning&severity=critical", ["fp-graph", "fp-oom"]),
    ("min_severity=error", ["fp-oom", "fp-nccl"]),
    ("root_cause=memory.oom", ["fp-oom"]),
    ("host=gpu-a", ["fp-nccl"]),
    ("host=gpu-b", ["fp-oom", "fp-nccl"]),
    ("host=theirs", []),
    ("label=env=prod", ["fp-graph", "fp-nccl"]),
    ("label=env=staging&label=host=gpu-a", []),
    ("label=env=prod,host=gpu-c", ["fp-graph"]),
    ("label=env__contains=p", []),
    ("slo=ttft", ["fp-oom"]),
    ("q=CUDA_GRAPH", ["fp-graph"]),
    ("q=fp-oom", ["fp-oom"]),
    ("assignee=bob", ["fp-oom"]),
    ("assignee=none", ["fp-graph", "fp-nccl"]),
])
def test_each_filter(alice_api, bob, world, query, expected):
    ClusterRecord.objects.filter(pk=world["fp-nccl"].pk).update(status="resolved")
    ClusterRecord.objects.filter(pk=world["fp-oom"].pk).update(assignee=bob)
    assert fingerprints(alice_api.get(f"{URL}?{query}")) == expected


def test_first_and_last_seen_ranges(alice_api, world):
    week_ago = (timezone.now() - timedelta(days=7)).isoformat()
    yesterday = (timezone.now() - timedelta(days=1)).isoformat()
    assert fingerprints(alice_api.get(URL, {"first_seen_after": week_ago})) == ["fp-graph", "fp-oom"]
    assert fingerprints(alice_api.get(URL, {"first_seen_before": week_ago})) == ["fp-nccl"]
    assert fingerprints(alice_api.get(URL, {"last_seen_after": yesterday})) == ["fp-graph"]
    assert fingerprints(alice_api.get(URL, {"last_seen_before": yesterday})) == ["fp-oom", "fp-nccl"]


def test_a_range_that_ends_before_it_starts_matches_nothing(alice_api, world):
    """(schemathesis found it a 500: the per-day counts had no day)"""
    yesterday = (timezone.now() - timedelta(days=1)).isoformat()
    week_ago = (timezone.now() - timedelta(days=7)).isoformat()
    response = alice_api.get(URL, {"last_seen_after": yesterday, "last_seen_before": week_ago})
    assert fingerprints(response) == []
    assert fingerprints(alice_api.get(URL, {"first_seen_after": yesterday, "last_seen_before": week_ago})) == []


@pytest.mark.parametrize("sort, expected", [
    ("last_seen", ["fp-graph", "fp-oom", "fp-nccl"]),
    ("first_seen", ["fp-graph", "fp-oom", "fp-nccl"]),
    ("count", ["fp-nccl", "fp-graph", "fp-oom"]),
    ("severity", ["fp-oom", "fp-nccl", "fp-graph"]),
])
def test_sort(alice_api, world, sort, expected):
    assert fingerprints(alice_api.get(URL, {"sort": sort})) == expected


@pytest.mark.parametrize("query", ["sort=random", "severity=fatal", "status=maybe", "label=env",
                                   "first_seen_after=yesterday", "period=1000"])
def test_a_bad_filter_is_a_400_that_names_it(alice_api, world, query):
    response = alice_api.get(f"{URL}?{query}")
    assert response.status_code == 400
    assert query.split("=")[0] in {p["name"] for p in response.json()["invalid_params"]}


def test_pagination(alice_api, world):
    first = alice_api.get(URL, {"limit": 2}).json()
    assert first["count"] == 3 and len(first["results"]) == 2 and first["next"]
    rest = alice_api.get(URL, {"limit": 2, "offset": 2}).json()
    assert [r["fingerprint"] for r in first["results"] + rest["results"]] == ["fp-graph", "fp-oom", "fp-nccl"]


def test_markers_per_day_counts_hosts_and_labels(alice_api, world):
    ClusterRecord.objects.filter(pk=world["fp-nccl"].pk).update(status="resolved")
    seen(world["fp-nccl"].team, NCCL, at=days_ago(0), labels={"host": "gpu-d", "env": "prod"})
    rows = {r["fingerprint"]: r for r in alice_api.get(URL, {"period": 7}).json()["results"]}
    nccl, oom = rows["fp-nccl"], rows["fp-oom"]
    assert nccl["status"] == "regressed" and nccl["is_regressed"] and not nccl["is_new"]  # first seen 10 days ago
    assert oom["is_new"] and not oom["is_regressed"]
    assert len(nccl["per_day"]) == 8  # seven days back and today
    assert [d["traces"] for d in nccl["per_day"]] == [0, 0, 0, 0, 0, 1, 0, 1]  # the 10-day-old trace is outside
    assert nccl["trace_count"] == 3
    assert nccl["hosts"] == ["gpu-a", "gpu-b", "gpu-d"]
    assert nccl["labels"] == {"env": ["prod", "staging"]}  # host is shown as hosts, not as a label


def test_another_teams_clusters_never_show(charlie_api, world):
    assert fingerprints(charlie_api.get(URL)) == ["fp-nccl"]
    assert charlie_api.get(f"{URL}{world['fp-oom'].pk}/").status_code == 404
