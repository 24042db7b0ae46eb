"""The issue stream: a team's clusters filtered, sorted and dressed for a list (the web page
and `GET /api/v1/clusters/` both read it, so both filter the same way).

Filters come from `StreamFilterForm` (diagnosis.forms); `filtered()` applies them to a
queryset, `rows()` adds what a row shows beyond the cluster itself: the "new"/"regressed"
markers, traces per day over the selected range, affected hosts and label values.
"""
from __future__ import annotations

import re
from dataclasses import dataclass
from datetime import date, datetime, timedelta

from django.db.models import Count, Q, QuerySet
from django.db.models.functions import TruncDate
from django.utils import timezone

from diagnosis.models import ClusterRecord, ClusterSighting
from diagnosis.stream_query import StreamQuery, Term
from ingest.models import LABEL_KEY
from rules.engine.severity import RANK

# ordering of each `sort` value: the most recent, most frequent, most severe first
SORTS = {
    "last_seen": ("-last_seen", "-id"),
    "first_seen": ("-first_seen", "-id"),
    "count": ("-trace_count", "-last_seen", "-id"),
    "severity": ("-severity_rank", "-last_seen", "-id"),
}
DEFAULT_PERIOD_DAYS = 14
# labels every agent upload carries: not worth a place in a row's label values
QUIET_LABELS = frozenset({"host", "source", "agent_version", "capture_request"})
MAX_LABEL_VALUES = 5


@dataclass(frozen=True)
class DayCount:
    day: date
    traces: int


@dataclass(frozen=True)
class Bar:
    """One day of a row's inline histogram, in SVG units."""
    x: int
    y: int
    height: int
    day: date
    traces: int


BAR_WIDTH, BAR_GAP, CHART_HEIGHT = 5, 1, 24


@dataclass(frozen=True)
class StreamRow:
    """One cluster as the stream shows it."""
    cluster: ClusterRecord
    is_new: bool          # first seen within the selected range
    is_regressed: bool
    per_day: tuple[DayCount, ...]
    hosts: tuple[str, ...]
    labels: dict[str, tuple[str, ...]]

    @property
    def peak(self) -> int:
        return max((d.traces for d in self.per_day), default=0)

    @property
    def bars(self) -> list[Bar]:
        """The per-day counts as bars scaled to the row's busiest day (a day with a trace
        gets at least a sliver, one with none nothing)."""
        peak = self.peak or 1
        bars = []
        for i, d in enumerate(self.per_day):
            height = max(2, round(CHART_HEIGHT * d.traces / peak)) if d.traces else 0
            bars.append(Bar(x=i * (BAR_WIDTH + BAR_GAP), y=CHART_HEIGHT - height, height=height, day=d.day,
                            traces=d.traces))
        return bars

    @property
    def chart_width(self) -> int:
        return len(self.per_day) * (BAR_WIDTH + BAR_GAP)


@dataclass(frozen=True)
class Range:
    """The range the stream looks at: "new" means first seen in it; the per-day counts cover it."""
    start: datetime
    end: datetime

    @classmethod
    def of(cls, filters: dict, now: datetime | None = None) -> "Range":
        now = now or timezone.now()
        end = filters.get("last_seen_before") or now
        start = filters.get("last_seen_after") or end - timedelta(days=filters.get("period") or DEFAULT_PERIOD_DAYS)
        # after > before: nothing matches, and the per-day chart is the one day at the end
        return cls(start=min(start, end), end=end)

    def days(self) -> list[date]:
        first, last = self.start.date(), self.end.date()
        return [first + timedelta(days=i) for i in range(min((last - first).days, 90) + 1)]


def filtered(clusters: QuerySet, filters: dict, user=None) -> QuerySet:
    """`clusters` narrowed by the cleaned data of a StreamFilterForm and sorted."""
    qs = clusters.with_severity_rank()
    if filters.get("status"):
        qs = qs.filter(status__in=filters["status"])
    if filters.get("severity"):
        qs = qs.filter(severity__in=filters["severity"])
    if filters.get("min_severity"):
        qs = qs.filter(severity_rank__gte=RANK[filters["min_severity"]])
    if filters.get("root_cause"):
        qs = qs.filter(root_cause=filters["root_cause"])
    if filters.get("host"):
        qs = qs.filter(pk__in=ClusterSighting.objects.filter(host=filters["host"]).values("cluster"))
    if labels := filters.get("label"):
        if any(not LABEL_KEY.match(key) or "__" in key for key, _ in labels):
            return qs.none()  # a key that could be read as a lookup path never matches
        # all of them on one trace, as a person reading "env=prod host=a" means it
        same_trace = ClusterSighting.objects.filter(**{f"trace__labels__{k}": v for k, v in labels})
        qs = qs.filter(pk__in=same_trace.values("cluster"))
    if filters.get("slo"):
        qs = qs.filter(pk__in=ClusterRecord.objects.filter(findings__slo=filters["slo"]).values("pk"))
    for field in ("first_seen", "last_seen"):
        if filters.get(f"{field}_after"):
            qs = qs.filter(**{f"{field}__gte": filters[f"{field}_after"]})
        if filters.get(f"{field}_before"):
            qs = qs.filter(**{f"{field}__lt": filters[f"{field}_before"]})
    if text := filters.get("q"):
        qs = qs.filter(Q(title__icontains=text) | Q(root_cause__icontains=text) | Q(fingerprint__icontains=text)
                       | Q(why_grouped__icontains=text))
    assignee = filters.get("assignee")
    if assignee == "none":
        qs = qs.filter(assignee=None)
    elif assignee == "me" and user is not None:
        qs = qs.filter(assignee=user)
    elif assignee:
        qs = qs.filter(assignee__username=assignee)
    query: StreamQuery | None = filters.get("query")
    for term in query.filters() if query else ():
        condition = _condition(term, user)
        qs = qs.exclude(condition) if term.negated else qs.filter(condition)
    return qs.order_by(*SORTS[(query and query.sort) or filters.get("sort") or "last_seen"])


