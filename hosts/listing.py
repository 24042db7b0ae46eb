"""The host list: agent hosts (heartbeats) merged with the hosts a team's recent traces name
(agent label `host`, or the events themselves: log prefixes, NVML samples, OTLP resources,
listed in the report's `trace.hosts`), so a host without an agent still shows."""
from __future__ import annotations

from hosts.models import Host
from ingest.models import Trace

RECENT_TRACES = 2000  # how far back the list looks in traces


def hosts_of(traces) -> dict[tuple[int, str], dict]:
    """(team id, host name) -> trace count, and the newest trace's id, time, state and worst
    severity. `traces` come newest first."""
    hosts: dict[tuple[int, str], dict] = {}
    for trace in traces:
        names = set((trace.report or {}).get("trace", {}).get("hosts", []))
        if trace.labels.get("host"):
            names.add(str(trace.labels["host"]))
        worst = (trace.report or {}).get("summary", {}).get("worst")
        for name in names:
            entry = hosts.setdefault((trace.team_id, name), {"traces": 0, "last_trace": None})
            entry["traces"] += 1
            if entry["last_trace"] is None:
                entry.update(last_trace=trace.pk, last_trace_at=trace.created_at, last_state=trace.state,
                             last_worst=worst)
    return hosts


def host_list(user) -> list[dict]:
    traces = (Trace.objects.visible_to(user).order_by("-created_at")
              .only("pk", "team_id", "labels", "report", "state", "created_at")[:RECENT_TRACES])
    from_traces = hosts_of(traces)
    rows = []
    for host in Host.objects.visible_to(user).select_related("team", "last_trace"):
        seen = from_traces.pop((host.team_id, host.name), {})
        rows.append({**_entry(host.name, host.team.slug, seen), "id": host.pk, "agent": True,
                     "agent_version": host.agent_version, "gpus": host.gpus, "last_seen": host.last_seen,
                     "stale": host.stale, "heartbeat_interval": host.heartbeat_interval,
                     "pending_bundles": host.pending_bundles, "last_bundle_at": host.last_bundle_at,
                     "last_bundle_trace": host.last_trace_id})
    teams = {t.pk: t.slug for t in user.teams.all()} if rows or from_traces else {}
    for (team_id, name), seen in from_traces.items():
        rows.append({**_entry(name, teams.get(team_id, ""), seen), "id": None, "agent": False})
    return sorted(rows, key=lambda r: (r["host"], r["team"]))


def _entry(name: str, team: str, seen: dict) -> dict:
    return {"host": name, "team": team, "traces": seen.get("traces", 0), "last_trace": seen.get("last_trace"),
            "last_trace_at": seen.get("last_trace_at"), "last_state": seen.get("last_state"),
            "last_worst": seen.get("last_worst")}
