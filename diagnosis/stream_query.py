"""The issue stream's search bar: a small query language, as Sentry's.

    is:unresolved severity:>=error root_cause:nccl.* host:gpu-a label:env=prod "free text"

Space-separated terms, all of which must hold. A term is `key:value` (a value with spaces in
double quotes), `-key:value` excludes, and anything else is free text (in the title, root
cause, fingerprint or why grouped). `parse()` gives typed terms or raises `QueryError` with a
message for the person who typed it; diagnosis.stream applies them to the clusters.
"""
from __future__ import annotations

import re
from dataclasses import dataclass
from datetime import datetime, timedelta

from rules.engine.severity import RANK, SEVERITIES

MAX_QUERY_CHARS = 500
MAX_TERMS = 30
MAX_WILDCARDS = 4

STATUSES = ("open", "acknowledged", "resolved", "ignored", "regressed")
# what an on-call person means by each `is:` word
IS_VALUES: dict[str, tuple[str, ...]] = {
    "unresolved": ("open", "acknowledged", "regressed"),
    **{s: (s,) for s in STATUSES},
    "snoozed": ("ignored",),
}
IS_ASSIGNMENT = ("assigned", "unassigned")
SORTS = ("last_seen", "first_seen", "count", "severity")
KEYS = ("is", "severity", "root_cause", "host", "label", "slo", "assignee", "first_seen", "last_seen", "sort")
ALIASES = {"cause": "root_cause", "level": "severity", "assigned": "assignee", "status": "is", "age": "first_seen"}
COMPARISONS = (">=", "<=", ">", "<", "=")
RELATIVE = re.compile(r"-(\d{1,4})([mhdw])")
UNITS = {"m": "minutes", "h": "hours", "d": "days", "w": "weeks"}
# a term: optional "-", a key, ":", then a quoted or bare value; else a quoted or bare word
TOKEN = re.compile(r'\s*(?:(-?)([A-Za-z_]+):("[^"]*"?|[^\s"]*)|("[^"]*"?)|(\S+))')


class QueryError(ValueError):
    """A query the stream cannot read; the message says which part and why."""


@dataclass(frozen=True)
class Term:
    """One condition. `values` hold alternatives (any may match: `severity:error,critical`).

    key: a KEYS member, or "text" for free text. op: the comparison of `severity`,
    `first_seen`, `last_seen` (">=", "<", ...; "=" otherwise). `when`: the parsed time of a
    time term (a relative one is resolved against `now`)."""
    key: str
    values: tuple[str, ...]
    op: str = "="
    negated: bool = False
    when: datetime | None = None


@dataclass(frozen=True)
class StreamQuery:
    terms: tuple[Term, ...]
    text: str  # as typed, for the search bar

    @property
    def sort(self) -> str | None:
        return next((t.values[0] for t in reversed(self.terms) if t.key == "sort"), None)

    def filters(self) -> tuple[Term, ...]:
        return tuple(t for t in self.terms if t.key != "sort")


def parse(text: str, now: datetime) -> StreamQuery:
    """The query's terms, in order. Raises QueryError on an unknown key or a bad value."""
    text = text or ""
    if len(text) > MAX_QUERY_CHARS:
        raise QueryError(f"the query is {len(text)} characters long; at most {MAX_QUERY_CHARS}")
    terms: list[Term] = []
    pos = 0
    while pos < len(text.rstrip()):
        match = TOKEN.match(text, pos)
        if match is None or match.end() == pos:
            raise QueryError(f"cannot read the query from {text[pos:pos + 20]!r} (an unclosed quote?)")
        pos = match.end()
        negated, key, value, quoted, word = match.groups()
        if key is not None:
            terms.append(_term(key.lower(), _unquote(value), bool(negated), now))
        else:
            raw = _unquote(quoted) if quoted is not None else word
            neg = word is not None and word.startswith("-") and len(word) > 1
            raw = raw[1:] if neg else raw
            if raw.count('"'):
                raise QueryError(f"unclosed quote in {word!r}")
            if raw:
                terms.append(Term("text", (raw,), negated=neg))
        if len(terms) > MAX_TERMS:
            raise QueryError(f"at most {MAX_TERMS} terms in one query")
    return StreamQuery(tuple(terms), text.strip())


def _unquote(value: str) -> str:
    if value.startswith('"'):
        if len(value) < 2 or not value.endswith('"'):
            raise QueryError(f"unclosed quote in {value!r}")
        return value[1:-1]
    return value


