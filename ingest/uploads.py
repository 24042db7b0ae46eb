"""Turning an upload (web form, API, CLI) into a stored Trace that a worker will parse.

The web form and the API both call `create_trace`, so both behave the same way.
"""
from __future__ import annotations

import errno
import json
from typing import Iterable

from django.conf import settings
from django.core.exceptions import ImproperlyConfigured, ValidationError
from django.db import transaction
from django.db.models import Sum

from accounts.models import Team
from ingest.models import LABEL_KEY, Artifact, Trace
from ingest.signals import trace_received
from ingest.storage import ContentStore

MAX_LABELS = 50
# the request header naming an upload once (an agent retrying its bundle): hosts.receipts keeps it
IDEMPOTENCY_HEADER = "Idempotency-Key"


def parse_labels(raw) -> dict[str, str]:
    """Labels are a flat JSON object of short strings, e.g. {"env": "prod", "model": "llama"}.
    A `key=value,key=value` string is accepted too (handy from curl and the web form)."""
    if raw in (None, "", {}):
        return {}
    if isinstance(raw, str):
        text = raw.strip()
        if text.startswith("{"):
            try:
                raw = json.loads(text)
            except json.JSONDecodeError as e:
                raise ValidationError(f"labels: not valid JSON ({e.msg} at column {e.colno})") from None
        else:
            raw = dict(part.split("=", 1) if "=" in part else (part, "") for part in
                       (p.strip() for p in text.split(",")) if part)
    if not isinstance(raw, dict):
        raise ValidationError('labels: expected a JSON object such as {"env": "prod"}')
    if len(raw) > MAX_LABELS:
        raise ValidationError(f"labels: at most {MAX_LABELS} labels")
    labels = {}
    for key, value in raw.items():
        key = str(key).strip()
        if not LABEL_KEY.match(key) or "__" in key:
            raise ValidationError(f"labels: invalid key {key!r} (letters, digits, '_', '.', '-', '/'; "
                                  "at most 64 characters)")
        if not isinstance(value, (str, int, float, bool)) or len(str(value)) > 200:
            raise ValidationError(f"labels: value of {key!r} must be a short string")
        labels[key] = str(value)
    return labels


def team_for_upload(user, slug: str | None, labels: dict | None = None) -> Team:
    """The team a new trace belongs to: the named one, or the user's only team. A `team`
    label names it too: a team of the uploader's (else the upload is refused), and the same
    one when a team is also given."""
    teams = Team.objects.of(user)
    named = (labels or {}).get("team")
    if named:
        if slug and slug != named:
            raise ValidationError(f"team: the upload is for team {slug!r} but its label team={named!r} names "
                                  "another; choose that team or drop the label")
        if not teams.filter(slug=named).exists():
            raise ValidationError(f"labels: team={named!r} names a team you are not a member of, so the trace "
                                  "was not stored; ask that team to add you, or drop the label")
        slug = named
    if slug:
        team = teams.filter(slug=slug).first()
        if team is None:
            raise ValidationError(f"team: you are not a member of a team {slug!r}")
        return team
    mine = list(teams[:2])
    if not mine:
        raise ValidationError("team: your account belongs to no team; ask an admin to add you")
    if len(mine) > 1:
        raise ValidationError("team: you belong to several teams; say which one (team=<slug>)")
    return mine[0]


class QuotaExceeded(ValidationError):
    """The team's stored bytes plus this upload pass TRACEDOC_TEAM_STORAGE_QUOTA_BYTES."""

    def __init__(self, team: Team, quota: int, used: int, incoming: int):
        self.quota, self.used, self.incoming = quota, used, incoming
        super().__init__(f"team {team.slug}: storage quota of {quota:,} bytes reached ({used:,} stored, "
                         f"this upload {incoming:,}); delete old traces or ask an admin to raise "
                         "TRACEDOC_TEAM_STORAGE_QUOTA_BYTES")


def check_quota(team: Team, incoming: int) -> None:
    """Raise QuotaExceeded when `incoming` more bytes would pass the team's quota (0: none)."""
    quota = settings.TRACEDOC_TEAM_STORAGE_QUOTA_BYTES
    if not quota:
        return
    used = Trace.objects.filter(team=team).aggregate(total=Sum("bytes_total"))["total"] or 0
    if used + incoming > quota:
        raise QuotaExceeded(team, quota, used, incoming)


class StorageFull(Exception):
    """The store's disk (or the user's disk quota) filled up while the upload was written; what
    this upload had written is removed again."""

    def __init__(self, stored: int = 0):
        self.stored = stored
        when = f" (the disk filled after {stored:,} bytes of it)" if stored else ""
        super().__init__(f"not enough storage space for this upload{when}; "
                         "nothing was kept: try again later or ask an admin to free space")


FULL_DISK = (errno.ENOSPC, errno.EDQUOT)


def _store_all(store: ContentStore, files: list) -> list:
    """Every file into the store, or none: on a full disk the blobs this upload created (and no
    artifact uses) are removed and StorageFull is raised."""
    blobs = []
    try:
        for f in files:
            blobs.append((f.name, store.put_file(f)))
    except OSError as e:
        if e.errno not in FULL_DISK:
            raise
        mine = {b.sha256 for _, b in blobs if b.created}
        used = set(Artifact.objects.filter(sha256__in=mine).values_list("sha256", flat=True))
        for sha in mine - used:
            store.delete_blob(sha)
        raise StorageFull(sum(b.size for _, b in blobs)) from e
    return blobs


def create_trace(team: Team, user, files: Iterable, name: str = "", labels: dict | None = None,
                 store: ContentStore | None = None) -> Trace:
    """Store the uploaded files and queue the trace for parsing, within the team's quota."""
    files = list(files)
    if not files:
        raise ValidationError("files: upload at least one file")
    check_quota(team, sum(getattr(f, "size", None) or 0 for f in files))  # before a byte is stored
    store = store or ContentStore()
    blobs = _store_all(store, files)
    with transaction.atomic():
        # again with the team row locked: two uploads at once cannot both take the last room
        Team.objects.select_for_update().filter(pk=team.pk).first()
        check_quota(team, sum(b.size for _, b in blobs))
        trace = Trace.objects.create(
            team=team, created_by=user if user and user.is_authenticated else None,
            name=name or _default_name(blobs), labels=labels or {},
            bytes_total=sum(b.size for _, b in blobs), artifacts_total=len(blobs))
        Artifact.objects.bulk_create(
            Artifact(trace=trace, name=_unique(n, i, blobs), size=b.size, sha256=b.sha256)
            for i, (n, b) in enumerate(blobs))
        # the project's workflow queues the parse (tracedoc.workflow); no listener, no upload:
        # a trace stored with nothing to start it would wait for the beat job
        if not trace_received.has_listeners(Trace):
            raise ImproperlyConfigured("no receiver for ingest.signals.trace_received: is 'tracedoc' installed?")
        trace_received.send(sender=Trace, trace=trace)
    return trace


def _default_name(blobs) -> str:
    first = blobs[0][0]
    return first if len(blobs) == 1 else f"{first} and {len(blobs) - 1} more"


def _unique(name: str, index: int, blobs) -> str:
    """Two uploaded files may share a name (rank0/trace.json, rank1/trace.json arrive as
    trace.json twice): keep them apart."""
    same = [i for i, (n, _) in enumerate(blobs) if n == name]
    return name if len(same) == 1 else f"{name} ({same.index(index) + 1})"
