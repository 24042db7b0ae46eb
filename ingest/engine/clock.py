"""The clock an artifact's timestamps are on, as a parser states it and the aligner reads it.

Parsers build a `Clock` and store it with `report.set_clock(...)`; it travels in
`ParseReport.meta["clock"]` as a plain dict (the form kept with each artifact) and
`ingest.engine.align` reads it back with `Clock.from_meta`. The domains and assumption flags are
explained in ingest/engine/align.py.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Literal

Domain = Literal["unix", "monotonic", "relative", "none", "unknown"]
ASSUMPTIONS = ("year_assumed", "date_assumed", "tz_assumed")


@dataclass(frozen=True)
class Clock:
    domain: Domain
    note: str = ""
    source: str = ""  # which field or table the times came from
    offset_ns: int | None = None  # the capture's own reference to the wall clock (perf header)
    offset_source: str = ""
    # Assumptions made reading a wall clock; the aligner may shift by whole years, days or
    # quarter hours. year_assumed holds the year used (log lines without a year).
    year_assumed: int | None = None
    year_source: str = ""  # where year_assumed came from ("the file's modification time", ...)
    date_assumed: bool = False
    tz_assumed: bool = False

    @property
    def assumptions(self) -> list[str]:
        return [name for name in ASSUMPTIONS if getattr(self, name)]

    def to_meta(self) -> dict[str, Any]:
        """The meta dict: unset fields are left out, so old and new metas read the same."""
        meta: dict[str, Any] = {"domain": self.domain}
        for key in ("source", "note", "offset_ns", "offset_source", *ASSUMPTIONS, "year_source"):
            value = getattr(self, key)
            if value is not None and value != "" and value is not False:
                meta[key] = value
        return meta

    @classmethod
    def from_meta(cls, meta: dict[str, Any] | None) -> Clock:
        """The artifact meta's clock; a meta without one (or a malformed one) is "unknown"."""
        clock = (meta or {}).get("clock")
        if not isinstance(clock, dict):
            return cls("unknown")
        offset = clock.get("offset_ns")
        year = clock.get("year_assumed")
        return cls(
            domain=clock.get("domain") or "unknown",
            note=str(clock.get("note") or ""),
            source=str(clock.get("source") or ""),
            offset_ns=offset if isinstance(offset, int) and not isinstance(offset, bool) else None,
            offset_source=str(clock.get("offset_source") or ""),
            year_assumed=year if isinstance(year, int) and not isinstance(year, bool) and year else None,
            year_source=str(clock.get("year_source") or ""),
            date_assumed=bool(clock.get("date_assumed")),
            tz_assumed=bool(clock.get("tz_assumed")),
        )
