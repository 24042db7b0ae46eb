"""The trace state machine: every transition recorded with a time, illegal moves refused."""
import pytest

from ingest.models import Trace


@pytest.fixture
def trace(infra):
    return Trace.objects.create(team=infra, name="t")


def test_a_new_trace_is_received_and_says_so(trace):
    assert trace.state == "received"
    assert [h["state"] for h in trace.state_history] == ["received"]


def test_the_happy_path_is_recorded_in_order(trace):
    for state in ("parsing", "parsed", "diagnosing", "done"):
        trace.transition(state)
    trace.refresh_from_db()
    assert trace.state == "done"
    assert [h["state"] for h in trace.state_history] == ["received", "parsing", "parsed", "diagnosing", "done"]
    times = [h["at"] for h in trace.state_history]
    assert times == sorted(times)


def test_failure_keeps_the_reason_in_the_trace_and_its_history(trace):
    trace.transition("parsing")
    trace.transition("failed", error="rank0.log: line 3: expected a timestamp")
    trace.refresh_from_db()
    assert trace.error == "rank0.log: line 3: expected a timestamp"
    assert trace.state_history[-1]["error"] == trace.error


@pytest.mark.parametrize("path", [("done",), ("parsed",), ("parsing", "done"), ("parsing", "diagnosing")])
def test_skipping_a_step_is_refused(trace, path):
    with pytest.raises(ValueError):
        for state in path:
            trace.transition(state)


def test_a_redelivered_task_may_start_parsing_again(trace):
    trace.transition("parsing")
    trace.transition("parsing")
    assert [h["state"] for h in trace.state_history] == ["received", "parsing", "parsing"]


def test_progress_counters_do_not_overwrite_the_state(trace):
    stale = Trace.objects.get(pk=trace.pk)
    trace.transition("parsing")
    stale.record_progress(events_done=10)
    trace.refresh_from_db()
    assert (trace.state, trace.events_done) == ("parsing", 10)
