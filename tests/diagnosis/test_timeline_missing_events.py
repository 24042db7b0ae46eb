"""The timeline of a diagnosed trace whose report names files that were never stored (a
closed-loop capture recorded with its report but no event tables, a store that lost its
Parquet files): the API answers 200 with the report's own lanes (per-step latency, finding
bands) and says why the file lanes are missing, never a 500."""
import json

import pytest
from django.test import Client

from diagnosis.timeline_store import forget_all
from ingest.models import Artifact, Trace
from tests.support.closed_loop_world import SPIKY, reports
from tests.support.diagnosed_traces import diagnosed_file

URL = "/api/v1/traces/{}/timeline/"


@pytest.fixture(scope="module")
def spiky():
    return reports()


@pytest.fixture
def client(alice):
    forget_all()
    c = Client()
    c.force_login(alice)
    yield c
    forget_all()


def stored_report_only(team, user, report) -> Trace:
    return Trace.objects.create(team=team, created_by=user, state="done", report=report.to_dict())


def answer(client, trace, **params) -> dict:
    response = client.get(URL.format(trace.pk), params)
    assert response.status_code == 200, response.content[:800]
    return json.loads(response.content)


def test_a_report_without_stored_files_gives_its_own_lanes_and_says_why(infra, alice, spiky, client):
    trace = stored_report_only(infra, alice, spiky.answered)
    named = [a["path"] for a in trace.report["trace"]["artifacts"]]
    assert named and not trace.artifacts.exists()   # the report names files the store never had

    body = answer(client, trace)
    steps = next(lane for lane in body["lanes"] if lane["group"] == "steps")
    points = [i for i in body["items"] if i["lane"] == steps["id"]]
    assert len(points) == len(trace.report["trace"]["series"]["step_latency_ms"])
    assert all("artifact" not in p and p["row"] == -1 for p in points)   # no frame row behind a step
    assert any(i["kind"] == "finding" for i in body["items"])
    assert body["missing"] == sorted(named)
    assert "not stored" in body["message"] and named[0] in body["message"]


def test_a_stored_file_whose_events_are_gone_is_named_missing(infra, alice, spiky, client):
    trace = stored_report_only(infra, alice, spiky.asking)
    name = trace.report["trace"]["artifacts"][0]["path"]
    Artifact.objects.create(trace=trace, name=name, format="jsonl", size=100, sha256="0" * 64,
                            parquet=f"parquet/{trace.pk}/0.parquet", event_count=40)

    body = answer(client, trace, max_items=3)   # merged slices of the step lane
    assert body["missing"] == [name] and name in body["message"]
    assert body["merged"] and len(body["items"]) <= 3, body["items"]
    # the evidence lookup of a file with no events finds nothing instead of failing
    evidence = trace.report["findings"][0]["evidence"][0]
    found = answer(client, trace, artifact=evidence.get("artifact") or name, loc=evidence.get("loc") or "line 1")
    assert found["found"] is None


def test_export_and_search_of_such_a_trace_answer_too(infra, alice, spiky, client):
    trace = stored_report_only(infra, alice, spiky.answered)
    exported = client.get(URL.format(trace.pk) + "export/")
    assert exported.status_code == 200, exported.content[:800]
    assert json.loads(exported.content)["traceEvents"]
    searched = client.get(URL.format(trace.pk) + "search/", {"q": "step"})
    assert searched.status_code == 200, searched.content[:800]
    assert json.loads(searched.content)["total"] > 0


def test_a_capture_shows_the_files_of_the_trace_it_adds_to(infra, alice, no_worker, client):
    """A closed-loop capture is diagnosed with the asking trace's files under before/: the
    timeline reads the same files, so none of the report's files is missing and its evidence
    in those files is found."""
    first = diagnosed_file(infra, alice, SPIKY / "token_latency.jsonl")
    capture = diagnosed_file(infra, alice, SPIKY / "profiler_trace.json.gz", adds_to=first)
    named = {a["path"] for a in capture.report["trace"]["artifacts"]}
    assert "before/token_latency.jsonl" in named

    body = answer(client, capture)
    assert body["missing"] == [] and body["message"] == ""
    evidence = next(e for f in capture.report["findings"] for e in f["evidence"]
                    if e.get("artifact", "").startswith("before/") and e.get("loc") and e.get("ts"))
    found = answer(client, capture, artifact=evidence["artifact"], loc=evidence["loc"])["found"]
    assert found is not None and int(body["origin"]) + found["ts"] == evidence["ts"]
