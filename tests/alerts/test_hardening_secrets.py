"""A destination's URL and secret are credentials (issue 30, item 7): written, never read back
by the API (any scope), the pages or the edit form; never in a delivery's log or the worker's
log when a delivery fails; either can be replaced alone."""
import logging

from rest_framework.test import APIClient

from accounts.models import ApiToken
from alerts.models import Destination
from alerts.redact import mask_url, redact
from tests.alerts.conftest import rule
from tests.support.cluster_world import NCCL, seen

KEY = "T0AAA/B0BBB/XoXoSeCrEtKeY123"


def read_client(user) -> APIClient:
    client = APIClient()
    client.credentials(HTTP_AUTHORIZATION=f"Token {ApiToken.issue(user, scope=ApiToken.Scope.READ)[1]}")
    return client


def test_the_url_is_written_not_read_back(alice, alice_api, infra, receiver, client):
    url = f"{receiver.url}/services/{KEY}?token=qs-secret-42"
    created = alice_api.post("/api/v1/destinations/", {"name": "slack", "kind": "slack", "url": url}, format="json")
    assert created.status_code == 201, created.content
    pk = created.json()["id"]
    for api in (alice_api, read_client(alice)):
        for answer in (api.get("/api/v1/destinations/"), api.get(f"/api/v1/destinations/{pk}/")):
            assert answer.status_code == 200
            assert KEY not in answer.content.decode() and "qs-secret-42" not in answer.content.decode()
    assert alice_api.get(f"/api/v1/destinations/{pk}/").json()["url_masked"] == f"{receiver.url}/…"
    client.force_login(alice)
    for page in ("/alerts/", f"/alerts/destinations/{pk}/"):
        html = client.get(page).content.decode()
        assert KEY not in html and "qs-secret-42" not in html and f"{receiver.url}/…" in html, page


def test_rotating_one_credential_keeps_the_other(alice_api, infra, receiver):
    d = Destination.objects.create(team=infra, name="hook", kind="webhook", url=f"{receiver.url}/h/{KEY}",
                                   secret="old-signing-key")
    answer = alice_api.patch(f"/api/v1/destinations/{d.pk}/", {"secret": "new-signing-key"}, format="json")
    assert answer.status_code == 200, answer.content
    d.refresh_from_db()
    assert (d.secret, d.url) == ("new-signing-key", f"{receiver.url}/h/{KEY}")


def test_a_failed_delivery_logs_no_credential(alice_api, infra, receiver, eager, caplog,
                                             django_capture_on_commit_callbacks):
    d = Destination.objects.create(team=infra, name="hook", kind="webhook", url=f"{receiver.url}/h/{KEY}",
                                   secret="signing-key-77")
    receiver.failures = 100  # every attempt answers 500
    rule(infra, "new", [d])
    with caplog.at_level(logging.WARNING), django_capture_on_commit_callbacks(execute=True):
        seen(infra, NCCL)
    delivery = d.deliveries.get()
    assert delivery.state == "failed" and delivery.log
    stored = str(delivery.log) + caplog.text + str(alice_api.get("/api/v1/alerts/").json())
    assert KEY not in stored and "signing-key-77" not in stored


def test_requests_errors_lose_the_path_and_query():
    url = f"https://hooks.example.com/services/{KEY}?token=abc"
    text = (f"ConnectionError: HTTPSConnectionPool(host='hooks.example.com', port=443): Max retries exceeded "
            f"with url: /services/{KEY}?token=abc")
    assert KEY not in redact(text, url) and "token=abc" not in redact(text, url)
    assert mask_url(url) == "https://hooks.example.com/…" and mask_url("https://h.example") == "https://h.example"
