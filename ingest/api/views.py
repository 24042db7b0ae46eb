"""Traces API: upload (optionally waiting for the diagnosis), list, detail, report."""
from __future__ import annotations

import time

from django.conf import settings
from django.core.exceptions import ValidationError
from drf_spectacular.types import OpenApiTypes
from drf_spectacular.utils import OpenApiParameter, extend_schema
from rest_framework import mixins, parsers, serializers, status, viewsets
from rest_framework.decorators import action
from rest_framework.response import Response

from diagnosis.api.serializers import FindingSerializer
from ingest.api.serializers import (TraceDetailSerializer, TraceSerializer, TraceUploadSerializer,
                                    TraceWithReportSerializer)
from ingest.models import Trace
from ingest.uploads import create_trace, parse_labels, team_for_upload

WAIT_POLL_S = 0.5


class TraceViewSet(mixins.ListModelMixin, mixins.RetrieveModelMixin, mixins.CreateModelMixin,
                   viewsets.GenericViewSet):
    parser_classes = [parsers.MultiPartParser, parsers.FormParser]

    def get_queryset(self):
        qs = Trace.objects.visible_to(self.request.user).select_related("team", "created_by")
        if self.action == "list":
            qs = qs.defer("report")
            if state := self.request.query_params.get("state"):
                qs = qs.filter(state=state)
            for label in self.request.query_params.getlist("label"):
                key, _, value = label.partition("=")
                qs = qs.with_label(key.strip(), value.strip())
        return qs

    def get_serializer_class(self):
        return {"list": TraceSerializer, "create": TraceUploadSerializer}.get(self.action, TraceDetailSerializer)

    @extend_schema(
        request={"multipart/form-data": TraceUploadSerializer},
        responses={201: TraceWithReportSerializer, 413: OpenApiTypes.OBJECT},
        parameters=[OpenApiParameter("wait", int, description="seconds (at most 300) to wait for the "
                                     "diagnosis; the answer then includes the report")])
    def create(self, request, *args, **kwargs):
        request.data  # parse the body first: the upload handler flags an oversized upload
        if getattr(request, "upload_too_large", False):
            return Response({"detail": f"upload larger than {settings.TRACEDOC_MAX_UPLOAD_BYTES:,} bytes"},
                            status=status.HTTP_413_REQUEST_ENTITY_TOO_LARGE)
        upload = TraceUploadSerializer(data=request.data)
        upload.is_valid(raise_exception=True)
        data, wait = upload.validated_data, self._wait_seconds(request)
        try:
            team = team_for_upload(request.user, data.get("team"))
            trace = create_trace(team, request.user, data["files"], name=data.get("name", ""),
                                 labels=parse_labels(data.get("labels")))
        except ValidationError as e:
            raise serializers.ValidationError({"detail": e.messages}) from None
        trace = self._wait(trace, wait)
        return Response(TraceWithReportSerializer(trace, context={"request": request}).data,
                        status=status.HTTP_201_CREATED)

    @staticmethod
    def _wait_seconds(request) -> float:
        raw = request.query_params.get("wait") or "0"
        try:
            return max(0.0, min(float(raw), settings.TRACEDOC_MAX_WAIT_SECONDS))
        except ValueError:
            raise serializers.ValidationError({"wait": "seconds, a number"}) from None

    @staticmethod
    def _wait(trace: Trace, seconds: float) -> Trace:
        deadline = time.monotonic() + seconds
        while not trace.finished and time.monotonic() < deadline:
            time.sleep(WAIT_POLL_S)
            trace.refresh_from_db()
        return trace

    @extend_schema(responses={200: OpenApiTypes.OBJECT, 409: OpenApiTypes.OBJECT})
    @action(detail=True)
    def report(self, request, pk=None):
        """The diagnosis report (DESIGN.md "Interfaces"); 409 while the trace is not done."""
        trace = self.get_object()
        if trace.state != Trace.State.DONE:
            return Response({"detail": f"the trace is {trace.state}, the report exists once it is done",
                             "state": trace.state, "error": trace.error}, status=status.HTTP_409_CONFLICT)
        return Response(trace.report)

    @extend_schema(responses=FindingSerializer(many=True))
    @action(detail=True)
    def findings(self, request, pk=None):
        trace = self.get_object()
        qs = trace.findings.select_related("cluster")
        if severity := request.query_params.get("severity"):
            qs = qs.filter(severity=severity)
        return Response(FindingSerializer(qs, many=True, context={"request": request}).data)
