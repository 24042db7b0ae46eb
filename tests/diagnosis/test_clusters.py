"""Clustering within a trace: shared root causes, declared causal edges, headline, order."""
import msgspec

from diagnosis.engine.clusters import apply_suppressions, cluster_findings, describe, fingerprint
from diagnosis.engine.results import Suppression
from rules.engine.results import RuleFinding

S = 10**9


def finding(rule, root, start, severity="error", causes=(), group=None, **extra):
    return RuleFinding(rule_id=rule, root_cause=root, title=rule, severity=severity, start_ts=start, end_ts=start,
                   causes=tuple(causes), group=group or {}, **extra)


def test_causal_edge_groups_and_the_cause_heads_the_cluster():
    jitter = finding("latency.jitter", "latency.jitter", 1 * S, "warning")
    churn = finding("allocator.churn", "allocator.churn", 2 * S, "warning", causes=["latency.jitter"])
    findings = [jitter, churn]
    groups, consequence_of = cluster_findings(findings)
    assert len(groups) == 1
    # the symptom started first, but the cause heads the cluster
    assert findings[groups[0].headline] is churn
    assert consequence_of == {0: 1}
    assert "declares it causes" in groups[0].why[0]
    assert findings == [jitter, churn]  # nothing written into the findings


def test_edges_need_the_same_scope_and_nearby_time():
    a = finding("a", "x.cause", 0, causes=["y.effect"], group={"host": "gpu-1"})
    far = finding("b", "y.effect", 10 * 60 * S, group={"host": "gpu-1"})
    elsewhere = finding("c", "y.effect", 1 * S, group={"host": "gpu-2"})
    assert len(cluster_findings([a, far])[0]) == 2
    assert len(cluster_findings([a, elsewhere])[0]) == 2


def test_same_root_cause_is_one_cluster_ordered_by_severity():
    findings = [finding("info.rule", "latency.cold_start", 0, "info"),
                finding("r1", "cuda_oom.capacity", 5 * S), finding("r2", "cuda_oom.capacity", 9 * S),
                finding("nccl", "nccl.network_error", 7 * S, "critical")]
    ids = [f"F{i}" for i in range(1, 5)]
    out = describe(cluster_findings(findings)[0], findings, ids)
    assert [c.root_cause for c in out] == ["nccl.network_error", "cuda_oom.capacity", "latency.cold_start"]
    assert out[1].findings == ("F2", "F3") and [c.id for c in out] == ["C1", "C2", "C3"]


def test_fingerprint_depends_on_root_cause_and_fingerprint_fields():
    a = finding("r", "nccl.timeout.undetermined", 0)
    b = msgspec.structs.replace(a, fingerprint={"attrs.op": "ALLREDUCE"})
    c = msgspec.structs.replace(a, fingerprint={"attrs.op": "ALLGATHER"})
    assert len({fingerprint(a), fingerprint(b), fingerprint(c)}) == 3
    assert fingerprint(b) == fingerprint(msgspec.structs.replace(b, start_ts=99))


def test_suppression_drops_the_redundant_finding_on_the_same_scope():
    cause = finding("cap", "cuda_oom.process_cap", 0, suppresses=("cuda_oom.capacity",), group={"pid": 7})
    same = finding("capacity", "cuda_oom.capacity", 0, group={"pid": 7})
    other = finding("capacity2", "cuda_oom.capacity", 0, group={"pid": 8})
    kept, suppressed = apply_suppressions([cause, same, other])
    assert [f.rule_id for f in kept] == ["cap", "capacity2"]
    assert suppressed == [Suppression(rule_id="capacity", root_cause="cuda_oom.capacity", by="cap")]
