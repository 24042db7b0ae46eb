"""Pending spans whose window has closed become a tracedoc trace through the normal upload
path: one OTLP JSON artifact per team, service and window, parsed and diagnosed as any upload."""
from __future__ import annotations

import json
import logging
from datetime import timedelta

from django.conf import settings
from django.core.files.base import ContentFile
from django.db import transaction
from django.utils import timezone

from ingest.models import Trace
from ingest.uploads import create_trace
from otlp_receiver.grouping import Group
from otlp_receiver.models import PendingSpans

log = logging.getLogger(__name__)


def store(team, user, groups: list[Group]) -> None:
    PendingSpans.objects.bulk_create(
        PendingSpans(team=team, received_by=user, service=g.service, window_start=g.window_start,
                     resource_spans=g.resource_spans, span_count=g.span_count) for g in groups)


def flush_closed_windows(now=None) -> list[Trace]:
    """Turn every closed window's pending spans into a trace. A window is closed once its end
    plus the grace for late exports (batching SDKs send spans seconds after they end) is past."""
    now = now or timezone.now()
    window = timedelta(seconds=settings.TRACEDOC_OTLP_WINDOW_SECONDS)
    grace = timedelta(seconds=settings.TRACEDOC_OTLP_GRACE_SECONDS)
    keys = (PendingSpans.objects.filter(window_start__lte=now - window - grace)
            .values_list("team_id", "service", "window_start").distinct())
    return [trace for key in set(keys) if (trace := _flush(*key)) is not None]


def _flush(team_id: int, service: str, window_start) -> Trace | None:
    with transaction.atomic():
        # locked and skipped: two flushes at once (beat and a request) never upload a window twice
        rows = list(PendingSpans.objects.select_for_update(skip_locked=True).select_related("team", "received_by")
                    .filter(team_id=team_id, service=service, window_start=window_start).order_by("pk"))
        if not rows:
            return None
        document = {"resourceSpans": [rs for row in rows for rs in row.resource_spans]}
        stamp = window_start.strftime("%Y%m%dT%H%M%SZ")
        artifact = ContentFile(json.dumps(document).encode(), name=f"otlp-{_safe(service)}-{stamp}.json")
        trace = create_trace(rows[0].team, rows[-1].received_by, [artifact], name=f"{service} {stamp} (OTLP)",
                             labels={"service": service[:200], "source": "otlp"})
        PendingSpans.objects.filter(pk__in=[r.pk for r in rows]).delete()
    log.info("otlp: %d span(s) of %s in the window from %s became trace %s",
             sum(r.span_count for r in rows), service, stamp, trace.pk)
    return trace


def _safe(service: str) -> str:
    return "".join(c if c.isalnum() or c in "._-" else "_" for c in service)[:80] or "service"
