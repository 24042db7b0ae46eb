"""Traces and their artifacts.

A Trace is one incident: the files a person uploaded together. Its state machine is
`received -> parsing -> parsed -> diagnosing -> done`, or `failed` with a reason a person
can act on; every transition goes through `Trace.transition()`, which records it.
"""
from __future__ import annotations

import re
from typing import BinaryIO

from django.conf import settings
from django.db import models
from django.db.models import F
from django.utils import timezone

from accounts.models import Team
from ingest.db_outage import best_effort, retrying
from ingest.engine.progress import overall_done
from ingest.storage import ContentStore
from ingest.engine.stored_file import StoredFile

LABEL_KEY = re.compile(r"^[A-Za-z0-9](?:[A-Za-z0-9_.\-/]{0,62}[A-Za-z0-9])?$")


class TraceQuerySet(models.QuerySet):
    def visible_to(self, user) -> "TraceQuerySet":
        return self.filter(team__in=Team.objects.of(user))

    def with_label(self, key: str, value: str) -> "TraceQuerySet":
        if not LABEL_KEY.match(key) or "__" in key:
            return self.none()  # a key that could be read as a lookup path never matches
        return self.filter(**{f"labels__{key}": value})

    def listed(self) -> "TraceQuerySet":
        """For lists of traces: the report stays in the database and only its severity counts
        come along, one JSON path per row (not the whole report, fetched trace by trace)."""
        return self.defer("report").annotate(listed_severity_counts=F("report__summary__findings_by_severity"))


class Trace(models.Model):
    class State(models.TextChoices):
        RECEIVED = "received"
        PARSING = "parsing"
        PARSED = "parsed"
        DIAGNOSING = "diagnosing"
        DONE = "done"
        FAILED = "failed"

    # Self-loops on parsing/diagnosing: a redelivered task (acks late) starts over.
    # done/failed -> parsing/diagnosing: a person re-runs a trace (after a rule change).
    TRANSITIONS = {
        State.RECEIVED: {State.PARSING, State.FAILED},
        State.PARSING: {State.PARSING, State.PARSED, State.FAILED},
        State.PARSED: {State.DIAGNOSING, State.PARSING, State.FAILED},
        State.DIAGNOSING: {State.DIAGNOSING, State.DONE, State.FAILED},
        State.DONE: {State.PARSING, State.DIAGNOSING},
        State.FAILED: {State.PARSING, State.DIAGNOSING},
    }
    FINISHED = (State.DONE, State.FAILED)

    team = models.ForeignKey(Team, on_delete=models.CASCADE, related_name="traces")
    name = models.CharField(max_length=200, blank=True)
    labels = models.JSONField(default=dict, blank=True)
    state = models.CharField(max_length=12, choices=State.choices, default=State.RECEIVED, db_index=True)
    state_history = models.JSONField(default=list, blank=True)
    error = models.TextField(blank=True)
    bytes_total = models.BigIntegerField(default=0)
    bytes_done = models.BigIntegerField(default=0)
    events_done = models.BigIntegerField(default=0)
    artifacts_total = models.IntegerField(default=0)
    artifacts_done = models.IntegerField(default=0)
    # what the worker is doing now ("parsing", then the diagnosis stages) and the share of the
    # diagnosis done: with bytes_done, one progress number (ingest.engine.progress)
    stage = models.CharField(max_length=20, blank=True)
    diagnosis_done = models.FloatField(default=0.0)
    report = models.JSONField(null=True, blank=True)
    # artifact name -> ns added to its timestamps, from a tracedoc-clock.json in the upload
    clock_offsets = models.JSONField(default=dict, blank=True)
    # the workflow run that owns the trace (tracedoc.workflow): a task of an older run, such as
    # a message redelivered after the trace was queued again, leaves the trace alone. Empty
    # while no task could be queued (the broker was down).
    run_id = models.CharField(max_length=32, blank=True)
    # a capture that answers a closed-loop order (hosts.closed_loop) is diagnosed together with the
    # files of the trace whose finding asked for it: the evidence it adds to
    adds_to = models.ForeignKey("self", null=True, blank=True, on_delete=models.SET_NULL, related_name="+")
    created_by = models.ForeignKey(settings.AUTH_USER_MODEL, null=True, blank=True,
                                   on_delete=models.SET_NULL, related_name="traces")
    created_at = models.DateTimeField(auto_now_add=True, db_index=True)
    # the heartbeat: every transition and progress write moves it, so a trace in parsing or
    # diagnosing that has not moved for longer than a task may run has lost its task
    updated_at = models.DateTimeField(auto_now=True)

    objects = TraceQuerySet.as_manager()

    class Meta:
        ordering = ["-created_at", "-id"]

    def __str__(self) -> str:
        return self.name or f"trace {self.pk}"

    @property
    def finished(self) -> bool:
        return self.state in self.FINISHED

    @property
    def progress_percent(self) -> int:
        """Bytes of the upload read while parsing, then the diagnosis stages (ingest.engine.progress)."""
        if self.state == self.State.DONE:
            return 100
        if self.state in (self.State.PARSED, self.State.DIAGNOSING):
            done = overall_done(0, 0, self.diagnosis_done if self.state == self.State.DIAGNOSING else 0.0)
        else:
            done = overall_done(self.bytes_done, self.bytes_total)
        return min(99, int(100 * done))

    def save(self, *args, **kwargs):
        if self._state.adding and not self.state_history:
            self.state_history = [_history_entry(self.state)]
        super().save(*args, **kwargs)

    def transition(self, state: str, **fields) -> None:
        """Move to `state`, record when, and save `fields` with it (e.g. error=...)."""
        state = self.State(state)
        if state not in self.TRANSITIONS[self.State(self.state)]:
            raise ValueError(f"trace {self.pk}: no transition {self.state} -> {state}")
        self.state = state
        self.state_history = [*self.state_history, _history_entry(state, fields.get("error"))]
        for name, value in fields.items():
            setattr(self, name, value)
        retrying(lambda: self.save(update_fields=["state", "state_history", "updated_at", *fields]),
                 f"trace {self.pk} -> {state}")

    def record_progress(self, **counters: int) -> None:
        """Progress counters are written without touching the rest of the row."""
        retrying(lambda: self._write_progress(counters), f"trace {self.pk} progress")

    def beat(self, **counters: int) -> None:
        """`record_progress` from inside a parse or diagnosis: a lost database connection skips
        this beat (the next one writes the counters) instead of stopping the work."""
        best_effort(lambda: self._write_progress(counters), f"trace {self.pk} progress")

    def _write_progress(self, counters: dict) -> None:
        for name, value in counters.items():
            setattr(self, name, value)
        Trace.objects.filter(pk=self.pk).update(updated_at=timezone.now(), **counters)

    def runs_for(self, run_id: str, *states: str) -> bool:
        """Whether a task of workflow run `run_id` works on the trace now: the run still owns
        it and the trace is in one of `states` (a step already done is not done again). A task
        called without a run (a test, a shell) always does."""
        return not run_id or (self.run_id == run_id and self.state in states)

    def interrupted_attempts(self, state: str) -> int:
        """Attempts at `state` (parsing or diagnosing) that never finished: the entries of that
        state the history ends with. Tasks are acknowledged late, so a worker killed mid-task
        gets the trace again; a trace that kills every worker must fail instead of being
        redelivered forever (tracedoc.workflow)."""
        count = 0
        for entry in reversed(self.state_history):
            if entry.get("state") != state:
                break
            count += 1
        return count

    def findings_by_severity(self) -> dict[str, int]:
        if hasattr(self, "listed_severity_counts"):  # TraceQuerySet.listed
            return self.listed_severity_counts or {}
        if not self.report:
            return {}
        return self.report.get("summary", {}).get("findings_by_severity", {})


