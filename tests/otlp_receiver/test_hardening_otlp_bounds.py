"""The OTLP/HTTP receiver decodes in the web process, so a body is bounded by what it would
cost before it is decoded: a 32 KB gzip of 32 MiB of empty objects (1.64 GB and 120 s of a
gunicorn worker in the probe; four at once killed it) answers 413 at once, as does a plain
body of too many objects; a body nested too deep answers 400. Real requests still pass."""
from __future__ import annotations

import gzip
import json
import resource
import time

import pytest

from accounts.models import ApiToken

pytestmark = pytest.mark.timeout(60)
MIB = 1024**2


@pytest.fixture
def token(alice) -> str:
    return ApiToken.issue(alice)[1]


def _post(client, token, body: bytes, gzipped: bool = False):
    extra = {"HTTP_CONTENT_ENCODING": "gzip"} if gzipped else {}
    start = time.monotonic()
    answer = client.post("/v1/traces", body, content_type="application/json",
                         HTTP_AUTHORIZATION=f"Token {token}", **extra)
    return answer, time.monotonic() - start


def test_a_gzip_of_32_mib_of_empty_objects_answers_413_at_once(client, token, no_worker):
    body = gzip.compress(b"[" + b"{}," * (32 * MIB // 3 - 1) + b"{}]", compresslevel=9)
    assert len(body) < 100_000
    peak_before = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    answer, seconds = _post(client, token, body, gzipped=True)
    grew_mib = (resource.getrusage(resource.RUSAGE_SELF).ru_maxrss - peak_before) / 1024
    assert answer.status_code == 413, answer.content
    assert "decompression" in answer.json()["message"]
    assert seconds < 2 and grew_mib < 100, (seconds, grew_mib)


def test_a_plain_body_of_too_many_objects_answers_413(client, token, no_worker, settings):
    settings.TRACEDOC_OTLP_MAX_OBJECTS = 10_000
    body = json.dumps({"resourceSpans": [{} for _ in range(20_000)]}).encode()
    answer, seconds = _post(client, token, body)
    assert answer.status_code == 413
    assert answer.json()["message"] == ("a JSON export request may hold at most 10,000 objects and arrays "
                                        "(TRACEDOC_OTLP_MAX_OBJECTS); this one holds 20,002: send fewer spans "
                                        "per request")
    assert seconds < 2


def test_brackets_inside_strings_are_not_counted_and_deep_nesting_answers_400(client, token, no_worker, settings):
    settings.TRACEDOC_OTLP_MAX_OBJECTS = 100
    quoted = {"resourceSpans": [{"resource": {"attributes": [
        {"key": "k", "value": {"stringValue": "{[" * 5000 + '\\"]}'}}]}}]}
    answer, _ = _post(client, token, json.dumps(quoted).encode())
    assert answer.status_code == 200, answer.content
    deep = b'{"resourceSpans": ' + b"[" * 80 + b"]" * 80 + b"}"
    answer, _ = _post(client, token, deep)
    assert answer.status_code == 400
    assert answer.json()["message"].endswith("nested deeper than 64 levels")
