"""SLOs: objectives parse, windows bound, burn rates, and violations linked to findings."""
import pandas as pd
import pytest

from diagnosis.engine import scenarios
from diagnosis.engine.slo import SLO, SLOError, evaluate_slo, load_slos
from tests.corpus import CORPUS, ROOT

FIXTURES = ROOT / "tests" / "fixtures" / "nccl_multirank"


class Ctx:
    """The SLI functions read only `events` and features; this context serves fixed steps."""

    def __init__(self, latencies_ms, token=True):
        n = len(latencies_ms)
        self.steps = pd.DataFrame({"ts": [i * 10**8 for i in range(n)], "dur": [0] * n,
                                   "value": latencies_ms, "cold": [False] * n, "token": [token] * n})

    def feature(self, name):
        assert name == "decode_steps"
        return self.steps


def test_token_slos_need_token_steps():
    # the same slow steps as training/diffusion profiler steps: no per-token SLO applies
    slow = [900.0] * 20
    for slo in ("p99 <= 50ms",):
        assert evaluate_slo(SLO("lat", "t", "token_latency", slo, "1h"), Ctx(slow, token=True)) is not None
        assert evaluate_slo(SLO("lat", "t", "token_latency", slo, "1h"), Ctx(slow, token=False)) is None
    assert evaluate_slo(SLO("ttft", "t", "time_to_first_token", "max <= 2ms", "1h"), Ctx(slow, token=False)) is None


@pytest.mark.skipif(not CORPUS.is_dir(), reason="shared corpus not found")
def test_training_trace_has_no_token_slo():
    """A training profiler trace (ProfilerStep#N, no tokens) gets step-time SLIs, never per-token ones."""
    report = scenarios.report(CORPUS / "public" / "kineto" / "hta_trace_diff_control_rank3_ws8.json.gz")
    slos = {v["slo"] for v in report["violations"]}
    assert not slos & {"token_latency_p99", "time_to_first_token", "token_latency_consistency"}, slos


def test_builtin_slos_load():
    ids = {s.id for s in load_slos()}
    assert {"token_latency_p99", "time_to_first_token", "step_time_p99", "collective_duration",
            "graph_replay_success", "memory_headroom", "error_count"} <= ids


@pytest.mark.parametrize("text,error", [
    ("- {id: x, title: t, sli: nope, objective: 'p99 <= 1ms'}", "unknown sli 'nope'"),
    ("- {id: x, title: t, sli: token_latency, objective: 'p99 about 1ms'}", "team.yaml: SLO x: objective 'p99 about 1ms' is not"),
    ("- {id: x, title: t, sli: token_latency, objective: 'p99 <= 1ms', window: soon}", "is not a duration"),
])
def test_bad_slo_definitions_are_explained(text, error):
    with pytest.raises(SLOError, match=error):
        load_slos(text, "team.yaml")


def test_quantile_objective_burn_rate():
    # 100 steps, 5 above 50 ms: p99 breaks `p99 <= 50ms`; 5 % bad of a 1 % budget = 5x
    ctx = Ctx([10.0] * 95 + [80.0] * 5)
    v = evaluate_slo(SLO("lat", "t", "token_latency", "p99 <= 50ms", "1h"), ctx)
    assert v.observed == pytest.approx(80.0)
    assert v.burn_rate == pytest.approx(5.0)
    assert evaluate_slo(SLO("lat", "t", "token_latency", "p99 <= 100ms", "1h"), ctx) is None


def test_too_many_windows_is_an_error():
    ctx = Ctx([1.0, 1.0])
    ctx.steps.loc[1, "ts"] = 10**15
    with pytest.raises(SLOError, match="windows"):
        evaluate_slo(SLO("lat", "t", "token_latency", "p99 <= 0.5ms", "1ms"), ctx)


def test_straggler_hurts_collective_duration_and_is_linked():
    report = scenarios.report(FIXTURES / "straggler")
    straggler = next(f for f in report["findings"] if f["root_cause"] == "nccl.straggler")
    v = next(v for v in report["violations"] if v["slo"] == "collective_duration")
    assert v["observed"] > 1000 and straggler["id"] in v["findings"]


@pytest.mark.skipif(not CORPUS.is_dir(), reason="shared corpus not found")
def test_healthy_decode_meets_every_slo():
    assert scenarios.report(CORPUS / "h200" / "healthy_decode")["violations"] == []


@pytest.mark.skipif(not CORPUS.is_dir(), reason="shared corpus not found")
def test_aborted_capture_breaks_graph_replay_success():
    report = scenarios.report(CORPUS / "h200" / "cudagraph_abort")
    v = next(v for v in report["violations"] if v["slo"] == "graph_replay_success")
    assert v["observed"] < 0.999
    linked = {f["id"] for f in report["findings"] if f["root_cause"] == "cuda_graph.host_sync_in_capture"}
    assert linked and linked <= set(v["findings"])


def test_decode_step_annotations_emit_tokens_profiler_steps_do_not():
    from rules.engine.features import TraceContext
    ann = pd.DataFrame({"ts": [0, 10**7, 2 * 10**7, 3 * 10**7], "dur": [5 * 10**6] * 4, "kind": "annotation",
                        "name": ["decode_step_0", "decode_step_1", "ProfilerStep#2", "ProfilerStep#3"]})
    steps = TraceContext(ann).feature("decode_steps")
    assert steps.set_index("ts")["token"].to_dict() == {0: True, 10**7: True, 2 * 10**7: False, 3 * 10**7: False}
