"""Merge and unmerge of clusters (issue 32): merging folds a cluster's fingerprints into
another so its future occurrences land there; unmerging splits a fingerprint back out with
the findings recorded under it. Logged in the activity and the audit log, on the API and the
pages."""
import pytest

from accounts.models import AuditEntry
from diagnosis.cluster_merge import MergeRefused, merge, merged_fingerprints, unmerge
from diagnosis.models import ClusterRecord, ClusterTransition
from tests.support.cluster_world import GRAPH, NCCL, OOM, Cause, days_ago, seen

NCCL_ON_RANK1 = Cause("fp-nccl-rank1", "error", "nccl.timeout.peer_missing")


@pytest.fixture
def world(infra):
    seen(infra, NCCL, at=days_ago(3), labels={"host": "gpu-a"})
    seen(infra, NCCL, at=days_ago(2), labels={"host": "gpu-a"})
    seen(infra, NCCL_ON_RANK1, at=days_ago(1), labels={"host": "gpu-b"})
    seen(infra, OOM, at=days_ago(1))
    by = {c.fingerprint: c for c in ClusterRecord.objects.filter(team=infra)}
    return by[NCCL.fingerprint], by[NCCL_ON_RANK1.fingerprint], by[OOM.fingerprint]


def test_merge_folds_findings_sightings_and_future_occurrences(infra, alice, world):
    nccl, rank1, oom = world
    target = merge(nccl, [rank1], alice)
    assert not ClusterRecord.objects.filter(pk=rank1.pk).exists()
    assert target.trace_count == 3 and target.first_seen <= days_ago(2.9)
    assert sorted(target.sightings.values_list("host", flat=True)) == ["gpu-a", "gpu-a", "gpu-b"]
    assert [m.fingerprint for m in merged_fingerprints(target)] == [NCCL_ON_RANK1.fingerprint]
    trace, transitions = seen(infra, NCCL_ON_RANK1, at=days_ago(0))  # a future occurrence
    assert [t.cluster_id for t in transitions] == [nccl.pk] and transitions[0].kind == ClusterTransition.SEEN
    target.refresh_from_db()
    assert target.trace_count == 4 and ClusterRecord.objects.filter(team=infra).count() == 2
    assert trace.findings.get().cluster_id == nccl.pk
    entry = target.activity.get(kind="merged")
    assert (entry.actor, entry.old) == (alice, NCCL_ON_RANK1.fingerprint)
    audit = AuditEntry.objects.filter(object_type="diagnosis.ClusterRecord")
    assert audit.get(object_id=str(nccl.pk), action="updated").actor == alice
    assert audit.get(object_id=str(rank1.pk), action="deleted").actor == alice


def test_unmerge_splits_the_fingerprint_back_out_with_its_findings(infra, alice, world):
    nccl, rank1, oom = world
    merge(nccl, [rank1, oom], alice)
    seen(infra, NCCL_ON_RANK1, at=days_ago(0))
    split = unmerge(nccl, NCCL_ON_RANK1.fingerprint, alice)
    assert (split.fingerprint, split.trace_count, split.root_cause) == (
        NCCL_ON_RANK1.fingerprint, 2, "nccl.timeout.peer_missing")
    assert set(split.sightings.values_list("host", flat=True)) == {"gpu-b", ""}
    nccl.refresh_from_db()
    assert nccl.trace_count == 3  # its own two and the OOM's one, still merged
    assert [m.fingerprint for m in merged_fingerprints(nccl)] == [OOM.fingerprint]
    assert not nccl.sightings.filter(host="gpu-b").exists()
    _, transitions = seen(infra, NCCL_ON_RANK1)  # lands on the split-out cluster from now on
    assert [t.cluster_id for t in transitions] == [split.pk]
    assert nccl.activity.get(kind="unmerged").actor == alice
    with pytest.raises(MergeRefused):
        unmerge(nccl, NCCL.fingerprint, alice)  # its own fingerprint is not merged into it


def test_a_cluster_merged_into_one_merged_again_can_still_be_split_out(infra, alice, world):
    nccl, rank1, oom = world
    merge(rank1, [oom], alice)
    merge(nccl, [rank1], alice)
    assert {m.fingerprint for m in merged_fingerprints(nccl)} == {OOM.fingerprint, NCCL_ON_RANK1.fingerprint}
    split = unmerge(nccl, OOM.fingerprint, alice)
    assert split.trace_count == 1 and split.severity == "critical"


def test_merge_refuses_other_teams_and_itself(infra, other, alice, world):
    nccl, _, _ = world
    seen(other, GRAPH)
    theirs = ClusterRecord.objects.get(team=other)
    with pytest.raises(MergeRefused):
        merge(nccl, [theirs], alice)
    with pytest.raises(MergeRefused):
        merge(nccl, [nccl], alice)


def test_api_merge_and_unmerge(alice_api, charlie_api, infra, world):
    nccl, rank1, oom = world
    assert alice_api.post(f"/api/v1/clusters/{nccl.pk}/merge/", {"ids": [rank1.pk, 99999]},
                          format="json").status_code == 404
    assert charlie_api.post(f"/api/v1/clusters/{nccl.pk}/merge/", {"ids": [rank1.pk]},
                            format="json").status_code == 404
    response = alice_api.post(f"/api/v1/clusters/{nccl.pk}/merge/", {"ids": [rank1.pk]}, format="json")
    assert response.status_code == 200 and response.json()["trace_count"] == 3
    bad = alice_api.post(f"/api/v1/clusters/{nccl.pk}/unmerge/", {"fingerprint": "fp-none"}, format="json")
    assert bad.status_code == 400 and "not merged" in str(bad.json()), bad.json()
    response = alice_api.post(f"/api/v1/clusters/{nccl.pk}/unmerge/", {"fingerprint": NCCL_ON_RANK1.fingerprint},
                              format="json")
    assert response.status_code == 201 and response.json()["fingerprint"] == NCCL_ON_RANK1.fingerprint
    assert response.json()["trace_count"] == 1


def test_pages_merge_from_the_stream_and_unmerge_from_the_cluster_page(client, alice, world):
    nccl, rank1, oom = world
    client.force_login(alice)
    assert "Merge selected" in client.get("/clusters/").content.decode()
    response = client.post("/clusters/merge/", {"clusters": [rank1.pk, nccl.pk], "query": ""})
    assert response.status_code == 302 and response["Location"] == f"/clusters/{nccl.pk}/"  # the most traces
    assert client.get(f"/clusters/{rank1.pk}/")["Location"] == f"/clusters/{nccl.pk}/"  # an old link
    page = client.get(f"/clusters/{nccl.pk}/").content.decode()
    assert NCCL_ON_RANK1.fingerprint in page and "Unmerge" in page and "merged <code>" in page
    response = client.post(f"/clusters/{nccl.pk}/merge/", {"issues": f"#{oom.pk}"})
    assert response["Location"] == f"/clusters/{nccl.pk}/" and nccl.earlier.count() == 2
    response = client.post(f"/clusters/{nccl.pk}/unmerge/", {"fingerprint": OOM.fingerprint})
    split = ClusterRecord.objects.get(fingerprint=OOM.fingerprint)
    assert response["Location"] == f"/clusters/{split.pk}/" and split.trace_count == 1
    response = client.post("/clusters/merge/", {"clusters": [nccl.pk], "query": ""}, follow=True)
    assert "tick two or more" in response.content.decode()
