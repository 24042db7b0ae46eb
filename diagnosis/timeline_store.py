"""The timeline index of a stored trace, built on first use and kept in this process.

Building it reads the trace's Parquet files through the pipeline's `load_events` (the same
frame, on the same clock, as the diagnosis) and costs seconds for a million events; every
later view of that trace is a lookup. A trace diagnosed again (new workflow run) or
re-parsed gets a new key, so a stale index is never served.
"""
from __future__ import annotations

import threading
from collections import OrderedDict

from diagnosis.pipeline import load_events
from diagnosis.results import Report
from diagnosis.tasks import artifact_results
from diagnosis.timeline_index import TimelineIndex, build_index
from ingest.models import Trace

# A 1M-event index holds ~70 MB of arrays: a few traces per worker process.
KEEP = 4

_indexes: OrderedDict[tuple, TimelineIndex] = OrderedDict()
_lock = threading.Lock()


def _key(trace: Trace) -> tuple:
    files = tuple(trace.artifacts.order_by("id").values_list("id", "parquet", "parsed_at"))
    return trace.pk, trace.run_id, str(trace.clock_offsets or ""), files


def index_for(trace: Trace) -> TimelineIndex:
    key = _key(trace)
    with _lock:
        if key in _indexes:
            _indexes.move_to_end(key)
            return _indexes[key]
    events, _ = load_events(artifact_results(trace), trace.clock_offsets or None)
    index = build_index(events, Report.from_dict(trace.report) if trace.report else None)
    with _lock:
        _indexes[key] = index
        while len(_indexes) > KEEP:
            _indexes.popitem(last=False)
    return index


def forget_all() -> None:
    """Tests: start from an empty cache."""
    with _lock:
        _indexes.clear()
