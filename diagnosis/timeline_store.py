"""The timeline index of a stored trace, built on first use and kept in this process.

Building it reads the files the diagnosis read (`diagnosis.tasks.stored_inputs`: the trace's
Parquet files, and for a closed-loop capture those of the trace it adds to) through the
pipeline's `load_events` (the same frame, on the same clock, as the diagnosis) and costs
seconds for a million events; every later view of that trace is a lookup. A trace diagnosed
again (new workflow run) or re-parsed gets a new key, so a stale index is never served.

A file the report names whose events are not stored (never parsed into Parquet here, or
lost by the store) has no lanes: the index is built from what is there, and `missing` names
the rest so the page can say why they are absent.
"""
from __future__ import annotations

import threading
from collections import OrderedDict
from dataclasses import dataclass

from diagnosis.engine.pipeline import load_events
from diagnosis.engine.results import Report
from diagnosis.tasks import earlier_trace, stored_inputs
from diagnosis.engine.timeline.index import TimelineIndex, build_index
from ingest.models import Trace

# A 1M-event index holds ~70 MB of arrays: a few traces per worker process.
KEEP = 4


@dataclass(frozen=True)
class StoredTimeline:
    index: TimelineIndex
    missing: tuple[str, ...]   # files the report names with events, none of them stored

    @property
    def message(self) -> str:
        if not self.missing:
            return ""
        shown = ", ".join(self.missing[:5]) + (f" and {len(self.missing) - 5} more" if len(self.missing) > 5 else "")
        return (f"{len(self.missing)} file(s) the report names are not stored, so their events are not on the "
                f"timeline: {shown}. The report's own lanes (step latency, findings) are shown.")


_timelines: OrderedDict[tuple, StoredTimeline] = OrderedDict()
_lock = threading.Lock()


def _files(trace: Trace) -> tuple:
    return tuple(trace.artifacts.order_by("id").values_list("id", "parquet", "parsed_at"))


def _key(trace: Trace) -> tuple:
    earlier = earlier_trace(trace)
    before = (earlier.pk, str(earlier.clock_offsets or ""), _files(earlier)) if earlier is not None else None
    return trace.pk, trace.run_id, str(trace.clock_offsets or ""), _files(trace), before


def missing_files(report: Report | None, stored: set[str]) -> tuple[str, ...]:
    """The report's files that had events but whose events are not among `stored`."""
    if report is None:
        return ()
    return tuple(sorted({a.path for a in report.trace.artifacts if a.events > 0 and a.path not in stored}))


def timeline_for(trace: Trace) -> StoredTimeline:
    key = _key(trace)
    with _lock:
        if key in _timelines:
            _timelines.move_to_end(key)
            return _timelines[key]
    artifacts, offsets = stored_inputs(trace)
    stored = {a.name for a in artifacts if a.parquet is not None and a.parquet.exists()}
    report = Report.from_dict(trace.report) if trace.report else None
    events, _ = load_events(artifacts, offsets or None)
    timeline = StoredTimeline(build_index(events, report), missing_files(report, stored))
    with _lock:
        _timelines[key] = timeline
        while len(_timelines) > KEEP:
            _timelines.popitem(last=False)
    return timeline


def index_for(trace: Trace) -> TimelineIndex:
    return timeline_for(trace).index


def forget_all() -> None:
    """Tests: start from an empty cache."""
    with _lock:
        _timelines.clear()
