"""An OTLP/HTTP export request body -> ExportTraceServiceRequest, and the answer OTLP expects.

Both encodings of the spec are read (binary protobuf, and JSON through protobuf's own
json_format), gzip bounded as uploaded artifacts are (ingest/io.py)."""
from __future__ import annotations

import base64
import gzip
import io
import json

from google.protobuf import json_format
from google.protobuf.message import DecodeError
from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import (
    ExportTraceServiceRequest, ExportTraceServiceResponse)

from ingest.events import ParseError
from ingest.io import BoundedReader, DecompressionBound

PROTOBUF = "application/x-protobuf"
JSON = "application/json"


class BadRequest(ValueError):
    """The body is not an export request in the announced encoding."""


def media_type(content_type: str) -> str:
    return (content_type or "").split(";")[0].strip().lower()


def gunzip(body: bytes, limit: int) -> bytes:
    """The decompressed body, at most `limit` bytes and within the bomb ratio of ingest/io.py."""
    compressed = io.BytesIO(body)
    reader = BoundedReader(gzip.GzipFile(fileobj=compressed, mode="rb"), DecompressionBound.from_env(limit),
                           "request body", compressed.tell)
    try:
        with io.BufferedReader(reader) as stream:
            return stream.read()
    except (OSError, EOFError) as e:  # gzip.BadGzipFile is an OSError
        raise BadRequest(f"Content-Encoding gzip, but the body is not a whole gzip stream ({e})") from None
    except ParseError as e:
        raise BadRequest(str(e)) from None


def parse_request(body: bytes, kind: str) -> ExportTraceServiceRequest:
    message = ExportTraceServiceRequest()
    try:
        if kind == PROTOBUF:
            message.ParseFromString(body)
        else:
            json_format.Parse(_hex_ids_to_base64(body), message, ignore_unknown_fields=True, max_recursion_depth=64)
    except (DecodeError, json_format.ParseError, ValueError, RecursionError) as e:
        raise BadRequest(f"not an ExportTraceServiceRequest in {kind}: {e}") from None
    return message


def _hex_ids_to_base64(body: bytes) -> str:
    """OTLP/JSON writes traceId/spanId/parentSpanId as hex (the spec departs from protobuf's
    JSON mapping there); protobuf's parser wants base64 for bytes fields."""
    def fix(node):
        if isinstance(node, dict):
            for key, value in node.items():
                if key in ("traceId", "spanId", "parentSpanId") and isinstance(value, str) and _is_hex(value):
                    node[key] = base64.b64encode(bytes.fromhex(value)).decode()
                else:
                    fix(value)
        elif isinstance(node, list):
            for item in node:
                fix(item)
        return node
    return json.dumps(fix(json.loads(body)))


def _is_hex(value: str) -> bool:
    return len(value) in (16, 32) and all(c in "0123456789abcdefABCDEF" for c in value)


def response_body(kind: str, rejected: int, reason: str) -> bytes:
    """ExportTraceServiceResponse; `partial_success` only when spans were dropped (the spec)."""
    answer = ExportTraceServiceResponse()
    if rejected:
        answer.partial_success.rejected_spans = rejected
        answer.partial_success.error_message = reason
    if kind == PROTOBUF:
        return answer.SerializeToString()
    return json_format.MessageToJson(answer).encode()
