"""tracedoc.workflow: the parse -> diagnose chain, runs that own a trace, and the beat job that
re-queues (or fails) a trace whose task was lost. Tasks run in-process; what they queue goes
to the real Redis (`no_worker`)."""
from datetime import timedelta

from django.core.files.uploadedfile import SimpleUploadedFile
from django.utils import timezone

from diagnosis.tasks import MAX_DIAGNOSE_ATTEMPTS, diagnose_trace
from ingest.models import Trace
from ingest.tasks import MAX_PARSE_ATTEMPTS, parse_trace
from ingest.uploads import create_trace
from tracedoc.celery import app
from tracedoc.workflow import reconcile_traces

LOG = b"[rank0]:[E1129 08:19:30.038029502 ProcessGroupNCCL.cpp:689] hello\n"


def upload(team, user, capture) -> Trace:
    with capture(execute=True):
        trace = create_trace(team, user, [SimpleUploadedFile("rank0.log", LOG)])
    trace.refresh_from_db()
    return trace


def queued_messages(queue: str) -> list[tuple[str, list, dict]]:
    """(task name, args, options) of each message on `queue`, taken off it."""
    out = []
    with app.connection_for_read() as conn:
        q = conn.SimpleQueue(queue)
        while True:
            try:
                message = q.get(timeout=0.2)
            except q.Empty:
                break
            args, _kwargs, embed = message.decode()
            out.append((message.headers["task"], args, embed))
            message.ack()
        q.close()
    return out


def age(trace: Trace, seconds: float) -> None:
    """As if nothing had moved the trace for `seconds` (its task is gone)."""
    Trace.objects.filter(pk=trace.pk).update(updated_at=timezone.now() - timedelta(seconds=seconds))


def test_an_upload_queues_parse_chained_to_diagnose_under_one_run(infra, alice, no_worker,
                                                                  django_capture_on_commit_callbacks):
    trace = upload(infra, alice, django_capture_on_commit_callbacks)
    [(task, args, embed)] = queued_messages(no_worker.queue)
    assert (task, args) == ("ingest.parse_trace", [trace.pk, trace.run_id])
    [then] = embed["chain"]
    assert (then["task"], then["args"]) == ("diagnosis.diagnose_trace", [trace.pk, trace.run_id])
    assert len(trace.run_id) == 32


def test_the_chain_diagnoses_after_the_parse(infra, alice, no_worker, django_capture_on_commit_callbacks):
    trace = upload(infra, alice, django_capture_on_commit_callbacks)
    parse_trace(trace.pk, trace.run_id)
    diagnose_trace(trace.pk, trace.run_id)
    trace.refresh_from_db()
    assert [h["state"] for h in trace.state_history] == ["received", "parsing", "parsed", "diagnosing", "done"]


def test_a_message_of_an_older_run_leaves_the_trace_alone(infra, alice, no_worker,
                                                          django_capture_on_commit_callbacks):
    trace = upload(infra, alice, django_capture_on_commit_callbacks)
    parse_trace(trace.pk, "an-older-run")
    diagnose_trace(trace.pk, "an-older-run")
    trace.refresh_from_db()
    assert trace.state == "received" and len(trace.state_history) == 1


def test_a_redelivered_step_that_was_done_is_not_done_again(infra, alice, no_worker,
                                                            django_capture_on_commit_callbacks):
    trace = upload(infra, alice, django_capture_on_commit_callbacks)
    parse_trace(trace.pk, trace.run_id)
    diagnose_trace(trace.pk, trace.run_id)
    parse_trace(trace.pk, trace.run_id)  # the worker died before acknowledging: both come back
    diagnose_trace(trace.pk, trace.run_id)
    trace.refresh_from_db()
    assert [h["state"] for h in trace.state_history] == ["received", "parsing", "parsed", "diagnosing", "done"]
    assert trace.findings.count() == len(trace.report["findings"])


