"""The issue stream's search bar (diagnosis.stream_query): what each term parses to, the
errors a person sees for what it cannot read, and the older parameters said as a query."""
from datetime import datetime, timedelta, timezone

import pytest

from diagnosis.stream_query import QueryError, Term, from_parameters, parse

NOW = datetime(2024, 5, 10, 12, 0, tzinfo=timezone.utc)


def terms(text: str) -> list[Term]:
    return list(parse(text, NOW).terms)


def test_the_on_call_query_of_the_issue():
    assert terms('is:unresolved severity:>=error root_cause:nccl.* host:gpu-a label:env=prod "stream blocked"') == [
        Term("is", ("acknowledged", "open", "regressed")),
        Term("severity", ("error",), op=">="),
        Term("root_cause", ("nccl.*",)),
        Term("host", ("gpu-a",)),
        Term("label", ("env=prod",)),
        Term("text", ("stream blocked",)),
    ]


@pytest.mark.parametrize("text, expected", [
    ("is:unassigned", Term("assignee", ("none",))),
    ("is:assigned", Term("assignee", ("any",))),
    ("-is:resolved", Term("is", ("resolved",), negated=True)),
    ("is:open,ignored", Term("is", ("ignored", "open"))),
    ("severity:error,critical", Term("severity", ("error", "critical"))),
    ("level:warning", Term("severity", ("warning",))),
    ("-host:gpu-b", Term("host", ("gpu-b",), negated=True)),
    ('label:"team=infra west"', Term("label", ("team=infra west",))),
    ("assignee:me", Term("assignee", ("me",))),
    ("timeout", Term("text", ("timeout",))),
    ("-timeout", Term("text", ("timeout",), negated=True)),
])
def test_one_term(text, expected):
    assert terms(text) == [expected]


def test_times_relative_and_absolute():
    recent, = terms("first_seen:-24h")
    assert (recent.op, recent.when) == (">=", NOW - timedelta(hours=24))
    before, = terms("last_seen:<2024-05-01T06:30")
    assert (before.op, before.when) == ("<", datetime(2024, 5, 1, 6, 30, tzinfo=timezone.utc))


def test_sort_is_not_a_filter():
    query = parse("sort:count is:open", NOW)
    assert query.sort == "count" and [t.key for t in query.filters()] == ["is"]


def test_an_empty_query_has_no_terms():
    assert parse("   ", NOW).terms == ()


@pytest.mark.parametrize("text, words", [
    ("colour:red", "unknown key 'colour:'"),
    ("is:fixed", "is:fixed: expected one of"),
    ("severity:>=fatal", "'fatal' is not a severity"),
    ("severity:>=error,critical", "compare with one severity"),
    ("label:env", "expected label:key=value"),
    ("first_seen:yesterday", "use first_seen:-24h"),
    ("last_seen:>someday", "'someday' is not a time"),
    ('host:"gpu-a', "unclosed quote"),
    ("host:", "host: needs a value"),
    ("sort:random", "sort by one of"),
    ("root_cause:*a*b*c*d*e*", "at most 4 *"),
    ("x" * 501, "at most 500"),
])
def test_what_it_cannot_read_is_said(text, words):
    with pytest.raises(QueryError) as error:
        parse(text, NOW)
    assert words in str(error.value)


def test_the_older_parameters_as_a_query_parse_back_to_the_same_filters():
    text = from_parameters({"status": ["open", "regressed"], "min_severity": "error", "host": "gpu-a",
                            "label": [("env", "prod"), ("team", "infra west")], "q": "stream blocked",
                            "first_seen_after": datetime(2024, 5, 1, tzinfo=timezone.utc), "sort": "count"})
    assert text == ('is:open,regressed severity:>=error host:gpu-a label:env=prod label:"team=infra west" '
                    'first_seen:>=2024-05-01T00:00+00:00 sort:count "stream blocked"')
    assert [t.key for t in parse(text, NOW).terms] == ["is", "severity", "host", "label", "label", "first_seen",
                                                       "sort", "text"]
