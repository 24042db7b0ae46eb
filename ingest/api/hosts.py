"""Hosts API: the machines a team's traces came from, with their latest trace and state.

A host is named by the agent (label `host`) or by the events themselves (log prefixes,
NVML samples, OTLP resources, listed in the report's `trace.hosts`)."""
from __future__ import annotations

from drf_spectacular.utils import extend_schema
from rest_framework import viewsets
from rest_framework.response import Response

from ingest.models import Trace

RECENT_TRACES = 2000  # how far back the host list looks


def hosts_of(traces) -> list[dict]:
    hosts: dict[str, dict] = {}
    for trace in traces:
        names = set((trace.report or {}).get("trace", {}).get("hosts", []))
        if trace.labels.get("host"):
            names.add(str(trace.labels["host"]))
        worst = (trace.report or {}).get("summary", {}).get("worst")
        for name in names:
            entry = hosts.setdefault(name, {"host": name, "traces": 0, "last_trace": None,
                                            "last_seen": None, "last_state": None, "last_worst": None})
            entry["traces"] += 1
            if entry["last_seen"] is None:  # traces arrive newest first
                entry.update(last_trace=trace.pk, last_seen=trace.created_at, last_state=trace.state,
                             last_worst=worst)
    return sorted(hosts.values(), key=lambda h: h["host"])


class HostViewSet(viewsets.ViewSet):
    @extend_schema(responses={200: dict})
    def list(self, request):
        """Hosts seen in your teams' recent traces: trace count, the latest trace, its state and
        the worst severity it found."""
        traces = Trace.objects.visible_to(request.user).order_by("-created_at")[:RECENT_TRACES]
        return Response(hosts_of(traces.only("pk", "labels", "report", "state", "created_at")))
