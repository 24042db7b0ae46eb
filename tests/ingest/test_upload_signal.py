"""An upload starts the workflow through ingest.signals.trace_received, not an import of it."""
from __future__ import annotations

import pytest
from django.core.exceptions import ImproperlyConfigured
from django.core.files.uploadedfile import SimpleUploadedFile

from ingest.models import Trace
from ingest.signals import trace_received
from ingest.uploads import create_trace

pytestmark = pytest.mark.django_db


def test_an_upload_sends_trace_received_and_the_workflow_gives_it_a_run(infra, alice):
    seen = []

    def listener(sender, trace, **_):
        seen.append(trace.pk)

    trace_received.connect(listener, sender=Trace, dispatch_uid="test.listener")
    try:
        trace = create_trace(infra, alice, [SimpleUploadedFile("rank0.log", b"step 1\n")])
    finally:
        trace_received.disconnect(dispatch_uid="test.listener", sender=Trace)
    assert seen == [trace.pk]
    trace.refresh_from_db()
    assert trace.run_id  # tracedoc.workflow's receiver (connected by tracedoc's AppConfig) started a run


def test_an_upload_with_nothing_to_start_it_is_refused(infra, alice, monkeypatch):
    monkeypatch.setattr(trace_received, "has_listeners", lambda sender=None: False)
    with pytest.raises(ImproperlyConfigured):
        create_trace(infra, alice, [SimpleUploadedFile("rank0.log", b"step 1\n")])
    assert not Trace.objects.filter(team=infra).exists()
