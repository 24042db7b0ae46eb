from django.core.exceptions import ValidationError as DjangoValidationError
from rest_framework import serializers

from accounts.models import Team
from alerts.models import Alert, AlertRule, Delivery, Destination
from ingest.uploads import team_for_upload


class TeamField(serializers.SlugRelatedField):
    """A team of the requesting user, by slug; left out: the user's only team."""

    def __init__(self, **kwargs):
        super().__init__(slug_field="slug", required=False, **kwargs)

    def get_queryset(self):
        return Team.objects.of(self.context["request"].user)


class TeamScopedSerializer(serializers.ModelSerializer):
    team = TeamField()

    def to_internal_value(self, data):
        """The user's only team when none is named (before the unique-name check needs it)."""
        attrs = super().to_internal_value(data)
        if self.instance is None and "team" not in attrs:
            try:
                attrs["team"] = team_for_upload(self.context["request"].user, None)
            except DjangoValidationError as e:
                raise serializers.ValidationError({"team": e.messages}) from None
        return attrs

    def validate(self, attrs):
        """The model's own checks (Destination.clean, AlertRule.clean) on the merged values."""
        instance = self.Meta.model(**{k: v for k, v in {**self._current(), **attrs}.items()
                                      if k != "destinations"})
        try:
            instance.clean()
        except DjangoValidationError as e:
            raise serializers.ValidationError(e.message_dict) from None
        return attrs

    def _current(self) -> dict:
        if self.instance is None:
            return {}
        return {f.name: getattr(self.instance, f.name) for f in self.Meta.model._meta.concrete_fields}


class DestinationSerializer(TeamScopedSerializer):
    """The URL and the secret are credentials: written, never read back (`url_masked` says where
    alerts go); either may be replaced alone (PATCH), the rest kept."""
    url = serializers.CharField(write_only=True, required=False, allow_blank=True, max_length=500)
    url_masked = serializers.CharField(source="masked_url", read_only=True)
    secret = serializers.CharField(write_only=True, required=False, allow_blank=True, max_length=200)
    has_secret = serializers.SerializerMethodField()

    class Meta:
        model = Destination
        fields = ["id", "team", "name", "kind", "url", "url_masked", "secret", "has_secret", "emails", "group_wait_s",
                  "repeat_interval_s", "enabled", "created_at"]
        read_only_fields = ["created_at"]

    def get_has_secret(self, destination) -> bool:
        return bool(destination.secret)

    def validate_url(self, url: str) -> str:
        if url and not url.lower().startswith(("http://", "https://")):
            raise serializers.ValidationError("an http(s) URL")
        return url


class TeamDestinations(serializers.PrimaryKeyRelatedField):
    def get_queryset(self):
        return Destination.objects.visible_to(self.context["request"].user)


class AlertRuleSerializer(TeamScopedSerializer):
    destinations = TeamDestinations(many=True)

    class Meta:
        model = AlertRule
        fields = ["id", "team", "name", "trigger", "min_severity", "threshold", "window_minutes", "label_key",
                  "label_value", "destinations", "enabled", "created_at"]
        read_only_fields = ["created_at"]

    def validate(self, attrs):
        attrs = super().validate(attrs)
        team = attrs.get("team") or self.instance.team
        foreign = [d.name for d in attrs.get("destinations", ()) if d.team_id != team.pk]
        if foreign:
            raise serializers.ValidationError({"destinations": f"not destinations of team {team.slug}: {foreign}"})
        return attrs


class DeliverySerializer(serializers.ModelSerializer):
    destination = serializers.StringRelatedField()
    kind = serializers.CharField(source="destination.kind")

    class Meta:
        model = Delivery
        fields = ["id", "destination", "kind", "state", "attempts", "log", "sent_at"]


class AlertSerializer(serializers.ModelSerializer):
    rule = serializers.StringRelatedField()
    deliveries = DeliverySerializer(many=True)

    class Meta:
        model = Alert
        fields = ["id", "rule", "cluster", "trace", "key", "trigger", "payload", "created_at", "deliveries"]
