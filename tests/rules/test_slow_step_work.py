"""latency.spike-host-work on real captures of tools/closed_loop/spiky_loop.py: the window the
hook kept on an H100 names the periodic host work (`save_checkpoint`) and nothing else, and
explains the latency.jitter of the loop's own step records."""
from diagnosis.engine.pipeline import run
from tests.corpus import ROOT

GPU = ROOT / "tests" / "fixtures" / "closed_loop" / "spiky_gpu"


def test_the_slow_steps_of_the_h100_window_are_the_checkpoint_steps():
    report = run([GPU])
    [work] = [f for f in report.findings if f.rule_id == "latency.spike-host-work"]
    assert "`save_checkpoint`" in work.explanation and "4 of the 31 profiled steps" in work.explanation
    assert "aten::mm" not in work.explanation  # the window's first, warm-up step is not named
    [jitter] = [f for f in report.findings if f.rule_id == "latency.jitter"]
    assert jitter.consequence_of == work.id and not jitter.capture  # explained: nothing left to capture


def test_the_step_records_alone_ask_for_the_window():
    report = run([GPU / "token_latency.jsonl"])
    [jitter] = [f for f in report.findings if f.rule_id == "latency.jitter"]
    assert jitter.capture and jitter.capture.kind == "profiler" and jitter.capture.trigger == "slow_step"
    assert not any(f.rule_id == "latency.spike-host-work" for f in report.findings)
