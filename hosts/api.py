"""Hosts API: the host list, the agent's heartbeat, and capture requests.

  GET  /api/v1/hosts/                 agent hosts and hosts named by recent traces
  POST /api/v1/hosts/heartbeat/       an agent says it is alive; the answer holds its capture orders
  GET  /api/v1/captures/[?host=&state=]
  POST /api/v1/captures/              ask a host's agent for a profiler window or a flight-recorder dump
  GET  /api/v1/captures/{id}/         its state, and the trace once it arrived
  GET  /api/v1/capture-policy/[?team=]   the team's closed-loop policy (hosts.closed_loop)
  PUT  /api/v1/capture-policy/        turn it on, opt rules and clusters in, set its limits
"""
from __future__ import annotations

from django.core.exceptions import ValidationError
from drf_spectacular.types import OpenApiTypes
from drf_spectacular.utils import extend_schema, inline_serializer
from rest_framework import mixins, serializers, status, viewsets
from rest_framework.decorators import action
from rest_framework.response import Response

from hosts import heartbeats
from hosts.listing import host_list
from hosts.models import CapturePolicy, CaptureRequest, Host
from hosts.serializers import (CaptureOrderSerializer, CapturePolicySerializer, CaptureRequestCreateSerializer,
                               CaptureRequestSerializer, HeartbeatSerializer)
from ingest.uploads import team_for_upload


def _team(user, slug: str | None):
    try:
        return team_for_upload(user, slug)
    except ValidationError as e:
        raise serializers.ValidationError({"team": e.messages}) from None


# one row of hosts.listing.host_list: agent hosts carry the agent's fields too
HOST_ROW = inline_serializer("HostRow", {
    "host": serializers.CharField(), "team": serializers.CharField(), "traces": serializers.IntegerField(),
    "last_trace": serializers.IntegerField(allow_null=True), "last_trace_at": serializers.DateTimeField(allow_null=True),
    "last_state": serializers.CharField(allow_null=True), "last_worst": serializers.CharField(allow_null=True),
    "id": serializers.IntegerField(allow_null=True), "agent": serializers.BooleanField(),
    "agent_version": serializers.CharField(required=False), "gpus": serializers.ListField(required=False),
    "last_seen": serializers.DateTimeField(required=False, allow_null=True),
    "stale": serializers.BooleanField(required=False), "heartbeat_interval": serializers.FloatField(required=False),
    "pending_bundles": serializers.IntegerField(required=False),
    "last_bundle_at": serializers.DateTimeField(required=False, allow_null=True),
    "last_bundle_trace": serializers.IntegerField(required=False, allow_null=True)}, many=True)


class HostViewSet(viewsets.ViewSet):
    token_scopes = {"heartbeat": "upload"}  # accounts.permissions: an agent's upload token beats
    @extend_schema(responses={200: HOST_ROW})
    def list(self, request):
        """Agent hosts (last heartbeat, stale or not, version, GPUs, last bundle) and the hosts
        your teams' recent traces name (trace count, the latest trace, its state and worst severity)."""
        return Response(host_list(request.user))

    @extend_schema(request=HeartbeatSerializer, responses={200: OpenApiTypes.OBJECT})
    @action(detail=False, methods=["post"])
    def heartbeat(self, request):
        """An agent is alive. The answer lists the capture requests it should run now."""
        body = HeartbeatSerializer(data=request.data)
        body.is_valid(raise_exception=True)
        data = body.validated_data
        beat = heartbeats.Heartbeat(
            host=data["host"], agent_version=data["agent_version"], interval=data["interval"],
            gpus=tuple(data["gpus"]), last_trace=data["last_trace"], pending_bundles=data["pending_bundles"],
            failed_captures=tuple((int(k), v) for k, v in data["failed_captures"].items()))
        host, orders = heartbeats.record(_team(request.user, data.get("team")), beat)
        return Response({"host": host.name, "team": host.team.slug,
                         "captures": CaptureOrderSerializer([o.as_order() for o in orders], many=True).data})


class CaptureRequestViewSet(mixins.ListModelMixin, mixins.RetrieveModelMixin, mixins.CreateModelMixin,
                            viewsets.GenericViewSet):
    serializer_class = CaptureRequestSerializer
    queryset = CaptureRequest.objects.none()  # the schema's type for {id}; get_queryset scopes by team

    def get_queryset(self):
        qs = CaptureRequest.objects.filter(team__in=self.request.user.teams.all()).select_related("host", "team")
        if host := self.request.query_params.get("host"):
            qs = qs.filter(host__name=host)
        if state := self.request.query_params.get("state"):
            qs = qs.filter(state=state)
        return qs

    @extend_schema(request=CaptureRequestCreateSerializer, responses={201: CaptureRequestSerializer})
    def create(self, request, *args, **kwargs):
        """Ask a host's agent for a capture; it picks the request up with its next heartbeat."""
        body = CaptureRequestCreateSerializer(data=request.data)
        body.is_valid(raise_exception=True)
        data = body.validated_data
        host = Host.objects.filter(team=_team(request.user, data.get("team")), name=data["host"]).first()
        if host is None:
            raise serializers.ValidationError({"host": f"no agent host {data['host']!r} in your team: it "
                                                       "appears with its agent's first heartbeat"})
        capture = host.ask(data["kind"], data["steps"], request.user)
        return Response(CaptureRequestSerializer(capture, context={"request": request}).data,
                        status=status.HTTP_201_CREATED)



def _policy_body(policy: CapturePolicy) -> dict:
    clusters = sorted(policy.clusters.values_list("pk", flat=True)) if policy.pk else []
    return {"team": policy.team.slug, "enabled": policy.enabled, "rules": list(policy.rules),
            "clusters": clusters,
            "max_per_host_per_hour": policy.max_per_host_per_hour,
            "max_per_cluster_per_day": policy.max_per_cluster_per_day, "order_ttl_s": policy.order_ttl_s}


class CapturePolicyViewSet(viewsets.ViewSet):
    """The closed loop's policy for one team: off until turned on; then a finding whose rule or
    cluster is opted in orders the capture its rule declares, within these limits."""

    @extend_schema(responses={200: CapturePolicySerializer})
    def show(self, request):  # one object, not a list: the schema says so
        team = _team(request.user, request.query_params.get("team"))
        # a GET writes nothing (and so logs nothing): a team without a policy reads the defaults
        policy = CapturePolicy.objects.filter(team=team).first() or CapturePolicy(team=team)
        return Response(_policy_body(policy))

    @extend_schema(request=CapturePolicySerializer, responses={200: CapturePolicySerializer})
    def update(self, request, pk=None):
        body = CapturePolicySerializer(data=request.data)
        body.is_valid(raise_exception=True)
        data = body.validated_data
        policy = CapturePolicy.of(_team(request.user, data.get("team")))
        for key in ("enabled", "rules", "max_per_host_per_hour", "max_per_cluster_per_day", "order_ttl_s"):
            if key in data:
                setattr(policy, key, data[key])
        policy.save()
        if "clusters" in data:
            from diagnosis.models import ClusterRecord  # the clusters of this team only
            policy.clusters.set(ClusterRecord.objects.filter(team=policy.team, pk__in=data["clusters"]))
        return Response(_policy_body(policy))
