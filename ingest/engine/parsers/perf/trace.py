"""`perf trace` syscall lines and `perf trace -s` summaries.

Syscall lines ("  746.474 ( 0.639 ms): python3/9372 futex(uaddr: ..., op: WAIT...) = 0"):
futex calls become `sync` rows (attrs.op, attrs.wait true for WAIT ops), other calls `span`
rows with their duration, or `marker` rows when perf printed none (exit_group, a call the
trace ended inside). A call split by a context switch ("... [continued]: futex()) = 0")
is one row with the continuation's duration. Times are ms since the trace started: meta
clock domain "relative" (the aligner needs the wall-clock start as a user offset).

Summaries ("python3 (9420), 5096 events" then a table per thread) become one `sample` row
per thread per syscall: name = syscall, value = total ms, attrs calls/errors/min/avg/max.
"""
from __future__ import annotations

import re2  # linear time: these patterns run on untrusted lines

from ingest.engine.clock import Clock
from ingest.engine.events import EventSink, ParseError, ParseReport
from ingest.engine.io import no_line_matched
from ingest.engine.parsers.telemetry import iter_lines

FORMAT = "perf_trace"
SOURCE = "perf"

_CALL = re2.compile(r"^\s*(?P<ts>\d+\.\d+|\?)\s+\(\s*(?:(?P<dur>\d+\.\d+)\s+ms)?\s*\):\s+(?P<comm>.*?)/(?P<tid>\d+)\s+"
                   r"(?P<cont>\.\.\.\s+\[continued\]:\s+)?(?P<call>[A-Za-z_]\w*)\((?P<args>.*)$")
_THREAD = re2.compile(r"^\s*(?P<comm>.+?)\s+\((?P<tid>\d+)\),\s+(?P<events>\d+)\s+events")
_ROW = re2.compile(r"^\s*(?P<call>[A-Za-z_]\w*)\s+(?P<calls>\d+)\s+(?P<errors>\d+)\s+(?P<total>[\d.]+)\s+(?P<min>[\d.]+)"
                  r"\s+(?P<avg>[\d.]+)\s+(?P<max>[\d.]+)\s+(?P<stddev>[\d.]+)%")
_TAIL = re2.compile(r"^(?P<args>.*?)\)\s+=\s*(?P<ret>.*)$")
MAX_DUR_NS = 2**62
_OP = re2.compile(r"\bop:\s*(?P<op>[A-Z_|0-9]+)")


def sniff(head: bytes, name: str) -> bool:
    text = head[:16384].decode("utf-8", "replace")
    lines = [l for l in text.splitlines() if l.strip()][:10]
    if any(l.strip() == "Summary of events:" for l in lines):
        return True
    return sum(bool(_CALL.match(l)) for l in lines) >= min(3, len(lines)) and bool(lines)


def parse(path, sink: EventSink, report: ParseReport) -> None:
    calls = summary_rows = 0
    thread = None
    pending: dict[int, tuple[str, str]] = {}  # tid -> (call, args) of a call split by a switch
    for lineno, line in iter_lines(path):
        loc = f"line {lineno}"
        if m := _CALL.match(line):
            calls += _call(sink, report, m, loc, pending)
        elif m := _THREAD.match(line):
            thread = m
        elif (m := _ROW.match(line)) and thread is not None:
            summary_rows += 1
            sink.emit(ts=summary_rows - 1, kind="sample", name=m["call"], value=float(m["total"]), unit="ms",
                      tid=int(thread["tid"]), loc=loc,
                      attrs={"comm": thread["comm"], "calls": int(m["calls"]), "errors": int(m["errors"]),
                             "total_ms": float(m["total"]), "min_ms": float(m["min"]), "avg_ms": float(m["avg"]),
                             "max_ms": float(m["max"]), "stddev_pct": float(m["stddev"]),
                             "thread_events": int(thread["events"])})
        elif line.strip() and not line.lstrip().startswith(("syscall", "(msec)", "---", "Summary of events")):
            report.skipped["line that is neither a syscall nor a summary row"] += 1
    if not calls and not summary_rows:
        raise ParseError(str(path), "line 1", "perf trace lines ('ts ( dur ms): comm/tid call(args) = ret') "
                                              "or a 'Summary of events' table", got=no_line_matched(path))
    if calls:
        report.set_clock(Clock("relative", "perf trace times are ms since the trace started; give the "
                                                "wall-clock start in tracedoc-clock.json to align them"))
    else:
        report.format = "perf_trace_summary"
        report.set_clock(Clock("none", "a summary over the whole trace: no timestamps"))


def _call(sink: EventSink, report: ParseReport, m, loc: str, pending: dict) -> int:
    if m["ts"] == "?":
        report.skipped["call continued from before the trace started"] += 1
        return 0
    tail = _TAIL.match(m["args"])
    args, ret = (tail["args"], tail["ret"]) if tail else (m["args"], "")
    unfinished = not tail and m["args"].rstrip().endswith("...")
    if unfinished and not m["dur"]:
        # the "[continued]" line later carries the duration (and needs these arguments)
        pending[int(m["tid"])] = (m["call"], args.rstrip(". "))
        report.skipped["call interrupted (its continuation carries the duration)"] += 1
        return 0
    if m["cont"]:
        call, args = pending.pop(int(m["tid"]), ("", ""))
        args = args if call == m["call"] else ""
    ret = ret.strip()
    ts = round(float(m["ts"]) * 1e6)  # ms -> ns
    dur = round(float(m["dur"]) * 1e6) if m["dur"] else 0
    if dur >= MAX_DUR_NS:  # perf prints a negative duration as an unsigned 64-bit ms count
        report.skipped["call with a wrapped (negative) duration: kept without duration"] += 1
        dur = 0
    call = m["call"]
    attrs = {"comm": m["comm"], "args": args.strip(), "ret": ret}
    if call == "futex":
        op = _OP.search(args)
        attrs["op"] = op["op"] if op else ""
        attrs["wait"] = "WAIT" in attrs["op"]
        kind = "sync"
    else:
        kind = "span" if m["dur"] else "marker"
    if ret.startswith("-1 "):
        attrs["errno"] = ret.split()[1] if len(ret.split()) > 1 else ""
    sink.emit(ts=ts, dur=dur, kind=kind, name=call, tid=int(m["tid"]), loc=loc, attrs=attrs)
    return 1
