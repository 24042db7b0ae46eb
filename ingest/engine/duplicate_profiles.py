"""Two files of one trace that hold the same profile: the .json and a .json.gz of one Kineto
trace, the same file uploaded twice, two exports of one run. Their events are the same rows,
and diagnosing both would count every kernel twice (kernel counts, breakdowns, findings).

A file is a duplicate of an earlier one when both were read by the same parser (`format`) and
give the same timed events: the same number of rows, the same time range, and every column
equal (time, duration, kind, name, process, thread, device, stream, arguments, location...)
but the file's own name (`artifact`). Files without timed events are never duplicates: two
different logs can hold the same untimed lines. The comparison runs only for files that
already agree on format, row count and time range, so a trace without duplicates pays one
min/max per file.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Mapping

import pyarrow as pa
import pyarrow.compute as pc

NOT_IDENTITY = ("artifact",)  # the file's name: the one thing two exports of a profile differ in


@dataclass(frozen=True)
class DuplicateProfile:
    name: str       # the file whose events are left out
    original: str   # the earlier file with the same events, which is kept
    events: int

    def warning(self) -> str:
        return (f"{self.name} holds the same {self.events} events as {self.original} (another export of one "
                f"profile): its events are counted once, as {self.original}'s")


def _candidate_key(fmt: str, table: pa.Table) -> tuple | None:
    """Cheap: files that differ here cannot hold the same events. None: no timed event."""
    if table.num_rows == 0 or "ts" not in table.column_names:
        return None
    bounds = pc.min_max(table.column("ts"))
    if not bounds["max"].as_py():  # ts 0 is "no time" (a log line without a timestamp)
        return None
    return (fmt, table.num_rows, bounds["min"].as_py(), bounds["max"].as_py())


def same_events(a: pa.Table, b: pa.Table) -> bool:
    """Every column but the file's name equal, row by row (chunking does not matter)."""
    columns = [c for c in a.column_names if c not in NOT_IDENTITY]
    if a.num_rows != b.num_rows or columns != [c for c in b.column_names if c not in NOT_IDENTITY]:
        return False
    return all(a.column(c).equals(b.column(c)) for c in columns)


def find_duplicates(tables: Mapping[str, pa.Table], formats: Mapping[str, str]) -> list[DuplicateProfile]:
    """Each file (in `tables`' order) whose events an earlier file already holds."""
    kept: dict[tuple, list[str]] = {}
    out = []
    for name, table in tables.items():
        key = _candidate_key(formats.get(name, ""), table)
        if key is None:
            continue
        same = next((other for other in kept.get(key, ()) if same_events(tables[other], table)), None)
        if same is None:
            kept.setdefault(key, []).append(name)
        else:
            out.append(DuplicateProfile(name=name, original=same, events=table.num_rows))
    return out
