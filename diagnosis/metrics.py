"""Prometheus metrics computed from the database at scrape time: SLIs of the stored reports per
team and host, violation and cluster counts, and the service's own health.

A `TracedocCollector` is built per scrape for the teams the caller may see and registered on a
fresh `CollectorRegistry`: nothing is kept between requests, so two scrapes never share state
and a value always reflects the rows as they are now. Label values come from people's uploads
(team slugs, host labels), so every label set is capped: at most MAX_TEAMS teams and
MAX_HOSTS_PER_TEAM hosts per team per scrape, the most recently active first.
"""
from __future__ import annotations

from collections import Counter, defaultdict
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from datetime import datetime, timedelta

import numpy as np
import redis
from celery import current_app
from django.conf import settings
from django.db.models import Count, Max
from django.utils import timezone
from prometheus_client.core import GaugeHistogramMetricFamily, GaugeMetricFamily
from prometheus_client.registry import Collector
from prometheus_client.utils import floatToGoString

from accounts.models import Team
from diagnosis.models import ClusterRecord
from ingest.models import Trace

MAX_TEAMS = 50
MAX_HOSTS_PER_TEAM = 50
# the done traces a scrape reads reports of: the newest ones inside the window, at most this many
MAX_REPORTS = 1000
DEFAULT_WINDOW = timedelta(days=7)
# step latency buckets (ms) of the heatmap: decode steps are ms, profiler steps up to seconds
STEP_BUCKETS_MS = (1, 2, 5, 10, 20, 50, 100, 200, 500, 1000, 2000, 5000)
QUANTILES = (("0.5", 50), ("0.99", 99))
NO_HOST = "unknown"
MANY_HOSTS = "multiple"  # a trace whose events name several hosts: its SLIs are not one host's
TTFT_SLI = "time_to_first_token"


@dataclass(frozen=True)
class TraceRow:
    """What a scrape reads of one done trace: where it ran and the small parts of its report."""
    id: int
    team: str
    host: str
    violations: list[dict]


def trace_host(labels: dict, report_hosts: list | None) -> str:
    """One host per trace: the agent's `host` label, else the one host its events name."""
    if labels.get("host"):
        return str(labels["host"])[:200]
    hosts = [h for h in report_hosts or () if h]
    return hosts[0][:200] if len(hosts) == 1 else MANY_HOSTS if hosts else NO_HOST


def steady_steps_ms(series: dict | None) -> list[float]:
    """Per-step latencies after the cold start (the report's series flags cold steps)."""
    return [float(s["ms"]) for s in (series or {}).get("step_latency_ms", []) if not s.get("cold")]


def gpu_busy_pct(temporal: list[dict] | None) -> float | None:
    """The share of the traced span the GPUs were not idle, weighted by each device's span."""
    rows = [r for r in temporal or () if r.get("span_ns")]
    span = sum(r["span_ns"] for r in rows)
    if not span:
        return None
    return round(100.0 * (1 - sum(r.get("idle_ns", 0) for r in rows) / span), 2)


def ttft_ms(slis: dict | None, violations: list[dict]) -> float | None:
    """The TTFT a report carries: its `slis`, or in a report stored before those, the observed
    value of a violated time_to_first_token SLO."""
    if isinstance(slis, dict) and "ttft_ms" in slis:
        return None if slis["ttft_ms"] is None else float(slis["ttft_ms"])
    observed = [v["observed"] for v in violations if v.get("sli") == TTFT_SLI and v.get("observed") is not None]
    return float(observed[0]) if observed else None


def parse_seconds(history: list[dict]) -> float | None:
    """Seconds of the last parse: its last `parsing` entry to the `parsed` one after it."""
    start, seconds = None, None
    for entry in history:
        if entry.get("state") == "parsing":
            start = entry.get("at")
        elif entry.get("state") == "parsed" and start:
            seconds = (datetime.fromisoformat(entry["at"]) - datetime.fromisoformat(start)).total_seconds()
            start = None
    return seconds


def failed_stage(history: list[dict]) -> str:
    """The stage a failed trace failed in: the state its history names before `failed`."""
    before = [e.get("state") for e in history[:-1]]
    return before[-1] if before else "received"


