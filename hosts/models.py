"""Hosts that run the agent, the bundles they shipped, and the captures asked of them.

A Host row is made by the agent's first heartbeat (or its first bundle) and moved by every
one after; a host whose last heartbeat is older than a few of its own intervals is stale. A
BundleReceipt remembers which trace each bundle's idempotency key made, so a bundle sent
again (its answer was lost, the agent retried) returns that trace instead of a second one.
A CaptureRequest is a profiler window or a flight-recorder dump asked of one host: handed
to its agent in a heartbeat's answer, done once the trace it shipped arrives.
"""
from __future__ import annotations

from datetime import timedelta

from django.conf import settings
from django.db import models
from django.utils import timezone

from accounts.models import Team
from ingest.models import Trace

STALE_AFTER_INTERVALS = 3    # heartbeats missed before a host is shown stale
MIN_STALE_AFTER_S = 60       # ... but never sooner than this (a short interval, a slow network)
CAPTURE_TIMEOUT_S = 15 * 60  # a request handed to an agent with no result by then has failed


class HostQuerySet(models.QuerySet):
    def visible_to(self, user) -> "HostQuerySet":
        return self.filter(team__in=Team.objects.of(user))


class Host(models.Model):
    team = models.ForeignKey(Team, on_delete=models.CASCADE, related_name="hosts")
    name = models.CharField(max_length=200)
    agent_version = models.CharField(max_length=64, blank=True)
    gpus = models.JSONField(default=list, blank=True)  # [{"index", "name", "uuid", "memory_total"}]
    heartbeat_interval = models.FloatField(default=30.0)  # seconds, as the agent declares it
    first_seen = models.DateTimeField(auto_now_add=True)
    last_seen = models.DateTimeField(null=True, blank=True)  # the last heartbeat
    last_trace = models.ForeignKey(Trace, null=True, blank=True, on_delete=models.SET_NULL, related_name="+")
    last_bundle_at = models.DateTimeField(null=True, blank=True)
    pending_bundles = models.IntegerField(default=0)  # waiting in the agent's spool at its last heartbeat

    objects = HostQuerySet.as_manager()

    class Meta:
        ordering = ["name"]
        constraints = [models.UniqueConstraint(fields=["team", "name"], name="host_unique_per_team")]

    def __str__(self) -> str:
        return self.name

    @property
    def stale_after(self) -> timedelta:
        return timedelta(seconds=max(MIN_STALE_AFTER_S, STALE_AFTER_INTERVALS * self.heartbeat_interval))

    @property
    def stale(self) -> bool:
        return self.last_seen is None or timezone.now() - self.last_seen > self.stale_after

    def ask(self, kind: str, steps: int, user) -> "CaptureRequest":
        """A capture request for this host's agent, handed out with its next heartbeat."""
        return CaptureRequest.objects.create(team=self.team, host=self, kind=kind, steps=steps,
                                             created_by=user if user and user.is_authenticated else None)

    def saw_bundle(self, trace: Trace) -> None:
        """`trace` came from this host: keep it as the last bundle unless a newer one is known."""
        if self.last_trace_id is None or trace.pk > self.last_trace_id:
            self.last_trace, self.last_bundle_at = trace, trace.created_at
            self.save(update_fields=["last_trace", "last_bundle_at"])


class BundleReceipt(models.Model):
    """A bundle's idempotency key and the trace it made, per team."""
    team = models.ForeignKey(Team, on_delete=models.CASCADE, related_name="+")
    key = models.CharField(max_length=128)
    # null only inside the transaction that claims the key and creates the trace
    trace = models.ForeignKey(Trace, null=True, on_delete=models.CASCADE, related_name="+")
    received_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        constraints = [models.UniqueConstraint(fields=["team", "key"], name="bundle_key_unique_per_team")]


class CaptureRequest(models.Model):
    class Kind(models.TextChoices):
        PROFILER = "profiler", "profiler window"
        FLIGHT_RECORDER = "flight_recorder", "NCCL flight-recorder dump"

    class State(models.TextChoices):
        PENDING = "pending"  # waiting for the host's next heartbeat
        SENT = "sent"        # handed to the agent
        DONE = "done"        # its trace arrived
        FAILED = "failed"    # the agent said why, or no result came in time

    team = models.ForeignKey(Team, on_delete=models.CASCADE, related_name="+")
    host = models.ForeignKey(Host, on_delete=models.CASCADE, related_name="captures")
    kind = models.CharField(max_length=20, choices=Kind.choices)
    steps = models.PositiveIntegerField(default=20)  # profiler window, in the program's steps
    state = models.CharField(max_length=8, choices=State.choices, default=State.PENDING)
    error = models.TextField(blank=True)
    trace = models.ForeignKey(Trace, null=True, blank=True, on_delete=models.SET_NULL, related_name="+")
    created_by = models.ForeignKey(settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.SET_NULL,
                                   related_name="+")
    created_at = models.DateTimeField(auto_now_add=True)
    sent_at = models.DateTimeField(null=True, blank=True)
    finished_at = models.DateTimeField(null=True, blank=True)

    class Meta:
        ordering = ["-created_at", "-id"]

    def __str__(self) -> str:
        return f"{self.get_kind_display()} on {self.host}"

    def as_order(self) -> dict:
        """What the agent is told."""
        return {"id": self.pk, "kind": self.kind, "steps": self.steps}

    def finish(self, trace: Trace | None = None, error: str = "") -> None:
        self.state = self.State.FAILED if error else self.State.DONE
        self.trace, self.error, self.finished_at = trace, error[:2000], timezone.now()
        self.save(update_fields=["state", "trace", "error", "finished_at"])
