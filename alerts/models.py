"""Team alert rules, where alerts go, and what was sent.

An `AlertRule` fires when a cluster is new, regressed, or seen in N traces within a window,
at or above a severity, optionally only for traces with a label. An `Alert` is one firing,
unique per (rule, cluster, transition key): a cluster's `new` fires once, each regression
once, a count once per window, never once per trace. Each alert has one `Delivery` per
destination with its log of attempts. A destination's alerts are sent grouped
(`Destination.group_wait_s`, `repeat_interval_s`: one notification per group, alerts.tasks).
"""
from __future__ import annotations

from django.conf import settings
from django.core.exceptions import ValidationError
from django.db import models
from django.utils import timezone

from accounts.models import Team
from alerts.redact import mask_url
from alerts.url_guard import UnsafeDestination, check_url
from diagnosis.models import ClusterRecord
from ingest.models import LABEL_KEY, Trace
from rules.engine.severity import SEVERITIES, at_least


class TeamScopedQuerySet(models.QuerySet):
    def visible_to(self, user):
        return self.filter(team__in=Team.objects.of(user))


class Destination(models.Model):
    """Where a team's alerts go. `secret`: the HMAC key of a webhook, the routing key of
    PagerDuty; never shown back by the API."""

    class Kind(models.TextChoices):
        WEBHOOK = "webhook"
        SLACK = "slack"
        ALERTMANAGER = "alertmanager"
        PAGERDUTY = "pagerduty"
        EMAIL = "email"

    NEEDS_SECRET = (Kind.WEBHOOK, Kind.PAGERDUTY)
    team = models.ForeignKey(Team, on_delete=models.CASCADE, related_name="alert_destinations")
    name = models.CharField(max_length=100)
    kind = models.CharField(max_length=20, choices=Kind.choices)
    url = models.URLField(max_length=500, blank=True, help_text="not for email; PagerDuty has a default")
    secret = models.CharField(max_length=200, blank=True)
    emails = models.TextField(blank=True, help_text="comma-separated addresses (email only)")
    enabled = models.BooleanField(default=True)
    # a notification policy, as Grafana's: the first alert to a quiet destination waits
    # `group_wait_s` for others to join it, then one notification carries them all; the next
    # goes no sooner than `repeat_interval_s` after the last, with everything gathered since
    group_wait_s = models.PositiveIntegerField(default=30, help_text="seconds an alert waits for others to join it")
    repeat_interval_s = models.PositiveIntegerField(default=300, help_text="seconds at least between two notifications")
    created_at = models.DateTimeField(auto_now_add=True)

    objects = TeamScopedQuerySet.as_manager()

    class Meta:
        ordering = ["team", "name"]
        constraints = [models.UniqueConstraint(fields=["team", "name"], name="destination_name_per_team")]

    def __str__(self) -> str:
        return f"{self.name} ({self.kind})"

    @property
    def masked_url(self) -> str:
        """The URL as it may be shown: scheme and host (alerts.redact)."""
        return mask_url(self.url)

    @property
    def recipients(self) -> list[str]:
        return [e.strip() for e in self.emails.split(",") if e.strip()]

    def clean(self) -> None:
        if self.kind == self.Kind.EMAIL:
            if not self.recipients:
                raise ValidationError({"emails": "an email destination needs at least one address"})
        elif not self.url and self.kind != self.Kind.PAGERDUTY:
            raise ValidationError({"url": f"a {self.kind} destination needs a URL"})
        elif self.url:
            try:
                check_url(self.url)  # checked again at every send (DNS may change)
            except UnsafeDestination as e:
                raise ValidationError({"url": str(e)}) from None
        if self.kind in self.NEEDS_SECRET and not self.secret:
            raise ValidationError({"secret": "a webhook needs a signing secret, PagerDuty a routing key"})


