"""An upload while the broker is down is kept (state received, a note), and the beat job
sends it again once the broker is back."""
import io

import pytest

from ingest.models import Trace
from ingest.tasks import requeue_stalled
from tests.web.conftest import fresh_connections
from tracedoc.celery import app


@pytest.fixture
def dead_broker():
    """Point Celery at a port nothing listens on (a real connection attempt, refused)."""
    # the Django-namespaced key, as the settings set it: a plain `broker_url` would shadow
    # it for every later test that points Celery at a broker of its own
    old = app.conf.broker_url
    app.conf.update(CELERY_BROKER_URL="redis://127.0.0.1:9/0")
    fresh_connections()
    yield
    app.conf.update(CELERY_BROKER_URL=old)
    fresh_connections()


def test_upload_survives_a_dead_broker(alice_api, dead_broker, django_capture_on_commit_callbacks):
    f = io.BytesIO(b"[rank0]:[E1129 08:19:30.038029502 ProcessGroupNCCL.cpp:689] hello\n")
    f.name = "rank0.log"
    with django_capture_on_commit_callbacks(execute=True):
        response = alice_api.post("/api/v1/traces/", {"files": [f]}, format="multipart")
    assert response.status_code == 201, response.content
    trace = Trace.objects.get(pk=response.json()["id"])
    assert trace.state == "received"
    assert "broker was unreachable" in trace.error


def test_requeue_sends_stalled_traces_again(alice_api, no_worker, django_capture_on_commit_callbacks):
    f = io.BytesIO(b"some log line\n")
    f.name = "a.log"
    with django_capture_on_commit_callbacks(execute=True):
        response = alice_api.post("/api/v1/traces/", {"files": [f]}, format="multipart")
    pk = response.json()["id"]
    assert no_worker.ids() == [pk]
    assert requeue_stalled(older_than_s=3600) == 0  # too young to count as stalled
    assert requeue_stalled(older_than_s=-1) == 1
    assert no_worker.ids() == [pk, pk]
