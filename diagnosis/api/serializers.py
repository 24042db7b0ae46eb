from django.contrib.auth import get_user_model
from rest_framework import serializers

from diagnosis.models import Cluster, Finding


class FindingSerializer(serializers.ModelSerializer):
    id = serializers.CharField(source="report_id", read_only=True)
    trace = serializers.PrimaryKeyRelatedField(read_only=True)
    cluster = serializers.CharField(source="report_cluster", read_only=True)
    team_cluster = serializers.PrimaryKeyRelatedField(source="cluster", read_only=True)

    class Meta:
        model = Finding
        fields = ["id", "trace", "rule_id", "rule_version", "title", "severity", "root_cause", "slo", "cluster",
                  "team_cluster", "start_ts", "end_ts", "explanation", "recommendations", "references",
                  "evidence", "metrics", "consequence_of"]


class AssigneeField(serializers.SlugRelatedField):
    """An assignee must be a member of the cluster's team."""

    def get_queryset(self):
        cluster = self.parent.instance
        users = get_user_model().objects.filter(is_active=True)
        return users.filter(teams=cluster.team) if isinstance(cluster, Cluster) else users.none()


class ClusterSerializer(serializers.ModelSerializer):
    team = serializers.SlugRelatedField(slug_field="slug", read_only=True)
    assignee = AssigneeField(slug_field="username", allow_null=True, required=False)

    class Meta:
        model = Cluster
        fields = ["id", "team", "fingerprint", "root_cause", "title", "severity", "status", "why_grouped",
                  "first_seen", "last_seen", "trace_count", "assignee"]
        read_only_fields = ["fingerprint", "root_cause", "title", "severity", "why_grouped", "first_seen",
                            "last_seen", "trace_count"]
