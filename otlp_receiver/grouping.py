"""Cutting an export request into groups of one service.name and one time window, and
dropping the spans the diagnosis could not place (no ids, no start time)."""
from __future__ import annotations

from collections import defaultdict
from dataclasses import dataclass, field
from datetime import datetime, timezone

from google.protobuf import json_format
from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import ExportTraceServiceRequest
from opentelemetry.proto.trace.v1.trace_pb2 import ResourceSpans

UNKNOWN_SERVICE = "unknown_service"  # what the SDKs report when service.name is not set


@dataclass
class Group:
    service: str
    window_start: datetime
    resource_spans: list[dict] = field(default_factory=list)
    span_count: int = 0


@dataclass
class Split:
    groups: list[Group]
    rejected: int
    reason: str


def service_name(resource_spans: ResourceSpans) -> str:
    for kv in resource_spans.resource.attributes:
        if kv.key == "service.name" and kv.value.string_value:
            return kv.value.string_value[:200]
    return UNKNOWN_SERVICE


def _usable(span) -> bool:
    return len(span.trace_id) == 16 and any(span.trace_id) and len(span.span_id) == 8 and any(span.span_id) \
        and span.start_time_unix_nano > 0 and span.end_time_unix_nano >= span.start_time_unix_nano


def split(request: ExportTraceServiceRequest, window_s: int) -> Split:
    """The request's spans by (service.name, window of their start time), each group as OTLP
    JSON ResourceSpans keeping the resource and scope of its spans."""
    window_ns = window_s * 1_000_000_000
    groups: dict[tuple[str, int], Group] = {}
    rejected = 0
    for rs in request.resource_spans:
        service = service_name(rs)
        # window -> a copy of this ResourceSpans with only that window's spans
        cut: dict[int, ResourceSpans] = defaultdict(ResourceSpans)
        for scope_spans in rs.scope_spans:
            for_window: dict[int, object] = {}
            for span in scope_spans.spans:
                if not _usable(span):
                    rejected += 1
                    continue
                window = span.start_time_unix_nano // window_ns
                if window not in for_window:
                    target = cut[window]
                    if not target.HasField("resource"):
                        target.resource.CopyFrom(rs.resource)
                        target.schema_url = rs.schema_url
                    for_window[window] = target.scope_spans.add(scope=scope_spans.scope,
                                                                schema_url=scope_spans.schema_url)
                for_window[window].spans.append(span)
        for window, part in cut.items():
            group = groups.setdefault((service, window), Group(
                service, datetime.fromtimestamp(window * window_s, tz=timezone.utc)))
            group.resource_spans.append(json_format.MessageToDict(part))
            group.span_count += sum(len(s.spans) for s in part.scope_spans)
    reason = (f"{rejected} span(s) dropped: a span needs a non-zero 16-byte traceId, 8-byte spanId and a "
              "start time not after its end" if rejected else "")
    return Split(list(groups.values()), rejected, reason)
