"""The API's problem documents about traces and uploads (the generic ones and the document's
shape are `problems`): a trace whose diagnosis failed or is not done, an upload too large."""
from __future__ import annotations

from django.urls import reverse
from rest_framework import status
from rest_framework.response import Response

from ingest.models import Trace
from problems import problem

TRACE_FAILED = "trace-failed"
TRACE_NOT_DONE = "trace-not-done"
UPLOAD_TOO_LARGE = "upload-too-large"
QUOTA_EXCEEDED = "quota-exceeded"


def upload_too_large(limit: int) -> Response:
    return problem(status.HTTP_413_REQUEST_ENTITY_TOO_LARGE, UPLOAD_TOO_LARGE, "The upload is too large",
                   f"upload larger than {limit:,} bytes")


def quota_exceeded(detail: str, quota: int, used: int, incoming: int) -> Response:
    return problem(status.HTTP_413_REQUEST_ENTITY_TOO_LARGE, QUOTA_EXCEEDED, "The team's storage quota is full",
                   detail, quota_bytes=quota, used_bytes=used, upload_bytes=incoming)


def trace_failed(trace: Trace, request) -> Response:
    """The diagnosis of `trace` failed: which files and why. 422: the upload was understood
    but its content could not be diagnosed."""
    errors = [{"file": a.name, "reason": a.error} for a in trace.artifacts.all() if a.error]
    detail = trace.error or "; ".join(f"{e['file']}: {e['reason']}" for e in errors) or "no reason recorded"
    return problem(status.HTTP_422_UNPROCESSABLE_ENTITY, TRACE_FAILED, "The trace could not be diagnosed",
                   detail, **_about(trace, request), errors=errors)


def trace_not_done(trace: Trace, request) -> Response:
    return problem(status.HTTP_409_CONFLICT, TRACE_NOT_DONE, "The trace is not diagnosed yet",
                   f"the trace is {trace.state} ({trace.progress_percent}%); its report exists once it is done",
                   **_about(trace, request))


def _about(trace: Trace, request) -> dict:
    return {"instance": request.build_absolute_uri(reverse("api:trace-detail", args=[trace.pk])),
            "trace": trace.pk, "state": trace.state,
            "web_url": request.build_absolute_uri(reverse("ingest:trace-detail", args=[trace.pk]))}
