"""bpftrace output: the program's `printf` lines and the maps printed at exit.

Per-event lines are whatever the program printed; we read the common shape
"<nsecs> key=value key=value ..." (nsecs = bpftrace's kernel-monotonic timestamp). A field
whose key ends in a time unit (_ns, _us, _ms, _s) is the event's duration: the row gets
dur, value (in that unit) and ts = nsecs - dur (printf runs when the wait ends); its name
is the key without the unit ("futex_wait"), kind `sync` for futex/lock/mutex waits, else
`span`. Other numeric fields go to attrs (tid and pid to their columns).

Histograms ("@name[key]:" then "[lo, hi)  count |@@@|" lines) become one `sample` row per
map: value = total count, attrs.buckets = [{lo, hi, count}]; scalar maps ("@name[key]: 12")
one `sample` row each. bpftrace's own messages (Attaching / Attached N probes, ERROR: ...) are `log` rows.
"""
from __future__ import annotations

import re2  # linear time: detection and parsing run these on untrusted lines

from ingest.engine.clock import Clock
from ingest.engine.events import EventSink, ParseError, ParseReport, clamp_int
from ingest.engine.io import no_line_matched
from ingest.engine.parsers.telemetry import iter_lines

FORMAT = "bpftrace"
SOURCE = "perf"

_EVENT = re2.compile(r"^(?P<ts>\d{6,19})\s+(?P<fields>\S+=\S+(?:\s+\S+=\S+)*)\s*$")
_MAP = re2.compile(r"^@(?P<name>\w*)(?:\[(?P<key>.*)\])?:\s*(?P<value>-?\d+)?\s*$")
_BUCKET = re2.compile(r"^\[(?P<lo>-?[\d.]+[KMGTP]?)(?:,\s*(?P<hi>-?[\d.]+[KMGTP]?)\)|\])\s+(?P<count>\d+)\s*\|")
_TOOL = re2.compile(r"^(Attach(?:ing|ed) \d+ probes?|ERROR:|WARNING:|Lost \d+ events)")  # newer bpftrace says "Attached"
UNITS = {"_ns": 1, "_us": 1_000, "_ms": 1_000_000, "_s": 1_000_000_000}
SUFFIX = {"K": 2**10, "M": 2**20, "G": 2**30, "T": 2**40, "P": 2**50}
SYNC_WORDS = ("futex", "lock", "mutex", "sem", "wait")


def sniff(head: bytes, name: str) -> bool:
    text = head[:16384].decode("utf-8", "replace")
    lines = [l for l in text.splitlines() if l.strip()][:20]
    tool = any(_TOOL.match(l) and "probe" in l for l in lines)
    events = sum(bool(_EVENT.match(l)) for l in lines)
    maps = any(_MAP.match(l) for l in lines)
    return (tool and bool(events or maps)) or events >= max(3, len(lines) // 2)


def parse(path, sink: EventSink, report: ParseReport) -> None:
    events = maps = 0
    last_ts = 0
    hist: tuple[str, str, list[dict], str] | None = None  # (name, key, buckets, loc) of the histogram being read
    for lineno, line in iter_lines(path):
        loc = f"line {lineno}"
        text = line.strip()
        if hist is not None and (b := _BUCKET.match(text)):
            hist[2].append({"lo": _size(b["lo"]), "hi": _size(b["hi"]) if b["hi"] else _size(b["lo"]),
                            "count": int(b["count"])})
            continue
        if hist is not None:
            maps += _emit_hist(sink, hist, last_ts)
            hist = None
        if not text:
            continue
        if m := _EVENT.match(text):
            last_ts = clamp_int(m["ts"], 0)  # digits beyond int64 are not a clock
            events += _event(sink, last_ts, m["fields"], loc)
        elif m := _MAP.match(text):
            if m["value"] is None:
                hist = (m["name"], m["key"], [], loc)
            else:
                maps += 1
                sink.emit(ts=last_ts, kind="sample", name=m["name"], value=float(m["value"]), unit="count", loc=loc,
                          attrs={"key": m["key"]} if m["key"] is not None else {})
        elif _TOOL.match(text):
            sink.emit(ts=last_ts, kind="log", name="bpftrace", loc=loc, attrs={"text": text},
                      severity="warning" if text.startswith(("ERROR", "WARNING", "Lost")) else "info")
        else:
            report.skipped["printf line not in 'nsecs key=value' form"] += 1
    if hist is not None:
        maps += _emit_hist(sink, hist, last_ts)
    if not events and not maps:
        raise ParseError(str(path), "line 1", "bpftrace output: '<nsecs> key=value ...' lines or @map prints",
                         got=no_line_matched(path))
    report.set_clock(Clock(
        "monotonic", "bpftrace nsecs: kernel monotonic ns since boot; give the wall-clock offset in "
                     "tracedoc-clock.json to align them" if events else "maps printed at exit only"))


def _event(sink: EventSink, ts: int, fields: str, loc: str) -> int:
    attrs: dict = {}
    name, dur, value, unit = "", 0, float("nan"), ""
    for pair in fields.split():
        key, _, raw = pair.partition("=")
        number = clamp_int(raw, default=None)
        attrs[key] = number if number is not None else raw
        for suffix, scale in UNITS.items():
            if key.endswith(suffix) and number is not None and not name:
                name, dur, value, unit = key[: -len(suffix)], clamp_int(number * scale, 0), float(number), suffix[1:]
    tid, pid = attrs.pop("tid", -1), attrs.pop("pid", -1)
    if not name:
        name = next((k for k in attrs), "event")
    kind = "sync" if any(w in name for w in SYNC_WORDS) and dur else ("span" if dur else "marker")
    sink.emit(ts=max(ts - dur, 0), dur=dur, kind=kind, name=name, value=value, unit=unit, loc=loc,
              tid=tid if isinstance(tid, int) else -1, pid=pid if isinstance(pid, int) else -1, attrs=attrs)
    return 1


def _emit_hist(sink: EventSink, hist, ts: int) -> int:
    name, key, buckets, loc = hist
    if not buckets:
        return 0
    attrs = {"buckets": buckets, **({"key": key} if key is not None else {})}
    sink.emit(ts=ts, kind="sample", name=name, value=float(sum(b["count"] for b in buckets)), unit="count",
              loc=loc, attrs=attrs)
    return 1


def _size(text: str) -> float:
    if text and text[-1] in SUFFIX:
        return float(text[:-1]) * SUFFIX[text[-1]]
    return float(text)
