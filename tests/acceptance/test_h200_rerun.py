"""A second real run of the corpus generators on an H200 (tests/fixtures/h200_rerun, see its
README): the conclusions the corpus README asks for must hold on a run the rules were not
written against. These logs hold the tracebacks the shared copy lacks."""
import pytest

from diagnosis.engine import scenarios
from rules.engine.severity import RANK
from tests.acceptance.findings import by_root
from tests.corpus import ROOT

RERUN = ROOT / "tests" / "fixtures" / "h200_rerun"

EXPECTED = {  # scenario -> (root cause: minimum severity, root causes that must not appear)
    "cudagraph_abort": ({"cuda_graph.host_sync_in_capture": "error"}, {"cuda_graph.undetermined"}),
    "fragmented_decode": ({"allocator.churn": "warning", "latency.jitter": "warning"}, set()),
    "compile_cudagraphs": ({"torch_compile.graph_break": "warning"}, set()),
    "oom_fragmentation": ({"cuda_oom.process_cap": "error"},
                          {"cuda_oom.capacity", "cuda_oom.fragmentation", "cuda_oom.undetermined"}),
    "oom_true_fragmentation": ({"cuda_oom.fragmentation": "error"},
                               {"cuda_oom.capacity", "cuda_oom.process_cap", "cuda_oom.undetermined"}),
    "nccl_timeout": ({"nccl.timeout.stream_blocked": "critical"},
                     {"nccl.timeout.peer_missing", "nccl.timeout.undetermined"}),
    "launch_bound_decode": ({"gpu.launch_bound": "warning"}, {"host.sync_stall"}),
    "sync_stall_decode": ({"host.sync_stall": "warning"}, set()),
}
QUIET = ["healthy_decode", "graph_replay_decode"]


@pytest.mark.parametrize("scenario", sorted(EXPECTED))
def test_rerun_reaches_the_same_conclusions(scenario):
    expected, forbidden = EXPECTED[scenario]
    found = by_root(scenarios.report(RERUN / scenario))
    for key, severity in expected.items():
        assert key in found and RANK[found[key]] >= RANK[severity], found
    assert not forbidden & found.keys(), found


@pytest.mark.parametrize("scenario", QUIET)
def test_rerun_healthy_runs_stay_quiet(scenario):
    report = scenarios.report(RERUN / scenario)
    assert not [f["rule_id"] for f in report["findings"] if RANK[f["severity"]] >= RANK["warning"]]
    assert report["violations"] == []
    assert [f["root_cause"] for f in report["findings"]] == ["latency.cold_start"]


def test_both_capture_aborts_are_one_cluster_with_the_tracebacks():
    report = scenarios.report(RERUN / "cudagraph_abort")
    from_log = next(f for f in report["findings"] if f["rule_id"] == "cuda-graph.capture-host-sync")
    texts = " ".join(ev["text"] for ev in from_log["evidence"])
    assert from_log["metrics"]["count"] == 2  # the .item() abort and the pageable .cpu() copy
    assert ".item()" in texts and "unless the CPU tensor is pinned" in texts
    capture = [c for c in report["clusters"] if c["root_cause"].startswith("cuda_graph.")]
    assert len(capture) == 1 and len(capture[0]["findings"]) == len(report["findings"])
    invalidated = next(f for f in report["findings"] if f["root_cause"] == "cuda_graph.capture_invalidated")
    assert invalidated["consequence_of"] == from_log["id"]


def test_each_oom_is_counted_once_across_log_profiler_and_snapshot():
    report = scenarios.report(RERUN / "oom_fragmentation")
    cap = next(f for f in report["findings"] if f["root_cause"] == "cuda_oom.process_cap")
    assert cap["metrics"]["count"] == 2
    assert "8.39 GiB" in cap["explanation"]
    assert next(v for v in report["violations"] if v["slo"] == "memory_headroom")["observed"] == 2
