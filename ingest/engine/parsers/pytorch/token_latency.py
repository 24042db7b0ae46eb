"""Per-token / per-step latency as JSON lines ({"step": 3, "start_ns": ..., "end_ns": ...,
"latency_ms": 43.5, ...}), as a decode loop or a serving benchmark writes them.

Each record becomes a `span` row named "decode_step" (ts = start, dur = latency) and a
`sample` row "token_latency" (value in ms). attrs keep the step index (attrs.step), the
first-token flag when the record has one, and the record's other fields (ctx_len, ...).
Start times are ns since the epoch (time.time_ns()); float seconds are accepted too.
"""
from __future__ import annotations

from ingest.engine.clock import Clock
from ingest.engine.events import EventSink, ParseError, ParseReport, clamp_int
from ingest.engine.io import no_line_matched
from ingest.engine.parsers.telemetry import first_json_object, iter_json_lines

FORMAT = "token_latency"
SOURCE = "token_latency"

LATENCY_KEYS = {"latency_ms": 1e6, "latency_us": 1e3, "latency_ns": 1, "latency_s": 1e9, "itl_ms": 1e6,
                "token_latency_ms": 1e6}
STEP_KEYS = ("step", "token_index", "token", "index", "i")
START_KEYS = ("start_ns", "ts_ns", "start", "ts", "timestamp")
FIRST_KEYS = ("first_token", "is_first", "is_first_token", "ttft")


def sniff(head: bytes, name: str) -> bool:
    rec = first_json_object(head)
    return (rec is not None and any(k in rec for k in LATENCY_KEYS)
            and any(k in rec for k in STEP_KEYS + START_KEYS))


def parse(path, sink: EventSink, report: ParseReport) -> None:
    good = 0
    for lineno, rec in iter_json_lines(path, report):
        loc = f"line {lineno}"
        parsed = _record(rec) if isinstance(rec, dict) else None
        if parsed is None:
            report.warn(f"{loc}: expected an object with a latency (latency_ms, ...) and a start time; skipped")
            report.skipped["record without latency or start time"] += 1
            continue
        start, dur, attrs = parsed
        good += 1
        sink.emit(ts=start, dur=dur, kind="span", name="decode_step", loc=loc, attrs=attrs)
        sink.emit(ts=start, kind="sample", name="token_latency", value=dur / 1e6, unit="ms", loc=loc, attrs=attrs)
    if not good:
        raise ParseError(str(path), "line 1", "JSON lines with a step, a start time (start_ns) and a latency",
                         got=no_line_matched(path))
    report.set_clock(Clock("unix", "start times are ns since the Unix epoch"))


def _record(rec: dict) -> tuple[int, int, dict] | None:
    dur = None
    for key, scale in LATENCY_KEYS.items():
        if isinstance(rec.get(key), (int, float)) and not isinstance(rec[key], bool):
            dur = round(rec[key] * scale)
            break
    start = next((rec[k] for k in START_KEYS if isinstance(rec.get(k), (int, float))), None)
    if start is None and isinstance(rec.get("end_ns"), int) and dur is not None:
        start = rec["end_ns"] - dur
    if dur is None and isinstance(rec.get("end_ns"), int) and isinstance(start, int):
        dur = rec["end_ns"] - start
    if start is None or dur is None or dur < 0:
        return None
    if isinstance(start, float) or start < 10**12:  # seconds since the epoch
        start = round(start * 1e9)
    start = clamp_int(start, default=-1)
    if start < 0:
        return None
    step = next((rec[k] for k in STEP_KEYS if isinstance(rec.get(k), int)), None)
    attrs = {k: v for k, v in rec.items() if k not in START_KEYS and k not in LATENCY_KEYS and k != "end_ns"}
    if step is not None:
        attrs["step"] = step
    first = next((rec[k] for k in FIRST_KEYS if k in rec), None)
    if first is not None:
        attrs["first_token"] = bool(first)
    return start, dur, attrs
