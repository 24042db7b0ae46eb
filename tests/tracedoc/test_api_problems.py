"""Every error answer of the API is an RFC 9457 problem document (`application/problem+json`
with `type`, `title`, `status`, `detail`): a bad request (400), no token (401), a trace or a URL
that is not there (404), an upload too large or past the team's quota (413), too many uploads
(429), an internal error (500). A Django ValidationError a helper raises (the team a user named
is not theirs) is a 400, not a 500. The upload's answers match the OpenAPI schema the server
publishes."""
from __future__ import annotations

import io

import pytest
from django.core.cache import cache
from django.test import Client
from rest_framework.test import APIClient

from diagnosis.models import SLODefinition

from problems import PROBLEM_CONTENT_TYPE, PROBLEM_TYPE_BASE
from ingest.models import Trace
from tests.support.openapi_check import assert_matches_schema


@pytest.fixture(autouse=True)
def fresh_throttle_counts():
    cache.clear()  # the upload throttle counts in the default cache
    yield
    cache.clear()


def upload(client, data: bytes = b"line\n", query: str = ""):
    f = io.BytesIO(data)
    f.name = "rank0.log"
    return client.post(f"/api/v1/traces/{query}", {"files": [f]}, format="multipart")


def problem(response, status: int, kind: str) -> dict:
    """The answer's problem document, checked for the members RFC 9457 names."""
    assert response.status_code == status, response.content[:300]
    assert response["Content-Type"] == PROBLEM_CONTENT_TYPE
    body = response.json()
    assert body["type"] == PROBLEM_TYPE_BASE + kind and body["status"] == status
    assert body["title"] and body["detail"], body
    return body


def test_a_bad_query_parameter_is_a_400_naming_it(alice_api, no_worker):
    response = upload(alice_api, query="?wait=soon")
    body = problem(response, 400, "invalid")
    assert body["invalid_params"] == [{"name": "wait", "reason": "seconds, a number"}]
    assert body["detail"] == "wait: seconds, a number"
    assert_matches_schema(alice_api, "post", "/api/v1/traces/", 400, body, PROBLEM_CONTENT_TYPE)


def test_an_invalid_body_is_a_400_with_each_field(alice_api, infra):
    body = problem(alice_api.post("/api/v1/slos/", {}, format="json"), 400, "invalid")
    assert {p["name"] for p in body["invalid_params"]} >= {"slo_id", "sli", "objective"}
    assert body["detail"].startswith("slo_id: This field is required.; ")
    body = problem(alice_api.post("/api/v1/slos/", {"slo_id": "x", "sli": "vibes", "objective": "max <= 1"},
                                  format="json"), 400, "invalid")
    [(name, reason)] = [(p["name"], p["reason"]) for p in body["invalid_params"]]
    assert name == "sli" and "unknown SLI" in reason


def test_no_token_is_a_401_with_its_challenge(db):
    response = APIClient().get("/api/v1/traces/")
    body = problem(response, 401, "not-authenticated")
    assert "credentials" in body["detail"] and response["WWW-Authenticate"].startswith("Token")


def test_a_trace_not_there_is_a_404(alice_api, charlie_api, no_worker):
    theirs = upload(charlie_api).json()["id"]
    body = problem(alice_api.get(f"/api/v1/traces/{theirs}/"), 404, "not-found")
    assert "No Trace matches" in body["detail"]  # another team's trace is not there for alice
    assert problem(alice_api.get(f"/api/v1/traces/{theirs}/report/"), 404, "not-found")


def test_an_api_url_that_names_nothing_is_a_404_and_pages_keep_theirs(alice_api, client):
    body = problem(alice_api.get("/api/v1/no-such-thing/"), 404, "not-found")
    assert body["detail"] == "no API resource at /api/v1/no-such-thing/"
    page = client.get("/no-such-page/")
    assert page.status_code == 404 and page["Content-Type"].startswith("text/html")


