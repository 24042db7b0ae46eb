"""The year a log's stamps without one are read in, and where it came from.

glog (`E1201 00:01:38`), vLLM (`INFO 12-01 00:01:38`) and syslog write no year. The parser
needs one to make a time; the aligner (ingest.engine.align) later checks it against the upload's
other evidence and moves the file when that evidence says so. The hint, best first:
the file's own full-date lines (Python logging, torchrun, DeepSpeed, a collector's date),
the modification time a gzip header keeps, the file's modification time, each when it is a
plausible date, else the year it was read in (archive members and copies often carry a
modification time of 0 or of the copy).
"""
from __future__ import annotations

import datetime as _dt
from dataclasses import dataclass
from itertools import islice
from pathlib import Path

from ingest.engine.io import open_bytes
from ingest.engine.parsers.logs.prefix import split_line

HEAD_LINES = 2_000        # lines read for a full date: a log states one early or rarely at all
HEAD_LINE_CHARS = 4_096   # of each line: a stamp is at its start


@dataclass(frozen=True)
class YearHint:
    year: int
    source: str


def year_hint(path: Path, now: _dt.datetime | None = None) -> YearHint:
    now = now or _dt.datetime.now(_dt.timezone.utc)
    dated = _dated_line(Path(path), now.year)
    if dated:
        return dated
    for when, source in ((_gzip_mtime(Path(path)), "the modification time its gzip header keeps"),
                         (Path(path).stat().st_mtime, "the file's modification time")):
        if when and 2000 <= (t := _dt.datetime.fromtimestamp(when, _dt.timezone.utc)).year \
                and t <= now + _dt.timedelta(days=1):
            return YearHint(t.year, source)
    mtime = _dt.datetime.fromtimestamp(Path(path).stat().st_mtime, _dt.timezone.utc)
    return YearHint(now.year, f"the year it was read, its modification time {mtime:%Y-%m-%d} being no date of a log")


def _dated_line(path: Path, fallback: int) -> YearHint | None:
    try:
        with open_bytes(path) as f:
            for no, raw in enumerate(islice(f, HEAD_LINES), 1):
                p = split_line(raw[:HEAD_LINE_CHARS].decode("utf-8", "replace").rstrip("\r\n"), fallback)
                if p.ts is not None and not p.year_assumed and 2000 <= (year := _year(p.ts)) < 2100:
                    return YearHint(year, f"the file's own full-date line {no}")
    except (OSError, EOFError, ValueError):  # unreadable head: the parse itself reports it
        return None
    return None


def _gzip_mtime(path: Path) -> int:
    """The MTIME of a gzip member's header (RFC 1952): the original file's, kept through an
    upload or a copy that resets the file's own; 0 when absent."""
    try:
        with open(path, "rb") as f:
            head = f.read(8)
    except OSError:
        return 0
    return int.from_bytes(head[4:8], "little") if len(head) == 8 and head[:2] == b"\x1f\x8b" else 0


def _year(ns: int) -> int:
    return _dt.datetime.fromtimestamp(ns // 10**9, _dt.timezone.utc).year
