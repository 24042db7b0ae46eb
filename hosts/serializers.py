from django.urls import reverse
from rest_framework import serializers

from hosts.heartbeats import MAX_GPUS
from hosts.models import CaptureRequest

MAX_PROFILER_STEPS = 1000


class HeartbeatSerializer(serializers.Serializer):
    host = serializers.CharField(max_length=200)
    team = serializers.SlugField(required=False, allow_blank=True,
                                 help_text="team slug; needed when the token's user belongs to several teams")
    agent_version = serializers.CharField(max_length=64, required=False, allow_blank=True, default="")
    interval = serializers.FloatField(min_value=1, max_value=86400, required=False, default=30.0,
                                      help_text="seconds until the agent's next heartbeat")
    gpus = serializers.ListField(child=serializers.DictField(), max_length=MAX_GPUS, required=False, default=list)
    last_trace = serializers.IntegerField(required=False, allow_null=True, default=None, min_value=1,
                                          max_value=2**63 - 1,  # a trace id (bigint)
                                          help_text="the trace the agent's last shipped bundle became")
    pending_bundles = serializers.IntegerField(min_value=0, max_value=2**31 - 1,  # its column's range
                                               required=False, default=0)
    failed_captures = serializers.DictField(child=serializers.CharField(max_length=2000), required=False,
                                            default=dict, help_text="capture request id -> why it failed")

    def validate_failed_captures(self, value):
        if not all(k.isdigit() for k in value):
            raise serializers.ValidationError("keys are capture request ids")
        return value


class CaptureOrderSerializer(serializers.Serializer):
    id = serializers.IntegerField()
    kind = serializers.CharField()
    steps = serializers.IntegerField()
    trigger = serializers.CharField(help_text="now, slow_step, stalled_step or oom (rules/engine/capture_plans.py)")
    factor = serializers.FloatField(required=False)
    stall_s = serializers.FloatField(required=False)
    duration_s = serializers.FloatField(required=False)
    max_bytes = serializers.IntegerField(required=False)
    wait_s = serializers.FloatField(required=False)
    expires_in = serializers.IntegerField(help_text="seconds the agent may keep the order before giving up")


class CaptureRequestSerializer(serializers.ModelSerializer):
    host = serializers.SlugRelatedField(slug_field="name", read_only=True)
    team = serializers.SlugRelatedField(slug_field="slug", read_only=True)
    trace_url = serializers.SerializerMethodField()

    class Meta:
        model = CaptureRequest
        fields = ["id", "host", "team", "kind", "steps", "trigger", "plan", "state", "error", "trace", "trace_url",
                  "origin", "cluster", "rule_id", "source_trace", "before", "after", "created_at", "sent_at",
                  "finished_at", "expires_at"]
        read_only_fields = fields

    def get_trace_url(self, capture) -> str | None:
        if capture.trace_id is None:
            return None
        path = reverse("ingest:trace-detail", args=[capture.trace_id])
        request = self.context.get("request")
        return request.build_absolute_uri(path) if request else path


class CaptureRequestCreateSerializer(serializers.Serializer):
    host = serializers.CharField(max_length=200, help_text="the host's name, as its agent reports it")
    team = serializers.SlugField(required=False, allow_blank=True)
    kind = serializers.ChoiceField(choices=CaptureRequest.Kind.choices)
    steps = serializers.IntegerField(min_value=1, max_value=MAX_PROFILER_STEPS, required=False, default=20)


class CapturePolicySerializer(serializers.Serializer):
    """A team's closed-loop policy (hosts.models.CapturePolicy)."""
    team = serializers.SlugField(required=False, allow_blank=True)
    enabled = serializers.BooleanField(required=False)
    rules = serializers.ListField(child=serializers.CharField(max_length=200), max_length=500, required=False)
    clusters = serializers.ListField(child=serializers.IntegerField(min_value=1), max_length=500, required=False)
    max_per_host_per_hour = serializers.IntegerField(min_value=0, max_value=1000, required=False)
    max_per_cluster_per_day = serializers.IntegerField(min_value=0, max_value=1000, required=False)
    order_ttl_s = serializers.IntegerField(min_value=60, max_value=7 * 24 * 3600, required=False)
