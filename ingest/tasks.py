"""`ingest.parse_trace`: every artifact of a trace to its Parquet event file.

Idempotent (acks late: a redelivered message must give the same result): a run first
throws away what an earlier run produced for the trace (archive members, Parquet files,
counters, temporary folders of a killed attempt), then parses every uploaded file again
from the content store. Uploaded archives are expanded here, in the worker, never in the
web process. tracedoc.workflow chains the diagnosis after it and re-queues a trace whose
task was lost.

A trace whose files reach TRACEDOC_FANOUT_BYTES is parsed by several workers instead
(ingest/fanout.py): `parse_trace` plans the parts and queues one `ingest.parse_part` each;
the last part to finish queues `ingest.merge_parts`, which writes the artifacts' results as
one worker would have and queues the workflow's next step (the rest of the chain
`parse_trace` was sent in).

At most TRACEDOC_TEAM_MAX_PARSING traces of one team parse at once (counted in PostgreSQL
under a lock on the team's row); another waits in `received` and tracedoc.workflow starts it
when one of them leaves `parsing` (`parse_finished`).
"""
from __future__ import annotations

import json
import logging
import os
import shutil
import tempfile
import time
from contextlib import ExitStack
from functools import partial
from pathlib import Path
from typing import Callable

import pyarrow.compute as pc
import pyarrow.parquet as pq
from itertools import groupby

from celery import shared_task, signature
from celery.exceptions import SoftTimeLimitExceeded
from django.conf import settings
from django.db import transaction
from django.db.models import F
from django.utils import timezone

from accounts.models import Team
from ingest import db_outage, fanout
from ingest.engine import kineto_ranges
from ingest.engine.artifact_results import parse_one
from ingest.engine.bundle import expand
from ingest.engine.events import ParseError
from ingest.engine.log_ranges import LineRange, RangeOutcome, parse_range_to_parquet
from ingest.models import Artifact, Trace
from ingest.parts import ParsePart, parse_finished
from ingest.storage import ContentStore, sha256_of
from ingest.task_failures import failures

log = logging.getLogger(__name__)
PROGRESS_EVERY_S = 0.5
MAX_PARSE_ATTEMPTS = 3


@shared_task(bind=True, name="ingest.parse_trace", acks_late=True, reject_on_worker_lost=True, **db_outage.RETRY)
def parse_trace(self, trace_id: int, run_id: str = "") -> None:
    """`run_id`: the workflow run that sent this message (tracedoc.workflow); a message of an
    older run, or one redelivered after its parse was done, leaves the trace alone."""
    trace = Trace.objects.filter(pk=trace_id).first()
    if trace is None:
        return  # deleted while queued
    if not trace.runs_for(run_id, Trace.State.RECEIVED, Trace.State.PARSING):
        log.info("parse_trace %s: run %s no longer owns the trace (state %s, run %s); skipped",
                 trace_id, run_id, trace.state, trace.run_id)
        return
    if trace.interrupted_attempts(Trace.State.PARSING) >= MAX_PARSE_ATTEMPTS:
        biggest = trace.artifacts.order_by("-size").first()
        _fail(trace, (
            f"gave up after {MAX_PARSE_ATTEMPTS} attempts: the worker stopped (killed, out of memory or "
            "crashed) each time while parsing this trace"
            + (f"; its largest file is {biggest.name} ({biggest.size:,} bytes)" if biggest else "")))
        return
    if not _admit(trace):
        return
    store = ContentStore()
    _reset(trace, store)
    with failures(partial(_fail, trace), log, f"parse_trace {trace.pk} failed", doing="parsing",
                  advice="upload fewer or smaller files, or raise the limit",
                  internal="internal error while parsing") as outcome:
        with tempfile.TemporaryDirectory(prefix=f"trace-{trace.pk}-", dir=_tmp_root(store)) as tmp:
            with ExitStack() as stack:
                leaves = _expand_uploads(trace, store, Path(tmp), stack)
                trace.record_progress(artifacts_total=len(leaves))
                sizes = [_file_size(path) for _, path in leaves]
                if fanout.fans_out(sum(sizes)):
                    plan = fanout.make_plan(trace, leaves, sizes, store, then=list(self.request.chain or []))
                    # the chain goes on after the merge (merge_parts queues its next step), not now
                    self.request.chain = None
                    for part in plan.parts:
                        parse_part.si(trace.pk, run_id, plan.plan_id, part.no).apply_async()
                    log.info("parse_trace %s: %s bytes in %d parts (plan %s)", trace.pk, f"{sum(sizes):,}",
                             len(plan.parts), plan.plan_id)
                    return
                for i, (artifact, path) in enumerate(leaves):
                    scale = _ByteScale(trace.bytes_total, sum(sizes), sum(sizes[:i]), sizes[i])
                    events_before = trace.events_done
                    events = _parse_artifact(trace, artifact, path, store, _progress(trace, scale, events_before))
                    trace.record_progress(events_done=events_before + events, bytes_done=scale(scale.size),
                                          artifacts_done=trace.artifacts_done + 1)
    if outcome.failed:
        return
    trace.record_progress(bytes_done=trace.bytes_total)
    _parsed_or_failed(trace)


