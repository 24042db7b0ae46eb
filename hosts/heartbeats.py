"""One heartbeat from an agent: who it is, what it has, and which capture requests it
should run now (answered in the same round trip, so the agent needs no other poll)."""
from __future__ import annotations

from dataclasses import dataclass
from datetime import timedelta

from django.db import transaction
from django.utils import timezone

from accounts.models import Team
from hosts.models import CAPTURE_TIMEOUT_S, CaptureRequest, Host
from ingest.models import Trace

MAX_GPUS = 64


@dataclass(frozen=True)
class Heartbeat:
    host: str
    agent_version: str = ""
    interval: float = 30.0
    gpus: tuple[dict, ...] = ()
    last_trace: int | None = None      # the trace the agent's last shipped bundle became
    pending_bundles: int = 0           # bundles waiting in its spool (an outage shows here)
    failed_captures: tuple[tuple[int, str], ...] = ()  # (request id, why) the agent gave up on


def record(team: Team, beat: Heartbeat) -> tuple[Host, list[CaptureRequest]]:
    """Update (or make) the host's row; hand it the capture requests waiting for it."""
    now = timezone.now()
    with transaction.atomic():
        host, _ = Host.objects.select_for_update().get_or_create(team=team, name=beat.host)
        host.agent_version, host.gpus = beat.agent_version, [_gpu(g) for g in beat.gpus[:MAX_GPUS]]
        host.heartbeat_interval, host.pending_bundles, host.last_seen = beat.interval, beat.pending_bundles, now
        host.save(update_fields=["agent_version", "gpus", "heartbeat_interval", "pending_bundles", "last_seen"])
        if beat.last_trace and (trace := Trace.objects.filter(pk=beat.last_trace, team=team).first()):
            host.saw_bundle(trace)
        for request_id, why in beat.failed_captures:
            request = host.captures.filter(pk=request_id, state=CaptureRequest.State.SENT).first()
            # (an order past its expiry was already marked expired: the agent's word changes nothing)
            if request:
                request.finish(error=f"the agent: {why}")
        expire_captures(host, now)
        orders = list(host.captures.select_for_update().filter(state=CaptureRequest.State.PENDING).order_by("id"))
        host.captures.filter(pk__in=[o.pk for o in orders]).update(state=CaptureRequest.State.SENT, sent_at=now)
    return host, orders


def expire_captures(host: Host, now) -> None:
    """Requests past their expiry (never picked up, or no occurrence came), and requests to take
    at once that were handed out long ago with no trace: the agent restarted, or no process
    honoured them."""
    host.captures.filter(state__in=CaptureRequest.OUTSTANDING, expires_at__lt=now).update(
        state=CaptureRequest.State.EXPIRED, finished_at=now,
        error="expired before a capture came back (no agent picked it up, or the occurrence it waits for "
              "did not happen)")
    late = host.captures.filter(state=CaptureRequest.State.SENT, trigger="now",
                                sent_at__lt=now - timedelta(seconds=CAPTURE_TIMEOUT_S))
    late.update(state=CaptureRequest.State.FAILED, finished_at=now,
                error=f"no result within {CAPTURE_TIMEOUT_S // 60} minutes of being sent to the agent")


def _gpu(raw: dict) -> dict:
    """Keep the fields the page shows, as short strings and numbers."""
    out = {}
    for key in ("index", "memory_total"):
        if isinstance(raw.get(key), int):
            out[key] = raw[key]
    for key in ("name", "uuid", "driver"):
        if raw.get(key) is not None:
            out[key] = str(raw[key])[:100]
    return out
