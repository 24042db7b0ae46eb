"""`perf script` output (with or without call stacks, -F variants, the `--header` block).

One `sample` row per sample: name = leaf function, value = the period (1 when perf did not
print one), attrs.stack = frames leaf-first, attrs.comm / event / dso / cpu. Timestamps are
seconds on the kernel's perf clock (CLOCK_MONOTONIC unless recorded with -k): the rows keep
that clock (meta clock domain "monotonic") and the aligner shifts them by a user-given
offset, or by the capture's own reference when its header has one (`perf record -k
CLOCK_MONOTONIC` writes "reference time: <date> = <tod> (TOD) = <mono> (monotonic)").
Timestamps that are already Unix seconds (recorded with -k CLOCK_REALTIME) are kept as unix.
"""
from __future__ import annotations

import re2  # linear time: these patterns run on untrusted lines, detection included

from ingest.engine.clock import Clock
from ingest.engine.events import EventSink, ParseError, ParseReport
from ingest.engine.io import no_line_matched
from ingest.engine.parsers.telemetry import iter_lines, seconds_to_ns

FORMAT = "perf_script"
SOURCE = "perf"

_HEADER = re2.compile(
    r"^(?P<comm>\S.*?)\s+(?P<pid>-?\d+)(?:/(?P<tid>-?\d+))?\s+(?:\[(?P<cpu>\d+)\]\s+)?"
    r"(?:(?P<time>\d+\.\d+):\s+)?(?:(?P<period>\d+)\s+)?(?P<event>[A-Za-z_][\w.\-:]*):(?:\s+(?P<rest>.*))?$")
_FRAME = re2.compile(r"^\s+(?P<addr>[0-9a-fA-F]+)\s+(?P<sym>.*?)(?:\s+\((?P<dso>[^()]*)\))?$")
# a frame whose indent was lost (pasted, or re-saved by a tool): the address, the symbol and, to tell it
# from a log line, the (dso) it came from
_BARE_FRAME = re2.compile(r"^(?P<addr>[0-9a-fA-F]{6,16}) (?P<sym>.*?) \((?P<dso>[^()]*)\)$")
_OFFSET = re2.compile(r"\+0x[0-9a-fA-F]+$")
_REFERENCE = re2.compile(r"reference time:.*?=\s*(?P<tod>\d+\.\d+)\s*\(TOD\)\s*=\s*(?P<clock>\d+\.\d+)\s*\((?P<name>[^)]*)\)")
# a sample's own instruction address (user space 7f..., kernel ffffffff...): a few hex digits then a
# symbol; a log line's "<pid> : ..." after a header-like start is not one
_INLINE_ADDRESS = re2.compile(r"[0-9a-f]{6,16} +[^\s:]")
TIME_EVENTS = ("cpu-clock", "task-clock")  # their period is nanoseconds
UNIX_SECONDS = 1e9  # perf clock values past this (year 2001) are wall-clock seconds


def sniff(head: bytes, name: str) -> bool:
    """Sample headers followed by stack frames (tab, hex address, symbol), or single-line
    samples whose tail is an address: a log line alone can look like a sample header."""
    text = head[:16384].decode("utf-8", "replace")
    lines = [l for l in text.splitlines() if l.strip() and not l.startswith("#")][:40]
    if len(lines) < 2 or not _HEADER.match(lines[0]):
        return False
    frames = sum(1 for l in lines if (l[0] in " \t" and _FRAME.match(l) and " " in l.strip()) or _BARE_FRAME.match(l))
    inline = sum(1 for l in lines if (m := _HEADER.match(l)) and _INLINE_ADDRESS.match(m["rest"] or ""))
    # at least one frame or address line: two log lines alone (a header-like line and its wrap) are not a sample
    return frames >= max(1, len(lines) // 3) or inline >= max(1, len(lines) // 2)


def parse(path, sink: EventSink, report: ParseReport) -> None:
    header: dict = {}
    sample = None
    samples = timed = unix = 0
    for lineno, line in iter_lines(path):
        if line.startswith("#"):
            _header_line(line, header)
            continue
        if not line.strip():
            continue
        if line[0] in " \t":
            frame = _FRAME.match(line)
            if sample is not None and frame:
                sample["frames"].append((_OFFSET.sub("", frame["sym"]) or "[unknown]", frame["dso"] or ""))
            elif sample is not None:
                report.skipped["unreadable stack frame"] += 1
            continue
        if sample is not None and (frame := _BARE_FRAME.match(line)):
            sample["frames"].append((_OFFSET.sub("", frame["sym"]) or "[unknown]", frame["dso"] or ""))
            continue
        m = _HEADER.match(line)
        if sample is not None:
            _emit(sink, sample)
        sample = None
        if not m:
            report.warn(f"line {lineno}: not a perf sample header (comm pid [cpu] time: event:); skipped")
            report.skipped["unreadable sample line"] += 1
            continue
        samples += 1
        ts = seconds_to_ns(m["time"]) if m["time"] else samples - 1
        timed += bool(m["time"])
        unix += bool(m["time"]) and ts / 1e9 > UNIX_SECONDS
        sample = {"m": m, "ts": ts, "loc": f"line {lineno}", "frames": []}
    if sample is not None:
        _emit(sink, sample)
    if not samples:
        raise ParseError(str(path), "line 1", "perf script samples ('comm pid [cpu] time: period event:')",
                         got=no_line_matched(path))
    report.meta["perf_header"] = header
    report.set_clock(_clock(header, timed, unix))


def _emit(sink: EventSink, s: dict) -> None:
    m, frames = s["m"], s["frames"]
    event = m["event"]
    period = int(m["period"]) if m["period"] else 1
    leaf, dso = frames[0] if frames else ((m["rest"] or "").split(" ", 1)[0] or event, "")
    base = event.split(":", 1)[0]
    pid = int(m["pid"])
    sink.emit(ts=s["ts"], kind="sample", name=leaf, value=float(period),
              unit="ns" if base in TIME_EVENTS and m["period"] else "count",
              pid=pid, tid=int(m["tid"]) if m["tid"] else pid, loc=s["loc"],
              attrs={"comm": m["comm"], "event": event, "dso": dso, "cpu": int(m["cpu"]) if m["cpu"] else -1,
                     "stack": [f for f, _ in frames], "stack_dsos": [d for _, d in frames]})


def _header_line(line: str, header: dict) -> None:
    body = line[1:].strip()
    if ref := _REFERENCE.search(body):
        header["reference"] = {"tod": ref["tod"], "clock": ref["clock"], "clock_name": ref["name"]}
    elif " : " in body:
        key, _, value = body.partition(" : ")
        header[key.strip()] = value.strip()
    elif body.startswith("captured on:"):
        header["captured on"] = body.partition(":")[2].strip()


def _clock(header: dict, timed: int, unix: int) -> Clock:
    if not timed:
        return Clock("none", "perf script printed no timestamps: samples are in file order")
    if unix == timed:
        return Clock("unix", "perf clock recorded as CLOCK_REALTIME (-k realtime)")
    ref = header.get("reference")
    if ref:
        offset = seconds_to_ns(ref["tod"]) - seconds_to_ns(ref["clock"])
        return Clock("monotonic", f"perf clock {ref['clock_name']}; the header's reference time maps it "
                                  "to wall clock", offset_ns=offset, offset_source="perf header reference time")
    note = ("perf timestamps are seconds on the kernel monotonic clock (time since boot); give the wall-clock "
            "offset in tracedoc-clock.json to align them")
    if "captured on" in header:
        note += f" (header says captured on {header['captured on']})"
    return Clock("monotonic", note)
