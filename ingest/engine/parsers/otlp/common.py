"""OTLP documents (traces, logs, metrics) in their JSON shape -> event rows.

Shared by otlp.json_file (OTLP/JSON, and the collector file exporter's JSON lines) and otlp.protobuf
(protobuf, converted with the official classes to the same dict shape). IDs are accepted as
hex (the OTLP/JSON spec) or base64 (protobuf's JSON mapping, what MessageToJson writes) and
always stored as lowercase hex. A record that breaks the spec is skipped and named by its
field path (resourceSpans[0].scopeSpans[0].spans[1].traceId); a document where every record
is broken is rejected with the first such path.
"""
from __future__ import annotations

import base64
import binascii
import re
from functools import partial
from typing import Any

from ingest.engine.clock import Clock
from ingest.engine.events import EventSink, ParseError, ParseReport, clamp_int, describe, excerpt

SPAN_KINDS = ("unspecified", "internal", "server", "client", "producer", "consumer")
STATUS_CODES = ("unset", "ok", "error")
_HEX = re.compile(r"^[0-9a-fA-F]*$")


class RecordError(Exception):
    """One record breaks the spec: `path` names the field, `expected` says what it must be."""

    def __init__(self, path: str, expected: str, got: str):
        self.path, self.expected, self.got = path, expected, got
        super().__init__(f"{path}: expected {expected}; got {got}")


def decode_id(value, nbytes: int, path: str, required: bool = True) -> str:
    if value in (None, ""):
        if required:
            raise RecordError(path, f"a {nbytes}-byte id (hex or base64)", "nothing")
        return ""
    if not isinstance(value, str):
        raise RecordError(path, f"a {nbytes}-byte id as a hex or base64 string", describe(value))
    if len(value) == 2 * nbytes and _HEX.match(value):
        raw = bytes.fromhex(value)
    else:
        try:
            raw = base64.b64decode(value, validate=True)
        except (binascii.Error, ValueError) as e:
            raise RecordError(path, f"{2 * nbytes} hex digits or base64 of {nbytes} bytes", excerpt(value)) from e
        if len(raw) != nbytes:
            raise RecordError(path, f"{2 * nbytes} hex digits or base64 of {nbytes} bytes", excerpt(value))
    if not any(raw) and required:
        raise RecordError(path, f"a non-zero {nbytes}-byte id", "all zeros")
    return raw.hex()


def nanos(value, path: str) -> int:
    try:
        v = int(value)
    except (TypeError, ValueError) as e:
        raise RecordError(path, "nanoseconds since the epoch as an integer or decimal string", describe(value)) from e
    if not 0 <= v < 2**63:
        raise RecordError(path, "nanoseconds since the epoch within int64", excerpt(str(v)))
    return v


def enum(value, names: tuple[str, ...], prefix: str, path: str) -> str:
    if value is None:
        return names[0]
    if isinstance(value, int) and not isinstance(value, bool) and 0 <= value < len(names):
        return names[value]
    if isinstance(value, str) and value.startswith(prefix) and value[len(prefix):].lower() in names:
        return value[len(prefix):].lower()
    allowed = ", ".join(prefix + n.upper() for n in names)
    raise RecordError(path, f"one of {allowed} (or 0-{len(names) - 1})", describe(value))


def any_value(v):
    """OTLP AnyValue -> plain JSON value."""
    if not isinstance(v, dict):
        return v
    for key in ("stringValue", "boolValue", "doubleValue"):
        if key in v:
            return v[key]
    if "intValue" in v:
        return clamp_int(v["intValue"], default=v["intValue"])
    if "bytesValue" in v:
        return v["bytesValue"]
    if "arrayValue" in v:
        return [any_value(x) for x in (v["arrayValue"] or {}).get("values", [])]
    if "kvlistValue" in v:
        return attributes((v["kvlistValue"] or {}).get("values", []))
    return None


def attributes(kvs) -> dict:
    if not isinstance(kvs, list):
        return {}
    return {kv["key"]: any_value(kv.get("value")) for kv in kvs if isinstance(kv, dict) and "key" in kv}


def _list(doc: dict, key: str, path: str) -> list:
    v = doc.get(key, [])
    if v is None:
        return []
    if not isinstance(v, list):
        raise RecordError(f"{path}.{key}" if path else key, "a JSON array", describe(v))
    return v