def _admit(trace: Trace) -> bool:
    """Move the trace to `parsing` if its team has a parse slot free; else leave it waiting in
    `received` with no run (tracedoc.workflow starts it when a slot frees, its beat job after
    a while at the latest). A redelivered message already holds its slot."""
    if trace.state == Trace.State.PARSING:
        trace.transition(Trace.State.PARSING)
        return True
    limit = settings.TRACEDOC_TEAM_MAX_PARSING
    with transaction.atomic():
        # one admission per team at a time: the count below cannot go stale before the transition
        Team.objects.select_for_update().filter(pk=trace.team_id).first()
        busy = Trace.objects.filter(team_id=trace.team_id, state=Trace.State.PARSING).exclude(pk=trace.pk).count()
        if limit and busy >= limit:
            Trace.objects.filter(pk=trace.pk, run_id=trace.run_id).update(
                run_id="", updated_at=timezone.now(),
                error=f"waiting for a parse slot: {busy} traces of this team are parsing, at most {limit} at "
                      "once (TRACEDOC_TEAM_MAX_PARSING); it starts when one of them is parsed")
            log.info("parse_trace %s: team %s has %d traces parsing; waits", trace.pk, trace.team_id, busy)
            return False
        trace.transition(Trace.State.PARSING)
    return True


def _fail(trace: Trace, error: str) -> None:
    trace.transition(Trace.State.FAILED, error=error)
    parse_finished.send(sender=Trace, team_id=trace.team_id)


def _parsed_or_failed(trace: Trace) -> bool:
    """The end of a parse, by one worker or merged: parsed unless no file could be."""
    leaves = trace.artifacts.exclude(format__in=Artifact.CONTAINERS)
    failed = [a for a in leaves if a.error]
    if not leaves or len(failed) == len(leaves):
        errors = "\n".join(a.error for a in trace.artifacts.exclude(error="")) or "the upload holds no file"
        _fail(trace, f"no artifact could be parsed:\n{errors}")
        return False
    trace.transition(Trace.State.PARSED)
    parse_finished.send(sender=Trace, team_id=trace.team_id)
    return True


def _progress(trace: Trace, scale: "_ByteScale", events_before: int):
    """progress(events, read) of one worker parsing file after file: absolute counters."""
    last = [0.0]

    def progress(events: int, read: int) -> None:
        now = time.monotonic()
        if now - last[0] >= PROGRESS_EVERY_S:  # bytes read of the file as stored: the bar moves while it parses
            last[0] = now
            trace.beat(events_done=events_before + events, bytes_done=scale(read))
    return progress


def _heartbeat(trace: Trace):
    """progress for a part: parts run side by side, so they only keep the trace's heartbeat
    fresh while they run and add their counts when done."""
    last = [0.0]

    def beat(*_) -> None:
        now = time.monotonic()
        if now - last[0] >= PROGRESS_EVERY_S:
            last[0] = now
            trace.beat()
    return beat


