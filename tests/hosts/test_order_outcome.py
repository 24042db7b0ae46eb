"""What the cluster page says an order changed (hosts.order_outcome), for every state and
outcome record_outcome leaves: waiting, no capture (failed, expired), diagnosing, decided (the
finding now explaining the one that asked is the answer), still open, nothing new."""
import pytest

from hosts.models import CaptureRequest
from hosts.order_outcome import outcome_of

BEFORE = {"trace": 7, "finding": "F2", "rule_id": "latency.jitter", "title": "Per-step latency tail"}
SPIKE = {"finding": "F3", "rule_id": "latency.spike-host-work", "title": "Slow steps", "explanation": "save_checkpoint"}
COLD = {"finding": "F1", "rule_id": "latency.cold-start", "title": "Cold start", "explanation": "first steps"}


def order(state: str, after: dict | None = None) -> CaptureRequest:
    return CaptureRequest(state=state, rule_id="latency.jitter", source_trace_id=7, trace_id=9 if state == "done" else None,
                          before=BEFORE, after=after or {})


@pytest.mark.parametrize("state, verdict", [("pending", "waiting"), ("sent", "waiting"), ("failed", "no capture"),
                                            ("expired", "no capture"), ("done", "diagnosing")])
def test_before_the_capture_is_diagnosed(state, verdict):
    out = outcome_of(order(state))
    assert (out.verdict, out.answer, out.asked.rule_id, out.asked.trace_id, out.asked.finding) == \
        (verdict, None, "latency.jitter", 7, "F2")


def test_decided_the_explaining_finding_is_the_answer():
    out = outcome_of(order("done", {"trace": 9, "decided": True, "findings": [COLD, SPIKE], "explained_by": "F3"}))
    assert out.decided and out.trace_id == 9 and out.answer.rule_id == "latency.spike-host-work"
    assert out.answer.finding == "F3" and out.answer.explanation == "save_checkpoint"


def test_still_open_and_nothing_new():
    still = outcome_of(order("done", {"trace": 9, "decided": False, "findings": [COLD], "explained_by": ""}))
    assert (still.verdict, still.answer.rule_id) == ("open", "latency.cold-start")
    empty = outcome_of(order("done", {"trace": 9, "decided": False, "findings": [], "explained_by": ""}))
    assert (empty.verdict, empty.answer, empty.trace_id) == ("nothing new", None, 9)
