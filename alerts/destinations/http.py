"""The one HTTP POST every web destination makes: JSON, a timeout, no redirects followed
(a destination URL is the team's, so a redirect could lead anywhere), 2xx or an error."""
from __future__ import annotations

import json

import requests

TIMEOUT_S = 10


class DeliveryError(Exception):
    def __init__(self, message: str, status: int | None = None):
        super().__init__(message)
        self.status = status


def body_of(payload) -> bytes:
    return json.dumps(payload, separators=(",", ":"), sort_keys=True).encode()


def post(url: str, body: bytes, headers: dict[str, str] | None = None) -> int:
    try:
        response = requests.post(url, data=body, headers={"Content-Type": "application/json", **(headers or {})},
                                 timeout=TIMEOUT_S, allow_redirects=False)
    except requests.RequestException as e:
        raise DeliveryError(f"{type(e).__name__}: {e}") from None
    if not 200 <= response.status_code < 300:
        raise DeliveryError(f"HTTP {response.status_code}: {response.text[:200]}", status=response.status_code)
    return response.status_code
