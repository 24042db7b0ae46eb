"""The REST calls `tracedoc submit` makes, on the standard library alone (urllib), so that the
slim `tracedoc-client` distribution (clients/python/) installs with no dependency at all.

API (docs/api.md): `POST /api/v1/traces/?wait=S` (multipart `files`, `labels`, `name`, `team`),
`GET /api/v1/traces/{id}/`, `GET /api/v1/traces/{id}/report/`, header `Authorization: Token <key>`.
Error answers are RFC 9457 problem documents; their `detail` is what the user reads.
"""
from __future__ import annotations

import json
import urllib.error
import urllib.parse
import urllib.request
from importlib.metadata import PackageNotFoundError, version
from typing import BinaryIO

from agent.multipart import MultipartBody

READ_TIMEOUT_S = 120  # past the server's own wait, when asked to wait
ERROR_BODY_BYTES = 64 * 1024  # an error answer is read this far, no further


class ApiError(Exception):
    """A request that did not succeed: printed by the command, exit 2."""

    def __init__(self, message: str, status: int | None = None):
        super().__init__(message)
        self.status = status


def _client_version() -> str:
    for dist in ("tracedoc-client", "tracedoc"):
        try:
            return version(dist)
        except PackageNotFoundError:
            continue
    return "0+unknown"


class ApiClient:
    def __init__(self, server: str, token: str):
        self.server = server.rstrip("/")
        self.headers = {"Authorization": f"Token {token}", "Accept": "application/json",
                        "User-Agent": f"tracedoc-client/{_client_version()}"}

    def upload(self, files: list[tuple[str, BinaryIO]], labels: dict[str, str] | None = None,
               wait: float = 0, name: str = "", team: str = "") -> dict:
        """POST the files as one trace, streamed; with `wait`, the server answers once done (or after `wait` s)."""
        fields = {k: v for k, v in (("labels", json.dumps(labels) if labels else ""), ("name", name),
                                    ("team", team)) if v}
        body = MultipartBody(fields, files)
        # the length given, urllib sends the body as it reads it (else it would send it chunked)
        headers = {"Content-Type": body.content_type, "Content-Length": str(len(body))}
        query = f"?{urllib.parse.urlencode({'wait': int(wait)})}" if wait else ""
        return self._call("POST", f"/api/v1/traces/{query}", data=body, headers=headers,
                          timeout=READ_TIMEOUT_S + wait)

    def trace(self, trace_id) -> dict:
        return self._call("GET", f"/api/v1/traces/{trace_id}/")

    def report(self, trace_id) -> dict:
        return self._call("GET", f"/api/v1/traces/{trace_id}/report/")

    def _call(self, method: str, path: str, data=None, headers: dict | None = None,
              timeout: float = READ_TIMEOUT_S) -> dict:
        url = self.server + path
        request = urllib.request.Request(url, data=data, method=method, headers={**self.headers, **(headers or {})})
        try:
            with urllib.request.urlopen(request, timeout=timeout) as resp:
                text = resp.read()
        except urllib.error.HTTPError as e:
            with e:
                raise _error(method, url, e.code, e.read(ERROR_BODY_BYTES)) from None
        except (urllib.error.URLError, OSError) as e:
            raise ApiError(f"cannot reach {self.server}: {getattr(e, 'reason', e)}") from None
        try:
            return json.loads(text)
        except ValueError:
            raise ApiError(f"{method} {url}: the answer is not JSON (is {self.server} a tracedoc server?)") from None


def _error(method: str, url: str, status: int, body: bytes) -> ApiError:
    try:
        answer = json.loads(body)
        detail = answer.get("detail", answer) if isinstance(answer, dict) else answer
    except ValueError:
        detail = body[:300].decode(errors="replace").strip()
    if status in (401, 403):
        return ApiError(f"the server refused the token (HTTP {status}: {detail}); check --token or "
                        "TRACEDOC_TOKEN, and that the token's user belongs to a team", status)
    return ApiError(f"{method} {url}: HTTP {status}: {detail}", status)
