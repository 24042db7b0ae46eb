"""Errors of the API as RFC 9457 problem documents (`application/problem+json`): `type` (a
stable URI a client can switch on), `title`, `status`, `detail`, plus members of an app's own
(the trace, its state, the file that failed and why; each invalid parameter and why).

Every error answer of `/api/` is one: every exception DRF turns into an answer
(`exception_handler`: 400, 401, 403, 404, 405, 413, 429, ...; a Django ValidationError a model
or helper raised is a 400 too), the 404/400 Django answers before a view runs and an internal
error (500) (`not_found`, `bad_request`, `server_error`, wired in tracedoc/urls.py), and the
answers an app makes with `problem()` (ingest.api.problems: a failed or unfinished trace, an
upload too large). Below every app: it knows no model."""
from __future__ import annotations

from http import HTTPStatus

from django.core.exceptions import ValidationError as DjangoValidationError
from django.http import JsonResponse
from django.views import defaults
from rest_framework import exceptions, serializers
from rest_framework.response import Response
from rest_framework.views import exception_handler as drf_exception_handler

PROBLEM_CONTENT_TYPE = "application/problem+json"
# tag URIs (RFC 4151): identifiers a client compares, not pages to fetch (RFC 9457 3.1.1)
PROBLEM_TYPE_BASE = "tag:tracedoc,2025:problem:"
API_PREFIX = "/api/"


class FileErrorSerializer(serializers.Serializer):
    file = serializers.CharField()
    reason = serializers.CharField()


class InvalidParamSerializer(serializers.Serializer):
    name = serializers.CharField(help_text="the field or query parameter ('non_field_errors' for the whole body)")
    reason = serializers.CharField()


class ProblemSerializer(serializers.Serializer):
    """RFC 9457 problem details; `trace`, `state`, `web_url` and `errors` when about a trace,
    `invalid_params` for a request that did not validate, quota figures for a refused upload."""
    type = serializers.CharField(help_text=f"{PROBLEM_TYPE_BASE}<kind>, e.g. trace-failed, trace-not-done, "
                                           "invalid, not-found, throttled, upload-too-large")
    title = serializers.CharField()
    status = serializers.IntegerField()
    detail = serializers.CharField()
    instance = serializers.CharField(required=False, help_text="the URL of the trace the problem is about")
    trace = serializers.IntegerField(required=False)
    state = serializers.CharField(required=False)
    web_url = serializers.URLField(required=False)
    errors = FileErrorSerializer(many=True, required=False, help_text="each file that failed and why")
    invalid_params = InvalidParamSerializer(many=True, required=False, help_text="400: each invalid input and why")
    quota_bytes = serializers.IntegerField(required=False)
    used_bytes = serializers.IntegerField(required=False)
    upload_bytes = serializers.IntegerField(required=False)
    retry_after_s = serializers.IntegerField(required=False, help_text="429: seconds before trying again")


def problem(http_status: int, kind: str, title: str, detail: str, headers: dict | None = None,
            **members) -> Response:
    return Response(_body(http_status, kind, title, detail, **members), status=http_status,
                    content_type=PROBLEM_CONTENT_TYPE, headers=headers)


def _body(http_status: int, kind: str, title: str, detail: str, **members) -> dict:
    return {"type": PROBLEM_TYPE_BASE + kind, "title": title, "status": http_status, "detail": detail, **members}


def exception_handler(exc, context) -> Response | None:
    """DRF's EXCEPTION_HANDLER: DRF's own answer (status, headers such as Retry-After and
    WWW-Authenticate kept) with its body as a problem document. None (a 500) goes on to
    Django's handler500 (`server_error`)."""
    if isinstance(exc, DjangoValidationError):  # DRF answers only its own ValidationError
        exc = exceptions.ValidationError(exc.message_dict if hasattr(exc, "error_dict") else exc.messages)
    response = drf_exception_handler(exc, context)
    if response is None:
        return None
    data = response.data
    members: dict = {}
    if isinstance(exc, exceptions.ValidationError):
        members["invalid_params"] = list(_invalid_params(data))
        detail = "; ".join(f"{p['name']}: {p['reason']}" for p in members["invalid_params"]) or "invalid request"
    elif isinstance(data, dict) and "detail" in data:
        detail = str(data["detail"])
        members = {k: v for k, v in data.items() if k != "detail"}
    else:
        detail = str(data)
    if isinstance(exc, exceptions.Throttled) and exc.wait is not None:
        members["retry_after_s"] = int(exc.wait)
    kind = _kind(exc, response.status_code)
    response.data = _body(response.status_code, kind, _title(response.status_code), detail, **members)
    response.content_type = PROBLEM_CONTENT_TYPE
    return response


def _kind(exc, http_status: int) -> str:
    codes = exc.get_codes() if isinstance(exc, exceptions.APIException) else None
    if isinstance(exc, exceptions.ValidationError):
        return "invalid"
    if isinstance(codes, str):
        return codes.replace("_", "-")  # not_found, throttled, not_authenticated, permission_denied...
    return HTTPStatus(http_status).phrase.lower().replace(" ", "-")


def _title(http_status: int) -> str:
    return HTTPStatus(http_status).phrase


def _invalid_params(data, prefix: str = ""):
    """DRF's nested validation errors ({field: [msg]} / [msg] / nested, and a Django form's
    {field: [{message, code}]}) as flat (name, reason) pairs."""
    if _is_message(data):
        yield {"name": prefix or "non_field_errors", "reason": str(data["message"])}
    elif isinstance(data, dict):
        for key, value in data.items():
            yield from _invalid_params(value, f"{prefix}.{key}" if prefix else str(key))
    elif isinstance(data, list) and all(isinstance(v, str) or _is_message(v) for v in data):
        for reason in data:  # the messages of one field
            yield from _invalid_params(reason, prefix)
    elif isinstance(data, list):
        for i, value in enumerate(data):
            yield from _invalid_params(value, f"{prefix}[{i}]")
    else:
        yield {"name": prefix or "non_field_errors", "reason": str(data)}


def _is_message(data) -> bool:
    return isinstance(data, dict) and "message" in data and set(data) <= {"message", "code"}


def not_found(request, exception=None):
    """handler404: an API URL that names nothing answers a problem document; pages keep Django's page."""
    if not request.path.startswith(API_PREFIX):
        return defaults.page_not_found(request, exception)
    return _django_problem(404, "not-found", f"no API resource at {request.path}")


def bad_request(request, exception=None):
    """handler400: a request Django refused before any view (e.g. a body past its size limits)."""
    if not request.path.startswith(API_PREFIX):
        return defaults.bad_request(request, exception)
    return _django_problem(400, "bad-request", str(exception) if exception else "bad request")


def server_error(request):
    """handler500: under /api/ an internal error answers a problem document, not an HTML page;
    what failed is in the server's log, not in the answer."""
    if not request.path.startswith(API_PREFIX):
        return defaults.server_error(request)
    return _django_problem(500, "internal-error", "the server failed to answer this request; the error is "
                                                  "logged on the server, please report it with the time it happened")


def _django_problem(http_status: int, kind: str, detail: str) -> JsonResponse:
    return JsonResponse(_body(http_status, kind, _title(http_status), detail), status=http_status,
                        content_type=PROBLEM_CONTENT_TYPE)
