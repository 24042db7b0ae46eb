"""`ingest.parse_trace` run in-process on real corpus files: formats, counts, progress,
Parquet outputs, and idempotence (a redelivered task gives the same result)."""
import gzip
import hashlib
import json

import pyarrow.parquet as pq
import pytest
from django.core.files.uploadedfile import SimpleUploadedFile

from ingest.tasks import parse_trace
from ingest.uploads import create_trace
from tests.corpus import corpus


def make_trace(team, user, paths):
    files = [SimpleUploadedFile(p.name, p.read_bytes()) for p in paths]
    return create_trace(team, user, files)


@pytest.fixture
def kineto(corpus_dir):
    return corpus("h200", "cudagraph_abort", "kineto_trace.json.gz")


def test_a_kineto_trace_is_parsed_to_parquet(infra, alice, kineto, storage, no_worker):
    trace = make_trace(infra, alice, [kineto])
    parse_trace(trace.pk)
    trace.refresh_from_db()
    artifact = trace.artifacts.get()
    assert "traceEvents" in json.loads(gzip.decompress(kineto.read_bytes()))  # it is a Kineto trace
    assert artifact.format == "kineto" and artifact.error == ""
    table = pq.read_table(storage / artifact.parquet)
    assert artifact.event_count == table.num_rows > 0
    assert set(table.column("artifact").to_pylist()) == {"kineto_trace.json.gz"}
    ts = [t for t in table.column("ts").to_pylist() if t > 0]
    assert artifact.start_ts == min(ts)
    assert (trace.state, trace.events_done, trace.artifacts_done) == ("parsed", table.num_rows, 1)
    assert trace.bytes_done == trace.bytes_total == kineto.stat().st_size
    assert no_worker.ids() == []  # the diagnosis follows through tracedoc.workflow's chain, not from here


def test_running_twice_gives_the_same_result(infra, alice, kineto, storage, no_worker):
    trace = make_trace(infra, alice, [kineto])
    parse_trace(trace.pk)
    first = list(trace.artifacts.values("name", "format", "event_count", "parquet", "start_ts", "end_ts"))
    files = sorted(p.name for p in (storage / "parquet" / str(trace.pk)).iterdir())
    parse_trace(trace.pk)
    assert list(trace.artifacts.values("name", "format", "event_count", "parquet", "start_ts", "end_ts")) == first
    assert sorted(p.name for p in (storage / "parquet" / str(trace.pk)).iterdir()) == files
    trace.refresh_from_db()
    assert trace.events_done == first[0]["event_count"]
    assert [h["state"] for h in trace.state_history] == ["received", "parsing", "parsed", "parsing", "parsed"]


def test_an_empty_file_beside_a_good_one_is_an_artifact_error(infra, alice, kineto, no_worker):
    empty = corpus("h200", "cudagraph_abort", "errors.log")
    assert empty.stat().st_size == 0
    trace = make_trace(infra, alice, [kineto, empty])
    parse_trace(trace.pk)
    trace.refresh_from_db()
    assert trace.state == "parsed"
    bad = trace.artifacts.get(name="errors.log")
    assert bad.error.startswith("errors.log") and "empty" in bad.error
    assert hashlib.sha256(b"").hexdigest() == bad.sha256