def _term(key: str, value: str, negated: bool, now: datetime) -> Term:
    key = ALIASES.get(key, key)
    if key not in KEYS:
        raise QueryError(f"unknown key {key + ':'!r}; the stream knows {', '.join(k + ':' for k in KEYS)}"
                         " (a trace label is label:key=value)")
    if not value:
        raise QueryError(f"{key}: needs a value")
    if key == "is":
        return _is_term(value, negated)
    if key == "severity":
        return _severity_term(value, negated)
    if key in ("first_seen", "last_seen"):
        return _time_term(key, value, negated, now)
    if key == "sort":
        if value not in SORTS or negated:
            raise QueryError(f"sort:{value}: sort by one of {', '.join(SORTS)}")
        return Term("sort", (value,))
    if key in ("root_cause", "host") and value.count("*") > MAX_WILDCARDS:
        raise QueryError(f"{key}:{value}: at most {MAX_WILDCARDS} * in one value")
    if key == "label" and any("=" not in v or not v.partition("=")[0].strip() for v in value.split(",")):
        raise QueryError(f"label:{value}: expected label:key=value")
    return Term(key, tuple(v for v in value.split(",") if v), negated=negated)


def _is_term(value: str, negated: bool) -> Term:
    words = value.lower().split(",")
    if all(w in IS_ASSIGNMENT for w in words) and len(words) == 1:
        return Term("assignee", ("none",) if words[0] == "unassigned" else ("any",), negated=negated)
    unknown = [w for w in words if w not in IS_VALUES]
    if unknown:
        raise QueryError(f"is:{unknown[0]}: expected one of {', '.join([*IS_VALUES, *IS_ASSIGNMENT])}")
    return Term("is", tuple(sorted({s for w in words for s in IS_VALUES[w]})), negated=negated)


def _split_op(value: str) -> tuple[str, str]:
    op = next((o for o in COMPARISONS if value.startswith(o)), "=")
    return op, value[len(op):] if value.startswith(op) else value


def _severity_term(value: str, negated: bool) -> Term:
    op, rest = _split_op(value.lower())
    names = tuple(rest.split(","))
    unknown = [n for n in names if n not in RANK]
    if unknown:
        raise QueryError(f"severity:{value}: {unknown[0]!r} is not a severity ({', '.join(SEVERITIES)})")
    if op != "=" and len(names) != 1:
        raise QueryError(f"severity:{value}: compare with one severity, e.g. severity:>=error")
    return Term("severity", names, op=op, negated=negated)


def _time_term(key: str, value: str, negated: bool, now: datetime) -> Term:
    """`-24h` (within the last 24 hours), or `>2024-05-01` / `<=2024-05-01T12:00` (ISO times)."""
    relative = RELATIVE.fullmatch(value)
    if relative:
        amount, unit = int(relative.group(1)), UNITS[relative.group(2)]
        return Term(key, (value,), op=">=", negated=negated, when=now - timedelta(**{unit: amount}))
    op, rest = _split_op(value)
    if op == "=":
        raise QueryError(f"{key}:{value}: use {key}:-24h (within the last 24 hours) or {key}:>2024-05-01")
    try:
        when = datetime.fromisoformat(rest)
    except ValueError:
        raise QueryError(f"{key}:{value}: {rest!r} is not a time (e.g. 2024-05-01 or 2024-05-01T12:00)") from None
    if when.tzinfo is None:
        when = when.replace(tzinfo=now.tzinfo)
    return Term(key, (value,), op=op, negated=negated, when=when)


def from_parameters(data: dict) -> str:
    """The query that says what the stream's older parameters (status=, min_severity=, label=,
    ...; the API's) say, so a bookmarked link shows in the search bar."""
    parts: list[str] = []
    if data.get("status"):
        parts.append("is:" + ",".join(data["status"]))
    if data.get("severity"):
        parts.append("severity:" + ",".join(data["severity"]))
    if data.get("min_severity"):
        parts.append(f"severity:>={data['min_severity']}")
    for key in ("root_cause", "host", "slo", "assignee"):
        if data.get(key):
            parts.append(f"{key}:{_quoted(data[key])}")
    for k, v in data.get("label") or []:
        parts.append(f"label:{_quoted(f'{k}={v}')}")
    for key in ("first_seen", "last_seen"):
        for suffix, op in (("after", ">="), ("before", "<")):
            if data.get(f"{key}_{suffix}"):
                parts.append(f"{key}:{op}{data[f'{key}_{suffix}'].isoformat(timespec='minutes')}")
    if data.get("sort"):
        parts.append(f"sort:{data['sort']}")
    if data.get("q"):
        parts.append(_quoted(data["q"]))
    return " ".join(parts)


def _quoted(value: str) -> str:
    return f'"{value}"' if any(c.isspace() for c in value) else value
