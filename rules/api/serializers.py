from rest_framework import serializers

from rules.models import TeamRule, check_rule


class RuleErrorSerializer(serializers.Serializer):
    line = serializers.IntegerField(allow_null=True)
    col = serializers.IntegerField(allow_null=True)
    message = serializers.CharField()


class RuleSerializer(serializers.ModelSerializer):
    team = serializers.SlugRelatedField(slug_field="slug", read_only=True)
    created_by = serializers.SlugRelatedField(slug_field="username", read_only=True)
    updated_by = serializers.SlugRelatedField(slug_field="username", read_only=True)
    versions = serializers.SerializerMethodField()

    class Meta:
        model = TeamRule
        fields = ["id", "team", "rule_id", "version", "title", "severity", "owner", "yaml", "enabled",
                  "created_by", "updated_by", "created_at", "updated_at", "versions"]
        read_only_fields = ["rule_id", "version", "title", "severity", "owner"]
        extra_kwargs = {"yaml": {"trim_whitespace": False}}

    def validate_yaml(self, text: str) -> str:
        _, errors = check_rule(text)
        if errors:
            raise serializers.ValidationError(
                [f"line {e['line']}, col {e['col']}: {e['message']}" if e["line"] else e["message"] for e in errors])
        return text

    def get_versions(self, rule) -> list[int]:
        return [v.version for v in rule.versions.all()]


class RuleCreateSerializer(RuleSerializer):
    team = serializers.SlugField(required=False, write_only=True,
                                 help_text="team slug; needed when you belong to several teams")


class RuleTextSerializer(serializers.Serializer):
    yaml = serializers.CharField(trim_whitespace=False)


class RuleValidationSerializer(serializers.Serializer):
    valid = serializers.BooleanField()
    errors = RuleErrorSerializer(many=True)
    rule_id = serializers.CharField(allow_null=True)
    version = serializers.IntegerField(allow_null=True)
