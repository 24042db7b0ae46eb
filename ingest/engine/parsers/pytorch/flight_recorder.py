"""PyTorch NCCL flight-recorder dumps (TORCH_NCCL_DUMP_ON_TIMEOUT / TORCH_FR_DUMP_TEMP_FILE).

Two encodings of the same dict: a pickle (the default, `nccl_trace_rank_N`) and JSON
(`_dump_nccl_trace_json`). They differ in details this parser evens out: JSON writes 0 for
"not discovered yet" where the pickle writes None, stringifies pg_status counters, has
no stack frames, and nlohmann sorts its keys (so "entries" comes before "pg_status").

Rows: one `collective` per ring-buffer entry, one `marker` "pg_status" per process group.
Timestamps are c10::getTime() (CLOCK_REALTIME), i.e. Unix ns like the rest of the table.
The dump does not say which rank wrote it: the analyzer takes that from the file name
(`..._rank_N`) and so do we, saying so in report.meta.
"""
from __future__ import annotations

from pathlib import Path
from typing import Any

import orjson
import re2  # linear time, as everything that matches upload text

from ingest.engine.clock import Clock
from ingest.engine.events import EventSink, ParseError, ParseReport, clamp_int, describe
from ingest.engine.io import decode_json, read_all
from ingest.engine.safe_pickle import is_pickle, loads as safe_loads

FORMAT = "flight_recorder"
SOURCE = "flight_recorder"

MAX_DUMP_BYTES = 1024**3
TOP_FRAMES = 5
_RANK_IN_NAME = re2.compile(r"rank[_-]?(\d+)(?:\D*)$")  # fixed pattern on the file name


def sniff(head: bytes, name: str) -> bool:
    if is_pickle(head):
        return b"pg_status" in head or b"pg_config" in head
    text = head.lstrip()
    if not text.startswith(b"{") or b'"traceEvents"' in head:
        return False
    return b'"pg_status"' in head or (b'"entries"' in head and b'"profiling_name"' in head)


def parse(path: Path, sink: EventSink, report: ParseReport) -> None:
    data = read_all(path, MAX_DUMP_BYTES)
    dump = _decode(data, str(path))
    if not isinstance(dump, dict) or not ("entries" in dump or "pg_status" in dump):
        raise ParseError(str(path), "top level", "a flight-recorder dump: a dict with 'entries' and 'pg_status'",
                         got=describe(dump))
    rank = _rank_from_name(Path(path).name)
    pg_config = _pg_config(dump.get("pg_config"))
    report.meta.update({
        "version": str(dump.get("version", "")),
        "comm_lib_version": str(dump.get("comm_lib_version") or dump.get("nccl_version") or ""),
        "rank": rank,
        "rank_source": "file name" if rank is not None else "unknown",
        "world_size": _world_size(pg_config),
        "pg_config": pg_config,
        "encoding": "pickle" if is_pickle(data[:2]) else "json",
        "clock": Clock("unix", note="c10::getTime() wall clock, ns").to_meta(),
    })
    entries = dump.get("entries") or []
    if not isinstance(entries, list):
        raise ParseError(str(path), "key 'entries'", "a list of collective records", got=describe(entries))
    latest = _emit_entries(entries, rank, sink, report)
    _emit_pg_status(dump.get("pg_status"), pg_config, rank, latest, sink, report)


def _decode(data: bytes, path: str) -> Any:
    if is_pickle(data[:2]):
        return safe_loads(data, path)
    return decode_json(data, path, hint="; the dump may be cut short")


