"""API shapes of tokens and audit entries, and the audit log's filters (shared with the page)."""
from __future__ import annotations

from rest_framework import serializers
from rest_framework import ISO_8601

from accounts.audit import AUDITED
from accounts.models import MAX_TOKEN_DAYS, ApiToken, AuditEntry, expiry_after


TOKEN_STATES = ["active", "expired", "revoked"]


class ApiTokenSerializer(serializers.ModelSerializer):
    state = serializers.ChoiceField(choices=TOKEN_STATES, read_only=True)

    class Meta:
        model = ApiToken
        fields = ["id", "name", "prefix", "scope", "state", "created_at", "expires_at", "last_used_at", "revoked_at"]
        read_only_fields = fields


class ApiTokenCreateSerializer(serializers.Serializer):
    name = serializers.CharField(max_length=100)
    scope = serializers.ChoiceField(choices=ApiToken.Scope.choices, default=ApiToken.Scope.UPLOAD)
    expires_days = serializers.IntegerField(min_value=1, max_value=MAX_TOKEN_DAYS, required=False, allow_null=True,
                                            help_text="the key stops working after this many days (none: never)")

    def issue(self, user) -> tuple[ApiToken, str]:
        data = self.validated_data
        return ApiToken.issue(user, name=data["name"], scope=data["scope"],
                              expires_at=expiry_after(data.get("expires_days")))


class IssuedApiTokenSerializer(ApiTokenSerializer):
    key = serializers.CharField(read_only=True, help_text="the key: shown this once, only its hash is stored")

    class Meta(ApiTokenSerializer.Meta):
        fields = [*ApiTokenSerializer.Meta.fields, "key"]
        read_only_fields = fields


class AuditEntrySerializer(serializers.ModelSerializer):
    team = serializers.SlugRelatedField(slug_field="slug", read_only=True, allow_null=True)
    actor = serializers.CharField(source="actor_name", read_only=True,
                                  help_text="the user's name; empty for the service's own changes")
    changes = serializers.DictField(child=serializers.ListField(child=serializers.CharField(allow_null=True)),
                                    read_only=True, help_text="field -> [before, after]")

    class Meta:
        model = AuditEntry
        fields = ["id", "at", "actor", "team", "action", "object_type", "object_id", "object_repr", "changes"]
        read_only_fields = fields


class AuditQuerySerializer(serializers.Serializer):
    """Filters of the audit log (query parameters of the API and of the page). A blank one
    (the page's form sends every field) filters nothing."""
    object_type = serializers.ChoiceField(choices=sorted(AUDITED), required=False, allow_blank=True)
    action = serializers.ChoiceField(choices=AuditEntry.Action.choices, required=False, allow_blank=True)
    actor = serializers.CharField(max_length=150, required=False, allow_blank=True)
    team = serializers.SlugField(max_length=60, required=False, allow_blank=True)
    object_id = serializers.CharField(max_length=40, required=False, allow_blank=True)
    # a date alone (the page's date inputs) is its midnight, in the server's time zone
    since = serializers.DateTimeField(required=False, input_formats=[ISO_8601, "%Y-%m-%d"],
                                      help_text="entries at or after this time")
    until = serializers.DateTimeField(required=False, input_formats=[ISO_8601, "%Y-%m-%d"],
                                      help_text="entries before this time")

    def apply(self, qs):
        f = self.validated_data
        lookups = {"object_type": "object_type", "action": "action", "actor": "actor_name", "team": "team__slug",
                   "object_id": "object_id", "since": "at__gte", "until": "at__lt"}
        return qs.filter(**{lookup: f[name] for name, lookup in lookups.items() if f.get(name) not in (None, "")})