@shared_task(name="ingest.parse_part", acks_late=True, reject_on_worker_lost=True, **db_outage.RETRY)
def parse_part(trace_id: int, run_id: str, plan_id: str, no: int) -> None:
    """One part of a fanned-out parse. Idempotent: a part run again (its worker was killed)
    rewrites its own result; a part of a replaced plan or run does nothing."""
    part = ParsePart.objects.filter(trace_id=trace_id, plan=plan_id, no=no).select_related("trace", "artifact").first()
    if part is None or not part.trace.runs_for(run_id, Trace.State.PARSING):
        log.info("parse_part %s/%s/%s: no longer wanted; skipped", trace_id, plan_id, no)
        return
    trace, store = part.trace, ContentStore()
    if part.state != ParsePart.DONE:
        ParsePart.objects.filter(pk=part.pk).update(attempts=F("attempts") + 1)
        if part.attempts + 1 > MAX_PARSE_ATTEMPTS:
            _fail(trace, f"gave up after {MAX_PARSE_ATTEMPTS} attempts: the worker stopped (killed, out of memory "
                  f"or crashed) each time while parsing {_part_label(part)}")
            return
        with failures(partial(_fail, trace), log, f"parse_part {trace_id}/{plan_id}/{no} failed",
                      doing=f"parsing {_part_label(part)}",
                      advice="lower TRACEDOC_FANOUT_PART_BYTES or raise the limit",
                      internal=f"internal error while parsing {_part_label(part)}") as outcome:
            _run_part(trace, part, store)
        if outcome.failed:
            return
    if fanout.last_part_done(part):
        merge_parts.si(trace_id, run_id, plan_id).apply_async()


def _part_label(part: ParsePart) -> str:
    if part.kind == ParsePart.RANGE and part.spec.get("format") == fanout.KINETO:
        r = part.spec["range"]
        return f"{part.artifact.name} (bytes {r['start']:,}-{r['end']:,})"
    if part.kind == ParsePart.RANGE:
        r = part.spec["range"]
        return f"{part.artifact.name} (bytes {r['start']:,}-{r['end']:,}, from line {r['first_line']:,})"
    return part.artifact.name


def _run_part(trace: Trace, part: ParsePart, store: ContentStore) -> None:
    beat = _heartbeat(trace)
    with tempfile.TemporaryDirectory(prefix=f"trace-{trace.pk}-part-", dir=_tmp_root(store)) as tmp:
        path = fanout.staged(part, store, Path(tmp))
        if part.kind == ParsePart.ARTIFACT:
            events = _parse_artifact(trace, part.artifact, path, store, beat)
            outcome, parquet = "", ""
        elif part.spec.get("format") == fanout.KINETO:
            events_range = kineto_ranges.EventRange.from_dict(part.spec["range"])
            events, outcome, parquet = _parse_range(trace, part, store, kineto_ranges.RangeOutcome, lambda out: (
                kineto_ranges.parse_range_to_parquet(path, events_range, out, part.artifact.name, Path(tmp), beat)))
        else:
            lines = LineRange.from_dict(part.spec["range"])
            events, outcome, parquet = _parse_range(trace, part, store, RangeOutcome, lambda out: (
                parse_range_to_parquet(path, lines, out, part.artifact.name, part.spec["year"], beat)))
    whole_files = 1 if part.kind == ParsePart.ARTIFACT else 0
    with transaction.atomic():
        if ParsePart.objects.filter(pk=part.pk).exclude(state=ParsePart.DONE).update(
                state=ParsePart.DONE, outcome=outcome, parquet=parquet):
            Trace.objects.filter(pk=trace.pk).update(
                bytes_done=F("bytes_done") + int(part.spec.get("share", 0)), events_done=F("events_done") + events,
                artifacts_done=F("artifacts_done") + whole_files, updated_at=timezone.now())


def _parse_range(trace: Trace, part: ParsePart, store: ContentStore, outcome_type,
                 parse_to: Callable[[Path], object]) -> tuple[int, str, str]:
    """One byte range (of a log or a Kineto trace) to its Parquet file with `parse_to(out)`:
    (rows, outcome JSON, stored Parquet file). A range that fails leaves an outcome naming
    the error: the merge parses the whole file instead, as one worker would."""
    out = fanout.parts_dir(store, trace.pk, part.plan) / f"{part.no}.parquet"
    try:
        result = parse_to(out)
    except SoftTimeLimitExceeded:
        raise
    except Exception as e:
        log.exception("parse_part: %s failed", _part_label(part))
        result = outcome_type(error=f"{type(e).__name__}: {e}"[:300])
    parquet = store.put_parquet(trace.pk, out) if out.exists() else ""  # S3: uploaded
    return result.events, result.to_json(), parquet


