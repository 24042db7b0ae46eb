"""Parse one artifact into its events: a Parquet event file (the service) or an in-memory
Arrow table (the CLI)."""
from __future__ import annotations

import sys
import threading
import time
from contextlib import contextmanager
from pathlib import Path
from types import TracebackType
from typing import Callable, Iterator

import pyarrow as pa

from ingest.engine import interruptions
from ingest.engine.events import MAX_GOT, SCHEMA, EventLimitReached, EventSink, ParseError, ParseReport
from ingest.engine.io import GZIP_ERRORS, count_bytes_read, env_int
from ingest.engine.parsers import detect
from ingest.engine.parsers.protocol import Parser
from ingest.engine.spill import SpillFile, spilled

ROW_GROUP_ROWS = 1_000_000
# What only damaged input raises (a gzip stream cut short or corrupt, bytes that are not the
# UTF-8 a JSON format requires), wherever in a parser it surfaces: unusable input, not a bug.
DAMAGED_INPUT = GZIP_ERRORS + (UnicodeDecodeError,)

# progress(events so far, bytes of the input file read so far)
Progress = Callable[[int, int], None]


# What one artifact may produce, by what its events cost: the generic text-log parser reads
# every line in Python (~50 us and ~0.5 KB a line: a file of tiny lines made 1 M events cost
# 54 s and 510 MB); the other parsers cost far less per event. Past the bound the parse stops,
# keeps the events so far and says in the report that the rest was not read.
MAX_LOG_EVENTS = 2_000_000
MAX_ARTIFACT_EVENTS = 50_000_000
LINE_BY_LINE_FORMATS = ("log",)


def events_allowed(fmt: str) -> tuple[int, str]:
    """(at most this many events for one artifact of format `fmt`, the setting that says so)."""
    if fmt in LINE_BY_LINE_FORMATS:
        return env_int("TRACEDOC_MAX_LOG_EVENTS", MAX_LOG_EVENTS), "TRACEDOC_MAX_LOG_EVENTS"
    return env_int("TRACEDOC_MAX_ARTIFACT_EVENTS", MAX_ARTIFACT_EVENTS), "TRACEDOC_MAX_ARTIFACT_EVENTS"


OUT_OF_MEMORY = ("out of memory: the file needs more memory than this process may use (a worker's "
                 "per-task limit, TRACEDOC_TASK_MEMORY_LIMIT_MB)")


class InternalParseError(ParseError):
    """A parser (or a sniffer) failed on a file it should have read or refused: a tracedoc
    bug, not bad input. It reaches the caller like an unusable file (named, with the position
    where known) so the other artifacts are still diagnosed, and is flagged so the CLI can
    exit with its own status instead of "findings"."""

    def __init__(self, path: str, where: str, expected: str, fmt: str = ""):
        super().__init__(path, where, expected)
        self.format = fmt


def parse_artifact(path: Path, out: Path, artifact_id: str, name: str | None = None,
                   progress: Progress | None = None) -> ParseReport:
    """Detect the format of `path`, stream its events into Parquet file `out`.

    Raises ParseError (naming `name`) when the file is unusable; the Parquet file is
    then not left behind half-written.
    """
    with event_file(out) as on_batch:
        return parse_events(Path(path), artifact_id, name, on_batch, progress)


@contextmanager
def event_file(out: Path) -> Iterator[Callable[[pa.RecordBatch], None]]:
    """A Parquet event file written batch by batch (the `with` block gets the batch callback)
    under a temporary name, moved to `out` when the block ends well and removed when it does
    not: a file parsed again (a part re-run after its worker was killed) replaces it whole."""
    import pyarrow.parquet as pq  # the service's path only: the CLI keeps its events in memory
    out = Path(out)
    tmp = out.with_suffix(".parquet.part")
    writer = pq.ParquetWriter(tmp, SCHEMA, compression="zstd")
    try:
        yield lambda batch: writer.write_batch(batch, row_group_size=ROW_GROUP_ROWS)
    except BaseException:
        writer.close()
        tmp.unlink(missing_ok=True)
        raise
    writer.close()
    tmp.replace(out)


def parse_to_table(path: Path, artifact_id: str, name: str | None = None,
                   progress: Progress | None = None) -> tuple[ParseReport, pa.Table]:
    """Like parse_artifact, but the events stay in memory as one Arrow table (the CLI
    diagnoses what it just parsed: no Parquet written and read back)."""
    batches: list[pa.RecordBatch] = []
    attrs = SCHEMA.get_field_index("attrs")
    with SpillFile() as spill:
        def keep(batch: pa.RecordBatch) -> None:  # each batch's args go to the spill file as it comes
            batches.append(batch.set_column(attrs, SCHEMA.field(attrs), spilled(batch.column(attrs), spill)))
        report = parse_events(Path(path), artifact_id, name, keep, progress)
    table = pa.Table.from_batches(batches, schema=SCHEMA)
    batches.clear()  # the sink's callbacks form a cycle that keeps this list until a gc pass
    return report, table


