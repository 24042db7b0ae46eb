"""`POST /v1/traces`, the OTLP/HTTP receiver: the real OpenTelemetry exporter streams spans to
the live server and they end in a diagnosed trace; both encodings, gzip and its bound, the
token header, the size bound and partial success are checked at the endpoint."""
from __future__ import annotations

import gzip
import json
import time

import pytest
import requests
from google.protobuf import json_format
from opentelemetry.exporter.otlp.proto.http import Compression
from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter
from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import (
    ExportTraceServiceRequest, ExportTraceServiceResponse)
from opentelemetry.sdk.resources import Resource
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import BatchSpanProcessor, SpanExportResult
from opentelemetry.trace import Status, StatusCode

from accounts.models import ApiToken
from ingest.models import Trace
from otlp_receiver.models import PendingSpans

SECOND = 1_000_000_000


def _span(trace_id: str, span_id: str, start: int, name: str = "GET /generate") -> dict:
    return {"traceId": trace_id, "spanId": span_id, "name": name, "kind": 2,
            "startTimeUnixNano": str(start), "endTimeUnixNano": str(start + SECOND // 4)}


def _request(service: str, spans: list[dict]) -> dict:
    return {"resourceSpans": [{
        "resource": {"attributes": [{"key": "service.name", "value": {"stringValue": service}}]},
        "scopeSpans": [{"scope": {"name": "test"}, "spans": spans}]}]}


@pytest.fixture
def window(settings):
    settings.TRACEDOC_OTLP_WINDOW_SECONDS = 60
    settings.TRACEDOC_OTLP_GRACE_SECONDS = 0
    return 60


@pytest.fixture
def token(alice) -> str:
    return ApiToken.issue(alice)[1]


def test_json_spans_are_grouped_by_service_and_window_and_bad_spans_are_reported(client, token, window, no_worker):
    # a window still open (the spans wait in PendingSpans), the spans well inside it: windows
    # are aligned to the epoch, and spans across a boundary would be two groups
    soon = (time.time_ns() // (window * SECOND) + 60) * window * SECOND + SECOND
    body = _request("frontend", [_span("ab" * 16, "cd" * 8, soon), _span("ab" * 16, "ef" * 8, soon + SECOND),
                                 _span("00" * 16, "12" * 8, soon)])  # an all-zero traceId is dropped
    body["resourceSpans"] += _request("router", [_span("01" * 16, "02" * 8, soon)])["resourceSpans"]
    answer = client.post("/v1/traces", json.dumps(body), content_type="application/json",
                         HTTP_AUTHORIZATION=f"Token {token}")
    assert answer.status_code == 200, answer.content
    assert answer["Content-Type"] == "application/json"
    partial = answer.json()["partialSuccess"]
    assert partial["rejectedSpans"] == "1" and "traceId" in partial["errorMessage"]
    pending = {p.service: p.span_count for p in PendingSpans.objects.all()}
    assert pending == {"frontend": 2, "router": 1}
    assert not Trace.objects.exists()


def test_protobuf_and_gzip_are_read_and_the_answer_is_protobuf(client, token, window, no_worker):
    past = time.time_ns() - 3 * window * SECOND  # a closed window: it becomes a trace at once
    message = ExportTraceServiceRequest()
    json_format.Parse(json.dumps(_request("worker", [])), message)
    message.resource_spans[0].scope_spans[0].spans.add(
        trace_id=bytes.fromhex("aa" * 16), span_id=bytes.fromhex("bb" * 8), name="decode",
        start_time_unix_nano=past, end_time_unix_nano=past + SECOND)
    answer = client.post("/v1/traces", gzip.compress(message.SerializeToString()),
                         content_type="application/x-protobuf", HTTP_CONTENT_ENCODING="gzip",
                         HTTP_AUTHORIZATION=f"Token {token}")
    assert answer.status_code == 200, answer.content
    assert answer["Content-Type"] == "application/x-protobuf"
    parsed = ExportTraceServiceResponse.FromString(answer.content)
    assert not parsed.HasField("partial_success")
    trace = Trace.objects.get()
    assert trace.labels == {"service": "worker", "source": "otlp"}
    assert [a.name for a in trace.artifacts.all()][0].startswith("otlp-worker-")
    assert not PendingSpans.objects.exists()


def test_token_size_and_decompression_are_bounded(client, token, window, settings, no_worker):
    body = json.dumps(_request("frontend", [_span("ab" * 16, "cd" * 8, time.time_ns())]))
    assert client.post("/v1/traces", body, content_type="application/json").status_code == 401
    assert client.post("/v1/traces", body, content_type="application/json",
                       HTTP_AUTHORIZATION="Token wrong").status_code == 401
    assert client.post("/v1/traces", body, content_type="text/plain",
                       HTTP_AUTHORIZATION=f"Token {token}").status_code == 415
    settings.TRACEDOC_OTLP_MAX_REQUEST_BYTES = 100
    too_big = client.post("/v1/traces", body, content_type="application/json", HTTP_AUTHORIZATION=f"Token {token}")
    assert too_big.status_code == 413 and "100" in too_big.json()["message"]
    settings.TRACEDOC_OTLP_MAX_REQUEST_BYTES = 1024**2
    bomb = gzip.compress(b" " * (8 * 1024**2))  # expands past the request bound
    answer = client.post("/v1/traces", bomb, content_type="application/json", HTTP_CONTENT_ENCODING="gzip",
                         HTTP_AUTHORIZATION=f"Token {token}")
    assert answer.status_code == 413 and "decompress" in answer.json()["message"]
    garbage = client.post("/v1/traces", b"\xff\x00junk", content_type="application/x-protobuf",
                          HTTP_AUTHORIZATION=f"Token {token}")
    assert garbage.status_code == 400
    assert not PendingSpans.objects.exists()


def test_the_otlp_exporter_streams_spans_that_end_in_a_diagnosed_trace(live_tracedoc, window):
    exporter = OTLPSpanExporter(endpoint=f"{live_tracedoc.url}/v1/traces", compression=Compression.Gzip,
                                headers={"Authorization": f"Token {live_tracedoc.token}"}, timeout=30)
    provider = TracerProvider(resource=Resource.create({"service.name": "llm-frontend"}))
    # batched as in production: shutdown sends the ten spans in one export request
    provider.add_span_processor(BatchSpanProcessor(exporter, schedule_delay_millis=60_000))
    tracer = provider.get_tracer("test_otlp_receiver")
    # a closed window (the export request flushes it), its spans well inside it: windows are
    # aligned to the epoch, and spans across a boundary would make two traces
    start = (time.time_ns() // (window * SECOND) - 3) * window * SECOND + SECOND
    for i in range(5):
        with tracer.start_as_current_span("POST /v1/completions", start_time=start + i * SECOND,
                                          end_on_exit=False) as request_span:
            with tracer.start_as_current_span("generate", start_time=start + i * SECOND + 1000,
                                              end_on_exit=False) as inner:
                if i == 4:
                    inner.set_status(Status(StatusCode.ERROR, "CUDA error: out of memory"))
                inner.end(end_time=start + i * SECOND + SECOND // 2)
            request_span.end(end_time=start + i * SECOND + SECOND // 2 + 1000)
    provider.shutdown()
    refused = OTLPSpanExporter(endpoint=f"{live_tracedoc.url}/v1/traces", headers={"Authorization": "Token no"})
    assert refused.export([request_span]) == SpanExportResult.FAILURE

    headers = {"Authorization": f"Token {live_tracedoc.token}"}
    deadline = time.monotonic() + 120
    while True:
        listed = requests.get(f"{live_tracedoc.url}/api/v1/traces/", headers=headers, timeout=30).json()
        traces = listed["results"] if isinstance(listed, dict) else listed
        if traces and traces[0]["state"] in ("done", "failed") or time.monotonic() > deadline:
            break
        time.sleep(0.5)
    assert [t["labels"] for t in traces] == [{"service": "llm-frontend", "source": "otlp"}]
    assert traces[0]["state"] == "done", traces
    report = requests.get(f"{live_tracedoc.url}/api/v1/traces/{traces[0]['id']}/report/",
                          headers=headers, timeout=30).json()
    [artifact] = report["trace"]["artifacts"]
    assert artifact["path"].startswith("otlp-llm-frontend-") and artifact["format"] == "otlp_json"
    assert artifact["events"] >= 10  # the ten spans

