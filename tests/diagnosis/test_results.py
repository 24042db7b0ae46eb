"""The report's typed values: serialised once (`to_dict`), read back to the same values
(`from_dict`, as a stored report or a server's answer is), and never changed in place."""
import dataclasses

import pytest

from diagnosis import scenarios
from diagnosis.results import Report
from rules.results import Finding
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
    with pytest.raises(dataclasses.FrozenInstanceError):
        f.severity = "info"
    g = f.with_metrics(truncated=2)
    assert f.metrics == {"count": 3} and g.metrics == {"count": 3, "truncated": 2}


def test_the_summary_counts_every_severity_and_names_the_worst():
    report = Report.from_dict({"trace": {}, "findings": [
        {"id": "F1", "rule_id": "a", "title": "a", "severity": "warning"},
        {"id": "F2", "rule_id": "b", "title": "b", "severity": "critical"}]})
    assert report.summary.to_dict() == {
        "findings_by_severity": {"info": 0, "warning": 1, "error": 0, "critical": 1}, "worst": "critical",
        "violations": 0}
