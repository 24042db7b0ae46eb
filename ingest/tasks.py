"""`ingest.parse_trace`: every artifact of a trace to its Parquet event file.

Idempotent (acks late: a redelivered message must give the same result): a run first
throws away what an earlier run produced for the trace (archive members, Parquet files,
counters, temporary folders of a killed attempt), then parses every uploaded file again
from the content store. Uploaded archives are expanded here, in the worker, never in the
web process. tracedoc.workflow chains the diagnosis after it and re-queues a trace whose
task was lost.
"""
from __future__ import annotations

import json
import logging
import os
import shutil
import tempfile
import time
from contextlib import ExitStack
from pathlib import Path

import pyarrow.compute as pc
import pyarrow.parquet as pq
from celery import shared_task
from celery.exceptions import SoftTimeLimitExceeded
from django.utils import timezone

from ingest.artifact_results import parse_one
from ingest.bundle import expand
from ingest.events import ParseError
from ingest.models import Artifact, Trace
from ingest.storage import ContentStore, sha256_of

log = logging.getLogger(__name__)
PROGRESS_EVERY_S = 0.5
MAX_PARSE_ATTEMPTS = 3


@shared_task(name="ingest.parse_trace", acks_late=True, reject_on_worker_lost=True)
def parse_trace(trace_id: int, run_id: str = "") -> None:
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
        trace.transition(Trace.State.FAILED, error=(
            f"gave up after {MAX_PARSE_ATTEMPTS} attempts: the worker stopped (killed, out of memory or "
            "crashed) each time while parsing this trace"
            + (f"; its largest file is {biggest.name} ({biggest.size:,} bytes)" if biggest else "")))
        return
    store = ContentStore()
    _reset(trace, store)
    trace.transition(Trace.State.PARSING)
    try:
        with tempfile.TemporaryDirectory(prefix=f"trace-{trace.pk}-", dir=_tmp_root(store)) as tmp:
            with ExitStack() as stack:
                leaves = _expand_uploads(trace, store, Path(tmp), stack)
                trace.record_progress(artifacts_total=len(leaves))
                sizes = [_file_size(path) for _, path in leaves]
                for i, (artifact, path) in enumerate(leaves):
                    scale = _ByteScale(trace.bytes_total, sum(sizes), sum(sizes[:i]), sizes[i])
                    _parse_artifact(trace, artifact, path, store, scale)
                    trace.record_progress(artifacts_done=trace.artifacts_done + 1)
    except SoftTimeLimitExceeded:
        trace.transition(Trace.State.FAILED, error="parsing took longer than the worker's time limit "
                         "(TRACEDOC_TASK_SOFT_TIME_LIMIT); upload fewer or smaller files, or raise the limit")
        return
    except Exception as e:
        log.exception("parse_trace %s failed", trace.pk)
        trace.transition(Trace.State.FAILED, error=f"internal error while parsing ({type(e).__name__}: {e}); "
                         "the worker log has the details")
        return
    trace.record_progress(bytes_done=trace.bytes_total)
    leaves = trace.artifacts.exclude(format__in=Artifact.CONTAINERS)
    failed = [a for a in leaves if a.error]
    if not leaves or len(failed) == len(leaves):
        errors = "\n".join(a.error for a in trace.artifacts.exclude(error="")) or "the upload holds no file"
        trace.transition(Trace.State.FAILED, error=f"no artifact could be parsed:\n{errors}")
        return
    trace.transition(Trace.State.PARSED)


def _reset(trace: Trace, store: ContentStore) -> None:
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
    d = store.root / "tmp"
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
        os.symlink(upload.blob_path(store), staged)
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


def _parse_artifact(trace: Trace, artifact: Artifact, path: Path, store: ContentStore, scale: _ByteScale) -> None:
    events_before = trace.events_done
    last = [0.0]

    def progress(events: int, read: int) -> None:
        now = time.monotonic()
        if now - last[0] >= PROGRESS_EVERY_S:  # bytes read of the file as stored: the bar moves while it parses
            last[0] = now
            trace.record_progress(events_done=events_before + events, bytes_done=scale(read))

    try:
        result = parse_one(artifact.name, path, store.parquet_dir(trace.pk), progress=progress)
    except SoftTimeLimitExceeded:
        raise
    except Exception as e:  # a parser bug must not take the other artifacts down
        log.exception("parser crashed on %s of trace %s", artifact.name, trace.pk)
        artifact.error = f"{artifact.name}: the parser failed unexpectedly ({type(e).__name__}: {e}); please report this file"
        artifact.save(update_fields=["error"])
        return
    artifact.format = result.format
    artifact.event_count = result.events
    artifact.warnings = result.warnings
    artifact.error = result.error
    artifact.meta = json.loads(json.dumps(result.meta, default=str))
    if result.parquet and result.parquet.exists():
        artifact.parquet = str(result.parquet.relative_to(store.root))
        artifact.start_ts, artifact.end_ts = time_extent(result.parquet)
    artifact.parsed_at = timezone.now()
    artifact.save()
    trace.record_progress(events_done=events_before + result.events, bytes_done=scale(scale.size))


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
