"""Fan-out of a big trace: which parts several workers parse, and the merge of their results.

A trace whose files together reach TRACEDOC_FANOUT_BYTES is parsed as parts (ParsePart
rows): one per file, and for a plain text log one per byte range of about
TRACEDOC_FANOUT_PART_BYTES (ingest.engine.log_ranges: each range warms its parser up on the
TRACEDOC_FANOUT_WARMUP_BYTES before it); with TRACEDOC_FANOUT_KINETO_PART_BYTES set, an
uncompressed Kineto JSON trace is split too, in ranges of whole windows of its reader
(ingest.engine.kineto_ranges). Gzip files and the other
formats are one part per file: their parsers read whole files.

Every part reads its file from the content store (archive members are stored there by the
plan), so any worker on any host can take it. The merge writes each log's Parquet file as
the concatenation of its ranges' files plus the rows only the whole file gives (a Kineto
trace's ranges with their locations shifted and the GPU rows launched in another range put
in their place), so the artifact rows and the event order are those of one worker's parse;
when they cannot be, the merge parses the whole file itself. The diagnosis then runs
over all of the trace's Parquet files as always.
"""
from __future__ import annotations

import hashlib
import json
import logging
import re
import uuid
from dataclasses import dataclass
from pathlib import Path

import pyarrow.parquet as pq
from django.conf import settings

from ingest.engine import kineto_ranges
from ingest.engine.events import ParseError
from ingest.engine.log_ranges import RangeOutcome, consistent, finish, plan_ranges, splittable
from ingest.models import Artifact, Trace
from ingest.engine.parse import ROW_GROUP_ROWS, event_file
from ingest.engine.parsers import detect
from ingest.engine.parsers.kineto import trace as kineto_parser
from ingest.engine.parsers.logs import parser as log_parser
from ingest.engine.parsers.logs.year import year_hint
from ingest.parts import ParsePart
from ingest.storage import ContentStore

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class Plan:
    plan_id: str
    parts: list[ParsePart]   # without the merge row


def fans_out(leaves_bytes: int) -> bool:
    threshold = settings.TRACEDOC_FANOUT_BYTES
    return threshold > 0 and leaves_bytes >= threshold


def make_plan(trace: Trace, leaves: list[tuple[Artifact, Path]], sizes: list[int], store: ContentStore,
              then: list) -> Plan:
    """The part rows of a fan-out (and its merge row, holding `then`: the workflow steps to
    queue once the parse is merged)."""
    plan_id = uuid.uuid4().hex
    files_bytes = max(1, sum(sizes))
    rows: list[ParsePart] = []
    for (artifact, path), size in zip(leaves, sizes):
        if artifact.parent_id is not None:
            store.put_path(path)  # an archive member: any worker reads it from the store, by its digest
        share = trace.bytes_total * size / files_bytes
        base = {"leaf": path.name, "share": share}
        fmt = _format(path, artifact.name)
        kineto_part = settings.TRACEDOC_FANOUT_KINETO_PART_BYTES
        events = kineto_ranges.plan_ranges(path, kineto_part) \
            if kineto_part > 0 and fmt is kineto_parser else []  # [] for a gzip: it stays whole
        if events:
            for r in events:
                rows.append(ParsePart(kind=ParsePart.RANGE, artifact=artifact, spec=base | {
                    "format": KINETO, "range": r.to_dict(), "count": len(events),
                    "share": share * (r.end - r.start) / max(1, size)}))
        elif fmt is log_parser and splittable(path):
            ranges = plan_ranges(path, settings.TRACEDOC_FANOUT_PART_BYTES, settings.TRACEDOC_FANOUT_WARMUP_BYTES)
            hint = year_hint(path)  # once, so that every range reads the same year
            for r in ranges:
                rows.append(ParsePart(kind=ParsePart.RANGE, artifact=artifact, spec=base | {
                    "range": r.to_dict(), "year": hint.year, "year_source": hint.source, "count": len(ranges),
                    "share": share * (r.end - r.start) / max(1, size)}))
        else:
            rows.append(ParsePart(kind=ParsePart.ARTIFACT, artifact=artifact, spec=base))
    for no, row in enumerate(rows, 1):
        row.trace, row.plan, row.no = trace, plan_id, no
    ParsePart.objects.bulk_create(rows)
    ParsePart.objects.create(trace=trace, plan=plan_id, no=0, kind=ParsePart.MERGE, then=then)
    return Plan(plan_id, rows)


