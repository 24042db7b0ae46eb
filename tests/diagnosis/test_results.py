"""The report's typed values: serialised once (`to_dict`), read back to the same values
(`from_dict`, as a stored report or a server's answer is), and never changed in place."""
import msgspec
import pytest

from diagnosis.engine import scenarios
from diagnosis.engine.results import ArtifactEntry, Cluster, FailedSLO, Report, Violation
from rules.engine.results import Finding
from tests.corpus import CORPUS

SCENARIOS = ["h200/cudagraph_abort", "h200/fragmented_decode"]


@pytest.mark.skipif(not CORPUS.is_dir(), reason="shared corpus not found")
@pytest.mark.parametrize("name", SCENARIOS)
def test_a_json_report_reads_back_to_the_same_json(name):
    as_json = scenarios.report(CORPUS / name)
    typed = Report.from_dict(as_json)
    assert typed.findings and typed.clusters
    assert typed.to_dict() == as_json
    assert Report.from_dict(typed.to_dict()) == typed


def test_findings_are_immutable_and_with_metrics_gives_a_new_one():
    f = Finding(rule_id="r", title="t", severity="error", metrics={"count": 3})
    with pytest.raises(AttributeError):
        f.severity = "info"
    g = f.with_metrics(truncated=2)
    assert f.metrics == {"count": 3} and g.metrics == {"count": 3, "truncated": 2}


def test_the_summary_counts_every_severity_and_names_the_worst():
    report = Report.from_dict({"trace": {}, "findings": [
        {"id": "F1", "rule_id": "a", "title": "a", "severity": "warning"},
        {"id": "F2", "rule_id": "b", "title": "b", "severity": "critical"}]})
    assert msgspec.to_builtins(report.summary) == {
        "findings_by_severity": {"info": 0, "warning": 1, "error": 0, "critical": 1}, "worst": "critical",
        "violations": 0}


def test_a_report_stored_before_later_keys_reads_back_with_their_defaults():
    """What the first stored reports lack: trace warnings and hosts, artifact spans and formats,
    finding rule versions and captures, cluster earlier fingerprints, slis, the version."""
    old = {"trace": {"artifacts": [{"path": "rank0.log", "events": 3}], "events": 3},
           "findings": [{"id": "F1", "rule_id": "a", "title": "A", "severity": "error", "evidence": [{"ts": 5}]}],
           "violations": [{"slo": "ttft", "error": "KeyError: 'x'"},
                          {"slo": "step_time", "window": [1, 2], "observed": 3, "burn_rate": 1.5}],
           "clusters": [{"id": "C1", "fingerprint": "ab", "root_cause": "", "title": "A", "severity": "error",
                         "headline": "F1", "findings": ["F1"], "slos": [], "why_grouped": "a single finding",
                         "start_ts": 0}],
           "rule_errors": [{"rule_id": "b", "error": "boom"}], "suppressed": [{"rule_id": "c", "by": "a"}]}
    report = Report.from_dict(old)
    assert report.version == 1 and report.slis == {} and report.trace.warnings == ()
    assert report.trace.artifacts == (ArtifactEntry(path="rank0.log", format="unknown", events=3),)
    f = report.findings[0]
    assert (f.rule_version, f.capture, f.evidence[0].artifact, f.evidence[0].ts) == (1, msgspec.UNSET, "", 5)
    assert report.violations == (FailedSLO(slo="ttft", error="KeyError: 'x'"),
                                 Violation(slo="step_time", window=(1, 2), observed=3.0, burn_rate=1.5))
    assert report.clusters[0].earlier_fingerprints == () and report.suppressed[0].root_cause == ""
    assert report.summary.findings_by_severity["error"] == 1 and report.summary.violations == 2
    written = report.to_dict()
    assert "earlier_fingerprints" not in written["clusters"][0] and "capture" not in written["findings"][0]
    assert "internal_error" not in written["trace"]["artifacts"][0]
    assert written["violations"][0] == {"slo": "ttft", "error": "KeyError: 'x'"}
    assert Report.from_dict(written) == report


def test_keys_written_only_sometimes_are_left_out_otherwise():
    crashed = ArtifactEntry(path="a.log", internal_error=True)
    assert msgspec.to_builtins(crashed)["internal_error"] is True
    assert "internal_error" not in msgspec.to_builtins(ArtifactEntry(path="a.log", internal_error=False))
    carried = Cluster(id="C1", fingerprint="ab", root_cause="", title="t", severity="error", headline="F1",
                      findings=("F1",), slos=(), why_grouped="", start_ts=0, earlier_fingerprints=("cd",))
    assert list(msgspec.to_builtins(carried))[-2:] == ["id", "earlier_fingerprints"]


def test_numpy_values_and_nan_are_written_as_plain_json():
    import numpy as np
    f = Finding(rule_id="r", title="t", severity="error", metrics={"n": np.int64(3), "x": float("nan")})
    written = Report(findings=(f,), slis={"ttft_ms": np.float64(1.5), "gpu_busy_pct": None}).to_dict()
    assert written["findings"][0]["metrics"] == {"n": 3, "x": None}
    assert written["slis"] == {"ttft_ms": 1.5, "gpu_busy_pct": None}


def test_null_where_the_report_never_writes_null_reads_as_the_default():
    report = Report.from_dict({"version": None, "trace": {"artifacts": [{"path": "a.log", "warnings": None}],
                                                          "events": None, "series": None},
                               "findings": [{"id": "F1", "rule_id": "a", "title": "A", "severity": "error",
                                             "root_cause": None, "explanation": None, "evidence": None,
                                             "metrics": {"bytes": None}, "capture": None, "slo": None}],
                               "violations": [{"slo": "s", "title": None, "window": [1, 2], "observed": 1.0,
                                               "burn_rate": 2.0, "findings": None}],
                               "slis": {"ttft_ms": None}})
    f = report.findings[0]
    assert (f.root_cause, f.explanation, f.evidence, f.capture, f.slo) == ("", "", (), msgspec.UNSET, None)
    assert f.metrics == {"bytes": None} and report.slis == {"ttft_ms": None}  # free-form values keep null
    assert report.trace.artifacts[0].warnings == () and report.trace.events == 0 and report.version == 1
    assert report.violations[0] == Violation(slo="s", window=(1, 2), observed=1.0, burn_rate=2.0)
