"""OTLP/JSON: one ExportTrace/Logs/MetricsServiceRequest object (TracesData, LogsData,
MetricsData), or the collector file exporter's JSON lines (one such object per line).
Rows are described in _otlp.py."""
from __future__ import annotations

import re

import orjson

from ingest.events import EventSink, ParseError, ParseReport
from ingest.io import read_all
from ingest.parsers._otlp import OtlpEmitter
from ingest.parsers._telemetry import iter_json_lines

FORMAT = "otlp_json"
SOURCE = "otlp"

_START = re.compile(rb'^\s*\{\s*"resource(Spans|Logs|Metrics)"\s*:')


def sniff(head: bytes, name: str) -> bool:
    return bool(_START.match(head[:4096]))


def parse(path, sink: EventSink, report: ParseReport) -> None:
    emitter = OtlpEmitter(path, sink, report)
    data = read_all(path)
    try:
        doc = orjson.loads(data)
    except orjson.JSONDecodeError as e:
        if not _is_json_lines(data):
            raise ParseError(str(path), _position(data, e.pos), f"valid JSON ({e.msg})") from None
        _parse_lines(path, emitter, report)
    else:
        emitter.document(doc)
    emitter.finish()


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
