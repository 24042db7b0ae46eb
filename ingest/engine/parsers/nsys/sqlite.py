"""Nsight Systems SQLite exports (`nsys export --type sqlite`), export schemas 2.x and 3.x.

Detection reads this module for every upload, so it holds only the sniff; the reading (pandas)
is in `nsys.export`, imported when a file is one.
"""
from __future__ import annotations

from pathlib import Path

from ingest.engine.events import EventSink, ParseReport

FORMAT = "nsys_sqlite"
SOURCE = "nsys"

SQLITE_MAGIC = b"SQLite format 3\x00"


def sniff(head: bytes, name: str) -> bool:
    return head.startswith(SQLITE_MAGIC)


def parse(path: Path, sink: EventSink, report: ParseReport) -> None:
    from ingest.engine.parsers.nsys.export import parse as parse_export  # pandas: see the docstring
    parse_export(path, sink, report)
