"""A list of traces (API and page) reads each trace's severity counts from one JSON path of its
report in the same query: the reports themselves are never loaded, one query per page whatever
the number of traces."""
import re

import pytest
from django.db import connection
from django.test.utils import CaptureQueriesContext

from ingest.models import Trace

REPORT = {"summary": {"findings_by_severity": {"critical": 2, "warning": 1}, "worst": "critical"},
          "findings": [{"message": "x" * 10_000}]}


def stored(team, n: int, report=REPORT) -> list[Trace]:
    return [Trace.objects.create(team=team, name=f"t{i}", state=Trace.State.DONE, report=report) for i in range(n)]


def list_queries(client, url: str):
    with CaptureQueriesContext(connection) as ctx:
        response = client.get(url)
    assert response.status_code == 200
    return response, [q["sql"] for q in ctx.captured_queries]


@pytest.mark.django_db
def test_the_api_list_has_the_counts_and_no_query_per_trace(alice_api, infra):
    stored(infra, 3)
    Trace.objects.create(team=infra, name="queued")
    list_queries(alice_api, "/api/v1/traces/")  # the token's first use records it once
    _, few = list_queries(alice_api, "/api/v1/traces/")
    stored(infra, 12)
    response, many = list_queries(alice_api, "/api/v1/traces/")
    assert len(many) == len(few)
    rows = response.json()["results"]
    assert [r["findings_by_severity"] for r in rows if r["name"] != "queued"] == [{"critical": 2, "warning": 1}] * 15
    assert [r["findings_by_severity"] for r in rows if r["name"] == "queued"] == [{}]
    assert not any("x" * 100 in str(r) for r in rows)
    # the column itself in the select list, not a path into it (SQLite's JSON_EXTRACT, PostgreSQL's ->)
    whole_report = re.compile(r'"ingest_trace"\."report"\s*(,\s*"|FROM)')
    assert not any(whole_report.search(q) for q in many), many


@pytest.mark.django_db
def test_the_trace_list_page_shows_the_counts_in_one_query_per_page(client, alice, infra):
    client.force_login(alice)
    stored(infra, 2)
    _, few = list_queries(client, "/")
    stored(infra, 10)
    page, many = list_queries(client, "/")
    assert len(many) == len(few)
    assert page.content.decode().count('class="sev sev-critical"') == 12
