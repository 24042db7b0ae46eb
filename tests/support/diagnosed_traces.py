"""Corpus traces stored, parsed and diagnosed in the test's process, and what their reports say."""
from django.core.files.uploadedfile import SimpleUploadedFile

from diagnosis.tasks import diagnose_trace
from diagnosis.timeline_store import forget_all
from ingest.models import Trace
from ingest.tasks import parse_trace
from ingest.uploads import create_trace
from tests.corpus import corpus


def diagnosed(team, user, *parts: str):
    return diagnosed_folder(team, user, corpus("h200", *parts), parts[-1])


def diagnosed_folder(team, user, folder, name: str):
    """The files of one folder as one trace, parsed and diagnosed here."""
    files = [SimpleUploadedFile(p.name, p.read_bytes()) for p in sorted(folder.iterdir()) if p.is_file()]
    trace = create_trace(team, user, files, name=name)
    parse_trace(trace.pk)
    diagnose_trace(trace.pk)
    trace.refresh_from_db()
    assert trace.state == "done", trace.error
    forget_all()
    return trace


def diagnosed_file(team, user, path, adds_to: Trace | None = None) -> Trace:
    """One file as one trace, parsed and diagnosed here; `adds_to`: the trace it is a
    closed-loop capture for (diagnosed with that one's files under before/)."""
    trace = create_trace(team, user, [SimpleUploadedFile(path.name, path.read_bytes())], name=path.name)
    if adds_to is not None:
        Trace.objects.filter(pk=trace.pk).update(adds_to=adds_to)
    parse_trace(trace.pk)
    diagnose_trace(trace.pk)
    trace.refresh_from_db()
    assert trace.state == "done", trace.error
    return trace


def rule_ids(trace: Trace) -> set[str]:
    return {f["rule_id"] for f in trace.report["findings"]}