def test_an_upload_too_large_is_a_413(settings, alice_api, no_worker):
    settings.TRACEDOC_MAX_UPLOAD_BYTES = 100
    body = problem(upload(alice_api, b"x" * 1000), 413, "upload-too-large")
    assert body["detail"] == "upload larger than 100 bytes"
    assert_matches_schema(alice_api, "post", "/api/v1/traces/", 413, body, PROBLEM_CONTENT_TYPE)
    assert Trace.objects.count() == 0


def test_an_upload_past_the_quota_is_a_413_with_the_figures(settings, alice_api, no_worker):
    settings.TRACEDOC_TEAM_STORAGE_QUOTA_BYTES = 1000
    assert upload(alice_api, b"x" * 600).status_code == 201
    body = problem(upload(alice_api, b"y" * 600), 413, "quota-exceeded")
    assert (body["quota_bytes"], body["used_bytes"], body["upload_bytes"]) == (1000, 600, 600)
    assert_matches_schema(alice_api, "post", "/api/v1/traces/", 413, body, PROBLEM_CONTENT_TYPE)


def test_too_many_uploads_is_a_429_with_retry_after(settings, alice_api, no_worker):
    settings.TRACEDOC_UPLOAD_THROTTLE_RATE = "1/minute"
    assert upload(alice_api).status_code == 201
    response = upload(alice_api)
    body = problem(response, 429, "throttled")
    assert body["retry_after_s"] == int(response["Retry-After"]) > 0
    assert_matches_schema(alice_api, "post", "/api/v1/traces/", 429, body, PROBLEM_CONTENT_TYPE)


def test_a_team_not_yours_is_a_400_naming_it_not_a_500(alice_api, charlie):
    body = problem(alice_api.get("/api/v1/slos/effective/?team=other"), 400, "invalid")
    assert "not a member of a team 'other'" in body["detail"]
    assert problem(alice_api.get("/api/v1/slos/effective/?team=nope"), 400, "invalid")
    assert alice_api.get("/api/v1/slos/effective/?team=infra").status_code == 200


def test_a_user_of_several_teams_is_asked_which_one(alice_api, alice, other):
    other.members.add(alice)
    body = problem(alice_api.get("/api/v1/slos/effective/"), 400, "invalid")
    assert "several teams" in body["detail"]
    assert alice_api.get("/api/v1/slos/effective/?team=other").status_code == 200


def test_a_request_django_refuses_before_any_view_is_a_400_problem(alice_api, client):
    body = problem(alice_api.get("/api/v1/traces/", HTTP_HOST="evil.example"), 400, "bad-request")
    assert "evil.example" in body["detail"]
    page = client.get("/", HTTP_HOST="evil.example")
    assert page.status_code == 400 and page["Content-Type"].startswith("text/html")


def test_an_internal_error_under_the_api_is_a_500_problem_without_the_traceback(monkeypatch, alice, caplog):
    def broken(self, team):
        raise RuntimeError("secret internals")

    monkeypatch.setattr(type(SLODefinition.objects), "effective_for", broken)
    client = Client(raise_request_exception=False)
    client.force_login(alice)
    response = client.get("/api/v1/slos/effective/")
    body = problem(response, 500, "internal-error")
    assert "secret internals" not in response.content.decode()
    assert "logged on the server" in body["detail"]
    assert any("secret internals" in str(r.exc_info[1]) for r in caplog.records if r.exc_info)
    page = client.get("/nonexistent-page-500/")  # pages keep Django's own answers
    assert page.status_code == 404 and page["Content-Type"].startswith("text/html")


def test_a_blank_limit_or_offset_is_a_400_not_the_default(alice_api, no_worker):
    """(schemathesis: `?offset=` passed as the default although the schema says an integer)"""
    body = problem(alice_api.get("/api/v1/traces/?offset="), 400, "invalid")
    assert body["invalid_params"] == [{"name": "offset", "reason": "expected an integer, got ''"}]
    assert alice_api.get("/api/v1/traces/?limit=5&offset=0").status_code == 200
