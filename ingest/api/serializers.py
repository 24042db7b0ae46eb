from django.urls import reverse
from drf_spectacular.types import OpenApiTypes
from drf_spectacular.utils import extend_schema_field
from rest_framework import serializers

from ingest.models import Artifact, Trace


class ArtifactSerializer(serializers.ModelSerializer):
    archive = serializers.SlugRelatedField(source="parent", slug_field="name", read_only=True, allow_null=True,
                                           help_text="the archive the file came out of; null for a file sent as it is")

    class Meta:
        model = Artifact
        fields = ["id", "name", "archive", "size", "sha256", "format", "event_count", "warnings", "error",
                  "start_ts", "end_ts"]


class ProgressSerializer(serializers.Serializer):
    percent = serializers.IntegerField(source="progress_percent")
    stage = serializers.CharField()  # parsing, then the diagnosis stages (ingest.engine.progress), done
    bytes_total = serializers.IntegerField()
    bytes_done = serializers.IntegerField()
    events_done = serializers.IntegerField()
    artifacts_total = serializers.IntegerField()
    artifacts_done = serializers.IntegerField()


class StateChangeSerializer(serializers.Serializer):
    state = serializers.ChoiceField(choices=Trace.State.choices)
    at = serializers.DateTimeField()
    error = serializers.CharField(required=False)


class TraceSerializer(serializers.ModelSerializer):
    team = serializers.SlugRelatedField(slug_field="slug", read_only=True)
    labels = serializers.DictField(child=serializers.CharField(), read_only=True)
    state_history = StateChangeSerializer(many=True, read_only=True)
    created_by = serializers.SlugRelatedField(slug_field="username", read_only=True)
    progress = ProgressSerializer(source="*", read_only=True)
    findings_by_severity = serializers.DictField(child=serializers.IntegerField(), read_only=True)
    report_url = serializers.SerializerMethodField()
    web_url = serializers.SerializerMethodField()

    class Meta:
        model = Trace
        fields = ["id", "name", "team", "labels", "state", "error", "state_history", "progress",
                  "findings_by_severity", "created_by", "created_at", "updated_at", "report_url", "web_url"]

    def get_report_url(self, trace) -> str:
        return self._absolute(reverse("api:trace-report", args=[trace.pk]))

    def get_web_url(self, trace) -> str:
        return self._absolute(reverse("ingest:trace-detail", args=[trace.pk]))

    def _absolute(self, path: str) -> str:
        request = self.context.get("request")
        return request.build_absolute_uri(path) if request else path


class TraceDetailSerializer(TraceSerializer):
    artifacts = ArtifactSerializer(many=True, read_only=True)

    class Meta(TraceSerializer.Meta):
        fields = TraceSerializer.Meta.fields + ["artifacts"]


@extend_schema_field(OpenApiTypes.BINARY)
class UploadedFileField(serializers.FileField):
    """A file of the multipart body: `format: binary` in the schema, so generated clients send bytes."""


class TraceUploadSerializer(serializers.Serializer):
    files = serializers.ListField(child=UploadedFileField(allow_empty_file=True), allow_empty=False, min_length=1,
                                  help_text="the trace's files (repeat the field); archives (tar, tar.gz, zip) are expanded")
    name = serializers.CharField(required=False, allow_blank=True, max_length=200)
    labels = serializers.CharField(required=False, allow_blank=True, allow_null=True,
                                   help_text='a JSON object, e.g. {"env": "prod"}, or key=value,key=value')
    team = serializers.SlugField(required=False, allow_blank=True,
                                 help_text="team slug; needed when you belong to several teams")
