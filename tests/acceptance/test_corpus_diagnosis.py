"""Every corpus expectation (../shared/corpus/README.md and public/logs/EXPECTED.md), through the
whole pipeline: files -> parsers -> one clock -> builtin rules -> clusters -> report."""
import pytest

from diagnosis.engine import scenarios
from rules.engine.severity import RANK
from tests.acceptance.findings import by_root
from tests.corpus import CORPUS

pytestmark = pytest.mark.skipif(not CORPUS.is_dir(), reason="shared corpus not found")

# scenario -> (root causes that must be found at >= severity, root causes that must not be found)
H200 = {
    "h200/cudagraph_abort": ({"cuda_graph.host_sync_in_capture": "error"}, set()),
    "h200/fragmented_decode": ({"allocator.churn": "warning"}, {"cuda_oom.fragmentation"}),
    "h200/compile_cudagraphs": ({"torch_compile.graph_break": "warning",
                                 "torch_compile.cudagraph_skipped": "warning"}, set()),
    "h200/oom_fragmentation": ({"cuda_oom.process_cap": "error"},
                               {"cuda_oom.capacity", "cuda_oom.fragmentation", "cuda_oom.undetermined"}),
    "h200/oom_true_fragmentation": ({"cuda_oom.fragmentation": "error"},
                                    {"cuda_oom.capacity", "cuda_oom.process_cap", "cuda_oom.undetermined"}),
    "h200/nccl_timeout": ({"nccl.timeout.stream_blocked": "critical"},
                          {"nccl.timeout.peer_missing", "nccl.timeout.undetermined"}),
    "h200/launch_bound_decode": ({"gpu.launch_bound": "warning"}, {"host.sync_stall"}),
    "h200/sync_stall_decode": ({"host.sync_stall": "warning"}, set()),
}
QUIET = ["h200/healthy_decode", "h200/graph_replay_decode"]

LOGS = {
    "cuda_oom_cads_4_torch25_expandable.log": ("cuda_oom.capacity", "error"),
    "cuda_oom_framepack_369.log": ("cuda_oom.capacity", "error"),
    "cuda_oom_ipassr_9_torch20_fragmentation.log": ("cuda_oom.capacity", "error"),
    "cuda_oom_mgfn_35_torch21_capacty.log": ("cuda_oom.fragmentation", "error"),
    # 194.87 MiB cached but unallocated, a 22 MiB request: fragmentation (issue 33), not capacity
    "cuda_oom_pytorch_16417_torch22.log": ("cuda_oom.fragmentation", "error"),
    "cuda_oom_unilm_137_legacy_2020.log": ("cuda_oom.capacity", "error"),
    "cudagraph_capture_ktransformers_85_not_permitted.log": ("cuda_graph.host_sync_in_capture", "error"),
    "cudagraph_capture_oom_sglang_5285.log": ("cuda_graph.capture_oom", "error"),
    "cudagraph_capture_sglang_1751_flashinfer.log": ("cuda_graph.undetermined", "error"),
    "cudagraph_capture_tensorrt_3011.log": ("cuda_graph.host_sync_in_capture", "warning"),
    "cudagraph_capture_vllm_club3090_106_unsupported.log": ("cuda_graph.host_sync_in_capture", "error"),
    "cudagraph_capture_vllm_windows_5_capture_end.log": ("cuda_graph.capture_invalidated", "error"),
    "nccl_remote_error_ib_stanford_alpaca_207.log": ("nccl.network_error", "critical"),
    "nccl_watchdog_blocking_wait_diffusers_12422.log": ("nccl.timeout.undetermined", "critical"),
    "nccl_watchdog_timeout_accelerate_2174_terminate.log": ("nccl.timeout.undetermined", "critical"),
    "nccl_watchdog_timeout_arctictraining_219_fr_disabled.log": ("nccl.timeout.undetermined", "critical"),
    "nccl_watchdog_timeout_basicsr_737.log": ("nccl.timeout.undetermined", "critical"),
    "nccl_watchdog_timeout_llamafactory_6269.log": ("nccl.timeout.undetermined", "critical"),
    "nccl_watchdog_timeout_llamafactory_7396.log": ("nccl.timeout.undetermined", "critical"),
    "nccl_watchdog_timeout_nccl_1610_alltoall_socket.log": ("nccl.timeout.undetermined", "critical"),
    "nccl_watchdog_timeout_ofa_271_legacy.log": ("nccl.timeout.undetermined", "critical"),
    "nccl_watchdog_timeout_sglang_1693_allgather.log": ("nccl.timeout.undetermined", "critical"),
    "vllm_kv_cache_no_memory_36861.log": ("serving.kv_cache_insufficient", "error"),
}
# files where nothing is wrong: no finding at error or above
LOGS_QUIET = ["cudagraph_capture_vllm_7593_gemma2_l4_info.log", "nccl_tests_allreduce_8xa100_superbench.log"]


