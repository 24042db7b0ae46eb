"""CUDA caching-allocator snapshots (torch.cuda.memory._dump_snapshot pickles).

The snapshot holds the allocator's state when it was taken (`segments`, each with its
`blocks`) and, when _record_memory_history was on, its recent actions per device
(`device_traces`). Rows:

* every trace action: alloc/segment_alloc/segment_map -> `alloc`, free_requested/free_completed/
  segment_free/segment_unmap -> `free`, oom -> `oom`, anything else (snapshot ...) -> `marker`;
  segment_map / segment_unmap are expandable segments (PYTORCH_CUDA_ALLOC_CONF=
  expandable_segments:True) growing and shrinking by mapping physical pages, the way
  segment_alloc / segment_free reserve and release a whole segment;
  value = bytes, ts = time_us (wall clock: it matches Kineto's baseTimeNanoseconds + ts
  within microseconds on the same host).
* one `marker` "memory.segment" per segment and "memory.block" per block, at snapshot time.
* derived `sample` rows per device (what the OOM rules compare): reserved, allocated,
  reserved_unallocated, largest_free_block, fragmentation_ratio, segments,
  segments_with_live_block, largest_free_block_per_segment, expandable_segments (segments the
  allocator maps page by page) and, from the history, segment_mapped / segment_unmapped
  (bytes the recorded segment_map / segment_unmap actions moved).
"""
from __future__ import annotations

from pathlib import Path
from typing import Any

from ingest.engine.clock import Clock
from ingest.engine.events import EventSink, ParseError, ParseReport, clamp_int, dumps_attrs, describe
from ingest.engine.io import env_int, read_all
from ingest.engine.safe_pickle import MAX_PICKLE_BYTES, is_pickle, loads

FORMAT = "memory_snapshot"
SOURCE = "memory_snapshot"

TOP_FRAMES = 5
# Bounds on what one snapshot may expand to (see records_allowed).
RECORDS_PER_BYTE = 1
RECORDS_FLOOR = 1_000_000
MAX_RECORDS = 50_000_000
_ACTION_KIND = {
    "alloc": "alloc", "segment_alloc": "alloc", "segment_map": "alloc",
    "free_requested": "free", "free_completed": "free", "segment_free": "free", "segment_unmap": "free",
    "oom": "oom",
}
# A block in these states is a live tensor (or one whose free waits on a stream event):
# its segment cannot be returned to the driver by empty_cache().
_LIVE_STATES = ("active_allocated", "active_pending_free")


# torch.cuda.memory_snapshot() (and pickles of it written before _dump_snapshot existed) is the bare
# list of segments: the pickle opens a list (after its PROTO and FRAME opcodes) and its first segment
# dict names the segment keys
_LIST_OPENERS = (b"]", b"(l")
_SEGMENT_KEYS = (b"total_size", b"segment_type", b"allocated_size", b"active_size")


def _legacy_segment_list(head: bytes) -> bool:
    body = head[2:]
    if body[:1] == b"\x95":  # FRAME (protocol 4+): an 8-byte length follows
        body = body[9:]
    return body[:2].startswith(_LIST_OPENERS) and b"total_size" in head[:512] and \
        sum(k in head[:1024] for k in _SEGMENT_KEYS) >= 3


def sniff(head: bytes, name: str) -> bool:
    return is_pickle(head) and ((b"segments" in head[:256] and (
        b"total_size" in head or b"device_traces" in head)) or _legacy_segment_list(head))


def parse(path: Path, sink: EventSink, report: ParseReport) -> None:
    data = read_all(path, MAX_PICKLE_BYTES)
    snap = loads(data, path)
    if isinstance(snap, list) and snap and all(isinstance(s, dict) and "total_size" in s for s in snap):
        # torch.cuda.memory_snapshot(): the segments alone, no allocator history
        snap = {"segments": snap}
        report.warn("a bare list of segments (torch.cuda.memory_snapshot()): the allocator's state only, "
                    "no history of allocations (record it with torch.cuda.memory._record_memory_history)")
    if not isinstance(snap, dict) or not isinstance(snap.get("segments"), list):
        raise ParseError(str(path), "top level", "a memory snapshot: a dict with a 'segments' list, "
                                                 "or the list of segments torch.cuda.memory_snapshot() returns",
                         got=describe(snap) if not isinstance(snap, dict) else
                         f"'segments' as {describe(snap['segments'])}" if "segments" in snap else describe(snap))
    traces = snap.get("device_traces") or []
    if not isinstance(traces, list):
        raise ParseError(str(path), "key 'device_traces'", "a list (one action list per device)", got=describe(traces))
    check_expansion(str(path), traces, snap["segments"], len(data))
    del data
    taken_at = _emit_trace_actions(traces, sink, report)
    segments = [s for s in snap["segments"] if _is_segment(s, report)]
    _emit_segments(segments, taken_at, sink)
    mapping = page_mapping(traces)
    for device, figures in sorted(fragmentation_figures(segments).items()):
        _emit_figures(device, figures | mapping.get(device, {}), taken_at, sink)
    report.meta.update({
        "devices": sorted({clamp_int(s.get("device"), 0) for s in segments}),
        "allocator_settings": snap.get("allocator_settings") or {},
        "clock": (Clock("unix", note="device_traces time_us is wall-clock µs; segment, "
                        "block and derived rows carry the latest action time as the snapshot time")
                  if taken_at else Clock("none", note="no timed allocator history in the snapshot")).to_meta(),
    })