def test_a_trace_whose_parse_task_was_lost_is_queued_again_as_a_new_run(infra, alice, no_worker,
                                                                        django_capture_on_commit_callbacks):
    trace = upload(infra, alice, django_capture_on_commit_callbacks)
    queued_messages(no_worker.queue)
    trace.transition(Trace.State.PARSING)  # then the worker died, and its message with it
    assert reconcile_traces(stale_s=60) == ([], [], [])  # its heartbeat is recent: a task may be on it
    age(trace, 120)
    assert reconcile_traces(stale_s=60) == ([], [trace.pk], [])
    old_run, trace = trace.run_id, Trace.objects.get(pk=trace.pk)
    assert trace.run_id != old_run
    [(task, args, embed)] = queued_messages(no_worker.queue)
    assert (task, args, [t["task"] for t in embed["chain"]]) == (
        "ingest.parse_trace", [trace.pk, trace.run_id], ["diagnosis.diagnose_trace"])
    parse_trace(trace.pk, old_run)  # the old message, redelivered late: the new run owns the trace
    assert Trace.objects.get(pk=trace.pk).state_history == trace.state_history
    parse_trace(trace.pk, trace.run_id)
    assert Trace.objects.get(pk=trace.pk).state == "parsed"


def test_a_lost_diagnosis_is_queued_again_without_parsing_again(infra, alice, no_worker,
                                                                django_capture_on_commit_callbacks):
    trace = upload(infra, alice, django_capture_on_commit_callbacks)
    parse_trace(trace.pk, trace.run_id)
    queued_messages(no_worker.queue)
    Trace.objects.get(pk=trace.pk).transition(Trace.State.DIAGNOSING)
    age(trace, 120)
    assert reconcile_traces(stale_s=60).requeued == [trace.pk]
    trace.refresh_from_db()
    assert [(task, args) for task, args, _ in queued_messages(no_worker.queue)] == [
        ("diagnosis.diagnose_trace", [trace.pk, trace.run_id])]


def test_after_too_many_lost_attempts_the_trace_fails_with_a_reason(infra, alice, no_worker,
                                                                     django_capture_on_commit_callbacks):
    parsing = upload(infra, alice, django_capture_on_commit_callbacks)
    for _ in range(MAX_PARSE_ATTEMPTS):
        parsing.transition(Trace.State.PARSING)
    diagnosing = upload(infra, alice, django_capture_on_commit_callbacks)
    parse_trace(diagnosing.pk, diagnosing.run_id)
    diagnosing.refresh_from_db()
    for _ in range(MAX_DIAGNOSE_ATTEMPTS):
        diagnosing.transition(Trace.State.DIAGNOSING)
    queued_messages(no_worker.queue)
    age(parsing, 120)
    age(diagnosing, 120)
    assert sorted(reconcile_traces(stale_s=60).failed) == sorted([parsing.pk, diagnosing.pk])
    assert queued_messages(no_worker.queue) == []
    for trace, step in ((parsing, "parsing"), (diagnosing, "diagnosing")):
        trace.refresh_from_db()
        assert trace.state == "failed" and trace.run_id == ""
        assert "gave up after 3 attempts" in trace.error and f"while {step} this trace" in trace.error


def test_a_diagnosis_redelivered_after_each_worker_death_fails_with_a_reason(infra, alice, no_worker,
                                                                             django_capture_on_commit_callbacks):
    trace = upload(infra, alice, django_capture_on_commit_callbacks)
    parse_trace(trace.pk, trace.run_id)
    trace.refresh_from_db()
    for _ in range(MAX_DIAGNOSE_ATTEMPTS):  # each attempt died after marking the trace `diagnosing`
        trace.transition(Trace.State.DIAGNOSING)
    diagnose_trace(trace.pk, trace.run_id)
    trace.refresh_from_db()
    assert trace.state == "failed" and f"gave up after {MAX_DIAGNOSE_ATTEMPTS} attempts" in trace.error
