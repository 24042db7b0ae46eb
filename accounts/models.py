"""Teams: every trace, cluster and rule belongs to one; a user may be in several.

`Team.objects.of(user)` is the single tenancy choke point used by the HTML views and the
API alike, so a user never sees another team's objects. `ApiToken`: the API keys, hashed.
"""
from __future__ import annotations

import hashlib
import secrets
from datetime import timedelta

from django.conf import settings
from django.db import models
from django.utils import timezone


class TeamQuerySet(models.QuerySet):
    def of(self, user) -> "TeamQuerySet":
        if not user.is_authenticated:
            return self.none()
        return self.filter(members=user)


class Team(models.Model):
    name = models.CharField(max_length=100)
    slug = models.SlugField(max_length=60, unique=True)
    members = models.ManyToManyField(settings.AUTH_USER_MODEL, related_name="teams", blank=True)
    created_at = models.DateTimeField(auto_now_add=True)

    objects = TeamQuerySet.as_manager()

    class Meta:
        ordering = ["slug"]

    def __str__(self) -> str:
        return self.slug


MAX_TOKEN_DAYS = 3650


def expiry_after(days: int | None):
    """When a token issued now for `days` days stops working (None: never)."""
    return timezone.now() + timedelta(days=days) if days else None


def hash_token_key(key: str) -> str:
    """What the database keeps of a key: its SHA-256. Keys are 160 random bits, so a plain
    hash is enough (no salt or stretching: nothing to guess), and a lookup stays one index probe."""
    return hashlib.sha256(key.encode()).hexdigest()


class ApiTokenQuerySet(models.QuerySet):
    def usable(self) -> "ApiTokenQuerySet":
        now = timezone.now()
        return self.filter(revoked_at__isnull=True).filter(
            models.Q(expires_at__isnull=True) | models.Q(expires_at__gt=now))


class ApiToken(models.Model):
    """An API key of a user (`Authorization: Token <key>`). Only the key's hash is stored: the
    key is shown once, when it is issued; `prefix` lets a person tell their keys apart.

    `scope` bounds what the key may do (accounts.permissions.TokenScopePermission); each scope
    includes the ones before it: read (GET) < upload (traces, agent heartbeats, OTLP) < admin
    (rules, SLOs, alerts, cluster triage, tokens). A logged-in browser session is not bounded."""
    KEY_CHARS = 40  # hex digits, as DRF's tokens had, so migrated keys keep working

    class Scope(models.TextChoices):
        READ = "read", "read: look at traces, reports, clusters, rules"
        UPLOAD = "upload", "upload: read, and upload traces (CI, agents, OTLP exporters)"
        ADMIN = "admin", "admin: everything, including rules, SLOs, alerts, triage and tokens"

    user = models.ForeignKey(settings.AUTH_USER_MODEL, on_delete=models.CASCADE, related_name="api_tokens")
    name = models.CharField(max_length=100, default="cli")
    prefix = models.CharField(max_length=8)
    key_hash = models.CharField(max_length=64, unique=True)
    created_at = models.DateTimeField(auto_now_add=True)
    expires_at = models.DateTimeField(null=True, blank=True)
    last_used_at = models.DateTimeField(null=True, blank=True)
    revoked_at = models.DateTimeField(null=True, blank=True)
    # keys issued before scopes existed could do everything: the migration keeps them so
    scope = models.CharField(max_length=8, choices=Scope.choices, default=Scope.ADMIN)

    objects = ApiTokenQuerySet.as_manager()

    class Meta:
        ordering = ["user", "name", "-created_at"]

    def __str__(self) -> str:
        return f"{self.user} / {self.name} ({self.prefix}…)"

    @classmethod
    def issue(cls, user, name: str = "cli", expires_at=None, scope: str = Scope.ADMIN) -> tuple["ApiToken", str]:
        """A new token and its key (the only time the key exists outside the client)."""
        key = secrets.token_hex(cls.KEY_CHARS // 2)
        token = cls.objects.create(user=user, name=name, prefix=key[:8], key_hash=hash_token_key(key),
                                   expires_at=expires_at, scope=scope)
        return token, key

    def allows(self, needed: str) -> bool:
        """Whether this token's scope includes `needed` (scopes are ordered, each includes the last)."""
        return SCOPE_ORDER.index(self.scope) >= SCOPE_ORDER.index(needed)

    @property
    def state(self) -> str:
        if self.revoked_at is not None:
            return "revoked"
        if self.expires_at is not None and self.expires_at <= timezone.now():
            return "expired"
        return "active"

    @classmethod
    def find(cls, key: str) -> "ApiToken | None":
        return cls.objects.usable().select_related("user").filter(key_hash=hash_token_key(key)).first()

    def revoke(self) -> None:
        if self.revoked_at is None:  # revoking twice keeps the first time
            self.revoked_at = timezone.now()
            self.save(update_fields=["revoked_at"])


SCOPE_ORDER = [ApiToken.Scope.READ, ApiToken.Scope.UPLOAD, ApiToken.Scope.ADMIN]


class AuditEntryQuerySet(models.QuerySet):
    def visible_to(self, user) -> "AuditEntryQuerySet":
        """Changes to the objects of the user's teams, and to the user's own API tokens (a token
        belongs to a person, not a team)."""
        if not user.is_authenticated:
            return self.none()
        own_tokens = [str(pk) for pk in ApiToken.objects.filter(user=user).values_list("pk", flat=True)]
        return self.filter(models.Q(team__in=Team.objects.of(user))
                           | models.Q(object_type="accounts.ApiToken", object_id__in=own_tokens))


class AuditEntry(models.Model):
    """One change to a rule, an SLO, an API token or a cluster's triage state: who made it (no
    one for the service's own changes, such as a regression found by a diagnosis), when, and
    what changed (field -> [before, after]). Written by accounts.audit from model signals."""

    class Action(models.TextChoices):
        CREATED = "created"
        UPDATED = "updated"
        DELETED = "deleted"

    at = models.DateTimeField(auto_now_add=True, db_index=True)
    actor = models.ForeignKey(settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.SET_NULL,
                              related_name="audit_entries")
    actor_name = models.CharField(max_length=150, blank=True)  # kept when the user is deleted
    team = models.ForeignKey(Team, null=True, blank=True, on_delete=models.SET_NULL, related_name="audit_entries")
    action = models.CharField(max_length=8, choices=Action.choices)
    object_type = models.CharField(max_length=60)  # app_label.ModelName
    object_id = models.CharField(max_length=40)
    object_repr = models.CharField(max_length=200)
    changes = models.JSONField(default=dict)

    objects = AuditEntryQuerySet.as_manager()

    class Meta:
        ordering = ["-at", "-id"]
        indexes = [models.Index(fields=["object_type", "object_id"])]

    def __str__(self) -> str:
        return f"{self.at:%Y-%m-%d %H:%M} {self.actor_name or 'tracedoc'} {self.action} {self.object_type} {self.object_repr}"