def records_allowed(pickle_bytes: int) -> int:
    """How many records (actions, segments, blocks and the stack frames walked for them) a
    snapshot of this size may hold: real ones spend about 20 bytes of pickle per record, a
    pickle of shared references (the same list repeated) far less than one."""
    cap = env_int("TRACEDOC_MAX_SNAPSHOT_RECORDS", MAX_RECORDS)
    return min(cap, max(RECORDS_FLOOR, pickle_bytes * RECORDS_PER_BYTE))


def check_expansion(path: str, traces: list, segments: list, pickle_bytes: int) -> None:
    """Counts the records before any is expanded into rows; refuses past records_allowed()."""
    allowed = records_allowed(pickle_bytes)
    counted = 0

    def add(n: int, where: str) -> None:
        nonlocal counted
        counted += n
        if counted > allowed:
            raise ParseError(path, where, f"at most {allowed:,} records for a snapshot of {pickle_bytes:,} "
                             f"bytes ({RECORDS_PER_BYTE} per byte, TRACEDOC_MAX_SNAPSHOT_RECORDS in all)",
                             got=f"more than {allowed:,} (shared references in the pickle repeat records "
                             "without storing them)")

    for device, actions in enumerate(traces):
        if isinstance(actions, list):
            add(len(actions), f"device_traces[{device}]")
            for i, a in enumerate(actions):
                if isinstance(a, dict) and isinstance(a.get("frames"), list):
                    add(len(a["frames"]), f"device_traces[{device}][{i}].frames")
    add(len(segments), "segments")
    for si, seg in enumerate(segments):
        blocks = seg.get("blocks") if isinstance(seg, dict) else None
        if isinstance(blocks, list):
            add(len(blocks), f"segments[{si}].blocks")
            for bi, b in enumerate(blocks):
                if isinstance(b, dict) and isinstance(b.get("frames"), list):
                    add(len(b["frames"]), f"segments[{si}].blocks[{bi}].frames")


def fragmentation_figures(segments: list[dict]) -> dict[int, dict[str, Any]]:
    """Per device: what is reserved, what of it holds tensors, and how the rest is cut up."""
    out: dict[int, dict[str, Any]] = {}
    for seg in segments:
        f = out.setdefault(clamp_int(seg.get("device"), 0), {
            "reserved": 0, "allocated": 0, "largest_free_block": 0, "segments": 0, "expandable_segments": 0,
            "segments_with_live_block": 0, "per_segment": {"address": [], "total_size": [],
                                                           "largest_free": [], "live_blocks": []}})
        blocks = [b for b in seg.get("blocks") or [] if isinstance(b, dict)]
        allocated = sum(clamp_int(b.get("size"), 0) for b in blocks if b.get("state") == "active_allocated")
        live = sum(1 for b in blocks if b.get("state") in _LIVE_STATES)
        largest_free = max((clamp_int(b.get("size"), 0) for b in blocks if b.get("state") == "inactive"),
                           default=0)
        f["reserved"] += clamp_int(seg.get("total_size"), 0)
        f["allocated"] += allocated
        f["largest_free_block"] = max(f["largest_free_block"], largest_free)
        f["segments"] += 1
        f["expandable_segments"] += bool(seg.get("is_expandable"))
        f["segments_with_live_block"] += live > 0
        per = f["per_segment"]
        per["address"].append(clamp_int(seg.get("address"), 0))
        per["total_size"].append(clamp_int(seg.get("total_size"), 0))
        per["largest_free"].append(largest_free)
        per["live_blocks"].append(live)
    for f in out.values():
        f["reserved_unallocated"] = f["reserved"] - f["allocated"]
        f["fragmentation_ratio"] = f["reserved_unallocated"] / f["reserved"] if f["reserved"] else 0.0
    return out


def page_mapping(traces: list) -> dict[int, dict[str, int]]:
    """Per device, the bytes the recorded history mapped into and unmapped from expandable
    segments (segment_map / segment_unmap): how those segments grew and shrank."""
    out: dict[int, dict[str, int]] = {}
    for device, actions in enumerate(traces):
        for a in actions if isinstance(actions, list) else []:
            action = a.get("action") if isinstance(a, dict) else None
            if action in ("segment_map", "segment_unmap"):
                f = out.setdefault(device, {"segment_mapped": 0, "segment_unmapped": 0})
                f["segment_mapped" if action == "segment_map" else "segment_unmapped"] += clamp_int(a.get("size"), 0)
    return out


