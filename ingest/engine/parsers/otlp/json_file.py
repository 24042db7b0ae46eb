"""OTLP/JSON: one ExportTrace/Logs/MetricsServiceRequest object (TracesData, LogsData,
MetricsData), or the collector file exporter's JSON lines (one such object per line).
Rows are described in otlp/common.py."""
from __future__ import annotations

import orjson
import re2  # linear time: detection runs this on every uploaded file

from ingest.engine.events import EventSink, ParseError, ParseReport, json_error_got
from ingest.engine.io import read_all, read_head
from ingest.engine.parsers.otlp.common import OtlpEmitter
from ingest.engine.parsers.telemetry import iter_json_lines

FORMAT = "otlp_json"
SOURCE = "otlp"

# One document is decoded whole (orjson: several times its size in objects); beyond this
# the exporter's JSON-lines form, read a line at a time, is the way to send more.
MAX_DOCUMENT_BYTES = 1024**3
_START = re2.compile(rb'^\s*\{\s*"resource(Spans|Logs|Metrics)"\s*:')


def sniff(head: bytes, name: str) -> bool:
    return bool(_START.match(head[:4096]))


def parse(path, sink: EventSink, report: ParseReport) -> None:
    emitter = OtlpEmitter(path, sink, report)
    if _starts_json_lines(read_head(path)):
        _parse_lines(path, emitter, report)  # streamed: a line at a time
        emitter.finish()
        return
    data = read_all(path, MAX_DOCUMENT_BYTES)
    try:
        doc = orjson.loads(data)
    except orjson.JSONDecodeError as e:
        if not _is_json_lines(data):
            raise ParseError(str(path), _position(data, e.pos), "valid JSON",
                             got=json_error_got(data, e.pos, e.msg)) from None
        _parse_lines(path, emitter, report)
    else:
        emitter.document(doc)
    emitter.finish()


def _starts_json_lines(head: bytes) -> bool:
    """The head's first line is a whole JSON value and a second non-blank line follows: the
    collector's file exporter, read line by line instead of whole."""
    return _is_json_lines(head)


def _is_json_lines(data: bytes) -> bool:
    first, _, rest = data.lstrip().partition(b"\n")
    try:
        orjson.loads(first)
    except orjson.JSONDecodeError:
        return False
    return bool(rest.strip())


def _parse_lines(path, emitter: OtlpEmitter, report: ParseReport) -> None:
    for lineno, doc in iter_json_lines(path, report):
        emitter.document(doc, where=f"line {lineno}: ")


def _position(data: bytes, pos: int) -> str:
    line = data.count(b"\n", 0, pos) + 1
    column = pos - (data.rfind(b"\n", 0, pos) + 1) + 1
    return f"line {line}, column {column} (byte {pos})"
