"""/api/schema/ and /api/docs/ need a login unless TRACEDOC_PUBLIC_API_DOCS is on."""
import pytest


@pytest.mark.django_db
def test_anonymous_requests_get_no_schema_and_no_docs(client):
    assert client.get("/api/schema/").status_code in (401, 403)
    docs = client.get("/api/docs/")
    assert docs.status_code == 302 and docs["Location"].startswith("/accounts/login/?next=/api/docs/")


def test_a_session_gets_the_schema_and_the_docs(client, alice):
    client.force_login(alice)
    assert client.get("/api/schema/").status_code == 200
    assert "swagger-ui" in client.get("/api/docs/").content.decode()


def test_an_api_token_gets_the_schema_and_the_docs(alice_api):
    assert "openapi" in alice_api.get("/api/schema/?format=json").json()
    assert alice_api.get("/api/docs/").status_code == 200


@pytest.mark.django_db
def test_public_api_docs_serve_anonymous_requests(client, settings):
    settings.TRACEDOC_PUBLIC_API_DOCS = True
    assert client.get("/api/schema/").status_code == 200
    assert "swagger-ui" in client.get("/api/docs/").content.decode()
