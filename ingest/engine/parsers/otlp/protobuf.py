"""OTLP protobuf: a serialized ExportTraceServiceRequest (or the Logs / Metrics request),
plain or gzip. Read with the official opentelemetry-proto classes.

All three requests are `repeated Resource* = 1`, so a file is a sequence of length-delimited
field-1 records. We walk that sequence by hand (so a truncated or corrupted file is reported
at its byte offset and the complete records before it are kept), parse each record with the
class whose content is plausible (16-byte trace ids, ...) and hand its dict shape to the
same code as OTLP/JSON.
"""
from __future__ import annotations

import functools
from typing import TYPE_CHECKING

from ingest.engine.events import EventSink, ParseError, ParseReport
from ingest.engine.io import read_all
from ingest.engine.parsers import looks_binary
from ingest.engine.parsers.otlp.common import OtlpEmitter

if TYPE_CHECKING:
    from opentelemetry.proto.logs.v1.logs_pb2 import ResourceLogs
    from opentelemetry.proto.metrics.v1.metrics_pb2 import ResourceMetrics
    from opentelemetry.proto.trace.v1.trace_pb2 import ResourceSpans

FORMAT = "otlp_pb"
SOURCE = "otlp"


class WireError(Exception):
    def __init__(self, offset: int, expected: str, got: str):
        self.offset, self.expected, self.got = offset, expected, got


def _varint(data: bytes, pos: int) -> tuple[int, int]:
    result = shift = 0
    while True:
        if pos >= len(data):
            raise WireError(pos, "a complete varint", "the end of the data inside one")
        b = data[pos]
        result |= (b & 0x7F) << shift
        pos += 1
        if not b & 0x80:
            return result, pos
        shift += 7
        if shift > 63:
            raise WireError(pos, "a varint of at most 10 bytes", "a longer one")


def records(data: bytes):
    """(offset, payload) of each top-level field-1 record; WireError where the layout breaks."""
    pos = 0
    while pos < len(data):
        start = pos
        tag, pos = _varint(data, pos)
        if tag != 0x0A:  # field 1, wire type 2 (length-delimited)
            raise WireError(start, "a field-1 length-delimited record tag (0x0a)", f"tag 0x{tag:x}")
        size, pos = _varint(data, pos)
        if pos + size > len(data):
            raise WireError(start, f"a record of {size:,} bytes",
                            f"only {len(data) - pos:,} bytes left (the file is truncated)")
        yield start, data[pos:pos + size]
        pos += size


def _spans_ok(m: ResourceSpans) -> bool:
    spans = [s for ss in m.scope_spans for s in ss.spans]
    return bool(spans) and all(len(s.trace_id) == 16 and len(s.span_id) == 8 and s.start_time_unix_nano
                               for s in spans)


def _logs_ok(m: ResourceLogs) -> bool:
    logs = [r for sl in m.scope_logs for r in sl.log_records]
    return bool(logs) and all((r.time_unix_nano or r.observed_time_unix_nano) and len(r.trace_id) in (0, 16)
                              for r in logs)


def _metrics_ok(m: ResourceMetrics) -> bool:
    metrics = [x for sm in m.scope_metrics for x in sm.metrics]
    return bool(metrics) and all(x.name and x.WhichOneof("data") for x in metrics)


@functools.cache
def _kinds() -> tuple:
    """The message classes with their plausibility checks. Imported on the first binary file
    that opens like a request: detection reads this module for every upload (protobuf's
    imports are ~25 ms of a `tracedoc diagnose`)."""
    from opentelemetry.proto.logs.v1.logs_pb2 import ResourceLogs
    from opentelemetry.proto.metrics.v1.metrics_pb2 import ResourceMetrics
    from opentelemetry.proto.trace.v1.trace_pb2 import ResourceSpans
    return ((ResourceSpans, _spans_ok, "resourceSpans"), (ResourceLogs, _logs_ok, "resourceLogs"),
            (ResourceMetrics, _metrics_ok, "resourceMetrics"))


def _classify(payload: bytes):
    from google.protobuf.message import DecodeError  # see _kinds
    for cls, plausible, key in _kinds():
        try:
            msg = cls.FromString(payload)
        except DecodeError:
            continue
        if plausible(msg):
            return msg, key
    return None, None


def sniff(head: bytes, name: str) -> bool:
    if not head.startswith(b"\x0a") or not looks_binary(head):
        return False
    try:
        for _, payload in records(head):
            return _classify(payload)[0] is not None
    except WireError as e:
        # a first record longer than the head (or a truncated file): judge by its start, a
        # Resource* message opens with its resource (field 1) or scope list (field 2)
        if e.offset == 0:
            try:
                _, pos = _varint(head, 1)
            except WireError:
                return False
            return head[pos:pos + 1] in (b"\x0a", b"\x12") and b"service.name" in head
    return False


def parse(path, sink: EventSink, report: ParseReport) -> None:
    from google.protobuf import json_format  # see _kinds
    data = read_all(path)
    emitter = OtlpEmitter(path, sink, report)
    index = -1
    try:
        for index, (offset, payload) in enumerate(records(data)):
            msg, key = _classify(payload)
            if msg is None:
                report.warn(f"byte {offset}: record {index} is not a plausible ResourceSpans, ResourceLogs "
                            "or ResourceMetrics message; skipped")
                report.skipped["undecodable protobuf record"] += 1
                continue
            emitter.document({key: [json_format.MessageToDict(msg)]}, where=f"record {index} (byte {offset}): ")
    except WireError as e:
        if emitter.good == 0:
            raise ParseError(str(path), f"byte {e.offset}", f"an OTLP protobuf request: {e.expected}",
                             got=e.got) from None
        report.warn(f"byte {e.offset}: expected {e.expected}; got {e.got}; the rest of the file is ignored")
        report.skipped["truncated protobuf tail"] += 1
    if index < 0:
        raise ParseError(str(path), "byte 0", "an OTLP protobuf request with at least one resource record",
                         got="an empty request")
    if emitter.good == 0 and emitter.first_error is None:
        raise ParseError(str(path), "byte 0", "an OTLP ExportTrace/Logs/MetricsServiceRequest",
                         got=f"{index + 1:,} records, none decoded as spans, logs or metrics")
    emitter.finish()