class TracedocCollector(Collector):
    """All of tracedoc's metrics for `teams`, read from the database when collected."""

    def __init__(self, teams: Iterable[Team], *, window: timedelta = DEFAULT_WINDOW,
                 broker_url: str = "", queue: str = "", queues: Iterable[str] = ()):
        self.window, self.broker_url, self.queue = window, broker_url, queue
        # the default queue and the role queues (parse, diagnose, notify: settings.TRACEDOC_QUEUES)
        self.queues = list(dict.fromkeys(q for q in (queue, *queues) if q))
        self.team_ids = list(Team.objects.filter(pk__in=[t.pk for t in teams])
                             .annotate(active=Max("traces__created_at"))
                             .order_by("-active", "slug").values_list("pk", flat=True)[:MAX_TEAMS])

    def collect(self) -> Iterator:
        since = timezone.now() - self.window
        rows = self._done_traces(since)
        yield from self._slis(rows)
        yield self._violations(rows)
        yield self._clusters()
        yield self._traces_by_state()
        yield from self._parsing(since)
        depths = self._queue_depths()
        if depths is not None:
            yield GaugeMetricFamily("tracedoc_queue_depth", "Tasks waiting in the broker queues",
                                    value=sum(depths.values()))
            by_queue = GaugeMetricFamily("tracedoc_queue_depth_by_queue", "Tasks waiting in each broker queue "
                                         "(scale a role's workers on its queue)", labels=["queue"])
            for queue, depth in depths.items():
                by_queue.add_metric([queue], depth)
            yield by_queue

    # --- SLIs of the stored reports -------------------------------------------------------

    def _done_traces(self, since: datetime) -> list[TraceRow]:
        """The newest done traces in the window, with host caps applied per team. Only small
        parts of each report are read (hosts, violations), never the whole JSON."""
        query = (Trace.objects.filter(team_id__in=self.team_ids, state=Trace.State.DONE, created_at__gte=since)
                 .order_by("-created_at", "-id")
                 .values_list("id", "team__slug", "labels", "report__trace__hosts", "report__violations")
                 [:MAX_REPORTS])
        rows, hosts_of = [], defaultdict(set)
        for pk, team, labels, hosts, violations in query:
            host = trace_host(labels or {}, hosts)
            if host not in hosts_of[team] and len(hosts_of[team]) >= MAX_HOSTS_PER_TEAM:
                continue  # newest first: the most recently active hosts are kept
            hosts_of[team].add(host)
            rows.append(TraceRow(pk, team, host, [v for v in violations or () if isinstance(v, dict)]))
        return rows

    def _slis(self, rows: list[TraceRow]) -> Iterator:
        """Gauges of the newest done trace of each team and host (its report is one run)."""
        latest: dict[tuple[str, str], TraceRow] = {}
        for row in rows:
            latest.setdefault((row.team, row.host), row)
        reports = {pk: (series, temporal, slis) for pk, series, temporal, slis in Trace.objects.filter(
            pk__in=[r.id for r in latest.values()]).values_list(
            "id", "report__trace__series", "report__breakdowns__temporal", "report__slis")}
        labels = ["team", "host"]
        quantiles = GaugeMetricFamily("tracedoc_step_latency_ms",
                                      "Steady-state step latency of the newest trace, by quantile",
                                      labels=[*labels, "quantile"])
        buckets = GaugeHistogramMetricFamily("tracedoc_step_latency_distribution_ms",
                                             "Steady-state step latencies of the newest trace (ms buckets)",
                                             labels=labels)
        ttft = GaugeMetricFamily("tracedoc_ttft_ms", "Time to first token the newest trace's report carries",
                                 labels=labels)
        busy = GaugeMetricFamily("tracedoc_gpu_busy_percent", "GPU busy share of the newest trace's span",
                                 labels=labels)
        info = GaugeMetricFamily("tracedoc_latest_trace_id", "Id of the newest done trace", labels=labels)
        for (team, host), row in sorted(latest.items()):
            series, temporal, slis = reports.get(row.id, (None, None, None))
            values = [team, host]
            info.add_metric(values, row.id)
            steps = steady_steps_ms(series)
            if steps:
                for name, q in QUANTILES:
                    quantiles.add_metric([*values, name], round(float(np.percentile(steps, q)), 3))
                counts = np.searchsorted(np.sort(steps), STEP_BUCKETS_MS, side="right")
                buckets.add_metric(values, [*((floatToGoString(b), int(c)) for b, c in zip(STEP_BUCKETS_MS, counts)),
                                            ("+Inf", len(steps))], gsum_value=round(sum(steps), 3))
            if (first := ttft_ms(slis, row.violations)) is not None:
                ttft.add_metric(values, first)
            if (share := gpu_busy_pct(temporal)) is not None:
                busy.add_metric(values, share)
        return [info, quantiles, buckets, ttft, busy]

    def _violations(self, rows: list[TraceRow]) -> GaugeMetricFamily:
        counts = Counter((r.team, r.host, v["slo"]) for r in rows for v in r.violations
                         if v.get("slo") and "error" not in v)  # an SLO whose SLI failed is no violation
        family = GaugeMetricFamily("tracedoc_slo_violations",
                                   "SLO violations in the done traces of the window", labels=["team", "host", "slo"])
        for key, n in sorted(counts.items()):
            family.add_metric(list(key), n)
        return family

    # --- clusters and service health --------------------------------------------------------

    def _clusters(self) -> GaugeMetricFamily:
        family = GaugeMetricFamily("tracedoc_clusters", "Root-cause clusters",
                                   labels=["team", "root_cause", "severity", "status"])
        grouped = (ClusterRecord.objects.filter(team_id__in=self.team_ids)
                   .values_list("team__slug", "root_cause", "severity", "status").annotate(n=Count("id"))
                   .order_by("team__slug", "root_cause", "severity", "status"))
        for team, root_cause, severity, status, n in grouped:
            family.add_metric([team, root_cause or "unknown", severity, status], n)
        return family

    def _traces_by_state(self) -> GaugeMetricFamily:
        family = GaugeMetricFamily("tracedoc_traces", "Traces by state", labels=["team", "state"])
        counts = {(team, state): n for team, state, n in Trace.objects.filter(team_id__in=self.team_ids)
                      .values_list("team__slug", "state").annotate(n=Count("id")).order_by()}
        teams = sorted({team for team, _ in counts})
        for team in teams:  # every state of a team that has traces: a state that empties reads 0
            for state in Trace.State.values:
                family.add_metric([team, state], counts.get((team, state), 0))
        return family

    def _parsing(self, since: datetime) -> Iterator:
        """Parse durations of traces parsed in the window (a gauge histogram: the window slides)
        and the traces that failed in it, by the stage they failed in."""
        durations, failures = [], Counter()
        for team, state, history in (Trace.objects.filter(team_id__in=self.team_ids, updated_at__gte=since)
                                     .values_list("team__slug", "state", "state_history")[:MAX_REPORTS]):
            history = history or []
            if state == Trace.State.FAILED and history:
                failures[(team, failed_stage(history))] += 1
            elif (seconds := parse_seconds(history)) is not None:
                durations.append(seconds)
        buckets = (0.1, 0.5, 1, 2, 5, 10, 30, 60, 300, 900, 3600)
        counts = np.searchsorted(np.sort(durations), buckets, side="right") if durations else [0] * len(buckets)
        parse = GaugeHistogramMetricFamily(
            "tracedoc_parse_duration_seconds", "Parse durations of the traces updated in the window",
            buckets=[*((floatToGoString(b), int(c)) for b, c in zip(buckets, counts)), ("+Inf", len(durations))],
            gsum_value=round(sum(durations), 3))
        failed = GaugeMetricFamily("tracedoc_trace_failures", "Traces that failed in the window, by stage",
                                   labels=["team", "stage"])
        for (team, stage), n in sorted(failures.items()):
            failed.add_metric([team, stage], n)
        return [parse, failed]

    def _queue_depths(self) -> dict[str, int] | None:
        """Messages waiting in each Redis broker queue (kombu keeps a queue as a list under its
        name); None for another broker, or one that does not answer at once: a scrape never
        waits on it."""
        if not self.broker_url.startswith(("redis://", "rediss://")) or not self.queues:
            return None
        try:
            client = redis.Redis.from_url(self.broker_url, socket_timeout=0.5, socket_connect_timeout=0.5)
            return {q: int(client.llen(q)) for q in self.queues}
        except redis.RedisError:
            return None


def collector_for(teams: Iterable[Team]) -> TracedocCollector:
    """A collector over the window of TRACEDOC_METRICS_WINDOW_DAYS, reading the queue the
    Celery app publishes to."""
    days = getattr(settings, "TRACEDOC_METRICS_WINDOW_DAYS", DEFAULT_WINDOW.days)
    conf = current_app.conf  # the project's app (tracedoc.celery), found without importing the project
    queue = str(conf.task_default_queue or "")
    # the role queues tracedoc.celery.route_by_role sends to, read at call time like it does
    roles = list(getattr(settings, "TRACEDOC_QUEUES", {}))
    return TracedocCollector(teams, window=timedelta(days=days), broker_url=str(conf.broker_url or ""),
                             queue=queue, queues=[f"{queue}.{role}" for role in roles])
