"""An upload while the broker is down is kept (state received, a note), and the beat job
sends it again once the broker is back; an upload that reached the broker is never sent twice."""
import io

from ingest.models import Trace
from tracedoc.workflow import reconcile_traces


def test_upload_survives_a_dead_broker(alice_api, dead_broker, django_capture_on_commit_callbacks):
    f = io.BytesIO(b"[rank0]:[E1129 08:19:30.038029502 ProcessGroupNCCL.cpp:689] hello\n")
    f.name = "rank0.log"
    with django_capture_on_commit_callbacks(execute=True):
        response = alice_api.post("/api/v1/traces/", {"files": [f]}, format="multipart")
    assert response.status_code == 201, response.content
    trace = Trace.objects.get(pk=response.json()["id"])
    assert trace.state == "received"
    assert "broker was unreachable" in trace.error
    assert trace.run_id == ""  # what the beat job looks for


def _upload(api, capture) -> int:
    f = io.BytesIO(b"some log line\n")
    f.name = "a.log"
    with capture(execute=True):
        response = api.post("/api/v1/traces/", {"files": [f]}, format="multipart")
    return response.json()["id"]


def test_the_beat_job_sends_an_upload_the_broker_missed(alice_api, no_worker, django_capture_on_commit_callbacks):
    pk = _upload(alice_api, django_capture_on_commit_callbacks)
    Trace.objects.filter(pk=pk).update(run_id="", error="waiting for a worker")  # as with the broker down
    assert reconcile_traces(unsent_after_s=3600).sent == []  # too young to count as stalled
    assert reconcile_traces(unsent_after_s=-1).sent == [pk]
    assert no_worker.ids() == [pk, pk]  # the first message (lost in real life) and the new one
    trace = Trace.objects.get(pk=pk)
    assert trace.run_id and trace.error == ""


def test_a_queued_upload_waiting_in_a_backlog_is_not_sent_twice(alice_api, no_worker,
                                                                 django_capture_on_commit_callbacks):
    pk = _upload(alice_api, django_capture_on_commit_callbacks)
    assert no_worker.ids() == [pk]
    assert reconcile_traces(unsent_after_s=-1) == ([], [], [])
    assert no_worker.ids() == [pk]