def _history_entry(state: str, error: str | None = None) -> dict:
    entry = {"state": str(state), "at": timezone.now().isoformat()}
    if error:
        entry["error"] = error
    return entry


class Artifact(models.Model):
    """One file of a trace. An uploaded archive is an artifact of format `archive`; its
    members become artifacts of their own (`parent` = the archive), created by the parse
    task. A `tracedoc-clock.json` upload holds clock offsets for the others (ingest/engine/align.py)."""
    ARCHIVE = "archive"
    CLOCK_OFFSETS = "clock-offsets"
    CONTAINERS = (ARCHIVE, CLOCK_OFFSETS)  # not parsed into events themselves

    trace = models.ForeignKey(Trace, on_delete=models.CASCADE, related_name="artifacts")
    parent = models.ForeignKey("self", null=True, blank=True, on_delete=models.CASCADE,
                               related_name="members")
    name = models.CharField(max_length=500)  # path inside the trace, as the person knows it
    size = models.BigIntegerField()
    sha256 = models.CharField(max_length=64, db_index=True)
    format = models.CharField(max_length=40, blank=True)
    event_count = models.BigIntegerField(default=0)
    warnings = models.JSONField(default=list, blank=True)
    error = models.TextField(blank=True)
    parquet = models.CharField(max_length=500, blank=True)  # relative to the storage root
    meta = models.JSONField(default=dict, blank=True)
    start_ts = models.BigIntegerField(null=True, blank=True)
    end_ts = models.BigIntegerField(null=True, blank=True)
    parsed_at = models.DateTimeField(null=True, blank=True)

    class Meta:
        ordering = ["id"]

    def __str__(self) -> str:
        return self.name

    @property
    def is_archive(self) -> bool:
        return self.format == self.ARCHIVE

    @property
    def duration_ns(self) -> int | None:
        return self.end_ts - self.start_ts if self.start_ts and self.end_ts else None

    def open_blob(self, store: ContentStore | None = None) -> BinaryIO:
        """The stored bytes as a seekable stream (from S3: fetched as they are read); a worker
        that needs a file stages it (ContentStore.stage_blob)."""
        return (store or ContentStore()).open_blob(self.sha256)

    def parquet_path(self, store: ContentStore | None = None) -> StoredFile | None:
        """The parsed events as stored (a local file or an S3 object), for ranged reads."""
        return (store or ContentStore()).parquet_file(self.parquet) if self.parquet else None


from ingest.parts import ParsePart  # noqa: E402,F401  registered with the app (fan-out parts, ingest/fanout.py)
