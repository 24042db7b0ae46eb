"""Every API endpoint needs a token (or a session): 401 without one."""
import pytest
from rest_framework.test import APIClient

ENDPOINTS = [
    ("get", "/api/v1/traces/"),
    ("post", "/api/v1/traces/"),
    ("get", "/api/v1/traces/1/"),
    ("get", "/api/v1/traces/1/report/"),
    ("get", "/api/v1/traces/1/findings/"),
    ("get", "/api/v1/clusters/"),
    ("patch", "/api/v1/clusters/1/"),
    ("get", "/api/v1/rules/"),
    ("post", "/api/v1/rules/validate/"),
]


@pytest.mark.django_db
@pytest.mark.parametrize("method,url", ENDPOINTS)
def test_anonymous_requests_get_401(method, url):
    response = getattr(APIClient(), method)(url)
    assert response.status_code == 401
    assert response["WWW-Authenticate"].startswith("Token")


@pytest.mark.django_db
def test_a_wrong_token_gets_401():
    client = APIClient()
    client.credentials(HTTP_AUTHORIZATION="Token 0123456789abcdef0123456789abcdef01234567")
    assert client.get("/api/v1/traces/").status_code == 401


def test_a_valid_token_gets_in(alice_api):
    assert alice_api.get("/api/v1/traces/").status_code == 200


def test_the_schema_and_docs_are_served_locally(client, alice):
    client.force_login(alice)  # behind a login by default (tests/tracedoc/test_hardening_api_docs.py)
    assert client.get("/api/schema/").status_code == 200
    docs = client.get("/api/docs/").content.decode()
    assert "swagger-ui" in docs and "cdn.jsdelivr" not in docs