def parse_events(path: Path, artifact_id: str, name: str | None,
                 on_batch: Callable[[pa.RecordBatch], None], progress: Progress | None = None) -> ParseReport:
    """Detect the format of `path` and hand its events to `on_batch`, batch by batch.

    `progress(events, bytes)` is called as the file is read (bytes of the file as stored,
    compressed for a .gz, so they end at its size) and after each batch."""
    name = name or path.name
    try:
        parser = detect(path, name)
    except ParseError as e:  # read_head names the stored file; people know it by `name`
        raise ParseError(name, e.where, e.expected, got=e.got) from None
    except Exception as e:  # a sniff() bug must not hide the file's other problems or the trace
        interruptions.reraise(e)
        raise _internal(name, "format detection", e, "byte 0") from e
    report = ParseReport(format=parser.FORMAT)
    read = [0]
    caller = threading.current_thread()

    def on_read(position: int) -> None:
        read[0] = max(read[0], position)  # a parser that reads the file twice never goes back
        if threading.current_thread() is caller:  # a reading thread (ingest.engine.prefetch) only counts
            assert progress is not None  # installed only with a progress callback
            progress(sink.count, read[0])

    def batch_done(batch: pa.RecordBatch) -> None:
        on_batch(batch)
        if progress:
            progress(sink.count, read[0])

    limit, setting = events_allowed(parser.FORMAT)
    sink = EventSink(artifact_id, parser.SOURCE, batch_done, limit=limit, limit_setting=setting)
    started = time.perf_counter()
    with count_bytes_read(on_read if progress else None):
        _parse_classified(parser, path, sink, report, name)
    _flush_classified(parser, sink, name)
    report.events = sink.count
    report.meta.setdefault("parse_seconds", round(time.perf_counter() - started, 3))
    return report


def run_parser(parser: Parser, path: Path, sink: EventSink, report: ParseReport, name: str) -> None:
    """`parser.parse`, then the last batch, as parse_events runs them: a ParseError naming
    `name` for unusable input, an InternalParseError for anything else (a bug). Nothing else
    escapes (the fuzz tests hold every parser to this)."""
    _parse_classified(parser, path, sink, report, name)
    _flush_classified(parser, sink, name)


def _parse_classified(parser: Parser, path: Path, sink: EventSink, report: ParseReport, name: str) -> None:
    try:
        parser.parse(path, sink, report)
    except EventLimitReached as e:
        # bounded by what it costs: the events so far are kept, the report says the rest is not
        setting = e.setting or "the event bound"
        where = f"after {e.after}" if e.after else f"after {sink.count:,} events"
        report.meta["events_limit"] = {"limit": e.limit, "setting": setting, "stopped": where}
        # first, so that it is never among the warnings cut after ParseReport.MAX_WARNINGS
        report.warnings.insert(0, f"at most {e.limit:,} events per artifact ({setting}); {where}: "
                               "the rest of the file was not read")
    except ParseError as e:
        # parsers see the stored path; people know the file by its original name
        raise ParseError(name, e.where, e.expected, got=e.got) from None
    except DAMAGED_INPUT as e:
        where = _crash_position(e.__traceback__) or f"after {sink.count:,} events"
        what = "UTF-8 text" if isinstance(e, UnicodeDecodeError) else "a complete, undamaged compressed stream"
        raise ParseError(name, where, what, got=f"{type(e).__name__}: {e}"[:MAX_GOT]) from None
    except RecursionError:
        # msgspec and the json module decode nested arrays/objects recursively, bounded by
        # Python's recursion limit: a file nested that deep is unusable input, not a bug.
        where = f"after {sink.count:,} events"
        raise ParseError(name, where, f"JSON nested at most {sys.getrecursionlimit():,} levels deep",
                         got=f"nesting deeper than {sys.getrecursionlimit():,}") from None
    except MemoryError:
        # past the process's memory cap (a worker's TRACEDOC_TASK_MEMORY_LIMIT_MB): too big for
        # this process, not a bug and not bad input; the other files are still diagnosed
        raise ParseError(name, f"after {sink.count:,} events", OUT_OF_MEMORY) from None
    except Exception as e:
        interruptions.reraise(e)
        raise _internal(name, f"the {parser.FORMAT} parser", e,
                        _crash_position(e.__traceback__) or f"after {sink.count:,} events") from e


def _flush_classified(parser: Parser, sink: EventSink, name: str) -> None:
    try:
        sink.flush()
    except Exception as e:
        interruptions.reraise(e)
        raise _internal(name, f"writing the {parser.FORMAT} events", e, f"after {sink.count:,} events") from e


def _internal(name: str, stage: str, exc: Exception, where: str) -> InternalParseError:
    what = f"{type(exc).__name__}: {exc}"[:300]
    return InternalParseError(name, where, f"internal error in {stage} ({what}): a tracedoc bug, not a "
                              "problem with the file; the other files were still diagnosed; please "
                              "report it with this file", fmt=stage)


def _crash_position(tb: TracebackType | None) -> str:
    """Where in the file a parser was when it crashed, from its innermost frame's `loc`
    ("line 12") or `lineno`; "" when the frames do not say."""
    found = ""
    while tb is not None:
        frame = tb.tb_frame
        if frame.f_globals.get("__name__", "").startswith("ingest.engine.parsers"):
            loc, lineno = frame.f_locals.get("loc"), frame.f_locals.get("lineno")
            if isinstance(loc, str) and loc:
                found = loc[:80]
            elif isinstance(lineno, int) and not isinstance(lineno, bool):
                found = f"line {lineno}"
        tb = tb.tb_next
    return found
