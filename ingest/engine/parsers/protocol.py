"""The contract every parser module meets (checked by tests/ingest/test_parser_contract.py).

A parser is a module, not a class: the registry imports it by name and calls its functions,
so the Protocol describes module attributes. Modules satisfy it structurally.
"""
from __future__ import annotations

from pathlib import Path
from typing import Protocol

from ingest.engine.events import EventSink, ParseReport


class Parser(Protocol):
    FORMAT: str  # format id shown in reports
    SOURCE: str  # value of the event table's `source` column (one of ingest.engine.events.SOURCES)

    def sniff(self, head: bytes, name: str) -> bool:
        """Whether this parser takes the file. head: the first 64 KiB of content, already
        gunzipped; name: the original file name (a hint only: detection works on content)."""
        ...

    def parse(self, path: Path, sink: EventSink, report: ParseReport) -> None:
        """Stream events into the sink; raise ParseError for unusable input; count and skip
        single broken records with report.warn(...) / report.skipped[...]."""
        ...