def _emit_entries(entries: list, rank: int | None, sink: EventSink, report: ParseReport) -> int:
    """One collective row per entry; returns the latest timestamp seen (ns)."""
    latest = 0
    for i, e in enumerate(entries):
        if not isinstance(e, dict) or "profiling_name" not in e:
            report.skipped["entry without profiling_name"] += 1
            continue
        created = clamp_int(e.get("time_created_ns"), 0)
        started = _time_or_none(e.get("time_discovered_started_ns"))
        completed = _time_or_none(e.get("time_discovered_completed_ns"))
        latest = max(latest, created, started or 0, completed or 0)
        pg_name, pg_desc = _pg_name(e.get("process_group"))
        attrs = {
            "pg_id": e.get("pg_id"),
            "pg_name": pg_name,
            "pg_desc": pg_desc,
            "collective_seq_id": e.get("collective_seq_id"),
            "p2p_seq_id": e.get("p2p_seq_id"),
            "op_id": e.get("op_id"),
            "record_id": e.get("record_id"),
            "input_sizes": e.get("input_sizes"),
            "output_sizes": e.get("output_sizes"),
            "input_dtypes": e.get("input_dtypes"),
            "output_dtypes": e.get("output_dtypes"),
            "state": e.get("state"),
            "retired": e.get("retired"),
            "time_discovered_started_ns": started,
            "time_discovered_completed_ns": completed,
            "duration_ms": e.get("duration_ms"),
            "timeout_ms": e.get("timeout_ms"),
            "is_p2p": bool(e.get("is_p2p")),
            "rank": rank,
            "thread_name": e.get("thread_name"),
            "frames": _top_frames(e.get("frames")),
        }
        sink.emit(
            ts=created,
            dur=completed - started if started and completed and completed >= started else 0,
            kind="collective",
            name=str(e["profiling_name"]),
            tid=clamp_int(e.get("thread_id")),
            value=float(clamp_int(e.get("collective_seq_id"), 0)),
            attrs=attrs,
            loc=f"entries[{i}]",
        )
    return latest


def _emit_pg_status(status: Any, pg_config: dict, rank: int | None, ts: int,
                    sink: EventSink, report: ParseReport) -> None:
    if not isinstance(status, dict):
        report.warn("no pg_status in the dump: last enqueued/started/completed unknown")
        return
    for pg_id, s in status.items():
        if not isinstance(s, dict):
            report.skipped["pg_status entry not a dict"] += 1
            continue
        cfg = pg_config.get(str(pg_id), {})
        sink.emit(
            ts=ts,
            kind="marker",
            name="pg_status",
            attrs={
                "pg_id": clamp_int(pg_id, -1),
                "pg_name": cfg.get("name", str(pg_id)),
                "pg_desc": cfg.get("desc", ""),
                "rank": rank,
                # the group's members: a group of one rank has no peer to wait for
                "group_ranks": cfg.get("ranks", []),
                "group_size": len(cfg.get("ranks", [])) or None,
                # JSON dumps write these as strings
                "last_enqueued_collective": clamp_int(s.get("last_enqueued_collective")),
                "last_started_collective": clamp_int(s.get("last_started_collective")),
                "last_completed_collective": clamp_int(s.get("last_completed_collective")),
                "ts_basis": "latest time recorded in the dump",
            },
            loc=f"pg_status[{pg_id}]",
        )


def _time_or_none(value: Any) -> int | None:
    t = clamp_int(value, 0)
    return t if t > 0 else None  # JSON dumps write 0 for "not yet"


def _pg_name(value: Any) -> tuple[str, str]:
    if isinstance(value, (list, tuple)) and len(value) >= 2:
        return str(value[0]), str(value[1])
    return (str(value), "") if value is not None else ("", "")


def _pg_config(value: Any) -> dict[str, dict]:
    """{pg_name: {name, desc, ranks: [int]}} whatever the version wrote."""
    out: dict[str, dict] = {}
    if not isinstance(value, dict):
        return out
    for key, cfg in value.items():
        if isinstance(cfg, dict):
            out[str(key)] = {"name": str(cfg.get("name", key)), "desc": str(cfg.get("desc", "")),
                             "ranks": _ranks(cfg.get("ranks"))}
        else:  # early versions mapped the name straight to its ranks
            out[str(key)] = {"name": str(key), "desc": "", "ranks": _ranks(cfg)}
    return out


def _ranks(value: Any) -> list[int]:
    if isinstance(value, str):  # "[0, 1]"
        try:
            value = orjson.loads(value)
        except orjson.JSONDecodeError:
            return []
    if isinstance(value, (list, tuple)):
        return [clamp_int(r) for r in value]
    return []


def _world_size(pg_config: dict[str, dict]) -> int | None:
    """The default group spans the world; else the largest group seen."""
    for cfg in pg_config.values():
        if cfg["desc"] == "default_pg":
            return len(cfg["ranks"]) or None
    sizes = [len(c["ranks"]) for c in pg_config.values()]
    return max(sizes, default=0) or None


def _rank_from_name(name: str) -> int | None:
    m = _RANK_IN_NAME.search(name)
    return int(m.group(1)) if m else None


def _top_frames(frames: Any) -> list[dict]:
    if not isinstance(frames, list):
        return []
    return [{"name": f.get("name"), "filename": f.get("filename"), "line": f.get("line")}
            for f in frames[:TOP_FRAMES] if isinstance(f, dict)]
