"""Uploads are bounded per user over time (429) and per team in stored bytes (413), in the
API and in the form, before anything is stored."""
import io

import pytest
from django.core.cache import cache
from django.core.files.uploadedfile import SimpleUploadedFile

from ingest.models import Trace


@pytest.fixture(autouse=True)
def fresh_throttle_counts():
    cache.clear()  # the throttle counts in the default cache, shared by the tests of a process
    yield
    cache.clear()


def upload(client, data: bytes, name: str = "rank0.log"):
    f = io.BytesIO(data)
    f.name = name
    return client.post("/api/v1/traces/", {"files": [f]}, format="multipart")


def stored_blobs(storage) -> list:
    return [p for p in storage.rglob("*") if p.is_file() and "tmp" not in p.relative_to(storage).parts]


def test_uploads_past_the_rate_get_429(settings, alice_api, no_worker):
    settings.TRACEDOC_UPLOAD_THROTTLE_RATE = "2/minute"
    codes = [upload(alice_api, f"line {i}\n".encode()).status_code for i in range(3)]
    assert codes == [201, 201, 429]
    refused = upload(alice_api, b"again\n")
    assert refused.status_code == 429 and int(refused["Retry-After"]) > 0
    assert alice_api.get("/api/v1/traces/").status_code == 200  # reading is not throttled
    assert Trace.objects.count() == 2


def test_the_rate_is_per_user(settings, alice_api, charlie_api, no_worker):
    settings.TRACEDOC_UPLOAD_THROTTLE_RATE = "1/minute"
    assert upload(alice_api, b"a\n").status_code == 201
    assert upload(alice_api, b"b\n").status_code == 429
    assert upload(charlie_api, b"c\n").status_code == 201


def test_an_upload_past_the_team_quota_gets_413_and_stores_nothing(settings, alice_api, storage, no_worker):
    settings.TRACEDOC_TEAM_STORAGE_QUOTA_BYTES = 1000
    assert upload(alice_api, b"x" * 600).status_code == 201
    response = upload(alice_api, b"y" * 600)
    assert response.status_code == 413
    body = response.json()
    assert (body["quota_bytes"], body["used_bytes"], body["upload_bytes"]) == (1000, 600, 600)
    assert "storage quota of 1,000 bytes" in body["detail"]
    assert len(stored_blobs(storage)) == 1 and Trace.objects.count() == 1


def test_the_quota_counts_the_team_not_the_user(settings, alice_api, bob, charlie_api, no_worker):
    settings.TRACEDOC_TEAM_STORAGE_QUOTA_BYTES = 1000
    assert upload(alice_api, b"x" * 900).status_code == 201
    assert upload(charlie_api, b"z" * 900).status_code == 201  # another team


def test_the_form_shows_the_quota_error_with_413(settings, client, alice, no_worker):
    settings.TRACEDOC_TEAM_STORAGE_QUOTA_BYTES = 100
    client.force_login(alice)
    response = client.post("/traces/new/", {"files": [SimpleUploadedFile("big.log", b"x" * 200)]})
    assert response.status_code == 413
    assert "storage quota of 100 bytes" in response.content.decode() and Trace.objects.count() == 0
