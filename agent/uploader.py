"""Talking to the tracedoc server: the REST client (used by the agent and `tracedoc submit`)
and the shipping loop that empties the spool's outbox with retries and backoff.

API (docs/api.md): `POST /api/v1/traces/?wait=S` (multipart `files`, `labels` JSON,
`name`, `team`; the header `Idempotency-Key` makes a bundle sent twice one trace),
`GET /api/v1/traces/{id}/`, `GET /api/v1/traces/{id}/report/`, `POST /api/v1/hosts/heartbeat/`,
with the header `Authorization: Token <key>`.
"""
from __future__ import annotations

import json
import logging
import queue
import random
import time
from collections import deque
from typing import BinaryIO, Callable

import requests

from agent import __version__
from agent.multipart import MultipartBody
from agent.spool import Bundle, Spool

log = logging.getLogger(__name__)

CONNECT_TIMEOUT_S = 10
READ_TIMEOUT_S = 120  # past the server's own wait, when asked to wait
RETRYABLE_STATUS = {408, 425, 429, 500, 502, 503, 504}
SHIPPED_KEPT = 20  # answers kept in memory (a long `run` ships a bundle a minute)
_NO_JOB = object()  # the wait for a job timed out: time to retry shipping


class ApiError(Exception):
    """A request that did not succeed; `retryable` says whether trying later may help."""

    def __init__(self, message: str, status: int | None = None, retryable: bool = False):
        super().__init__(message)
        self.status, self.retryable = status, retryable


class ApiClient:
    def __init__(self, server: str, token: str, session: requests.Session | None = None):
        self.server = server.rstrip("/")
        self.session = session or requests.Session()
        self.session.headers.update({"Authorization": f"Token {token}",
                                     "User-Agent": f"tracedoc-agent/{__version__}"})

    def upload(self, files: list[tuple[str, BinaryIO]], labels: dict[str, str] | None = None,
               wait: float = 0, name: str = "", team: str = "", idempotency_key: str = "") -> dict:
        """POST the files as one trace; with `wait`, the server answers once done (or after `wait` s).
        With `idempotency_key`, sending the same files again answers with the trace they made."""
        fields = {k: v for k, v in (("labels", json.dumps(labels) if labels else ""), ("name", name),
                                    ("team", team)) if v}
        body = MultipartBody(fields, files)
        headers = {"Content-Type": body.content_type}
        if idempotency_key:
            headers["Idempotency-Key"] = idempotency_key
        return self._call("POST", "/api/v1/traces/", params={"wait": int(wait)} if wait else None,
                          data=body, headers=headers, timeout=(CONNECT_TIMEOUT_S, READ_TIMEOUT_S + wait))

    def heartbeat(self, beat: dict) -> dict:
        """Say the agent is alive; the answer lists the capture requests to run."""
        return self._call("POST", "/api/v1/hosts/heartbeat/", json=beat, timeout=(CONNECT_TIMEOUT_S, 30))

    def trace(self, trace_id) -> dict:
        return self._call("GET", f"/api/v1/traces/{trace_id}/")

    def report(self, trace_id) -> dict:
        return self._call("GET", f"/api/v1/traces/{trace_id}/report/")

    def _call(self, method: str, path: str, **kwargs) -> dict:
        url = self.server + path
        kwargs.setdefault("timeout", (CONNECT_TIMEOUT_S, READ_TIMEOUT_S))
        try:
            resp = self.session.request(method, url, **kwargs)
        except requests.RequestException as e:
            raise ApiError(f"cannot reach {self.server}: {e}", retryable=True) from None
        if resp.ok:
            try:
                return resp.json()
            except ValueError:
                raise ApiError(f"{method} {url}: the answer is not JSON (is {self.server} a tracedoc server?)",
                               resp.status_code) from None
        raise _error(method, url, resp)


