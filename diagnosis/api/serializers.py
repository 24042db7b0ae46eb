from django.contrib.auth import get_user_model
from rest_framework import serializers

from diagnosis.models import ClusterRecord, FindingRecord


class FindingSerializer(serializers.ModelSerializer):
    id = serializers.CharField(source="report_id", read_only=True)
    trace = serializers.PrimaryKeyRelatedField(read_only=True)
    cluster = serializers.CharField(source="report_cluster", read_only=True)
    team_cluster = serializers.PrimaryKeyRelatedField(source="cluster", read_only=True)

    class Meta:
        model = FindingRecord
        fields = ["id", "trace", "rule_id", "rule_version", "title", "severity", "root_cause", "slo", "cluster",
                  "team_cluster", "start_ts", "end_ts", "explanation", "recommendations", "references",
                  "evidence", "metrics", "consequence_of"]


class AssigneeField(serializers.SlugRelatedField):
    """An assignee must be a member of the cluster's team."""

    def get_queryset(self):
        cluster = self.parent.instance
        users = get_user_model().objects.filter(is_active=True)
        return users.filter(teams=cluster.team) if isinstance(cluster, ClusterRecord) else users.none()


class ClusterSerializer(serializers.ModelSerializer):
    team = serializers.SlugRelatedField(slug_field="slug", read_only=True)
    assignee = AssigneeField(slug_field="username", allow_null=True, required=False)

    class Meta:
        model = ClusterRecord
        fields = ["id", "team", "fingerprint", "root_cause", "title", "severity", "status", "why_grouped",
                  "first_seen", "last_seen", "trace_count", "assignee", "snooze_until", "snooze_count", "regressions"]
        read_only_fields = ["fingerprint", "root_cause", "title", "severity", "why_grouped", "first_seen",
                            "last_seen", "trace_count", "regressions"]

    def update(self, instance: ClusterRecord, validated_data: dict) -> ClusterRecord:
        """Every change is logged with who made it (ClusterRecord.change)."""
        instance.change(self.context["request"].user, **validated_data)
        return instance


class DayCountSerializer(serializers.Serializer):
    day = serializers.DateField()
    traces = serializers.IntegerField()


class StreamClusterSerializer(serializers.Serializer):
    """A row of the issue stream (diagnosis.stream.StreamRow): the cluster and its markers,
    traces per day over the selected range, affected hosts and label values."""
    cluster = ClusterSerializer()
    is_new = serializers.BooleanField()
    is_regressed = serializers.BooleanField()
    per_day = DayCountSerializer(many=True)
    hosts = serializers.ListField(child=serializers.CharField())
    labels = serializers.DictField(child=serializers.ListField(child=serializers.CharField()))

    def to_representation(self, row):
        data = super().to_representation(row)
        return {**data.pop("cluster"), **data}


class ActivitySerializer(serializers.Serializer):
    """A line of a cluster's activity log (diagnosis/cluster_activity.py): a change with who and
    when (status, assignee, snooze, comment), or, `kind` "rule", a rule version that matched the
    cluster, at the first trace it matched in (no `id`: read from the findings, not stored)."""
    id = serializers.IntegerField(read_only=True, allow_null=True, default=None)
    at = serializers.DateTimeField(read_only=True)
    actor = serializers.CharField(source="actor.username", read_only=True, allow_null=True, default=None)
    kind = serializers.CharField(read_only=True)
    old = serializers.CharField(read_only=True, default="")
    new = serializers.CharField(read_only=True, default="")
    text = serializers.CharField(read_only=True, default="")
    trace = serializers.IntegerField(source="trace_id", read_only=True, allow_null=True)
    rule_id = serializers.CharField(read_only=True, default="")
    rule_version = serializers.IntegerField(read_only=True, allow_null=True, default=None)


class CommentSerializer(serializers.Serializer):
    text = serializers.CharField(max_length=5000)


class BulkStatusSerializer(serializers.Serializer):
    ids = serializers.ListField(child=serializers.IntegerField(), min_length=1, max_length=500)
    status = serializers.ChoiceField(choices=ClusterRecord.Status.choices)


class MergeSerializer(serializers.Serializer):
    ids = serializers.ListField(child=serializers.IntegerField(), min_length=1, max_length=50,
                                help_text="clusters to fold into this one")


class UnmergeSerializer(serializers.Serializer):
    fingerprint = serializers.CharField(max_length=128, help_text="a fingerprint merged into this cluster")
