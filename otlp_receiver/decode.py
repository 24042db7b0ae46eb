"""An OTLP/HTTP export request body -> ExportTraceServiceRequest, and the answer OTLP expects.

Both encodings of the spec are read (binary protobuf, and JSON through protobuf's own
json_format), gzip bounded as uploaded artifacts are (ingest/engine/io.py)."""
from __future__ import annotations

import base64
import dataclasses
import gzip
import io
import json

import re2
from google.protobuf import json_format
from google.protobuf.message import DecodeError
from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import (
    ExportTraceServiceRequest, ExportTraceServiceResponse)

from ingest.engine.events import ParseError
from ingest.engine.io import BoundedReader, DecompressionBound

PROTOBUF = "application/x-protobuf"
JSON = "application/json"


class BadRequest(ValueError):
    """The body is not an export request in the announced encoding."""


class TooLarge(BadRequest):
    """The body would cost more than the web process spends on one request (413)."""


# Past its first MiB, a gzip body may expand at most the artifact ratio (ingest/engine/io.py) times
# its compressed size: the artifacts' 64 MiB floor is for a worker, not for a web thread.
GZIP_FLOOR_BYTES = 1024**2
MAX_DEPTH = 64  # json_format's own bound, checked before json.loads recurses
_JSON_STRING = re2.compile(rb'"(?:[^"\\]|\\.)*"')
_NOT_BRACKETS = bytes(b for b in range(256) if b not in b"[]{}")


def media_type(content_type: str) -> str:
    return (content_type or "").split(";")[0].strip().lower()


def gunzip(body: bytes, limit: int) -> bytes:
    """The decompressed body, at most `limit` bytes and within the bomb ratio of ingest/engine/io.py."""
    compressed = io.BytesIO(body)
    bound = dataclasses.replace(DecompressionBound.from_env(limit), floor=GZIP_FLOOR_BYTES)
    reader = BoundedReader(gzip.GzipFile(fileobj=compressed, mode="rb"), bound, "request body", compressed.tell)
    try:
        with io.BufferedReader(reader) as stream:
            return stream.read()
    except (OSError, EOFError) as e:  # gzip.BadGzipFile is an OSError
        raise BadRequest(f"Content-Encoding gzip, but the body is not a whole gzip stream ({e})") from None
    except ParseError as e:
        raise TooLarge(str(e)) from None


def check_json_shape(body: bytes, max_objects: int) -> None:
    """Before json.loads: at most `max_objects` objects and arrays, nested at most MAX_DEPTH deep
    (counted on the body without its strings: linear time, C speed but for the brackets, which
    are few once counted). TooLarge or BadRequest otherwise."""
    structure = _JSON_STRING.sub(b"", body)
    containers = structure.count(b"{") + structure.count(b"[")
    if containers > max_objects:
        raise TooLarge(f"a JSON export request may hold at most {max_objects:,} objects and arrays "
                       f"(TRACEDOC_OTLP_MAX_OBJECTS); this one holds {containers:,}: send fewer spans per request")
    depth = deepest = 0
    for bracket in structure.translate(None, _NOT_BRACKETS):
        depth += 1 if bracket in b"[{" else -1
        if depth > deepest:
            deepest = depth
            if deepest > MAX_DEPTH:
                raise BadRequest(f"not an ExportTraceServiceRequest in {JSON}: nested deeper than {MAX_DEPTH} levels")


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
