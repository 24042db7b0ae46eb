"""Spans received over OTLP/HTTP that wait for their time window to close before they become
a trace (one per team, service.name and window)."""
from __future__ import annotations

from django.conf import settings
from django.db import models

from accounts.models import Team


class PendingSpans(models.Model):
    """The spans of one export request that share a service and a window: the request's
    ResourceSpans (OTLP JSON) cut down to them."""
    team = models.ForeignKey(Team, on_delete=models.CASCADE, related_name="+")
    received_by = models.ForeignKey(settings.AUTH_USER_MODEL, null=True, on_delete=models.SET_NULL,
                                    related_name="+")
    service = models.CharField(max_length=200)
    window_start = models.DateTimeField()
    resource_spans = models.JSONField()
    span_count = models.PositiveIntegerField()
    received_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        indexes = [models.Index(fields=["window_start", "team", "service"])]