@shared_task(name="ingest.merge_parts", acks_late=True, reject_on_worker_lost=True, **db_outage.RETRY)
def merge_parts(trace_id: int, run_id: str, plan_id: str) -> None:
    """The chord's callback: each split log's ranges into its Parquet file and artifact row
    (or, when its ranges do not join up, the whole file parsed here), then parsed or failed,
    then the workflow's next step."""
    trace = Trace.objects.filter(pk=trace_id).first()
    merge = ParsePart.objects.filter(trace_id=trace_id, plan=plan_id, kind=ParsePart.MERGE).first()
    if trace is None or merge is None or not trace.runs_for(run_id, Trace.State.PARSING):
        log.info("merge_parts %s/%s: no longer wanted; skipped", trace_id, plan_id)
        return
    store = ContentStore()
    ranges = ParsePart.objects.filter(trace_id=trace_id, plan=plan_id, kind=ParsePart.RANGE) \
        .select_related("artifact").order_by("no")
    with failures(partial(_fail, trace), log, f"merge_parts {trace_id} failed", doing="merging the parsed parts",
                  advice="raise the limit", internal="internal error while merging the parsed parts") as outcome:
        for _, group in groupby(ranges, key=lambda p: p.artifact_id):
            _merge_artifact(trace, list(group), store)
    if outcome.failed:
        return
    store.discard_parquet(trace.pk, "parts")  # local and (S3) stored
    trace.refresh_from_db()
    trace.record_progress(bytes_done=trace.bytes_total, artifacts_done=trace.artifacts_total)
    if _parsed_or_failed(trace):
        _continue(trace, list(merge.then))


def _merge_artifact(trace: Trace, parts: list[ParsePart], store: ContentStore) -> None:
    artifact = parts[0].artifact
    merged = fanout.merge_ranges(artifact, parts, store)
    if merged.fallback:
        log.warning("trace %s: %s parsed whole by the merge: %s", trace.pk, artifact.name, merged.fallback)
        with tempfile.TemporaryDirectory(prefix=f"trace-{trace.pk}-merge-", dir=_tmp_root(store)) as tmp:
            _parse_artifact(trace, artifact, fanout.staged(parts[0], store, Path(tmp)), store, _heartbeat(trace))
        return
    artifact.format, artifact.event_count = merged.format, merged.events
    artifact.warnings, artifact.error, artifact.meta = list(merged.warnings), "", merged.meta
    artifact.start_ts, artifact.end_ts = time_extent(merged.parquet)
    artifact.parquet = store.put_parquet(trace.pk, merged.parquet)  # S3: uploaded, local copy removed
    artifact.parsed_at = timezone.now()
    artifact.save()
    Trace.objects.filter(pk=trace.pk).update(artifacts_done=F("artifacts_done") + 1, updated_at=timezone.now())


def _continue(trace: Trace, then: list) -> None:
    """Queue the rest of the chain `parse_trace` was sent in (the diagnosis). Should the
    broker be down, the trace stays `parsed` and the workflow's beat job queues it later."""
    if not then:
        return
    try:
        signature(then.pop()).apply_async(chain=then or None)
    except Exception as e:  # kombu OperationalError and friends
        log.warning("trace %s: parsed, but its next step could not be queued: %s", trace.pk, e)


def _reset(trace: Trace, store: ContentStore) -> None:
    trace.parse_parts.all().delete()  # their messages, still queued, find no row and do nothing
    trace.artifacts.exclude(parent=None).delete()
    trace.artifacts.update(format="", event_count=0, warnings=[], error="", parquet="", meta={},
                           start_ts=None, end_ts=None, parsed_at=None)
    store.reset_parquet_dir(trace.pk)
    for leftover in _tmp_root(store).glob(f"trace-{trace.pk}-*"):  # of an attempt that was killed
        shutil.rmtree(leftover, ignore_errors=True)
    trace.report = None
    trace.error = ""
    trace.save(update_fields=["report", "error"])
    trace.record_progress(bytes_done=0, events_done=0, artifacts_done=0, stage="parsing", diagnosis_done=0.0)


def _tmp_root(store: ContentStore) -> Path:
    d = store.scratch  # this worker's disk (a local store's own tmp folder)
    d.mkdir(parents=True, exist_ok=True)
    return d


