"""An uploaded archive is a bundle: its members become the trace's artifacts."""
import hashlib
import io
import zipfile

import pytest
from django.core.files.uploadedfile import SimpleUploadedFile

from ingest.tasks import parse_trace
from ingest.uploads import create_trace
from tests.corpus import corpus


@pytest.fixture
def bundle(corpus_dir):
    """A zip made now from the scenario's files, one of them in a sub-folder."""
    folder = corpus("h200", "cudagraph_abort")
    buf = io.BytesIO()
    with zipfile.ZipFile(buf, "w") as z:
        z.write(folder / "kineto_trace.json.gz", "run1/kineto_trace.json.gz")
        z.write(folder / "errors.log", "run1/logs/errors.log")
    return buf.getvalue()


def test_members_become_artifacts_named_by_their_path(infra, alice, bundle, no_worker):
    trace = create_trace(infra, alice, [SimpleUploadedFile("incident.zip", bundle)])
    parse_trace(trace.pk)
    trace.refresh_from_db()
    archive = trace.artifacts.get(parent=None)
    assert (archive.name, archive.format) == ("incident.zip", "archive")
    members = {a.name: a for a in archive.members.all()}
    names = zipfile.ZipFile(io.BytesIO(bundle)).namelist()
    assert set(members) == set(names)
    kineto = members["run1/kineto_trace.json.gz"]
    expected = hashlib.sha256(corpus("h200", "cudagraph_abort", "kineto_trace.json.gz").read_bytes()).hexdigest()
    assert (kineto.sha256, kineto.format) == (expected, "kineto")
    assert members["run1/logs/errors.log"].error.startswith("run1/logs/errors.log")
    assert trace.state == "parsed" and trace.artifacts_total == 2


def test_reparsing_an_archive_does_not_duplicate_members(infra, alice, bundle, no_worker):
    trace = create_trace(infra, alice, [SimpleUploadedFile("incident.zip", bundle)])
    parse_trace(trace.pk)
    parse_trace(trace.pk)
    assert trace.artifacts.count() == 3


def test_a_truncated_archive_fails_naming_it(infra, alice, bundle, no_worker):
    trace = create_trace(infra, alice, [SimpleUploadedFile("incident.zip", bundle[: len(bundle) // 2])])
    parse_trace(trace.pk)
    trace.refresh_from_db()
    assert trace.state == "failed"
    assert "incident.zip" in trace.error
