"""The audit log: who changed a rule, an SLO, an API token, a cluster's triage state or the closed
loop's capture policy, when, and what (accounts.models.AuditEntry).

Model signals catch every change however it is made (pages, API, admin, management commands).
The actor is the user of the request being served: AuditRequestMiddleware keeps the request in
a context variable, and its `user` is read when the change is saved, so an API token
authenticated inside a DRF view counts too. Outside a request (the worker) the actor is empty,
or the one `acting_as` names. The models are named by label, not imported: accounts sits below
rules and diagnosis in the import layers.
"""
from __future__ import annotations

import json
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from contextvars import ContextVar

from django.apps import apps
from django.db import models
from django.db.models.signals import m2m_changed, post_delete, post_save, pre_save
from django.http import HttpRequest, HttpResponse

from accounts.models import AuditEntry

# model label -> the fields whose changes are logged (None: every field). A token's last use and
# a cluster's sightings change all the time and are not decisions anyone made.
AUDITED: dict[str, tuple[str, ...] | None] = {
    "rules.TeamRule": None,
    "diagnosis.SLODefinition": None,
    "accounts.ApiToken": ("name", "scope", "expires_at", "revoked_at"),
    "diagnosis.ClusterRecord": ("status", "assignee", "snooze_until", "snooze_count"),
    "alerts.AlertRule": None,
    # never the HMAC secret: the log is read by the whole team
    "alerts.Destination": ("name", "kind", "url", "emails", "enabled"),
    # who turned the closed loop on, for which rules and clusters, within which limits
    "hosts.CapturePolicy": None,
}
# Many-to-many fields whose changes are logged too (no save covers them): field -> [ids before,
# ids after], each a JSON list in a string, as the API's changes are strings.
AUDITED_M2M: dict[str, tuple[str, ...]] = {
    "hosts.CapturePolicy": ("clusters",),
}
# Clusters are created by diagnoses, not by people: only their triage changes are logged.
UPDATES_ONLY = {"diagnosis.ClusterRecord"}

_current_request: ContextVar[HttpRequest | None] = ContextVar("audit_request", default=None)
_current_actor: ContextVar[object | None] = ContextVar("audit_actor", default=None)


class AuditRequestMiddleware:
    def __init__(self, get_response: Callable[[HttpRequest], HttpResponse]):
        self.get_response = get_response

    def __call__(self, request: HttpRequest) -> HttpResponse:
        token = _current_request.set(request)
        try:
            return self.get_response(request)
        finally:
            _current_request.reset(token)


@contextmanager
def acting_as(user) -> Iterator[None]:
    """Changes made inside are logged as `user`'s (a management command, a test)."""
    token = _current_actor.set(user)
    try:
        yield
    finally:
        _current_actor.reset(token)


def _actor():
    actor = _current_actor.get()
    if actor is None and (request := _current_request.get()) is not None:
        actor = getattr(request, "user", None)
    return actor if actor is not None and actor.is_authenticated else None


def _fields(model: type[models.Model]) -> list[models.Field]:
    names = AUDITED[model._meta.label]
    # timestamps Django stamps itself say when, which the entry already does
    return [f for f in model._meta.concrete_fields
            if not f.primary_key and not getattr(f, "auto_now", False) and not getattr(f, "auto_now_add", False)
            and (names is None or f.name in names)]


def _snapshot(instance: models.Model) -> dict[str, str | None]:
    return {f.name: (None if getattr(instance, f.attname) is None else f.value_to_string(instance))
            for f in _fields(type(instance))}


def _record(instance: models.Model, action: str, changes: dict) -> None:
    actor = _actor()
    AuditEntry.objects.create(
        actor=actor, actor_name=actor.get_username() if actor else "", action=action,
        team_id=getattr(instance, "team_id", None), object_type=instance._meta.label,
        object_id=str(instance.pk), object_repr=str(instance)[:200], changes=changes)


def record_change(instance: models.Model, action: str, changes: dict, actor=None) -> None:
    """An entry for a change no single field save shows (a cluster merge): by `actor`, else the
    request's user."""
    if actor is not None:
        with acting_as(actor):
            _record(instance, action, changes)
    else:
        _record(instance, action, changes)


def _before_save(sender, instance: models.Model, raw: bool = False, **kwargs) -> None:
    if raw or instance.pk is None:
        return
    old = sender._default_manager.filter(pk=instance.pk).first()
    instance._audit_before = _snapshot(old) if old is not None else None


def _after_save(sender, instance: models.Model, created: bool, raw: bool = False, **kwargs) -> None:
    if raw:
        return
    before = None if created else getattr(instance, "_audit_before", None)
    instance._audit_before = None
    if before is None and sender._meta.label in UPDATES_ONLY:
        return
    after = _snapshot(instance)
    changes = {name: [(before or {}).get(name), value] for name, value in after.items()
               if before is None or before.get(name) != value}
    if changes:
        _record(instance, AuditEntry.Action.CREATED if before is None else AuditEntry.Action.UPDATED, changes)


def _after_delete(sender, instance: models.Model, **kwargs) -> None:
    _record(instance, AuditEntry.Action.DELETED, {name: [value, None] for name, value in _snapshot(instance).items()})


def _related_ids(instance: models.Model, field: str) -> str:
    return json.dumps(sorted(getattr(instance, field).values_list("pk", flat=True)))


def _m2m_watcher(field: str) -> Callable:
    """The m2m_changed receiver of one field: the ids before the add/remove/clear, the ids after,
    one entry when they differ. A change made from the other side (reverse) is not one of these
    fields' managers: none is declared for them."""
    def changed(sender, instance: models.Model, action: str, reverse: bool, **kwargs) -> None:
        if reverse or action not in ("pre_add", "pre_remove", "pre_clear", "post_add", "post_remove", "post_clear"):
            return
        pending = instance.__dict__.setdefault("_audit_m2m", {})
        if action.startswith("pre_"):
            pending[field] = _related_ids(instance, field)
            return
        before, after = pending.pop(field, None), _related_ids(instance, field)
        if before is not None and before != after:
            _record(instance, AuditEntry.Action.UPDATED, {field: [before, after]})
    return changed


_m2m_receivers: list[Callable] = []  # the signal holds weak references: keep the receivers alive


def connect() -> None:
    for label in AUDITED:
        model = apps.get_model(label)
        uid = f"audit-{label}"
        pre_save.connect(_before_save, sender=model, dispatch_uid=uid)
        post_save.connect(_after_save, sender=model, dispatch_uid=uid)
        post_delete.connect(_after_delete, sender=model, dispatch_uid=uid)
        for field in AUDITED_M2M.get(label, ()):
            receiver = _m2m_watcher(field)
            _m2m_receivers.append(receiver)
            m2m_changed.connect(receiver, sender=getattr(model, field).through, dispatch_uid=f"{uid}-{field}")
