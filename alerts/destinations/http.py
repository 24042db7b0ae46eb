"""The one HTTP POST every web destination makes: JSON, a timeout, no redirects followed
(a destination URL is the team's, so a redirect could lead anywhere), never to an internal
address (alerts.url_guard), 2xx or an error."""
from __future__ import annotations

import json

import requests

from alerts.redact import redact
from alerts.url_guard import UnsafeDestination, check_url, guarded_session

TIMEOUT_S = 10


class DeliveryError(Exception):
    """`final`: trying again cannot help (the URL is refused), so no retry."""

    def __init__(self, message: str, status: int | None = None, final: bool = False):
        super().__init__(message)
        self.status, self.final = status, final


def body_of(payload) -> bytes:
    return json.dumps(payload, separators=(",", ":"), sort_keys=True).encode()


def post(url: str, body: bytes, headers: dict[str, str] | None = None) -> int:
    try:
        check_url(url)  # every address the name has now; the session checks the one connected to
        with guarded_session() as session:
            response = session.post(url, data=body, headers={"Content-Type": "application/json", **(headers or {})},
                                    timeout=TIMEOUT_S, allow_redirects=False)
    except UnsafeDestination as e:
        raise DeliveryError(redact(f"refused: {e}", url), final=True) from None
    except requests.RequestException as e:  # its text quotes the URL, the key of a Slack webhook
        raise DeliveryError(redact(f"{type(e).__name__}: {e}", url)) from None
    if not 200 <= response.status_code < 300:
        raise DeliveryError(redact(f"HTTP {response.status_code}: {response.text[:200]}", url),
                            status=response.status_code)
    return response.status_code