def _check(report: dict, expected: dict[str, str], forbidden: set[str]) -> None:
    found = by_root(report)
    for key, severity in expected.items():
        assert key in found, f"expected {key}; found {found}"
        assert RANK[found[key]] >= RANK[severity], f"{key} is {found[key]}, expected at least {severity}"
    assert not forbidden & found.keys(), f"must not conclude {forbidden & found.keys()}; found {found}"


@pytest.mark.parametrize("scenario", sorted(H200))
def test_h200_scenario(scenario):
    expected, forbidden = H200[scenario]
    report = scenarios.report(CORPUS / scenario)
    _check(report, expected, forbidden)
    for f in report["findings"]:
        if f["root_cause"] in expected:
            assert f["evidence"], f"{f['rule_id']} has no evidence"
            assert f["explanation"] and f["recommendations"]
            assert f["cluster"] in {c["id"] for c in report["clusters"]}


@pytest.mark.parametrize("scenario", QUIET)
def test_healthy_scenarios_stay_quiet(scenario):
    report = scenarios.report(CORPUS / scenario)
    loud = [(f["rule_id"], f["severity"]) for f in report["findings"] if RANK[f["severity"]] >= RANK["warning"]]
    assert not loud


def test_healthy_decode_notes_the_cold_start():
    report = scenarios.report(CORPUS / "h200/healthy_decode")
    cold = [f for f in report["findings"] if f["root_cause"] == "latency.cold_start"]
    assert len(cold) == 1 and cold[0]["severity"] == "info"
    # step 0 took about a second: the explanation carries the measured figure
    assert "10" in cold[0]["explanation"]


def test_fragmented_decode_groups_churn_with_the_jitter_it_causes():
    report = scenarios.report(CORPUS / "h200/fragmented_decode")
    churn = next(f for f in report["findings"] if f["root_cause"] == "allocator.churn")
    jitter = next(f for f in report["findings"] if f["root_cause"] == "latency.jitter")
    assert churn["cluster"] == jitter["cluster"]
    cluster = next(c for c in report["clusters"] if c["id"] == churn["cluster"])
    assert cluster["root_cause"] == "allocator.churn"  # the cause heads the cluster, not the symptom
    assert any("empty_cache" in r for r in churn["recommendations"])
    assert any(v["slo"] == "token_latency_consistency" and churn["id"] in v["findings"]
               for v in report["violations"])


def test_cudagraph_abort_is_one_cluster():
    report = scenarios.report(CORPUS / "h200/cudagraph_abort")
    capture = [c for c in report["clusters"] if c["root_cause"].startswith("cuda_graph.")]
    assert len(capture) == 1


@pytest.mark.parametrize("name", sorted(LOGS))
def test_public_log(name):
    key, severity = LOGS[name]
    report = scenarios.report(CORPUS / "public" / "logs" / name)
    _check(report, {key: severity}, set())


@pytest.mark.parametrize("name", LOGS_QUIET)
def test_public_log_quiet(name):
    report = scenarios.report(CORPUS / "public" / "logs" / name)
    assert not [f for f in report["findings"] if RANK[f["severity"]] >= RANK["error"]]


def test_one_oom_seen_by_three_artifacts_counts_once():
    """The profiler's [OutOfMemory] event and the snapshot's oom action are the same failures."""
    report = scenarios.report(CORPUS / "h200/oom_fragmentation")
    cap = next(f for f in report["findings"] if f["root_cause"] == "cuda_oom.process_cap")
    assert cap["metrics"]["count"] == 2
    headroom = next(v for v in report["violations"] if v["slo"] == "memory_headroom")
    assert headroom["observed"] == 2


def test_cold_start_found_from_otlp_spans_alone(tmp_path):
    """Without token_latency.jsonl the OTLP step spans (JSON and protobuf, the same spans
    twice) still give one step each, and the same cold-start note."""
    import shutil
    folder = tmp_path / "healthy"
    shutil.copytree(CORPUS / "h200/healthy_decode", folder)
    (folder / "token_latency.jsonl").unlink()
    report = scenarios.report(folder)
    cold = [f for f in report["findings"] if f["root_cause"] == "latency.cold_start"]
    assert len(cold) == 1 and cold[0]["severity"] == "info"
    assert len(report["trace"]["series"]["step_latency_ms"]) == 48
    assert not [f for f in report["findings"] if RANK[f["severity"]] >= RANK["warning"]]
