"""Nothing queued is lost: traces whose messages the broker lost (a Redis restart without
persistence; here the test's own queue on the real Redis is flushed, as a restart would leave
it) are sent again by the reconciler, exactly once, and end `done`; traces whose message is
still queued (a backlog) are left where they are, however long they wait."""
from __future__ import annotations

import io

import pytest
import redis

from diagnosis.tasks import diagnose_trace
from ingest.models import Trace
from ingest.tasks import parse_trace
from tests.support.fixtures import REDIS_URL
from tracedoc.workflow import reconcile_traces

pytestmark = pytest.mark.timeout(180)
LOG = b"[rank0]:[E1129 08:19:30.038029502 ProcessGroupNCCL.cpp:689] hello\n"


def _upload(api, capture) -> int:
    f = io.BytesIO(LOG)
    f.name = "rank0.log"
    with capture(execute=True):
        response = api.post("/api/v1/traces/", {"files": [f]}, format="multipart")
    assert response.status_code == 201, response.content
    return response.json()["id"]


def test_traces_lost_with_the_broker_are_sent_again_once_and_end_done(
        alice_api, no_worker, django_capture_on_commit_callbacks, storage):
    pks = [_upload(alice_api, django_capture_on_commit_callbacks) for _ in range(3)]
    first_runs = dict(Trace.objects.filter(pk__in=pks).values_list("pk", "run_id"))
    # still on the broker: a backlog, not a loss, however old
    assert reconcile_traces(unsent_after_s=3600, resend_after_s=-1).requeued == []
    # the broker loses the queue (as a Redis restart without persistence does)
    redis.Redis.from_url(REDIS_URL).delete(no_worker.queue)
    assert reconcile_traces(unsent_after_s=3600, resend_after_s=3600).requeued == []  # not yet past the timeout
    assert sorted(reconcile_traces(unsent_after_s=3600, resend_after_s=-1).requeued) == sorted(pks)
    # sent once: the new messages are on the broker, so later passes leave them
    assert reconcile_traces(unsent_after_s=3600, resend_after_s=-1).requeued == []
    messages = no_worker.take()
    assert sorted(pk for pk, _ in messages) == sorted(pks)
    for pk, run_id in messages:
        assert run_id and run_id != first_runs[pk]
        parse_trace(pk, first_runs[pk])  # a message of the lost run, delivered late: does nothing
        assert Trace.objects.get(pk=pk).state == "received"
        parse_trace(pk, run_id)
        diagnose_trace(pk, run_id)
    states = dict(Trace.objects.filter(pk__in=pks).values_list("pk", "state"))
    assert states == {pk: "done" for pk in pks}
    assert reconcile_traces(unsent_after_s=-1, resend_after_s=-1) == ([], [], [])
