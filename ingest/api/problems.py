"""Errors of the traces API as RFC 9457 problem documents (`application/problem+json`):
`type` (a stable URI a client can switch on), `title`, `status`, `detail`, plus members of
our own (the trace, its state, the file that failed and why)."""
from __future__ import annotations

from django.urls import reverse
from rest_framework import serializers, status
from rest_framework.response import Response

from ingest.models import Trace

PROBLEM_CONTENT_TYPE = "application/problem+json"
# tag URIs (RFC 4151): identifiers a client compares, not pages to fetch (RFC 9457 3.1.1)
PROBLEM_TYPE_BASE = "tag:tracedoc,2025:problem:"
TRACE_FAILED = "trace-failed"
TRACE_NOT_DONE = "trace-not-done"


class FileErrorSerializer(serializers.Serializer):
    file = serializers.CharField()
    reason = serializers.CharField()


class ProblemSerializer(serializers.Serializer):
    """RFC 9457 problem details; `trace`, `state`, `web_url` and `errors` when about a trace."""
    type = serializers.CharField(help_text=f"{PROBLEM_TYPE_BASE}trace-failed or {PROBLEM_TYPE_BASE}trace-not-done")
    title = serializers.CharField()
    status = serializers.IntegerField()
    detail = serializers.CharField()
    instance = serializers.CharField(required=False, help_text="the URL of the trace the problem is about")
    trace = serializers.IntegerField(required=False)
    state = serializers.CharField(required=False)
    web_url = serializers.URLField(required=False)
    errors = FileErrorSerializer(many=True, required=False, help_text="each file that failed and why")


def problem(http_status: int, kind: str, title: str, detail: str, **members) -> Response:
    body = {"type": PROBLEM_TYPE_BASE + kind, "title": title, "status": http_status, "detail": detail, **members}
    return Response(body, status=http_status, content_type=PROBLEM_CONTENT_TYPE)


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
