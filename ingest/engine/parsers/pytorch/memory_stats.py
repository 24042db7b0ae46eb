"""torch.cuda.memory_stats() saved as JSON: a flat {stat: number} dict, or several of them
keyed by phase (e.g. {"before_request": {...}, "after": {...}}).

Rows: one `sample` per stat, name = the stat key ("reserved_bytes.all.current",
"num_ooms" ...), unit bytes or count, attrs.phase when the file has phases. The file
carries no time: ts = 0 and report.meta["clock"] = {"domain": "none"} (the aligner places it).
"""
from __future__ import annotations

from pathlib import Path
from typing import Any

import orjson

from ingest.engine.clock import Clock
from ingest.engine.events import EventSink, ParseError, ParseReport, describe
from ingest.engine.io import decode_json, read_all

FORMAT = "memory_stats"
SOURCE = "memory_snapshot"  # same producer (the CUDA caching allocator) as snapshots

MAX_BYTES = 64 * 1024**2
# Keys every torch.cuda.memory_stats() has had since 1.x; two of them identify the dump.
_MARKERS = (b'"allocated_bytes.all.current"', b'"reserved_bytes.all.current"',
            b'"num_alloc_retries"', b'"num_ooms"')
_BYTE_STATS = ("max_split_size",)  # byte-valued keys whose name does not say "_bytes"


def sniff(head: bytes, name: str) -> bool:
    return head.lstrip().startswith(b"{") and sum(m in head for m in _MARKERS) >= 2


def parse(path: Path, sink: EventSink, report: ParseReport) -> None:
    data = read_all(path, MAX_BYTES)
    doc = decode_json(data, path)
    if not isinstance(doc, dict):
        raise ParseError(str(path), "top level", "a JSON object of memory statistics", got=describe(doc))
    phases = _phases(doc)
    if not phases:
        raise ParseError(str(path), "top level", "torch.cuda.memory_stats() keys such as "
                         "'reserved_bytes.all.current', flat or grouped by phase", got=describe(doc))
    cols: dict[str, list] = {c: [] for c in ("kind", "name", "value", "unit", "attrs", "loc")}
    for phase, stats in phases:
        for key, value in stats.items():
            if isinstance(value, bool) or not isinstance(value, (int, float)):
                report.skipped[f"non-numeric stat ({type(value).__name__})"] += 1
                continue
            cols["kind"].append("sample")
            cols["name"].append(key)
            cols["value"].append(float(value))
            cols["unit"].append(unit_of(key))
            cols["attrs"].append(orjson.dumps({"phase": phase, **split_key(key)}).decode())
            cols["loc"].append(f"{phase}.{key}" if phase else key)
    sink.emit_columns(cols)
    report.meta.update({"phases": [p for p, _ in phases if p],
                        "clock": Clock("none", note="memory_stats() output carries no time").to_meta()})


def _phases(doc: dict) -> list[tuple[str, dict]]:
    """[(phase, stats)]: the flat dict is one phase named ""."""
    if _looks_like_stats(doc):
        return [("", doc)]
    return [(str(k), v) for k, v in doc.items() if isinstance(v, dict) and _looks_like_stats(v)]


def _looks_like_stats(d: dict) -> bool:
    return any(k in d for k in ("allocated_bytes.all.current", "reserved_bytes.all.current", "num_ooms"))


def unit_of(key: str) -> str:
    head = key.split(".", 1)[0]
    return "bytes" if head.endswith("_bytes") or head in _BYTE_STATS else "count"


def split_key(key: str) -> dict[str, Any]:
    """"reserved_bytes.large_pool.peak" -> stat, pool, aggregate, so rules can group."""
    parts = key.split(".")
    if len(parts) == 3:
        return {"stat": parts[0], "pool": parts[1], "aggregate": parts[2]}
    if len(parts) == 2:
        return {"stat": parts[0], "aggregate": parts[1]}
    return {"stat": key}
