"""`POST /api/v1/traces/?wait=N` as a CI job reads it: 201 with the report when the diagnosis is
done in time, 202 with `Location` and `progress` when it is not, an RFC 9457 problem document
(422) naming the file and the reason when it failed; the report endpoint answers problems alike.
Real answers are validated against the OpenAPI schema the server publishes."""
from __future__ import annotations

import io

import pytest
import requests

from ingest.models import Trace
from tests.corpus import corpus
from tests.support.openapi_check import assert_matches_schema

PROBLEM = "application/problem+json"


def _upload(client, wait: str = "", name: str = "errors.log", data: bytes = b"x") -> object:
    f = io.BytesIO(data)
    f.name = name
    return client.post(f"/api/v1/traces/{'?wait=' + wait if wait else ''}", {"files": [f]}, format="multipart")


def test_a_wait_the_diagnosis_does_not_finish_in_is_202_with_location_and_progress(alice_api, no_worker):
    response = _upload(alice_api, wait="0.5")  # no worker reads the queue: never done
    assert response.status_code == 202, response.content
    body = response.json()
    assert response["Location"].endswith(f"/api/v1/traces/{body['id']}/")
    assert body["state"] == "received" and body["report"] is None
    assert body["progress"]["percent"] == 0 and body["progress"]["stage"] == ""
    assert_matches_schema(alice_api, "post", "/api/v1/traces/", 202, body)


def test_without_wait_the_upload_is_201_at_once_with_its_location(alice_api, no_worker):
    response = _upload(alice_api)
    assert response.status_code == 201
    assert response["Location"].endswith(f"/api/v1/traces/{response.json()['id']}/")


def _failed_trace(client) -> Trace:
    trace = Trace.objects.get(pk=_upload(client, name="junk.bin").json()["id"])
    trace.artifacts.update(error="junk.bin: format not recognised (not a trace tracedoc knows)")
    trace.transition("parsing")
    trace.transition("failed", error="no usable file: junk.bin: format not recognised")
    return trace


def test_the_report_of_a_failed_trace_is_a_problem_document_naming_the_file(alice_api, no_worker):
    trace = _failed_trace(alice_api)
    response = alice_api.get(f"/api/v1/traces/{trace.pk}/report/")
    assert response.status_code == 422
    assert response["Content-Type"] == PROBLEM
    problem = response.json()
    assert problem["type"].endswith(":trace-failed") and problem["status"] == 422 and problem["title"]
    assert "junk.bin" in problem["detail"] and "format not recognised" in problem["detail"]
    assert problem["errors"] == [{"file": "junk.bin",
                                  "reason": "junk.bin: format not recognised (not a trace tracedoc knows)"}]
    assert (problem["trace"], problem["state"]) == (trace.pk, "failed")
    assert problem["web_url"].endswith(f"/traces/{trace.pk}/")
    assert_matches_schema(alice_api, "get", "/api/v1/traces/{id}/report/", 422, problem, PROBLEM)


def test_the_report_of_an_unfinished_trace_is_a_409_problem_with_its_state(alice_api, no_worker):
    trace_id = _upload(alice_api).json()["id"]
    response = alice_api.get(f"/api/v1/traces/{trace_id}/report/")
    assert (response.status_code, response["Content-Type"]) == (409, PROBLEM)
    assert response.json()["state"] == "received" and response.json()["type"].endswith(":trace-not-done")
    assert_matches_schema(alice_api, "get", "/api/v1/traces/{id}/report/", 409, response.json(), PROBLEM)


@pytest.mark.timeout(300)
def test_wait_answers_201_with_the_report_and_a_failure_as_a_problem(live_tracedoc, alice_api, corpus_dir):
    headers = {"Authorization": f"Token {live_tracedoc.token}"}
    files = [("files", (p.name, p.read_bytes())) for p in sorted(corpus("h200", "cudagraph_abort").iterdir())]
    done = requests.post(f"{live_tracedoc.url}/api/v1/traces/?wait=120", files=files, headers=headers, timeout=200)
    assert done.status_code == 201, done.text
    body = done.json()
    assert body["state"] == "done" and body["report"]["findings"], body
    assert {c["root_cause"] for c in body["report"]["clusters"]} >= {"cuda_graph.host_sync_in_capture"}
    assert_matches_schema(alice_api, "post", "/api/v1/traces/", 201, body)
    report = requests.get(f"{live_tracedoc.url}/api/v1/traces/{body['id']}/report/", headers=headers, timeout=30)
    assert report.json() == body["report"]
    assert_matches_schema(alice_api, "get", "/api/v1/traces/{id}/report/", 200, report.json())

    failed = requests.post(f"{live_tracedoc.url}/api/v1/traces/?wait=120", headers=headers, timeout=200,
                           files=[("files", ("empty.json", b""))])
    assert (failed.status_code, failed.headers["Content-Type"]) == (422, PROBLEM), failed.text
    problem = failed.json()
    assert "empty.json" in problem["detail"] and problem["errors"][0]["file"] == "empty.json"
    assert problem["errors"][0]["reason"]
