"""Clusters API: the issue stream (filters, sort, pagination, markers, per-day counts),
triage (status, assignee, snooze; every change logged), comments and the activity log; and
re-diagnosis of a stored trace."""
from __future__ import annotations

from drf_spectacular.types import OpenApiTypes
from drf_spectacular.utils import extend_schema
from rest_framework import mixins, serializers, status, viewsets
from rest_framework.decorators import action
from rest_framework.exceptions import NotFound
from rest_framework.generics import get_object_or_404
from rest_framework.response import Response
from rest_framework.views import APIView

from diagnosis import stream
from diagnosis.cluster_activity import activity_log
from diagnosis.api.serializers import (ActivitySerializer, BulkStatusSerializer, ClusterSerializer,
                                       CommentSerializer, MergeSerializer, StreamClusterSerializer,
                                       UnmergeSerializer)
from diagnosis.cluster_merge import MergeRefused, merge, unmerge
from diagnosis.forms import StreamFilterForm
from diagnosis.models import ClusterRecord
from diagnosis.rediagnose import BrokerUnavailable, RediagnoseRefused, rediagnose
from problems import problem
from ingest.models import Trace
from diagnosis.api.form_parameters import query_parameters

STREAM_PARAMETERS = query_parameters(StreamFilterForm, many=("label",), descriptions={
    "query": "the search bar's language, e.g. `is:unresolved severity:>=error root_cause:nccl.* host:gpu-a "
             "label:env=prod text` (diagnosis.stream_query); it holds together with the other parameters",
    "status": "open, acknowledged, resolved, ignored, regressed; repeatable",
    "label": "key=value, repeatable",
    "q": "free text in title, root cause, fingerprint, why grouped",
    "period": "days of per-day counts; 'new' = first seen since then",
})


class ClusterViewSet(mixins.ListModelMixin, mixins.RetrieveModelMixin, mixins.UpdateModelMixin,
                     viewsets.GenericViewSet):
    serializer_class = ClusterSerializer
    http_method_names = ["get", "patch", "post", "head", "options"]

    def get_queryset(self):
        return ClusterRecord.objects.visible_to(self.request.user).select_related("team", "assignee")

    def _all_of(self, ids: list[int], done: str) -> list[ClusterRecord]:
        """The clusters of `ids`; one that names no cluster of the user's teams is a 404."""
        clusters = list(self.get_queryset().filter(pk__in=ids))
        missing = set(ids) - {c.pk for c in clusters}
        if missing:
            raise NotFound(f"no cluster {', '.join(map(str, sorted(missing)))} in your teams; nothing was {done}")
        return clusters

    def _filters(self) -> dict:
        form = StreamFilterForm(self.request.query_params)
        if not form.is_valid():
            raise serializers.ValidationError(form.errors.get_json_data())
        return form.cleaned_data

    @extend_schema(parameters=STREAM_PARAMETERS, responses=StreamClusterSerializer(many=True))
    def list(self, request, *args, **kwargs):
        filters = self._filters()
        page = self.paginate_queryset(stream.filtered(self.get_queryset(), filters, user=request.user))
        rows = stream.rows(list(page), stream.Range.of(filters))
        return self.get_paginated_response(StreamClusterSerializer(rows, many=True,
                                                                   context=self.get_serializer_context()).data)

    @extend_schema(responses=ActivitySerializer(many=True))
    @action(detail=True, methods=["get"])
    def activity(self, request, pk=None):
        return Response(ActivitySerializer(activity_log(self.get_object()), many=True).data)

    @extend_schema(request=CommentSerializer, responses={201: ActivitySerializer})
    @action(detail=True, methods=["post"])
    def comments(self, request, pk=None):
        cluster = self.get_object()
        body = CommentSerializer(data=request.data)
        body.is_valid(raise_exception=True)
        entry = cluster.change(request.user, text=body.validated_data["text"])[0]
        return Response(ActivitySerializer(entry).data, status=status.HTTP_201_CREATED)

    @extend_schema(request=MergeSerializer, responses={200: ClusterSerializer, 400: OpenApiTypes.OBJECT,
                                                        404: OpenApiTypes.OBJECT})
    @action(detail=True, methods=["post"])
    def merge(self, request, pk=None):
        """Fold clusters `{"ids": [...]}` into this one: their findings, sightings and activity
        move here and their fingerprints land here from now on. An id that names no cluster of
        your teams is a 404 and nothing changes."""
        target = self.get_object()
        body = MergeSerializer(data=request.data)
        body.is_valid(raise_exception=True)
        sources = self._all_of(body.validated_data["ids"], "merged")
        try:
            target = merge(target, sources, request.user)
        except MergeRefused as e:
            raise serializers.ValidationError({"ids": [str(e)]}) from e
        return Response(ClusterSerializer(target, context=self.get_serializer_context()).data)

    @extend_schema(request=UnmergeSerializer, responses={201: ClusterSerializer, 400: OpenApiTypes.OBJECT})
    @action(detail=True, methods=["post"])
    def unmerge(self, request, pk=None):
        """Split a merged fingerprint back out: answers the new cluster, with the findings
        recorded under that fingerprint."""
        body = UnmergeSerializer(data=request.data)
        body.is_valid(raise_exception=True)
        try:
            split = unmerge(self.get_object(), body.validated_data["fingerprint"], request.user)
        except MergeRefused as e:
            raise serializers.ValidationError({"fingerprint": [str(e)]}) from e
        return Response(ClusterSerializer(split, context=self.get_serializer_context()).data,
                        status=status.HTTP_201_CREATED)

    @extend_schema(request=BulkStatusSerializer, responses={200: OpenApiTypes.OBJECT, 404: OpenApiTypes.OBJECT})
    @action(detail=False, methods=["post"])
    def bulk(self, request):
        """One status for several clusters: `{"ids": [...], "status": "acknowledged"}`. An id that
        names no cluster of your teams is a 404 and nothing changes."""
        body = BulkStatusSerializer(data=request.data)
        body.is_valid(raise_exception=True)
        clusters = self._all_of(body.validated_data["ids"], "changed")
        for cluster in clusters:
            cluster.change(request.user, status=body.validated_data["status"])
        return Response({"updated": sorted(c.pk for c in clusters), "status": body.validated_data["status"]})


class RediagnoseView(APIView):
    """`POST /api/v1/traces/{id}/rediagnose/`: the current rules on the stored events."""

    @extend_schema(request=None, responses={202: OpenApiTypes.OBJECT, 409: OpenApiTypes.OBJECT,
                                            503: OpenApiTypes.OBJECT})
    def post(self, request, pk: int):
        trace = get_object_or_404(Trace.objects.visible_to(request.user), pk=pk)
        try:
            run_id = rediagnose(trace)
        except BrokerUnavailable as e:
            return problem(status.HTTP_503_SERVICE_UNAVAILABLE, "broker-unavailable", "The queue is unavailable", str(e))
        except RediagnoseRefused as e:
            return problem(status.HTTP_409_CONFLICT, "rediagnose-refused", "The trace cannot be re-diagnosed now",
                           str(e))
        trace.refresh_from_db(fields=["state"])
        return Response({"id": trace.pk, "state": trace.state, "run_id": run_id}, status=status.HTTP_202_ACCEPTED)
