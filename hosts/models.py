"""Hosts that run the agent, the bundles they shipped, and the captures asked of them.

A Host row is made by the agent's first heartbeat (or its first bundle) and moved by every
one after; a host whose last heartbeat is older than a few of its own intervals is stale. A
BundleReceipt remembers which trace each bundle's idempotency key made, so a bundle sent
again (its answer was lost, the agent retried) returns that trace instead of a second one.
A CaptureRequest is a capture asked of one host (a profiler window, a flight-recorder dump, a
memory snapshot, an NVML burst): handed to its agent in a heartbeat's answer, done once the
trace it shipped arrives. A person asks for one on the host page; the closed loop
(hosts.closed_loop) orders one from a finding's capture plan when the team's CapturePolicy
allows it, and the capture's trace is diagnosed together with the finding's trace.
"""
from __future__ import annotations

from datetime import timedelta

from django.conf import settings
from django.db import models
from django.utils import timezone

from accounts.models import Team
from ingest.models import Trace
from rules.engine.capture_plans import CapturePlan

STALE_AFTER_INTERVALS = 3    # heartbeats missed before a host is shown stale
MIN_STALE_AFTER_S = 60       # ... but never sooner than this (a short interval, a slow network)
CAPTURE_TIMEOUT_S = 15 * 60  # a request handed to an agent with no result by then has failed
MANUAL_EXPIRY_S = 24 * 3600  # a request asked by a person and never picked up goes after this


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
                                             created_by=user if user and user.is_authenticated else None,
                                             expires_at=timezone.now() + timedelta(seconds=MANUAL_EXPIRY_S))

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


ORDER_BOUNDS = ("factor", "stall_s", "duration_s", "max_bytes", "wait_s")


# what the pages say of a capture request's state (CaptureRequest.state_word)
STATE_WORDS = {"pending": "queued", "sent": "taken", "done": "done", "failed": "failed", "expired": "expired"}


class CaptureRequest(models.Model):
    class Kind(models.TextChoices):
        PROFILER = "profiler", "profiler window"
        FLIGHT_RECORDER = "flight_recorder", "NCCL flight-recorder dump"
        MEMORY_SNAPSHOT = "memory_snapshot", "CUDA memory snapshot"
        NVML_BURST = "nvml_burst", "NVML at a high rate"
        EBPF = "ebpf", "eBPF window of the host's waits"

    class State(models.TextChoices):
        PENDING = "pending"  # waiting for the host's next heartbeat
        SENT = "sent"        # handed to the agent
        DONE = "done"        # its trace arrived
        FAILED = "failed"    # the agent said why, or no result came in time
        EXPIRED = "expired"  # nobody picked it up, or no occurrence came, before it expired

    class Origin(models.TextChoices):
        PERSON = "person"    # asked on the host page or through the API
        AUTO = "auto"        # ordered by the closed loop from a finding's capture plan

    OUTSTANDING = (State.PENDING, State.SENT)

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
    expires_at = models.DateTimeField(null=True, blank=True)
    # when the program-side hook takes it, and its bounds (rules.engine.capture_plans.CapturePlan)
    trigger = models.CharField(max_length=16, default="now")
    plan = models.JSONField(default=dict, blank=True)
    # the closed loop: which finding asked for it, and what the capture changed
    origin = models.CharField(max_length=8, choices=Origin.choices, default=Origin.PERSON)
    cluster = models.ForeignKey("diagnosis.ClusterRecord", null=True, blank=True, on_delete=models.SET_NULL,
                                related_name="capture_orders")
    rule_id = models.CharField(max_length=200, blank=True)
    source_trace = models.ForeignKey(Trace, null=True, blank=True, on_delete=models.SET_NULL, related_name="+")
    before = models.JSONField(default=dict, blank=True)  # the finding that asked (rule, title, explanation)
    after = models.JSONField(default=dict, blank=True)   # what the capture's diagnosis found (hosts.closed_loop)

    class Meta:
        ordering = ["-created_at", "-id"]
        indexes = [models.Index(fields=["cluster", "host", "state"], name="capture_cluster_host_state"),
                   models.Index(fields=["host", "origin", "created_at"], name="capture_host_origin_created")]

    def __str__(self) -> str:
        return f"{self.get_kind_display()} on {self.host}"

    def as_order(self) -> dict:
        """What the agent is told: the kind, when to take it, its bounds, and how long it may wait."""
        left = (self.expires_at - timezone.now()).total_seconds() if self.expires_at else MANUAL_EXPIRY_S
        return {"id": self.pk, "kind": self.kind, "steps": self.steps, "trigger": self.trigger,
                **{k: self.plan[k] for k in ORDER_BOUNDS if k in self.plan}, "expires_in": max(0, int(left))}

    @property
    def state_word(self) -> str:
        """The state as every page says it (the host's, the cluster's): queued, taken, done, failed,
        expired. The stored words are the agent protocol's (pending: not handed over yet)."""
        return STATE_WORDS.get(self.state, self.state)

    @property
    def state_class(self) -> str:
        """The state's badge style: an outstanding request is drawn as work in progress."""
        return "parsing" if self.state in self.OUTSTANDING else self.state

    @property
    def occasion(self) -> str:
        """When the program-side hook takes it, in words ("at the next CUDA out-of-memory")."""
        return CapturePlan.from_dict({**self.plan, "kind": self.kind, "trigger": self.trigger}).occasion()

    def finish(self, trace: Trace | None = None, error: str = "") -> None:
        self.state = self.State.FAILED if error else self.State.DONE
        self.trace, self.error, self.finished_at = trace, error[:2000], timezone.now()
        self.save(update_fields=["state", "trace", "error", "finished_at"])


class CapturePolicy(models.Model):
    """Whether, and how often, the closed loop may order captures for a team (hosts.closed_loop).

    Off until a team turns it on; then a finding with a capture plan orders one when its cluster
    or its rule is opted in, within the rate limits, never with a second order outstanding for
    the same cluster and host, and each order expires."""
    team = models.OneToOneField(Team, on_delete=models.CASCADE, related_name="capture_policy")
    enabled = models.BooleanField(default=False)
    rules = models.JSONField(default=list, blank=True, help_text="rule ids whose findings order captures")
    clusters = models.ManyToManyField("diagnosis.ClusterRecord", blank=True, related_name="+",
                                      help_text="clusters whose findings order captures")
    max_per_host_per_hour = models.PositiveIntegerField(default=2)
    max_per_cluster_per_day = models.PositiveIntegerField(default=4)
    order_ttl_s = models.PositiveIntegerField(default=24 * 3600, help_text="an order not taken by then expires")

    def __str__(self) -> str:
        return f"capture policy of {self.team}"

    @classmethod
    def of(cls, team: Team) -> "CapturePolicy":
        return cls.objects.get_or_create(team=team)[0]

    def opted_in(self, cluster_id: int | None, rule_id: str) -> bool:
        return self.enabled and (rule_id in self.rules
                                 or (cluster_id is not None and self.clusters.filter(pk=cluster_id).exists()))
