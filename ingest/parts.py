"""The parts of a trace parsed by several workers (ingest/fanout.py), one row each, and the
signal a finished parse sends (a team's parse slot is free again: tracedoc.workflow starts
the team's next waiting trace).

Rows live in PostgreSQL, not in a Celery result backend: the last part to finish sees no
part left undone and, by a compare-and-set on the plan's merge row, queues the merge
exactly once however many workers finish at the same moment.
"""
from __future__ import annotations

from django.db import models
from django.dispatch import Signal

# sent with team_id= when a trace leaves `parsing` (parsed or failed)
parse_finished = Signal()


class ParsePart(models.Model):
    ARTIFACT = "artifact"   # one whole file
    RANGE = "range"         # a byte range of one text log (ingest.engine.log_ranges)
    MERGE = "merge"         # the plan's merge: queued once every other part is done

    QUEUED, DONE, SENT = "queued", "done", "sent"

    trace = models.ForeignKey("ingest.Trace", on_delete=models.CASCADE, related_name="parse_parts")
    plan = models.CharField(max_length=32)   # one per fan-out of a run: parts of an older plan are skipped
    no = models.IntegerField()
    kind = models.CharField(max_length=10)
    artifact = models.ForeignKey("ingest.Artifact", null=True, blank=True, on_delete=models.CASCADE,
                                 related_name="parse_parts")
    spec = models.JSONField(default=dict)     # leaf name, byte range, year, share of the upload's bytes
    state = models.CharField(max_length=10, default=QUEUED)
    attempts = models.IntegerField(default=0)  # started this many times (a part that kills every worker fails the trace)
    outcome = models.TextField(blank=True)    # a range's RangeOutcome as JSON text (NaN allowed)
    parquet = models.CharField(max_length=500, blank=True)  # relative to the storage root
    then = models.JSONField(default=list, blank=True)       # merge row: the workflow's steps after the parse
    updated_at = models.DateTimeField(auto_now=True)

    class Meta:
        ordering = ["trace", "plan", "no"]
        constraints = [models.UniqueConstraint(fields=["trace", "plan", "no"], name="parse_part_unique")]

    def __str__(self) -> str:
        return f"trace {self.trace_id} plan {self.plan} part {self.no} ({self.kind})"
