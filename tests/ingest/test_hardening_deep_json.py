"""A JSON upload nested 200,000 levels deep fails as unusable input naming the nesting bound,
not as an internal error (RecursionError) of the parser."""
import sys

from django.core.files.uploadedfile import SimpleUploadedFile

from ingest.tasks import parse_trace
from ingest.uploads import create_trace

DEPTH = 200_000


def deep_kineto() -> bytes:
    """A Kineto header the sniffer accepts, then one event whose args nest DEPTH arrays."""
    nested = b"[" * DEPTH + b"]" * DEPTH
    return (b'{"schemaVersion": 1, "traceEvents": [{"ph": "X", "name": "a", "pid": 1, "tid": 1, '
            b'"ts": 1, "dur": 1, "args": {"x": ' + nested + b"}}]}")


def test_a_200000_deep_json_fails_naming_the_nesting_bound(infra, alice, no_worker):
    trace = create_trace(infra, alice, [SimpleUploadedFile("deep.json", deep_kineto())])
    parse_trace(trace.pk)
    trace.refresh_from_db()
    artifact = trace.artifacts.get()
    assert trace.state == "failed"
    assert artifact.error.startswith("deep.json")
    assert f"nesting deeper than {sys.getrecursionlimit():,}" in artifact.error
    assert "RecursionError" not in artifact.error and "internal error" not in artifact.error
