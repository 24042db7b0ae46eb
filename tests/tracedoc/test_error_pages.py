"""The app's own 404 and 500 pages (not Django's debug page, not a bare "Server Error"), with
the skip link and a way back; an API URL that names nothing stays a problem document; the API
docs page carries the app's navigation."""
import pytest
from django.test import Client


@pytest.fixture
def production(settings):
    settings.DEBUG = False
    settings.ALLOWED_HOSTS = ["testserver"]


def test_a_page_that_names_nothing_is_the_apps_404(client, alice, production):
    client.force_login(alice)
    response = client.get("/traces/999999/")
    page = response.content.decode()
    assert response.status_code == 404
    assert "<h1>Not found</h1>" in page and "/traces/999999/" in page and "Back to the traces" in page
    assert 'class="skip-link"' in page and 'href="/clusters/"' in page   # the app's navigation
    assert "Traceback" not in page and "technical_404" not in page


def test_an_api_url_that_names_nothing_stays_a_problem_document(alice_api, production):
    response = alice_api.get("/api/v1/no-such-thing/")
    assert response.status_code == 404 and response["Content-Type"].startswith("application/problem+json")


def test_an_error_in_a_view_is_the_apps_500(alice, production, monkeypatch):
    from diagnosis import views

    def broken(*args, **kwargs):
        raise RuntimeError("boom")
    monkeypatch.setattr(views.stream, "rows", broken)   # the stream page's first step fails
    client = Client(raise_request_exception=False)
    client.force_login(alice)
    response = client.get("/clusters/")
    page = response.content.decode()
    assert response.status_code == 500
    assert "Something went wrong on our side" in page and 'class="skip-link"' in page and "boom" not in page


def test_the_api_docs_have_the_apps_navigation(client, alice):
    client.force_login(alice)
    page = client.get("/api/docs/").content.decode()
    assert 'class="brand"' in page and 'aria-label="Main"' in page
    for link in ("/traces/", "/clusters/", "/rules/"):
        assert f'href="{link}' in page, link