KINETO = "kineto"  # spec["format"] of a Kineto trace's byte range (a log's range has none)


def _format(path: Path, name: str):
    try:
        return detect(path, name)
    except ParseError:
        return None  # parse_one reports it, as for a single worker


def staged(part: ParsePart, store: ContentStore, tmp: Path) -> Path:
    """The part's file under its own name (parsers and the nsys reader see the name), linked
    to its stored bytes."""
    path = tmp / part.spec["leaf"]
    return store.stage_blob(part.artifact.sha256, path)  # a link, or (S3) a download into tmp


def parts_dir(store: ContentStore, trace_id: int, plan_id: str) -> Path:
    d = store.parquet_dir(trace_id) / "parts" / plan_id
    d.mkdir(parents=True, exist_ok=True)
    return d


def last_part_done(part: ParsePart) -> bool:
    """Called once a part is marked done: True for exactly one caller, the one that finds no
    part of the plan left and takes the merge row (compare-and-set: queued -> sent)."""
    rows = ParsePart.objects.filter(trace_id=part.trace_id, plan=part.plan)
    if rows.exclude(kind=ParsePart.MERGE).exclude(state=ParsePart.DONE).exists():
        return False
    return bool(rows.filter(kind=ParsePart.MERGE, state=ParsePart.QUEUED).update(state=ParsePart.SENT))


@dataclass(frozen=True)
class Merged:
    """One log's ranges merged: what its Artifact row gets, or `fallback` (why the whole
    file must be parsed by one worker instead)."""
    fallback: str = ""
    format: str = "log"
    parquet: Path | None = None
    events: int = 0
    warnings: tuple[str, ...] = ()
    meta: dict | None = None


def merge_ranges(artifact: Artifact, ranges: list[ParsePart], store: ContentStore) -> Merged:
    """The ranges' Parquet files concatenated (in order) into the artifact's file, with the
    whole-file rows last, as the single parse writes them."""
    if ranges[0].spec.get("format") == KINETO:
        return merge_kineto_ranges(artifact, ranges, store)
    outcomes = [RangeOutcome.from_json(p.outcome) for p in ranges]
    why = consistent(outcomes)
    if why:
        return Merged(fallback=why)
    out = store.parquet_dir(artifact.trace_id) / parquet_name(artifact.name)
    with event_file(out) as on_batch:
        for p in ranges:
            with store.parquet_file(p.parquet).open() as stored:  # local or S3 alike
                for batch in pq.ParquetFile(stored).iter_batches(batch_size=ROW_GROUP_ROWS):
                    on_batch(batch)
        report = finish(outcomes, artifact.name, ranges[0].spec["year"], on_batch,
                        ranges[0].spec.get("year_source", ""))
    report.meta["parse_seconds"] = round(sum(o.seconds for o in outcomes), 3)
    return Merged(parquet=out, events=report.events, warnings=tuple(report.summary_warnings()),
                  meta=json.loads(json.dumps(report.meta, default=str)))


def merge_kineto_ranges(artifact: Artifact, ranges: list[ParsePart], store: ContentStore) -> Merged:
    """A Kineto trace's ranges merged into the artifact's file (ingest.engine.kineto_ranges)."""
    outcomes = [kineto_ranges.RangeOutcome.from_json(p.outcome) for p in ranges]

    def load(k: int, columns: list[str] | None):
        with store.parquet_file(ranges[k].parquet).open() as stored:  # local or S3 alike
            return pq.read_table(stored, columns=columns)
    out = store.parquet_dir(artifact.trace_id) / parquet_name(artifact.name)
    try:
        with event_file(out) as on_batch:
            report = kineto_ranges.merge(load, outcomes, on_batch)
    except kineto_ranges.Unmergeable as e:  # event_file removed what was written
        return Merged(fallback=str(e))
    return Merged(format=report.format, parquet=out, events=report.events,
                  warnings=tuple(report.summary_warnings()), meta=json.loads(json.dumps(report.meta, default=str)))


def parquet_name(name: str) -> str:
    stem = re.sub(r"[^A-Za-z0-9_.-]+", "_", name)[-80:]
    return f"{stem}.{hashlib.sha256(name.encode()).hexdigest()[:8]}.parquet"