def _error(method: str, url: str, resp: requests.Response) -> ApiError:
    try:
        detail = resp.json()
        detail = detail.get("detail", detail) if isinstance(detail, dict) else detail
    except ValueError:
        detail = resp.text[:300].strip()
    status = resp.status_code
    if status in (401, 403):
        return ApiError(f"the server refused the token (HTTP {status}: {detail}); check --token or "
                        "TRACEDOC_TOKEN, and that the token's user belongs to a team", status)
    return ApiError(f"{method} {url}: HTTP {status}: {detail}", status, retryable=status in RETRYABLE_STATUS)


class Shipper:
    """Ships the spool's bundles oldest first. On a failure worth retrying (network, 5xx,
    429, refused token) the bundle stays and the next try waits longer: base * 2^failures,
    at most `backoff_max`, jittered down by up to half so many agents don't retry in step.
    A bundle the server refuses for good (bad request, too large) is moved to rejected/."""

    def __init__(self, spool: Spool, client: ApiClient, backoff_base: float = 2.0,
                 backoff_max: float = 300.0, jitter: Callable[[], float] = random.random):
        self.spool, self.client = spool, client
        self.backoff_base, self.backoff_max, self.jitter = backoff_base, backoff_max, jitter
        self.failures = 0
        self.shipped: deque[dict] = deque(maxlen=SHIPPED_KEPT)  # the server's latest answers, newest last
        self.jobs: queue.SimpleQueue = queue.SimpleQueue()

    def ship_pending(self) -> bool:
        """Try every bundle once, oldest first; True when the outbox is empty afterwards."""
        for bundle in self.spool.bundles():
            try:
                self._ship(bundle)
            except ApiError as e:
                if e.retryable or e.status in (401, 403):
                    self.failures += 1
                    log.warning("shipping %s failed (try %d): %s; it stays in the spool",
                                bundle.path.name, self.failures, e)
                    return False
                log.error("the server refused %s for good: %s; moved to %s", bundle.path.name, e,
                          self.spool.rejected)
                self.spool.reject(bundle, str(e))
            except FileNotFoundError:
                continue  # dropped by the spool's bound meanwhile
            else:
                self.failures = 0
        return not self.spool.bundles()

    def _ship(self, bundle: Bundle) -> None:
        meta, size = bundle.meta, bundle.size
        key = bundle.key
        with open(bundle.path, "rb") as f:
            answer = self.client.upload([(bundle.path.name, f)], meta["labels"], name=meta.get("name", ""),
                                        idempotency_key=key)
        self.spool.remove(bundle)
        self.shipped.append(answer)
        log.info("shipped %s (%s bytes): trace %s %s", bundle.path.name, f"{size:,}",
                 answer.get("id"), answer.get("web_url", ""))

    def next_delay(self) -> float:
        full = min(self.backoff_max, self.backoff_base * 2 ** (self.failures - 1))
        return full * (0.5 + self.jitter() / 2)

    def submit(self, job: Callable[[], object]) -> None:
        """Run `job` (making a bundle, say) on the shipping thread, then ship."""
        self.jobs.put(job)

    def close(self) -> None:
        """End `run` once the jobs queued so far are done."""
        self.jobs.put(None)

    def run(self) -> None:
        """Run the submitted jobs and ship, until close(). Bundling and compressing happen here,
        off the sampling loop. Idle, the thread sleeps until the next job: no periodic wake-up.
        After a failure the outbox is tried again once its backoff has passed (a new job does
        not cut the backoff short)."""
        retry_at: float | None = 0.0  # ship what earlier runs left, at once
        while True:
            timeout = None if retry_at is None else max(0.0, retry_at - time.monotonic())
            try:
                job = self.jobs.get(timeout=timeout)
            except queue.Empty:
                job = _NO_JOB
            if job is None:
                return
            if job is not _NO_JOB:
                try:
                    job()
                except Exception as e:  # a full disk must not end shipping
                    log.error("bundling failed: %s", e)
            if retry_at is None or time.monotonic() >= retry_at:
                retry_at = None if self.ship_pending() else time.monotonic() + self.next_delay()

    def ship_until(self, deadline: float) -> bool:
        """Ship with retries until the outbox is empty or time.monotonic() passes `deadline`."""
        while True:
            if self.ship_pending():
                return True
            delay = self.next_delay()
            if time.monotonic() + delay > deadline:
                return False
            time.sleep(delay)