class AlertRule(models.Model):
    class Trigger(models.TextChoices):
        NEW = "new"
        REGRESSED = "regressed"
        COUNT = "count"  # seen in `threshold` traces or more within `window_minutes`
        # an agent's heartbeats stop (one alert per host going stale, a notice when it is back;
        # alerts.agent_health): severity and label filters do not apply
        AGENT_STALE = "agent_stale", "agent stale"

    team = models.ForeignKey(Team, on_delete=models.CASCADE, related_name="alert_rules")
    name = models.CharField(max_length=100)
    trigger = models.CharField(max_length=12, choices=Trigger.choices)
    min_severity = models.CharField(max_length=10, choices=[(s, s) for s in SEVERITIES], default="warning")
    threshold = models.PositiveIntegerField(default=0, help_text="traces (count trigger)")
    window_minutes = models.PositiveIntegerField(default=60, help_text="minutes (count trigger)")
    label_key = models.CharField(max_length=64, blank=True)
    label_value = models.CharField(max_length=200, blank=True)
    destinations = models.ManyToManyField(Destination, related_name="rules")
    enabled = models.BooleanField(default=True)
    created_by = models.ForeignKey(settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.SET_NULL,
                                   related_name="+")
    created_at = models.DateTimeField(auto_now_add=True)

    objects = TeamScopedQuerySet.as_manager()

    class Meta:
        ordering = ["team", "name"]

    def __str__(self) -> str:
        return self.name

    def clean(self) -> None:
        if self.trigger == self.Trigger.COUNT and (self.threshold < 1 or self.window_minutes < 1):
            raise ValidationError({"threshold": "a count rule needs a threshold and a window of at least 1"})
        if self.label_key and (not LABEL_KEY.match(self.label_key) or "__" in self.label_key):
            raise ValidationError({"label_key": f"invalid label key {self.label_key!r}"})

    def applies_to(self, cluster: ClusterRecord, trace: Trace) -> bool:
        """Severity and label filter; the trigger is checked by the caller (alerts.evaluate)."""
        if not at_least(cluster.severity, self.min_severity):
            return False
        return not self.label_key or str(trace.labels.get(self.label_key, "")) == self.label_value


class Alert(models.Model):
    """One firing: of a cluster's transition, or (no cluster) of an agent going stale or coming
    back (`key`: "stale-<outage>", "recovered-<outage>")."""
    rule = models.ForeignKey(AlertRule, on_delete=models.CASCADE, related_name="alerts")
    cluster = models.ForeignKey(ClusterRecord, null=True, blank=True, on_delete=models.CASCADE, related_name="alerts")
    trace = models.ForeignKey(Trace, null=True, on_delete=models.SET_NULL, related_name="+")
    key = models.CharField(max_length=80)  # the transition: "new", "regressed-2", "count-29123"
    trigger = models.CharField(max_length=20)
    payload = models.JSONField(default=dict)  # the AlertMessage every destination renders
    created_at = models.DateTimeField(default=timezone.now)

    class Meta:
        ordering = ["-created_at", "-id"]
        constraints = [models.UniqueConstraint(fields=["rule", "cluster", "key"], name="alert_once_per_transition"),
                       models.UniqueConstraint(fields=["rule", "key"], condition=models.Q(cluster__isnull=True),
                                               name="alert_once_per_agent_event")]


class AgentOutage(models.Model):
    """A time an agent host stopped sending heartbeats: open from when the check found it stale
    until a heartbeat came again. One open outage per host at most."""
    team = models.ForeignKey(Team, on_delete=models.CASCADE, related_name="+")
    host = models.ForeignKey("hosts.Host", on_delete=models.CASCADE, related_name="outages")
    last_heartbeat = models.DateTimeField()           # the last one before it went quiet
    stale_since = models.DateTimeField(default=timezone.now)  # when the check found it stale
    recovered_at = models.DateTimeField(null=True, blank=True)

    class Meta:
        ordering = ["-stale_since", "-id"]
        constraints = [models.UniqueConstraint(fields=["host"], condition=models.Q(recovered_at__isnull=True),
                                               name="one_open_outage_per_host")]

    def __str__(self) -> str:
        return f"{self.host} quiet since {self.last_heartbeat:%Y-%m-%d %H:%M}"


class Delivery(models.Model):
    class State(models.TextChoices):
        PENDING = "pending"
        SENT = "sent"
        FAILED = "failed"

    alert = models.ForeignKey(Alert, on_delete=models.CASCADE, related_name="deliveries")
    destination = models.ForeignKey(Destination, on_delete=models.CASCADE, related_name="deliveries")
    state = models.CharField(max_length=10, choices=State.choices, default=State.PENDING)
    attempts = models.IntegerField(default=0)
    log = models.JSONField(default=list)  # [{"at", "ok", "status", "error"}] per attempt
    sent_at = models.DateTimeField(null=True, blank=True)
    # when the broker took its task; null: not yet (the broker was down), the beat job sends it
    queued_at = models.DateTimeField(null=True, blank=True)

    class Meta:
        ordering = ["alert", "destination"]
        constraints = [models.UniqueConstraint(fields=["alert", "destination"], name="delivery_once_per_destination")]

    def record(self, ok: bool, status: int | None = None, error: str = "", final: bool = False) -> None:
        self.attempts += 1
        self.log = [*self.log, {"at": timezone.now().isoformat(), "ok": ok, "status": status, "error": error[:500]}]
        if ok:
            self.state, self.sent_at = self.State.SENT, timezone.now()
        elif final:
            self.state = self.State.FAILED
        self.save(update_fields=["attempts", "log", "state", "sent_at"])
