"""Parse one artifact into its Parquet event file."""
from __future__ import annotations

import time
from pathlib import Path
from typing import Callable

import pyarrow.parquet as pq

from ingest.events import SCHEMA, EventSink, ParseError, ParseReport
from ingest.parsers import detect

ROW_GROUP_ROWS = 1_000_000


def parse_artifact(path: Path, out: Path, artifact_id: str, name: str | None = None,
                   progress: Callable[[int], None] | None = None) -> ParseReport:
    """Detect the format of `path`, stream its events into Parquet file `out`.

    Raises ParseError (naming `name`) when the file is unusable; the Parquet file is
    then not left behind half-written.
    """
    path, out = Path(path), Path(out)
    name = name or path.name
    parser = detect(path, name)
    report = ParseReport(format=parser.FORMAT)
    tmp = out.with_suffix(".parquet.part")
    writer = pq.ParquetWriter(tmp, SCHEMA, compression="zstd")

    def on_batch(batch):
        writer.write_batch(batch, row_group_size=ROW_GROUP_ROWS)
        if progress:
            progress(sink.count)

    sink = EventSink(artifact_id, parser.SOURCE, on_batch)
    started = time.perf_counter()
    try:
        try:
            parser.parse(path, sink, report)
        except ParseError as e:
            # parsers see the stored path; people know the file by its original name
            raise ParseError(name, e.where, e.expected) from None
        sink.flush()
    except BaseException:
        writer.close()
        tmp.unlink(missing_ok=True)
        raise
    writer.close()
    tmp.replace(out)
    report.events = sink.count
    report.meta.setdefault("parse_seconds", round(time.perf_counter() - started, 3))
    return report
