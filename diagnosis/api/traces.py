"""The traces API with the diagnosis: an upload's answer carries the report, and each trace
has its `report` and `findings`. Extends ingest's viewset (upload, list, detail), which knows
nothing of the diagnosis; tracedoc/api_traces.py serves the result."""
from __future__ import annotations

from drf_spectacular.utils import extend_schema
from rest_framework.decorators import action
from rest_framework.response import Response

from diagnosis.api.report_schema import ReportField, ReportSerializer
from diagnosis.api.serializers import FindingSerializer
from ingest.api.problems import trace_failed, trace_not_done
from problems import PROBLEM_CONTENT_TYPE, ProblemSerializer
from ingest.api.serializers import TraceDetailSerializer
from ingest.api.views import TraceViewSet, upload_schema
from ingest.models import Trace


class TraceWithReportSerializer(TraceDetailSerializer):
    """What `POST ...?wait=` answers: the trace and, once done, its report."""
    report = ReportField(read_only=True)

    class Meta(TraceDetailSerializer.Meta):
        fields = TraceDetailSerializer.Meta.fields + ["report"]


class DiagnosedTraceViewSet(TraceViewSet):
    answer_serializer_class = TraceWithReportSerializer

    @upload_schema(TraceWithReportSerializer)
    def create(self, request, *args, **kwargs):
        return super().create(request, *args, **kwargs)

    @extend_schema(responses={200: ReportSerializer, (409, PROBLEM_CONTENT_TYPE): ProblemSerializer,
                              (422, PROBLEM_CONTENT_TYPE): ProblemSerializer})
    @action(detail=True)
    def report(self, request, pk=None):
        """The diagnosis report (docs/api.md); a problem document while the trace is
        not done (409) or when it failed (422, naming each file and why)."""
        trace = self.get_object()
        if trace.state == Trace.State.FAILED:
            return trace_failed(trace, request)
        if trace.state != Trace.State.DONE:
            return trace_not_done(trace, request)
        return Response(trace.report)

    @extend_schema(responses=FindingSerializer(many=True))
    @action(detail=True, pagination_class=None)  # one trace's findings, whole (as the answer always was)
    def findings(self, request, pk=None):
        trace = self.get_object()
        qs = trace.findings.select_related("cluster")
        if severity := request.query_params.get("severity"):
            qs = qs.filter(severity=severity)
        return Response(FindingSerializer(qs, many=True, context={"request": request}).data)
