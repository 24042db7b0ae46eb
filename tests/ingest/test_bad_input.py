"""Unusable uploads fail with a message naming the file and saying what was wrong."""
import random

import pytest
from django.core.files.uploadedfile import SimpleUploadedFile

from ingest.tasks import parse_trace
from ingest.uploads import create_trace
from tests.corpus import corpus


def bad_inputs() -> dict[str, bytes]:
    kineto = corpus("h200", "cudagraph_abort", "kineto_trace.json.gz").read_bytes()
    return {
        "empty.json": b"",
        "truncated.json.gz": kineto[: len(kineto) // 2],
        "junk.bin": random.Random(7).randbytes(8192),
        "not_a_trace.json": b'{"model": "llama", "batch_size": 8, "notes": ["fast", "cheap"]}\n',
    }


@pytest.fixture
def bad(corpus_dir):
    return bad_inputs()


@pytest.mark.parametrize("name", ["empty.json", "truncated.json.gz", "junk.bin", "not_a_trace.json"])
def test_each_bad_file_alone_fails_the_trace_naming_it(infra, alice, bad, no_worker, name):
    trace = create_trace(infra, alice, [SimpleUploadedFile(name, bad[name])])
    parse_trace(trace.pk)
    trace.refresh_from_db()
    artifact = trace.artifacts.get()
    assert trace.state == "failed", (artifact.format, artifact.event_count)
    assert artifact.error.startswith(name)
    assert name in trace.error and "no artifact could be parsed" in trace.error
    assert no_worker.ids() == []  # nothing to diagnose


def test_all_bad_files_are_named_in_the_failure(infra, alice, bad, no_worker):
    trace = create_trace(infra, alice, [SimpleUploadedFile(n, b) for n, b in bad.items()])
    parse_trace(trace.pk)
    trace.refresh_from_db()
    assert trace.state == "failed"
    for name in bad:
        assert name in trace.error