SEVERITY_LOOKUPS = {">=": "gte", ">": "gt", "<=": "lte", "<": "lt"}
TIME_LOOKUPS = {">=": "gte", ">": "gt", "<=": "lte", "<": "lt"}


def _condition(term: Term, user) -> Q:
    """One search-bar term as a condition on the clusters (any of its values may match)."""
    if term.key == "is":
        return Q(status__in=term.values)
    if term.key == "severity":
        if term.op in SEVERITY_LOOKUPS:
            return Q(**{f"severity_rank__{SEVERITY_LOOKUPS[term.op]}": RANK[term.values[0]]})
        return Q(severity__in=term.values)
    if term.key in ("first_seen", "last_seen"):
        return Q(**{f"{term.key}__{TIME_LOOKUPS[term.op]}": term.when})
    if term.key == "text":
        text = term.values[0]
        return (Q(title__icontains=text) | Q(root_cause__icontains=text) | Q(fingerprint__icontains=text)
                | Q(why_grouped__icontains=text))
    return _any(_one_condition(term.key, v, user) for v in term.values)


def _one_condition(key: str, value: str, user) -> Q:
    if key == "root_cause":
        return _glob("root_cause", value)
    if key == "host":
        return Q(pk__in=ClusterSighting.objects.filter(_glob("host", value)).values("cluster"))
    if key == "slo":
        return Q(pk__in=ClusterRecord.objects.filter(findings__slo=value).values("pk"))
    if key == "label":
        label, _, wanted = value.partition("=")
        label = label.strip()
        if not LABEL_KEY.match(label) or "__" in label:
            return Q(pk__in=[])  # a key that could be read as a lookup path never matches
        return Q(pk__in=ClusterSighting.objects.filter(**{f"trace__labels__{label}": wanted.strip()})
                 .values("cluster"))
    # assignee: a username, me, none (is:unassigned) or any (is:assigned)
    if value == "none":
        return Q(assignee=None)
    if value == "any":
        return Q(assignee__isnull=False)
    if value == "me":
        return Q(assignee=user) if user is not None else Q(pk__in=[])
    return Q(assignee__username=value)


def _glob(field: str, pattern: str) -> Q:
    """`nccl.*`: `*` stands for any characters, the rest is literal (escaped: no regex comes
    from the query itself; the parser allows a few `*` at most)."""
    if "*" not in pattern:
        return Q(**{field: pattern})
    return Q(**{f"{field}__regex": "^" + ".*".join(re.escape(p) for p in pattern.split("*")) + "$"})


def _any(conditions) -> Q:
    combined = Q(pk__in=[])
    for c in conditions:
        combined |= c
    return combined


def rows(clusters: list[ClusterRecord], selected: Range) -> list[StreamRow]:
    """The stream rows of one page of clusters: three queries whatever the page size."""
    ids = [c.pk for c in clusters]
    days = selected.days()
    counts: dict[int, dict[date, int]] = {}
    per_day = (ClusterSighting.objects.filter(cluster__in=ids, seen_at__gte=_midnight(days[0]),
                                              seen_at__lt=_midnight(days[-1] + timedelta(days=1)))
               .annotate(day=TruncDate("seen_at")).values("cluster", "day")
               .annotate(traces=Count("trace", distinct=True)))
    for entry in per_day:
        counts.setdefault(entry["cluster"], {})[entry["day"]] = entry["traces"]
    hosts: dict[int, list[str]] = {}
    for cluster_id, host in (ClusterSighting.objects.filter(cluster__in=ids).exclude(host="")
                             .values_list("cluster", "host").distinct().order_by("host")):
        hosts.setdefault(cluster_id, []).append(host)
    labels: dict[int, dict[str, set[str]]] = {}
    for cluster_id, trace_labels in (ClusterSighting.objects.filter(cluster__in=ids)
                                     .values_list("cluster", "trace__labels").distinct()):
        for key, value in (trace_labels or {}).items():
            if key not in QUIET_LABELS:
                labels.setdefault(cluster_id, {}).setdefault(key, set()).add(str(value))
    return [StreamRow(
        cluster=c, is_new=c.first_seen >= selected.start,
        is_regressed=c.status == ClusterRecord.Status.REGRESSED,
        per_day=tuple(DayCount(d, counts.get(c.pk, {}).get(d, 0)) for d in days),
        hosts=tuple(hosts.get(c.pk, ())),
        labels={k: tuple(sorted(v)[:MAX_LABEL_VALUES]) for k, v in sorted(labels.get(c.pk, {}).items())})
        for c in clusters]


def _midnight(day: date) -> datetime:
    return datetime(day.year, day.month, day.day, tzinfo=timezone.get_current_timezone())
