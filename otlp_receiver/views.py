"""`POST /v1/traces`: the OTLP/HTTP trace endpoint, as an OpenTelemetry SDK or Collector
(`otlphttp` exporter) calls it, authenticated by `Authorization: Token <key>` sent as a header."""
from __future__ import annotations

import json

from django.conf import settings
from django.core.exceptions import ValidationError
from django.http import HttpRequest, HttpResponse
from django.views.decorators.csrf import csrf_exempt
from django.views.decorators.http import require_POST
from rest_framework import exceptions
from rest_framework.request import Request

from accounts.authentication import ApiTokenAuthentication
from accounts.models import ApiToken
from ingest.uploads import team_for_upload
from otlp_receiver import decode
from otlp_receiver.flush import flush_closed_windows, store
from otlp_receiver.grouping import split


def _answer(status: int, message: str, kind: str = decode.JSON) -> HttpResponse:
    # OTLP/HTTP failures carry a google.rpc.Status; its JSON form is {"code", "message"}
    if kind == decode.PROTOBUF:
        return HttpResponse(message.encode(), status=status, content_type="text/plain; charset=utf-8")
    return HttpResponse(json.dumps({"code": status, "message": message}), status=status, content_type=decode.JSON)


@csrf_exempt
@require_POST
def export_traces(request: HttpRequest) -> HttpResponse:
    kind = decode.media_type(request.content_type)
    if kind not in (decode.PROTOBUF, decode.JSON):
        return _answer(415, f"Content-Type must be {decode.PROTOBUF} or {decode.JSON}")
    try:
        auth = ApiTokenAuthentication().authenticate(Request(request))
    except exceptions.AuthenticationFailed as e:
        return _answer(401, str(e.detail), kind)
    if auth is None:
        return _answer(401, "send the API token as a header: Authorization: Token <key>", kind)
    user, token = auth
    if not token.allows(ApiToken.Scope.UPLOAD):
        return _answer(403, f"this API token's scope is {token.scope}: sending spans needs scope upload", kind)
    limit = settings.TRACEDOC_OTLP_MAX_REQUEST_BYTES
    declared = int(request.META.get("CONTENT_LENGTH") or 0)
    if declared > limit:
        return _answer(413, f"an export request may carry at most {limit:,} bytes", kind)
    body = request.read(limit + 1)  # not request.body: its 2.5 MB form cap is not ours
    if len(body) > limit:
        return _answer(413, f"an export request may carry at most {limit:,} bytes", kind)
    try:
        team = team_for_upload(user, request.headers.get("X-Tracedoc-Team") or None)
        encoding = request.headers.get("Content-Encoding", "").strip().lower()
        if encoding == "gzip":
            body = decode.gunzip(body, limit)
        elif encoding not in ("", "identity"):
            return _answer(415, f"Content-Encoding {encoding!r}: only gzip is accepted", kind)
        if kind == decode.JSON:
            decode.check_json_shape(body, settings.TRACEDOC_OTLP_MAX_OBJECTS)
        parts = split(decode.parse_request(body, kind), settings.TRACEDOC_OTLP_WINDOW_SECONDS)
    except decode.TooLarge as e:
        return _answer(413, str(e), kind)
    except decode.BadRequest as e:
        return _answer(400, str(e), kind)
    except ValidationError as e:
        return _answer(403, "; ".join(e.messages), kind)
    store(team, user, parts.groups)
    flush_closed_windows()
    return HttpResponse(decode.response_body(kind, parts.rejected, parts.reason), status=200, content_type=kind)
