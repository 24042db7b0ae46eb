"""API tokens have a name, a scope (read < upload < admin), an expiry and can be revoked, through
`/api/v1/tokens/`; a token's scope bounds what it may do, a browser session is not bounded."""
from __future__ import annotations

import io

from django.test import Client
from rest_framework.test import APIClient

from accounts.models import ApiToken, hash_token_key
from diagnosis.models import SLODefinition
from rules.models import TeamRule
from tests.support.fixtures import token_client
from tests.support.rule_texts import GRAPH_LAUNCHES as RULE
from tests.support.scoped_tokens import SLO, client_for


def upload(client) -> int:
    f = io.BytesIO(b"x")
    f.name = "errors.log"
    return client.post("/api/v1/traces/", {"files": [f]}, format="multipart").status_code


def test_a_read_token_reads_but_cannot_upload_or_edit_rules(alice, no_worker):
    read = client_for(alice, "read")
    assert read.get("/api/v1/traces/").status_code == 200
    assert read.get("/api/v1/rules/").status_code == 200
    assert upload(read) == 403
    refused = read.post("/api/v1/rules/", {"yaml": RULE}, format="json")
    assert refused.status_code == 403 and "scope is read" in refused.json()["detail"]
    assert not TeamRule.objects.exists()
    # checking a rule saves nothing: a read token may
    assert read.post("/api/v1/rules/validate/", {"yaml": RULE}, format="json").status_code == 200


def test_an_upload_token_uploads_but_cannot_change_team_settings(alice, no_worker):
    up = client_for(alice, "upload")
    assert upload(up) == 201
    assert up.post("/api/v1/rules/", {"yaml": RULE}, format="json").status_code == 403
    assert up.post("/api/v1/slos/", SLO, format="json").status_code == 403
    assert up.post("/api/v1/tokens/", {"name": "more", "scope": "admin"}, format="json").status_code == 403
    assert not SLODefinition.objects.exists() and ApiToken.objects.count() == 1


def test_an_admin_token_changes_team_settings(alice, no_worker):
    admin = client_for(alice, "admin")
    assert upload(admin) == 201
    assert admin.post("/api/v1/rules/", {"yaml": RULE}, format="json").status_code == 201
    assert admin.post("/api/v1/slos/", SLO, format="json").status_code == 201


def test_a_session_is_not_bounded_by_scopes(alice, no_worker):
    session = APIClient()
    session.force_login(alice)
    assert session.post("/api/v1/slos/", SLO, format="json").status_code == 201


def test_tokens_are_issued_listed_and_revoked_through_the_api(alice, charlie):
    admin = client_for(alice, "admin")
    issued = admin.post("/api/v1/tokens/", {"name": "ci upload", "scope": "upload", "expires_days": 30},
                        format="json")
    assert issued.status_code == 201, issued.content
    body = issued.json()
    key = body["key"]
    assert (body["name"], body["scope"], body["state"]) == ("ci upload", "upload", "active")
    assert body["expires_at"] and body["prefix"] == key[:8]
    assert ApiToken.objects.get(pk=body["id"]).key_hash == hash_token_key(key)

    listed = admin.get("/api/v1/tokens/").json()["results"]
    assert {t["name"] for t in listed} == {"admin", "ci upload"}
    assert all("key" not in t for t in listed)
    new = APIClient()
    new.credentials(HTTP_AUTHORIZATION=f"Token {key}")
    assert new.get("/api/v1/traces/").status_code == 200

    assert admin.delete(f"/api/v1/tokens/{body['id']}/").status_code == 204
    assert new.get("/api/v1/traces/").status_code == 401
    assert admin.get(f"/api/v1/tokens/{body['id']}/").json()["state"] == "revoked"

    # another user's token is not there for alice: no listing, no revoking
    theirs, _ = ApiToken.issue(charlie, name="charlie's")
    assert admin.get(f"/api/v1/tokens/{theirs.pk}/").status_code == 404
    assert admin.delete(f"/api/v1/tokens/{theirs.pk}/").status_code == 404
    theirs.refresh_from_db()
    assert theirs.revoked_at is None


def test_a_token_request_is_validated(alice):
    admin = client_for(alice, "admin")
    bad = admin.post("/api/v1/tokens/", {"name": "x", "scope": "root", "expires_days": 0}, format="json")
    assert bad.status_code == 400
    assert {p["name"] for p in bad.json()["invalid_params"]} == {"scope", "expires_days"}
    assert ApiToken.objects.count() == 1


def test_otlp_export_needs_an_upload_scope(alice):
    key = ApiToken.issue(alice, name="reader", scope="read")[1]
    answer = APIClient().post("/v1/traces", data=b"{}", content_type="application/json",
                              HTTP_AUTHORIZATION=f"Token {key}")
    assert answer.status_code == 403 and "scope upload" in answer.json()["message"]


def test_the_page_issues_and_revokes_only_the_users_own_tokens(alice, charlie):
    browser = Client()
    browser.force_login(alice)
    issued = browser.post("/settings/tokens/new/", {"name": "laptop", "scope": "read", "expires_days": "7"},
                          HTTP_HX_REQUEST="true")
    token = ApiToken.objects.get(user=alice, name="laptop")
    key = issued.content.decode().split('id="new-key-value">')[1].split("<")[0]
    assert issued.status_code == 200 and token.key_hash == hash_token_key(key) and token.scope == "read"
    assert key not in browser.get("/settings/tokens/").content.decode()  # shown once
    bad = browser.post("/settings/tokens/new/", {"name": "", "scope": "root"})
    assert bad.status_code == 400 and ApiToken.objects.filter(user=alice).count() == 1

    theirs, _ = ApiToken.issue(charlie, name="charlie's")
    assert browser.post(f"/settings/tokens/{theirs.pk}/revoke/").status_code == 404
    theirs.refresh_from_db()
    assert theirs.revoked_at is None and "charlie's" not in browser.get("/settings/tokens/").content.decode()
    row = browser.post(f"/settings/tokens/{token.pk}/revoke/", HTTP_HX_REQUEST="true").content.decode()
    assert "revoked" in row
    token.refresh_from_db()
    assert token.state == "revoked"


def test_a_new_token_defaults_to_the_upload_scope_a_ci_job_needs(alice):
    """Issue 32: new tokens defaulted to `read`, which `tracedoc submit` in CI cannot use."""
    page = Client()
    page.force_login(alice)
    form = page.get("/settings/tokens/").content.decode()
    assert '<option value="upload" selected>' in form
    answer = token_client(alice).post("/api/v1/tokens/", {"name": "ci"}, format="json")
    assert answer.status_code == 201 and answer.json()["scope"] == "upload"
    key = answer.json()["key"]
    upload = APIClient()
    upload.credentials(HTTP_AUTHORIZATION=f"Token {key}")
    assert upload.post("/v1/traces", data=b"{}", content_type="application/json").status_code != 403
