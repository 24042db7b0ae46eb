"""The `ebpf` capture kind (issue 34): a plan the agent takes itself for `duration_s` (now only,
bounded like nvml_burst), declared by gpu.idle-gaps, whose host verdict an eBPF window of the
host's waits decides; an order of it carries its bounds to the agent."""
import pytest

from rules.engine.capture_plans import MAX_DURATION_S, TIMED_KINDS, CapturePlanError, parse_plan
from rules.engine.loader import load_rule_dirs


def test_an_ebpf_plan_is_a_timed_window_taken_at_once():
    plan = parse_plan({"kind": "ebpf", "duration_s": 20, "max_bytes": "8MiB", "unless": ["bpftrace"]})
    assert plan.kind in TIMED_KINDS and plan.trigger == "now" and plan.max_bytes == 8 * 1024**2
    assert plan.summary == "ebpf of 20 s at once, at most 8 MiB"
    with pytest.raises(CapturePlanError, match="a ebpf capture takes one of now; got 'slow_step'"):
        parse_plan({"kind": "ebpf", "trigger": "slow_step"})
    with pytest.raises(CapturePlanError, match="capture.duration_s: expected 1 to 300"):
        parse_plan({"kind": "ebpf", "duration_s": MAX_DURATION_S + 1})


def test_gpu_idle_gaps_asks_for_an_ebpf_window_unless_the_trace_has_one():
    rule = next(r for r in load_rule_dirs(None) if r.id == "gpu.idle-gaps")
    plan = rule.capture_plan
    assert plan.kind == "ebpf" and plan.unless == ("bpftrace",) and plan.duration_s == 30
    assert "futex" in plan.why


def test_an_ebpf_order_carries_its_bounds_to_the_agent(db):
    from accounts.models import Team
    from hosts.models import CaptureRequest, Host
    team = Team.objects.create(name="Infra", slug="infra")
    host = Host.objects.create(team=team, name="gpu-7")
    plan = parse_plan({"kind": "ebpf", "duration_s": 20, "max_bytes": "8MiB"})
    order = CaptureRequest.objects.create(team=team, host=host, kind="ebpf", trigger=plan.trigger, plan=plan.to_dict())
    sent = order.as_order()
    assert (sent["kind"], sent["trigger"], sent["duration_s"], sent["max_bytes"]) == ("ebpf", "now", 20.0, 8 * 1024**2)
    assert order.get_kind_display() == "eBPF window of the host's waits" and order.occasion == "at once"
