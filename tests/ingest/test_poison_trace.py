"""A trace whose parse keeps killing the worker fails after a few attempts instead of being
redelivered forever (tasks are acknowledged late)."""
from django.core.files.uploadedfile import SimpleUploadedFile

from ingest.models import Trace
from ingest.tasks import MAX_PARSE_ATTEMPTS, parse_trace
from ingest.uploads import create_trace


def _upload(team, user):
    return create_trace(team, user, [SimpleUploadedFile("rank0.log", b"[rank0]: hello\n")])


def test_redelivered_after_worker_deaths_fails_with_a_reason(infra, alice, no_worker):
    trace = _upload(infra, alice)
    for _ in range(MAX_PARSE_ATTEMPTS):  # each attempt died after marking the trace `parsing`
        trace.transition(Trace.State.PARSING)
    parse_trace(trace.pk)
    trace.refresh_from_db()
    assert trace.state == "failed"
    assert f"gave up after {MAX_PARSE_ATTEMPTS} attempts" in trace.error and "rank0.log" in trace.error


def test_one_interrupted_attempt_is_retried(infra, alice, no_worker):
    trace = _upload(infra, alice)
    trace.transition(Trace.State.PARSING)  # a worker died once
    parse_trace(trace.pk)
    trace.refresh_from_db()
    assert trace.state == "parsed"