def _emit_figures(device: int, f: dict[str, Any], ts: int, sink: EventSink) -> None:
    rows = [
        ("memory.reserved", f["reserved"], "bytes", None),
        ("memory.allocated", f["allocated"], "bytes", None),
        ("memory.reserved_unallocated", f["reserved_unallocated"], "bytes", None),
        ("memory.largest_free_block", f["largest_free_block"], "bytes", None),
        ("memory.fragmentation_ratio", f["fragmentation_ratio"], "ratio", None),
        ("memory.segments", f["segments"], "count", None),
        ("memory.segments_with_live_block", f["segments_with_live_block"], "count", None),
        ("memory.largest_free_block_per_segment", f["largest_free_block"], "bytes", f["per_segment"]),
        ("memory.expandable_segments", f["expandable_segments"], "count", None),
    ]
    rows += [(f"memory.{key}", f[key], "bytes", None) for key in ("segment_mapped", "segment_unmapped") if key in f]
    for name, value, unit, attrs in rows:
        sink.emit(ts=ts, kind="sample", name=name, device=device, value=float(value), unit=unit,
                  attrs=attrs or {}, loc=f"segments (device {device})")


def _emit_trace_actions(traces: list, sink: EventSink, report: ParseReport) -> int:
    """All recorded allocator actions, column-wise; returns the latest time (ns), 0 if none."""
    cols: dict[str, list] = {c: [] for c in ("ts", "kind", "name", "device", "stream", "value",
                                             "unit", "severity", "attrs", "loc")}
    for device, actions in enumerate(traces):
        if not isinstance(actions, list):
            report.skipped["device trace not a list"] += 1
            continue
        for i, a in enumerate(actions):
            if not isinstance(a, dict) or "action" not in a:
                report.skipped["trace entry without action"] += 1
                continue
            action = str(a["action"])
            kind = _ACTION_KIND.get(action, "marker")
            if kind == "marker":
                report.skipped[f"allocator action {action!r} (kept as marker)"] += 1
            attrs = {"addr": a.get("addr"), "stream": a.get("stream"), "device": device,
                     "frames": top_frames(a.get("frames"))}
            if action == "oom":
                attrs.update(device_free=a.get("device_free"), requested=a.get("size"))
            cols["ts"].append(clamp_int(a.get("time_us"), 0) * 1000)
            cols["kind"].append(kind)
            cols["name"].append(action)
            cols["device"].append(device)
            cols["stream"].append(clamp_int(a.get("stream")))
            cols["value"].append(float(clamp_int(a.get("size"), 0)))
            cols["unit"].append("bytes")
            cols["severity"].append("error" if kind == "oom" else "")
            cols["attrs"].append(dumps_attrs(attrs))
            cols["loc"].append(f"device_traces[{device}][{i}]")
    if cols["ts"]:
        sink.emit_columns(cols)
    return max(cols["ts"], default=0)


def _emit_segments(segments: list[dict], ts: int, sink: EventSink) -> None:
    for si, seg in enumerate(segments):
        device, stream = clamp_int(seg.get("device"), 0), clamp_int(seg.get("stream"))
        address = clamp_int(seg.get("address"), 0)
        blocks = [b for b in seg.get("blocks") or [] if isinstance(b, dict)]
        sink.emit(ts=ts, kind="marker", name="memory.segment", device=device, stream=stream,
                  value=float(clamp_int(seg.get("total_size"), 0)), unit="bytes",
                  attrs={k: seg.get(k) for k in ("address", "total_size", "allocated_size", "active_size",
                                                 "requested_size", "segment_type", "segment_pool_id",
                                                 "is_expandable")} | {"blocks": len(blocks)},
                  loc=f"segments[{si}]")
        for bi, b in enumerate(blocks):
            sink.emit(ts=ts, kind="marker", name="memory.block", device=device, stream=stream,
                      value=float(clamp_int(b.get("size"), 0)), unit="bytes",
                      attrs={"address": b.get("address"), "segment_address": address,
                             "state": b.get("state"), "requested_size": b.get("requested_size"),
                             "frames": top_frames(b.get("frames"))},
                      loc=f"segments[{si}].blocks[{bi}]")


def _is_segment(seg: Any, report: ParseReport) -> bool:
    if isinstance(seg, dict) and "total_size" in seg:
        return True
    report.skipped["segment without total_size"] += 1
    return False


def top_frames(frames: Any) -> list[dict]:
    """The first frames a person recognises: Python source lines before C++ internals
    (snapshots start every stack with torch::unwind and the allocator itself)."""
    if not isinstance(frames, list):
        return []
    frames = [f for f in frames if isinstance(f, dict)]
    python = [f for f in frames if str(f.get("filename", "")).endswith(".py")
              or str(f.get("filename", "")).startswith("<")]
    return [{"name": f.get("name"), "filename": f.get("filename"), "line": f.get("line")}
            for f in (python or frames)[:TOP_FRAMES]]
