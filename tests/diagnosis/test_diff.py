"""diagnosis.engine.diff over stored reports of real corpus runs (tests/fixtures/golden_reports): what
appears, disappears and persists, SLI deltas, and the regression verdict."""
import copy
import json

import numpy as np
import pytest

from diagnosis.engine.diff import compare
from diagnosis.engine.diff.render import RENDERERS
from diagnosis.engine.trace_figures import KernelTime, TraceFigures
from tests.corpus import ROOT

GOLDEN = ROOT / "tests" / "fixtures" / "golden_reports"


def stored(name: str) -> dict:
    return json.loads((GOLDEN / f"{name}.json").read_text())


@pytest.fixture(scope="module")
def healthy():
    return stored("h200__healthy_decode")


@pytest.fixture(scope="module")
def fragmented():
    return stored("h200__fragmented_decode")


def steady_ms(report: dict) -> list[float]:
    return [s["ms"] for s in report["trace"]["series"]["step_latency_ms"] if not s["cold"]]


def test_churn_appears_and_the_tail_regresses(healthy, fragmented):
    diff = compare(healthy, fragmented, fail_on_regression_pct=5)
    appeared = {c.root_cause for c in diff.clusters_by_status("appeared")}
    assert "allocator.churn" in appeared
    assert {f.rule_id for f in diff.findings_by_status("appeared")} >= {"allocator.churn", "latency.jitter"}
    # the fragmented run has no cold start: the healthy run's note disappears
    assert [c.root_cause for c in diff.clusters_by_status("disappeared")] == ["latency.cold_start"]
    p99 = diff.sli("step_latency_p99")
    assert p99.base == pytest.approx(np.percentile(steady_ms(healthy), 99), abs=1e-3)
    assert p99.new == pytest.approx(np.percentile(steady_ms(fragmented), 99), abs=1e-3)
    tail = diff.sli("step_latency_tail")
    assert tail.new == pytest.approx(p99.new / diff.sli("step_latency_p50").new, abs=1e-3)
    assert tail.regressed and tail.change_pct > 5
    assert [(v.status, v.slo) for v in diff.violations] == [("appeared", "token_latency_consistency")]
    assert diff.verdict.regression
    assert any("tail" in r for r in diff.verdict.reasons)
    assert any("token_latency_consistency" in r for r in diff.verdict.reasons)


def test_warnings_alone_do_not_gate_at_the_default_severity(healthy, fragmented):
    diff = compare(healthy, fragmented)  # no SLI threshold; the new findings are warnings
    assert not diff.verdict.regression and diff.verdict.reasons == ()
    assert not any(s.regressed for s in diff.slis)
    assert compare(healthy, fragmented, fail_on="warning").verdict.regression


def test_the_same_report_twice_is_no_change(healthy):
    diff = compare(healthy, copy.deepcopy(healthy), fail_on="info", fail_on_regression_pct=0)
    assert {c.status for c in diff.clusters} == {f.status for f in diff.findings} == {"persisted"}
    assert all(s.change_pct == 0 for s in diff.slis if s.base is not None)
    assert not diff.verdict.regression


def test_rerun_persists_every_cluster_though_latency_moves():
    base, rerun = stored("h200__fragmented_decode"), stored("h200_rerun__fragmented_decode")
    diff = compare(base, rerun, fail_on_regression_pct=5)
    assert [(c.status, c.fingerprint) for c in diff.clusters] == [("persisted", c["fingerprint"])
                                                                  for c in base["clusters"]]
    assert diff.violations[0].status == "persisted"
    # another machine run is slower in absolute terms: the gate says so rather than hiding it
    assert diff.sli("step_latency_p50").regressed
    assert not diff.sli("step_latency_tail").regressed


def test_figures_missing_without_events_are_said_not_invented(healthy, fragmented):
    diff = compare(healthy, fragmented)
    for name in ("ttft", "gpu_busy_pct"):
        s = diff.sli(name)
        assert s.base is None and s.new is None and s.change_pct is None and not s.regressed
        assert "events" in s.note
    assert diff.kernels == ()
    no_steps = stored("h200__nvml")  # telemetry only: no steps
    d = compare(healthy, no_steps, fail_on_regression_pct=5)
    assert d.sli("step_latency_p99").new is None and "no decode or profiler steps in new" in d.sli("step_latency_p99").note
    assert d.sli("gpu_util_pct").new is not None and d.sli("gpu_util_pct").base is None


def test_figures_from_events_are_compared(healthy):
    base = TraceFigures(gpu_busy_pct=40.0, ttft_ms=100.0, top_kernels=(KernelTime("gemm", 10.0, 100),
                                                                      KernelTime("softmax", 2.0, 50)))
    new = TraceFigures(gpu_busy_pct=20.0, ttft_ms=120.0, top_kernels=(KernelTime("gemm", 12.5, 100),
                                                                     KernelTime("copy", 1.0, 5)))
    diff = compare(healthy, healthy, base, new, fail_on_regression_pct=10)
    assert diff.sli("ttft").change_pct == 20.0 and diff.sli("ttft").regressed
    busy = diff.sli("gpu_busy_pct")
    assert busy.change_pct == -50.0 and not busy.regressed  # reported, never gated
    kernels = {k.name: k for k in diff.kernels}
    assert kernels["gemm"].change_pct == 25.0
    assert kernels["copy"].base_ms is None and kernels["softmax"].new_ms is None
    assert diff.verdict.reasons == ("time to first token +20.0% (100 ms -> 120 ms), more than the 10% allowed",)


def test_a_new_error_finding_or_a_severity_rise_gates(healthy, fragmented):
    worse = copy.deepcopy(fragmented)
    worse["findings"][0]["severity"] = "error"
    diff = compare(fragmented, worse)
    change = next(f for f in diff.findings if f.rule_id == worse["findings"][0]["rule_id"])
    assert (change.status, change.base_severity, change.severity) == ("persisted", "warning", "error")
    assert diff.verdict.regression and "rose from warning to error" in diff.verdict.reasons[0]
    assert compare(healthy, worse).verdict.regression  # appeared at error


def test_clusters_fall_back_to_root_cause_when_the_headline_changes(fragmented):
    moved = copy.deepcopy(fragmented)
    moved["clusters"][0]["fingerprint"] = "0" * 16
    diff = compare(fragmented, moved)
    assert [c.status for c in diff.clusters] == ["persisted"]


def test_renderings(healthy, fragmented):
    diff = compare(healthy, fragmented, fail_on_regression_pct=5)
    assert json.loads(RENDERERS["json"](diff)) == json.loads(json.dumps(diff.to_dict()))
    md = RENDERERS["markdown"](diff)
    assert md.startswith("### :x: tracedoc diff: REGRESSION")
    assert "| appeared | warning | `allocator.churn` |" in md
    text = RENDERERS["text"](diff)
    assert "+ [WARNING] allocator.churn" in text and "REGRESSED" in text


def test_an_slo_that_could_not_be_computed_is_not_a_violation(fragmented):
    failed = copy.deepcopy(fragmented)
    failed["violations"].append({"slo": "graph_replay", "error": "ValueError: no launches"})
    diff = compare(fragmented, failed, fail_on_regression_pct=5)
    assert [(v.status, v.slo) for v in diff.violations] == [("persisted", "token_latency_consistency")]
    assert not diff.verdict.regression
