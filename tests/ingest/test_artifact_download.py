"""The trace page offers each stored artifact as a download: team-scoped, an attachment under
its own name, streamed, byte for byte."""
import gzip

import pytest

from tests.corpus import corpus

pytestmark = pytest.mark.timeout(300)


def test_download_an_artifact(client, alice, charlie, decode_trace):
    client.force_login(alice)
    page = client.get(f"/traces/{decode_trace.pk}/").content.decode()
    artifact = decode_trace.artifacts.get(name="kineto_trace.json.gz")
    url = f"/traces/{decode_trace.pk}/artifacts/{artifact.pk}/download/"
    assert f'href="{url}"' in page
    response = client.get(url)
    assert response.status_code == 200 and response.streaming
    assert response["Content-Disposition"] == 'attachment; filename="kineto_trace.json.gz"'
    assert response["Content-Type"] == "application/octet-stream"
    body = b"".join(response.streaming_content)
    assert body == corpus("h200", "fragmented_decode", "kineto_trace.json.gz").read_bytes()
    assert gzip.decompress(body).lstrip()[:1] == b"{"

    client.force_login(charlie)  # another team
    assert client.get(url).status_code == 404
    client.logout()
    assert client.get(url).status_code == 302  # to the login page
    client.force_login(alice)
    other_trace_url = f"/traces/{decode_trace.pk + 1000}/artifacts/{artifact.pk}/download/"
    assert client.get(other_trace_url).status_code == 404
