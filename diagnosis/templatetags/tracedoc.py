"""Small display filters shared by the trace and cluster pages."""
import re
from datetime import datetime, timezone
from functools import lru_cache
from urllib.parse import urlencode

from django import template
from django.urls import reverse
from django.utils.html import conditional_escape
from django.utils.safestring import mark_safe

from rules.engine.loader import load_rule_dirs
from rules.models import TeamRule
from rules.engine.severity import MOST_SEVERE_FIRST

register = template.Library()

_BACKTICKS = re.compile(r"`([^`<>]{1,200})`")


@register.filter
def ns_time(ns) -> str:
    """Nanoseconds since the epoch -> `2025-11-29 09:01:02.123456 UTC`."""
    if not ns:
        return ""
    dt = datetime.fromtimestamp(int(ns) / 1e9, tz=timezone.utc)
    return dt.strftime("%Y-%m-%d %H:%M:%S.%f UTC")


@register.filter
def ns_duration(ns) -> str:
    if ns is None:
        return ""
    ns = int(ns)
    for unit, scale in (("s", 10**9), ("ms", 10**6), ("µs", 10**3)):
        if ns >= scale:
            return f"{ns / scale:.3g} {unit}"
    return f"{ns} ns"


@register.filter
def severity_counts(counts: dict) -> list[tuple[str, int]]:
    """{"error": 2, "info": 0, ...} -> [("error", 2)], worst first, zeros dropped."""
    counts = counts or {}
    return [(s, counts[s]) for s in MOST_SEVERE_FIRST if counts.get(s)]


@register.filter(needs_autoescape=True)
def inline_code(text, autoescape=True):
    """Rule texts quote code in `backticks`: show it as code, everything else escaped."""
    escaped = conditional_escape(str(text)) if autoescape else str(text)
    return mark_safe(_BACKTICKS.sub(r"<code>\1</code>", escaped))


@register.filter
def http_url(url) -> str:
    """A reference link from a (team-written) rule: only http(s) URLs become links."""
    url = str(url or "")
    return url if url.startswith(("https://", "http://")) else ""


@lru_cache(maxsize=1)
def _builtin_ids() -> frozenset[str]:
    return frozenset(r.id for r in load_rule_dirs(None))


@register.simple_tag(takes_context=True)
def rule_url(context, rule_id: str, team_id=None) -> str:
    """The page of the rule a finding came from: the team's rule in the editor (it replaces a
    builtin of the same id), else the builtin rule's page; "" for neither (a deleted rule).
    The team's rule ids are read once per rendering."""
    if team_id:
        cache = context.render_context.setdefault("tracedoc_team_rules", {})
        if team_id not in cache:
            cache[team_id] = dict(TeamRule.objects.filter(team_id=team_id).values_list("rule_id", "pk"))
        if rule_id in cache[team_id]:
            return reverse("rules:rule-edit", args=[cache[team_id][rule_id]])
    return reverse("rules:builtin-detail", args=[rule_id]) if rule_id in _builtin_ids() else ""


@register.simple_tag
def timeline_link(trace_pk, artifact="", loc="", ts="", dur="") -> str:
    """The trace page opened at an event (its file and location) or a time: the page's timeline
    reads the query (static/js/timeline.js, linkedPlace) as its evidence buttons do."""
    place = {k: v for k, v in (("artifact", artifact), ("loc", loc), ("ts", ts), ("dur", dur)) if v not in ("", None)}
    return reverse("ingest:trace-detail", args=[trace_pk]) + "?" + urlencode(place) + "#timeline"