def _expand_uploads(trace: Trace, store: ContentStore, tmp: Path, stack: ExitStack):
    """[(artifact, file to parse)]: plain uploads as they are, archives as their members.
    Clock offsets found on the way (tracedoc-clock.json) are kept on the trace."""
    leaves, offsets = [], {}
    for n, upload in enumerate(trace.artifacts.filter(parent=None)):
        # Give the stored blob its original name, so that expand() and the parsers see it.
        staged = tmp / f"upload-{n}" / _safe_name(upload.name)
        staged.parent.mkdir(parents=True)
        store.stage_blob(upload.sha256, staged)  # a link to the blob, or (S3) a download into tmp
        try:
            members = stack.enter_context(expand([staged], tmp / f"expanded-{n}"))
        except ParseError as e:
            upload.error = str(e).replace(str(staged), upload.name)
            upload.save(update_fields=["error"])
            continue
        offsets.update(members.clock_offsets)
        if len(members) == 1 and Path(members[0].path) == staged:
            leaves.append((upload, staged))
            continue
        upload.format = Artifact.CLOCK_OFFSETS if not members and members.clock_offsets else Artifact.ARCHIVE
        upload.warnings = list(members.warnings)
        if not members and not members.clock_offsets:
            upload.error = f"{upload.name}: the archive holds no file to parse"
        upload.save(update_fields=["format", "warnings", "error"])
        for m in members:
            path = Path(m.path)
            child = Artifact.objects.create(trace=trace, parent=upload, name=m.name[:500],
                                            size=path.stat().st_size, sha256=sha256_of(path))
            leaves.append((child, path))
    trace.clock_offsets = offsets
    trace.save(update_fields=["clock_offsets"])
    return leaves


def _safe_name(name: str) -> str:
    base = os.path.basename(name.replace("\\", "/")) or "upload"
    return "".join(c if c.isalnum() or c in "._-" else "_" for c in base)[:200]


class _ByteScale:
    """Bytes read of one file to the trace's bytes_done: the files parsed so far plus this
    one's part, in proportion of the upload (archive members are counted by their share
    of the archive's size)."""

    def __init__(self, upload_bytes: int, files_bytes: int, before: int, size: int):
        self.upload_bytes, self.files_bytes, self.before, self.size = upload_bytes, files_bytes, before, size

    def __call__(self, read: int) -> int:
        if not self.files_bytes:
            return 0
        return self.upload_bytes * (self.before + min(read, self.size)) // self.files_bytes


def _file_size(path: Path) -> int:
    try:
        return Path(path).stat().st_size
    except OSError:
        return 0


def _parse_artifact(trace: Trace, artifact: Artifact, path: Path, store: ContentStore, progress) -> int:
    """One whole file to its Parquet file and artifact row; the events it gave."""
    try:
        result = parse_one(artifact.name, path, store.parquet_dir(trace.pk), progress=progress)
    except SoftTimeLimitExceeded:
        raise
    except MemoryError:  # past the pool child's cap (tracedoc.celery): this file fails, the worker serves on
        log.exception("out of memory parsing %s of trace %s", artifact.name, trace.pk)
        artifact.error = (f"{artifact.name}: out of memory: parsing it needed more than the worker's "
                          "per-task memory limit (TRACEDOC_TASK_MEMORY_LIMIT_MB)")
        artifact.save(update_fields=["error"])
        return 0
    except Exception as e:  # a parser bug must not take the other artifacts down
        log.exception("parser crashed on %s of trace %s", artifact.name, trace.pk)
        artifact.error = f"{artifact.name}: the parser failed unexpectedly ({type(e).__name__}: {e}); please report this file"
        artifact.save(update_fields=["error"])
        return 0
    artifact.format = result.format
    artifact.event_count = result.events
    artifact.warnings = result.warnings
    artifact.error = result.error
    artifact.meta = json.loads(json.dumps(result.meta, default=str))
    if result.parquet and result.parquet.exists():
        artifact.start_ts, artifact.end_ts = time_extent(result.parquet)
        artifact.parquet = store.put_parquet(trace.pk, result.parquet)  # S3: uploaded, local copy removed
    artifact.parsed_at = timezone.now()
    artifact.save()
    return result.events


def time_extent(parquet: Path) -> tuple[int | None, int | None]:
    """First and last timestamp (ns) of an event file, ignoring rows without a time;
    streamed by row group so memory stays flat on big files."""
    lo = hi = None
    for batch in pq.ParquetFile(parquet).iter_batches(columns=["ts", "dur"]):
        ts = batch.column("ts")
        keep = pc.greater(ts, 0)
        if not pc.any(keep).as_py():
            continue
        start = pc.min(pc.filter(ts, keep)).as_py()
        end = pc.max(pc.add(pc.filter(ts, keep), pc.filter(batch.column("dur"), keep))).as_py()
        lo = start if lo is None else min(lo, start)
        hi = end if hi is None else max(hi, end)
    return lo, hi