class OtlpEmitter:
    """Emits one OTLP document after another into the sink, counting what it skipped."""

    def __init__(self, path, sink: EventSink, report: ParseReport):
        self.path, self.sink, self.report = str(path), sink, report
        self.good = 0
        self.first_error: RecordError | None = None
        self.signals: set[str] = set()

    def document(self, doc, where: str = "") -> None:
        """`where` prefixes field paths (e.g. "line 3: " for JSON lines)."""
        if not isinstance(doc, dict):
            raise ParseError(self.path, where.rstrip(": ") or "byte 0",
                             "an OTLP object with resourceSpans, resourceLogs or resourceMetrics", got=describe(doc))
        handlers = (("resourceSpans", "scopeSpans", "spans", self._span),
                    ("resourceLogs", "scopeLogs", "logRecords", self._log),
                    ("resourceMetrics", "scopeMetrics", "metrics", self._metric))
        found = False
        for rkey, skey, ikey, handle in handlers:
            if rkey not in doc:
                continue
            found = True
            self.signals.add(rkey)
            for ri, res in enumerate(self._guard(partial(_list, doc, rkey, ""), where) or []):
                rpath = f"{rkey}[{ri}]"
                resource = attributes((res.get("resource") or {}).get("attributes")) if isinstance(res, dict) else {}
                for si, scope in enumerate(self._guard(partial(_list, res, skey, rpath), where) or []):
                    spath = f"{rpath}.{skey}[{si}]"
                    if not isinstance(scope, dict):
                        self._skip(RecordError(spath, "a JSON object", describe(scope)), where)
                        continue
                    info = scope.get("scope") or {}
                    scope_attrs = {"name": info.get("name", ""), "version": info.get("version", "")}
                    for ii, item in enumerate(self._guard(partial(_list, scope, ikey, spath), where) or []):
                        ipath = f"{spath}.{ikey}[{ii}]"
                        try:
                            if not isinstance(item, dict):
                                raise RecordError(ipath, "a JSON object", describe(item))
                            handle(item, ipath, resource, scope_attrs, where)
                            self.good += 1
                        except RecordError as e:
                            self._skip(e, where)
        if not found:
            raise ParseError(self.path, where.rstrip(": ") or "byte 0",
                             "an OTLP object with resourceSpans, resourceLogs or resourceMetrics", got=describe(doc))

    def finish(self) -> None:
        if not self.good and self.first_error is not None:
            e = self.first_error
            raise ParseError(self.path, e.path, e.expected, got=e.got)
        self.report.set_clock(Clock("unix", note="OTLP timestamps are ns since the Unix epoch"))
        self.report.meta["otlp_signals"] = sorted(self.signals)

    def _guard(self, fn, where):
        try:
            return fn()
        except RecordError as e:
            self._skip(e, where)
            return None

    def _skip(self, e: RecordError, where: str) -> None:
        self.first_error = self.first_error or RecordError(where + e.path, e.expected, e.got)
        self.report.warn(f"{where}{e.path}: expected {e.expected}; got {e.got}; record skipped")
        self.report.skipped["OTLP record breaking the spec"] += 1

    # ---- signals --------------------------------------------------------------------

    @staticmethod
    def _where(resource: dict) -> tuple[str, int]:
        host = resource.get("host.name") or resource.get("service.name") or ""
        return str(host), clamp_int(resource.get("process.pid"))

    def _span(self, span: dict, path: str, resource: dict, scope: dict, where: str) -> None:
        trace_id = decode_id(span.get("traceId"), 16, f"{path}.traceId")
        span_id = decode_id(span.get("spanId"), 8, f"{path}.spanId")
        parent_id = decode_id(span.get("parentSpanId"), 8, f"{path}.parentSpanId", required=False)
        kind = enum(span.get("kind"), SPAN_KINDS, "SPAN_KIND_", f"{path}.kind")
        start = nanos(span.get("startTimeUnixNano"), f"{path}.startTimeUnixNano")
        end = nanos(span.get("endTimeUnixNano", start), f"{path}.endTimeUnixNano")
        status = span.get("status") or {}
        code = enum(status.get("code"), STATUS_CODES, "STATUS_CODE_", f"{path}.status.code")
        host, pid = self._where(resource)
        loc = where + path
        self.sink.emit(
            ts=start, dur=max(end - start, 0), kind="span", name=str(span.get("name", "")), host=host, pid=pid,
            trace_id=trace_id, span_id=span_id, parent_id=parent_id, severity="error" if code == "error" else "",
            loc=loc, attrs={"span_kind": kind, "status": {"code": code, "message": status.get("message", "")},
                            "attributes": attributes(span.get("attributes")), "resource": resource, "scope": scope,
                            "links": len(span.get("links") or [])})
        if end < start:
            self.report.warn(f"{loc}: endTimeUnixNano before startTimeUnixNano; duration set to 0")
        for ei, event in enumerate(span.get("events") or []):
            epath = f"{path}.events[{ei}]"
            if not isinstance(event, dict):
                raise RecordError(epath, "a JSON object", describe(event))
            ts = nanos(event.get("timeUnixNano", start), f"{epath}.timeUnixNano")
            attrs = attributes(event.get("attributes"))
            name = str(event.get("name", ""))
            if name == "exception" or "exception.type" in attrs:
                text = "\n".join(str(attrs[k]) for k in ("exception.message", "exception.stacktrace") if attrs.get(k))
                self.sink.emit(ts=ts, kind="error", name=str(attrs.get("exception.type") or "exception"), host=host,
                               pid=pid, trace_id=trace_id, span_id=span_id, severity="error", loc=where + epath,
                               attrs={"text": text, "attributes": attrs, "span": span.get("name", "")})
            else:
                self.sink.emit(ts=ts, kind="marker", name=name, host=host, pid=pid, trace_id=trace_id,
                               span_id=span_id, loc=where + epath, attrs={"attributes": attrs,
                                                                          "span": span.get("name", "")})

    def _log(self, rec: dict, path: str, resource: dict, scope: dict, where: str) -> None:
        ts_value = rec.get("timeUnixNano")
        if ts_value in (None, "0", 0):  # time is optional; the collector's observed time is not
            ts_value = rec.get("observedTimeUnixNano")
        ts = nanos(ts_value, f"{path}.timeUnixNano")
        trace_id = decode_id(rec.get("traceId"), 16, f"{path}.traceId", required=False)
        span_id = decode_id(rec.get("spanId"), 8, f"{path}.spanId", required=False)
        number = clamp_int(rec.get("severityNumber"), 0)
        attrs = attributes(rec.get("attributes"))
        body = any_value(rec.get("body"))
        host, pid = self._where(resource)
        error_type = attrs.get("exception.type")
        self.sink.emit(
            ts=ts, kind="error" if error_type else "log",
            name=str(error_type or rec.get("eventName") or scope.get("name") or resource.get("service.name", "")),
            host=host, pid=pid, trace_id=trace_id, span_id=span_id, severity=_severity(number), loc=where + path,
            attrs={"text": body if isinstance(body, str) else body, "severity_text": rec.get("severityText", ""),
                   "severity_number": number, "attributes": attrs, "resource": resource, "scope": scope})

    def _metric(self, metric: dict, path: str, resource: dict, scope: dict, where: str) -> None:
        name, unit = str(metric.get("name", "")), str(metric.get("unit", ""))
        host, pid = self._where(resource)
        for shape in ("gauge", "sum", "histogram", "exponentialHistogram", "summary"):
            if shape not in metric:
                continue
            body = metric[shape] or {}
            for di, point in enumerate(_list(body, "dataPoints", f"{path}.{shape}")):
                dpath = f"{path}.{shape}.dataPoints[{di}]"
                if not isinstance(point, dict):
                    raise RecordError(dpath, "a JSON object", describe(point))
                ts = nanos(point.get("timeUnixNano"), f"{dpath}.timeUnixNano")
                attrs: dict[str, object] = {"metric_type": shape, "attributes": attributes(point.get("attributes"))}
                if shape in ("gauge", "sum"):
                    raw: Any = point.get("asDouble", point.get("asInt"))  # a JSON value: float() refuses the rest
                    try:
                        value, point_unit = float(raw), unit
                    except (TypeError, ValueError) as e:
                        raise RecordError(f"{dpath}.asDouble", "a number", describe(raw)) from e
                    if shape == "sum":
                        attrs["monotonic"] = bool(body.get("isMonotonic"))
                else:  # distributions: the row's value is the count, the shape goes to attrs
                    value, point_unit = float(clamp_int(point.get("count"), 0)), "count"
                    attrs.update({k: point[k] for k in ("sum", "min", "max", "scale", "zeroCount", "positive",
                                                         "negative", "quantileValues") if k in point})
                    attrs["metric_unit"] = unit
                    if "bucketCounts" in point:
                        bounds = list(point.get("explicitBounds") or []) + [float("inf")]
                        attrs["buckets"] = [{"le": b, "count": clamp_int(c, 0)}
                                            for b, c in zip(bounds, point["bucketCounts"])]
                self.sink.emit(ts=ts, kind="sample", name=name, unit=point_unit, value=value, host=host, pid=pid,
                               loc=where + dpath, attrs=attrs)


def _severity(number: int) -> str:
    # OTLP SeverityNumber ranges: 1-4 TRACE, 5-8 DEBUG, 9-12 INFO, 13-16 WARN, 17-20 ERROR, 21-24 FATAL
    if number <= 0:
        return ""
    return ("debug", "debug", "info", "warning", "error", "critical")[min((number - 1) // 4, 5)]
