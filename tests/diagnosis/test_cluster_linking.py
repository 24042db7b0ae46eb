"""A report's clusters map onto the team's clusters by fingerprint, like issues in an
error tracker. The reports here are minimal typed reports: this tests the
linking, not the rules."""
import pytest

from diagnosis.models import ClusterRecord, FindingRecord, record_report
from diagnosis.engine.results import Cluster, Report, TraceSummary
from ingest.models import Trace
from rules.engine.results import Evidence, Finding


def report(*fingerprints: str) -> Report:
    clusters, findings = [], []
    for n, fp in enumerate(fingerprints, 1):
        clusters.append(Cluster(id=f"C{n}", fingerprint=fp, root_cause="nccl.timeout.stream_blocked",
                                title=f"NCCL timeout {fp}", severity="error", headline=f"F{n}", findings=(f"F{n}",),
                                slos=(), why_grouped="a single finding", start_ts=10))
        findings.append(Finding(
            id=f"F{n}", rule_id="nccl.watchdog-timeout", rule_version=2, title="NCCL watchdog timeout",
            severity="error", root_cause="nccl.timeout.stream_blocked", cluster=f"C{n}", start_ts=10, end_ts=20,
            explanation="x", evidence=(Evidence(artifact="rank0.log", loc="line 3", ts=10,
                                                text="Watchdog caught collective operation timeout"),)))
    return Report(trace=TraceSummary(artifacts=(), events=0, start_ts=None, end_ts=None),
                  findings=tuple(findings), clusters=tuple(clusters))


@pytest.fixture
def traces(infra):
    return [Trace.objects.create(team=infra, name=f"t{i}") for i in range(3)]


def test_the_same_fingerprint_in_two_traces_is_one_cluster(infra, traces):
    record_report(traces[0], report("fp1"))
    record_report(traces[1], report("fp1", "fp2"))
    by_fp = {c.fingerprint: c for c in ClusterRecord.objects.filter(team=infra)}
    assert (by_fp["fp1"].trace_count, by_fp["fp2"].trace_count) == (2, 1)
    assert traces[1].findings.get(report_id="F1").cluster == by_fp["fp1"]


def test_recording_a_report_twice_changes_nothing(infra, traces):
    record_report(traces[0], report("fp1"))
    record_report(traces[0], report("fp1"))
    cluster = ClusterRecord.objects.get(team=infra)
    assert cluster.trace_count == 1 and traces[0].findings.count() == 1


def test_a_resolved_cluster_seen_again_is_regressed(infra, traces):
    record_report(traces[0], report("fp1"))
    ClusterRecord.objects.filter(team=infra).update(status="resolved")
    record_report(traces[0], report("fp1"))  # the same trace again: still resolved
    assert ClusterRecord.objects.get(team=infra).status == "resolved"
    record_report(traces[1], report("fp1"))
    assert ClusterRecord.objects.get(team=infra).status == "regressed"


def test_fingerprints_are_per_team(infra, other, traces):
    theirs = Trace.objects.create(team=other, name="theirs")
    record_report(traces[0], report("fp1"))
    record_report(theirs, report("fp1"))
    assert ClusterRecord.objects.filter(fingerprint="fp1").count() == 2


def test_a_stored_finding_reads_back_as_the_reported_one(infra, traces):
    reported = report("fp1")
    record_report(traces[0], reported)
    assert [r.to_result() for r in FindingRecord.objects.filter(trace=traces[0])] == list(reported.findings)
