"""Teams: every trace, cluster and rule belongs to one; a user may be in several.

`Team.objects.of(user)` is the single tenancy choke point used by the HTML views and the
API alike, so a user never sees another team's objects. `ApiToken`: the API keys, hashed.
"""
from __future__ import annotations

import hashlib
import secrets

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
    key is shown once, when it is issued; `prefix` lets a person tell their keys apart."""
    KEY_CHARS = 40  # hex digits, as DRF's tokens had, so migrated keys keep working

    user = models.ForeignKey(settings.AUTH_USER_MODEL, on_delete=models.CASCADE, related_name="api_tokens")
    name = models.CharField(max_length=100, default="cli")
    prefix = models.CharField(max_length=8)
    key_hash = models.CharField(max_length=64, unique=True)
    created_at = models.DateTimeField(auto_now_add=True)
    expires_at = models.DateTimeField(null=True, blank=True)
    last_used_at = models.DateTimeField(null=True, blank=True)
    revoked_at = models.DateTimeField(null=True, blank=True)

    objects = ApiTokenQuerySet.as_manager()

    class Meta:
        ordering = ["user", "name", "-created_at"]

    def __str__(self) -> str:
        return f"{self.user} / {self.name} ({self.prefix}…)"

    @classmethod
    def issue(cls, user, name: str = "cli", expires_at=None) -> tuple["ApiToken", str]:
        """A new token and its key (the only time the key exists outside the client)."""
        key = secrets.token_hex(cls.KEY_CHARS // 2)
        token = cls.objects.create(user=user, name=name, prefix=key[:8], key_hash=hash_token_key(key),
                                   expires_at=expires_at)
        return token, key

    @classmethod
    def find(cls, key: str) -> "ApiToken | None":
        return cls.objects.usable().select_related("user").filter(key_hash=hash_token_key(key)).first()

    def revoke(self) -> None:
        self.revoked_at = timezone.now()
        self.save(update_fields=["revoked_at"])


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

    class Meta:
        ordering = ["-at", "-id"]
        indexes = [models.Index(fields=["object_type", "object_id"])]

    def __str__(self) -> str:
        return f"{self.at:%Y-%m-%d %H:%M} {self.actor_name or 'tracedoc'} {self.action} {self.object_type} {self.object_repr}"
