"""Receiving an agent's bundle: each idempotency key makes one trace, and a bundle that
answers a capture request or names its host is linked to them.

`receive_once` runs the upload in one transaction that first claims the key (a row unique
per team and key): a second upload of the same key, even one racing the first, waits for
that transaction and then gets the trace it made. Without a key an upload is simply new.
"""
from __future__ import annotations

import re
from typing import Callable

from django.core.exceptions import ValidationError
from django.db import IntegrityError, transaction

from accounts.models import Team
from hosts.models import BundleReceipt, CaptureRequest, Host
from ingest.models import Trace
from ingest.uploads import IDEMPOTENCY_HEADER

_KEY = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_.:\-]{0,127}$")


def receive_once(team: Team, key: str, create: Callable[[], Trace]) -> tuple[Trace, bool]:
    """The trace for this upload, and whether it is new: `create()` runs only for a key not
    seen before in this team (or no key)."""
    if key and not _KEY.match(key):
        raise ValidationError(f"{IDEMPOTENCY_HEADER}: at most 128 letters, digits and '_.:-'")
    if not key:
        with transaction.atomic():  # linked before its tasks are queued (they go on commit)
            trace = create()
            link(trace)
        return trace, True
    try:
        with transaction.atomic():
            receipt = BundleReceipt.objects.create(team=team, key=key)  # waits on a racing upload's claim
            trace = create()
            receipt.trace = trace
            receipt.save(update_fields=["trace"])
            link(trace)
            return trace, True
    except IntegrityError:
        earlier = BundleReceipt.objects.select_related("trace").get(team=team, key=key)
        return earlier.trace, False


def link(trace: Trace) -> None:
    """A bundle from an agent moves its host's last bundle; one labelled with a capture
    request of the same team finishes that request."""
    labels = trace.labels or {}
    if labels.get("source") != "tracedoc-agent" or not labels.get("host"):
        return
    host, _ = Host.objects.get_or_create(team=trace.team, name=labels["host"][:200],
                                         defaults={"agent_version": labels.get("agent_version", "")[:64]})
    host.saw_bundle(trace)
    request_id = labels.get("capture_request", "")
    if request_id.isdigit():
        request = CaptureRequest.objects.filter(pk=int(request_id), team=trace.team, host=host).first()
        # a capture that comes back after its order expired (taken at the last moment) still counts
        if request and request.state in (*CaptureRequest.OUTSTANDING, CaptureRequest.State.EXPIRED):
            request.finish(trace)
        if request and request.origin == CaptureRequest.Origin.AUTO and request.source_trace_id:
            # diagnosed with the files of the trace whose finding asked for it (hosts.closed_loop)
            trace.adds_to_id = request.source_trace_id
            trace.save(update_fields=["adds_to"])
